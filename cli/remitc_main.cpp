// remitc: the compiler's command line — check, format, compile, disassemble, print manifests and
// compare authority (docs/compatibility.md "Command lines"). The commands themselves live in
// commands.cpp and run_commands.cpp (build, dis).
#include "cli/commands.h"

namespace {

constexpr const char* kUsageText =
    "usage: remitc <command> [options]\n"
    "\n"
    "commands:\n"
    "  check FILE|DIR... [--host H] [--policy P] [--json] [--max-diagnostics N] [--strict-flows]\n"
    "                                                        check programs, report diagnostics\n"
    "  fmt FILE... [--check]                                 format .rmt and .rmti files in place\n"
    "  build PROG.rmt [-o OUT.rbc] [--host H] [--strict-flows] [--sign KEY.pem]\n"
    "                                                        compile to a verified .rbc (default: beside PROG),\n"
    "                                                        signed with an Ed25519 key if --sign\n"
    "  keygen KEY.pem                                        make a signing key: KEY.pem and KEY.pub.pem\n"
    "  dis PROG.rbc|PROG.rmt [--host H] [--strict-flows]     disassemble, each instruction with its source line\n"
    "  manifest PROG.rmt|PROG.rbc [--host H] [--policy P] [--strict-flows]\n"
    "                                                        print the manifest as JSON\n"
    "  diff OLD NEW [--host H] [--json]                      did the edit widen authority? (exit 4 if so)\n"
    "  import mcp \"CMD ARGS\" [--as NS] [-o host.rmti] [--timeout-ms N]\n"
    "                                                        draft a host interface from an MCP server's tools\n"
    "\n"
    "--strict-flows: decisions on tagged data count for deny parameters too, and early exits taint what\n"
    "follows (docs/language.md \"Strict flows\"); a policy's [flows] strict = true does the same.\n";

}  // namespace

int main(int argc, char** argv) {
    using namespace remit::cli;
    return runTool("remitc", kUsageText,
                   {{"check", checkCommand},
                    {"fmt", fmtCommand},
                    {"build", buildCommand},
                    {"dis", disCommand},
                    {"keygen", keygenCommand},
                    {"manifest", manifestCommand},
                    {"diff", diffCommand},
                    {"import", importCommand}},
                   argc, argv);
}
