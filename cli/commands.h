// The commands shared by remitc, remitvm and the prototype-compatible `remit` front end. Each
// takes its arguments (after the command name) and returns the process exit code of
// docs/compatibility.md ("Exit codes"). Only flag parsing and printing live here; the work is in
// the libraries (compiler/, vm/, broker/).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/diagnostics.h"
#include "runtime/json_text.h"

namespace remit {
struct CheckOutcome;
class LoadedProgram;
}  // namespace remit

namespace remit::cli {

enum Exit : int { kOk = 0, kFailure = 1, kUsage = 2, kPaused = 3, kWidened = 4 };

struct Args {
    std::vector<std::string> positional;
    std::vector<std::pair<std::string, std::string>> options;  // --name value (value empty for a switch)

    bool has(std::string_view name) const;
    const std::string* value(std::string_view name) const;
};

// Parses `argv` against the allowed switches (no value) and options (take a value). On an unknown
// flag or a missing value prints an error and returns false.
bool parseArgs(std::string_view tool, const std::vector<std::string>& argv, const std::vector<std::string>& switches,
               const std::vector<std::string>& valued, Args& out);

// JSON as the prototype prints results and envelopes: json.dumps(value, indent=2, ensure_ascii=False).
// An ordered document keeps its members' order (results, envelopes); a sorted nlohmann::json
// converts to one in its own (sorted) order.
std::string prettyJson(const Json& value);

// The state directory: --state-dir, else `.remit` in the current directory.
std::filesystem::path stateDirOf(const Args& args);
// The state flags in effect, as a follow-up command printed for the user must repeat them
// (" --state-dir D", quoted for the shell when needed; empty for the default).
std::string stateFlags(const Args& args);
// RUN is a run id (its trace under the state directory) or a trace path. Empty, with a message
// printed, when there is no such trace.
std::string tracePathFor(std::string_view tool, const Args& args, const std::string& run);

// Prints diagnostics on stderr with renderDiagnostics, each with its source excerpt when
// `outcome` holds the file; `options` may cap how many are printed in full.
void printDiagnostics(const DiagnosticList& diags, const CheckOutcome* outcome, const RenderOptions& options = {});
// Compiles a checked program to bytecode; a bytecode limit (E0003) is added to `diags`.
std::shared_ptr<const LoadedProgram> buildChecked(const CheckOutcome& outcome, DiagnosticList& diags);
// The same, printing the E0003 like any diagnostic and setting `exit` to 1.
std::shared_ptr<const LoadedProgram> compileChecked(const CheckOutcome& outcome, int& exit);

// Reads stdin to its end one line at a time (without the newline; the last line may lack one) and
// passes each to `onLine`; a line longer than `maxBytes` is dropped as it streams in (never held
// in memory) and reported by `onOverlong` instead. For the JSON-lines servers (serve, mcp).
void readLines(size_t maxBytes, const std::function<void(std::string_view)>& onLine,
               const std::function<void()>& onOverlong);

using Command = int (*)(std::string_view tool, const std::vector<std::string>& argv);

// The whole main() of a tool: dispatches argv[1] to one of `commands` (by name), prints `usage` for
// -h/--help or no command, and turns an escaped exception into a fixed message (no exception text,
// which could carry host paths) with exit 1.
int runTool(std::string_view tool, std::string_view usage,
            const std::vector<std::pair<std::string_view, Command>>& commands, int argc, char** argv);

int checkCommand(std::string_view tool, const std::vector<std::string>& argv);
int fmtCommand(std::string_view tool, const std::vector<std::string>& argv);
int manifestCommand(std::string_view tool, const std::vector<std::string>& argv);
int diffCommand(std::string_view tool, const std::vector<std::string>& argv);
// cli/run_commands.cpp
int buildCommand(std::string_view tool, const std::vector<std::string>& argv);
int disCommand(std::string_view tool, const std::vector<std::string>& argv);
int keygenCommand(std::string_view tool, const std::vector<std::string>& argv);
int runCommand(std::string_view tool, const std::vector<std::string>& argv);
// cli/broker_commands.cpp
int traceCommand(std::string_view tool, const std::vector<std::string>& argv);
int approvalsCommand(std::string_view tool, const std::vector<std::string>& argv);
int approveCommand(std::string_view tool, const std::vector<std::string>& argv);
// cli/run_commands.cpp: re-executions of a recorded run
int resumeCommand(std::string_view tool, const std::vector<std::string>& argv);
int replayCommand(std::string_view tool, const std::vector<std::string>& argv);
// cli/test_command.cpp
int testCommand(std::string_view tool, const std::vector<std::string>& argv);
// cli/serve_command.cpp
int serveCommand(std::string_view tool, const std::vector<std::string>& argv);
// cli/mcp_command.cpp: the MCP server over stdio (docs/mcp.md)
int mcpCommand(std::string_view tool, const std::vector<std::string>& argv);
// cli/inbox_http.cpp: the operators' web inbox (docs/operators.md)
int inboxCommand(std::string_view tool, const std::vector<std::string>& argv);
// `manifest PROG.rbc`: the manifest stored in a verified artifact.
int bytecodeManifest(std::string_view tool, const std::string& path);

}  // namespace remit::cli
