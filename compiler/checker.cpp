#include "compiler/checker.h"
#include "runtime/numfmt.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "compiler/formatter.h"
#include "compiler/habits.h"
#include "compiler/program_hash.h"
#include "runtime/builtins.h"
#include "runtime/large_stack.h"
#include "runtime/suggest.h"

namespace remit {

using namespace ast;

namespace {

// ---------------------------------------------------------------- names and suggestions

// The builtins are runtime/builtins.def's: one table for the checker, the code generator and the VM.
bool isBuiltin(std::string_view name) {
    for (const BuiltinInfo& b : kBuiltins)
        if (b.name == name) return true;
    return false;
}

// Their names, once each (min and max have two arities), for suggestions.
std::vector<std::string> builtinNames() {
    std::vector<std::string> out;
    for (const BuiltinInfo& b : kBuiltins)
        if (std::find(out.begin(), out.end(), b.name) == out.end()) out.emplace_back(b.name);
    return out;
}

// "did you mean 'x'?" for the closest candidate that is similar enough, else empty.
std::string suggest(std::string_view name, const std::vector<std::string>& candidates) {
    std::optional<std::string> best = closestName(name, candidates);
    return best ? fmt::format("did you mean '{}'?", *best) : std::string();
}

std::string lowerAscii(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// An expression as a hint quotes it: one line as the formatter writes it, when short enough.
std::optional<std::string> quoteExpr(const Expr& e) { return habitSnippet(formatExpression(e)); }

std::string joinList(const std::vector<std::string>& items, std::string_view separator = ", ") {
    std::string out;
    for (const std::string& s : items) {
        if (!out.empty()) out += separator;
        out += s;
    }
    return out;
}

std::string quotedOptions(const std::vector<std::string>& options) {
    std::vector<std::string> quoted;
    for (const std::string& o : options) quoted.push_back("'" + o + "'");
    return joinList(quoted);
}

// ---------------------------------------------------------------- tags and effects

// tag -> the human-readable origins it came from ("input 'ticket'", "crm.order (line 12)").
using TaintMap = std::map<std::string, std::set<std::string>>;

// A TaintMap with value semantics, shared until written (copy on write). The walk copies tags
// into every expression's Info, every variable, every summary and every memo key, and nearly all
// of those copies are never changed: sharing them made copying a map of sets of strings (and
// freeing it) the largest cost of checking. The contents, and so every decision, are the same as
// with a plain map. The checker's walk is single-threaded, so the count need not be atomic.
class Taint {
public:
    Taint() = default;
    Taint(const Taint& other) : node_(other.node_) {
        if (node_) ++node_->refs;
    }
    Taint(Taint&& other) noexcept : node_(std::exchange(other.node_, nullptr)) {}
    Taint& operator=(const Taint& other) {
        if (other.node_) ++other.node_->refs;
        release();
        node_ = other.node_;
        return *this;
    }
    Taint& operator=(Taint&& other) noexcept {
        if (this != &other) {
            release();
            node_ = std::exchange(other.node_, nullptr);
        }
        return *this;
    }
    ~Taint() { release(); }

    const TaintMap& map() const { return node_ ? node_->map : empty_(); }
    bool empty() const { return !node_ || node_->map.empty(); }
    size_t count(const std::string& tag) const { return node_ ? node_->map.count(tag) : 0; }
    const std::set<std::string>& at(const std::string& tag) const { return map().at(tag); }
    TaintMap::const_iterator begin() const { return map().begin(); }
    TaintMap::const_iterator end() const { return map().end(); }
    bool sharesWith(const Taint& other) const { return node_ == other.node_; }

    // Writes: this Taint gets a map of its own first.
    TaintMap& mut() {
        if (!node_) node_ = new Node{1, {}};
        else if (node_->refs > 1) {
            --node_->refs;
            node_ = new Node{1, node_->map};
        }
        return node_->map;
    }
    std::set<std::string>& operator[](const std::string& tag) { return mut()[tag]; }
    void erase(const std::string& tag) {
        if (count(tag)) mut().erase(tag);
    }
    void clear() { release(); }

private:
    struct Node {
        size_t refs;
        TaintMap map;
    };
    Node* node_ = nullptr;
    void release() {
        if (node_ && --node_->refs == 0) delete node_;
        node_ = nullptr;
    }
    static const TaintMap& empty_() {
        static const TaintMap none;
        return none;
    }
};

// Does `into` already hold every tag and origin of `from`?
bool covers(const Taint& into, const Taint& from) {
    const TaintMap& have = into.map();
    for (const auto& [tag, origins] : from) {
        auto it = have.find(tag);
        if (it == have.end() || !std::includes(it->second.begin(), it->second.end(), origins.begin(), origins.end()))
            return false;
    }
    return true;
}

void unionInto(Taint& into, const Taint& from) {
    if (from.empty() || into.sharesWith(from)) return;
    if (into.empty()) {
        into = from;
        return;
    }
    if (covers(into, from)) return;  // the common case: nothing new, and nothing copied
    TaintMap& map = into.mut();
    for (const auto& [tag, origins] : from) map[tag].insert(origins.begin(), origins.end());
}

Taint unite(const Taint& a, const Taint& b) {
    Taint out = a;
    unionInto(out, b);
    return out;
}

// Appends the text of `taint` to a memo key.
void freezeInto(std::string& out, const Taint& taint) {
    for (const auto& [tag, origins] : taint) {
        out += tag;
        out += '{';
        for (const std::string& o : origins) {
            out += o;
            out += ';';
        }
        out += '}';
    }
}

// resource (or "agent:NAME") -> worst-case number of calls (checker.h).
using Effects = CallCounts;
constexpr uint64_t kManyCalls = uint64_t(1) << 53;

uint64_t saturatingAdd(uint64_t a, uint64_t b) { return std::min(kManyCalls, a + b); }
uint64_t saturatingMul(uint64_t a, uint64_t b) {
    if (a == 0 || b == 0) return 0;
    if (a > kManyCalls / b) return kManyCalls;
    return std::min(kManyCalls, a * b);
}

void addInto(Effects& into, const Effects& from) {
    for (const auto& [k, v] : from) into[k] = saturatingAdd(into[k], v);
}
Effects sum(const Effects& a, const Effects& b) {
    Effects out = a;
    addInto(out, b);
    return out;
}
Effects scaled(const Effects& e, uint64_t n) {
    Effects out;
    for (const auto& [k, v] : e) out[k] = saturatingMul(v, n);
    return out;
}
Effects maxOf(const Effects& a, const Effects& b) {
    Effects out = a;
    for (const auto& [k, v] : b) out[k] = std::max(out[k], v);
    return out;
}

// What the walk learns about an expression or a statement sequence.
struct Info {
    TypeRef type;
    Taint taint;
    Effects eff;
};

struct VarInfo {
    TypeRef type;
    Taint taint;
    bool isMutable;
    // A `var`'s declaration: the identity under which a loop carries its taint from one iteration
    // (and one analysis pass) to the next. Null for everything immutable.
    const void* decl = nullptr;
    Span declSpan{};  // the declaring name, for CheckFacts::definitions
};

// Lexical scopes: a chain of small tables, innermost first.
class Scope {
public:
    explicit Scope(Scope* parent) : parent_(parent) {}
    // Names are views of the syntax tree's, which outlives the walk.
    void define(std::string_view name, VarInfo info) {
        if (vars_.empty()) vars_.reserve(4);  // one allocation for most blocks, not a doubling series
        vars_.emplace_back(name, std::move(info));
    }
    VarInfo* lookup(std::string_view name) {
        for (Scope* s = this; s; s = s->parent_)
            for (auto it = s->vars_.rbegin(); it != s->vars_.rend(); ++it)
                if (it->first == name) return &it->second;
        return nullptr;
    }
    bool definedHere(std::string_view name) const {
        for (const auto& [n, v] : vars_)
            if (n == name) return true;
        return false;
    }
    std::vector<std::string> names() const {
        std::vector<std::string> out;
        for (const Scope* s = this; s; s = s->parent_)
            for (const auto& [n, v] : s->vars_) out.emplace_back(n);
        return out;
    }
    // Calls f(VarInfo&) for every visible `var` (shadowed ones too: they are still assignable
    // before the shadowing declaration in a later iteration).
    template <class F> void forEachVar(F&& f) {
        for (Scope* s = this; s; s = s->parent_)
            for (auto& [n, v] : s->vars_)
                if (v.decl) f(v);
    }

private:
    Scope* parent_;
    std::vector<std::pair<std::string_view, VarInfo>> vars_;
};

// The summary of one function in one calling context.
struct FnSummary {
    TypeRef ret;
    Taint taint;
    Effects eff;
};

struct SiteRecord {
    CallSiteInfo info;
};

struct FlowRecord {
    std::set<std::string> tags;
    int verdict = 0;  // 0 allowed, 1 requires approval, 2 denied
    std::set<std::pair<std::string, std::string>> sites;  // (site, via)
};

// Short source rendering of an expression for notes ("'inv.iban' is untrusted because ...").
std::string shortSource(const Expr& e) {
    std::string s = formatExpression(e);
    size_t newline = s.find('\n');
    if (newline != std::string::npos) s = s.substr(0, newline) + " ...";
    if (codePointCount(s) > 60) {
        size_t cut = 0, count = 0;
        while (cut < s.size() && count < 57) {
            cut += std::max<size_t>(1, utf8SequenceLength(s, cut));
            ++count;
        }
        s = s.substr(0, cut) + "...";
    }
    return s;
}

// ---------------------------------------------------------------- type expressions

class TypeResolver {
public:
    TypeResolver(TypeArena& arena, const std::string& file, DiagnosticList& diags)
        : arena_(arena), file_(file), diags_(diags) {}

    std::map<std::string, TypeRef>* named = nullptr;           // resolved aliases
    std::map<std::string, const TypeExpr*>* pending = nullptr;  // declared, not yet resolved (program types)

    TypeRef resolve(const TypeExpr& te, const std::string& aliasName = {}) {
        switch (te.kind) {
            case ast::TypeKind::Union: {
                std::vector<std::string> seen;
                for (const std::string& o : te.options) {
                    if (std::find(seen.begin(), seen.end(), o) != seen.end())
                        error(DiagCode::E0105, fmt::format("duplicate option \"{}\" in union type", o), te.span,
                              "list each option once");
                    else seen.push_back(o);
                }
                return arena_.enumOf(seen, aliasName);
            }
            case ast::TypeKind::Record: {
                std::vector<RecordFieldType> fields;
                for (const TypeField& f : te.fields) fields.push_back({f.name, resolve(*f.type)});
                return bounded(arena_.record(std::move(fields), aliasName), te.span);
            }
            case ast::TypeKind::Named: break;
        }
        // Five names: comparing them in turn is cheaper than a map's string comparisons, and this
        // runs for every parameter of every call the walk meets.
        static constexpr std::pair<std::string_view, TypeRef (TypeArena::*)() const> prims[] = {
            {"Int", &TypeArena::integer}, {"Float", &TypeArena::floating}, {"Bool", &TypeArena::boolean},
            {"Str", &TypeArena::str}, {"Unit", &TypeArena::unit}};
        auto it = std::find_if(std::begin(prims), std::end(prims), [&](const auto& p) { return p.first == te.name; });
        if (it != std::end(prims)) {
            if (te.max && te.args.empty())
                error(DiagCode::E0105, "'max' applies only to List types", te.span, "write List[T] max N");
            else if (!te.args.empty())
                error(DiagCode::E0105, fmt::format("type '{}' takes no parameters", te.name), te.span,
                      "only List takes a parameter and a max bound");
            return (arena_.*(it->second))();
        }
        if (te.name == "List") {
            if (te.args.size() != 1) {
                error(DiagCode::E0105, "List takes exactly one type parameter, e.g. List[Str]", te.span);
                return arena_.list(arena_.never(), te.max);
            }
            if (te.max && *te.max < 0)
                error(DiagCode::E0105, "a list bound cannot be negative", te.span);
            return bounded(arena_.list(resolve(*te.args[0]), te.max), te.span);
        }
        if (te.max) error(DiagCode::E0105, "'max' applies only to List types", te.span, "write List[T] max N");
        if (!te.args.empty())
            error(DiagCode::E0105, fmt::format("type '{}' takes no parameters", te.name), te.span);
        if (TypeRef t = lookup(te.name, te.span)) return t;
        std::vector<std::string> candidates = {"Int", "Float", "Bool", "Str", "Unit", "List"};
        for (const auto& [n, t] : *named) candidates.push_back(n);
        if (pending)
            for (const auto& [n, t] : *pending) candidates.push_back(n);
        if (Habit habit = findHabit(HabitTrigger::Type, te.name); habit != Habit::None) {  // string, void, dict, ...
            HabitText text = renderHabit(habit, te.name);
            error(DiagCode::E0105, std::move(text.message), te.span, std::move(text.hint));
            // Checking goes on with the type meant, so its uses do not add errors of their own.
            switch (habit) {
                case Habit::TypeStr:
                    return arena_.str();
                case Habit::TypeBool:
                    return arena_.boolean();
                case Habit::TypeInt:
                    return arena_.integer();
                case Habit::TypeFloat:
                    return arena_.floating();
                case Habit::TypeUnit:
                    return arena_.unit();
                default:
                    return arena_.never();
            }
        }
        error(DiagCode::E0105, fmt::format("unknown type '{}'", te.name), te.span, suggest(te.name, candidates));
        return arena_.never();
    }

private:
    TypeArena& arena_;
    const std::string& file_;
    DiagnosticList& diags_;
    std::set<std::string> resolving_;

    // Program types may be used before their declaration; resolve them on first use.
    TypeRef lookup(const std::string& name, const Span& use) {
        if (auto it = named->find(name); it != named->end()) return it->second;
        if (!pending) return nullptr;
        auto it = pending->find(name);
        if (it == pending->end()) return nullptr;
        if (!resolving_.insert(name).second) {
            error(DiagCode::E0105, fmt::format("type '{}' refers to itself", name), use,
                  "types cannot be recursive; bound the data with a List[T] max N instead");
            return arena_.never();
        }
        TypeRef t = arena_.named(resolve(*it->second, name), name);
        resolving_.erase(name);
        (*named)[name] = t;
        return t;
    }

    void error(DiagCode code, std::string message, const Span& span, std::string hint = {}, Json details = nullptr) {
        Diagnostic d = makeDiagnostic(code, std::move(message), file_, span, std::move(hint));
        d.details = std::move(details);
        diags_.add(std::move(d));
    }

    TypeRef bounded(TypeRef type, const Span& span) {
        if (type->depth <= kMaxTypeDepth) return type;
        error(DiagCode::E0003, fmt::format("type nesting deeper than {} levels", kMaxTypeDepth), span,
              "flatten the data: fewer lists of records of lists",
              {{"limit", "type_nesting"}, {"value", kMaxTypeDepth}});
        return arena_.never();
    }
};

// ---------------------------------------------------------------- the checker

class Checker {
public:
    Checker(const Program& program, HostModel& host, DiagnosticList& diags, const CheckerOptions& options,
            CheckResult& result)
        : prog_(program), host_(host), arena_(*host.arena), diags_(diags), opts_(options), result_(result),
          resolver_(arena_, options.programFile, diags) {}

    void run();
    void notePcFreeFns() {
        for (const std::string& name : analysedAnyFn_)
            if (!calledUnderPc_.count(name)) result_.pcFreeFns.insert(name);
    }

private:
    const Program& prog_;
    HostModel& host_;
    TypeArena& arena_;
    DiagnosticList& diags_;
    const CheckerOptions& opts_;
    CheckResult& result_;
    TypeResolver resolver_;

    std::map<std::string, TypeRef> types_;  // host and program types
    std::map<std::string, const TypeExpr*> pendingTypes_;
    std::map<std::string, const FnDecl*, std::less<>> fns_;
    std::unordered_map<std::string_view, const FnDecl*> fnByName_;  // the same, for the walk's lookups
    std::unordered_map<const FnDecl*, std::vector<std::string>> paramNames_;  // for bindArgs, once per function
    std::map<std::string, const AgentDecl*, std::less<>> agents_;
    std::set<std::string> uses_;
    std::set<std::string> usedResources_;
    std::unordered_map<const CallExpr*, std::string> siteIds_;
    std::unordered_map<std::string, FnSummary> fnCache_;  // by function, mode and context (analyseFn)
    std::set<std::string> analysedFns_;    // analysed with recording (reachable from main)
    std::set<std::string> referencedFns_;  // called from code reachable from main, even if the call is wrong
    std::map<const CallExpr*, SiteRecord> sites_;
    std::map<std::pair<std::string, std::string>, FlowRecord> flows_;
    bool recursive_ = false;

    // Loop-carried taint. A loop body is walked once per pass, but at run time a `var` assigned
    // late in the body is read early in the next iteration: `for ... { a = b; b = secret }` leaves
    // `a` secret after two iterations. So analyseFn walks a function until, for every loop, the
    // taint each outer `var` has at the end of the body (recorded here, keyed by the loop and the
    // var's declaration) is already what the body started with. The passes before the last are
    // dry: they report nothing and record nothing for the manifest.
    struct LoopCarry {
        std::unordered_map<const void*, Taint> vars;
        Taint sticky;  // strict: the raised pc at the end of an iteration
    };
    struct FnPasses {
        std::unordered_map<NodeId, LoopCarry> loops;
        bool changed = false;  // a pass grew some carried taint: another pass is needed
        // Strict flows: the tags guarded exits added to the pc so far in this walk. Only grows;
        // it holds until the function returns (docs/language.md "Strict flows", rule 3).
        Taint sticky;
    };
    FnPasses* passes_ = nullptr;  // of the function being walked
    // analyseFn: the loop-carried taint of a dry analysis that reached its fixed point, by calling
    // context (the memo key without the mode), for the recording analysis in the same context.
    std::unordered_map<std::string, std::unordered_map<NodeId, LoopCarry>> convergedLoops_;
    uint64_t depthCuts_ = 0;  // calls not analysed because the call chain reached maxCallDepth
    bool dry_ = false;
    static constexpr int kMaxPasses = 64;
    void carryIntoLoop(const ForExpr& e, Scope& outer);
    void carryOutOfLoop(const ForExpr& e, Scope& outer);
    bool hasLoopCarriedVars(const Block& body) const;
    // hasLoopCarriedVars of each function body analysed: it depends only on the body (and the
    // mode, fixed for a check), and walking the body for it at every analysis cost as much as a
    // tenth of the walk itself.
    std::unordered_map<const Block*, bool> loopCarriedBodies_;

    // ------------------------------------------------------------ strict flows

    bool strict() const { return opts_.strictFlows; }
    void raisePc(const Taint& guard) {
        if (strict() && passes_) unionInto(passes_->sticky, guard);
    }
    // Does an if (with its else-if chain) guard an exit (ast::guardsExit)?
    static bool ifGuardsExit(const IfExpr& e, bool inLoop);
    bool inTest_ = false;
    // CheckerOptions::interrupted: polled every kPollInterval expressions; once it said stop, the
    // walk returns Never for every expression and reports nothing more.
    static constexpr uint32_t kPollInterval = 256;
    uint32_t untilPoll_ = kPollInterval;
    bool stopped_ = false;

    struct FnFrame {
        const FnDecl* fn = nullptr;
        TypeRef ret = nullptr;
        std::vector<Taint> returns;
    };
    std::vector<FnFrame> fnStack_;

    // Walk state that stays fixed within one function body.
    struct Ctx {
        Scope* scope;
        const Taint& pc;
        int loopDepth;
        bool record;
        Ctx with(Scope* s) const { return Ctx{s, pc, loopDepth, record}; }
    };
    // The pc in force: the context's, plus (strict) what guarded exits raised since.
    Taint pcAt(const Ctx& ctx) const {
        if (!passes_ || passes_->sticky.empty()) return ctx.pc;
        return unite(ctx.pc, passes_->sticky);
    }

    // ------------------------------------------------------------ diagnostics

    void report(DiagCode code, std::string message, const Span& span, std::string hint = {},
                std::vector<std::string> notes = {}, Json details = nullptr) {
        if (stopped_ || dry_) return;
        Diagnostic d =
            makeDiagnostic(code, std::move(message), opts_.programFile, span, std::move(hint), std::move(notes));
        d.details = std::move(details);
        diags_.add(std::move(d));
    }
    // The payload of a type mismatch: what the place needs and what it was given.
    static Json mismatch(std::string_view expected, TypeRef actual) {
        return {{"expected", expected}, {"actual", showType(actual)}};
    }
    static Json mismatch(TypeRef expected, TypeRef actual) { return mismatch(showType(expected), actual); }
    static Json resourceDetails(const std::string& resource) { return {{"resource", resource}}; }

    // Resolves a written type and records it under its node, for the code generator.
    TypeRef resolve(const TypeExpr& te) {
        TypeRef t = resolver_.resolve(te);
        noteNodeType(te.id, t);
        return t;
    }
    void noteType(const Expr& e, TypeRef t) { noteNodeType(e.id, t); }

    // An `if` or `match` whose type is Unit although a branch computes a value (no `else`, or
    // branches of different types). Its value may only be discarded: reportValuelessUses rejects
    // every use (E0103), so the value such a branch computes can never be observed — a Unit is
    // always the Unit value, whatever branch ran.
    struct Valueless {
        std::string why, hint;
    };
    std::unordered_map<NodeId, Valueless> valueless_;
    static bool isUnitLike(TypeRef t) { return t->kind == remit::TypeKind::Unit || t->kind == remit::TypeKind::Never; }
    void noteValueless(const Expr& e, std::string why, std::string hint) {
        valueless_.emplace(e.id, Valueless{std::move(why), std::move(hint)});
    }
    void reportValuelessUses();
    void valueUses(const Block& b, bool used);
    void valueUses(const Expr& e, bool used);
    TypeRef nodeTypeOf(NodeId id) const {
        auto index = static_cast<size_t>(id);
        return index < result_.exprTypes.size() ? result_.exprTypes[index] : nullptr;
    }
    // CheckResult::exprTagged: once tagged in any context (dry passes included: their taint only
    // grows towards the last pass's), always maybe tagged.
    void noteTagged(NodeId id, bool tagged) {
        auto index = static_cast<size_t>(id);
        if (index >= result_.exprTagged.size()) result_.exprTagged.resize(index + 1, CheckResult::kNotAnalysed);
        uint8_t& proof = result_.exprTagged[index];
        if (tagged) proof = CheckResult::kMaybeTagged;
        else if (proof == CheckResult::kNotAnalysed) proof = CheckResult::kNeverTagged;
    }
    // CheckResult::pcFreeFns: functions analysed only under an empty pc.
    std::set<std::string> calledUnderPc_, analysedAnyFn_;
    void noteNodeType(NodeId id, TypeRef t) {
        auto index = static_cast<size_t>(id);
        if (index >= result_.exprTypes.size()) result_.exprTypes.resize(index + 1);
        result_.exprTypes[index] = t;
    }

    // ------------------------------------------------------------ declarations

    void declareTypes();
    void declareFunctionsAndAgents();
    void checkUses();
    void checkRecursion();
    bool isEffectfulCall(const CallExpr& call) const;

    // ------------------------------------------------------------ functions and statements

    FnSummary analyseFn(const FnDecl& fn, const std::vector<Info>& args, const Taint& pc, bool record);
    static bool blockReturns(const Block& b);
    static bool ifReturns(const IfExpr& e);
    Info block(const Block& b, const Ctx& ctx);
    Info statements(const std::vector<StmtPtr>& stmts, size_t from, const Ctx& ctx);
    Info statement(const Stmt& s, const Ctx& ctx);

    // ------------------------------------------------------------ expressions

    bool interrupted() {
        if (stopped_ || !opts_.interrupted || --untilPoll_ != 0) return stopped_;
        untilPoll_ = kPollInterval;
        stopped_ = opts_.interrupted();
        return stopped_;
    }

    // Polls once more; when stopped, reports the E0003 and marks the result interrupted.
    bool stoppedBetweenPhases() {
        if (!stopped_ && opts_.interrupted) stopped_ = opts_.interrupted();
        if (!stopped_) return false;
        diags_.add(makeDiagnostic(DiagCode::E0003, "checking was stopped before it finished", opts_.programFile,
                                  prog_.span, "the host interrupted the checker: its time limit passed, or it aborted"));
        result_.interrupted = true;
        return true;
    }

    Info expr(const Expr& e, const Ctx& ctx) {
        if (interrupted()) return Info{arena_.never(), {}, {}};
        Info info = exprInner(e, ctx);
        noteType(e, info.type);
        noteTagged(e.id, !info.taint.empty());
        if (opts_.recordFacts && !dry_ && !stopped_) noteFacts(e, info);
        return info;
    }
    // A call site's attempts under its own key too ("site:main#0"), so the effects algebra (loops
    // multiply, branches take the larger, callers add) gives each site's worst case: the manifest's
    // call_sites[].max_calls, E0502's breakdown, and CheckFacts' calls of a site.
    void noteSiteCalls(Effects& eff, const std::string& site, uint64_t attempts) const {
        if (!site.empty()) eff["site:" + site] = saturatingAdd(eff["site:" + site], attempts);
    }
    // CheckFacts: the union of the tags and the most calls over every walk that reports.
    void noteFacts(const Expr& e, const Info& info) {
        ExprFacts& facts = result_.facts.exprs[static_cast<uint32_t>(e.id)];
        for (const auto& [tag, origins] : info.taint) facts.tags[tag].insert(origins.begin(), origins.end());
        for (const auto& [resource, n] : info.eff) facts.calls[resource] = std::max(facts.calls[resource], n);
    }
    Info exprInner(const Expr& e, const Ctx& ctx);
    Info binary(const BinaryExpr& e, const Ctx& ctx);
    struct IfParts {
        Info cond, thenInfo, elseInfo;
    };
    IfParts ifParts(const IfExpr& e, const Ctx& ctx);
    Info forExpr(const ForExpr& e, const Ctx& ctx);
    Info matchExpr(const MatchExpr& e, const Ctx& ctx);

    Info call(const CallExpr& e, const Ctx& ctx);
    Info capabilityCall(const CallExpr& e, const Capability& cap, const Ctx& ctx);
    Info modelCall(const CallExpr& e, const Ctx& ctx);
    Info functionCall(const CallExpr& e, const FnDecl& fn, const Ctx& ctx);
    Info builtinCall(const CallExpr& e, const Ctx& ctx);
    bool callHabit(const CallExpr& e, const Ctx& ctx);
    int64_t rangeHabit(const CallExpr& e);
    Info fallback(const CallExpr& e, TypeRef expected, Info result, const Ctx& ctx);
    void modifiersOnPlainCall(const CallExpr& e);

    // Binds call arguments to parameter names; nullopt (after an E0104) when they do not fit.
    // `callee` names the function or capability in messages; they are formatted only when one is
    // reported (formatting them for every call was 5 % of checking).
    std::optional<std::vector<const CallArg*>> bindArgs(const CallExpr& e, const std::vector<std::string>& params,
                                                        std::string_view callee);
    void checkArg(const CallArg& arg, const Info& info, TypeRef expected, std::string_view callee,
                  std::string_view param);

    SiteRecord& siteFor(const CallExpr& e, const std::string& resource, const std::optional<std::string>& agent);

    // ------------------------------------------------------------ results

    void buildManifest(const Effects& eff);
};

// ---------------------------------------------------------------- declarations

void Checker::declareTypes() {
    types_ = host_.types;
    resolver_.named = &types_;
    resolver_.pending = &pendingTypes_;
    for (const DeclPtr& d : prog_.decls) {
        if (d->kind != DeclKind::Type) continue;
        const TypeDecl& t = d->as<TypeDecl>();
        if (host_.types.count(t.name)) {
            report(DiagCode::E0112, fmt::format("type '{}' is already defined", t.name), t.nameSpan,
                   "host interface types cannot be redefined by the program");
        } else if (pendingTypes_.count(t.name)) {
            report(DiagCode::E0112, fmt::format("type '{}' is already defined", t.name), t.nameSpan,
                   "choose a different name");
        } else {
            pendingTypes_[t.name] = t.type.get();
        }
    }
    for (const auto& [name, te] : pendingTypes_) {
        TypeExpr named;
        named.kind = ast::TypeKind::Named;
        named.name = name;
        TypeRef t = resolver_.resolve(named);
        result_.programTypes[name] = t;
    }
}

void Checker::declareFunctionsAndAgents() {
    for (const DeclPtr& d : prog_.decls) {
        if (d->kind == DeclKind::Fn) {
            const FnDecl& f = d->as<FnDecl>();
            if (fns_.count(f.name))
                report(DiagCode::E0112, fmt::format("function '{}' is defined more than once", f.name), f.nameSpan,
                       "rename one of them");
            else fns_[f.name] = fnByName_[f.name] = &f;
            if (isBuiltin(f.name))
                report(DiagCode::E0112, fmt::format("function '{}' shadows a builtin", f.name), f.nameSpan,
                       "choose a different name");
        }
    }
    for (const DeclPtr& d : prog_.decls) {
        if (d->kind != DeclKind::Agent) continue;
        const AgentDecl& a = d->as<AgentDecl>();
        if (agents_.count(a.name) || fns_.count(a.name) || host_.model(a.name))
            report(DiagCode::E0112, fmt::format("'{}' is defined more than once", a.name), a.nameSpan,
                   "agents, functions and models need distinct names");
        else agents_[a.name] = &a;
        if (!host_.model(a.model)) {
            std::vector<std::string> models;
            for (const auto& [n, m] : host_.models) models.push_back(n);
            report(DiagCode::E0203,
                   fmt::format("agent '{}' uses model '{}', which this host does not provide", a.name, a.model),
                   a.modelSpan, suggest(a.model, models));
        } else if (!uses_.count(a.model)) {
            report(DiagCode::E0201,
                   fmt::format("agent '{}' uses model '{}', which is not declared in 'uses'", a.name, a.model),
                   a.modelSpan, fmt::format("add '{}' to the program's uses line", a.model), {},
                   resourceDetails(a.model));
        }
        if (a.maxCalls && *a.maxCalls < 0)
            report(DiagCode::E0403, fmt::format("agent '{}' has a negative max_calls", a.name), a.nameSpan);
    }
}

void Checker::checkUses() {
    std::vector<std::string> resources = host_.resourceNames();
    std::set<std::string> seen;
    for (const UseEntry& u : prog_.uses) {
        if (!host_.capability(u.name) && !host_.model(u.name)) {
            std::string hint = suggest(u.name, resources);
            report(DiagCode::E0202, fmt::format("program uses '{}', which this host does not provide", u.name), u.span,
                   hint.empty() ? "remove it, or ask the host operator to provide it" : hint, {},
                   resourceDetails(u.name));
        }
        if (!seen.insert(u.name).second) {
            diags_.add(makeDiagnostic(DiagCode::W0202, "duplicate entry in 'uses'", opts_.programFile, u.span,
                                      fmt::format("remove the second '{}'", u.name)));
        }
        uses_.insert(u.name);
    }
}

// Calls between program functions form a graph; a cycle is recursion (E0402). Functions are
// numbered in name order (fns_'s) and the search runs in that order, each function's calls in the
// order they appear, so the cycles found and reported are the same as a search by name would find.
void Checker::checkRecursion() {
    std::vector<const FnDecl*> fns;
    std::unordered_map<const FnDecl*, size_t> number;
    for (const auto& [name, fn] : fns_) {
        number.emplace(fn, fns.size());
        fns.push_back(fn);
    }
    std::vector<std::vector<size_t>> graph(fns.size());
    std::vector<size_t>* out = nullptr;
    std::function<void(const Expr&)> walkExpr;
    auto walkBlock = [&](const Block& b) {
        for (const StmtPtr& s : b.stmts)
            if (s->value) walkExpr(*s->value);
    };
    walkExpr = [&](const Expr& e) {
        if (e.kind == ExprKind::Call) {
            const auto& c = e.as<CallExpr>();
            if (c.callee.size() == 1)
                if (auto it = fnByName_.find(c.callee[0]); it != fnByName_.end()) out->push_back(number.at(it->second));
        }
        forEachChild(e, [&](const Expr& child) { walkExpr(child); }, [&](const Block& block) { walkBlock(block); });
    };
    for (size_t i = 0; i < fns.size(); ++i) {
        out = &graph[i];
        walkBlock(*fns[i]->body);
    }

    std::vector<int> state(fns.size(), 0);  // 1 on the current path, 2 done
    std::vector<size_t> path;
    std::function<void(size_t)> dfs = [&](size_t u) {
        state[u] = 1;
        path.push_back(u);
        for (size_t v : graph[u]) {
            if (state[v] == 1) {
                auto start = std::find(path.begin(), path.end(), v);
                std::vector<std::string> cycle;
                for (auto it = start; it != path.end(); ++it) cycle.push_back(fns[*it]->name);
                cycle.push_back(fns[v]->name);
                report(DiagCode::E0402, fmt::format("recursion is not allowed: {}", joinList(cycle, " -> ")),
                       fns[v]->nameSpan,
                       "Remit programs are total so that bounds can be computed; use a bounded for-loop");
                recursive_ = true;
            } else if (state[v] == 0) {
                dfs(v);
            }
        }
        path.pop_back();
        state[u] = 2;
    };
    for (size_t i = 0; i < fns.size(); ++i)
        if (state[i] == 0) dfs(i);
}

bool Checker::isEffectfulCall(const CallExpr& call) const {
    if (call.callee.size() >= 2 && host_.capability(call.calleeName())) return true;
    return call.callee.size() == 2 && call.callee[1] == "ask" &&
           (host_.model(call.callee[0]) || agents_.count(call.callee[0]));
}

// ---------------------------------------------------------------- functions

FnSummary Checker::analyseFn(const FnDecl& fn, const std::vector<Info>& args, const Taint& pc, bool record) {
    record = record && !dry_;
    // The calling context (function, pc, argument tags), then the mode.
    std::string key;
    key.reserve(64);
    key += fn.name;
    key += '|';
    freezeInto(key, pc);
    for (const Info& a : args) {
        key += '|';
        freezeInto(key, a.taint);
    }
    const size_t contextLength = key.size();
    key += dry_ ? "|d" : record ? "|r" : "|t";
    if (auto it = fnCache_.find(key); it != fnCache_.end()) return it->second;
    analysedAnyFn_.insert(fn.name);
    if (!pc.empty()) calledUnderPc_.insert(fn.name);
    TypeRef ret = fn.ret ? resolve(*fn.ret) : arena_.unit();
    fnCache_[key] = FnSummary{ret, {}, {}};  // a guard while the body is analysed (recursion is E0402)
    if (record) analysedFns_.insert(fn.name);

    FnPasses passes;
    FnPasses* outerPasses = std::exchange(passes_, &passes);
    bool outerDry = dry_;
    bool savedInTest = inTest_;
    inTest_ = false;
    // One walk of the body with fresh scopes; the loop-carried taint in `passes` persists.
    auto walk = [&](bool finalPass, FnFrame& frame) {
        dry_ = outerDry || !finalPass;
        passes.changed = false;
        passes.sticky.clear();
        Scope scope(nullptr);
        for (size_t i = 0; i < fn.params.size(); ++i) {
            TypeRef t = resolve(*fn.params[i].type);
            Taint taint = i < args.size() ? args[i].taint : Taint{};
            const Param& p = fn.params[i];
            Span name{p.span.line, p.span.col, p.span.line, p.span.col + static_cast<uint32_t>(p.name.size())};
            scope.define(p.name, VarInfo{t, std::move(taint), false, nullptr, name});
        }
        fnStack_.push_back(FnFrame{&fn, ret, {}});
        Info info = block(*fn.body, Ctx{&scope, pc, 0, record && finalPass});
        frame = std::move(fnStack_.back());
        fnStack_.pop_back();
        return info;
    };
    FnFrame frame;
    Info body;
    int pass = 0;
    auto [carriedIt, firstTime] = loopCarriedBodies_.try_emplace(fn.body.get(), false);
    if (firstTime) carriedIt->second = hasLoopCarriedVars(*fn.body);
    bool loopCarried = carriedIt->second;
    bool converged = !loopCarried;
    std::string_view context(key.data(), contextLength);
    // A dry analysis in this context already walked the body to its fixed point: the dry passes
    // here would start from the same (empty) carried taint, see the same arguments, pc and callee
    // summaries, and so end in the same state. Starting from it leaves only the last walk.
    if (!converged && !outerDry)
        if (auto it = convergedLoops_.find(std::string(context)); it != convergedLoops_.end()) {
            passes.loops = it->second;
            converged = true;
        }
    const uint64_t depthCutsBefore = depthCuts_;
    for (; !converged && pass < kMaxPasses; ++pass) {
        body = walk(false, frame);
        converged = !passes.changed;
    }
    // Kept only when nothing here depended on where the analysis ran: no call cut at the depth
    // limit (which depends on the caller's depth), no stop, no E0003 for too many passes.
    if (outerDry && loopCarried && converged && pass < kMaxPasses && depthCuts_ == depthCutsBefore && !stopped_)
        convergedLoops_.try_emplace(std::string(context), passes.loops);
    if (pass == kMaxPasses) {
        dry_ = outerDry;
        report(DiagCode::E0003,
               fmt::format("the flow analysis of '{}' did not settle after {} passes over its loops", fn.name,
                           kMaxPasses),
               fn.nameSpan, "split the loops that pass values between many variables into smaller functions", {},
               {{"limit", "flow_passes"}, {"value", kMaxPasses}});
    }
    // The last walk reports and records (unless an enclosing walk is dry, in which case the
    // converged dry walk is the result).
    if (!outerDry || pass == 0) body = walk(true, frame);
    dry_ = outerDry;
    passes_ = outerPasses;
    inTest_ = savedInTest;

    Taint taint = body.taint;
    for (const Taint& r : frame.returns) unionInto(taint, r);
    if (fn.ret && ret->kind != remit::TypeKind::Unit && !blockReturns(*fn.body))
        report(DiagCode::E0109,
               fmt::format("function '{}' must return a value of type {} on every path", fn.name, showType(ret)),
               fn.nameSpan, "end the function with a return statement");
    FnSummary summary{ret, std::move(taint), std::move(body.eff)};
    if (opts_.recordFacts && !outerDry && !stopped_) {
        FunctionFacts& facts = result_.facts.functions[fn.name];
        for (const auto& [resource, n] : summary.eff) facts.calls[resource] = std::max(facts.calls[resource], n);
        facts.worstCaseCostUsd = worstCaseCostOf(host_, facts.calls);
    }
    fnCache_[key] = summary;
    return summary;
}

// Syntactic: does every path through the block end in `return`?
bool Checker::blockReturns(const Block& b) {
    for (const StmtPtr& s : b.stmts) {
        if (s->kind == StmtKind::Return) return true;
        if (s->kind != StmtKind::Expr) continue;
        if (s->value->kind == ExprKind::If && ifReturns(s->value->as<IfExpr>())) return true;
        if (s->value->kind == ExprKind::Match) {
            const auto& m = s->value->as<MatchExpr>();
            bool all = !m.arms.empty();
            for (const MatchArm& a : m.arms) all = all && blockReturns(*a.body);
            if (all) return true;
        }
    }
    return false;
}

bool Checker::ifReturns(const IfExpr& e) {
    if (e.elseIf) return blockReturns(*e.thenBlock) && ifReturns(e.elseIf->as<IfExpr>());
    if (e.elseBlock) return blockReturns(*e.thenBlock) && blockReturns(*e.elseBlock);
    return false;
}

Info Checker::block(const Block& b, const Ctx& ctx) {
    Scope scope(ctx.scope);
    return statements(b.stmts, 0, ctx.with(&scope));
}

// The effects of a statement sequence. A statement `if` with a branch that always returns makes
// that branch an alternative to the rest of the block rather than adding to it, which keeps
// early-return guards tight, as in the prototype (docs/language.md "Bounds and budget").
Info Checker::statements(const std::vector<StmtPtr>& stmts, size_t from, const Ctx& ctx) {
    Effects eff;
    for (size_t i = from; i < stmts.size(); ++i) {
        const Stmt& s = *stmts[i];
        bool last = i + 1 == stmts.size();
        if (s.kind == StmtKind::Expr && s.value->kind == ExprKind::If && !last) {
            const auto& e = s.value->as<IfExpr>();
            bool thenReturns = blockReturns(*e.thenBlock);
            bool elseReturns = e.elseIf ? ifReturns(e.elseIf->as<IfExpr>()) : e.elseBlock && blockReturns(*e.elseBlock);
            if (thenReturns || elseReturns) {
                IfParts parts = ifParts(e, ctx);
                raisePc(parts.cond.taint);  // strict: the rest runs only because the guard held
                noteType(e, arena_.unit());
                // CheckFacts: the guard itself, as expr() records an `if` (its branches' tags and calls).
                if (opts_.recordFacts && !dry_ && !stopped_)
                    noteFacts(*s.value,
                              Info{arena_.unit(), unite(unite(parts.thenInfo.taint, parts.elseInfo.taint), parts.cond.taint),
                                   sum(parts.cond.eff, maxOf(parts.thenInfo.eff, parts.elseInfo.eff))});
                // The block's value is the rest's (unreachable, Never, when both branches return:
                // then the rest is still checked, so its calls are resolved and its errors found,
                // but what it would call never counts).
                Info restInfo{arena_.never(), {}, {}};
                if (!(thenReturns && elseReturns)) restInfo = statements(stmts, i + 1, ctx);
                else statements(stmts, i + 1, Ctx{ctx.scope, ctx.pc, ctx.loopDepth, false});
                const Effects& rest = restInfo.eff;
                Effects branch;
                if (thenReturns && !elseReturns) branch = maxOf(parts.thenInfo.eff, sum(parts.elseInfo.eff, rest));
                else if (elseReturns && !thenReturns) branch = maxOf(sum(parts.thenInfo.eff, rest), parts.elseInfo.eff);
                else branch = maxOf(parts.thenInfo.eff, parts.elseInfo.eff);
                return Info{restInfo.type, std::move(restInfo.taint), sum(sum(eff, parts.cond.eff), branch)};
            }
        }
        Info info = statement(s, ctx);
        addInto(eff, info.eff);
        if (last && s.kind == StmtKind::Expr) return Info{info.type, std::move(info.taint), std::move(eff)};
        // A block that ends by leaving (return, break) never produces a value: Never joins with
        // the other branch, so `if c { x } else { return y }` has x's type.
        if (last && (s.kind == StmtKind::Return || s.kind == StmtKind::Break))
            return Info{arena_.never(), {}, std::move(eff)};
    }
    return Info{arena_.unit(), {}, std::move(eff)};
}

Info Checker::statement(const Stmt& s, const Ctx& ctx) {
    switch (s.kind) {
        case StmtKind::Let: {
            Info v = expr(*s.value, ctx);
            TypeRef t = v.type;
            if (s.type) {
                TypeRef declared = resolve(*s.type);
                if (!assignable(v.type, declared)) {
                    report(DiagCode::E0103,
                           fmt::format("'{}' is declared as {} but the value has type {}", s.name, showType(declared),
                                       showType(v.type)),
                           s.value->span, {}, {}, mismatch(declared, v.type));
                } else if (std::string bv = boundViolation(v.type, declared); !bv.empty() && !s.isVar) {
                    report(DiagCode::E0113, fmt::format("'{}': {}", s.name, bv), s.value->span,
                           "use take(xs, N) to bound the list", {}, mismatch(declared, v.type));
                }
                t = declared;
            } else if (s.isVar) {
                // An unannotated var may be reassigned: literals widen to Str, and a list may grow
                // in a loop, so it is treated as unbounded.
                t = widenLiterals(arena_, t);
                if (t->kind == remit::TypeKind::List) t = arena_.list(t->elem, std::nullopt);
            }
            if (ctx.scope->definedHere(s.name))
                report(DiagCode::E0112, fmt::format("'{}' is already defined in this block", s.name), s.nameSpan,
                       "choose a different name, or declare it with var and assign to it");
            Taint taint = s.isVar ? unite(v.taint, pcAt(ctx)) : v.taint;
            ctx.scope->define(s.name, VarInfo{t, std::move(taint), s.isVar, s.isVar ? &s : nullptr, s.nameSpan});
            return Info{arena_.unit(), {}, std::move(v.eff)};
        }
        case StmtKind::Assign: {
            Info v = expr(*s.value, ctx);
            VarInfo* var = ctx.scope->lookup(s.name);
            if (!var) {
                report(DiagCode::E0101, fmt::format("unknown variable '{}'", s.name), s.nameSpan,
                       suggest(s.name, ctx.scope->names()));
                return Info{arena_.unit(), {}, std::move(v.eff)};
            }
            if (!var->isMutable) {
                report(DiagCode::E0108, fmt::format("cannot assign to '{}': it was declared with 'let'", s.name),
                       s.nameSpan, fmt::format("declare it with 'var {} = ...' if it must change", s.name));
            } else if (!assignable(v.type, var->type)) {
                report(DiagCode::E0103,
                       fmt::format("cannot assign a value of type {} to '{}' of type {}", showType(v.type), s.name,
                                   showType(var->type)),
                       s.value->span, {}, {}, mismatch(var->type, v.type));
            }
            unionInto(var->taint, v.taint);
            unionInto(var->taint, pcAt(ctx));
            return Info{arena_.unit(), {}, std::move(v.eff)};
        }
        case StmtKind::Return: {
            if (inTest_ || fnStack_.empty()) {
                report(DiagCode::E0109, "'return' is only allowed inside a function", s.span,
                       "tests check results with expect");
                if (s.value) return Info{arena_.never(), {}, expr(*s.value, ctx).eff};
                return Info{arena_.never(), {}, {}};
            }
            // Copies: evaluating the value may analyse callees, which grows fnStack_.
            const FnDecl& fn = *fnStack_.back().fn;
            TypeRef ret = fnStack_.back().ret;
            if (!s.value) {
                if (ret->kind != remit::TypeKind::Unit)
                    report(DiagCode::E0109, fmt::format("'{}' must return a value of type {}", fn.name, showType(ret)),
                           s.span, {}, {}, mismatch(ret, arena_.unit()));
                return Info{arena_.never(), {}, {}};
            }
            Info v = expr(*s.value, ctx);
            if (!assignable(v.type, ret)) {
                report(
                    DiagCode::E0109,
                    fmt::format("'{}' returns {} but this value has type {}", fn.name, showType(ret), showType(v.type)),
                    s.value->span, {}, {}, mismatch(ret, v.type));
            } else if (std::string bv = boundViolation(v.type, ret); !bv.empty()) {
                report(DiagCode::E0113, fmt::format("return value of '{}': {}", fn.name, bv), s.value->span,
                       "use take(xs, N) to bound the list", {}, mismatch(ret, v.type));
            }
            fnStack_.back().returns.push_back(unite(v.taint, pcAt(ctx)));
            return Info{arena_.never(), {}, std::move(v.eff)};
        }
        case StmtKind::Expr: return expr(*s.value, ctx);
        case StmtKind::Expect: {
            if (!inTest_)
                report(DiagCode::E0110, "'expect' is only allowed inside a test block", s.span,
                       "move the check into a test \"...\" { } block");
            Info v = expr(*s.value, ctx);
            if (v.type->kind != remit::TypeKind::Bool && v.type->kind != remit::TypeKind::Never)
                report(DiagCode::E0103, fmt::format("'expect' needs a Bool condition, found {}", showType(v.type)),
                       s.value->span, {}, {}, mismatch("Bool", v.type));
            return Info{arena_.unit(), {}, std::move(v.eff)};
        }
        case StmtKind::Break:
            if (ctx.loopDepth == 0)
                report(DiagCode::E0110, "'break' outside of a for-loop", s.span, "break only ends a for-loop");
            raisePc(pcAt(ctx));  // strict: what runs after the loop depends on why it stopped
            return Info{arena_.never(), {}, {}};
    }
    return Info{arena_.unit(), {}, {}};
}

// ---------------------------------------------------------------- expressions

Info Checker::exprInner(const Expr& e, const Ctx& ctx) {
    switch (e.kind) {
        case ExprKind::Int: return Info{arena_.integer(), {}, {}};
        case ExprKind::Float: return Info{arena_.floating(), {}, {}};
        case ExprKind::Bool: return Info{arena_.boolean(), {}, {}};
        case ExprKind::Str: return Info{arena_.strLiterals({e.as<StrLit>().value}), {}, {}};
        case ExprKind::Interp: {
            Info out{arena_.str(), {}, {}};
            for (const InterpPart& p : e.as<InterpExpr>().parts) {
                if (!p.expr) continue;
                Info part = expr(*p.expr, ctx);
                unionInto(out.taint, part.taint);
                addInto(out.eff, part.eff);
            }
            return out;
        }
        case ExprKind::Name: {
            const std::string& name = e.as<NameExpr>().name;
            VarInfo* v = ctx.scope->lookup(name);
            if (!v) {
                if (Habit habit = findHabit(HabitTrigger::Name, name); habit != Habit::None) {  // null, True, ...
                    HabitText text = renderHabit(habit, name, {{"form", lowerAscii(name)}});
                    report(DiagCode::E0101, std::move(text.message), e.span, std::move(text.hint));
                    return Info{arena_.never(), {}, {}};
                }
                std::string hint = suggest(name, ctx.scope->names());
                if (fns_.count(name) || isBuiltin(name)) hint = fmt::format("'{}' is a function; call it with ()", name);
                report(DiagCode::E0101, fmt::format("unknown variable '{}'", name), e.span, hint);
                return Info{arena_.never(), {}, {}};
            }
            if (opts_.recordFacts) result_.facts.definitions[static_cast<uint32_t>(e.id)] = v->declSpan;
            return Info{v->type, v->taint, {}};
        }
        case ExprKind::Field: {
            const auto& f = e.as<FieldExpr>();
            // os.environ, process.env: a field of another language's ambient object.
            if (f.object->kind == ExprKind::Name && !ctx.scope->lookup(f.object->as<NameExpr>().name)) {
                std::string dotted = f.object->as<NameExpr>().name + "." + f.name;
                if (Habit habit = findHabit(HabitTrigger::Name, dotted); habit != Habit::None) {
                    HabitText text = renderHabit(habit, dotted);
                    report(DiagCode::E0101, std::move(text.message), e.span, std::move(text.hint));
                    return Info{arena_.never(), {}, {}};
                }
            }
            Info o = expr(*f.object, ctx);
            if (o.type->kind == remit::TypeKind::Never) return Info{arena_.never(), o.taint, o.eff};
            Habit lengthHabit = findHabit(HabitTrigger::Field, f.name);  // xs.length
            if (lengthHabit != Habit::None && (o.type->kind == remit::TypeKind::List || o.type->isStringLike())) {
                HabitNames names;
                if (auto object = quoteExpr(*f.object)) names.emplace_back("arg", *object);
                HabitText text = renderHabit(lengthHabit, f.name, names);
                report(DiagCode::E0102, std::move(text.message), f.nameSpan, std::move(text.hint));
                return Info{arena_.never(), o.taint, o.eff};
            }
            if (o.type->kind != remit::TypeKind::Record) {
                report(DiagCode::E0102, fmt::format("type {} has no field '{}'", showType(o.type), f.name), f.nameSpan);
                return Info{arena_.never(), o.taint, o.eff};
            }
            TypeRef ft = o.type->field(f.name);
            if (!ft) {
                std::vector<std::string> names;
                for (const RecordFieldType& rf : o.type->fields) names.push_back(rf.name);
                std::string hint = suggest(f.name, names);
                if (hint.empty()) hint = fmt::format("available fields: {}", joinList(names));
                report(DiagCode::E0102, fmt::format("{} has no field '{}'", showType(o.type), f.name), f.nameSpan, hint);
                return Info{arena_.never(), o.taint, o.eff};
            }
            return Info{ft, o.taint, o.eff};
        }
        case ExprKind::Index: {
            const auto& ix = e.as<IndexExpr>();
            Info o = expr(*ix.object, ctx);
            Info i = expr(*ix.index, ctx);
            if (i.type->kind != remit::TypeKind::Int && i.type->kind != remit::TypeKind::Never)
                report(DiagCode::E0103, fmt::format("list index must be Int, found {}", showType(i.type)),
                       ix.index->span, {}, {}, mismatch("Int", i.type));
            Taint taint = unite(o.taint, i.taint);
            Effects eff = sum(o.eff, i.eff);
            if (o.type->kind == remit::TypeKind::List) return Info{o.type->elem, std::move(taint), std::move(eff)};
            if (o.type->kind != remit::TypeKind::Never)
                report(DiagCode::E0103, fmt::format("cannot index into {}", showType(o.type)), e.span,
                       o.type->isStringLike() ? "strings cannot be indexed; use split or startswith" : "");
            return Info{arena_.never(), std::move(taint), std::move(eff)};
        }
        case ExprKind::List: {
            const auto& l = e.as<ListExpr>();
            TypeRef elem = arena_.never();
            Info out{nullptr, {}, {}};
            for (const ExprPtr& item : l.items) {
                Info i = expr(*item, ctx);
                if (TypeRef j = joinTypes(arena_, elem, i.type)) elem = j;
                else
                    report(
                        DiagCode::E0103,
                        fmt::format("list items must have the same type: {} vs {}", showType(elem), showType(i.type)),
                        item->span, {}, {}, mismatch(elem, i.type));
                unionInto(out.taint, i.taint);
                addInto(out.eff, i.eff);
            }
            out.type = arena_.list(elem, static_cast<int64_t>(l.items.size()));
            return out;
        }
        case ExprKind::Record: {
            Info out{nullptr, {}, {}};
            std::vector<RecordFieldType> fields;
            for (const RecordField& f : e.as<RecordExpr>().fields) {
                Info v = expr(*f.value, ctx);
                fields.push_back({f.name, v.type});
                unionInto(out.taint, v.taint);
                addInto(out.eff, v.eff);
            }
            out.type = arena_.record(std::move(fields));
            return out;
        }
        case ExprKind::Unary: {
            const auto& u = e.as<UnaryExpr>();
            Info o = expr(*u.operand, ctx);
            bool never = o.type->kind == remit::TypeKind::Never;
            if (u.op == UnaryOp::Not) {
                if (o.type->kind != remit::TypeKind::Bool && !never)
                    report(DiagCode::E0106, fmt::format("'not' needs a Bool, found {}", showType(o.type)), u.operand->span);
                return Info{arena_.boolean(), o.taint, o.eff};
            }
            if (!o.type->isNumber() && !never)
                report(DiagCode::E0106, fmt::format("unary '-' needs a number, found {}", showType(o.type)), u.operand->span);
            return Info{o.type->isNumber() ? o.type : arena_.never(), o.taint, o.eff};
        }
        case ExprKind::Binary: return binary(e.as<BinaryExpr>(), ctx);
        case ExprKind::Call: return call(e.as<CallExpr>(), ctx);
        case ExprKind::If: {
            const auto& i = e.as<IfExpr>();
            IfParts parts = ifParts(i, ctx);
            if (ifGuardsExit(i, ctx.loopDepth > 0)) raisePc(parts.cond.taint);
            if (!i.elseBlock && !i.elseIf) {
                if (!isUnitLike(parts.thenInfo.type))
                    noteValueless(e, fmt::format("it has no 'else' branch (its 'then' branch has type {})",
                                                 showType(parts.thenInfo.type)),
                                  "add an else branch of the same type, or use the 'if' as a statement");
                // Its Unit value still carries the condition (docs/language.md "Labels, exactly").
                return Info{arena_.unit(), parts.cond.taint, sum(parts.cond.eff, parts.thenInfo.eff)};
            }
            TypeRef t = joinTypes(arena_, parts.thenInfo.type, parts.elseInfo.type);
            if (!t) {
                // The branches disagree: usable only as a statement.
                t = arena_.unit();
                noteValueless(e,
                              fmt::format("its branches have different types ({} and {})",
                                          showType(parts.thenInfo.type), showType(parts.elseInfo.type)),
                              "give both branches the same type, or use the 'if' as a statement");
            }
            Taint taint = unite(unite(parts.thenInfo.taint, parts.elseInfo.taint), parts.cond.taint);
            return Info{t, std::move(taint), sum(parts.cond.eff, maxOf(parts.thenInfo.eff, parts.elseInfo.eff))};
        }
        case ExprKind::For: return forExpr(e.as<ForExpr>(), ctx);
        case ExprKind::Match: return matchExpr(e.as<MatchExpr>(), ctx);
    }
    return Info{arena_.never(), {}, {}};
}

Checker::IfParts Checker::ifParts(const IfExpr& e, const Ctx& ctx) {
    IfParts parts;
    parts.cond = expr(*e.cond, ctx);
    if (parts.cond.type->kind != remit::TypeKind::Bool && parts.cond.type->kind != remit::TypeKind::Never)
        report(DiagCode::E0103, fmt::format("'if' condition must be Bool, found {}", showType(parts.cond.type)),
               e.cond->span, {}, {}, mismatch("Bool", parts.cond.type));
    Taint inner = unite(pcAt(ctx), parts.cond.taint);
    Ctx branch{ctx.scope, inner, ctx.loopDepth, ctx.record};
    parts.thenInfo = block(*e.thenBlock, branch);
    if (e.elseIf) parts.elseInfo = expr(*e.elseIf, branch);
    else if (e.elseBlock) parts.elseInfo = block(*e.elseBlock, branch);
    else parts.elseInfo = Info{arena_.unit(), {}, {}};
    return parts;
}

Info Checker::binary(const BinaryExpr& e, const Ctx& ctx) {
    Info l = expr(*e.left, ctx);
    // Strict: the right side of and/or runs only because of the left side's value.
    bool shortCircuit = e.op == BinaryOp::And || e.op == BinaryOp::Or;
    Taint rightPc = strict() && shortCircuit ? unite(pcAt(ctx), l.taint) : Taint{};
    Info r = strict() && shortCircuit ? expr(*e.right, Ctx{ctx.scope, rightPc, ctx.loopDepth, ctx.record})
                                      : expr(*e.right, ctx);
    Info out{arena_.boolean(), unite(l.taint, r.taint), sum(l.eff, r.eff)};
    TypeRef lt = l.type, rt = r.type;
    const char* op = binaryOpText(e.op);
    bool comparison = binaryPrecedence(e.op) <= 4;
    if (lt->kind == remit::TypeKind::Never || rt->kind == remit::TypeKind::Never) {
        if (!comparison) out.type = lt->kind == remit::TypeKind::Never ? rt : lt;
        return out;
    }
    switch (e.op) {
        case BinaryOp::And:
        case BinaryOp::Or:
            if (lt->kind != remit::TypeKind::Bool)
                report(DiagCode::E0106, fmt::format("'{}' needs Bool operands, found {}", op, showType(lt)), e.left->span);
            if (rt->kind != remit::TypeKind::Bool)
                report(DiagCode::E0106, fmt::format("'{}' needs Bool operands, found {}", op, showType(rt)), e.right->span);
            return out;
        case BinaryOp::Eq:
        case BinaryOp::Ne: {
            // Comparing an enum with a literal outside it can never be true: almost always a typo.
            auto checkLiteral = [&](TypeRef enumType, const Expr& other) {
                if (enumType->kind != remit::TypeKind::Enum || other.kind != ExprKind::Str) return;
                const std::string& value = other.as<StrLit>().value;
                if (std::find(enumType->options.begin(), enumType->options.end(), value) == enumType->options.end())
                    report(DiagCode::E0111,
                           fmt::format("\"{}\" is not a possible value of {}", value, showType(enumType)), other.span,
                           fmt::format("possible values: {}", quotedOptions(enumType->options)));
            };
            checkLiteral(lt, *e.right);
            checkLiteral(rt, *e.left);
            if (!joinTypes(arena_, lt, rt))
                report(DiagCode::E0106, fmt::format("cannot compare {} with {}", showType(lt), showType(rt)), e.span);
            return out;
        }
        case BinaryOp::Lt:
        case BinaryOp::Le:
        case BinaryOp::Gt:
        case BinaryOp::Ge:
            if (!((lt->isNumber() && rt->isNumber()) || (lt->isStringLike() && rt->isStringLike())))
                report(DiagCode::E0106, fmt::format("cannot order {} and {} with '{}'", showType(lt), showType(rt), op),
                       e.span, "only numbers with numbers and strings with strings can be ordered");
            return out;
        case BinaryOp::In:
            if (rt->kind == remit::TypeKind::List) {
                if (!joinTypes(arena_, lt, rt->elem))
                    report(DiagCode::E0106, fmt::format("cannot look for {} in {}", showType(lt), showType(rt)), e.span);
            } else if (rt->isStringLike()) {
                if (!lt->isStringLike())
                    report(DiagCode::E0106,
                           fmt::format("'in' on a string needs a Str on the left, found {}", showType(lt)), e.left->span);
            } else {
                report(DiagCode::E0106, fmt::format("'in' needs a List or Str on the right, found {}", showType(rt)),
                       e.right->span);
            }
            return out;
        default: break;
    }
    if (e.op == BinaryOp::Add) {
        if (lt->isStringLike() && rt->isStringLike()) {
            out.type = arena_.str();
            return out;
        }
        if (lt->kind == remit::TypeKind::List && rt->kind == remit::TypeKind::List) {
            TypeRef j = joinTypes(arena_, lt, rt);
            if (!j) {
                report(DiagCode::E0106, fmt::format("cannot concatenate {} and {}", showType(lt), showType(rt)), e.span);
                out.type = lt;
                return out;
            }
            std::optional<int64_t> max;
            if (lt->max && rt->max)  // saturating: a huge declared bound must not wrap to a small one
                max = *lt->max > INT64_MAX - *rt->max ? INT64_MAX : *lt->max + *rt->max;
            out.type = arena_.list(j->elem, max);
            return out;
        }
    }
    if (lt->isNumber() && rt->isNumber()) {
        bool isFloat = e.op == BinaryOp::Div || lt->kind == remit::TypeKind::Float || rt->kind == remit::TypeKind::Float;
        out.type = isFloat ? arena_.floating() : arena_.integer();
        return out;
    }
    std::string hint;
    if (e.op == BinaryOp::Add && (lt->isStringLike() || rt->isStringLike()))
        hint = "use string interpolation: \"{a}{b}\"";
    report(DiagCode::E0106, fmt::format("cannot apply '{}' to {} and {}", op, showType(lt), showType(rt)), e.span, hint);
    out.type = lt;
    return out;
}

Info Checker::forExpr(const ForExpr& e, const Ctx& ctx) {
    Info it = expr(*e.iter, ctx);
    std::optional<int64_t> n;
    TypeRef elem = arena_.never();
    if (it.type->kind == remit::TypeKind::List) {
        elem = it.type->elem;
        n = it.type->max;
    } else if (it.type->kind != remit::TypeKind::Never) {
        report(DiagCode::E0103, fmt::format("for-loops iterate over lists, found {}", showType(it.type)), e.iter->span,
               it.type->isStringLike() ? "split the string first, e.g. split(s, \"\\n\")" : "");
    }
    if (e.limit) n = n ? std::min(*n, *e.limit) : *e.limit;
    if (!n) {
        n = 0;
        if (it.type->kind == remit::TypeKind::List)
            report(DiagCode::E0401, "loop over a list with no known size bound", e.iter->span,
                   fmt::format("add a limit, e.g. 'for {} in ... limit 20', so the worst case is known before running",
                               e.var),
                   {fmt::format("'{}' has type {}", shortSource(*e.iter), showType(it.type))});
    }
    uint64_t times = static_cast<uint64_t>(std::max<int64_t>(0, *n));
    carryIntoLoop(e, *ctx.scope);
    Scope inner(ctx.scope);
    inner.define(e.var, VarInfo{elem, it.taint, false, nullptr, e.varSpan});
    Taint pc = unite(pcAt(ctx), it.taint);
    Effects perIteration;
    Taint filterTaint;
    if (e.filter) {
        Info w = expr(*e.filter, Ctx{&inner, pc, ctx.loopDepth + 1, ctx.record});
        if (w.type->kind != remit::TypeKind::Bool && w.type->kind != remit::TypeKind::Never)
            report(DiagCode::E0103, fmt::format("loop filter must be Bool, found {}", showType(w.type)), e.filter->span,
                   {}, {}, mismatch("Bool", w.type));
        perIteration = w.eff;
        unionInto(pc, w.taint);
        filterTaint = w.taint;
        // Strict: a filtered-out element skips the body's exits.
        if (guardsExit(*e.body, true)) raisePc(w.taint);
    }
    Info body = block(*e.body, Ctx{&inner, pc, ctx.loopDepth + 1, ctx.record});
    carryOutOfLoop(e, *ctx.scope);
    addInto(perIteration, body.eff);
    Effects eff = sum(it.eff, scaled(perIteration, times));
    // Strict: a loop that ends without returning did so because its list ran out.
    if (exitsOf(*e.body).returns) raisePc(it.taint);
    // A body of type Never never produces an element (it always returns or breaks, or the loop
    // runs over `[]`, whose variable is Never): the list is List[Never], which fits any list type.
    Info out{arena_.list(body.type, static_cast<int64_t>(times)), unite(body.taint, it.taint), std::move(eff)};
    if (strict()) {
        // Strict: the list's length reveals its filter and its breaks (rule 4).
        unionInto(out.taint, filterTaint);
        unionInto(out.taint, pcAt(ctx));
    }
    return out;
}

bool Checker::ifGuardsExit(const IfExpr& e, bool inLoop) {
    if (guardsExit(*e.thenBlock, inLoop)) return true;
    if (e.elseBlock) return guardsExit(*e.elseBlock, inLoop);
    if (e.elseIf) return ifGuardsExit(e.elseIf->as<IfExpr>(), inLoop);
    return false;
}

// Before a loop's filter and body: what the outer vars carried out of an iteration in the last pass.
void Checker::carryIntoLoop(const ForExpr& e, Scope& outer) {
    if (!passes_) return;
    auto it = passes_->loops.find(e.id);
    if (it == passes_->loops.end()) return;
    outer.forEachVar([&](VarInfo& v) {
        if (auto c = it->second.vars.find(v.decl); c != it->second.vars.end()) unionInto(v.taint, c->second);
    });
    unionInto(passes_->sticky, it->second.sticky);
}

// After the body: record what the outer vars carry into the next iteration; a growth means the
// body must be walked again.
void Checker::carryOutOfLoop(const ForExpr& e, Scope& outer) {
    if (!passes_) return;
    LoopCarry& carry = passes_->loops[e.id];
    outer.forEachVar([&](VarInfo& v) {
        Taint& carried = carry.vars[v.decl];
        for (const auto& [tag, origins] : v.taint) {
            std::set<std::string>& known = carried[tag];
            size_t before = known.size();
            known.insert(origins.begin(), origins.end());
            if (known.size() != before) passes_->changed = true;
        }
    });
    for (const auto& [tag, origins] : passes_->sticky) {
        std::set<std::string>& known = carry.sticky[tag];
        size_t before = known.size();
        known.insert(origins.begin(), origins.end());
        if (known.size() != before) passes_->changed = true;
    }
}

// Does some loop in `b` assign a variable (so its taint may travel from one iteration to the next),
// or (strict) hold an exit, whose raised pc does too?
bool Checker::hasLoopCarriedVars(const Block& b) const {
    bool found = false;
    std::function<void(const Block&, bool)> inBlock;
    std::function<void(const Expr&, bool)> inExpr = [&](const Expr& e, bool inLoop) {
        bool isLoop = e.kind == ExprKind::For;
        bool bodyInLoop = inLoop || isLoop;
        // A loop's filter runs once per iteration, as its body does; its list once.
        const Expr* iter = isLoop ? e.as<ForExpr>().iter.get() : nullptr;
        forEachChild(
            e, [&](const Expr& child) { inExpr(child, isLoop && &child == iter ? inLoop : bodyInLoop); },
            [&](const Block& inner) { inBlock(inner, bodyInLoop); });
    };
    inBlock = [&](const Block& block, bool inLoop) {
        for (const StmtPtr& st : block.stmts) {
            if (found) return;
            if (inLoop && st->kind == StmtKind::Assign) found = true;
            // Strict: a guarded exit raises the pc for the loop's later iterations too.
            if (inLoop && strict() && (st->kind == StmtKind::Break || st->kind == StmtKind::Return)) found = true;
            if (st->value) inExpr(*st->value, inLoop);
        }
    };
    inBlock(b, false);
    return found;
}

Info Checker::matchExpr(const MatchExpr& e, const Ctx& ctx) {
    Info s = expr(*e.subject, ctx);
    TypeRef st = s.type;
    bool isEnum = st->kind == remit::TypeKind::Enum;
    if (!st->isStringLike() && st->kind != remit::TypeKind::Never)
        report(DiagCode::E0111,
               fmt::format("match needs a string or a union of string literals, found {}", showType(st)), e.subject->span);
    Taint pc = unite(pcAt(ctx), s.taint);
    Ctx armCtx{ctx.scope, pc, ctx.loopDepth, ctx.record};
    std::set<std::string> seen;
    bool hasDefault = false;
    TypeRef t = arena_.never();
    Effects armsEff;
    Taint taint = s.taint;
    for (const MatchArm& arm : e.arms) {
        if (!arm.pattern) {
            if (hasDefault) report(DiagCode::E0111, "duplicate '_' arm", arm.span, "keep one '_ =>' arm, last");
            hasDefault = true;
        } else {
            if (!seen.insert(*arm.pattern).second)
                report(DiagCode::E0111, fmt::format("duplicate match arm \"{}\"", *arm.pattern), arm.span);
            if (isEnum && std::find(st->options.begin(), st->options.end(), *arm.pattern) == st->options.end())
                report(DiagCode::E0111, fmt::format("\"{}\" is not a possible value of {}", *arm.pattern, showType(st)),
                       arm.span, fmt::format("possible values: {}", quotedOptions(st->options)));
        }
        Info b = block(*arm.body, armCtx);
        armsEff = maxOf(armsEff, b.eff);
        unionInto(taint, b.taint);
        TypeRef j = joinTypes(arena_, t, b.type);
        if (!j && !valueless_.count(e.id))
            noteValueless(e, fmt::format("its arms have different types ({} and {})", showType(t), showType(b.type)),
                          "give every arm the same type, or use the 'match' as a statement");
        t = j ? j : arena_.unit();
    }
    if (!hasDefault) {
        if (isEnum) {
            std::vector<std::string> missing;
            for (const std::string& o : st->options)
                if (!seen.count(o)) missing.push_back(o);
            if (!missing.empty())
                report(DiagCode::E0111, fmt::format("match is not exhaustive: missing {}", quotedOptions(missing)), e.span,
                       "add the missing arms or a '_ =>' arm");
        } else if (st->kind == remit::TypeKind::Str) {
            report(DiagCode::E0111, "match on Str needs a '_ =>' arm", e.span, "add '_ => ...' as the last arm");
        }
    }
    if (e.arms.empty()) t = arena_.unit();
    bool exits = false;
    for (const MatchArm& arm : e.arms) exits = exits || guardsExit(*arm.body, ctx.loopDepth > 0);
    if (exits) raisePc(s.taint);
    return Info{t, std::move(taint), sum(s.eff, armsEff)};
}

// ---------------------------------------------------------------- calls

std::optional<std::vector<const CallArg*>> Checker::bindArgs(const CallExpr& e, const std::vector<std::string>& params,
                                                             std::string_view callee) {
    auto what = [&] { return fmt::format("'{}'", callee); };
    std::vector<const CallArg*> bound(params.size(), nullptr);
    size_t positional = 0;
    for (const CallArg& a : e.args)
        if (!a.name) ++positional;
    if (positional > params.size()) {
        report(DiagCode::E0104,
               fmt::format("{} takes {} argument(s) but {} were given", what(), params.size(), e.args.size()), e.span);
        return std::nullopt;
    }
    size_t next = 0;
    for (const CallArg& a : e.args) {
        if (!a.name) {
            bound[next++] = &a;
            continue;
        }
        auto it = std::find(params.begin(), params.end(), *a.name);
        if (it == params.end()) {
            std::string hint = suggest(*a.name, params);
            report(DiagCode::E0104, fmt::format("{} has no parameter '{}'", what(), *a.name), a.span,
                   hint.empty() ? fmt::format("parameters: {}", joinList(params)) : hint);
            return std::nullopt;
        }
        size_t index = static_cast<size_t>(it - params.begin());
        if (bound[index]) {
            report(DiagCode::E0104, fmt::format("argument '{}' given twice", *a.name), a.span);
            return std::nullopt;
        }
        bound[index] = &a;
    }
    std::vector<std::string> missing;
    for (size_t i = 0; i < params.size(); ++i)
        if (!bound[i]) missing.push_back(params[i]);
    if (!missing.empty()) {
        report(DiagCode::E0104, fmt::format("{} is missing argument(s): {}", what(), joinList(missing)), e.span);
        return std::nullopt;
    }
    return bound;
}

void Checker::checkArg(const CallArg& arg, const Info& info, TypeRef expected, std::string_view callee,
                       std::string_view param) {
    auto what = [&] { return fmt::format("'{}' parameter '{}'", callee, param); };
    if (!assignable(info.type, expected)) {
        report(DiagCode::E0103, fmt::format("{} expects {}, found {}", what(), showType(expected), showType(info.type)),
               arg.value->span, {}, {}, mismatch(expected, info.type));
        return;
    }
    if (std::string bv = boundViolation(info.type, expected); !bv.empty())
        report(DiagCode::E0113, fmt::format("{}: {}", what(), bv), arg.value->span, "use take(xs, N) to bound the list",
               {}, mismatch(expected, info.type));
}

void Checker::modifiersOnPlainCall(const CallExpr& e) {
    if (e.retry || e.timeoutSeconds || e.fallback)
        report(DiagCode::E0107, "retry, timeout and else apply only to capability and model calls", e.span,
               "remove the modifier; plain functions cannot fail operationally");
}

Info Checker::call(const CallExpr& e, const Ctx& ctx) {
    const std::vector<std::string>& path = e.callee;
    std::string dotted = path.size() >= 2 ? e.calleeName() : std::string();  // used only for dotted paths
    ResolvedCall& resolved = result_.calls[static_cast<uint32_t>(e.id)];
    if (path.size() == 2 && path[1] == "ask" && (host_.model(path[0]) || agents_.count(path[0])))
        return modelCall(e, ctx);
    if (path.size() >= 2) {
        if (const Capability* cap = host_.capability(dotted)) return capabilityCall(e, *cap, ctx);
    }
    modifiersOnPlainCall(e);
    if (path.size() == 1)
        if (auto fn = fnByName_.find(path[0]); fn != fnByName_.end()) return functionCall(e, *fn->second, ctx);
    if (path.size() == 1 && isBuiltin(path[0])) {
        resolved.target = CallTarget::Builtin;
        resolved.name = path[0];
        return builtinCall(e, ctx);
    }
    if (callHabit(e, ctx)) {
        Info out{arena_.never(), {}, {}};
        for (const CallArg& a : e.args) {
            // map(double, xs) passes a function by name: that is the habit, not a second error.
            bool function = a.value->kind == ExprKind::Name && !ctx.scope->lookup(a.value->as<NameExpr>().name) &&
                            (fns_.count(a.value->as<NameExpr>().name) || isBuiltin(a.value->as<NameExpr>().name));
            if (function)
                referencedFns_.insert(a.value->as<NameExpr>().name);  // it is used, as a value
            else
                addInto(out.eff, expr(*a.value, ctx).eff);
        }
        return out;
    }
    if (path.size() >= 2) {
        if (host_.model(path[0]) || agents_.count(path[0])) {
            report(DiagCode::E0203, "models and agents are called with .ask(Type, prompt, context: ...)", e.calleeSpan,
                   fmt::format("write {}.ask(Type, \"prompt\")", path[0]));
        } else {
            std::vector<std::string> caps, sameNamespace;
            for (const auto& [name, c] : host_.capabilities) {
                caps.push_back(name);
                if (name.rfind(path[0] + ".", 0) == 0) sameNamespace.push_back(name);
            }
            std::string hint = suggest(dotted, caps);
            if (hint.empty())
                hint = sameNamespace.empty() ? "the host interface does not provide it"
                                             : fmt::format("capabilities in '{}': {}", path[0], joinList(sameNamespace));
            report(DiagCode::E0202, fmt::format("unknown capability '{}'", dotted), e.calleeSpan, hint, {},
                   resourceDetails(dotted));
        }
    } else {
        std::vector<std::string> names = builtinNames();
        for (const auto& [n, f] : fns_) names.push_back(n);
        std::string hint = suggest(path[0], names);
        if (hint.empty() && ctx.scope->lookup(path[0])) hint = fmt::format("'{}' is a variable, not a function", path[0]);
        report(DiagCode::E0107, fmt::format("unknown function '{}'", path[0]), e.calleeSpan, hint);
    }
    Info out{arena_.never(), {}, {}};
    for (const CallArg& a : e.args) addInto(out.eff, expr(*a.value, ctx).eff);
    return out;
}

// An unknown function or capability that is another language's habit (compiler/habits.def):
// print, now, map, xs.len(), ... Reports it, with the call's own names in the hint, and returns
// true; false when the call is no habit and the generic error applies.
bool Checker::callHabit(const CallExpr& e, const Ctx& ctx) {
    const std::vector<std::string>& path = e.callee;
    auto arg = [&](size_t i) -> std::optional<std::string> {
        return i < e.args.size() ? quoteExpr(*e.args[i].value) : std::nullopt;
    };
    HabitNames names;
    auto add = [&](std::string_view key, std::optional<std::string> value) {
        if (value) names.emplace_back(key, std::move(*value));
    };
    // map(f, xs) / filter(f, xs): the body calls f on the loop variable.
    auto mapNames = [&](std::optional<std::string> function, std::optional<std::string> list) {
        names.emplace_back("arg", "x");
        add("list", std::move(list));
        if (function) names.emplace_back("body", *function + "(x)");
    };
    std::string word = path.size() >= 2 ? e.calleeName() : path[0];
    Habit habit = Habit::None;
    DiagCode code = DiagCode::E0107;
    if (path.size() == 2 && ctx.scope->lookup(path[0])) {
        // A method on a variable: `xs.len()`, `xs.map(f)`, `s.lower()`, `xs.append(x)`.
        const std::string& object = path[0];
        const std::string& method = path[1];
        code = DiagCode::E0202;
        word = method;
        names.emplace_back("arg", object);
        habit = findHabit(HabitTrigger::Method, method);
        if (Habit call = findHabit(HabitTrigger::Call, "." + method); call == Habit::Map || call == Habit::Filter) {
            habit = call;
            word = "." + method;
            names.clear();
            mapNames(e.args.empty() ? std::nullopt : arg(0), object);
        } else if (call == Habit::Reduce) {
            habit = call;
            word = "." + method;
            names = {{"list", object}};
        } else if (habit == Habit::MethodAppend) {
            add("value", arg(0));
        } else if (std::string builtin = lowerAscii(method); habit == Habit::None && isBuiltin(builtin)) {
            std::string form = builtin + "(" + object;  // s.startsWith(p) is startswith(s, p)
            for (size_t i = 0; i < e.args.size(); ++i) form += ", " + arg(i).value_or("...");
            habit = Habit::MethodBuiltin;
            names.emplace_back("form", form + ")");
        } else if (habit == Habit::None) {
            habit = Habit::Method;
        }
    } else {
        code = path.size() >= 2 ? DiagCode::E0202 : DiagCode::E0107;
        habit = findHabit(HabitTrigger::Call, word);
        if (habit == Habit::Map || habit == Habit::Filter)
            mapNames(arg(0), arg(1));
        else if (habit == Habit::Reduce)
            add("list", arg(e.args.size() >= 2 ? 1 : 0));
        else
            add("arg", arg(0));
    }
    if (habit == Habit::None) return false;
    HabitText text = renderHabit(habit, word, names);
    report(code, std::move(text.message), e.calleeSpan, std::move(text.hint));
    return true;
}

// range(a, b[, step]): range takes one integer literal and counts from 0, so the hint shifts it.
int64_t Checker::rangeHabit(const CallExpr& e) {
    auto literal = [&](size_t i) -> std::optional<int64_t> {
        if (i < e.args.size() && e.args[i].value->kind == ExprKind::Int) return e.args[i].value->as<IntLit>().value;
        return std::nullopt;
    };
    std::string low = quoteExpr(*e.args[0].value).value_or("a"), high = quoteExpr(*e.args[1].value).value_or("b");
    std::optional<int64_t> a = literal(0), b = literal(1),
                           step = e.args.size() == 3 ? literal(2) : std::optional<int64_t>(1);
    std::string form;
    int64_t count = 0;
    if (a && b && step && *step > 0) {
        count = std::max<int64_t>(0, (*b - *a + *step - 1) / *step);
        std::string item = *step == 1 ? "k" : fmt::format("k * {}", *step);
        if (*a != 0) item = fmt::format("{} + {}", *a, item);
        form = *a == 0 && *step == 1 ? fmt::format("range({})", count)
                                     : fmt::format("for k in range({}) {{ {} }}", count, item);
    } else {
        form = fmt::format("for k in range(100) if k < {} - {} {{ {} + k }}, with 100 a bound on {} - {}", high, low,
                           low, high, low);
    }
    HabitText text = renderHabit(Habit::RangeArgs, "range", {{"form", form}});
    report(DiagCode::E0104, std::move(text.message), e.calleeSpan, std::move(text.hint));
    return count;
}

SiteRecord& Checker::siteFor(const CallExpr& e, const std::string& resource, const std::optional<std::string>& agent) {
    auto [it, inserted] = sites_.try_emplace(&e);
    if (inserted) {
        CallSiteInfo& info = it->second.info;
        auto idIt = siteIds_.find(&e);
        info.site = idIt == siteIds_.end() ? std::string() : idIt->second;
        info.line = e.span.line;
        info.col = e.span.col;
        info.resource = resource;
        info.agent = agent;
        info.retry = e.retry.value_or(0);
        info.timeoutSeconds = e.timeoutSeconds;
        info.fallback = e.fallback != nullptr;
    }
    return it->second;
}

Info Checker::fallback(const CallExpr& e, TypeRef expected, Info result, const Ctx& ctx) {
    if (!e.fallback) return result;
    Info fb = expr(*e.fallback, ctx);
    if (expected->kind != remit::TypeKind::Never && !assignable(fb.type, expected)) {
        report(DiagCode::E0103,
               fmt::format("fallback after 'else' must have type {}, found {}", showType(expected), showType(fb.type)),
               e.fallback->span, {}, {}, mismatch(expected, fb.type));
    } else if (expected->kind == remit::TypeKind::List && fb.type->kind == remit::TypeKind::List) {
        if (TypeRef j = joinTypes(arena_, expected, fb.type)) result.type = j;
    }
    addInto(result.eff, fb.eff);
    unionInto(result.taint, fb.taint);
    return result;
}

Info Checker::capabilityCall(const CallExpr& e, const Capability& cap, const Ctx& ctx) {
    const std::string& name = cap.name;
    ResolvedCall& resolved = result_.calls[static_cast<uint32_t>(e.id)];
    resolved.target = CallTarget::Capability;
    resolved.name = name;
    resolved.model.clear();
    if (auto it = siteIds_.find(&e); it != siteIds_.end()) resolved.site = it->second;
    if (inTest_)
        report(DiagCode::E0110, "tests may not call capabilities directly; call program functions instead", e.span);
    else if (!uses_.count(name))
        report(DiagCode::E0201,
               fmt::format("capability '{}' is used but not declared in the program's 'uses' line", name), e.calleeSpan,
               fmt::format("add '{}' to 'uses' (the host policy must also grant it)", name), {}, resourceDetails(name));
    usedResources_.insert(name);

    std::vector<std::string> paramNames;
    for (const CapabilityParam& p : cap.params) paramNames.push_back(p.name);
    auto bound = bindArgs(e, paramNames, name);
    std::map<const CallArg*, Info> infos;
    Effects eff;
    for (const CallArg& a : e.args) {
        Info i = expr(*a.value, ctx);
        addInto(eff, i.eff);
        infos.emplace(&a, std::move(i));
    }
    SiteRecord* site = ctx.record ? &siteFor(e, name, std::nullopt) : nullptr;
    auto addReason = [&](const std::string& reason) {
        if (!site) return;
        auto& reasons = site->info.reasons;
        if (std::find(reasons.begin(), reasons.end(), reason) == reasons.end()) reasons.push_back(reason);
    };
    const Grant* grant = opts_.policy ? opts_.policy->grantFor(name) : nullptr;
    if (cap.approvalAlways && site) {
        site->info.approval = Approval::Always;
        addReason("host requires approval for every call");
    }
    if (grant && grant->approvalAlways && site) {
        site->info.approval = Approval::Always;
        addReason("policy requires approval for every call");
    }
    const Taint pc = pcAt(ctx);
    Taint all = pc;
    if (bound) {
        for (size_t i = 0; i < cap.params.size(); ++i) {
            const CapabilityParam& p = cap.params[i];
            const CallArg& arg = *(*bound)[i];
            const Info& info = infos.at(&arg);
            checkArg(arg, info, p.type, name, p.name);
            unionInto(all, info.taint);
            const Taint& data = info.taint;
            std::vector<std::string> denied, deniedByControl;
            for (const std::string& t : p.deny)
                if (data.count(t)) denied.push_back(t);
                else if (strict() && pc.count(t)) deniedByControl.push_back(t);
            if (!denied.empty()) {
                std::vector<std::string> notes;
                for (const std::string& t : denied) {
                    std::vector<std::string> origins(data.at(t).begin(), data.at(t).end());
                    notes.push_back(fmt::format("'{}' is {} because it derives from {}", shortSource(*arg.value), t,
                                                joinList(origins)));
                }
                report(DiagCode::E0301,
                       fmt::format("data tagged {} flows into '{}' parameter '{}', which denies it", joinList(denied),
                                   name, p.name),
                       arg.value->span,
                       "the host forbids this flow; it cannot be approved. Use a different source for this value",
                       notes, {{"resource", name}, {"param", p.name}, {"tags", denied}});
            } else if (!deniedByControl.empty()) {
                std::vector<std::string> notes;
                for (const std::string& t : deniedByControl) {
                    std::vector<std::string> origins(pc.at(t).begin(), pc.at(t).end());
                    notes.push_back(fmt::format("the call runs only because of a decision on {} data from {}", t,
                                                joinList(origins)));
                }
                report(DiagCode::E0301,
                       fmt::format("control flow tagged {} reaches '{}' parameter '{}', which denies it (strict flows)",
                                   joinList(deniedByControl), name, p.name),
                       e.span,
                       "in strict mode the host forbids this flow even through control flow; decide on data the host "
                       "vouches for, or make the call before the decision",
                       notes, {{"resource", name}, {"param", p.name}, {"tags", deniedByControl}, {"via", "control"}});
                denied = deniedByControl;
            }
            bool needsApproval = false;
            // The host's approve tags, then those the policy adds for this parameter.
            std::vector<std::string> approveTags = p.approve;
            if (grant)
                if (auto extra = grant->approve.find(p.name); extra != grant->approve.end())
                    for (const std::string& t : extra->second)
                        if (std::find(approveTags.begin(), approveTags.end(), t) == approveTags.end())
                            approveTags.push_back(t);
            for (const std::string& t : approveTags) {
                bool viaData = data.count(t) > 0;
                bool viaControl = pc.count(t) > 0;
                if (!viaData && !viaControl) continue;
                needsApproval = true;
                std::set<std::string> sources;
                if (viaData) sources.insert(data.at(t).begin(), data.at(t).end());
                if (viaControl) sources.insert(pc.at(t).begin(), pc.at(t).end());
                addReason(fmt::format("'{}' may be {} ({}: {})", p.name, t, viaData ? "data" : "control flow",
                                      joinList(std::vector<std::string>(sources.begin(), sources.end()))));
            }
            if (needsApproval && site && site->info.approval == Approval::None) site->info.approval = Approval::Possible;
            if (ctx.record && (!data.empty() || !pc.empty())) {
                FlowRecord& flow = flows_[{name, p.name}];
                for (const auto& [t, o] : data) flow.tags.insert(t);
                for (const auto& [t, o] : pc) flow.tags.insert(t);
                std::string siteId = site ? site->info.site : std::string();
                if (!data.empty()) flow.sites.insert({siteId, "data"});
                if (!pc.empty()) flow.sites.insert({siteId, "control"});
                flow.verdict = std::max(flow.verdict, !denied.empty() ? 2 : needsApproval ? 1 : 0);
            }
        }
    }
    if (e.retry && *e.retry > 0 && !cap.idempotent)
        report(DiagCode::E0405, fmt::format("'{}' is not idempotent, so it cannot be retried", name), e.span,
               "remove 'retry', or have the host declare the capability idempotent (e.g. with an idempotency key)", {},
               resourceDetails(name));
    uint64_t attempts = 1 + static_cast<uint64_t>(std::max<int64_t>(0, e.retry.value_or(0)));
    eff[name] = saturatingAdd(eff[name], attempts);
    noteSiteCalls(eff, resolved.site, attempts);
    Taint taint = all;
    for (const std::string& t : cap.tags) taint[t].insert(fmt::format("{} (line {})", name, e.span.line));
    for (const std::string& t : cap.clears) taint.erase(t);
    return fallback(e, cap.ret, Info{cap.ret, std::move(taint), std::move(eff)}, ctx);
}

Info Checker::modelCall(const CallExpr& e, const Ctx& ctx) {
    const std::string& target = e.callee[0];
    auto agentIt = agents_.find(target);
    const AgentDecl* agent = agentIt == agents_.end() ? nullptr : agentIt->second;
    std::string model = agent ? agent->model : target;
    ResolvedCall& resolved = result_.calls[static_cast<uint32_t>(e.id)];
    resolved.target = agent ? CallTarget::Agent : CallTarget::Model;
    resolved.name = target;
    resolved.model = model;
    if (auto it = siteIds_.find(&e); it != siteIds_.end()) resolved.site = it->second;
    if (inTest_)
        report(DiagCode::E0110, "tests may not call models directly; call program functions instead", e.span);
    else if (!agent && !uses_.count(model))
        report(DiagCode::E0201, fmt::format("model '{}' is used but not declared in the program's 'uses' line", model),
               e.calleeSpan, fmt::format("add '{}' to 'uses'", model), {}, resourceDetails(model));
    usedResources_.insert(model);

    TypeRef out = arena_.never();
    if (!e.askType) {
        report(DiagCode::E0203,
               fmt::format("'{}.ask' needs the output type first, e.g. {}.ask(Summary, \"prompt\")", target, target),
               e.callSpan, "the first argument names the type the model must return");
    } else {
        out = resolve(*e.askType);
        if (hasUnboundedList(out))
            report(DiagCode::E0113,
                   fmt::format("model output type {} contains a list with no 'max' bound", showType(out)),
                   e.askType->span, "add a bound in the type, e.g. List[Str] max 10, so the output size is known");
    }
    resolved.askType = out;
    std::vector<const CallArg*> positional;
    const CallArg* context = nullptr;
    for (const CallArg& a : e.args) {
        if (!a.name) positional.push_back(&a);
        else if (*a.name == "context" && !context) context = &a;
        else
            report(DiagCode::E0104, fmt::format("'{}.ask' has no parameter '{}'", target, *a.name), a.span,
                   "the only named argument is context:");
    }
    if (e.askType && positional.size() != 1)
        report(DiagCode::E0203,
               fmt::format("'{}.ask' takes an output type and a prompt, plus an optional context: argument", target),
               e.callSpan);
    Info result{out, {}, {}};
    Taint promptTaint, contextTaint;
    for (size_t i = 0; i < positional.size(); ++i) {
        Info p = expr(*positional[i]->value, ctx);
        if (i == 0 && !p.type->isStringLike() && p.type->kind != remit::TypeKind::Never)
            report(DiagCode::E0103, fmt::format("prompt must be Str, found {}", showType(p.type)),
                   positional[i]->value->span, {}, {}, mismatch("Str", p.type));
        unionInto(result.taint, p.taint);
        if (i == 0) promptTaint = p.taint;
        addInto(result.eff, p.eff);
    }
    if (context) {
        Info c = expr(*context->value, ctx);
        unionInto(result.taint, c.taint);
        contextTaint = c.taint;
        addInto(result.eff, c.eff);
    }
    // Stricter than the prototype: a model answering under tagged control flow carries those tags.
    const Taint pc = pcAt(ctx);
    unionInto(result.taint, pc);
    if (ctx.record) {
        SiteRecord& site = siteFor(e, model, agent ? std::optional<std::string>(agent->name) : std::nullopt);
        if (e.askType) site.info.outputType = showType(out);
        // Models have no approve tags of their own; the policy's grant may add some, as for a
        // capability (its parameters are `prompt` and `context`), or ask for every call.
        if (const Grant* grant = opts_.policy ? opts_.policy->grantFor(model) : nullptr) {
            auto addReason = [&](std::string reason) {
                auto& reasons = site.info.reasons;
                if (std::find(reasons.begin(), reasons.end(), reason) == reasons.end())
                    reasons.push_back(std::move(reason));
            };
            if (grant->approvalAlways) {
                site.info.approval = Approval::Always;
                addReason("policy requires approval for every call");
            }
            for (const auto& [param, data] : {std::pair<const char*, const Taint*>{"prompt", &promptTaint},
                                              std::pair<const char*, const Taint*>{"context", &contextTaint}}) {
                auto tags = grant->approve.find(param);
                if (tags == grant->approve.end()) continue;
                for (const std::string& t : tags->second) {
                    bool viaData = data->count(t) > 0, viaControl = pc.count(t) > 0;
                    if (!viaData && !viaControl) continue;
                    std::set<std::string> sources;
                    if (viaData) sources.insert(data->at(t).begin(), data->at(t).end());
                    if (viaControl) sources.insert(pc.at(t).begin(), pc.at(t).end());
                    addReason(fmt::format("'{}' may be {} ({}: {})", param, t, viaData ? "data" : "control flow",
                                          joinList(std::vector<std::string>(sources.begin(), sources.end()))));
                    if (site.info.approval == Approval::None) site.info.approval = Approval::Possible;
                }
            }
        }
    }
    if (e.retry && *e.retry < 0) report(DiagCode::E0107, "a retry count cannot be negative", e.span);
    uint64_t attempts = 1 + static_cast<uint64_t>(std::max<int64_t>(0, e.retry.value_or(0)));
    result.eff[model] = saturatingAdd(result.eff[model], attempts);
    noteSiteCalls(result.eff, resolved.site, attempts);
    if (agent) result.eff["agent:" + agent->name] = saturatingAdd(result.eff["agent:" + agent->name], attempts);
    return fallback(e, out, std::move(result), ctx);
}

Info Checker::functionCall(const CallExpr& e, const FnDecl& fn, const Ctx& ctx) {
    ResolvedCall& resolved = result_.calls[static_cast<uint32_t>(e.id)];
    resolved.target = CallTarget::Function;
    resolved.name = fn.name;
    std::vector<std::string>& paramNames = paramNames_[&fn];
    if (paramNames.size() != fn.params.size())
        for (const Param& p : fn.params) paramNames.push_back(p.name);
    std::vector<TypeRef> paramTypes;
    for (const Param& p : fn.params) paramTypes.push_back(resolve(*p.type));
    TypeRef ret = fn.ret ? resolve(*fn.ret) : arena_.unit();
    if (ctx.record) referencedFns_.insert(fn.name);
    auto bound = bindArgs(e, paramNames, fn.name);
    std::vector<Info> infos;  // by argument position
    infos.reserve(e.args.size());
    Effects eff;
    for (const CallArg& a : e.args) {
        infos.push_back(expr(*a.value, ctx));
        addInto(eff, infos.back().eff);
    }
    if (!bound) return Info{ret, {}, std::move(eff)};
    std::vector<Info> args;
    args.reserve(fn.params.size());
    for (size_t i = 0; i < fn.params.size(); ++i) {
        const CallArg& a = *(*bound)[i];
        Info& info = infos[static_cast<size_t>(&a - e.args.data())];  // bindArgs binds each argument once
        checkArg(a, info, paramTypes[i], fn.name, fn.params[i].name);
        args.push_back(std::move(info));
    }
    if (recursive_) return Info{ret, {}, std::move(eff)};
    if (fnStack_.size() >= opts_.maxCallDepth) {
        ++depthCuts_;
        std::vector<std::string> chain;
        for (const FnFrame& f : fnStack_) chain.push_back(f.fn->name);
        chain.push_back(fn.name);
        if (chain.size() > 6) chain.erase(chain.begin() + 3, chain.end() - 3), chain.insert(chain.begin() + 3, "...");
        report(DiagCode::E0003,
               fmt::format("call chain deeper than {} functions: {}", opts_.maxCallDepth, joinList(chain, " -> ")),
               e.span, "flatten the program: let a function return data that its caller passes on", {},
               {{"limit", "call_depth"}, {"value", opts_.maxCallDepth}});
        return Info{ret, {}, std::move(eff)};
    }
    FnSummary summary = analyseFn(fn, args, pcAt(ctx), ctx.record);
    return Info{summary.ret, summary.taint, sum(eff, summary.eff)};
}

Info Checker::builtinCall(const CallExpr& e, const Ctx& ctx) {
    const std::string& name = e.callee[0];
    for (const CallArg& a : e.args)
        if (a.name) {
            report(DiagCode::E0104, fmt::format("builtin '{}' takes positional arguments only", name), a.span,
                   "remove the argument name");
            break;
        }
    std::vector<Info> infos;
    Info out{arena_.never(), {}, {}};
    for (const CallArg& a : e.args) {
        infos.push_back(expr(*a.value, ctx));
        unionInto(out.taint, infos.back().taint);
        addInto(out.eff, infos.back().eff);
    }
    auto ret = [&](TypeRef t) {
        out.type = t;
        return out;
    };
    auto arity = [&](std::initializer_list<size_t> counts) {
        for (size_t n : counts)
            if (infos.size() == n) return true;
        std::vector<std::string> shown;
        for (size_t n : counts) shown.push_back(std::to_string(n));
        report(DiagCode::E0104, fmt::format("'{}' takes {} argument(s), got {}", name, joinList(shown, " or "), infos.size()),
               e.span);
        return false;
    };
    auto type = [&](size_t i) { return infos[i].type; };
    auto never = [&](size_t i) { return type(i)->kind == remit::TypeKind::Never; };
    auto need = [&](size_t i, bool ok, const char* what) {
        if (!never(i) && !ok)
            report(DiagCode::E0103,
                   fmt::format("'{}' argument {} must be {}, found {}", name, i + 1, what, showType(type(i))),
                   e.args[i].value->span, {}, {}, mismatch(what, type(i)));
    };
    auto isList = [&](size_t i) { return type(i)->kind == remit::TypeKind::List; };
    auto isStr = [&](size_t i) { return type(i)->isStringLike(); };
    auto isNum = [&](size_t i) { return type(i)->isNumber(); };
    auto intLiteral = [&](size_t i) -> std::optional<int64_t> {
        const Expr& v = *e.args[i].value;
        if (v.kind == ExprKind::Int) return v.as<IntLit>().value;
        return std::nullopt;
    };

    if (name == "len") {
        if (arity({1})) need(0, isList(0) || isStr(0), "a List or Str");
        return ret(arena_.integer());
    }
    if (name == "take") {
        if (!arity({2})) return ret(arena_.never());
        need(0, isList(0), "a List");
        std::optional<int64_t> k = intLiteral(1);
        if (!k) {
            report(DiagCode::E0113, "take() needs an integer literal as its second argument", e.args[1].value->span,
                   "the bound must be a constant so the checker can use it");
            // The cause is reported; an unbounded list here would only repeat it as E0401 and
            // E0113 on every use (often before it, at an earlier column), so the value is Never.
            return ret(arena_.never());
        }
        if (!isList(0)) return ret(arena_.never());
        int64_t bound = type(0)->max ? std::min(*k, *type(0)->max) : *k;
        return ret(arena_.list(type(0)->elem, std::max<int64_t>(0, bound)));
    }
    if (name == "range") {
        if (infos.size() == 2 || infos.size() == 3) {  // Python's range(a, b) and range(a, b, step)
            // Bounded, so a loop over it adds no E0401 of its own.
            return ret(arena_.list(arena_.integer(), rangeHabit(e)));
        }
        if (!arity({1})) return ret(arena_.list(arena_.integer(), 0));
        std::optional<int64_t> k = intLiteral(0);
        if (!k) {
            report(DiagCode::E0113, "range() needs an integer literal", e.args[0].value->span,
                   "the bound must be a constant so the checker can use it");
            return ret(arena_.list(arena_.integer(), std::nullopt));
        }
        return ret(arena_.list(arena_.integer(), std::max<int64_t>(0, *k)));
    }
    if (name == "str") {
        arity({1});
        return ret(arena_.str());
    }
    if (name == "lower" || name == "upper" || name == "trim") {
        if (arity({1})) need(0, isStr(0), "Str");
        return ret(arena_.str());
    }
    if (name == "startswith" || name == "endswith") {
        if (arity({2})) {
            need(0, isStr(0), "Str");
            need(1, isStr(1), "Str");
        }
        return ret(arena_.boolean());
    }
    if (name == "contains") {
        if (arity({2})) {
            need(0, isStr(0) || isList(0), "a Str or List");
            if (isStr(0)) need(1, isStr(1), "Str");
            else if (isList(0) && !never(1) && !joinTypes(arena_, type(0)->elem, type(1)))
                report(DiagCode::E0103,
                       fmt::format("'contains' looks for {} in {}, which can never match", showType(type(1)),
                                   showType(type(0))),
                       e.args[1].value->span);
        }
        return ret(arena_.boolean());
    }
    if (name == "replace") {
        if (arity({3}))
            for (size_t i = 0; i < 3; ++i) need(i, isStr(i), "Str");
        return ret(arena_.str());
    }
    if (name == "split") {
        if (arity({2})) {
            need(0, isStr(0), "Str");
            need(1, isStr(1), "Str");
        }
        return ret(arena_.list(arena_.str(), std::nullopt));
    }
    if (name == "join") {
        if (arity({2})) {
            need(0, isList(0) && (type(0)->elem->isStringLike() || type(0)->elem->kind == remit::TypeKind::Never),
                 "a List[Str]");
            need(1, isStr(1), "Str");
        }
        return ret(arena_.str());
    }
    if (name == "sum") {
        if (arity({1})) {
            need(0, isList(0) && (type(0)->elem->isNumber() || type(0)->elem->kind == remit::TypeKind::Never),
                 "a list of numbers");
            if (isList(0) && type(0)->elem->kind == remit::TypeKind::Float) return ret(arena_.floating());
        }
        return ret(arena_.integer());
    }
    if (name == "min" || name == "max") {
        // Two numbers (as in the prototype), or one non-empty list of numbers (docs/language.md, decision 24).
        if (infos.size() == 1) {
            need(0, isList(0) && (type(0)->elem->isNumber() || type(0)->elem->kind == remit::TypeKind::Never),
                 "a list of numbers");
            if (isList(0) && type(0)->elem->kind == remit::TypeKind::Float) return ret(arena_.floating());
            return ret(arena_.integer());
        }
        if (arity({1, 2})) {
            need(0, isNum(0), "a number");
            need(1, isNum(1), "a number");
            bool isFloat = type(0)->kind == remit::TypeKind::Float || type(1)->kind == remit::TypeKind::Float;
            return ret(isFloat ? arena_.floating() : arena_.integer());
        }
        return ret(arena_.integer());
    }
    if (name == "abs") {
        if (arity({1})) {
            need(0, isNum(0), "a number");
            return ret(isNum(0) ? type(0) : arena_.integer());
        }
        return ret(arena_.integer());
    }
    if (name == "round") {
        if (arity({1, 2})) {
            need(0, isNum(0), "a number");
            if (infos.size() == 2) need(1, type(1)->kind == remit::TypeKind::Int, "an Int");
            return ret(infos.size() == 2 ? arena_.floating() : arena_.integer());
        }
        return ret(arena_.integer());
    }
    if (name == "int" || name == "float") {
        if (arity({1})) need(0, isNum(0) || isStr(0), "a number or Str");
        return ret(name == "int" ? arena_.integer() : arena_.floating());
    }
    if (name == "first") {
        if (arity({1})) {
            need(0, isList(0), "a List");
            return ret(isList(0) ? type(0)->elem : arena_.never());
        }
        return ret(arena_.never());
    }
    if (name == "unique") {
        if (arity({1})) {
            need(0, isList(0), "a List");
            return ret(isList(0) ? type(0) : arena_.never());
        }
        return ret(arena_.never());
    }
    return ret(arena_.never());
}

// ---------------------------------------------------------------- manifest

void Checker::buildManifest(const Effects& eff) {
    Manifest& m = result_.manifest;
    m.program = prog_.name;
    m.programHash = programHash(prog_);
    m.hostHash = host_.hash;
    for (const UseEntry& u : prog_.uses) m.uses.push_back(u.name);
    // A resource's entry; unused `uses` entries get one too, with no calls (and no cost).
    auto describe = [&](const std::string& name, uint64_t calls) {
        ResourceUse r;
        r.name = name;
        r.maxCalls = calls;
        if (const Capability* c = host_.capability(name)) {
            r.costPerCall = calls ? c->cost : 0;
            r.idempotent = c->idempotent;
            r.approvalAlways = c->approvalAlways;
            r.outputTags = c->tags;
            r.clears = c->clears;
            std::sort(r.outputTags.begin(), r.outputTags.end());
            std::sort(r.clears.begin(), r.clears.end());
        } else {
            r.isModel = true;
            if (const ModelInfo* mi = host_.model(name); mi && calls) r.costPerCall = mi->cost;
        }
        r.worstCaseCost = static_cast<double>(calls) * r.costPerCall;
        return r;
    };
    std::map<std::string, ResourceUse> resources;
    for (const auto& [name, n] : eff)
        if (name.rfind("agent:", 0) != 0 && name.rfind("site:", 0) != 0) resources[name] = describe(name, n);
    for (const UseEntry& u : prog_.uses)
        if (!resources.count(u.name) && (host_.capability(u.name) || host_.model(u.name)))
            resources[u.name] = describe(u.name, 0);
    for (auto& [name, r] : resources) m.resources.push_back(std::move(r));
    for (const DeclPtr& d : prog_.decls) {
        if (d->kind != DeclKind::Agent) continue;
        const AgentDecl& a = d->as<AgentDecl>();
        AgentUse use;
        use.name = a.name;
        use.model = a.model;
        use.maxCallsDeclared = a.maxCalls;
        auto it = eff.find("agent:" + a.name);
        use.maxCallsWorstCase = it == eff.end() ? 0 : it->second;
        m.agents.push_back(std::move(use));
    }
    m.worstCaseCostUsd = worstCaseCostOf(host_, eff);
    m.budgetUsd = prog_.budgetUsd;
    for (auto& [call, site] : sites_) {
        m.callSites.push_back(site.info);
        auto it = eff.find("site:" + site.info.site);
        m.callSites.back().maxCalls = it == eff.end() ? 0 : it->second;
    }
    std::sort(m.callSites.begin(), m.callSites.end(), [](const CallSiteInfo& a, const CallSiteInfo& b) {
        return std::tie(a.line, a.col) < std::tie(b.line, b.col);
    });
    static const char* kVerdicts[] = {"allowed", "requires approval", "denied"};
    for (const auto& [key, flow] : flows_) {
        if (flow.tags.empty()) continue;
        Flow f;
        f.sink = key.first + "." + key.second;
        f.tags.assign(flow.tags.begin(), flow.tags.end());
        f.verdict = kVerdicts[flow.verdict];
        for (const auto& [site, via] : flow.sites) f.sites.push_back(FlowSite{site, via});
        m.flows.push_back(std::move(f));
    }
    std::sort(m.flows.begin(), m.flows.end(), [](const Flow& a, const Flow& b) { return a.sink < b.sink; });
    if (auto it = fns_.find("main"); it != fns_.end())
        for (const Param& p : it->second->params) m.inputs.emplace_back(p.name, host_.inputTags(p.name));
    m.strictFlows = opts_.strictFlows;
}

// Where the value of an expression is used: everywhere except a statement whose value is
// discarded — a block's statements but the last, and the last one when the block's own value is
// discarded (a function body without `-> R`, a test, the branches of a discarded if or match, the
// body of a discarded for).
void Checker::reportValuelessUses() {
    if (valueless_.empty() && !std::any_of(prog_.decls.begin(), prog_.decls.end(), [](const DeclPtr& d) {
            return d->kind == DeclKind::Fn && d->as<FnDecl>().ret;
        }))
        return;
    for (const DeclPtr& d : prog_.decls) {
        if (d->kind == DeclKind::Test) valueUses(*d->as<TestDecl>().body, false);
        if (d->kind != DeclKind::Fn) continue;
        const FnDecl& f = d->as<FnDecl>();
        valueUses(*f.body, false);
        // A function declared `-> Unit` that runs off its end returns Unit, never the value of its
        // last expression: one that computes a value there is written as if it returned it.
        if (!f.ret || f.body->stmts.empty()) continue;
        const Stmt& last = *f.body->stmts.back();
        if (last.kind != StmtKind::Expr) continue;
        TypeRef declared = nodeTypeOf(f.ret->id), value = nodeTypeOf(last.value->id);
        if (declared && value && declared->kind == remit::TypeKind::Unit && !isUnitLike(value) &&
            !valueless_.count(last.value->id))
            report(DiagCode::E0103,
                   fmt::format("'{}' returns Unit, but its body ends with a value of type {} that is never returned",
                               f.name, showType(value)),
                   last.value->span,
                   fmt::format("declare '-> {}' and return the value with 'return', or end the body with a statement",
                               showType(value)),
                   {},
                   mismatch("Unit", value));
    }
}

void Checker::valueUses(const Block& b, bool used) {
    for (size_t i = 0; i < b.stmts.size(); ++i) {
        const Stmt& s = *b.stmts[i];
        if (!s.value) continue;
        valueUses(*s.value, s.kind != StmtKind::Expr || (used && i + 1 == b.stmts.size()));
    }
}

void Checker::valueUses(const Expr& e, bool used) {
    if (used)
        if (auto it = valueless_.find(e.id); it != valueless_.end()) {
            report(DiagCode::E0103,
                   fmt::format("this '{}' has no value: {}", e.kind == ExprKind::If ? "if" : "match", it->second.why),
                   e.span, it->second.hint);
            used = false;  // one report per construct, not one more for each enclosing use
        }
    // The blocks of if, for and match, a call's `else` fallback and an `if`'s `else if` give the
    // construct its value (a for's list is its body's values), so they are used as it is; every
    // other child is an operand, whose value is always used.
    auto givesValue = [&](const Expr& child) {
        if (e.kind == ExprKind::Call) return e.as<CallExpr>().fallback.get() == &child;
        if (e.kind == ExprKind::If) return e.as<IfExpr>().elseIf.get() == &child;
        return false;
    };
    forEachChild(
        e, [&](const Expr& child) { valueUses(child, givesValue(child) ? used : true); },
        [&](const Block& block) { valueUses(block, used); });
}

void Checker::run() {
    checkUses();
    declareTypes();
    declareFunctionsAndAgents();
    for (const CallSite& site : numberCallSites(prog_, [&](const CallExpr& c) { return isEffectfulCall(c); }))
        siteIds_[site.call] = site.id;
    checkRecursion();

    Effects eff;
    auto mainIt = fns_.find("main");
    if (mainIt == fns_.end()) {
        report(DiagCode::E0107, "program has no 'main' function", prog_.span, "add: fn main() { ... }");
    } else {
        const FnDecl& main = *mainIt->second;
        std::vector<Info> args;
        for (const Param& p : main.params) {
            Taint taint;
            for (const std::string& tag : host_.inputTags(p.name)) taint[tag].insert(fmt::format("input '{}'", p.name));
            args.push_back(Info{resolve(*p.type), std::move(taint), {}});
        }
        eff = analyseFn(main, args, {}, true).eff;
    }
    if (stoppedBetweenPhases()) return;
    // Functions main never reaches are still type-checked.
    for (const DeclPtr& d : prog_.decls) {
        if (d->kind != DeclKind::Fn) continue;
        const FnDecl& f = d->as<FnDecl>();
        if (fnByName_.at(f.name) != &f || analysedFns_.count(f.name)) continue;
        // With recursion the call graph is not walked, so "never called" would be noise.
        if (f.name != "main" && !referencedFns_.count(f.name) && !recursive_) {
            diags_.add(makeDiagnostic(DiagCode::W0101, fmt::format("function '{}' is never called from main", f.name),
                                      opts_.programFile, f.nameSpan, "call it from main, or remove it"));
        }
        if (recursive_) continue;
        std::vector<Info> args;
        for (const Param& p : f.params) args.push_back(Info{resolve(*p.type), {}, {}});
        analyseFn(f, args, {}, false);
    }
    inTest_ = true;
    for (const DeclPtr& d : prog_.decls) {
        if (d->kind != DeclKind::Test) continue;
        Scope scope(nullptr);
        Taint none;
        block(*d->as<TestDecl>().body, Ctx{&scope, none, 0, false});
    }
    inTest_ = false;
    if (stoppedBetweenPhases()) return;
    reportValuelessUses();

    // With recursion the functions main does not reach are not analysed (as for W0101), so a use
    // inside them is not seen: "never used" would be a false warning next to E0402.
    for (const UseEntry& u : prog_.uses) {
        if (recursive_) break;
        if ((host_.capability(u.name) || host_.model(u.name)) && !usedResources_.count(u.name)) {
            diags_.add(makeDiagnostic(DiagCode::W0201, fmt::format("'{}' is declared in uses but never used", u.name),
                                      opts_.programFile, u.span,
                                      "remove it from 'uses' to keep the program's authority minimal"));
        }
    }
    for (const auto& [name, agent] : agents_) {
        auto it = eff.find("agent:" + name);
        uint64_t n = it == eff.end() ? 0 : it->second;
        if (agent->maxCalls && n > static_cast<uint64_t>(std::max<int64_t>(0, *agent->maxCalls)))
            report(DiagCode::E0403,
                   fmt::format("agent '{}' may be called up to {} times, but its max_calls is {}", name, n,
                               *agent->maxCalls),
                   agent->nameSpan, "reduce loop limits or retries around this agent, or raise max_calls", {},
                   {{"agent", name}, {"limit", "max_calls"}, {"value", *agent->maxCalls}, {"worst_case", n}});
    }
    buildManifest(eff);
    const Manifest& m = result_.manifest;
    if (prog_.budgetUsd && m.worstCaseCostUsd > *prog_.budgetUsd + 1e-12) {
        std::vector<std::string> notes;
        for (const ResourceUse& r : m.resources)
            if (r.maxCalls && r.costPerCall)
                notes.push_back(fmt::format("{}: {} × ${}", r.name, r.maxCalls, formatUsd(r.costPerCall)));
        report(DiagCode::E0404,
               fmt::format("worst-case cost ${} exceeds the program budget ${}", formatUsd(m.worstCaseCostUsd),
                           formatUsd(*prog_.budgetUsd)),
               prog_.budgetSpan.valid() ? prog_.budgetSpan : prog_.span,
               "lower loop limits or retries, or raise the budget", notes,
               {{"limit", "budget_usd"}, {"value", *prog_.budgetUsd}, {"worst_case", m.worstCaseCostUsd}});
    }
}

}  // namespace

// ---------------------------------------------------------------- the host interface

static void resolveHostTypes(const HostInterface& ast, const std::string& file, HostModel& host,
                             DiagnosticList& diags);

void resolveHost(const HostInterface& ast, const std::string& file, HostModel& host, DiagnosticList& diags) {
    // Alias chains (`type A = B`, `type B = C`, ...) resolve recursively, at most one level per
    // declaration.
    runDeep(ast.decls.size(), [&] { resolveHostTypes(ast, file, host, diags); });
}

static void resolveHostTypes(const HostInterface& ast, const std::string& file, HostModel& host,
                             DiagnosticList& diags) {
    host.file = file;
    host.hash = hostHash(ast);
    TypeArena& arena = *host.arena;
    TypeResolver resolver(arena, file, diags);
    std::map<std::string, const TypeExpr*> pending;
    resolver.named = &host.types;
    resolver.pending = &pending;
    auto report = [&](DiagCode code, std::string message, const Span& span, std::string hint = {}) {
        diags.add(makeDiagnostic(code, std::move(message), file, span, std::move(hint)));
    };
    for (const DeclPtr& d : ast.decls) {
        if (d->kind != DeclKind::Type) continue;
        const TypeDecl& t = d->as<TypeDecl>();
        if (pending.count(t.name)) report(DiagCode::E0112, fmt::format("type '{}' is already defined", t.name), t.nameSpan);
        else pending[t.name] = t.type.get();
    }
    for (const auto& [name, te] : pending) {
        TypeExpr named;
        named.name = name;
        resolver.resolve(named);
    }
    for (const DeclPtr& d : ast.decls) {
        switch (d->kind) {
            case DeclKind::Capability: {
                const CapabilityDecl& c = d->as<CapabilityDecl>();
                if (host.capabilities.count(c.name)) {
                    report(DiagCode::E0112, fmt::format("capability '{}' declared twice in host interface", c.name),
                           c.nameSpan);
                    break;
                }
                Capability cap;
                cap.name = c.name;
                cap.span = c.nameSpan;
                for (const Param& p : c.params)
                    cap.params.push_back(CapabilityParam{p.name, resolver.resolve(*p.type), p.deny, p.approve});
                cap.ret = c.ret ? resolver.resolve(*c.ret) : arena.unit();
                cap.tags = c.tags;
                cap.clears = c.clears;
                cap.cost = c.cost;
                cap.idempotent = c.idempotent;
                cap.approvalAlways = c.approvalAlways;
                if (c.cost < 0) report(DiagCode::E0105, "a capability's cost cannot be negative", d->span);
                host.capabilities[c.name] = std::move(cap);
                break;
            }
            case DeclKind::Model: {
                const ModelDecl& m = d->as<ModelDecl>();
                if (host.models.count(m.name) || host.capabilities.count(m.name)) {
                    report(DiagCode::E0112, fmt::format("model '{}' declared twice in host interface", m.name),
                           m.nameSpan);
                    break;
                }
                if (m.cost < 0) report(DiagCode::E0105, "a model's cost cannot be negative", d->span);
                host.models[m.name] = ModelInfo{m.name, m.nameSpan, m.cost};
                break;
            }
            case DeclKind::Input: {
                const InputDecl& in = d->as<InputDecl>();
                auto& tags = host.inputs[in.name];
                for (const std::string& t : in.tags)
                    if (std::find(tags.begin(), tags.end(), t) == tags.end()) tags.push_back(t);
                break;
            }
            default: break;
        }
    }
}

// ---------------------------------------------------------------- entry

double worstCaseCostOf(const HostModel& host, const CallCounts& calls) {
    double total = 0;
    for (const auto& [name, n] : calls) {
        if (name.rfind("agent:", 0) == 0 || n == 0) continue;
        if (const Capability* c = host.capability(name)) total += static_cast<double>(n) * c->cost;
        else if (const ModelInfo* m = host.model(name)) total += static_cast<double>(n) * m->cost;
    }
    return std::round(total * 1e6) / 1e6;
}

CheckResult checkProgram(const Program& program, HostModel host, DiagnosticList& diags, const CheckerOptions& options) {
    CheckResult result;
    result.host = std::move(host);
    result.exprTypes.resize(program.nodeCount);
    size_t errorsBefore = diags.errorCount();
    Checker checker(program, result.host, diags, options, result);
    // The walk nests at most once per node along a call chain (no function repeats on it).
    runDeep(program.nodeCount, [&] { checker.run(); });
    checker.notePcFreeFns();
    diags.sortByPosition();
    result.ok = diags.errorCount() == errorsBefore;
    return result;
}

}  // namespace remit
