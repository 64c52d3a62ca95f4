// The verifier (bytecode/verifier.h). It checks the tables first (hashes, constants, shapes, types,
// functions, agents, sites, tests), then every instruction against the operand kinds of its
// opcode (bytecode/opcodes.def), then the call graph. The rules are docs/bytecode.md's "What the
// verifier guarantees"; each failure is reported once, as the first broken rule, in one line.
#include "bytecode/verifier.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/builtins.h"
#include "runtime/json_text.h"

namespace remit {

namespace {

// ---- facts about the opcode table that the checks below rely on, checked when it changes

// A Bx operand spans b and c, so it can only sit in B with C declared None.
constexpr bool bxOnlyInB() {
    for (const OpInfo& info : kOps)
        if (isBxOperand(info.a) || isBxOperand(info.c) || (isBxOperand(info.b) && info.c != Operand::None)) return false;
    return true;
}
static_assert(bxOnlyInB(), "opcodes.def: a Bx operand must be B, with C None");

// Every window has a length the verifier can compute: a Window other than W0 names where it comes
// from; CLEAR alone has a W0 window, whose length is its Imm operand B.
constexpr bool windowsHaveLengths() {
    for (size_t i = 0; i < kOpCount; ++i) {
        const OpInfo& info = kOps[i];
        int windows = (info.a == Operand::Win) + (info.b == Operand::Win) + (info.c == Operand::Win);
        if (windows > 1) return false;
        bool isClear = static_cast<Op>(i) == Op::CLEAR;
        if (windows == 1 && info.window == Window::W0 && !isClear) return false;
        if (windows == 0 && info.window != Window::W0) return false;
    }
    return kOps[static_cast<size_t>(Op::CLEAR)].a == Operand::Win &&
           kOps[static_cast<size_t>(Op::CLEAR)].b == Operand::Imm;
}
static_assert(windowsHaveLengths(), "opcodes.def: every window needs a computable length");

// The operands that name where a window's length comes from must be the kinds the verifier reads.
constexpr bool windowSourcesMatch() {
    for (const OpInfo& info : kOps) {
        switch (info.window) {
            case Window::WCount: if (info.c != Operand::Imm) return false; break;
            case Window::WShape: if (info.c != Operand::Shape) return false; break;
            case Window::WFn: if (info.b != Operand::Fn) return false; break;
            case Window::WBuiltin: if (info.c != Operand::Builtin) return false; break;
            case Window::WSite: if (info.c != Operand::Site) return false; break;
            case Window::W0:
            case Window::WFor: break;
        }
    }
    return true;
}
static_assert(windowSourcesMatch(), "opcodes.def: a window's length operand has the wrong kind");

constexpr uint32_t kWForLength = 3;  // a loop's list, index and end

bool isLowerHex64(std::string_view s) {
    return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
}

bool validType(const Module& m, uint32_t index) { return index < m.types.size(); }
bool validTypeOrNone(const Module& m, uint32_t index) { return index == kNoType || validType(m, index); }

// The name in `names` that occurs twice, if any.
template <class Range, class Name>
const std::string* firstDuplicate(const Range& items, Name name) {
    std::unordered_set<std::string_view> seen;
    seen.reserve(items.size());
    for (const auto& item : items) {
        const std::string& n = name(item);
        if (!seen.insert(n).second) return &n;
    }
    return nullptr;
}
const std::string* firstDuplicate(const std::vector<std::string>& names) {
    return firstDuplicate(names, [](const std::string& s) -> const std::string& { return s; });
}

class Verifier {
public:
    explicit Verifier(Module& m) : m_(m) {}

    std::string run() {
        std::string error;
        for (auto step : {&Verifier::header, &Verifier::constants, &Verifier::shapes, &Verifier::types,
                          &Verifier::functions, &Verifier::agents, &Verifier::sites, &Verifier::tests,
                          &Verifier::code, &Verifier::callGraph}) {
            error = (this->*step)();
            if (!error.empty()) return error;
        }
        return error;
    }

private:
    Module& m_;

    std::string fnName(uint32_t index) const { return quoteName(m_.functions[index].name); }

    std::string header() {
        if (!isLowerHex64(m_.programHash)) return "program hash: not 64 lowercase hex digits";
        if (!isLowerHex64(m_.hostHash)) return "host hash: not 64 lowercase hex digits";
        if (m_.budgetUsd && !(std::isfinite(*m_.budgetUsd) && *m_.budgetUsd >= 0))
            return fmt::format("budget: {} is not a finite amount of at least 0", *m_.budgetUsd);
        if (m_.entry != kNoType && m_.entry >= m_.functions.size())
            return fmt::format("entry: function {} does not exist ({} functions)", m_.entry, m_.functions.size());
        // accept() parses without building a tree; the nesting bound protects the tools that do
        // build one from it and print or copy it recursively (`remitc manifest`, `run`).
        size_t start = m_.manifestJson.find_first_not_of(" \t\r\n");
        if (start == std::string::npos || m_.manifestJson[start] != '{' || !nlohmann::json::accept(m_.manifestJson))
            return "manifest: not a JSON object";
        if (jsonNestsDeeperThan(m_.manifestJson, kMaxJsonNesting))
            return fmt::format("manifest: nested deeper than {} levels", kMaxJsonNesting);
        return {};
    }

    std::string constants() {
        for (size_t i = 0; i < m_.constants.size(); ++i) {
            const Constant& k = m_.constants[i];
            switch (k.kind) {
                case Constant::Kind::Int:
                case Constant::Kind::Str: break;
                case Constant::Kind::Float:
                    // Remit never makes a non-finite Float (it is R0101), so no constant is one.
                    if (!std::isfinite(k.f)) return fmt::format("constant {}: Float {} is not finite", i, k.f);
                    break;
                default: return fmt::format("constant {}: unknown kind {}", i, static_cast<unsigned>(k.kind));
            }
        }
        return {};
    }

    std::string shapes() {
        for (size_t i = 0; i < m_.shapes.size(); ++i)
            if (const std::string* dup = firstDuplicate(m_.shapes[i]))
                return fmt::format("shape {}: field {} appears twice", i, quoteName(*dup));
        return {};
    }

    std::string types() {
        // Depth as runtime/types.h computes it: lists and records nest, a record with no fields
        // counts as one level.
        std::vector<uint32_t> depth(m_.types.size(), 0);
        for (size_t i = 0; i < m_.types.size(); ++i) {
            const TypeEntry& t = m_.types[i];
            auto earlier = [&](uint32_t ref) { return ref < i; };
            std::string where = fmt::format("type {} ({})", i, typeKindName(t.kind));
            if (t.kind > TypeKind::Record)
                return fmt::format("type {}: unknown kind {}", i, static_cast<unsigned>(t.kind));
            // Fields that belong to another kind must be empty, so the file says one thing only.
            if (!t.options.empty() && t.kind != TypeKind::Enum && t.kind != TypeKind::Str)
                return where + ": has enum options";
            if (t.kind != TypeKind::List && (t.elem != 0 || t.max))
                return where + ": has a list element type or bound";
            if (!t.fields.empty() && t.kind != TypeKind::Record) return where + ": has record fields";
            switch (t.kind) {
                case TypeKind::Enum:
                    if (t.options.empty()) return where + ": has no options";
                    if (const std::string* dup = firstDuplicate(t.options))
                        return fmt::format("{}: option {} appears twice", where, quoteName(*dup));
                    break;
                case TypeKind::List:
                    if (!earlier(t.elem))
                        return fmt::format("{}: element type {} is not an earlier entry", where, t.elem);
                    if (t.max && *t.max < 0) return fmt::format("{}: negative bound {}", where, *t.max);
                    depth[i] = depth[t.elem] + 1;
                    break;
                case TypeKind::Record:
                    depth[i] = 1;
                    for (const auto& [name, type] : t.fields) {
                        if (!earlier(type))
                            return fmt::format("{}: field {} has type {}, not an earlier entry", where,
                                               quoteName(name), type);
                        depth[i] = std::max(depth[i], depth[type] + 1);
                    }
                    if (auto dup = firstDuplicate(t.fields, [](const auto& f) -> const std::string& { return f.first; }))
                        return fmt::format("{}: field {} appears twice", where, quoteName(*dup));
                    break;
                default: break;
            }
            if (depth[i] > kMaxTypeDepth)
                return fmt::format("{}: nested {} levels deep (the limit is {})", where, depth[i], kMaxTypeDepth);
        }
        return {};
    }

    std::string functions() {
        if (m_.functions.size() > kMaxFunctions)
            return fmt::format("{} functions (the limit is {})", m_.functions.size(), kMaxFunctions);
        if (auto dup = firstDuplicate(m_.functions, [](const Function& f) -> const std::string& { return f.name; }))
            return fmt::format("function {} is defined twice", quoteName(*dup));
        for (uint32_t i = 0; i < m_.functions.size(); ++i) {
            const Function& f = m_.functions[i];
            std::string where = "function " + fnName(i);
            if (f.numRegs > kMaxRegisters)
                return fmt::format("{}: {} registers (the limit is {})", where, f.numRegs, kMaxRegisters);
            if (f.numRegs < f.paramNames.size())
                return fmt::format("{}: {} registers cannot hold its {} parameters", where, f.numRegs,
                                   f.paramNames.size());
            if (f.paramTypes.size() != f.paramNames.size())
                return fmt::format("{}: {} parameter names but {} parameter types", where, f.paramNames.size(),
                                   f.paramTypes.size());
            for (size_t p = 0; p < f.paramTypes.size(); ++p)
                if (!validType(m_, f.paramTypes[p]))
                    return fmt::format("{}: parameter {} has type {}, which does not exist ({} types)", where,
                                       quoteName(f.paramNames[p]), f.paramTypes[p], m_.types.size());
            if (!validTypeOrNone(m_, f.returnType))
                return fmt::format("{}: return type {} does not exist ({} types)", where, f.returnType,
                                   m_.types.size());
            if (f.code.empty()) return where + ": has no code";
            if (f.code.size() > kMaxInstructions)
                return fmt::format("{}: {} instructions (the limit is {})", where, f.code.size(), kMaxInstructions);
            if (f.spans.size() != f.code.size())
                return fmt::format("{}: {} debug spans for {} instructions", where, f.spans.size(), f.code.size());
            Op last = f.code.back().op;
            if (last != Op::RET && last != Op::RETUNIT && last != Op::JMP)
                return where + ": the last instruction is not RET, RETUNIT or JMP (execution would run off the end)";
        }
        return {};
    }

    std::string agents() {
        if (auto dup = firstDuplicate(m_.agents, [](const Agent& a) -> const std::string& { return a.name; }))
            return fmt::format("agent {} is declared twice", quoteName(*dup));
        for (const Agent& a : m_.agents)
            if (a.maxCalls && *a.maxCalls < 0)
                return fmt::format("agent {}: negative max_calls {}", quoteName(a.name), *a.maxCalls);
        return {};
    }

    std::string sites() {
        if (auto dup = firstDuplicate(m_.sites, [](const Site& s) -> const std::string& { return s.id; }))
            return fmt::format("site {} appears twice", quoteName(*dup));
        std::unordered_set<std::string_view> agentNames;
        for (const Agent& a : m_.agents) agentNames.insert(a.name);
        for (size_t i = 0; i < m_.sites.size(); ++i) {
            const Site& s = m_.sites[i];
            std::string where = fmt::format("site {} {}", i, quoteName(s.id));
            if (s.kind > SiteKind::Agent)
                return fmt::format("{}: unknown kind {}", where, static_cast<unsigned>(s.kind));
            if (s.function >= m_.functions.size())
                return fmt::format("{}: function {} does not exist ({} functions)", where, s.function,
                                   m_.functions.size());
            if (s.kind != SiteKind::Capability && s.argNames.size() != 2)
                return fmt::format("{}: a model call takes 2 arguments (prompt, context), not {}", where,
                                   s.argNames.size());
            if (s.kind == SiteKind::Agent && !agentNames.count(s.agent))
                return fmt::format("{}: agent {} is not declared", where, quoteName(s.agent));
            if (!validTypeOrNone(m_, s.askType))
                return fmt::format("{}: output type {} does not exist ({} types)", where, s.askType, m_.types.size());
            if (s.timeoutSeconds && !(std::isfinite(*s.timeoutSeconds) && *s.timeoutSeconds >= 0))
                return fmt::format("{}: timeout {} is not a finite number of seconds", where, *s.timeoutSeconds);
        }
        return {};
    }

    std::string tests() {
        if (auto dup = firstDuplicate(m_.tests, [](const TestCase& t) -> const std::string& { return t.name; }))
            return fmt::format("test {} is defined twice", quoteName(*dup));
        for (const TestCase& t : m_.tests) {
            if (t.function >= m_.functions.size())
                return fmt::format("test {}: function {} does not exist ({} functions)", quoteName(t.name), t.function,
                                   m_.functions.size());
            if (!m_.functions[t.function].paramNames.empty())
                return fmt::format("test {}: function {} takes parameters; a test's takes none", quoteName(t.name),
                                   fnName(t.function));
        }
        return {};
    }

    // ---- instructions

    // Checks one operand that is not a window; the window is checked once its length is known.
    std::string operand(const Function& f, uint32_t pc, const Instr& in, char field, Operand kind, uint32_t value) {
        auto constantOf = [&](Constant::Kind want, const char* wantName) -> std::string {
            if (value >= m_.constants.size())
                return fmt::format("operand {}: constant {} does not exist ({} constants)", field, value,
                                   m_.constants.size());
            if (m_.constants[value].kind != want)
                return fmt::format("operand {}: constant {} is not {}", field, value, wantName);
            return {};
        };
        switch (kind) {
            case Operand::None:
                if (value != 0) return fmt::format("operand {} is unused but holds {}", field, value);
                return {};
            case Operand::Reg:
            case Operand::Dst:
                if (value >= f.numRegs)
                    return fmt::format("operand {}: register {} is outside the frame ({} registers)", field, value,
                                       f.numRegs);
                return {};
            case Operand::Win:
            case Operand::Imm: return {};
            case Operand::KBx:
                if (value >= m_.constants.size())
                    return fmt::format("operand {}: constant {} does not exist ({} constants)", field, value,
                                       m_.constants.size());
                return {};
            case Operand::KStr:
            case Operand::KStrBx: return constantOf(Constant::Kind::Str, "a Str");
            case Operand::KIntBx: return constantOf(Constant::Kind::Int, "an Int");
            case Operand::JumpBx:
                if (value >= f.code.size())
                    return fmt::format("jump target {} is outside the function ({} instructions)", value,
                                       f.code.size());
                // Remit's only loops are `for` loops, whose back-edge is FORLOOP. Keeping every
                // other jump forward means each backward jump charges steps, so even a forged
                // file cannot loop without spending its step budget.
                if (in.op != Op::FORLOOP && value <= pc)
                    return fmt::format("{} jumps backward to {}; only FORLOOP may", opInfo(in.op).name, value);
                return {};
            case Operand::Skip:
                if (uint64_t(pc) + 1 + value >= f.code.size())
                    return fmt::format("operand {}: skipping {} instructions leaves the function ({} instructions)",
                                       field, value, f.code.size());
                return {};
            case Operand::Fn:
                if (value >= m_.functions.size())
                    return fmt::format("operand {}: function {} does not exist ({} functions)", field, value,
                                       m_.functions.size());
                return {};
            case Operand::Shape:
                if (value >= m_.shapes.size())
                    return fmt::format("operand {}: shape {} does not exist ({} shapes)", field, value,
                                       m_.shapes.size());
                return {};
            case Operand::Builtin:
                if (value >= kBuiltinCount)
                    return fmt::format("operand {}: builtin {} does not exist ({} builtins)", field, value,
                                       kBuiltinCount);
                return {};
            case Operand::Site:
                if (value >= m_.sites.size())
                    return fmt::format("operand {}: site {} does not exist ({} sites)", field, value, m_.sites.size());
                return {};
            case Operand::Branch:
                // The VM takes the following JMP's target without dispatching it, so that JMP must
                // exist; it is verified as any JMP (forward, inside the function), which keeps
                // FORLOOP the only backward jump.
                if (value != 0) return fmt::format("operand {} is unused but holds {}", field, value);
                if (uint64_t(pc) + 1 >= f.code.size() || f.code[pc + 1].op != Op::JMP)
                    return fmt::format("{} must be followed by a JMP", opInfo(in.op).name);
                return {};
        }
        return fmt::format("operand {}: unknown operand kind", field);
    }

    // The length of the instruction's register window (its operands are already checked).
    uint32_t windowLength(const Instr& in) const {
        const OpInfo& info = opInfo(in.op);
        switch (info.window) {
            case Window::W0: return in.op == Op::CLEAR ? in.b : 0;
            case Window::WCount: return in.c;
            case Window::WShape: return static_cast<uint32_t>(m_.shapes[in.c].size());
            case Window::WFn: return static_cast<uint32_t>(m_.functions[in.b].paramNames.size());
            case Window::WBuiltin: return kBuiltins[in.c].argc;
            case Window::WSite: return static_cast<uint32_t>(m_.sites[in.c].argNames.size());
            case Window::WFor: return kWForLength;
        }
        return 0;
    }

    std::string instruction(uint32_t fnIndex, uint32_t pc) {
        const Function& f = m_.functions[fnIndex];
        const Instr& in = f.code[pc];
        if (static_cast<size_t>(in.op) >= kOpCount)
            return fmt::format("unknown opcode {}", static_cast<unsigned>(in.op));
        if (in.reserved != 0) return fmt::format("reserved byte is {}, not 0", in.reserved);
        const OpInfo& info = opInfo(in.op);
        std::string error = operand(f, pc, in, 'A', info.a, in.a);
        if (error.empty()) error = operand(f, pc, in, 'B', info.b, isBxOperand(info.b) ? in.bx() : in.b);
        // A Bx operand's high half is C, which the table declares None.
        if (error.empty() && !isBxOperand(info.b)) error = operand(f, pc, in, 'C', info.c, in.c);
        if (!error.empty()) return error;

        char winField = info.a == Operand::Win ? 'A' : info.b == Operand::Win ? 'B' : info.c == Operand::Win ? 'C' : 0;
        if (winField) {
            uint32_t start = winField == 'A' ? in.a : winField == 'B' ? in.b : in.c;
            uint64_t end = uint64_t{start} + windowLength(in);
            if (end > f.numRegs)
                return fmt::format("operand {}: window r{}..r{} is outside the frame ({} registers)", winField, start,
                                   end - 1, f.numRegs);
        }
        if (in.op == Op::CALLCAP || in.op == Op::ASKMODEL) {
            const Site& s = m_.sites[in.c];
            std::string site = fmt::format("site {} {}", in.c, quoteName(s.id));
            if (in.op == Op::CALLCAP && s.kind != SiteKind::Capability)
                return fmt::format("CALLCAP uses {}, which is not a capability call", site);
            if (in.op == Op::ASKMODEL && s.kind == SiteKind::Capability)
                return fmt::format("ASKMODEL uses {}, which is a capability call", site);
            if (s.function != fnIndex)
                return fmt::format("{} belongs to function {}, not this one", site, fnName(s.function));
            // The VM resumes a failed call with a fallback at the JMP over the fallback's code.
            if (s.hasFallback && (pc + 1 >= f.code.size() || f.code[pc + 1].op != Op::JMP))
                return fmt::format("{} has a fallback, but the next instruction is not a JMP", site);
        }
        return {};
    }

    std::string code() {
        for (uint32_t i = 0; i < m_.functions.size(); ++i) {
            const Function& f = m_.functions[i];
            for (uint32_t pc = 0; pc < f.code.size(); ++pc) {
                std::string error = instruction(i, pc);
                if (!error.empty()) return fmt::format("function {} instruction {}: {}", fnName(i), pc, error);
            }
        }
        return {};
    }

    // ---- calls: acyclic, and the register stack the deepest chain needs

    std::string callGraph() {
        const uint32_t n = static_cast<uint32_t>(m_.functions.size());
        struct Call {
            uint32_t callee;
            uint32_t frameStart;
        };
        // The calls of every function, flattened: calls[first[f] .. first[f+1]).
        std::vector<uint32_t> first(n + 1, 0);
        std::vector<Call> calls;
        for (uint32_t f = 0; f < n; ++f) {
            first[f] = static_cast<uint32_t>(calls.size());
            for (const Instr& in : m_.functions[f].code)
                if (in.op == Op::CALL) calls.push_back({in.b, in.c});
        }
        first[n] = static_cast<uint32_t>(calls.size());

        // Iterative depth-first search. A callee still on the path is a cycle; a function's need
        // is computed when it leaves the path, after all its callees (a topological order).
        enum : uint8_t { kUnseen, kOnPath, kDone };
        std::vector<uint8_t> state(n, kUnseen);
        std::vector<uint64_t> need(n, 0);
        struct Frame {
            uint32_t fn;
            uint32_t next;  // index into `calls`
        };
        std::vector<Frame> path;
        uint64_t deepest = 0;
        for (uint32_t root = 0; root < n; ++root) {
            if (state[root] != kUnseen) continue;
            state[root] = kOnPath;
            path.push_back({root, first[root]});
            while (!path.empty()) {
                Frame& top = path.back();
                if (top.next < first[top.fn + 1]) {
                    uint32_t callee = calls[top.next++].callee;
                    if (state[callee] == kOnPath) return cycleError(path, callee);
                    if (state[callee] == kUnseen) {
                        state[callee] = kOnPath;
                        path.push_back({callee, first[callee]});  // invalidates `top`
                    }
                    continue;
                }
                uint32_t f = top.fn;
                uint64_t frameNeed = m_.functions[f].numRegs;
                for (uint32_t c = first[f]; c < first[f + 1]; ++c)
                    frameNeed = std::max(frameNeed, uint64_t{calls[c].frameStart} + need[calls[c].callee]);
                if (frameNeed > kMaxStackRegisters)
                    return fmt::format("function {}: its deepest chain of calls needs {} registers (the limit is {})",
                                       fnName(f), frameNeed, kMaxStackRegisters);
                need[f] = frameNeed;
                deepest = std::max(deepest, frameNeed);
                state[f] = kDone;
                path.pop_back();
            }
        }
        m_.stackRegisters = static_cast<uint32_t>(deepest);
        return {};
    }

    // "calls form a cycle: 'a' -> 'b' -> 'a' (Remit has no recursion)", the middle cut when long.
    template <class Path>
    std::string cycleError(const Path& path, uint32_t callee) const {
        size_t from = path.size() - 1;
        while (path[from].fn != callee) --from;
        std::vector<uint32_t> cycle;
        for (size_t i = from; i < path.size(); ++i) cycle.push_back(path[i].fn);
        cycle.push_back(callee);
        constexpr size_t kShown = 8;
        std::string text;
        for (size_t i = 0; i < cycle.size(); ++i) {
            if (cycle.size() > kShown && i == kShown / 2) {
                text += fmt::format(" -> ... ({} more)", cycle.size() - kShown);
                i = cycle.size() - kShown / 2;
            }
            text += (i ? " -> " : "") + fnName(cycle[i]);
        }
        return fmt::format("calls form a cycle: {} (Remit has no recursion)", text);
    }
};

}  // namespace

std::string_view utf8Prefix(std::string_view text, size_t maxBytes) {
    if (text.size() <= maxBytes) return text;
    size_t end = maxBytes;
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xc0) == 0x80) --end;  // a continuation byte
    return text.substr(0, end);
}

std::string quoteName(std::string_view name) {
    constexpr size_t kMaxShown = 80;
    std::string_view shown = utf8Prefix(name, kMaxShown);
    std::string out = "'";
    for (char ch : shown) {
        auto c = static_cast<unsigned char>(ch);
        if (c == '\'' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
            out += fmt::format("\\x{:02x}", c);
        } else {
            out += static_cast<char>(c);
        }
    }
    if (shown.size() < name.size()) out += "...";
    return out + "'";
}

std::string verifyModule(Module& module) { return Verifier(module).run(); }

}  // namespace remit
