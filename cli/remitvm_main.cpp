// remitvm: the VM's command line (docs/compatibility.md "Command lines"). `run` executes a .rmt (compiled in
// memory) or a verified .rbc through the broker; `resume` and `replay` re-execute a recorded run;
// `trace` reads a trace and `approve` records an approval; `test` runs test blocks; `serve` speaks
// the checked-run protocol; `mcp` is the Model Context Protocol server for agents. The commands
// themselves live in cli/*_command(s).cpp.
#include "cli/commands.h"

namespace {

constexpr const char* kUsageText =
    "usage: remitvm <command> [options]\n"
    "\n"
    "commands:\n"
    "  run PROG.rmt|PROG.rbc [--host H] [--policy P] [--allow-all] [-i NAME=VALUE]... [--inputs FILE.json]\n"
    "      [--approve-all] [--fixtures F.json | --live | --adapter \"CMD ARGS\"] [--state-dir D]\n"
    "      [--json] [--max-steps N] [--max-memory BYTES] [--max-wall-ms N] [--strict-flows] [--trust KEYS_DIR]\n"
    "      run main through the broker and print its result as JSON; --trust: a .rbc must be signed\n"
    "      by a key in KEYS_DIR\n"
    "  approve DIGEST-PREFIX|RUN_ID [--by NAME] [--state-dir D]\n"
    "      approve one pending call (single use)\n"
    "  approvals list [--json] | show ID [--json] | approve ID [--by NAME] | deny ID [--reason R] [--by NAME]\n"
    "      [--state-dir D]: the pending requests, one in full (arguments, provenance, manifest), decide one\n"
    "  resume RUN_ID|TRACE.jsonl [--file PROG] [run flags]\n"
    "      continue a paused or stopped run: recorded calls are answered from its trace\n"
    "  replay RUN_ID|TRACE.jsonl [--file PROG] [--host H] [--json] [--strict-flows]\n"
    "      re-execute a run against its trace only and check it reproduces (no live effects)\n"
    "  trace RUN_ID|TRACE.jsonl [--why SEQ] [--full] [--state-dir D]\n"
    "      print a run's timeline, or what call SEQ derives from and who approved it\n"
    "  test [PATH...] [--host H]\n"
    "      run the test blocks of .rmt files (directories are searched)\n"
    "  serve\n"
    "      checked runs over JSON lines on stdin/stdout (docs/serve.md)\n"
    "  mcp [--http [--host H] [--port N] [--keys keys.json] [--usage usage.sqlite] [--free-monthly N]]\n"
    "      [--approvals client|operator] [--state-dir D]\n"
    "      Model Context Protocol server on stdin/stdout, or over streamable HTTP with API keys and\n"
    "      metering: check, format, diff and run programs (docs/mcp.md)\n"
    "  inbox [--http] [--host H] [--port N] --keys keys.json [--state-dir D]\n"
    "      the operators' web inbox: pending approvals, each in full, approve or deny with a key whose\n"
    "      role is approver (docs/operators.md)\n";

}  // namespace

int main(int argc, char** argv) {
    using namespace remit::cli;
    return runTool("remitvm", kUsageText,
                   {{"run", runCommand},
                    {"approve", approveCommand},
                    {"approvals", approvalsCommand},
                    {"trace", traceCommand},
                    {"resume", resumeCommand},
                    {"replay", replayCommand},
                    {"test", testCommand},
                    {"serve", serveCommand},
                    {"mcp", mcpCommand},
                    {"inbox", inboxCommand}},
                   argc, argv);
}
