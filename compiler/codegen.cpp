#include "compiler/codegen.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>

#include "compiler/formatter.h"
#include "compiler/manifest.h"
#include "runtime/builtins.h"

namespace remit {

using namespace ast;
using ValueType = remit::TypeKind;  // ast has a TypeKind of its own (how a type is written)

namespace {

// Thrown inside the generator when a limit of the bytecode format is exceeded; caught at the
// entry point and turned into CodegenResult::error. (Never escapes generateModule.)
struct LimitExceeded {
    std::string message;
};

constexpr uint16_t kNoReg = 0xffff;

bool isKind(TypeRef t, ValueType k) { return t && t->kind == k; }
bool isNumberType(TypeRef t) { return t && t->isNumber(); }

// Expressions that write their destination before they have read everything they need (a
// branch's value, a loop's growing list, `and`/`or`'s left side): an assignment to a variable
// they also read must go through a temporary.
bool writesDestinationEarly(const Expr& e) {
    if (e.kind == ExprKind::If || e.kind == ExprKind::For || e.kind == ExprKind::Match) return true;
    if (e.kind == ExprKind::Binary) {
        BinaryOp op = e.as<BinaryExpr>().op;
        return op == BinaryOp::And || op == BinaryOp::Or;
    }
    return false;
}

// Calls visit(expr, loopDepth) for every expression under `b`, parents before children; the body
// and filter of a `for` are one loop deeper.
template <class Visit>
void walkExpr(const Expr& e, int depth, Visit& visit);
template <class Visit>
void walkBlock(const Block& b, int depth, Visit& visit) {
    for (const StmtPtr& s : b.stmts)
        if (s->value) walkExpr(*s->value, depth, visit);
}
template <class Visit>
void walkExpr(const Expr& e, int depth, Visit& visit) {
    visit(e, depth);
    switch (e.kind) {
        case ExprKind::Interp:
            for (const InterpPart& p : e.as<InterpExpr>().parts)
                if (p.expr) walkExpr(*p.expr, depth, visit);
            break;
        case ExprKind::Field: walkExpr(*e.as<FieldExpr>().object, depth, visit); break;
        case ExprKind::Index:
            walkExpr(*e.as<IndexExpr>().object, depth, visit);
            walkExpr(*e.as<IndexExpr>().index, depth, visit);
            break;
        case ExprKind::List:
            for (const ExprPtr& item : e.as<ListExpr>().items) walkExpr(*item, depth, visit);
            break;
        case ExprKind::Record:
            for (const RecordField& f : e.as<RecordExpr>().fields) walkExpr(*f.value, depth, visit);
            break;
        case ExprKind::Unary: walkExpr(*e.as<UnaryExpr>().operand, depth, visit); break;
        case ExprKind::Binary:
            walkExpr(*e.as<BinaryExpr>().left, depth, visit);
            walkExpr(*e.as<BinaryExpr>().right, depth, visit);
            break;
        case ExprKind::Call: {
            const auto& c = e.as<CallExpr>();
            for (const CallArg& a : c.args) walkExpr(*a.value, depth, visit);
            if (c.fallback) walkExpr(*c.fallback, depth, visit);
            break;
        }
        case ExprKind::If: {
            const auto& i = e.as<IfExpr>();
            walkExpr(*i.cond, depth, visit);
            walkBlock(*i.thenBlock, depth, visit);
            if (i.elseBlock) walkBlock(*i.elseBlock, depth, visit);
            if (i.elseIf) walkExpr(*i.elseIf, depth, visit);
            break;
        }
        case ExprKind::For: {
            const auto& f = e.as<ForExpr>();
            walkExpr(*f.iter, depth, visit);
            if (f.filter) walkExpr(*f.filter, depth + 1, visit);
            walkBlock(*f.body, depth + 1, visit);
            break;
        }
        case ExprKind::Match: {
            const auto& m = e.as<MatchExpr>();
            walkExpr(*m.subject, depth, visit);
            for (const MatchArm& a : m.arms) walkBlock(*a.body, depth, visit);
            break;
        }
        default: break;
    }
}

// The constant a literal denotes, as a key for hoisting ("" for anything else).
std::string literalKey(const Expr& e) {
    switch (e.kind) {
        case ExprKind::Int: return fmt::format("i{}", e.as<IntLit>().value);
        case ExprKind::Float: return fmt::format("f{}", std::bit_cast<uint64_t>(e.as<FloatLit>().value));
        case ExprKind::Str: return "s" + e.as<StrLit>().value;
        default: return {};
    }
}

// An Int literal that fits an instruction's 16-bit immediate operand (ADDIMM, IFEQIMM, ...): the
// checker has no negative literals (`-1` is a negation), so 0 .. 65535.
std::optional<uint16_t> smallIntLiteral(const Expr& e) {
    if (e.kind != ExprKind::Int) return std::nullopt;
    int64_t v = e.as<IntLit>().value;
    if (v < 0 || v > 0xffff) return std::nullopt;
    return static_cast<uint16_t>(v);
}

// Does evaluating `e` run statements (which may assign variables)? Only blocks contain
// statements, and only if/for/match contain blocks.
bool containsBlocks(const Expr& e) {
    bool found = false;
    auto visit = [&](const Expr& x, int) {
        found = found || x.kind == ExprKind::If || x.kind == ExprKind::For || x.kind == ExprKind::Match;
    };
    walkExpr(e, 0, visit);
    return found;
}

// Does running `b` assign the variable `name`, in its own statements or in a block nested in them?
bool assignsVariable(const Block& b, const std::string& name) {
    auto direct = [&](const Block& block) {
        for (const StmtPtr& s : block.stmts)
            if (s->kind == StmtKind::Assign && s->name == name) return true;
        return false;
    };
    bool found = direct(b);
    auto visit = [&](const Expr& e, int) {
        if (found) return;
        switch (e.kind) {
            case ExprKind::If: {
                const auto& i = e.as<IfExpr>();
                found = direct(*i.thenBlock) || (i.elseBlock && direct(*i.elseBlock));
                break;
            }
            case ExprKind::For: found = direct(*e.as<ForExpr>().body); break;
            case ExprKind::Match:
                for (const MatchArm& a : e.as<MatchExpr>().arms) found = found || direct(*a.body);
                break;
            default: break;
        }
    };
    walkBlock(b, 0, visit);
    return found;
}

// Does `e` name `name` anywhere: reading it, or a statement of one of its blocks assigning or
// declaring it? (A declaration only shadows, but counting it keeps this simple and safe.)
bool mentionsName(const Expr& e, const std::string& name) {
    bool found = false;
    auto inBlock = [&](const Block& b) {
        for (const StmtPtr& s : b.stmts)
            if ((s->kind == StmtKind::Assign || s->kind == StmtKind::Let) && s->name == name) found = true;
    };
    auto visit = [&](const Expr& x, int) {
        switch (x.kind) {
            case ExprKind::Name: found = found || x.as<NameExpr>().name == name; break;
            case ExprKind::If: {
                const auto& i = x.as<IfExpr>();
                inBlock(*i.thenBlock);
                if (i.elseBlock) inBlock(*i.elseBlock);
                break;
            }
            case ExprKind::For:
                found = found || x.as<ForExpr>().var == name;
                inBlock(*x.as<ForExpr>().body);
                break;
            case ExprKind::Match:
                for (const MatchArm& a : x.as<MatchExpr>().arms) inBlock(*a.body);
                break;
            default: break;
        }
    };
    walkExpr(e, 0, visit);
    return found;
}

class Generator {
public:
    Generator(const Program& program, const CheckResult& check, Module& module)
        : prog_(program), check_(check), module_(module) {}

    void run();

private:
    const Program& prog_;
    const CheckResult& check_;
    Module& module_;

    std::map<int64_t, uint32_t> intConstants_;
    std::map<uint64_t, uint32_t> floatConstants_;  // by bit pattern, so -0.0 and 0.0 stay apart
    std::unordered_map<std::string, uint32_t> strConstants_;
    std::map<std::vector<std::string>, uint16_t> shapes_;
    std::unordered_map<TypeRef, uint32_t> types_;
    std::map<std::string, uint16_t, std::less<>> functionIndex_;

    // ---- per function
    struct Local {
        std::string name;
        uint16_t reg;
        std::optional<int64_t> declaredMax;  // a var's annotated list bound (R0113 when exceeded)
        // What the code generator inferred where the checker's type is open (below): the element
        // type of a `var xs = []`, and the type of a loop variable over such a list.
        TypeRef elemHint = nullptr;
        TypeRef typeHint = nullptr;
    };

    // ---- element types of `var xs = []` from their uses. The checker types such a var as
    // List[Never] (its elements are open: any list can be assigned to it), so its loop variable
    // and arithmetic on it would get the generic opcodes and CLEARs. When every assignment to the
    // var (within its function, where its name is declared once) gives it a list of one scalar
    // type, that type picks the typed opcodes. A hint is only ever a choice of opcode: the typed
    // opcodes check their operands and fall back to the generic operation, so a wrong hint could
    // cost speed, never change a result.
    std::unordered_map<std::string, TypeRef> listHints_;
    void collectListHints(const FnDecl* fn, const Block& body);
    TypeRef hinted(const Expr& e) const {
        TypeRef t = typeOf(e);
        if (t && t->kind != ValueType::Never) return t;
        if (e.kind == ExprKind::Name) {
            if (const Local* l = findLocal(e.as<NameExpr>().name); l && l->typeHint) return l->typeHint;
        } else if (e.kind == ExprKind::Binary) {
            const auto& b = e.as<BinaryExpr>();
            bool arith = b.op == BinaryOp::Add || b.op == BinaryOp::Sub || b.op == BinaryOp::Mul || b.op == BinaryOp::Mod;
            TypeRef l = hinted(*b.left), r = hinted(*b.right);
            if (arith && isKind(l, ValueType::Int) && isKind(r, ValueType::Int)) return l;
        }
        return t;
    }
    struct Loop {
        std::vector<size_t> breaks;  // JMPs to patch to the loop's exit
        size_t pcMark = 0;           // pcSaves_.size() in the loop's body: the PCENTERs a break jumps out of
    };
    Function* fn_ = nullptr;
    uint32_t fnIndex_ = 0;
    bool inheritsPc_ = false;  // the function may run under a caller's pc (anything but main and tests)
    int pcDepth_ = 0;          // enclosing constructs that raised the pc (emitted a PCENTER)
    std::vector<bool> mayHoldHeap_;  // per register: may hold a Str, List or record (CLEAR frees those)
    // Literals that are operands inside loops, loaded once into their own register when the
    // function starts (by literalKey). Those registers are never written again.
    std::unordered_map<std::string, uint16_t> hoisted_;
    static constexpr size_t kMaxHoisted = 32;

    // The function a call runs when it is to be inlined, or null.
    const FnDecl* inlinedCallee(const CallExpr& e) {
        auto it = check_.calls.find(static_cast<uint32_t>(e.id));
        if (it == check_.calls.end() || it->second.target != CallTarget::Function) return nullptr;
        const FnDecl* fn = prog_.findFn(it->second.name);
        return fn && canInline(*fn) ? fn : nullptr;
    }
    void hoistLoopConstants(const Block& body) {
        hoisted_.clear();
        std::vector<const Expr*> found;
        std::unordered_map<std::string, bool> seen;
        std::function<void(const Expr&, int)> visit = [&](const Expr& e, int depth) {
            if (depth == 0) return;
            // The literals of a callee inlined into the loop are operands inside it too.
            if (e.kind == ExprKind::Call) {
                if (const FnDecl* callee = inlinedCallee(e.as<CallExpr>())) walkBlock(*callee->body, depth, visit);
                return;
            }
            if (e.kind != ExprKind::Binary) return;
            const auto& b = e.as<BinaryExpr>();
            if (b.op == BinaryOp::And || b.op == BinaryOp::Or) return;
            for (const Expr* side : {b.left.get(), b.right.get()}) {
                // `n + 1` on an Int compiles to ADDIMM (binary()): its literal needs no register.
                if (side == b.right.get() && (b.op == BinaryOp::Add || b.op == BinaryOp::Sub) &&
                    smallIntLiteral(*side) && isKind(typeOf(*b.left), ValueType::Int))
                    continue;
                std::string key = literalKey(*side);
                if (!key.empty() && seen.size() < kMaxHoisted && seen.emplace(key, true).second) found.push_back(side);
            }
        };
        walkBlock(body, 0, visit);
        for (const Expr* literal : found) {
            uint16_t reg = allocReg();
            expr(*literal, reg);
            hoisted_[literalKey(*literal)] = reg;
        }
    }
    std::vector<Local> locals_;
    size_t localsFloor_ = 0;  // findLocal looks no lower: an inlined callee sees only its own names
    std::vector<Loop> loops_;

    // ---- inlining (docs/bytecode.md "Inlined calls"). A call of a small function that calls no
    // other program function and no capability or model is compiled in place of its CALL: its
    // parameters are bound to the argument registers (a local variable's own register when the
    // argument names one), a `return` writes the call's destination and jumps to the end, and the
    // callee's spans stay on its instructions, so errors point into the callee as before. Never in
    // strict flows, where a callee's guarded exits raise the pc for the rest of the callee only.
    struct Inline {
        uint16_t dest;                // the call's destination
        size_t pcMark;                // pcSaves_.size() at the call: a return restores the pc there
        std::vector<size_t> returns;  // JMPs to the end, to be patched
        bool destIsParameter = false; // dest is a register a parameter is bound to (`x = f(x)`)
        uint32_t mark = 0;            // the call's first register: the callee's own are at or above it
    };
    std::vector<Inline> inlines_;
    std::unordered_map<const FnDecl*, bool> inlinable_;
    static constexpr size_t kMaxInlineNodes = 80;  // expressions and statements of the callee's body

    bool canInline(const FnDecl& fn);
    void inlineCall(const CallExpr& e, const FnDecl& fn, uint16_t dest);
    void inlineReturn(const Stmt& s);
    uint32_t nextReg_ = 0;
    uint32_t peakReg_ = 0;  // the highest nextReg_ seen since it was last reset (a loop body's temporaries)
    Span span_;             // the span of the construct being compiled, given to each instruction

    // ------------------------------------------------------------ module tables

    uint32_t addConstant(Constant c) {
        if (module_.constants.size() >= 0xffffffffu) throw LimitExceeded{"the program has too many constants"};
        module_.constants.push_back(std::move(c));
        return static_cast<uint32_t>(module_.constants.size() - 1);
    }
    uint32_t intConstant(int64_t v) {
        auto [it, fresh] = intConstants_.try_emplace(v, 0);
        if (fresh) it->second = addConstant(Constant{Constant::Kind::Int, v, 0, {}});
        return it->second;
    }
    uint32_t floatConstant(double v) {
        auto [it, fresh] = floatConstants_.try_emplace(std::bit_cast<uint64_t>(v), 0);
        if (fresh) it->second = addConstant(Constant{Constant::Kind::Float, 0, v, {}});
        return it->second;
    }
    uint32_t strConstant(const std::string& v) {
        auto [it, fresh] = strConstants_.try_emplace(v, 0);
        if (fresh) it->second = addConstant(Constant{Constant::Kind::Str, 0, 0, v});
        return it->second;
    }
    // Operands that are 16 bits wide (GETFIELD's C, JMPNEK's B) take a Str constant by index.
    uint16_t strConstant16(const std::string& v) {
        uint32_t k = strConstant(v);
        if (k > 0xffff) throw LimitExceeded{"the program has more than 65,535 constants before a field name"};
        return static_cast<uint16_t>(k);
    }
    uint16_t shapeIndex(std::vector<std::string> names) {
        auto [it, fresh] = shapes_.try_emplace(names, 0);
        if (fresh) {
            if (module_.shapes.size() >= 0xffff) throw LimitExceeded{"the program has too many record shapes"};
            it->second = static_cast<uint16_t>(module_.shapes.size());
            module_.shapes.push_back(std::move(names));
        }
        return it->second;
    }
    uint32_t typeIndex(TypeRef t) {
        if (!t) return kNoType;
        if (auto it = types_.find(t); it != types_.end()) return it->second;
        TypeEntry entry;
        entry.kind = t->kind;
        entry.name = t->name;
        if (t->kind == ValueType::Enum) entry.options = t->options;
        if (t->kind == ValueType::List) {
            entry.elem = typeIndex(t->elem);
            entry.max = t->max;
        }
        for (const RecordFieldType& f : t->fields) entry.fields.emplace_back(f.name, typeIndex(f.type));
        module_.types.push_back(std::move(entry));
        auto index = static_cast<uint32_t>(module_.types.size() - 1);
        types_[t] = index;
        return index;
    }
    TypeRef typeOf(const Expr& e) const { return nodeType(e.id); }
    TypeRef nodeType(NodeId id) const {
        auto i = static_cast<size_t>(id);
        return i < check_.exprTypes.size() ? check_.exprTypes[i] : nullptr;
    }
    const ResolvedCall& resolved(const CallExpr& e) const {
        auto it = check_.calls.find(static_cast<uint32_t>(e.id));
        if (it == check_.calls.end()) throw LimitExceeded{fmt::format("internal: call at line {} was not resolved", e.span.line)};
        return it->second;
    }

    // ------------------------------------------------------------ emitting

    size_t emit(Instr instr) {
        fn_->code.push_back(instr);
        fn_->spans.push_back(span_);
        return fn_->code.size() - 1;
    }
    size_t emitABC(Op op, uint32_t a, uint32_t b = 0, uint32_t c = 0) {
        return emit(Instr::abc(op, static_cast<uint16_t>(a), static_cast<uint16_t>(b), static_cast<uint16_t>(c)));
    }
    size_t emitABx(Op op, uint32_t a, uint32_t bx) { return emit(Instr::abx(op, static_cast<uint16_t>(a), bx)); }
    size_t here() const { return fn_->code.size(); }
    void patchJump(size_t at, size_t target) {
        Instr& i = fn_->code[at];
        i = Instr::abx(i.op, i.a, static_cast<uint32_t>(target));
    }
    size_t emitJump(Op op, uint32_t a = 0) { return emitABx(op, a, 0); }
    // Does an instruction from `from` on go to `target` (a jump, a match arm's skip)?
    bool jumpsTo(size_t from, size_t target) const {
        for (size_t i = from; i < fn_->code.size(); ++i) {
            const Instr& in = fn_->code[i];
            const OpInfo& info = opInfo(in.op);
            if ((info.b == Operand::JumpBx && in.bx() == target) || (info.c == Operand::Skip && i + 1 + in.c == target))
                return true;
        }
        return false;
    }

    struct SpanScope {
        Generator& g;
        Span saved;
        SpanScope(Generator& gen, const Span& s) : g(gen), saved(gen.span_) { g.span_ = s; }
        ~SpanScope() { g.span_ = saved; }
    };

    // ------------------------------------------------------------ registers

    static bool mayBeHeap(TypeRef t) {
        return !t || !(t->kind == ValueType::Unit || t->kind == ValueType::Bool || t->kind == ValueType::Int ||
                       t->kind == ValueType::Float);
    }
    void noteHeap(uint16_t reg, TypeRef t) {
        if (reg == kNoReg || !mayBeHeap(t)) return;
        if (mayHoldHeap_.size() <= reg) mayHoldHeap_.resize(reg + 1u, false);
        mayHoldHeap_[reg] = true;
    }
    // CLEAR for the registers in [from, to) that may hold heap values (none: no instruction).
    void clearHeapRegisters(uint32_t from, uint32_t to) {
        uint32_t first = to, last = from;
        for (uint32_t r = from; r < to && r < mayHoldHeap_.size(); ++r)
            if (mayHoldHeap_[r]) {
                first = std::min(first, r);
                last = r + 1;
            }
        if (first < last) emitABC(Op::CLEAR, first, last - first);
    }

    // Does running this code read the pc? Only writes to variables (which gain the pc's tags),
    // `return` (likewise), and calls (a callee inherits the pc; a host call reports it) do; for
    // anything else the compiler leaves out the PCENTER/PCLEAVE pair.
    // Strict flows: a break reads the pc too (its pc is carried past the loop).
    bool writesOrReturns(const Block& b) const {
        for (const StmtPtr& s : b.stmts)
            if (s->kind == StmtKind::Assign || s->kind == StmtKind::Return || (s->kind == StmtKind::Let && s->isVar) ||
                (strict_ && s->kind == StmtKind::Break))
                return true;
        return false;
    }
    // A walkExpr visitor setting `found` on a call that is not a builtin, or on an if, for or
    // match whose own blocks write a variable or return (nested blocks are visited in turn), or,
    // in strict flows, on any for.
    auto pcReader(bool& found) const {
        return [this, &found](const Expr& e, int) {
            switch (e.kind) {
                case ExprKind::Call: {
                    auto it = check_.calls.find(static_cast<uint32_t>(e.id));
                    found = found || it == check_.calls.end() || it->second.target != CallTarget::Builtin;
                    break;
                }
                case ExprKind::If: {
                    const auto& i = e.as<IfExpr>();
                    found = found || writesOrReturns(*i.thenBlock) || (i.elseBlock && writesOrReturns(*i.elseBlock));
                    break;
                }
                // Strict flows: a for's list carries the pc it ends under (TAINTPC).
                case ExprKind::For: found = found || strict_ || writesOrReturns(*e.as<ForExpr>().body); break;
                case ExprKind::Match:
                    for (const MatchArm& a : e.as<MatchExpr>().arms) found = found || writesOrReturns(*a.body);
                    break;
                default: break;
            }
        };
    }
    // Did the checker prove that no tag can reach `e`'s value, in any context? Then a PCENTER on it
    // would leave the pc as it is, and is left out with its PCLEAVE (and the TAINTPCs it would
    // make necessary). Strict flows keep every instruction they had.
    bool neverTagged(const Expr& e) const {
        auto i = static_cast<size_t>(e.id);
        return !strict_ && i < check_.exprTagged.size() && check_.exprTagged[i] == CheckResult::kNeverTagged;
    }
    // Can `e`'s value carry no label at all — no tag (neverTagged) and no provenance? Provenance
    // comes only from the results of capability and model calls, so in a program that makes none
    // no value has any. Then ADDLABELS from `e` would change nothing and is left out.
    bool noHostCalls_ = false;
    bool labelFree(const Expr& e) const { return noHostCalls_ && neverTagged(e); }
    bool readsPc(const Block& b) const {
        bool found = writesOrReturns(b);
        auto visit = pcReader(found);
        walkBlock(b, 0, visit);
        return found;
    }
    bool readsPc(const Expr& e) const {
        bool found = false;
        auto visit = pcReader(found);
        walkExpr(e, 0, visit);
        return found;
    }
    // PCENTER when `needed` (returns the register saving the old pc, or kNoReg); pcLeave undoes it.
    uint16_t pcEnter(bool needed, uint16_t condition) {
        if (!needed) return kNoReg;
        uint16_t saved = allocReg();
        emitABC(Op::PCENTER, saved, condition);
        ++pcDepth_;
        pcSaves_.push_back(saved);
        return saved;
    }
    void pcLeave(uint16_t saved) {
        if (saved == kNoReg) return;
        --pcDepth_;
        pcSaves_.pop_back();
        emitABC(Op::PCLEAVE, saved);
    }

    // ------------------------------------------------------------ strict flows
    // (docs/language.md "Strict flows"). A guard raises the pc for the rest of the function: the
    // current pc gains the guard's tags (a PCENTER whose saved value nobody restores), and so does
    // every pc an enclosing PCENTER saved, so no PCLEAVE of this function takes the raise back.
    bool strict_ = false;
    bool raised_ = false;             // the function has raised its pc: var writes need TAINTPC
    std::vector<uint16_t> pcSaves_;   // the registers of the enclosing PCENTERs, innermost last
    void raisePc(uint16_t guard) {
        uint32_t mark = nextReg_;
        emitABC(Op::PCENTER, allocReg(), guard);
        for (uint16_t saved : pcSaves_) emitABC(Op::ADDLABELS, saved, guard);
        freeTo(mark);
        raised_ = true;
    }
    // At a `break`: the pc it runs under (its guards) holds after the loop.
    void raisePcToCurrent() {
        uint32_t mark = nextReg_;
        uint16_t untagged = allocReg(), current = allocReg();
        emitABC(Op::LOADUNIT, untagged);
        emitABC(Op::PCENTER, current, untagged);  // current = Unit labelled with the pc; the pc is unchanged
        for (uint16_t saved : pcSaves_) emitABC(Op::ADDLABELS, saved, current);
        freeTo(mark);
        raised_ = true;
    }
    bool ifGuardsExit(const IfExpr& e) const {
        bool inLoop = !loops_.empty();
        if (guardsExit(*e.thenBlock, inLoop)) return true;
        if (e.elseBlock) return guardsExit(*e.elseBlock, inLoop);
        return e.elseIf && ifGuardsExit(e.elseIf->as<IfExpr>());
    }

    uint16_t allocReg() {
        if (nextReg_ >= kMaxRegisters)
            throw LimitExceeded{fmt::format("function '{}' needs more than {} registers", fn_->name, kMaxRegisters)};
        uint16_t r = static_cast<uint16_t>(nextReg_++);
        peakReg_ = std::max(peakReg_, nextReg_);
        fn_->numRegs = std::max(fn_->numRegs, nextReg_);
        return r;
    }
    uint16_t allocWindow(size_t n) {
        uint16_t base = static_cast<uint16_t>(nextReg_);
        for (size_t i = 0; i < n; ++i) allocReg();
        return base;
    }
    void freeTo(uint32_t mark) { nextReg_ = mark; }

    const Local* findLocal(std::string_view name) const {
        for (size_t i = locals_.size(); i > localsFloor_; --i)
            if (locals_[i - 1].name == name) return &locals_[i - 1];
        return nullptr;
    }

    // ------------------------------------------------------------ functions

    void function(const FnDecl& fn);
    void test(const TestDecl& t, const Span& span);
    void block(const Block& b, uint16_t dest);
    // A block whose value is read once, right after it, by an instruction that copies it (APPEND):
    // when its last statement names a local, that local's register, with no MOVE into `dest`;
    // otherwise the block is compiled into `dest`, which is returned.
    uint16_t blockValue(const Block& b, uint16_t dest);
    uint16_t blockInto(const Block& b, uint16_t dest, bool localMayHoldValue);
    void statement(const Stmt& s);
    void assign(const Stmt& s, const Local& local);
    void afterVarWrite(const Local& local) {
        // In a loop, a raise later in the body holds in the next iteration: strict flows taint
        // every var write in a loop, not only those after the first raise in the text.
        if (inheritsPc_ || pcDepth_ > 0 || raised_ || (strict_ && !loops_.empty())) emitABC(Op::TAINTPC, local.reg);
        if (local.declaredMax) emitABx(Op::CHECKMAX, local.reg, intConstant(*local.declaredMax));
    }

    // ------------------------------------------------------------ expressions

    // Compiles `e` into `dest`; with dest == kNoReg the value is not needed (a statement).
    void expr(const Expr& e, uint16_t dest);
    // A record literal into `dest` (kNoReg: a register after its window, returned). Registers at
    // or above `deadFrom` are read by nothing once the record is made (a `return`'s: the
    // function's, or an inlined callee's), so locals there may be its window in place
    // (recordWindowInPlace); kNothingDead for any other record.
    static constexpr uint32_t kNothingDead = 0xffffffffu;
    uint16_t record(const RecordExpr& e, uint16_t dest, uint32_t deadFrom);
    uint16_t recordWindowInPlace(const std::vector<RecordField>& fields, uint32_t deadFrom) const;
    // A register holding `e`'s value: a local's own register when `e` names one, else a temporary.
    uint16_t operand(const Expr& e) {
        if (e.kind == ExprKind::Name)
            if (const Local* l = findLocal(e.as<NameExpr>().name)) return l->reg;
        if (!hoisted_.empty())
            if (auto it = hoisted_.find(literalKey(e)); it != hoisted_.end()) return it->second;
        uint16_t r = allocReg();
        expr(e, r);
        return r;
    }
    // Two operands evaluated left to right. The left one is copied when evaluating the right one
    // may reassign the variable it names.
    std::pair<uint16_t, uint16_t> operands(const Expr& left, const Expr& right) {
        uint16_t l;
        if (left.kind == ExprKind::Name && containsBlocks(right)) {
            l = allocReg();
            expr(left, l);
        } else {
            l = operand(left);
        }
        return {l, operand(right)};
    }
    void binary(const BinaryExpr& e, uint16_t dest);
    // A condition that is a comparison, when nothing but the branch reads its Bool (no PCENTER or
    // ADDLABELS needs its tags): a fused compare-and-branch (IFLT, IFLE, IFEQ, IFNE) and the JMP it
    // takes when the comparison fails — or, with `negate`, when it holds. Returns that JMP, to be
    // patched, or nullopt (nothing emitted) when `cond` is not a comparison.
    std::optional<size_t> branchUnless(const Expr& cond, bool negate = false);
    // branchUnless's form for an Int compared with a small Int literal (IFEQIMM, ..., IFGEIMM), or
    // nullopt (nothing emitted) when `b` is not one.
    std::optional<size_t> branchOnImmediate(const BinaryExpr& b, bool negate);
    void ifExpr(const IfExpr& e, uint16_t dest);
    void forExpr(const ForExpr& e, uint16_t dest);
    void matchExpr(const MatchExpr& e, uint16_t dest);
    void call(const CallExpr& e, uint16_t dest);
    void builtinCall(const CallExpr& e, uint16_t dest);
    void functionCall(const CallExpr& e, const FnDecl& fn, uint16_t dest);
    void hostCall(const CallExpr& e, const ResolvedCall& r, uint16_t dest);
    // Evaluates `args` (bound to `params` by position, then by name) into a window, in source order.
    uint16_t argumentWindow(const std::vector<CallArg>& args, const std::vector<std::string>& params);
};

void Generator::run() {
    strict_ = check_.manifest.strictFlows;
    noHostCalls_ = std::none_of(check_.calls.begin(), check_.calls.end(), [](const auto& c) {
        CallTarget t = c.second.target;
        return t == CallTarget::Capability || t == CallTarget::Model || t == CallTarget::Agent;
    });
    module_.programName = prog_.name;
    module_.budgetUsd = prog_.budgetUsd;
    // programHash is computed from the finished module (bytecode/rbc.h programHashOf), not the source.
    module_.hostHash = check_.manifest.hostHash;
    module_.manifestJson = manifestToJson(check_.manifest).dump();
    for (const DeclPtr& d : prog_.decls)
        if (d->kind == DeclKind::Agent) {
            const AgentDecl& a = d->as<AgentDecl>();
            module_.agents.push_back(Agent{a.name, a.model, a.system, a.maxCalls});
        }
    // Indices first, so calls can refer to functions declared later.
    for (const DeclPtr& d : prog_.decls)
        if (d->kind == DeclKind::Fn) {
            const FnDecl& f = d->as<FnDecl>();
            functionIndex_[f.name] = static_cast<uint16_t>(module_.functions.size());
            module_.functions.emplace_back();
            module_.functions.back().name = f.name;
        }
    if (module_.functions.size() > 0xffff) throw LimitExceeded{"the program has more than 65,535 functions"};
    if (auto it = functionIndex_.find("main"); it != functionIndex_.end()) module_.entry = it->second;
    for (const DeclPtr& d : prog_.decls)
        if (d->kind == DeclKind::Fn) function(d->as<FnDecl>());
    for (const DeclPtr& d : prog_.decls)
        if (d->kind == DeclKind::Test) test(d->as<TestDecl>(), d->span);
}

void Generator::function(const FnDecl& f) {
    fnIndex_ = functionIndex_.at(f.name);
    fn_ = &module_.functions[fnIndex_];
    // A function runs under its caller's pc, unless the checker proved every caller's pc empty.
    inheritsPc_ = f.name != "main" && (strict_ || !check_.pcFreeFns.count(f.name));
    pcDepth_ = 0;
    raised_ = false;
    pcSaves_.clear();
    mayHoldHeap_.clear();
    locals_.clear();
    nextReg_ = peakReg_ = 0;
    SpanScope at(*this, f.nameSpan);
    for (const Param& p : f.params) {
        fn_->paramNames.push_back(p.name);
        fn_->paramTypes.push_back(typeIndex(nodeType(p.type->id)));
        locals_.push_back(Local{p.name, allocReg(), std::nullopt});
        noteHeap(locals_.back().reg, nodeType(p.type->id));
    }
    fn_->returnType = f.ret ? typeIndex(nodeType(f.ret->id)) : kNoType;
    collectListHints(&f, *f.body);
    hoistLoopConstants(*f.body);
    block(*f.body, kNoReg);
    emitABC(Op::RETUNIT, 0);
}

void Generator::test(const TestDecl& t, const Span& span) {
    fnIndex_ = static_cast<uint32_t>(module_.functions.size());
    if (fnIndex_ > 0xffff) throw LimitExceeded{"the program has more than 65,535 functions and tests"};
    module_.functions.emplace_back();
    fn_ = &module_.functions.back();
    fn_->name = "test:" + t.name;
    module_.tests.push_back(TestCase{t.name, t.fixtures, fnIndex_, span});
    inheritsPc_ = false;
    pcDepth_ = 0;
    raised_ = false;
    pcSaves_.clear();
    mayHoldHeap_.clear();
    locals_.clear();
    nextReg_ = peakReg_ = 0;
    SpanScope at(*this, span);
    collectListHints(nullptr, *t.body);
    hoistLoopConstants(*t.body);
    block(*t.body, kNoReg);
    emitABC(Op::RETUNIT, 0);
}

// Calls f(stmt) for every statement of `b` and of the blocks nested in it.
template <class F>
void forEachStatement(const Block& b, F&& f) {
    for (const StmtPtr& s : b.stmts) f(*s);
    auto visit = [&](const Expr& e, int) {
        auto each = [&](const Block& inner) {
            for (const StmtPtr& s : inner.stmts) f(*s);
        };
        switch (e.kind) {
            case ExprKind::If: {
                const auto& i = e.as<IfExpr>();
                each(*i.thenBlock);
                if (i.elseBlock) each(*i.elseBlock);
                break;
            }
            case ExprKind::For: each(*e.as<ForExpr>().body); break;
            case ExprKind::Match:
                for (const MatchArm& a : e.as<MatchExpr>().arms) each(*a.body);
                break;
            default: break;
        }
    };
    walkBlock(b, 0, visit);
}

void Generator::collectListHints(const FnDecl* fn, const Block& body) {
    listHints_.clear();
    std::unordered_map<std::string, int> declarations;  // of every kind: a hint needs a name declared once
    std::unordered_map<std::string, const Stmt*> openVars;
    std::unordered_map<std::string, std::vector<TypeRef>> assigned;
    if (fn)
        for (const Param& p : fn->params) ++declarations[p.name];
    forEachStatement(body, [&](const Stmt& s) {
        if (s.kind == StmtKind::Let) {
            ++declarations[s.name];
            TypeRef t = typeOf(*s.value);
            if (s.isVar && !s.type && isKind(t, ValueType::List) && isKind(t->elem, ValueType::Never)) openVars[s.name] = &s;
        } else if (s.kind == StmtKind::Assign) {
            assigned[s.name].push_back(typeOf(*s.value));
        }
    });
    auto countLoopVariables = [&](const Expr& e, int) {
        if (e.kind == ExprKind::For) ++declarations[e.as<ForExpr>().var];
    };
    walkBlock(body, 0, countLoopVariables);
    for (const auto& [name, decl] : openVars) {
        if (declarations[name] != 1) continue;
        TypeRef elem = nullptr;
        bool agree = true;
        for (TypeRef t : assigned[name]) {
            if (!isKind(t, ValueType::List) || !t->elem) {
                agree = false;
                break;
            }
            if (t->elem->kind == ValueType::Never) continue;  // another empty list
            bool scalar = t->elem->kind == ValueType::Int || t->elem->kind == ValueType::Float ||
                          t->elem->kind == ValueType::Bool;
            if (!scalar || (elem && elem->kind != t->elem->kind)) {
                agree = false;
                break;
            }
            elem = t->elem;
        }
        if (agree && elem) listHints_[name] = elem;
    }
}

void Generator::block(const Block& b, uint16_t dest) { blockInto(b, dest, false); }

uint16_t Generator::blockValue(const Block& b, uint16_t dest) { return blockInto(b, dest, true); }

uint16_t Generator::blockInto(const Block& b, uint16_t dest, bool localMayHoldValue) {
    size_t localsMark = locals_.size();
    uint32_t regMark = nextReg_;
    bool valueSet = false;
    for (size_t i = 0; i < b.stmts.size(); ++i) {
        const Stmt& s = *b.stmts[i];
        if (i + 1 == b.stmts.size() && s.kind == StmtKind::Expr && dest != kNoReg) {
            // The value already sits in a local's register: reading it there is reading the same
            // value, labels and all, as a MOVE's copy would hold. The register keeps it until the
            // caller's instruction right after the block (freeTo below emits nothing).
            if (localMayHoldValue && s.value->kind == ExprKind::Name)
                if (const Local* l = findLocal(s.value->as<NameExpr>().name)) {
                    dest = l->reg;
                    valueSet = true;
                    continue;
                }
            expr(*s.value, dest);
            valueSet = true;
        } else {
            statement(s);
        }
    }
    if (dest != kNoReg && !valueSet) {
        SpanScope at(*this, b.span);
        emitABC(Op::LOADUNIT, dest);
    }
    locals_.resize(localsMark);
    freeTo(regMark);
    return dest;
}

void Generator::statement(const Stmt& s) {
    SpanScope at(*this, s.span);
    uint32_t mark = nextReg_;
    switch (s.kind) {
        case StmtKind::Let: {
            uint16_t reg = allocReg();
            expr(*s.value, reg);
            Local local{s.name, reg, std::nullopt};
            if (s.isVar)
                if (auto hint = listHints_.find(s.name); hint != listHints_.end()) local.elemHint = hint->second;
            if (s.isVar && s.type) {
                TypeRef declared = nodeType(s.type->id);
                if (isKind(declared, ValueType::List) && declared->max) local.declaredMax = declared->max;
            }
            if (s.isVar) afterVarWrite(local);
            locals_.push_back(local);
            return;  // the register stays allocated for the rest of the block
        }
        case StmtKind::Assign: {
            const Local* found = findLocal(s.name);
            if (!found) throw LimitExceeded{fmt::format("internal: unknown variable '{}'", s.name)};
            // A copy: compiling the value may declare locals (a loop variable), which can move
            // locals_ and leave a pointer into it dangling.
            Local local = *found;
            assign(s, local);
            break;
        }
        case StmtKind::Return:
            if (!inlines_.empty()) {
                inlineReturn(s);
            } else if (s.value && s.value->kind == ExprKind::Record) {
                uint16_t value;
                {
                    SpanScope inner(*this, s.value->span);
                    value = record(s.value->as<RecordExpr>(), kNoReg, 0);  // RET ends the frame
                }
                emitABC(Op::RET, value);
            } else if (s.value) {
                emitABC(Op::RET, operand(*s.value));
            } else {
                emitABC(Op::RETUNIT, 0);
            }
            break;
        case StmtKind::Expr: expr(*s.value, kNoReg); break;
        case StmtKind::Expect: {
            uint16_t cond = operand(*s.value);
            std::string message = s.message ? *s.message : "expectation failed: " + formatExpression(*s.value);
            emitABx(Op::EXPECT, cond, strConstant(message));
            break;
        }
        case StmtKind::Break:
            if (loops_.empty()) throw LimitExceeded{"internal: break outside a loop"};
            if (strict_) raisePcToCurrent();
            // The break jumps over the PCLEAVEs of the constructs it is in (an if, a match, the
            // filter): restore the pc the loop's body started with, as leaving them would.
            if (pcSaves_.size() > loops_.back().pcMark) emitABC(Op::PCLEAVE, pcSaves_[loops_.back().pcMark]);
            loops_.back().breaks.push_back(emitJump(Op::JMP));
            break;
    }
    freeTo(mark);
}

void Generator::assign(const Stmt& s, const Local& local) {
    const Expr& value = *s.value;
    // `x = x + [item]` and `x = x + y` grow x in place (amortised O(1) when x is its value's only
    // holder) instead of building a copy.
    if (value.kind == ExprKind::Binary) {
        const auto& b = value.as<BinaryExpr>();
        TypeRef t = typeOf(value);
        bool growable = isKind(t, ValueType::List) || isKind(t, ValueType::Str);
        if (b.op == BinaryOp::Add && growable && b.left->kind == ExprKind::Name &&
            b.left->as<NameExpr>().name == s.name && !containsBlocks(*b.right)) {
            if (b.right->kind == ExprKind::List && b.right->as<ListExpr>().items.size() == 1) {
                SpanScope at(*this, b.span);
                uint16_t item = operand(*b.right->as<ListExpr>().items[0]);
                emitABC(Op::APPEND, local.reg, item);
            } else {
                SpanScope at(*this, b.span);
                uint16_t other = operand(*b.right);
                emitABC(Op::CONCATTO, local.reg, other);
            }
            afterVarWrite(local);
            return;
        }
    }
    // An expression that writes its destination early goes through a temporary when it may read
    // the variable (`x = if c { x + 1 } else { 0 }`); one that never names it writes it directly.
    if (writesDestinationEarly(value) && mentionsName(value, s.name)) {
        uint16_t tmp = allocReg();
        expr(value, tmp);
        emitABC(Op::MOVE, local.reg, tmp);
    } else {
        expr(value, local.reg);
    }
    afterVarWrite(local);
}

void Generator::expr(const Expr& e, uint16_t dest) {
    SpanScope at(*this, e.span);
    uint32_t mark = nextReg_;
    // A value nobody reads still has to be computed for its effects and errors; compute it into
    // a scratch register (if/for/match handle kNoReg themselves and skip building their value).
    bool handlesNoDest = e.kind == ExprKind::If || e.kind == ExprKind::For || e.kind == ExprKind::Match;
    if (dest == kNoReg && !handlesNoDest) dest = allocReg();
    noteHeap(dest, hinted(e));
    switch (e.kind) {
        case ExprKind::Int: {
            int64_t v = e.as<IntLit>().value;
            if (v >= 0 && v <= 0xffff) emitABC(Op::LOADI, dest, static_cast<uint32_t>(v));
            else emitABx(Op::LOADK, dest, intConstant(v));
            break;
        }
        case ExprKind::Float: emitABx(Op::LOADK, dest, floatConstant(e.as<FloatLit>().value)); break;
        case ExprKind::Bool: emitABC(Op::LOADBOOL, dest, e.as<BoolLit>().value ? 1 : 0); break;
        case ExprKind::Str: emitABx(Op::LOADK, dest, strConstant(e.as<StrLit>().value)); break;
        case ExprKind::Interp: {
            const auto& parts = e.as<InterpExpr>().parts;
            uint16_t window = allocWindow(parts.size());
            for (size_t i = 0; i < parts.size(); ++i) {
                auto slot = static_cast<uint16_t>(window + i);
                if (parts[i].expr) expr(*parts[i].expr, slot);
                else emitABx(Op::LOADK, slot, strConstant(parts[i].text));
            }
            if (parts.size() > 0xffff) throw LimitExceeded{"an interpolated string has too many parts"};
            emitABC(Op::INTERP, dest, window, static_cast<uint32_t>(parts.size()));
            break;
        }
        case ExprKind::Name: {
            const Local* l = findLocal(e.as<NameExpr>().name);
            if (!l) throw LimitExceeded{fmt::format("internal: unknown variable '{}'", e.as<NameExpr>().name)};
            if (l->reg != dest) emitABC(Op::MOVE, dest, l->reg);
            break;
        }
        case ExprKind::Field: {
            const auto& f = e.as<FieldExpr>();
            uint16_t object = operand(*f.object);
            emitABC(Op::GETFIELD, dest, object, strConstant16(f.name));
            break;
        }
        case ExprKind::Index: {
            const auto& i = e.as<IndexExpr>();
            auto [list, index] = operands(*i.object, *i.index);
            emitABC(Op::INDEX, dest, list, index);
            break;
        }
        case ExprKind::List: {
            const auto& items = e.as<ListExpr>().items;
            if (items.size() > 0xffff) throw LimitExceeded{"a list literal has more than 65,535 items"};
            uint16_t window = allocWindow(items.size());
            for (size_t i = 0; i < items.size(); ++i) expr(*items[i], static_cast<uint16_t>(window + i));
            emitABC(Op::NEWLIST, dest, window, static_cast<uint32_t>(items.size()));
            break;
        }
        case ExprKind::Record: record(e.as<RecordExpr>(), dest, kNothingDead); break;
        case ExprKind::Unary: {
            const auto& u = e.as<UnaryExpr>();
            uint16_t v = operand(*u.operand);
            emitABC(u.op == UnaryOp::Not ? Op::NOT : Op::NEG, dest, v);
            break;
        }
        case ExprKind::Binary: binary(e.as<BinaryExpr>(), dest); break;
        case ExprKind::Call: call(e.as<CallExpr>(), dest); break;
        case ExprKind::If: ifExpr(e.as<IfExpr>(), dest); break;
        case ExprKind::For: forExpr(e.as<ForExpr>(), dest); break;
        case ExprKind::Match: matchExpr(e.as<MatchExpr>(), dest); break;
    }
    freeTo(mark);
}

uint16_t Generator::record(const RecordExpr& e, uint16_t dest, uint32_t deadFrom) {
    const auto& fields = e.fields;
    std::vector<std::string> names;
    for (const RecordField& f : fields) names.push_back(f.name);
    uint16_t shape = shapeIndex(std::move(names));
    uint16_t window = deadFrom == kNothingDead ? kNoReg : recordWindowInPlace(fields, deadFrom);
    size_t first = 0;  // the fields already in place
    if (window == kNoReg) {
        window = allocWindow(fields.size());
    } else {
        while (first < fields.size() && window + first < nextReg_) ++first;
        allocWindow(fields.size() - first);
    }
    for (size_t i = first; i < fields.size(); ++i) expr(*fields[i].value, static_cast<uint16_t>(window + i));
    if (dest == kNoReg) dest = allocReg();  // after the window, so the window can end at the locals
    emitABC(Op::NEWRECORD, dest, window, shape);
    return dest;
}

// `return {x: x, y: y, hit: false}`: NEWRECORD copies its window and then clears it, so a window
// made of the locals themselves — consecutive registers in field order, all at or above
// `deadFrom`, which nothing reads after the return — needs no MOVE into fresh registers. Fields
// after those locals go to the registers that follow, which must be the next free ones. Returns the
// window's first register, or kNoReg. Not when a field runs statements: one could assign a local
// whose value an earlier field has already given.
uint16_t Generator::recordWindowInPlace(const std::vector<RecordField>& fields, uint32_t deadFrom) const {
    for (const RecordField& f : fields)
        if (containsBlocks(*f.value)) return kNoReg;
    uint32_t base = kNoReg;
    size_t inPlace = 0;
    for (; inPlace < fields.size(); ++inPlace) {
        const Expr& v = *fields[inPlace].value;
        if (v.kind != ExprKind::Name) break;
        const Local* l = findLocal(v.as<NameExpr>().name);
        if (!l || l->reg < deadFrom || (inPlace > 0 && l->reg != base + inPlace)) break;
        if (inPlace == 0) base = l->reg;
    }
    if (inPlace == 0) return kNoReg;
    if (inPlace < fields.size() && base + inPlace != nextReg_) return kNoReg;
    return static_cast<uint16_t>(base);
}

void Generator::binary(const BinaryExpr& e, uint16_t dest) {
    if (e.op == BinaryOp::And || e.op == BinaryOp::Or) {
        // Spec §7: when the left side decides, the result is it, with its labels; otherwise the
        // result is the right side's value carrying the labels of both sides — the right side is
        // only looked at because of the left one's value, so dropping the left's tags here would
        // let `trusted_test and untrusted_test` hide the untrusted half from the broker.
        expr(*e.left, dest);
        size_t skip = emitJump(e.op == BinaryOp::And ? Op::JMPIFNOT : Op::JMPIF, dest);
        if (labelFree(*e.left)) {  // not in strict flows (neverTagged): nothing to carry over
            expr(*e.right, dest);
            patchJump(skip, here());
            return;
        }
        uint32_t mark = nextReg_;
        // Strict flows: the right side runs under the left side's tags.
        uint16_t savedPc = pcEnter(strict_ && readsPc(*e.right), dest);
        uint16_t right = allocReg();
        expr(*e.right, right);
        pcLeave(savedPc);
        emitABC(Op::ADDLABELS, right, dest);
        emitABC(Op::MOVE, dest, right);
        freeTo(mark);
        patchJump(skip, here());
        return;
    }
    TypeRef lt = hinted(*e.left), rt = hinted(*e.right);
    bool ints = isKind(lt, ValueType::Int) && isKind(rt, ValueType::Int);
    bool floats = isNumberType(lt) && isNumberType(rt) && !ints;
    // An Int plus or minus a small literal: the literal is the instruction's immediate.
    if (ints && (e.op == BinaryOp::Add || e.op == BinaryOp::Sub))
        if (std::optional<uint16_t> k = smallIntLiteral(*e.right)) {
            emitABC(e.op == BinaryOp::Add ? Op::ADDIMM : Op::SUBIMM, dest, operand(*e.left), *k);
            return;
        }
    auto [l, r] = operands(*e.left, *e.right);
    auto pick = [&](Op generic, Op intOp, Op floatOp) { return ints ? intOp : floats ? floatOp : generic; };
    switch (e.op) {
        case BinaryOp::Add: emitABC(pick(Op::ADD, Op::ADDI, Op::ADDF), dest, l, r); break;
        case BinaryOp::Sub: emitABC(pick(Op::SUB, Op::SUBI, Op::SUBF), dest, l, r); break;
        case BinaryOp::Mul: emitABC(pick(Op::MUL, Op::MULI, Op::MULF), dest, l, r); break;
        case BinaryOp::Div: emitABC(ints || floats ? Op::DIVF : Op::DIV, dest, l, r); break;
        case BinaryOp::Mod: emitABC(ints ? Op::MODI : Op::MOD, dest, l, r); break;
        case BinaryOp::Eq: emitABC(ints ? Op::EQI : Op::EQ, dest, l, r); break;
        case BinaryOp::Ne: emitABC(Op::NE, dest, l, r); break;
        // a > b is b < a: the operands are already evaluated in source order, so swapping them in
        // the instruction changes nothing else (both sides' tags are united either way).
        case BinaryOp::Lt: emitABC(pick(Op::LT, Op::LTI, Op::LTF), dest, l, r); break;
        case BinaryOp::Le: emitABC(pick(Op::LE, Op::LEI, Op::LEF), dest, l, r); break;
        case BinaryOp::Gt: emitABC(pick(Op::LT, Op::LTI, Op::LTF), dest, r, l); break;
        case BinaryOp::Ge: emitABC(pick(Op::LE, Op::LEI, Op::LEF), dest, r, l); break;
        case BinaryOp::In: emitABC(Op::IN, dest, l, r); break;
        case BinaryOp::And:
        case BinaryOp::Or: break;  // handled above
    }
}

std::optional<size_t> Generator::branchUnless(const Expr& cond, bool negate) {
    if (cond.kind != ExprKind::Binary) return std::nullopt;
    const auto& b = cond.as<BinaryExpr>();
    Op op;
    bool swap = false;  // a > b is b < a, as in binary()
    // Negation swaps the operands of an ordering: not (a < b) is b <= a. That holds for every pair
    // the checker lets through (Ints and Floats, which are never NaN, compared exactly, or two
    // strings); any other pair is an error whichever way round it is compared.
    switch (b.op) {
        case BinaryOp::Lt: op = negate ? Op::IFLE : Op::IFLT, swap = negate; break;
        case BinaryOp::Le: op = negate ? Op::IFLT : Op::IFLE, swap = negate; break;
        case BinaryOp::Gt: op = negate ? Op::IFLE : Op::IFLT, swap = !negate; break;
        case BinaryOp::Ge: op = negate ? Op::IFLT : Op::IFLE, swap = !negate; break;
        case BinaryOp::Eq: op = negate ? Op::IFNE : Op::IFEQ; break;
        case BinaryOp::Ne: op = negate ? Op::IFEQ : Op::IFNE; break;
        default: return std::nullopt;
    }
    uint32_t mark = nextReg_;
    if (std::optional<size_t> jump = branchOnImmediate(b, negate)) return jump;
    {
        SpanScope at(*this, cond.span);
        auto [l, r] = operands(*b.left, *b.right);
        emitABC(op, swap ? r : l, swap ? l : r);
    }
    freeTo(mark);
    return emitJump(Op::JMP);
}

std::optional<size_t> Generator::branchOnImmediate(const BinaryExpr& b, bool negate) {
    if (!isKind(hinted(*b.left), ValueType::Int) || !isKind(hinted(*b.right), ValueType::Int)) return std::nullopt;
    std::optional<uint16_t> k = smallIntLiteral(*b.right);
    const Expr* reg = b.left.get();
    BinaryOp op = b.op;
    if (!k) {
        // `0 == n`, `2 <= n`: the same comparison with the literal on the right (n >= 2).
        k = smallIntLiteral(*b.left);
        if (!k) return std::nullopt;
        reg = b.right.get();
        switch (op) {
            case BinaryOp::Lt: op = BinaryOp::Gt; break;
            case BinaryOp::Le: op = BinaryOp::Ge; break;
            case BinaryOp::Gt: op = BinaryOp::Lt; break;
            case BinaryOp::Ge: op = BinaryOp::Le; break;
            default: break;
        }
    }
    // Ints are totally ordered: not (n < k) is n >= k.
    Op fused;
    switch (op) {
        case BinaryOp::Lt: fused = negate ? Op::IFGEIMM : Op::IFLTIMM; break;
        case BinaryOp::Le: fused = negate ? Op::IFGTIMM : Op::IFLEIMM; break;
        case BinaryOp::Gt: fused = negate ? Op::IFLEIMM : Op::IFGTIMM; break;
        case BinaryOp::Ge: fused = negate ? Op::IFLTIMM : Op::IFGEIMM; break;
        case BinaryOp::Eq: fused = negate ? Op::IFNEIMM : Op::IFEQIMM; break;
        case BinaryOp::Ne: fused = negate ? Op::IFEQIMM : Op::IFNEIMM; break;
        default: return std::nullopt;
    }
    uint32_t mark = nextReg_;
    {
        SpanScope at(*this, b.span);
        emitABC(fused, operand(*reg), *k);
    }
    freeTo(mark);
    return emitJump(Op::JMP);
}

void Generator::ifExpr(const IfExpr& e, uint16_t dest) {
    // An if whose type is Unit (no else, or branches of different types) has the value Unit,
    // labelled with the condition like any if's value (docs/language.md "Labels, exactly").
    bool needValue = dest != kNoReg;
    bool wantValue = needValue && !isKind(typeOf(e), ValueType::Unit);
    uint16_t branchDest = wantValue ? dest : kNoReg;
    bool tracksPc = (readsPc(*e.thenBlock) || (e.elseBlock && readsPc(*e.elseBlock)) || (e.elseIf && readsPc(*e.elseIf))) &&
                    !neverTagged(*e.cond);
    // `if a < b { break }`: the fused branch's own JMP is the break (to the loop's exit), taken
    // when the comparison holds — one instruction per iteration instead of a branch and a JMP.
    const Block& then = *e.thenBlock;
    if (!needValue && !tracksPc && !e.elseIf && !e.elseBlock && !loops_.empty() && then.stmts.size() == 1 &&
        then.stmts[0]->kind == StmtKind::Break && pcSaves_.size() == loops_.back().pcMark) {
        if (std::optional<size_t> exit = branchUnless(*e.cond, /*negate=*/true)) {
            loops_.back().breaks.push_back(*exit);
            return;
        }
    }
    // The condition's Bool is needed after the branch only for its labels: by PCENTER, or by the
    // value's ADDLABELS. Otherwise a comparison compiles to a fused compare-and-branch.
    bool labelsValue = needValue && !labelFree(*e.cond);
    std::optional<size_t> fused = labelsValue || tracksPc ? std::nullopt : branchUnless(*e.cond);
    uint16_t cond = kNoReg;
    uint16_t savedPc = kNoReg;
    size_t toElse;
    if (fused) {
        toElse = *fused;
    } else {
        // The condition is copied when its tags are needed after the branches, which may reassign
        // it: by the value's ADDLABELS, or (strict flows) by the raise after an if that guards an exit.
        if (labelsValue || (strict_ && ifGuardsExit(e))) {
            cond = allocReg();
            expr(*e.cond, cond);
        } else {
            cond = operand(*e.cond);
        }
        savedPc = pcEnter(tracksPc, cond);
        toElse = emitJump(Op::JMPIFNOT, cond);
    }
    block(*e.thenBlock, branchDest);
    bool hasElse = e.elseIf || e.elseBlock || wantValue;
    size_t toEnd = hasElse ? emitJump(Op::JMP) : 0;
    patchJump(toElse, here());
    if (e.elseIf) {
        ifExpr(e.elseIf->as<IfExpr>(), branchDest);
    } else if (e.elseBlock) {
        block(*e.elseBlock, branchDest);
    } else if (wantValue) {
        emitABC(Op::LOADUNIT, dest);
    }
    if (hasElse) patchJump(toEnd, here());
    pcLeave(savedPc);
    // Strict flows: an if that could have left (return, break) decides what runs from here on.
    // Such an if tracks the pc (its branches hold the exit), so its condition is in a register.
    if (strict_ && cond != kNoReg && ifGuardsExit(e)) raisePc(cond);
    if (!needValue) return;
    if (!wantValue) emitABC(Op::LOADUNIT, dest);
    if (labelsValue) emitABC(Op::ADDLABELS, dest, cond);
}

void Generator::matchExpr(const MatchExpr& e, uint16_t dest) {
    bool needValue = dest != kNoReg;
    bool wantValue = needValue && !isKind(typeOf(e), ValueType::Unit);  // as for if
    uint16_t armDest = wantValue ? dest : kNoReg;
    // A variable's own register when no arm reassigns it (its tags are read after the arms, by
    // ADDLABELS) and the match's value does not go there (`x = f() else (match x {...})`: the
    // arms would overwrite x first); otherwise a copy, as for any other expression.
    uint16_t subject = kNoReg;
    if (e.subject->kind == ExprKind::Name) {
        const std::string& name = e.subject->as<NameExpr>().name;
        const Local* local = findLocal(name);
        bool reassigned = false;
        for (const MatchArm& arm : e.arms) reassigned = reassigned || assignsVariable(*arm.body, name);
        if (local && !reassigned && local->reg != dest) subject = local->reg;
    }
    if (subject == kNoReg) {
        subject = allocReg();
        expr(*e.subject, subject);
    }
    bool tracksPc = false;
    for (const MatchArm& arm : e.arms) tracksPc = tracksPc || readsPc(*arm.body);
    tracksPc = tracksPc && !neverTagged(*e.subject);
    uint16_t savedPc = pcEnter(tracksPc, subject);
    std::vector<size_t> toEnd;
    bool hasDefault = false;
    for (const MatchArm& arm : e.arms) {
        SpanScope at(*this, arm.span);
        size_t test = 0;
        if (arm.pattern) test = emitABC(Op::JMPNEK, subject, strConstant16(*arm.pattern));
        block(*arm.body, armDest);
        if (!arm.pattern) {
            hasDefault = true;
            break;  // `_` takes every value that reaches it; later arms are unreachable; its end is the match's
        }
        toEnd.push_back(emitJump(Op::JMP));
        size_t skip = here() - test - 1;
        if (skip > 0xffff) throw LimitExceeded{"a match arm compiles to more than 65,535 instructions"};
        fn_->code[test].c = static_cast<uint16_t>(skip);
    }
    if (!hasDefault && wantValue) emitABC(Op::LOADUNIT, dest);
    for (size_t j : toEnd) patchJump(j, here());
    pcLeave(savedPc);
    if (strict_) {
        bool exits = false;
        for (const MatchArm& arm : e.arms) exits = exits || guardsExit(*arm.body, !loops_.empty());
        if (exits) raisePc(subject);
    }
    if (!needValue) return;
    if (!wantValue) emitABC(Op::LOADUNIT, dest);
    if (!labelFree(*e.subject)) emitABC(Op::ADDLABELS, dest, subject);
}

void Generator::forExpr(const ForExpr& e, uint16_t dest) {
    // The window: [A] the list (Unit for range loops), [A+1] the index, [A+2] the end.
    uint16_t window = allocWindow(3);
    const Expr& iter = *e.iter;
    bool isRange = false;
    int64_t rangeEnd = 0;
    if (iter.kind == ExprKind::Call) {
        const auto& c = iter.as<CallExpr>();
        if (c.callee.size() == 1 && c.callee[0] == "range" && c.args.size() == 1 &&
            c.args[0].value->kind == ExprKind::Int && resolved(c).target == CallTarget::Builtin) {
            // for i in range(N) counts without building the list.
            isRange = true;
            rangeEnd = std::max<int64_t>(0, c.args[0].value->as<IntLit>().value);
        }
    }
    auto loadInt = [&](uint16_t reg, int64_t v) {
        if (v >= 0 && v <= 0xffff) emitABC(Op::LOADI, reg, static_cast<uint32_t>(v));
        else emitABx(Op::LOADK, reg, intConstant(v));
    };
    if (isRange) {
        emitABC(Op::LOADUNIT, window);
        loadInt(static_cast<uint16_t>(window + 2), rangeEnd);
        if (e.limit) emitABx(Op::CLAMPK, window + 2, intConstant(*e.limit));
    } else {
        expr(iter, window);
        // FORPREP lowers the end to the list's length.
        loadInt(static_cast<uint16_t>(window + 2), e.limit ? std::max<int64_t>(0, *e.limit) : INT64_MAX);
    }
    loadInt(static_cast<uint16_t>(window + 1), 0);
    // The pc in the body includes the iterated list's tags (a range is untagged).
    bool bodyReadsPc = readsPc(*e.body) || (e.filter && readsPc(*e.filter));
    uint16_t savedPc = pcEnter(bodyReadsPc && !isRange && !neverTagged(iter), window);
    bool collect = dest != kNoReg;
    if (collect) emitABC(Op::NEWLIST, dest, 0, 0);
    size_t prep = emitABx(Op::FORPREP, window, 0);
    size_t top = here();

    loops_.push_back(Loop{{}, pcSaves_.size()});
    size_t localsMark = locals_.size();
    uint32_t bodyMark = nextReg_;
    uint32_t outerPeak = peakReg_;
    peakReg_ = nextReg_;
    // A range loop's variable is its counter register (the body cannot assign it); a list loop
    // loads each element.
    uint16_t var = static_cast<uint16_t>(window + 1);
    TypeRef varHint = nullptr;
    if (!isRange) {
        var = allocReg();
        if (iter.kind == ExprKind::Name)
            if (const Local* list = findLocal(iter.as<NameExpr>().name)) varHint = list->elemHint;
        if (varHint) noteHeap(var, varHint);
        else if (isKind(typeOf(iter), ValueType::List)) noteHeap(var, typeOf(iter)->elem);
        emitABC(Op::FORITEM, var, window);
    }
    locals_.push_back(Local{e.var, var, std::nullopt});
    locals_.back().typeHint = varHint;
    size_t toContinue = 0;
    uint16_t filterPc = kNoReg;
    if (e.filter) {
        SpanScope at(*this, e.filter->span);
        bool bodyReadsFilterPc = readsPc(*e.body) && !neverTagged(*e.filter);
        // Strict flows: the list carries every evaluation of the filter, so it needs the Bool.
        bool labelsList = strict_ && collect;
        std::optional<size_t> fused = bodyReadsFilterPc || labelsList ? std::nullopt : branchUnless(*e.filter);
        if (fused) {
            toContinue = *fused;
        } else {
            uint16_t cond = operand(*e.filter);
            if (labelsList) emitABC(Op::ADDLABELS, dest, cond);
            // Strict flows: a filtered-out element skips the body's exits.
            if (strict_ && guardsExit(*e.body, true)) raisePc(cond);
            toContinue = emitJump(Op::JMPIFNOT, cond);
            filterPc = pcEnter(bodyReadsFilterPc, cond);
        }
    }
    if (collect) {
        // APPEND copies its operand, so a body ending in a local's name appends from that
        // local's register (`for x in xs if x > 0 { x }`, `let r = {...}; r`).
        uint16_t value = blockValue(*e.body, allocReg());
        SpanScope at(*this, e.body->span);
        emitABC(Op::APPEND, dest, value);
    } else {
        block(*e.body, kNoReg);
    }
    pcLeave(filterPc);
    if (e.filter) patchJump(toContinue, here());
    // Free this iteration's temporaries and locals, so nothing they held outlives the iteration.
    uint32_t bodyPeak = peakReg_;
    clearHeapRegisters(bodyMark, bodyPeak);
    emitABx(Op::FORLOOP, window, static_cast<uint32_t>(top));
    size_t exit = here();
    patchJump(prep, exit);
    for (size_t b : loops_.back().breaks) patchJump(b, exit);
    loops_.pop_back();
    locals_.resize(localsMark);
    freeTo(bodyMark);
    peakReg_ = std::max(outerPeak, bodyPeak);

    pcLeave(savedPc);
    // The result carries the list's own labels.
    if (collect && !isRange && !labelFree(iter)) emitABC(Op::ADDLABELS, dest, window);
    if (strict_) {
        // A loop that ended without returning did so because its list ran out; and the list's
        // length reveals the pc it ended under (its breaks' guards included).
        if (!isRange && exitsOf(*e.body).returns) raisePc(window);
        if (collect) emitABC(Op::TAINTPC, dest);
    }
    if (!isRange) emitABC(Op::CLEAR, window, 1);
}

void Generator::call(const CallExpr& e, uint16_t dest) {
    const ResolvedCall& r = resolved(e);
    switch (r.target) {
        case CallTarget::Builtin: builtinCall(e, dest); return;
        case CallTarget::Function: {
            const FnDecl* fn = prog_.findFn(r.name);
            if (!fn) throw LimitExceeded{fmt::format("internal: unknown function '{}'", r.name)};
            functionCall(e, *fn, dest);
            return;
        }
        case CallTarget::Capability:
        case CallTarget::Model:
        case CallTarget::Agent: hostCall(e, r, dest); return;
        case CallTarget::Unknown: break;
    }
    throw LimitExceeded{fmt::format("internal: call at line {} has no target", e.span.line)};
}

uint16_t Generator::argumentWindow(const std::vector<CallArg>& args, const std::vector<std::string>& params) {
    uint16_t window = allocWindow(params.size());
    std::vector<bool> given(params.size(), false);
    size_t positional = 0;
    for (const CallArg& a : args) {
        size_t slot = positional;
        if (a.name) {
            auto it = std::find(params.begin(), params.end(), *a.name);
            slot = static_cast<size_t>(it - params.begin());
        } else {
            ++positional;
        }
        if (slot >= params.size()) throw LimitExceeded{"internal: an argument does not bind to a parameter"};
        given[slot] = true;
        expr(*a.value, static_cast<uint16_t>(window + slot));
    }
    for (size_t i = 0; i < params.size(); ++i)
        if (!given[i]) emitABC(Op::LOADUNIT, window + i);  // only `context:` may be left out
    return window;
}

void Generator::functionCall(const CallExpr& e, const FnDecl& fn, uint16_t dest) {
    if (canInline(fn)) {
        inlineCall(e, fn, dest);
        return;
    }
    std::vector<std::string> params;
    for (const Param& p : fn.params) params.push_back(p.name);
    uint16_t window = argumentWindow(e.args, params);
    emitABC(Op::CALL, dest, functionIndex_.at(fn.name), window);
}

bool Generator::canInline(const FnDecl& fn) {
    if (strict_) return false;
    auto [it, fresh] = inlinable_.try_emplace(&fn, false);
    if (!fresh) return it->second;
    size_t nodes = 0;
    bool leaf = true;
    auto visit = [&](const Expr& e, int) {
        ++nodes;
        if (e.kind != ExprKind::Call) return;
        auto call = check_.calls.find(static_cast<uint32_t>(e.id));
        leaf = leaf && call != check_.calls.end() && call->second.target == CallTarget::Builtin;
    };
    std::function<void(const Block&)> countStatements = [&](const Block& b) { nodes += b.stmts.size(); };
    countStatements(*fn.body);
    walkBlock(*fn.body, 0, visit);
    // Statements of nested blocks count through their expressions; a rough size is enough.
    it->second = leaf && nodes <= kMaxInlineNodes;
    return it->second;
}

void Generator::inlineCall(const CallExpr& e, const FnDecl& fn, uint16_t dest) {
    // Everything from here to the end (argument temporaries, the callee's locals) is the call's
    // own and may be freed with CLEAR at its end, as RET frees a callee's frame.
    uint32_t mark = nextReg_;
    uint32_t outerPeak = peakReg_;
    peakReg_ = nextReg_;
    // Arguments in source order, bound by position then by name, as argumentWindow binds them.
    std::vector<uint16_t> bound(fn.params.size(), kNoReg);
    size_t positional = 0;
    for (size_t k = 0; k < e.args.size(); ++k) {
        const CallArg& a = e.args[k];
        size_t slot = positional;
        if (a.name) {
            slot = fn.params.size();
            for (size_t p = 0; p < fn.params.size(); ++p)
                if (fn.params[p].name == *a.name) slot = p;
        } else {
            ++positional;
        }
        if (slot >= fn.params.size()) throw LimitExceeded{"internal: an argument does not bind to a parameter"};
        // A variable's own register, unless a later argument may assign it (the callee cannot:
        // parameters are immutable and it sees no other variable of the caller).
        bool laterAssigns = false;
        for (size_t later = k + 1; later < e.args.size(); ++later)
            laterAssigns = laterAssigns || containsBlocks(*e.args[later].value);
        if (a.value->kind == ExprKind::Name && !laterAssigns) {
            bound[slot] = operand(*a.value);
        } else if (!hoisted_.empty() && hoisted_.count(literalKey(*a.value))) {
            bound[slot] = operand(*a.value);
        } else {
            bound[slot] = allocReg();
            expr(*a.value, bound[slot]);
        }
    }
    size_t savedFloor = localsFloor_;
    size_t localsMark = locals_.size();
    localsFloor_ = locals_.size();
    for (size_t p = 0; p < fn.params.size(); ++p) {
        if (bound[p] == kNoReg) throw LimitExceeded{"internal: a parameter has no argument"};
        locals_.push_back(Local{fn.params[p].name, bound[p], std::nullopt});
    }
    size_t start = here();
    bool destIsParameter = std::find(bound.begin(), bound.end(), dest) != bound.end();
    inlines_.push_back(Inline{dest, pcSaves_.size(), {}, destIsParameter, mark});
    std::unordered_map<std::string, TypeRef> callerHints = std::exchange(listHints_, {});
    collectListHints(&fn, *fn.body);
    block(*fn.body, kNoReg);
    listHints_ = std::move(callerHints);
    Inline done = std::move(inlines_.back());
    inlines_.pop_back();
    // Falling off the end returns Unit (RETUNIT); a final `return` falls through to the end instead
    // of jumping there — unless something jumps past it (an if's other branch).
    if (!done.returns.empty() && done.returns.back() + 1 == here() && !jumpsTo(start, here())) {
        fn_->code.pop_back();
        fn_->spans.pop_back();
        done.returns.pop_back();
    } else {
        emitABC(Op::LOADUNIT, dest);
    }
    for (size_t j : done.returns) patchJump(j, here());
    locals_.resize(localsMark);
    localsFloor_ = savedFloor;
    uint32_t bodyPeak = peakReg_;
    peakReg_ = std::max(outerPeak, bodyPeak);
    clearHeapRegisters(mark, bodyPeak);
    freeTo(mark);
}

void Generator::inlineReturn(const Stmt& s) {
    Inline& in = inlines_.back();
    if (!s.value) {
        emitABC(Op::LOADUNIT, in.dest);  // RETUNIT: Unit, without the pc's tags
    } else {
        // An expression that writes its destination before reading all it needs must not write
        // the destination early when it is the register a parameter is bound to (`x = f(x)`).
        // Otherwise the callee cannot read the destination: its other registers are its own,
        // above the call's mark, and the caller's variables are out of its scope.
        if (in.destIsParameter && writesDestinationEarly(*s.value)) {
            uint16_t tmp = allocReg();
            expr(*s.value, tmp);
            emitABC(Op::MOVE, in.dest, tmp);
        } else if (s.value->kind == ExprKind::Record) {
            // The callee's registers, at or above the call's mark, are left by the jump to the end.
            SpanScope inner(*this, s.value->span);
            noteHeap(in.dest, typeOf(*s.value));
            record(s.value->as<RecordExpr>(), in.dest, in.mark);
        } else {
            expr(*s.value, in.dest);
        }
        // RET adds the pc's tags to the value.
        if (inheritsPc_ || pcDepth_ > 0 || raised_) emitABC(Op::TAINTPC, in.dest);
    }
    // Leaving the callee's if, match or loop restores the pc they saved, as returning would.
    if (pcSaves_.size() > in.pcMark) emitABC(Op::PCLEAVE, pcSaves_[in.pcMark]);
    in.returns.push_back(emitJump(Op::JMP));
}

void Generator::builtinCall(const CallExpr& e, uint16_t dest) {
    std::optional<BuiltinId> id = findBuiltin(e.callee[0], e.args.size());
    if (!id) throw LimitExceeded{fmt::format("internal: no builtin {}/{}", e.callee[0], e.args.size())};
    uint16_t window = allocWindow(e.args.size());
    for (size_t i = 0; i < e.args.size(); ++i) expr(*e.args[i].value, static_cast<uint16_t>(window + i));
    emitABC(Op::BUILTIN, dest, window, static_cast<uint32_t>(*id));
}

void Generator::hostCall(const CallExpr& e, const ResolvedCall& r, uint16_t dest) {
    Site site;
    site.id = r.site;
    site.function = fnIndex_;
    site.span = e.span;
    site.retry = static_cast<uint32_t>(std::clamp<int64_t>(e.retry.value_or(0), 0, 0xffffffff));
    site.timeoutSeconds = e.timeoutSeconds;
    site.hasFallback = e.fallback != nullptr;
    std::vector<CallArg> noArgs;
    uint16_t window;
    if (r.target == CallTarget::Capability) {
        site.kind = SiteKind::Capability;
        site.resource = r.name;
        const Capability* cap = check_.host.capability(r.name);
        if (!cap) throw LimitExceeded{fmt::format("internal: unknown capability '{}'", r.name)};
        for (const CapabilityParam& p : cap->params) site.argNames.push_back(p.name);
        window = argumentWindow(e.args, site.argNames);
    } else {
        site.kind = r.target == CallTarget::Agent ? SiteKind::Agent : SiteKind::Model;
        site.resource = r.model;
        if (r.target == CallTarget::Agent) site.agent = r.name;
        site.argNames = {"prompt", "context"};
        site.askType = typeIndex(r.askType);
        window = argumentWindow(e.args, site.argNames);
    }
    if (module_.sites.size() >= 0xffff) throw LimitExceeded{"the program has more than 65,535 call sites"};
    auto siteIndex = static_cast<uint16_t>(module_.sites.size());
    bool isCapability = site.kind == SiteKind::Capability;
    module_.sites.push_back(std::move(site));
    emitABC(isCapability ? Op::CALLCAP : Op::ASKMODEL, dest, window, siteIndex);
    if (e.fallback) {
        // After every attempt failed, the VM continues at the instruction after this JMP.
        size_t skip = emitJump(Op::JMP);
        expr(*e.fallback, dest);
        patchJump(skip, here());
    }
}

}  // namespace

CodegenResult generateModule(const Program& program, const CheckResult& check, const std::string& sourceFile) {
    CodegenResult result;
    result.module = std::make_unique<Module>();
    result.module->sourceFile = sourceFile;
    try {
        Generator(program, check, *result.module).run();
    } catch (const LimitExceeded& e) {
        result.module.reset();
        result.error = e.message;
    }
    return result;
}

}  // namespace remit
