// The code generator: a checked program (its AST and the checker's CheckResult) to a Module of
// register bytecode (bytecode/module.h, opcodes in bytecode/opcodes.def).
//
// Register allocation is a stack discipline per function: parameters take the first registers,
// each `let`/`var` takes the next one for the rest of its block, and temporaries are allocated
// above the locals and released at the end of the expression or statement that needed them.
// Functions never recurse, so each frame's size is static; a call's arguments are evaluated into
// a window at the top of the caller's registers, where the callee's frame then begins.
//
// The generator runs only on programs that checked without errors: it relies on the checker's
// types (typed opcodes, bounds) and resolved calls (site ids, callee kinds).
#pragma once

#include <memory>
#include <string>

#include "compiler/ast.h"
#include "compiler/checker.h"
#include "bytecode/module.h"

namespace remit {

struct CodegenResult {
    std::unique_ptr<Module> module;
    // Set when the program exceeds a bytecode limit (more than 65,535 registers in one function,
    // 2^32 constants or instructions): an E0003 message naming the function.
    std::string error;
};

// `sourceFile` is the program's file name as given (kept in the module for runtime messages).
CodegenResult generateModule(const ast::Program& program, const CheckResult& check, const std::string& sourceFile);

}  // namespace remit
