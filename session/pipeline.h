// Entry points for the command-line tools that already hold a checked AST (cli/ checks files with
// compiler/driver.h and then needs the program it describes). Embedders use include/remit/remit.hpp.
#pragma once

#include <memory>
#include <string>

#include "compiler/ast.h"
#include "compiler/checker.h"
#include "vm/run.h"

namespace remit {

// Generates and verifies the bytecode of a program that checked. Null with `error` set when a
// bytecode limit is exceeded (an E0003 message).
// Source to program: check against the host interface, then generate and verify bytecode.
struct CompileOutcome {
    std::shared_ptr<const LoadedProgram> program;  // null unless the program checked
    DiagnosticList diagnostics;                    // everything the checker (or a limit) reported
};
CompileOutcome compileProgram(std::string_view source, const std::string& file, std::string_view hostSource,
                              const std::string& hostFile);

// A .rbc file's bytes to program; `error` says what is wrong when the artifact does not load.
struct LoadOutcome {
    std::shared_ptr<const LoadedProgram> program;
    std::string error;
};
LoadOutcome loadProgram(std::string_view rbcBytes);

std::shared_ptr<const LoadedProgram> buildProgram(const ast::Program& program, const CheckResult& check,
                                                  const std::string& file, std::string& error);

}  // namespace remit
