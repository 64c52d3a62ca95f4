// The command lines of remitc, remitvm and the prototype-compatible `remit`, declared as data, and
// the commands they run. Each command is a handler that gets its parsed arguments and returns the
// process exit code of docs/compatibility.md ("Exit codes"). Only flag parsing and printing live in
// cli/; the work is in the libraries (compiler/, vm/, broker/, session/).
//
// ONE TABLE: cli/command_table.cpp declares every command of the three tools — its name, operands,
// one-line summary, flags (each with its value placeholder and one line of help), handler and
// subcommands — and each tool's list of commands. Everything else is generated from it, so the
// help cannot drift from what the parser accepts:
//   - the parser (runTool → parseCommandLine): a command's handler only ever sees declared flags;
//   - `TOOL --help`, `TOOL COMMAND --help` (and `TOOL COMMAND SUB --help`);
//   - the test comparing every command's --help with what its parser accepts (tests/e2e/test_cli_help.py).
//
// To add a flag to a command: add a Flag to its `flags` in cli/command_table.cpp and read it in the
// handler with args.has("--flag") (a switch), args.value("--flag") (a value; the last one given
// wins) or args.values("--flag") (a repeatable flag: every value, in order).
//
//     Flag{"--json", "", "print the result as JSON on stdout"}                  a switch
//     Flag{"--host", "H", "host interface (.rmti); default: the nearest host.rmti"}
//     Flag{"--input", "NAME=VALUE", "one of main's inputs"}.alias("-i").repeatable()
//     Flag{"--approvals", "client|operator", "who approves paused calls"}       lowercase words joined
//                                           by | are the only values accepted (and completed)
//     Flag{"--out", "DIR", "…"}.completes(Complete::Dirs)                      a directory (never "")
//     Flag{"--max-steps", "N", "…"}.completes(Complete::Nothing)               not a path
//
// To add a command: write `int fooCommand(std::string_view tool, Args& args)` (declare it at the
// end of this file), add a `Command` to cli/command_table.cpp, and list it in the tools that offer
// it. A command with subcommands (`approvals list|show|approve|deny`) has `subcommands`, each a
// Command with its own flags and handler, and no handler of its own. Then add the command line to
// docs/compatibility.md ("Command lines"); the help test checks that every flag listed there is one
// the parser accepts.
//
// Every command also accepts the common flags (commonFlags(): -h/--help, --color WHEN); every tool accepts
// --version and --help before a command.
#pragma once

#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "broker/trace.h"
#include "runtime/diagnostics.h"
#include "runtime/json_text.h"

namespace remit {
struct CheckOutcome;
struct HostDraft;
struct CheckOptions;
struct AuthorityDiff;
class LoadedProgram;
class Store;
}  // namespace remit

namespace remit::cli {

enum Exit : int { kOk = 0, kFailure = 1, kUsage = 2, kPaused = 3, kWidened = 4 };

// What a flag's value is, for shell completion: a path (the default), a directory (which the parser
// also refuses empty) or neither. A placeholder of lowercase words joined by `|` completes those
// words, whatever this says.
enum class Complete { Files, Dirs, Nothing };

// The words of a placeholder made only of lowercase words joined by `|` ("client|operator",
// "bash|zsh|fish"); empty for any other ("PROG.rmt|PROG.rbc", "N").
std::vector<std::string_view> wordChoices(std::string_view placeholder);

// One flag of a command. `name` is its long spelling ("--host"), or a short one ("-o") for a flag
// without a long form; `alias` is another spelling of the same flag ("-i" for "--input"), which
// Args records under `name`.
struct Flag {
    std::string_view name;
    std::string_view value;  // its value's placeholder in help ("H", "N", "auto|always|never"); "" for a switch
    std::string_view help;   // one line
    std::string_view aliasName = {};
    bool many = false;                  // may be given several times (Args::values)
    Complete complete = Complete::Files;

    constexpr Flag alias(std::string_view other) const { Flag f = *this; f.aliasName = other; return f; }
    constexpr Flag repeatable() const { Flag f = *this; f.many = true; return f; }
    constexpr Flag completes(Complete what) const { Flag f = *this; f.complete = what; return f; }
    bool isSwitch() const { return value.empty(); }
    // The values a placeholder such as "client|operator" allows; empty for any value.
    std::vector<std::string_view> choices() const { return wordChoices(value); }
};

// A command's arguments as the parser found them: operands in order, and each flag given, under
// its Flag::name, with its value ("" for a switch).
struct Args {
    std::vector<std::string> positional;
    std::vector<std::pair<std::string, std::string>> options;

    bool has(std::string_view name) const;
    // The value of a flag given once or more: the last one wins (as with the prototype's argparse).
    const std::string* value(std::string_view name) const;
    // Every value of a repeatable flag, in the order given.
    std::vector<std::string> values(std::string_view name) const;
};

using Handler = int (*)(std::string_view tool, Args& args);

// One command of a tool, or one subcommand of a command.
struct Command {
    std::string_view name;
    std::string_view operands;  // synopsis of its operands ("PROG.rmt|PROG.rbc", "[PATH...]"), "" for none
    std::string_view summary;   // one line: the tool's listing and the head of --help
    std::vector<Flag> flags = {};
    Handler run = nullptr;             // null when the command has subcommands
    std::vector<Command> subcommands = {};  // `approvals list|show|...`
    std::string_view details = {};     // paragraphs --help prints after the flags (may be empty)
};

// One program: remitc, remitvm or remit.
struct Tool {
    std::string_view name;
    std::string_view summary;
    std::vector<const Command*> commands = {};
    std::string_view details = {};  // paragraphs its --help prints after the commands
};

// The three tools, in the order remitc, remitvm, remit (cli/command_table.cpp).
const std::vector<Tool>& allTools();
const Tool* findTool(std::string_view name);
// The flags every command accepts besides its own: -h/--help, --color auto|always|never.
const std::vector<Flag>& commonFlags();

// The whole main() of a tool: `--version`, `--help` (or no command: usage on stderr, exit 2), then
// the command named by argv[1] (and its subcommand), whose flags are parsed from the table before
// its handler runs. An exception escaping a handler becomes a fixed message (no exception text,
// which could carry host paths) and exit 1.
int runTool(std::string_view tool, int argc, char** argv);

// Keeps `value` allocated until the process exits, never destroyed: for a command's last large
// result (a checked program's syntax tree), which the exit would otherwise free node by node for
// nothing. Only commands call it, never the libraries. The objects stay reachable from a global, so
// LeakSanitizer does not report them.
std::vector<std::shared_ptr<void>>& keptUntilExit();
template <class T>
void keepUntilExit(T&& value) {
    keptUntilExit().push_back(std::make_shared<std::decay_t<T>>(std::forward<T>(value)));
}

// What parseCommandLine did with one command's arguments.
enum class Parsed { Ok, Help, Error };
// Parses `argv` (what follows the command's name) against `command`'s flags and the common ones,
// left to right. On an error (an unknown flag, a missing value, a value outside its choices)
// prints it on stderr and returns Error; `-h`/`--help` returns Help. `path` names the command in
// hints ("approvals list"; default: its name).
Parsed parseCommandLine(std::string_view tool, const Command& command, const std::vector<std::string>& argv,
                        Args& out, std::string_view path = {});
// `TOOL --help` and `TOOL COMMAND [SUB] --help`, generated from the table. `path` is the command
// words after the tool ("approvals list").
std::string toolHelp(const Tool& tool);
std::string commandHelp(std::string_view tool, std::string_view path, const Command& command);
// The version every tool prints: CMake's project version.
std::string_view remitVersion();
// The completion script for bash, zsh or fish (cli/completions.cpp); empty for another shell.
std::string completionScript(std::string_view shell);

// JSON as the prototype prints results and envelopes: json.dumps(value, indent=2, ensure_ascii=False).
// An ordered document keeps its members' order (results, envelopes); a sorted nlohmann::json
// converts to one in its own (sorted) order.
std::string prettyJson(const Json& value);
// JSON on one line, with a space after each comma and colon: a value inside a line of text.
std::string oneLineJson(const Json& value);
// A dollar amount from JSON as every cost is printed (formatUsd, without the "$"); "?" when it is
// not a number. `approvals show` and the web inbox print the manifest's costs with it.
std::string usdOf(const nlohmann::json& amount);
// `s` as one word for a POSIX shell: as it is when it is plain, else single-quoted.
std::string shellQuote(std::string_view s);
// A whole decimal number in [0, max] (a port, a count); nullopt otherwise.
std::optional<uint64_t> parseCount(const std::string& text, uint64_t max);

// The state directory: --state-dir, else `.remit` in the current directory.
std::filesystem::path stateDirOf(const Args& args);
// The store a command reads and writes (docs/fleet.md "Choosing a store"): --store URL, else
// --state-dir D, else $REMIT_STORE, else `.remit`. Null after printing why (exit 2).
std::unique_ptr<Store> openStoreFor(std::string_view tool, const Args& args);
// The state flags in effect, as a follow-up command printed for the user must repeat them
// (" --state-dir D" or " --store URL" without its password, quoted for the shell when needed;
// empty for the default).
std::string stateFlags(const Args& args);
// RUN is a run id (its trace in the store) or a trace file: reads it into `trace` (its `error` set
// when it is damaged) and names it in `name`. False, with a message printed, when there is no
// such trace.
bool readRunTrace(std::string_view tool, Store& store, const std::string& run, TraceCheck check, TraceFile& trace,
                  std::string& name);

// Where a command's output goes: stdout and stderr, or — for a worker that runs many runs at once
// on its threads (cli/fleet_commands.cpp) — buffers of the run in hand. Per thread.
struct CommandOutput {
    std::FILE* out = stdout;
    std::FILE* err = stderr;
    bool storeFailed = false;  // the run stopped because the store could not keep its records
};
CommandOutput& commandOutput();

// Prints diagnostics on stderr with renderDiagnostics, each with its source excerpt when
// `outcome` holds the file; `options` may cap how many are printed in full.
void printDiagnostics(const DiagnosticList& diags, const CheckOutcome* outcome, const RenderOptions& options = {});
// Prints an authority diff on stdout as `diff` does: `header` (red when it widened, else "no
// authority widening" in green), then each change, + for a widening and - for a narrowing.
void printAuthorityDiff(const AuthorityDiff& diff, std::string_view widenedHeader);
// The check options of --host, --policy and --strict-flows.
CheckOptions checkOptionsOf(const Args& args);
// Compiles a checked program to bytecode; a bytecode limit (E0003) is added to `diags`.
std::shared_ptr<const LoadedProgram> buildChecked(const CheckOutcome& outcome, DiagnosticList& diags);
// The same, printing the E0003 like any diagnostic and setting `exit` to 1.
std::shared_ptr<const LoadedProgram> compileChecked(const CheckOutcome& outcome, int& exit);

// Reads stdin to its end one line at a time (without the newline; the last line may lack one) and
// passes each to `onLine`; a line longer than `maxBytes` is dropped as it streams in (never held
// in memory) and reported by `onOverlong` instead. For the JSON-lines servers (serve, mcp).
void readLines(size_t maxBytes, const std::function<void(std::string_view)>& onLine,
               const std::function<void()>& onOverlong);

int checkCommand(std::string_view tool, Args& args);
int fmtCommand(std::string_view tool, Args& args);
int manifestCommand(std::string_view tool, Args& args);
int schemaCommand(std::string_view tool, Args& args);
int diffCommand(std::string_view tool, Args& args);
// cli/ask_command.cpp
int askCommand(std::string_view tool, Args& args);
// cli/run_commands.cpp
int buildCommand(std::string_view tool, Args& args);
int disCommand(std::string_view tool, Args& args);
int keygenCommand(std::string_view tool, Args& args);
int runCommand(std::string_view tool, Args& args);
// cli/broker_commands.cpp
int traceCommand(std::string_view tool, Args& args);
// `approvals list|show|approve|deny`
int approvalsListCommand(std::string_view tool, Args& args);
int approvalsShowCommand(std::string_view tool, Args& args);
int approvalsApproveCommand(std::string_view tool, Args& args);
int approvalsDenyCommand(std::string_view tool, Args& args);
int approveCommand(std::string_view tool, Args& args);
// cli/run_commands.cpp: re-executions of a recorded run
int resumeCommand(std::string_view tool, Args& args);
int replayCommand(std::string_view tool, Args& args);
// cli/run_commands.cpp: queueing a run for a fleet, and running one a worker claimed
int submitCommand(std::string_view tool, Args& args);
// Runs the submitted run `runId` as `run` or `resume --json` would, in `store`, whose lock on the
// run the caller holds: afresh under that id when the store has no trace of it yet (`traced`
// false; with the submission's inputs and adapters), else continuing its newest trace. The
// submission's flags are `args` (cli/fleet_commands.cpp).
int runSubmitted(std::string_view tool, Args& args, Store& store, const std::string& runId, const Json& submission,
                 bool traced);
// cli/fleet_commands.cpp: the fleet (docs/fleet.md)
int workerCommand(std::string_view tool, Args& args);
int runsListCommand(std::string_view tool, Args& args);
int runsShowCommand(std::string_view tool, Args& args);
int storeMigrateCommand(std::string_view tool, Args& args);
// cli/test_command.cpp
int testCommand(std::string_view tool, Args& args);
// cli/serve_command.cpp
int serveCommand(std::string_view tool, Args& args);
// cli/completions.cpp: `completions bash|zsh|fish`
int completionsCommand(std::string_view tool, Args& args);
// cli/import_command.cpp: `import mcp`, a draft host interface from an MCP server's tools (docs/import.md)
int importMcpCommand(std::string_view tool, Args& args);
// What every `remitc import` shares (cli/import_command.cpp): the `--as NS` flag, checked (false
// after printing why, `example` completing the hint "e.g. --as …"); and the draft written to -o
// (atomically) or stdout, then `summary`, what was left out and what to do next on stderr.
bool importNamespace(std::string_view tool, const Args& args, std::string_view example, std::string& ns);
int writeDraft(std::string_view tool, const Args& args, const HostDraft& draft, const std::string& summary);
// cli/import_openapi.cpp: `import openapi`, a draft host interface from an OpenAPI 3 document (docs/import.md)
int importOpenApiCommand(std::string_view tool, Args& args);
// cli/mcp_command.cpp: the MCP server over stdio (docs/mcp.md)
int mcpCommand(std::string_view tool, Args& args);
// cli/inbox_http.cpp: the operators' web inbox (docs/operators.md)
int inboxCommand(std::string_view tool, Args& args);
// cli/lsp_command.cpp: the language server over stdio (docs/editors.md)
int lspCommand(std::string_view tool, Args& args);
// `manifest PROG.rbc`: the manifest stored in a verified artifact.
int bytecodeManifest(std::string_view tool, const std::string& path);

}  // namespace remit::cli
