// Entry points for the command-line tools that already hold a checked AST (cli/ checks files with
// compiler/driver.h and then needs the program it describes). Embedders use include/remit/remit.hpp.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "bytecode/signature.h"
#include "compiler/ast.h"
#include "compiler/checker.h"
#include "vm/run.h"

namespace remit {

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
    std::optional<RbcSignature> signature;  // a signed file's (verified against its content)
};
LoadOutcome loadProgram(std::string_view rbcBytes);

// Generates and verifies the bytecode of a program that checked. A program over a bytecode limit
// (docs/bytecode.md) gets the one E0003 every front end reports — at the program, with the hint to
// split it — added to `diags`, and the result is null.
std::shared_ptr<const LoadedProgram> buildProgram(const ast::Program& program, const CheckResult& check,
                                                  const std::string& file, DiagnosticList& diags);

}  // namespace remit
