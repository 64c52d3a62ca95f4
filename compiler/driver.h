// The compiler's entry points for tools: load a file, find its host interface, parse and check,
// format. The command-line programs in cli/ only parse flags and print what these return.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ast.h"
#include "compiler/checker.h"
#include "compiler/limits.h"
#include "runtime/diagnostics.h"
#include "runtime/policy.h"
#include "runtime/source.h"

namespace remit {

// An I/O problem is not a diagnostic: it is a usage error (exit 2) with a plain message.
struct IoError {
    std::string message;
};

// Reads `path` whole. A file over `maxBytes` is not read; the returned source then holds only its
// first `maxBytes + 1` bytes, which the lexer rejects with E0003.
std::optional<IoError> readSource(const std::string& path, size_t maxBytes, std::string& text);
// Writes `text` to `path` atomically (a temporary file renamed over the target).
std::optional<IoError> writeFileAtomically(const std::string& path, const std::string& text);

// host.rmti next to the program, then in each parent directory (docs/language.md "Files").
std::optional<std::string> findHostInterface(const std::string& programPath);
// policy.toml next to the program (only there), as a path relative to the program's.
std::optional<std::string> findPolicy(const std::string& programPath);

// Expands directories into the .rmt files below them (sorted; hidden folders and .venv skipped).
std::vector<std::string> expandProgramPaths(const std::vector<std::string>& paths, std::vector<IoError>& errors);

struct CheckOptions {
    std::optional<std::string> hostPath;    // --host; otherwise discovered
    std::optional<std::string> policyPath;  // --policy
    bool checkPolicy = true;                // false: no policy is looked for (build, dis, run --allow-all)
    bool strictFlows = false;               // --strict-flows; a policy's [flows] strict = true also sets it
    FrontendLimits limits;
    std::function<bool()> interrupted = {};  // CheckerOptions::interrupted (serve's deadline and abort)
    // Parse the host interface even when the program does not parse, so that one answer names the
    // problems of both (serve, whose host writes the one and a model the other). The command line
    // stops at the program's errors, as the prototype does.
    bool hostDespiteProgramErrors = false;
    bool recordFacts = false;  // CheckerOptions::recordFacts (the language server's hover and code lenses)
};

// Everything `check` learns about one program file. Sources are kept so diagnostics can be
// rendered with their excerpts.
struct CheckOutcome {
    std::string file;
    DiagnosticList diags;
    std::map<std::string, std::unique_ptr<SourceFile>> sources;  // by file name as given
    std::unique_ptr<ast::Program> program;
    std::unique_ptr<ast::HostInterface> host;
    std::optional<std::string> hostPath;
    std::optional<std::string> policyPath;   // the policy that was checked, as given or discovered
    std::optional<CheckResult> checked;      // present once the program parsed and the host resolved
    std::optional<Policy> policy;
    std::optional<IoError> ioError;  // a file could not be read at all

    bool ok() const { return !ioError && !diags.hasErrors(); }
    const SourceFile* sourceFor(const std::string& name) const;
};

// Where a check gets the host interface and the policy, asked for only once the program parses:
// each sets `name` to the file's name (nullopt: there is none — E0002 for a host, no policy) and
// `text` to its contents, or returns an I/O problem.
struct SourceProvider {
    using Read = std::function<std::optional<IoError>(std::optional<std::string>& name, std::string& text)>;
    Read host;
    Read policy;  // may be empty: no policy
};

// The one check of a program: parse it, get and resolve the host interface, read the policy, check
// (strict flows when asked or when the policy says so), compare with the policy. Every front end
// goes through it: files (checkProgramFile), and texts in memory (serve, MCP, the embedding API).
CheckOutcome checkSources(const std::string& programName, std::string programText, const SourceProvider& provider,
                          const CheckOptions& options);
// A provider of texts in memory (no policy when `policyName` is nullopt).
SourceProvider textSources(std::string hostName, std::string hostText, std::optional<std::string> policyName = {},
                           std::string policyText = {});
// checkSources on files: the program at `path`, `--host` or the host.rmti found next to it (or in
// a parent directory), `--policy` or the policy.toml next to it.
CheckOutcome checkProgramFile(const std::string& path, const CheckOptions& options);

// Parses and formats one .rmt or .rmti file. On a parse error `formatted` is empty and the
// diagnostics say why.
struct FormatOutcome {
    std::unique_ptr<SourceFile> source;
    DiagnosticList diags;
    std::string formatted;
    std::optional<IoError> ioError;
};
FormatOutcome formatFile(const std::string& path, const FrontendLimits& limits = {});
// Formats text in memory (`isHost` picks the .rmti grammar).
FormatOutcome formatText(std::string name, std::string text, bool isHost, const FrontendLimits& limits = {});

bool isHostInterfacePath(const std::string& path);

}  // namespace remit
