// remitc: the compiler's command line — check, format, print manifests and compare authority
// (shared/DESIGN.md A1). The commands themselves live in commands.cpp.
#include "cli/commands.h"

namespace {

constexpr const char* kUsageText =
    "usage: remitc <command> [options]\n"
    "\n"
    "commands:\n"
    "  check FILE|DIR... [--host H] [--policy P] [--json] [--max-diagnostics N]\n"
    "                                                        check programs, report diagnostics\n"
    "  fmt FILE... [--check]                                 format .rmt and .rmti files in place\n"
    "  build PROG.rmt [-o OUT.rbc] [--host H]                compile to a verified .rbc (default: beside PROG)\n"
    "  dis PROG.rbc|PROG.rmt [--host H]                      disassemble, each instruction with its source line\n"
    "  manifest PROG.rmt|PROG.rbc [--host H]                 print the manifest as JSON\n"
    "  diff OLD NEW [--host H] [--json]                      did the edit widen authority? (exit 4 if so)\n";

}  // namespace

int main(int argc, char** argv) {
    using namespace remit::cli;
    return runTool("remitc", kUsageText,
                   {{"check", checkCommand},
                    {"fmt", fmtCommand},
                    {"build", buildCommand},
                    {"dis", disCommand},
                    {"manifest", manifestCommand},
                    {"diff", diffCommand}},
                   argc, argv);
}
