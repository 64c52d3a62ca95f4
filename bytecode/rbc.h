// The .rbc file: a compiled Remit program as bytes. `remitc build` writes one with writeRbc;
// `remitvm`, `remitc dis` and `remitc manifest` read one with loadRbc, which parses it as hostile
// input and then runs the verifier (bytecode/verifier.h), so a Module that comes out of loadRbc is safe
// to run. docs/bytecode.md documents every byte; change both together and bump kRbcVersion when
// the layout changes (tests/unit/test_rbc.cpp pins the encoding of sample modules, and the seed
// corpus tests/fuzz/corpus/rbc/ holds the same files).
//
// The encoding is canonical: a file loadRbc accepts is exactly what writeRbc writes for the module
// it loads to, so any accepted input can be rewritten byte for byte (the fuzzer checks this).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bytecode/module.h"
#include "bytecode/signature.h"
#include "runtime/types.h"

namespace remit {

constexpr uint32_t kRbcVersion = 4;

// 0x89 first, so the file is not mistaken for text; CR LF and LF catch newline translation.
inline constexpr std::string_view kRbcMagic{"\x89RBC\r\n\x1a\n", 8};
constexpr size_t kRbcFlagsOffset = 12;  // u32; bit 0 is kRbcFlagSigned (bytecode/signature.h)

// The fixed header: magic (8), version (4), flags (4), checksum (8), program hash (64), host hash
// (64), section count (4). The checksum is XXH3_64bits of every byte after the checksum field, up
// to the signature block of a signed file (bytecode/signature.h).
constexpr size_t kRbcChecksumOffset = 16;
constexpr size_t kRbcChecksumEnd = 24;  // the checksummed bytes start here
constexpr size_t kRbcHeaderSize = 156;
// Limits of the file format, checked before anything is allocated.
constexpr size_t kMaxRbcBytes = size_t{256} << 20;
constexpr uint32_t kMaxRbcString = 16u << 20;

// The bytes of a .rbc file for `module` (deterministic: equal modules give equal bytes).
std::string writeRbc(const Module& module);

// Exactly one of `module` and `error` is set.
struct RbcLoadResult {
    std::unique_ptr<Module> module;
    std::string error;
    std::optional<RbcSignature> signature;  // a signed file's block, verified against its body
};

// Parses and verifies a .rbc file. `error` is one line naming what is wrong and where (the
// section and element, or the function and instruction index). A signed file's signature is
// checked first (against the key it names: whether that key is trusted is the host's question,
// checkTrusted); the module is its body's.
[[nodiscard]] RbcLoadResult loadRbc(std::string_view bytes);

// The program hash of a module: SHA-256 over everything it runs — every section but the debug
// spans and the manifest, less the source file name and site and test spans — so it is the same
// for every build of the same code (also after `remitc fmt` or a comment), and any change of
// behaviour changes it. This, not a header field, is what binds approvals, resumes and traces:
// loadRbc refuses a file whose header disagrees, and buildProgram seals what it generates.
// docs/bytecode.md, "The program hash", lists exactly what is covered.
std::string programHashOf(const Module& module);
// Sets module.programHash = programHashOf(module).
void sealProgramHash(Module& module);

// Recomputes the checksum of `bytes` in place (when it is at least kRbcChecksumEnd bytes long).
// For tests and the fuzzer, which edit files on purpose and want the parser, not the checksum,
// to judge the edit.
void resealRbc(std::string& bytes);
// Also rewrites the header's program hash to the hash of the sections as they parse (when they
// do), then the checksum: an edit then reaches the verifier and the VM, not the hash check.
void resealRbcWithProgramHash(std::string& bytes);

// Builds TypeRefs for module.types in `arena`, index for index. Entries refer only to earlier
// entries (the verifier guarantees it), so one pass in order suffices. Defined in bytecode/module.cpp.
std::vector<TypeRef> materializeTypes(const Module& module, TypeArena& arena);

}  // namespace remit
