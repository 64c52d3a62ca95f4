// A compiled Remit program in memory: what compiler/codegen.cpp produces, what bytecode/rbc.cpp writes
// to and reads from a .rbc file (docs/bytecode.md), what bytecode/verifier.cpp checks and what the VM
// runs. A Module is immutable once built and may be shared by many runs at once (each run
// materialises the constants into its own heap).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/source.h"
#include "runtime/types.h"

namespace remit {

enum class Op : uint8_t {
#define OPCODE(name, a, b, c, window, effect) name,
#include "bytecode/opcodes.def"
#undef OPCODE
};

// What an operand field means (bytecode/opcodes.def explains each).
enum class Operand : uint8_t {
    None, Reg, Dst, Win, Imm, KBx, KStr, KIntBx, KStrBx, JumpBx, Skip, Fn, Shape, Builtin, Site, Branch
};
// How long an instruction's register window is.
enum class Window : uint8_t { W0, WCount, WShape, WFn, WBuiltin, WSite, WFor };

struct OpInfo {
    const char* name;
    Operand a, b, c;
    Window window;
    const char* effect;
};

constexpr OpInfo kOps[] = {
#define OPCODE(name, a, b, c, window, effect) \
    {#name, Operand::a, Operand::b, Operand::c, Window::window, effect},
#include "bytecode/opcodes.def"
#undef OPCODE
};
constexpr size_t kOpCount = sizeof(kOps) / sizeof(kOps[0]);

inline const OpInfo& opInfo(Op op) { return kOps[static_cast<size_t>(op)]; }

// One fixed-width instruction. Bx joins b (low) and c (high) into a 32-bit operand.
struct Instr {
    Op op = Op::RETUNIT;
    uint8_t reserved = 0;  // must be 0
    uint16_t a = 0, b = 0, c = 0;

    uint32_t bx() const { return uint32_t(b) | (uint32_t(c) << 16); }
    static Instr abc(Op op, uint16_t a, uint16_t b = 0, uint16_t c = 0) { return Instr{op, 0, a, b, c}; }
    static Instr abx(Op op, uint16_t a, uint32_t bx) {
        return Instr{op, 0, a, static_cast<uint16_t>(bx & 0xffff), static_cast<uint16_t>(bx >> 16)};
    }
};
static_assert(sizeof(Instr) == 8);

constexpr uint32_t kMaxRegisters = 0xffff;  // per frame (16-bit register operands)

struct Constant {
    enum class Kind : uint8_t { Int = 0, Float = 1, Str = 2 } kind = Kind::Int;  // values are .rbc format
    int64_t i = 0;
    double f = 0;
    std::string s;
};

// A type, serialisable: `elem` and field types are indices of earlier entries in Module::types.
struct TypeEntry {
    TypeKind kind = TypeKind::Unit;
    std::string name;                  // alias shown in messages, or empty
    std::vector<std::string> options;  // Enum options
    uint32_t elem = 0;                 // List
    std::optional<int64_t> max;        // List bound
    std::vector<std::pair<std::string, uint32_t>> fields;  // Record
};
constexpr uint32_t kNoType = 0xffffffff;

struct Function {
    std::string name;                     // "main", a program function, or "test:NAME"
    std::vector<std::string> paramNames;  // the first registers hold the parameters
    std::vector<uint32_t> paramTypes;     // type indices
    uint32_t returnType = kNoType;
    uint32_t numRegs = 0;                 // >= paramNames.size(), <= kMaxRegisters
    std::vector<Instr> code;
    std::vector<Span> spans;         // one per instruction (the debug section)
};

// The values are part of the .rbc format (docs/bytecode.md): never reorder.
enum class SiteKind : uint8_t { Capability = 0, Model = 1, Agent = 2 };

// One capability or model call site: everything the host needs when the run stops there.
struct Site {
    std::string id;                      // "fn#k" (docs/language.md "Call-site ids")
    SiteKind kind = SiteKind::Capability;
    std::string resource;                // capability name, or the model the call is granted under
    std::string agent;                   // Agent: the agent's name (index into Module::agents by name)
    std::vector<std::string> argNames;   // capability parameter names; models: "prompt", "context"
    uint32_t retry = 0;                  // extra attempts after the first
    std::optional<double> timeoutSeconds;
    bool hasFallback = false;            // `else E`: the instruction after the call is a JMP over E's code
    uint32_t askType = kNoType;          // Model/Agent: the requested output type
    uint32_t function = 0;               // the function containing the call
    Span span;
};

struct Agent {
    std::string name, model, system;
    std::optional<int64_t> maxCalls;
};

struct TestCase {
    std::string name;
    std::optional<std::string> fixtures;
    uint32_t function = 0;
    Span span;
};

struct Module {
    std::string programName;
    std::string sourceFile;   // the program's file name as given to the compiler (for messages)
    std::string programHash;  // the module's content hash, bare lowercase hex (bytecode/rbc.h programHashOf)
    std::string hostHash;
    std::optional<double> budgetUsd;
    std::vector<Constant> constants;
    std::vector<std::vector<std::string>> shapes;  // record field names, in order, distinct
    std::vector<TypeEntry> types;
    std::vector<Function> functions;
    std::vector<Site> sites;
    std::vector<Agent> agents;
    std::vector<TestCase> tests;
    uint32_t entry = kNoType;  // the index of `main`, or kNoType for a program without one
    std::string manifestJson;  // compiler/manifest.h manifestToJson, compact

    // Computed by the verifier (not stored in the .rbc): the most registers live at once along
    // any chain of calls, so a run allocates its register stack once and never grows it.
    uint32_t stackRegisters = 0;
};

}  // namespace remit
