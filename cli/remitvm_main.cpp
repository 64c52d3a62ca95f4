// remitvm: the VM's command line (shared/DESIGN.md A1). `run` executes a .rmt (compiled in
// memory) or a verified .rbc through the broker; `trace` reads a run's trace and `approve` records
// an approval; resume, replay, test, serve and mcp arrive later. The commands themselves live in commands.cpp and run_commands.cpp.
#include "cli/commands.h"

namespace {

constexpr const char* kUsageText =
    "usage: remitvm <command> [options]\n"
    "\n"
    "commands:\n"
    "  run PROG.rmt|PROG.rbc [--host H] [--policy P] [--allow-all] [-i NAME=VALUE]... [--inputs FILE.json]\n"
    "      [--approve-all] [--fixtures F.json | --live | --adapter \"CMD ARGS\"] [--state-dir D]\n"
    "      [--json] [--max-steps N] [--max-memory BYTES] [--max-wall-ms N]\n"
    "      run main through the broker and print its result as JSON\n"
    "  approve DIGEST-PREFIX|RUN_ID [--by NAME] [--state-dir D]\n"
    "      approve one pending call (single use)\n"
    "  trace RUN_ID|TRACE.jsonl [--why SEQ] [--state-dir D]\n"
    "      print a run's timeline, or what call SEQ derives from and who approved it\n"
    "(resume, replay, test, serve and mcp arrive later)\n";

}  // namespace

int main(int argc, char** argv) {
    using namespace remit::cli;
    return runTool("remitvm", kUsageText, {{"run", runCommand}, {"approve", approveCommand}, {"trace", traceCommand}}, argc, argv);
}
