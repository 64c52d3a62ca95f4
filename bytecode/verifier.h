// The verifier: the one gate every Module passes before the VM runs it, whether it was loaded from
// a .rbc file (bytecode/rbc.h calls it) or just produced by the code generator. It treats the module as
// hostile: after it succeeds, the dispatch loop may index registers, constants, functions, shapes,
// builtins and sites with the operands as they stand, follow jumps and calls without bounds
// checks, allocate one register stack of `stackRegisters` and never grow it, and rely on calls
// forming no cycle. docs/bytecode.md ("What the verifier guarantees") lists every rule and what is
// left to the VM's run-time guards (the kinds of the values in registers).
//
// It never recurses on module data (a hostile file may chain a million functions or nest types
// deeply), and its cost is linear in the size of the module.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "bytecode/module.h"

namespace remit {

// Limits of a module the VM accepts (the .rbc loader also caps its counts with them, before
// allocating anything).
constexpr uint32_t kMaxFunctions = 1u << 20;
constexpr uint32_t kMaxInstructions = 1u << 24;    // per function
constexpr uint32_t kMaxStackRegisters = 1u << 24;  // Module::stackRegisters

// Checks `module` as hostile input. On success fills module.stackRegisters and returns an empty
// string; otherwise returns a one-line message naming the rule and where it broke ("function
// 'main' instruction 12: jump target 900 is outside the function (40 instructions)").
[[nodiscard]] std::string verifyModule(Module& module);

// A Bx operand joins b and c (bytecode/module.h Instr::bx), so it is read as one value and C is not
// an operand of its own.
constexpr bool isBxOperand(Operand kind) {
    return kind == Operand::KBx || kind == Operand::KIntBx || kind == Operand::KStrBx || kind == Operand::JumpBx;
}

// How the loader, the verifier and the disassembler show a name taken from a module: in single
// quotes, control characters and quotes escaped, cut after 80 bytes — so a hostile name cannot
// break a one-line message or flood a terminal.
std::string quoteName(std::string_view name);
// The longest prefix of `text` of at most `maxBytes` that does not split a UTF-8 sequence (how
// quoteName and the disassembler cut long text).
std::string_view utf8Prefix(std::string_view text, size_t maxBytes);

}  // namespace remit
