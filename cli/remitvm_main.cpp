// remitvm: the VM's command line (docs/compatibility.md "Command lines"). `run` executes a .rmt
// (compiled in memory) or a verified .rbc through the broker; `resume` and `replay` re-execute a
// recorded run; `trace` reads a trace, `approve` and `approvals` decide pending calls; `test` runs
// test blocks; `serve` speaks the checked-run protocol; `mcp` is the Model Context Protocol server
// for agents; `inbox` is the operators' web page for approvals; `submit`, `worker`, `runs` and
// `store` are a fleet's (docs/fleet.md). Its commands and flags are declared in cli/command_table.cpp; the commands themselves
// live in cli/*_command(s).cpp.
#include "cli/commands.h"

int main(int argc, char** argv) { return remit::cli::runTool("remitvm", argc, argv); }
