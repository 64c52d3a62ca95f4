// remitc: the compiler's command line — check, format, compile, disassemble, print manifests and
// compare authority (docs/compatibility.md "Command lines"), and the language server for editors.
// Its commands and flags are declared in cli/command_table.cpp; the commands themselves live in
// commands.cpp, run_commands.cpp and lsp_command.cpp.
#include "cli/commands.h"

int main(int argc, char** argv) { return remit::cli::runTool("remitc", argc, argv); }
