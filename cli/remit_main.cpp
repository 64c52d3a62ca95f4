// remit: the prototype-compatible front end. Its commands and flags are the Python prototype's
// (docs/compatibility.md "Command lines"); each maps onto the remitc/remitvm command that implements it.
#include "cli/commands.h"

namespace {

constexpr const char* kUsageText =
    "usage: remit <command> [options]\n"
    "\n"
    "commands available in this build:\n"
    "  check FILE... [--host H] [--policy P] [--json] [--max-diagnostics N]\n"
    "  fmt FILE... [--check]\n"
    "  diff OLD NEW [--host H] [--json]\n"
    "  build FILE [--host H] [--out DIR] [--sign KEY.pem]\n"
    "                                          write DIR/<program>.rbc and its manifest (default DIR: build)\n"
    "  run FILE [--host H] [--policy P] [--allow-all] [--approve-all] [--fixtures F | --live] [-i K=V]...\n"
    "      [--inputs F.json] [--json] [--state-dir D]\n"
    "  approve DIGEST [--by NAME]\n"
    "  approvals list|show ID|approve ID|deny ID [--reason R] [--json] [--by NAME] [--state-dir D]\n"
    "  resume RUN [--file F] [--host H] [--policy P] [--allow-all] [--approve-all] [--fixtures F | --live]\n"
    "  replay RUN [--file F] [--host H]\n"
    "  test [PATH...] [--host H]\n"
    "  mcp [--http] [--host H] [--port N] [--keys K] [--usage U] [--free-monthly N]\n"
    "      [--approvals client|operator] [--state-dir D]\n"
    "                                          Model Context Protocol server, stdio or HTTP (docs/mcp.md)\n"
    "  inbox [--http] [--host H] [--port N] --keys K [--state-dir D]\n"
    "                                          the operators' web inbox for approvals (docs/operators.md)\n";

}  // namespace

int main(int argc, char** argv) {
    using namespace remit::cli;
    return runTool("remit", kUsageText,
                   {{"check", checkCommand},
                    {"fmt", fmtCommand},
                    {"diff", diffCommand},
                    {"build", buildCommand},
                    {"run", runCommand},
                    {"approve", approveCommand},
                    {"approvals", approvalsCommand},
                    {"resume", resumeCommand},
                    {"replay", replayCommand},
                    {"test", testCommand},
                    {"mcp", mcpCommand},
                    {"inbox", inboxCommand}},
                   argc, argv);
}
