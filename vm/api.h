// Entry points for the command-line tools that already hold a checked AST (cli/ checks files with
// compiler/driver.h and then needs the program it describes). Embedders use remit/remit.h.
#pragma once

#include <memory>
#include <string>

#include "compiler/ast.h"
#include "compiler/checker.h"
#include "remit/remit.h"

namespace remit {

// Generates and verifies the bytecode of a program that checked. Null with `error` set when a
// bytecode limit is exceeded (an E0003 message).
std::shared_ptr<const LoadedProgram> buildProgram(const ast::Program& program, const CheckResult& check,
                                                  const std::string& file, std::string& error);

}  // namespace remit
