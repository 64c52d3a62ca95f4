// remitvm: the VM's command line (shared/DESIGN.md A1). `run` executes a .rmt (compiled in
// memory) or a verified .rbc; approve, resume, replay, trace, test, serve and mcp arrive with the
// broker. The commands themselves live in commands.cpp and run_commands.cpp.
#include "cli/commands.h"

namespace {

constexpr const char* kUsageText =
    "usage: remitvm <command> [options]\n"
    "\n"
    "commands:\n"
    "  run PROG.rmt|PROG.rbc [--host H] [--policy P] [--allow-all] [-i NAME=VALUE]... [--inputs FILE.json]\n"
    "      [--json] [--max-steps N] [--max-memory BYTES] [--max-wall-ms N]\n"
    "      run main and print its result as JSON\n"
    "(approve, resume, replay, trace, test, serve and mcp arrive with the broker)\n";

}  // namespace

int main(int argc, char** argv) {
    using namespace remit::cli;
    return runTool("remitvm", kUsageText, {{"run", runCommand}}, argc, argv);
}
