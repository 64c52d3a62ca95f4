// The disassembler: a module as readable text, for `remitc dis`, codegen golden tests and anyone
// debugging the compiler or the VM. Operands are rendered by their kind in bytecode/opcodes.def, so a new
// opcode is listed correctly without touching this file. docs/bytecode.md shows a sample listing.
//
// The text is for people and golden files, not for parsing back. It is deterministic, and every
// name or string from the module is quoted and escaped, so a hostile module cannot forge lines.
#pragma once

#include <string>
#include <string_view>

#include "bytecode/module.h"

namespace remit {

// A listing of `module`: the header (program, hashes, counts), then the constants, shapes, types,
// sites, agents and tests, then every function with one line per instruction — its index, opcode,
// operands (r3, k5 "text", ->12, fn 2 'helper', site 1 'main#0', builtin 'len', shape 0 {a, b})
// and source line:col. With the program's `sourceText`, each source line is also printed once,
// above the first instruction that comes from it (like `objdump -S`).
//
// `signer`, when not empty, is shown in the header as who signed the file the module came from
// ("ed25519:…", bytecode/signature.h): a signature is the file's, not the module's.
//
// Meant for verified modules; an unverified one is listed without crashing, with "?" for
// references that do not resolve.
std::string disassemble(const Module& module, std::string_view sourceText = {}, std::string_view signer = {});

}  // namespace remit
