// remit: the prototype-compatible front end. Its commands and flags are the Python prototype's
// (docs/compatibility.md "Command lines"), declared with the others in cli/command_table.cpp; each
// runs the same command as remitc or remitvm.
#include "cli/commands.h"

int main(int argc, char** argv) { return remit::cli::runTool("remit", argc, argv); }
