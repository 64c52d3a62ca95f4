// See generator.h. The generator tracks, for every expression it writes, the static type the
// checker gives it (docs/language.md "Types", "Bounds and budget"): list bounds, string literal
// sets (a literal fits an enum that contains it), width subtyping, Int accepted as Float. Where
// it is unsure it errs towards the weaker type, which the checker's fits everywhere it uses it
// (a literal's type is widened to Str when bound to an unannotated `let`, a list's bound is what
// the checker derives, or unbounded).
#include "tests/difftest/generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/numfmt.h"
#include "tests/difftest/world.h"

namespace remit::difftest {

namespace {

using json = nlohmann::json;

// ---------------------------------------------------------------- types

struct GType;
using T = std::shared_ptr<const GType>;

struct GType {
    enum class K { Int, Float, Bool, Str, Enum, List, Record, Unit, Never };
    K k = K::Unit;
    std::vector<std::string> options;  // Enum: its options; Str: a literal set (empty: any Str)
    T elem;                            // List
    std::optional<int64_t> max;        // List
    std::vector<std::pair<std::string, T>> fields;  // Record
    std::string alias;                 // written by this name
};
using K = GType::K;

T mk(K k) {
    auto t = std::make_shared<GType>();
    t->k = k;
    return t;
}
const T& tInt() { static T t = mk(K::Int); return t; }
const T& tFloat() { static T t = mk(K::Float); return t; }
const T& tBool() { static T t = mk(K::Bool); return t; }
const T& tStr() { static T t = mk(K::Str); return t; }
const T& tUnit() { static T t = mk(K::Unit); return t; }
const T& tNever() { static T t = mk(K::Never); return t; }  // the elements of `[]`
T tList(T elem, std::optional<int64_t> max) {
    auto t = std::make_shared<GType>();
    t->k = K::List;
    t->elem = std::move(elem);
    t->max = max;
    return t;
}
T tRecord(std::vector<std::pair<std::string, T>> fields, std::string alias = {}) {
    auto t = std::make_shared<GType>();
    t->k = K::Record;
    t->fields = std::move(fields);
    t->alias = std::move(alias);
    return t;
}
T tEnum(std::vector<std::string> options, std::string alias = {}) {
    auto t = std::make_shared<GType>();
    t->k = K::Enum;
    t->options = std::move(options);
    t->alias = std::move(alias);
    return t;
}
T tStrLit(std::vector<std::string> values) {
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    auto t = std::make_shared<GType>();
    t->k = K::Str;
    t->options = std::move(values);
    return t;
}
T withMax(const T& list, std::optional<int64_t> max) { return tList(list->elem, max); }

bool isNum(const T& t) { return t->k == K::Int || t->k == K::Float; }
bool isStrLike(const T& t) { return t->k == K::Str || t->k == K::Enum; }

std::string quote(const std::string& s);

std::string show(const T& t) {
    if (!t->alias.empty()) return t->alias;
    switch (t->k) {
        case K::Int: return "Int";
        case K::Float: return "Float";
        case K::Bool: return "Bool";
        case K::Str: return "Str";
        case K::Unit: return "Unit";
        case K::Never: return "Never";
        case K::Enum: {
            std::string out;
            for (const std::string& o : t->options) out += (out.empty() ? "" : " | ") + quote(o);
            return out;
        }
        case K::List: return "List[" + show(t->elem) + "]" + (t->max ? fmt::format(" max {}", *t->max) : "");
        case K::Record: {
            std::string out = "{ ";
            for (size_t i = 0; i < t->fields.size(); ++i)
                out += (i ? ", " : "") + t->fields[i].first + ": " + show(t->fields[i].second);
            return out + " }";
        }
    }
    return "?";
}

bool subset(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    return std::all_of(a.begin(), a.end(), [&](const std::string& x) { return std::find(b.begin(), b.end(), x) != b.end(); });
}

// Can a value of static type `src` be used where `dst` is expected, list bounds included?
bool fits(const T& src, const T& dst) {
    if (src->k == K::Never) return true;
    switch (dst->k) {
        case K::Float: return isNum(src);
        case K::Str:
            if (!dst->options.empty()) return src->k == K::Str && !src->options.empty() && subset(src->options, dst->options);
            return isStrLike(src);
        case K::Enum:
            if (src->k == K::Enum) return subset(src->options, dst->options);
            return src->k == K::Str && !src->options.empty() && subset(src->options, dst->options);
        case K::List:
            return src->k == K::List && fits(src->elem, dst->elem) && (!dst->max || (src->max && *src->max <= *dst->max));
        case K::Record:
            if (src->k != K::Record) return false;
            for (const auto& [name, ft] : dst->fields) {
                auto it = std::find_if(src->fields.begin(), src->fields.end(), [&](const auto& f) { return f.first == name; });
                if (it == src->fields.end() || !fits(it->second, ft)) return false;
            }
            return true;
        default: return src->k == dst->k;
    }
}

// The same shape: what two branches or list items must have so that they join as the checker
// joins them (records: the same fields in the same order; bounds may differ).
bool sameShape(const T& a, const T& b) {
    if (a->k == K::Never || b->k == K::Never) return true;
    if (isNum(a) && isNum(b)) return true;
    if (isStrLike(a) && isStrLike(b)) return true;
    if (a->k != b->k) return false;
    if (a->k == K::List) return sameShape(a->elem, b->elem);
    if (a->k == K::Record) {
        if (a->fields.size() != b->fields.size()) return false;
        for (size_t i = 0; i < a->fields.size(); ++i)
            if (a->fields[i].first != b->fields[i].first || !sameShape(a->fields[i].second, b->fields[i].second)) return false;
    }
    return true;
}

// The checker's join of two same-shaped types (runtime/types.cpp joinTypes, as documented:
// numbers join to Float, an enum and its literals to the enum, lists to the larger bound).
T join(const T& a, const T& b) {
    if (a->k == K::Never) return b;
    if (b->k == K::Never) return a;
    if (a->k == K::Int && b->k == K::Int) return a;
    if (isNum(a) && isNum(b)) return tFloat();
    if (a->k == K::Str && b->k == K::Str) {
        if (a->options.empty() || b->options.empty()) return tStr();
        std::vector<std::string> all = a->options;
        all.insert(all.end(), b->options.begin(), b->options.end());
        return tStrLit(all);
    }
    if (a->k == K::Enum && b->k == K::Enum) {
        if (subset(b->options, a->options)) return a;
        if (subset(a->options, b->options)) return b;
        std::vector<std::string> all = a->options;
        for (const std::string& o : b->options)
            if (std::find(all.begin(), all.end(), o) == all.end()) all.push_back(o);
        return tEnum(all);
    }
    if (isStrLike(a) && isStrLike(b)) {
        const T& e = a->k == K::Enum ? a : b;
        const T& s = a->k == K::Enum ? b : a;
        if (!s->options.empty() && subset(s->options, e->options)) return e;
        return tStr();
    }
    if (a->k == K::List) {
        std::optional<int64_t> max;
        if (a->max && b->max) max = std::max(*a->max, *b->max);
        return tList(join(a->elem, b->elem), max);
    }
    if (a->k == K::Record) {
        std::vector<std::pair<std::string, T>> fields;
        for (size_t i = 0; i < a->fields.size(); ++i) fields.emplace_back(a->fields[i].first, join(a->fields[i].second, b->fields[i].second));
        return tRecord(std::move(fields), a->alias == b->alias ? a->alias : std::string());
    }
    return a;
}

bool hasUnboundedList(const T& t) {
    if (t->k == K::List) return !t->max || hasUnboundedList(t->elem);
    if (t->k == K::Record)
        return std::any_of(t->fields.begin(), t->fields.end(), [](const auto& f) { return hasUnboundedList(f.second); });
    return false;
}

// ---------------------------------------------------------------- text

std::string quote(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        switch (c) {
            case '\\': out += "\\\\"; break;
            case '"': out += "\\\""; break;
            case '{': out += "\\{"; break;
            case '}': out += "\\}"; break;
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            default: out += c;
        }
    }
    return out + "\"";
}

std::string pad(int indent) { return std::string(static_cast<size_t>(indent) * 2, ' '); }

// ---------------------------------------------------------------- the host

const std::vector<std::string> kTags = {"untrusted", "private", "pii", "secret"};

struct CapParam {
    std::string name;
    T type;
    std::vector<std::string> deny, approve;
};
struct CapSpec {
    std::string name;
    std::vector<CapParam> params;
    T ret;  // Unit: no `-> T`
    std::vector<std::string> tags, clears;
    double cost = 0;
    bool idempotent = false, approvalAlways = false;
};
struct ModelSpec {
    std::string name;
    double cost = 0;
};
struct AgentSpec {
    std::string name, model;
    int64_t maxCalls = 0;
};

// An expression: its text and its static type. `atom`: no parentheses needed as an operand.
struct Ex {
    std::string code;
    T type;
    bool atom = true;
    bool block = false;  // an if/for/match: always parenthesised as an operand
};

struct Var {
    std::string name;
    T type;
    bool mut = false;
};

struct FnSpec {
    std::string name;
    std::vector<std::pair<std::string, T>> params;
    T ret;  // Unit for helpers used as statements
    size_t index = 0;
    bool skip = false;  // `fn skip() {}`, the fallback of Unit capabilities
    std::string body;
};

const std::set<std::string> kSwitchNames = {
    // Language features the generator can leave out.
    "loop-carried-vars",  // vars assigned in a loop body and read in a later iteration or after it
    "early-return",       // returns before the end of a function
    "break",
    "strings-unicode",    // non-ASCII string literals
    "int-edges",          // literals near the Int range's ends
    "host-calls",         // capability and model calls
    "records-width",      // passing a record with more fields where fewer are expected
    "dead-code",          // statements after one that returns on every path (never run)
    "policy-model-approvals",  // a policy's approval = "always" or approve table on a model's grant
};

class Generator {
public:
    Generator(uint64_t seed, const GeneratorOptions& options) : rng_(seed), options_(options) {}

    Case generate() {
        Case c;
        c.strict = options_.strict;
        makeHost();
        makeProgramTypes();
        makeFunctions();
        c.source = programText();
        c.host = hostText();
        c.policy = policyText();
        c.inputs = inputsJson();
        c.worldSeed = rng_.next();
        return c;
    }

private:
    Rng rng_;
    GeneratorOptions options_;
    std::vector<std::pair<std::string, T>> hostTypes_, programTypes_;
    std::vector<CapSpec> caps_;
    std::vector<ModelSpec> models_;
    std::map<std::string, std::vector<std::string>> inputTags_;
    std::vector<AgentSpec> agents_;
    std::vector<FnSpec> fns_;
    std::set<std::string> used_;  // resources called
    std::optional<double> budget_;
    // Generation state of the current function.
    size_t fn_ = 0;
    std::vector<std::vector<Var>> scopes_;
    int loopDepth_ = 0;
    int stmtDepth_ = 0;
    int counter_ = 0;
    int effects_ = 0;  // host calls written in the current function (kept modest)
    bool needSkip_ = false;

    bool on(const char* feature) const { return !options_.disabled.count(feature); }
    std::string fresh(const char* prefix) { return fmt::format("{}{}", prefix, ++counter_); }

    // ---- host

    T randomFieldType(int depth) {
        switch (rng_.below(depth > 0 ? 4 : 7)) {
            case 0: return tStr();
            case 1: return tInt();
            case 2: return tFloat();
            case 3: return tBool();
            case 4: return tList(tStr(), rng_.chance(60) ? std::optional<int64_t>(rng_.range(1, 4)) : std::nullopt);
            case 5: return hostTypes_.empty() ? tStr() : rng_.pick(hostTypes_).second;
            default: return tList(tInt(), rng_.range(1, 3));
        }
    }

    void makeHost() {
        // Shared types: a record, an enum, a record holding a list.
        hostTypes_.push_back({"Mood", tEnum({"good", "bad", "meh"}, "Mood")});
        hostTypes_.push_back({"Hit", tRecord({{"url", tStr()}, {"title", tStr()}, {"score", tInt()}}, "Hit")});
        if (rng_.chance(50))
            hostTypes_.push_back({"Doc", tRecord({{"name", tStr()}, {"lines", tList(tStr(), 3)}, {"mood", hostTypes_[0].second}}, "Doc")});
        static const std::vector<std::string> ns = {"web", "db", "mail", "kv", "pay", "log", "crm", "files"};
        static const std::vector<std::string> verbs = {"get", "put", "send", "find", "list", "refund", "write", "score"};
        int n = static_cast<int>(rng_.range(2, 6));
        std::set<std::string> names;
        for (int i = 0; i < n; ++i) {
            CapSpec c;
            do c.name = rng_.pick(ns) + "." + rng_.pick(verbs);
            while (!names.insert(c.name).second);
            int params = static_cast<int>(rng_.range(rng_.chance(10) ? 0 : 1, 3));
            for (int p = 0; p < params; ++p) {
                CapParam cp;
                cp.name = fmt::format("p{}", p + 1);
                cp.type = rng_.chance(55) ? tStr() : randomFieldType(1);
                if (rng_.chance(12)) cp.deny.push_back(rng_.chance(60) ? "secret" : rng_.pick(kTags));
                if (rng_.chance(25)) cp.approve.push_back(rng_.pick(kTags));
                c.params.push_back(std::move(cp));
            }
            switch (rng_.below(10)) {
                case 0: c.ret = tUnit(); break;
                case 1: c.ret = tInt(); break;
                case 2: c.ret = tList(tStr(), rng_.range(1, 4)); break;
                case 3: c.ret = tList(hostTypes_[1].second, rng_.range(1, 3)); break;
                case 4: c.ret = hostTypes_[1].second; break;
                case 5: c.ret = hostTypes_[0].second; break;
                case 6: c.ret = rng_.chance(50) ? tFloat() : tBool(); break;
                case 7: c.ret = hostTypes_.size() > 2 ? hostTypes_[2].second : tStr(); break;
                default: c.ret = tStr();
            }
            if (rng_.chance(50)) c.tags.push_back(rng_.pick(kTags));
            if (rng_.chance(10)) c.tags.push_back("secret");
            if (rng_.chance(20)) c.clears.push_back(rng_.pick(kTags));
            static const std::vector<double> costs = {0, 0, 0.001, 0.01, 0.005};
            c.cost = rng_.pick(costs);
            c.idempotent = rng_.chance(60);
            c.approvalAlways = rng_.chance(8);
            caps_.push_back(std::move(c));
        }
        models_.push_back({"llm", rng_.chance(50) ? 0.01 : 0.0});
        if (rng_.chance(30)) models_.push_back({"judge", 0.002});
    }

    // ---- program types and functions

    void makeProgramTypes() {
        if (rng_.chance(70)) programTypes_.push_back({"Verdict", tEnum({"yes", "no", "maybe"}, "Verdict")});
        if (rng_.chance(70)) {
            std::vector<std::pair<std::string, T>> fields = {{"id", tStr()}, {"n", tInt()}};
            if (rng_.chance(50)) fields.push_back({"tags", tList(tStr(), rng_.range(1, 3))});
            if (rng_.chance(40) && !programTypes_.empty()) fields.push_back({"v", programTypes_[0].second});
            programTypes_.push_back({"Item", tRecord(fields, "Item")});
        }
        if (rng_.chance(30)) programTypes_.push_back({"Pair", tRecord({{"a", tFloat()}, {"b", tBool()}}, "Pair")});
    }

    std::vector<T> namedTypes() const {
        std::vector<T> out;
        for (const auto& [n, t] : hostTypes_) out.push_back(t);
        for (const auto& [n, t] : programTypes_) out.push_back(t);
        return out;
    }

    // A type for a parameter, a return value or a let: mostly simple, sometimes structured.
    T randomType(int depth = 0) {
        unsigned r = static_cast<unsigned>(rng_.below(100));
        if (r < 22) return tInt();
        if (r < 30) return tFloat();
        if (r < 38) return tBool();
        if (r < 60) return tStr();
        if (r < 70) {
            std::vector<T> named = namedTypes();
            return rng_.pick(named);
        }
        if (r < 76) return tEnum({"x", "y"});
        if (depth > 1) return tStr();
        T elem = randomType(depth + 1);
        if (r < 94) return tList(elem, rng_.chance(60) ? std::optional<int64_t>(rng_.range(1, 4)) : std::nullopt);
        return tRecord({{"k", tStr()}, {"v", elem}});
    }

    void makeFunctions() {
        int helpers = static_cast<int>(rng_.range(0, 4));
        fns_.push_back(FnSpec{"main", {}, nullptr, 0, false, {}});
        for (int i = 0; i < helpers; ++i) {
            FnSpec f;
            f.name = fmt::format("f{}", i + 1);
            f.index = static_cast<size_t>(i + 1);
            int params = static_cast<int>(rng_.range(0, 3));
            for (int p = 0; p < params; ++p) f.params.emplace_back(fmt::format("a{}", p + 1), randomType());
            f.ret = rng_.chance(12) ? tUnit() : randomType();
            fns_.push_back(std::move(f));
        }
        // main's parameters are the inputs, tagged by the host.
        int inputs = static_cast<int>(rng_.range(1, 3));
        for (int p = 0; p < inputs; ++p) {
            std::string name = fmt::format("in{}", p + 1);
            T t = randomType();
            fns_[0].params.emplace_back(name, t);
            if (rng_.chance(75)) {
                std::vector<std::string> tags = {rng_.pick(kTags)};
                if (rng_.chance(30)) tags.push_back(rng_.pick(kTags));
                std::sort(tags.begin(), tags.end());
                tags.erase(std::unique(tags.begin(), tags.end()), tags.end());
                inputTags_[name] = tags;
            }
        }
        fns_[0].ret = rng_.chance(70) ? tStr() : randomType();
        if (fns_[0].ret->k == K::Unit) fns_[0].ret = tStr();
        // Agents, before the bodies that call them.
        if (rng_.chance(40)) agents_.push_back({"Writer", "llm", rng_.chance(90) ? 200 : 2});
        if (rng_.chance(20)) agents_.push_back({"Critic", models_.back().name, 200});
        if (rng_.chance(30)) budget_ = rng_.chance(80) ? 20.0 : 0.05;
        // Bodies from the last helper to main, so each knows which callees exist.
        for (size_t i = fns_.size(); i-- > 0;) {
            fn_ = i;
            fns_[i].body = functionBody(fns_[i]);
        }
    }

    // ---- scopes

    void push() { scopes_.emplace_back(); }
    void pop() { scopes_.pop_back(); }
    // A variable of type Never (the element of `[]`) is never read: the body it is bound in never runs.
    void declare(const std::string& name, const T& type, bool mut) {
        if (type->k != K::Never) scopes_.back().push_back(Var{name, type, mut});
    }
    std::vector<const Var*> visible(const std::function<bool(const Var&)>& pred) const {
        std::vector<const Var*> out;
        std::set<std::string> shadowed;
        for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s)
            for (auto v = s->rbegin(); v != s->rend(); ++v) {
                if (!shadowed.insert(v->name).second) continue;
                if (pred(*v)) out.push_back(&*v);
            }
        return out;
    }

    // ---- expressions

    struct Want {
        T type;
        bool exact = false;  // must have the same shape (branches, list items)
    };

    static Ex atom(std::string code, T type) { return Ex{std::move(code), std::move(type), true, false}; }
    static Ex compound(std::string code, T type) { return Ex{std::move(code), std::move(type), false, false}; }
    static std::string operand(const Ex& e) { return e.atom && !e.block ? e.code : "(" + e.code + ")"; }

    // Never (first([]), an element of `[]`) would fit anything but can only fail at run time.
    bool ok(const Ex& e, const Want& w) const {
        return e.type->k != K::Never && fits(e.type, w.type) && (!w.exact || sameShape(e.type, w.type));
    }

    // An expression of the wanted type. `depth` bounds the nesting; `indent` is the indentation
    // of the line the expression starts on (for the blocks of if/for/match); `interp`: inside an
    // interpolation (one line, no quotes: names, fields, lengths and arithmetic only).
    Ex expr(const Want& w, int depth, int indent, bool interp = false) {
        for (int attempt = 0; attempt < 12; ++attempt) {
            std::optional<Ex> e = tryExpr(w, depth, indent, interp);
            if (e && ok(*e, w)) return *e;
        }
        return leaf(w, indent, interp);
    }

    // Something of type w that always works: a literal, or a literal structure.
    Ex leaf(const Want& w, int indent, bool interp) {
        const T& t = w.type;
        switch (t->k) {
            case K::Int: return atom(std::to_string(rng_.range(0, 9)), tInt());
            case K::Float: return atom(formatFloatPlain(rng_.pick(std::vector<double>{0.5, 1.25, 2.0, 3.75})), tFloat());
            case K::Bool: return atom(rng_.chance(50) ? "true" : "false", tBool());
            case K::Str: {
                std::string v = !t->options.empty() ? rng_.pick(t->options) : rng_.chance(50) ? "a" : rng_.pick(stringPool());
                return atom(quote(v), tStrLit({v}));
            }
            case K::Enum: {
                std::string o = rng_.pick(t->options);
                return atom(quote(o), tStrLit({o}));
            }
            case K::List: return atom("[]", tList(tNever(), 0));
            case K::Record: {
                std::string out = "{ ";
                std::vector<std::pair<std::string, T>> fields;
                for (size_t i = 0; i < t->fields.size(); ++i) {
                    Ex f = leaf(Want{t->fields[i].second, w.exact}, indent, interp);
                    out += (i ? ", " : "") + t->fields[i].first + ": " + f.code;
                    fields.emplace_back(t->fields[i].first, f.type);
                }
                return atom(out + " }", tRecord(std::move(fields)));
            }
            case K::Unit: return atom("skip()", tUnit());
            case K::Never: break;
        }
        return atom("0", tInt());
    }

    std::optional<Ex> tryExpr(const Want& w, int depth, int indent, bool interp) {
        const T& t = w.type;
        // Variables and fields of the right type are always a candidate.
        std::vector<std::function<std::optional<Ex>()>> choices;
        std::vector<unsigned> weights;
        auto add = [&](unsigned weight, std::function<std::optional<Ex>()> f) {
            choices.push_back(std::move(f));
            weights.push_back(weight);
        };
        add(45, [&]() -> std::optional<Ex> {
            auto vars = visible([&](const Var& v) { return ok(atom(v.name, v.type), w); });
            if (vars.empty()) return std::nullopt;
            const Var* v = rng_.pick(vars);
            return atom(v->name, v->type);
        });
        add(depth > 0 ? 10 : 0, [&]() -> std::optional<Ex> { return fieldOf(w); });
        if (!interp) add(5, [&]() -> std::optional<Ex> { return leaf(w, indent, interp); });
        if (depth > 0 && !interp) {
            add(5, [&]() -> std::optional<Ex> { return ifExpr(w, depth, indent); });
            add(3, [&]() -> std::optional<Ex> { return matchExpr(w, depth, indent); });
            add(4, [&]() -> std::optional<Ex> { return callFunction(w, depth, indent); });
            if (on("host-calls")) {
                add(effects_ < 8 ? 8 : 0, [&]() -> std::optional<Ex> { return callCapability(w, depth, indent); });
                add(effects_ < 8 ? 5 : 0, [&]() -> std::optional<Ex> { return askModel(w, depth, indent); });
            }
            add(4, [&]() -> std::optional<Ex> { return indexOrFirst(w, depth, indent); });
        }
        switch (t->k) {
            case K::Int: intChoices(add, w, depth, indent, interp); break;
            case K::Float: floatChoices(add, w, depth, indent, interp); break;
            case K::Bool: boolChoices(add, w, depth, indent, interp); break;
            case K::Str: strChoices(add, w, depth, indent, interp); break;
            case K::List: listChoices(add, w, depth, indent, interp); break;
            case K::Record: recordChoices(add, w, depth, indent, interp); break;
            default: break;
        }
        unsigned total = 0;
        for (unsigned x : weights) total += x;
        if (total == 0) return std::nullopt;
        unsigned r = static_cast<unsigned>(rng_.below(total));
        for (size_t i = 0; i < choices.size(); ++i) {
            if (r < weights[i]) return choices[i]();
            r -= weights[i];
        }
        return std::nullopt;
    }

    using Add = std::function<void(unsigned, std::function<std::optional<Ex>()>)>;

    std::string intLiteral() {
        if (on("int-edges") && rng_.chance(6)) {
            static const std::vector<std::string> edges = {"9223372036854775807", "(-9223372036854775807 - 1)",
                                                           "4611686018427387904", "3037000500", "1_000_000", "(-1)"};
            return rng_.pick(edges);
        }
        return std::to_string(rng_.chance(85) ? rng_.range(0, 12) : rng_.range(13, 1000));
    }

    Ex sub(const T& t, int depth, int indent, bool interp = false) { return expr(Want{t}, depth - 1, indent, interp); }

    void intChoices(const Add& add, const Want&, int depth, int indent, bool interp) {
        add(6, [=, this]() -> std::optional<Ex> {
            std::string lit = intLiteral();
            return lit[0] == '(' ? compound(lit.substr(1, lit.size() - 2), tInt()) : atom(lit, tInt());
        });
        if (depth <= 0) return;
        add(10, [=, this]() -> std::optional<Ex> {
            static const std::vector<std::string> ops = {"+", "-", "*", "%"};
            std::string op = rng_.pick(ops);
            Ex a = sub(tInt(), depth, indent, interp);
            Ex b = op == "%" && rng_.chance(70) ? atom(std::to_string(rng_.range(1, 7)), tInt()) : sub(tInt(), depth, indent, interp);
            return compound(operand(a) + " " + op + " " + operand(b), tInt());
        });
        add(3, [=, this]() -> std::optional<Ex> { return compound("-" + operand(sub(tInt(), depth, indent, interp)), tInt()); });
        add(8, [=, this]() -> std::optional<Ex> {
            if (interp) {  // no quotes in an interpolation: the length of a variable
                auto vars = visible([](const Var& v) { return v.type->k == K::Str || v.type->k == K::List; });
                if (vars.empty()) return std::nullopt;
                return atom("len(" + rng_.pick(vars)->name + ")", tInt());
            }
            Ex x = rng_.chance(50) ? sub(tStr(), depth, indent) : sub(tList(randomType(2), std::nullopt), depth, indent);
            return atom("len(" + x.code + ")", tInt());
        });
        if (interp) return;
        add(4, [=, this]() -> std::optional<Ex> {
            static const std::vector<std::string> fs = {"round", "int", "abs"};
            std::string f = rng_.pick(fs);
            Ex x = f == "abs" ? sub(tInt(), depth, indent) : sub(tFloat(), depth, indent);
            return atom(f + "(" + x.code + ")", tInt());
        });
        add(2, [=, this]() -> std::optional<Ex> {
            Ex s = rng_.chance(50) ? atom(quote(rng_.pick(stringPool())), tStr()) : sub(tStr(), depth, indent);
            return atom("int(" + s.code + ")", tInt());
        });
        add(3, [=, this]() -> std::optional<Ex> { return atom("sum(" + sub(tList(tInt(), std::nullopt), depth, indent).code + ")", tInt()); });
        add(4, [=, this]() -> std::optional<Ex> {
            std::string f = rng_.chance(50) ? "min" : "max";
            if (rng_.chance(60))
                return atom(f + "(" + sub(tInt(), depth, indent).code + ", " + sub(tInt(), depth, indent).code + ")", tInt());
            return atom(f + "(" + sub(tList(tInt(), std::nullopt), depth, indent).code + ")", tInt());
        });
    }

    void floatChoices(const Add& add, const Want&, int depth, int indent, bool interp) {
        add(8, [=, this]() -> std::optional<Ex> {
            static const std::vector<double> pool = {0.5, 0.1, 2.675, 1.5, 3.0, 1000.25, 1e16, 1e-05, 0.30000000000000004, 123456.789};
            return atom(formatFloatPlain(rng_.pick(pool)), tFloat());
        });
        if (depth <= 0) return;
        // An Int is accepted where a Float is expected (and stays an Int).
        add(5, [=, this]() -> std::optional<Ex> { return sub(tInt(), depth, indent, interp); });
        add(8, [=, this]() -> std::optional<Ex> {
            static const std::vector<std::string> ops = {"+", "-", "*", "/", "%"};
            std::string op = rng_.pick(ops);
            Ex a = sub(tFloat(), depth, indent, interp);
            Ex b = sub(rng_.chance(50) ? tFloat() : tInt(), depth, indent, interp);
            bool isInt = a.type->k == K::Int && b.type->k == K::Int && op != "/";
            return compound(operand(a) + " " + op + " " + operand(b), isInt ? tInt() : tFloat());
        });
        add(2, [=, this]() -> std::optional<Ex> { return compound("-" + operand(sub(tFloat(), depth, indent, interp)), tFloat()); });
        if (interp) return;
        add(4, [=, this]() -> std::optional<Ex> {
            // round(x, n) is a Float (Python keeps an Int an Int at run time).
            return atom("round(" + sub(tFloat(), depth, indent).code + ", " + std::to_string(rng_.range(0, 3)) + ")", tFloat());
        });
        add(1, [=, this]() -> std::optional<Ex> {
            return atom("round(" + sub(tFloat(), depth, indent).code + ", -" + std::to_string(rng_.range(1, 2)) + ")", tFloat());
        });
        add(3, [=, this]() -> std::optional<Ex> {
            Ex x = rng_.chance(60) ? sub(tInt(), depth, indent) : atom(quote(rng_.pick(stringPool())), tStr());
            return atom("float(" + x.code + ")", tFloat());
        });
        add(2, [=, this]() -> std::optional<Ex> {
            Ex x = sub(tFloat(), depth, indent);
            return atom("abs(" + x.code + ")", x.type);  // the same type as its argument
        });
        add(2, [=, this]() -> std::optional<Ex> { return atom("sum(" + sub(tList(tFloat(), std::nullopt), depth, indent).code + ")", tFloat()); });
        add(3, [=, this]() -> std::optional<Ex> {
            std::string f = rng_.chance(50) ? "min" : "max";
            return atom(f + "(" + sub(tFloat(), depth, indent).code + ", " + sub(tFloat(), depth, indent).code + ")", tFloat());
        });
    }

    // Two expressions of one comparable type (numbers, strings, or same-shaped lists/records).
    std::pair<Ex, Ex> comparable(int depth, int indent, bool interp, bool ordered) {
        unsigned r = static_cast<unsigned>(rng_.below(ordered ? 3 : 6));
        T t;
        if (r == 0) t = tInt();
        else if (r == 1) t = tFloat();
        else if (r == 2) t = tStr();
        else if (r == 3) t = randomType(1);
        else if (r == 4) t = tBool();
        else {
            // An enum and one of its literals (a literal outside it would be E0111).
            auto enums = visible([](const Var& v) { return v.type->k == K::Enum; });
            if (!enums.empty()) {
                const Var* v = rng_.pick(enums);
                std::string o = rng_.pick(v->type->options);
                return {atom(v->name, v->type), atom(quote(o), tStrLit({o}))};
            }
            t = tStr();
        }
        if (t->k == K::Unit) t = tInt();
        Ex a = expr(Want{t, true}, depth - 1, indent, interp);
        Ex b = expr(Want{t, true}, depth - 1, indent, interp);
        if (t->k == K::Record && t->fields.size() > 1 && !interp && !ordered && rng_.chance(40)) {
            // The same fields in another order: records compare as maps (and one fits the other).
            std::vector<std::pair<std::string, T>> fields = t->fields;
            std::reverse(fields.begin(), fields.end());
            Ex other = expr(Want{tRecord(fields), true}, depth - 1, indent);
            if (other.type->k == K::Record && a.type->k == K::Record && sameShape(a.type, t) && fits(other.type, a.type) &&
                fits(a.type, other.type))
                return {a, other};
        }
        // Records join only with the same fields in order; an unsure pair is compared by a field.
        if (!sameShape(a.type, b.type)) return {atom("1", tInt()), atom("1", tInt())};
        // An enum compared with a string literal outside it is E0111: use one of its options.
        auto literal = [](const Ex& e) {  // a plain string literal: quoted, with no unescaped `{`
            if (e.code.size() < 2 || e.code.front() != '"' || e.code.back() != '"') return false;
            for (size_t i = 1; i + 1 < e.code.size(); ++i) {
                if (e.code[i] == '\\') ++i;
                else if (e.code[i] == '{' || e.code[i] == '"') return false;
            }
            return true;
        };
        if (a.type->k == K::Enum && literal(b)) {
            std::string o = rng_.pick(a.type->options);
            b = atom(quote(o), tStrLit({o}));
        }
        if (b.type->k == K::Enum && literal(a)) {
            std::string o = rng_.pick(b.type->options);
            a = atom(quote(o), tStrLit({o}));
        }
        return {a, b};
    }

    void boolChoices(const Add& add, const Want&, int depth, int indent, bool interp) {
        add(6, [=, this]() -> std::optional<Ex> { return atom(rng_.chance(50) ? "true" : "false", tBool()); });
        if (depth <= 0) return;
        add(10, [=, this]() -> std::optional<Ex> {
            static const std::vector<std::string> ops = {"<", "<=", ">", ">="};
            auto [a, b] = comparable(depth, indent, interp, true);
            return compound(operand(a) + " " + rng_.pick(ops) + " " + operand(b), tBool());
        });
        add(10, [=, this]() -> std::optional<Ex> {
            auto [a, b] = comparable(depth, indent, interp, false);
            return compound(operand(a) + (rng_.chance(50) ? " == " : " != ") + operand(b), tBool());
        });
        add(8, [=, this]() -> std::optional<Ex> {
            Ex a = sub(tBool(), depth, indent, interp);
            Ex b = sub(tBool(), depth, indent, interp);
            return compound(operand(a) + (rng_.chance(50) ? " and " : " or ") + operand(b), tBool());
        });
        add(4, [=, this]() -> std::optional<Ex> { return compound("not " + operand(sub(tBool(), depth, indent, interp)), tBool()); });
        if (interp) return;
        add(5, [=, this]() -> std::optional<Ex> {
            if (rng_.chance(50)) {
                Ex s = sub(tStr(), depth, indent);
                Ex t = sub(tStr(), depth, indent);
                return compound(operand(s) + " in " + operand(t), tBool());
            }
            T elem = randomType(2);
            Ex x = expr(Want{elem, true}, depth - 1, indent);
            Ex xs = expr(Want{tList(elem, std::nullopt)}, depth - 1, indent);
            if (!sameShape(x.type, xs.type->elem)) return std::nullopt;
            if (rng_.chance(50)) return atom("contains(" + xs.code + ", " + x.code + ")", tBool());
            return compound(operand(x) + " in " + operand(xs), tBool());
        });
        add(5, [=, this]() -> std::optional<Ex> {
            static const std::vector<std::string> fs = {"startswith", "endswith", "contains"};
            Ex s = sub(tStr(), depth, indent);
            Ex p = rng_.chance(50) ? atom(quote(rng_.pick(stringPool())), tStr()) : sub(tStr(), depth, indent);
            return atom(rng_.pick(fs) + "(" + s.code + ", " + p.code + ")", tBool());
        });
    }

    // A string literal, typed as the checker types it: Str holding that one literal.
    Ex strLiteral() {
        std::string s = rng_.pick(stringPool());
        if (!on("strings-unicode"))
            for (unsigned char c : s)
                if (c >= 0x80) s = "plain";
        return atom(quote(s), tStrLit({s}));
    }

    void strChoices(const Add& add, const Want& w, int depth, int indent, bool interp) {
        if (!w.type->options.empty()) return;  // a literal set: leaf() writes one of its literals
        if (!interp) add(5, [=, this]() -> std::optional<Ex> { return strLiteral(); });
        // An enum value is a Str.
        add(3, [=, this]() -> std::optional<Ex> {
            auto enums = visible([](const Var& v) { return v.type->k == K::Enum; });
            if (enums.empty()) return std::nullopt;
            const Var* v = rng_.pick(enums);
            return atom(v->name, v->type);
        });
        if (depth <= 0 || interp) return;
        add(10, [=, this]() -> std::optional<Ex> {
            // "text {e} text": each part on one line, without quotes.
            std::string out = "\"";
            int parts = static_cast<int>(rng_.range(1, 3));
            for (int i = 0; i < parts; ++i) {
                std::string text = rng_.pick(std::vector<std::string>{"", "x", " and ", "=", ": ", "é"});
                out += quote(text).substr(1, quote(text).size() - 2);
                Ex part = interpPart(depth);
                out += "{" + part.code + "}";
            }
            return atom(out + "\"", tStr());
        });
        add(6, [=, this]() -> std::optional<Ex> { return atom("str(" + sub(randomType(1), depth, indent).code + ")", tStr()); });
        // str() of a Unit value shows its labels: a Unit capability's result, a Unit helper's
        // return, an if whose branches are Unit (Unit carrying the condition's labels).
        add(3, [=, this]() -> std::optional<Ex> {
            std::optional<std::string> u = unitValue(depth, indent);
            if (!u) return std::nullopt;
            return atom("str(" + *u + ")", tStr());
        });
        add(6, [=, this]() -> std::optional<Ex> {
            static const std::vector<std::string> fs = {"lower", "upper", "trim"};
            return atom(rng_.pick(fs) + "(" + sub(tStr(), depth, indent).code + ")", tStr());
        });
        add(3, [=, this]() -> std::optional<Ex> {
            static const std::vector<std::string> olds = {"a", "", " ", "ß", "Σ", ",", "x"};
            return atom("replace(" + sub(tStr(), depth, indent).code + ", " + quote(rng_.pick(olds)) + ", " +
                            (rng_.chance(50) ? quote("-") : sub(tStr(), depth, indent).code) + ")",
                        tStr());
        });
        add(4, [=, this]() -> std::optional<Ex> {
            return atom("join(" + sub(tList(tStr(), std::nullopt), depth, indent).code + ", " +
                            quote(rng_.pick(std::vector<std::string>{", ", "", "|"})) + ")",
                        tStr());
        });
        add(6, [=, this]() -> std::optional<Ex> {
            Ex a = sub(tStr(), depth, indent);
            Ex b = sub(tStr(), depth, indent);
            return compound(operand(a) + " + " + operand(b), tStr());
        });
    }

    // One `{...}` of an interpolation: a variable or field (any type but a record, whose literal
    // braces would read oddly), or Int arithmetic — nothing with a quote or a block.
    Ex interpPart(int depth) {
        auto vars = visible([](const Var& v) { return v.type->k != K::Record; });
        if (!vars.empty() && rng_.chance(60)) {
            const Var* v = rng_.pick(vars);
            return atom(v->name, v->type);
        }
        if (rng_.chance(30))
            if (std::optional<Ex> f = fieldOf(Want{tStr()})) return *f;
        return expr(Want{rng_.chance(80) ? tInt() : tFloat()}, std::min(depth - 1, 2), 0, true);
    }

    // An expression of type Unit: a call of a Unit capability or helper, or an if/else whose
    // branches end in one.
    std::optional<std::string> unitValue(int depth, int indent) {
        std::vector<const CapSpec*> caps;
        for (const CapSpec& c : caps_)
            if (c.ret->k == K::Unit && on("host-calls") && effects_ < 10) caps.push_back(&c);
        std::vector<const FnSpec*> helpers;
        for (const FnSpec& f : fns_)
            if (f.index > fn_ && !f.skip && f.ret->k == K::Unit) helpers.push_back(&f);
        auto call = [&]() -> std::optional<std::string> {
            if (!caps.empty() && (helpers.empty() || rng_.chance(60))) return capabilityCall(*rng_.pick(caps), depth, indent).code;
            if (helpers.empty()) return std::nullopt;
            const FnSpec* f = rng_.pick(helpers);
            return f->name + "(" + arguments(f->params, depth, indent) + ")";
        };
        if (depth > 1 && rng_.chance(50)) {
            Ex c = expr(Want{tBool()}, depth - 1, indent);
            std::optional<std::string> a = call();
            if (!a) return std::nullopt;
            std::string out = "if " + c.code + " {\n" + pad(indent + 1) + *a + "\n" + pad(indent) + "}";
            if (rng_.chance(50))
                if (std::optional<std::string> b = call()) out += " else {\n" + pad(indent + 1) + *b + "\n" + pad(indent) + "}";
            return out;
        }
        return call();
    }

    void listChoices(const Add& add, const Want& w, int depth, int indent, bool interp) {
        if (interp) return;
        const T& elem = w.type->elem;
        std::optional<int64_t> max = w.type->max;
        int64_t cap = max ? std::min<int64_t>(*max, 3) : 3;
        add(8, [=, this]() -> std::optional<Ex> {
            int64_t n = rng_.range(0, cap);
            std::string out = "[";
            T joined;
            for (int64_t i = 0; i < n; ++i) {
                Ex item = expr(Want{elem, true}, depth - 1, indent);
                out += (i ? ", " : "") + item.code;
                joined = joined ? join(joined, item.type) : item.type;
            }
            return atom(out + "]", tList(joined ? joined : tNever(), n));
        });
        if (depth <= 0) return;
        add(8, [=, this]() -> std::optional<Ex> { return forExpr(w, depth, indent); });
        add(5, [=, this]() -> std::optional<Ex> {
            int64_t n = rng_.range(0, max ? *max : 4);
            Ex xs = sub(tList(elem, std::nullopt), depth, indent);
            std::optional<int64_t> bound = xs.type->max ? std::min(*xs.type->max, n) : n;
            return atom("take(" + xs.code + ", " + std::to_string(n) + ")", tList(xs.type->elem, bound));
        });
        if (elem->k == K::Str && elem->options.empty() && !max)
            add(4, [=, this]() -> std::optional<Ex> {
                static const std::vector<std::string> seps = {",", " ", "a", "ß", ", ", "x"};
                return atom("split(" + sub(tStr(), depth, indent).code + ", " + quote(rng_.pick(seps)) + ")", tList(tStr(), std::nullopt));
            });
        add(3, [=, this]() -> std::optional<Ex> {
            Ex xs = sub(w.type, depth, indent);
            return atom("unique(" + xs.code + ")", xs.type);
        });
        add(4, [=, this]() -> std::optional<Ex> {
            T half = max ? tList(elem, *max / 2) : w.type;
            Ex a = expr(Want{half, true}, depth - 1, indent);
            Ex b = expr(Want{half, true}, depth - 1, indent);
            if (!sameShape(a.type, b.type)) return std::nullopt;
            std::optional<int64_t> bound;
            if (a.type->max && b.type->max) bound = *a.type->max + *b.type->max;
            return compound(operand(a) + " + " + operand(b), tList(join(a.type->elem, b.type->elem), bound));
        });
        if (isNum(elem) && elem->k != K::Float)
            add(3, [=, this]() -> std::optional<Ex> {
                int64_t n = rng_.range(0, max ? std::min<int64_t>(*max, 5) : 5);
                return atom("range(" + std::to_string(n) + ")", tList(tInt(), n));
            });
    }

    void recordChoices(const Add& add, const Want& w, int depth, int indent, bool interp) {
        if (interp) return;
        add(12, [=, this]() -> std::optional<Ex> {
            std::string out = "{ ";
            std::vector<std::pair<std::string, T>> fields;
            const auto& want = w.type->fields;
            for (size_t i = 0; i < want.size(); ++i) {
                Ex f = expr(Want{want[i].second, w.exact}, depth - 1, indent + 1);
                out += (i ? ", " : "") + want[i].first + ": " + f.code;
                fields.emplace_back(want[i].first, f.type);
            }
            // Width subtyping: sometimes an extra field (not where the exact shape is needed).
            if (!w.exact && on("records-width") && rng_.chance(10)) {
                Ex extra = expr(Want{tInt()}, 0, indent);
                out += ", extra: " + extra.code;
                fields.emplace_back("extra", extra.type);
            }
            return atom(out + " }", tRecord(std::move(fields)));
        });
    }

    // r.f of a visible record (or of a record field of one) whose field fits.
    std::optional<Ex> fieldOf(const Want& w) {
        std::vector<Ex> found;
        for (const Var* v : visible([](const Var& v) { return v.type->k == K::Record; })) {
            for (const auto& [name, ft] : v->type->fields) {
                Ex e = atom(v->name + "." + name, ft);
                if (ok(e, w)) found.push_back(e);
                if (ft->k == K::Record)
                    for (const auto& [inner, it] : ft->fields) {
                        Ex d = atom(v->name + "." + name + "." + inner, it);
                        if (ok(d, w)) found.push_back(d);
                    }
            }
        }
        if (found.empty()) return std::nullopt;
        return rng_.pick(found);
    }

    // xs[i] or first(xs) of a visible list: R0101 when it is too short, which is part of the test.
    std::optional<Ex> indexOrFirst(const Want& w, int depth, int indent) {
        auto lists = visible([&](const Var& v) { return v.type->k == K::List && ok(atom("x", v.type->elem), w); });
        if (lists.empty()) return std::nullopt;
        const Var* v = rng_.pick(lists);
        if (rng_.chance(30)) return atom("first(" + v->name + ")", v->type->elem);
        Ex i = rng_.chance(70) ? atom(std::to_string(rng_.range(0, 1)), tInt())
                               : (rng_.chance(50) ? compound("-1", tInt()) : sub(tInt(), depth, indent));
        return atom(v->name + "[" + i.code + "]", v->type->elem);
    }

    // ---- compound expressions

    // A block whose value has the wanted type: a few statements, then the value.
    std::string valueBlock(const Want& w, int depth, int indent, T& type) {
        push();
        std::string out = "{\n";
        int stmts = static_cast<int>(rng_.range(0, depth > 1 ? 2 : 1));
        for (int i = 0; i < stmts; ++i) out += statement(indent + 1, depth - 1, /*allowExit=*/false);
        Ex v = expr(Want{w.type, true}, depth - 1, indent + 1);
        out += pad(indent + 1) + v.code + "\n" + pad(indent) + "}";
        pop();
        type = v.type;
        return out;
    }

    std::optional<Ex> ifExpr(const Want& w, int depth, int indent) {
        Ex c = sub(tBool(), depth, indent);
        T a, b;
        std::string thenBlock = valueBlock(w, depth, indent, a);
        std::string out = "if " + c.code + " " + thenBlock + " else ";
        if (rng_.chance(25)) {
            Ex inner = *ifExprOr(w, depth - 1, indent);
            out += inner.code;
            b = inner.type;
        } else {
            out += valueBlock(w, depth, indent, b);
        }
        if (!sameShape(a, b)) return std::nullopt;
        Ex e = compound(out, join(a, b));
        e.block = true;
        return e;
    }
    std::optional<Ex> ifExprOr(const Want& w, int depth, int indent) {
        if (depth > 0)
            if (std::optional<Ex> e = ifExpr(w, depth, indent)) return e;
        T t;
        Ex c = expr(Want{tBool()}, 0, indent);
        std::string a = valueBlock(w, 1, indent, t);
        T u;
        std::string b = valueBlock(w, 1, indent, u);
        Ex e = compound("if " + c.code + " " + a + " else " + b, sameShape(t, u) ? join(t, u) : t);
        e.block = true;
        return e;
    }

    // The subject of a match and its arms' patterns (an enum: all options or some and `_`; a
    // Str: a few literals and `_`).
    std::pair<Ex, std::vector<std::optional<std::string>>> matchHead(int depth, int indent) {
        std::vector<std::optional<std::string>> arms;
        auto enums = visible([](const Var& v) { return v.type->k == K::Enum; });
        if (!enums.empty() && rng_.chance(70)) {
            const Var* v = rng_.pick(enums);
            std::vector<std::string> options = v->type->options;
            for (size_t i = options.size(); i > 1; --i) std::swap(options[i - 1], options[rng_.below(i)]);
            size_t keep = rng_.chance(60) ? options.size() : static_cast<size_t>(rng_.range(0, static_cast<int64_t>(options.size()) - 1));
            for (size_t i = 0; i < keep; ++i) arms.push_back(options[i]);
            if (keep < options.size() || rng_.chance(15)) arms.push_back(std::nullopt);
            return {atom(v->name, v->type), arms};
        }
        Ex s = expr(Want{tStr()}, depth - 1, indent);
        if (s.type->k == K::Enum) {
            // An enum after all (a field, a call): its arms must be its options.
            for (const std::string& o : s.type->options) arms.push_back(o);
            return {s, arms};
        }
        std::set<std::string> seen;
        int n = static_cast<int>(rng_.range(1, 3));
        for (int i = 0; i < n; ++i) {
            std::string lit = rng_.chance(50) ? rng_.pick(stringPool()) : rng_.pick(std::vector<std::string>{"a", "b", "x"});
            if (seen.insert(lit).second) arms.push_back(lit);
        }
        arms.push_back(std::nullopt);
        return {s, arms};
    }

    std::optional<Ex> matchExpr(const Want& w, int depth, int indent) {
        auto [subject, arms] = matchHead(depth, indent);
        std::string out = "match " + operand(subject) + " {\n";
        T joined;
        for (const auto& arm : arms) {
            T t;
            std::string body = valueBlock(w, depth, indent + 1, t);
            out += pad(indent + 1) + (arm ? quote(*arm) : "_") + " => " + body + "\n";
            if (joined && !sameShape(joined, t)) return std::nullopt;
            joined = joined ? join(joined, t) : t;
        }
        Ex e = compound(out + pad(indent) + "}", joined);
        e.block = true;
        return e;
    }

    // A list to loop over, with the loop's bound (after `limit`): small, so runs stay short.
    struct Iter {
        std::string head;  // "x in xs limit 3"
        std::string var;
        T elemType;
        int64_t bound;
        T listType;
    };
    Iter iterate(int depth, int indent, std::optional<int64_t> atMost) {
        Iter it;
        it.var = fresh("x");
        Ex xs;
        unsigned r = static_cast<unsigned>(rng_.below(10));
        auto lists = visible([](const Var& v) { return v.type->k == K::List; });
        if (r < 4 && !lists.empty()) {
            const Var* v = rng_.pick(lists);
            xs = atom(v->name, v->type);
        } else if (r < 6) {
            int64_t n = rng_.range(0, 4);
            xs = atom("range(" + std::to_string(n) + ")", tList(tInt(), n));
        } else {
            xs = expr(Want{tList(randomType(1), std::nullopt)}, depth - 1, indent);
        }
        it.listType = xs.type;
        it.elemType = xs.type->elem;
        int64_t bound = xs.type->max ? *xs.type->max : -1;
        std::optional<int64_t> limit;
        int64_t most = atMost ? std::min<int64_t>(*atMost, 4) : 4;
        if (bound < 0 || bound > most || rng_.chance(15)) limit = rng_.range(0, most);
        it.bound = limit ? (bound < 0 ? *limit : std::min(bound, *limit)) : bound;
        it.head = it.var + " in " + operand(xs) + (limit ? " limit " + std::to_string(*limit) : "");
        return it;
    }

    std::optional<Ex> forExpr(const Want& w, int depth, int indent) {
        Iter it = iterate(depth, indent, w.type->max);
        push();
        declare(it.var, it.elemType, false);
        std::string filter;
        if (rng_.chance(35)) filter = " if " + expr(Want{tBool()}, depth - 1, indent).code;
        std::string out = "for " + it.head + filter + " {\n";
        int stmts = static_cast<int>(rng_.range(0, 2));
        loopDepth_++;
        for (int i = 0; i < stmts; ++i) out += statement(indent + 1, depth - 1, /*allowExit=*/false, /*allowBreak=*/true);
        loopDepth_--;
        Ex v = expr(Want{w.type->elem, true}, depth - 1, indent + 1);
        out += pad(indent + 1) + v.code + "\n" + pad(indent) + "}";
        pop();
        Ex e = compound(out, tList(v.type, it.bound));
        e.block = true;
        return e;
    }

    // ---- calls

    std::string arguments(const std::vector<std::pair<std::string, T>>& params, int depth, int indent) {
        // Positional arguments first, then named ones in any order.
        size_t positional = rng_.chance(70) ? params.size() : static_cast<size_t>(rng_.below(params.size() + 1));
        std::vector<std::string> named;
        std::string out;
        for (size_t i = 0; i < params.size(); ++i) {
            Ex a = expr(Want{params[i].second}, depth - 1, indent);
            if (i < positional) out += (out.empty() ? "" : ", ") + a.code;
            else named.push_back(params[i].first + ": " + a.code);
        }
        for (size_t i = named.size(); i > 1; --i) std::swap(named[i - 1], named[rng_.below(i)]);
        for (const std::string& n : named) out += (out.empty() ? "" : ", ") + n;
        return out;
    }

    std::optional<Ex> callFunction(const Want& w, int depth, int indent) {
        std::vector<const FnSpec*> callees;
        for (const FnSpec& f : fns_)
            if (f.index > fn_ && !f.skip && f.ret->k != K::Unit && ok(atom("x", f.ret), w)) callees.push_back(&f);
        if (callees.empty()) return std::nullopt;
        const FnSpec* f = rng_.pick(callees);
        return atom(f->name + "(" + arguments(f->params, depth, indent) + ")", f->ret);
    }

    // `retry`, `timeout` and `else` on a host call.
    std::string modifiers(bool idempotent, const T& ret, int depth, int indent) {
        std::string out;
        if (idempotent && rng_.chance(35)) out += " retry " + std::to_string(rng_.range(0, 2));
        if (rng_.chance(15)) out += " timeout " + rng_.pick(std::vector<std::string>{"500ms", "10s", "1.5s", "2m"});
        if (rng_.chance(45)) {
            if (ret->k == K::Unit) {
                needSkip_ = true;
                out += " else skip()";
            } else {
                Ex f = expr(Want{ret}, std::min(depth - 1, 1), indent);
                out += " else " + (f.atom && !f.block ? f.code : "(" + f.code + ")");
            }
        }
        return out;
    }

    std::optional<Ex> callCapability(const Want& w, int depth, int indent) {
        std::vector<const CapSpec*> fitting;
        for (const CapSpec& c : caps_)
            if (c.ret->k != K::Unit && ok(atom("x", c.ret), w)) fitting.push_back(&c);
        if (fitting.empty()) return std::nullopt;
        return capabilityCall(*rng_.pick(fitting), depth, indent);
    }

    Ex capabilityCall(const CapSpec& c, int depth, int indent) {
        ++effects_;
        used_.insert(c.name);
        std::vector<std::pair<std::string, T>> params;
        for (const CapParam& p : c.params) params.emplace_back(p.name, p.type);
        std::string code = c.name + "(" + arguments(params, depth, indent) + ")";
        std::string mods = modifiers(c.idempotent, c.ret, depth, indent);
        Ex e = atom(code + mods, c.ret);
        if (!mods.empty()) e.atom = false;  // `f() else x` binds looser than `.field` and operators
        return e;
    }

    std::optional<Ex> askModel(const Want& w, int depth, int indent) {
        // The requested type: every list in it must be bounded (E0113).
        T t = w.type;
        if (t->k == K::Str && !t->options.empty()) t = tEnum(t->options);
        if (hasUnboundedList(t)) {
            if (t->k != K::List || hasUnboundedList(t->elem)) return std::nullopt;
            t = withMax(t, rng_.range(1, 3));
        }
        if (t->k == K::Float && rng_.chance(30)) t = tInt();
        if (!ok(atom("x", t), w) || t->k == K::Unit) return std::nullopt;
        ++effects_;
        std::string callee;
        std::string model;
        if (!agents_.empty() && rng_.chance(40)) {
            const AgentSpec& a = rng_.pick(agents_);
            callee = a.name;
            model = a.model;
        } else {
            model = rng_.pick(models_).name;
            callee = model;
        }
        used_.insert(model);
        std::string typeText = show(t);
        std::string prompt = rng_.chance(60) ? expr(Want{tStr()}, depth - 1, indent).code : quote("Answer briefly");
        std::string code = callee + ".ask(" + typeText + ", " + prompt;
        if (rng_.chance(60)) code += ", context: " + expr(Want{randomType(1)}, depth - 1, indent).code;
        code += ")";
        std::string mods = modifiers(true, t, depth, indent);
        Ex e = atom(code + mods, t);
        if (!mods.empty()) e.atom = false;
        return e;
    }

    // ---- statements

    // One statement line (or a multi-line compound statement), at `indent`, ending in a newline.
    // `allowExit`: it may return (only where the generator knows the function's result type).
    // After it, `returned_` says whether the statement returns on every path (docs: a block
    // returns when it contains a return, or an if/else or match all of whose branches return).
    std::string statement(int indent, int depth, bool allowExit = true, bool allowBreak = false) {
        if (stmtDepth_ > 3 || depth < 0) depth = 0;
        ++stmtDepth_;
        returned_ = false;
        std::string out = statementInner(indent, std::max(depth, 0), allowExit, allowBreak);
        --stmtDepth_;
        return out;
    }
    bool returned_ = false;

    std::string statementInner(int indent, int depth, bool allowExit, bool allowBreak) {
        const FnSpec& fn = fns_[fn_];
        unsigned r = static_cast<unsigned>(rng_.below(100));
        std::string p = pad(indent);
        auto vars = visible([](const Var& v) { return v.mut; });
        if (r < 22 || depth == 0) {
            // let, annotated or not
            T t = randomType();
            std::string name = fresh("v");
            if (rng_.chance(35) && t->k != K::Unit) {
                Ex e = expr(Want{t}, depth, indent);
                declare(name, t, false);
                return p + "let " + name + ": " + show(t) + " = " + e.code + "\n";
            }
            Ex e = expr(Want{t}, depth, indent);
            declare(name, e.type, false);  // a let keeps literal types, as the checker does
            return p + "let " + name + " = " + e.code + "\n";
        }
        if (r < 32) {
            // var, always annotated
            T t = randomType();
            std::string name = fresh("w");
            if (t->k == K::List && rng_.chance(50)) {
                declare(name, t, true);
                return p + "var " + name + ": " + show(t) + " = []\n";
            }
            Ex e = expr(Want{t}, depth, indent);
            declare(name, t, true);
            return p + "var " + name + ": " + show(t) + " = " + e.code + "\n";
        }
        if (r < 47 && !vars.empty() && (loopDepth_ == 0 || on("loop-carried-vars"))) {
            const Var* v = rng_.pick(vars);
            return p + v->name + " = " + update(*v, depth, indent) + "\n";
        }
        if (r < 60) return forStatement(indent, depth, allowExit);
        if (r < 74) return ifStatement(indent, depth, allowExit, allowBreak);
        if (r < 79) return matchStatement(indent, depth, allowExit, allowBreak);
        if (r < 82 && allowBreak && on("break")) return p + "if " + expr(Want{tBool()}, depth, indent).code + " {\n" + p + "  break\n" + p + "}\n";
        if (r < 86 && allowExit && fn.ret->k != K::Unit && on("early-return"))
            return p + "if " + expr(Want{tBool()}, depth, indent).code + " {\n" + p + "  return " +
                   expr(Want{fn.ret}, depth, indent + 1).code + "\n" + p + "}\n";
        // An effect as a statement: a Unit capability, a Unit helper, or any call discarded.
        std::vector<const CapSpec*> units;
        for (const CapSpec& c : caps_)
            if (c.ret->k == K::Unit) units.push_back(&c);
        if (!units.empty() && on("host-calls") && effects_ < 10) return p + capabilityCall(*rng_.pick(units), depth, indent).code + "\n";
        std::vector<const FnSpec*> helpers;
        for (const FnSpec& f : fns_)
            if (f.index > fn_ && !f.skip) helpers.push_back(&f);
        if (!helpers.empty()) {
            const FnSpec* f = rng_.pick(helpers);
            return p + f->name + "(" + arguments(f->params, depth, indent) + ")\n";
        }
        return p + expr(Want{randomType()}, depth, indent).code + "\n";
    }

    // The new value of a var: usually built from its old one.
    std::string update(const Var& v, int depth, int indent) {
        const T& t = v.type;
        switch (t->k) {
            case K::Int:
                if (rng_.chance(70)) return v.name + " + " + operand(expr(Want{tInt()}, depth - 1, indent));
                break;
            case K::Float:
                if (rng_.chance(70)) return v.name + " + " + operand(expr(Want{tFloat()}, depth - 1, indent));
                break;
            case K::Str:
                if (rng_.chance(70)) return v.name + " + " + operand(expr(Want{tStr()}, depth - 1, indent));
                break;
            case K::Bool:
                if (rng_.chance(50)) return v.name + (rng_.chance(50) ? " or " : " and ") + operand(expr(Want{tBool()}, depth - 1, indent));
                if (rng_.chance(40)) return "not " + v.name;
                break;
            case K::List:
                // Appending may outgrow a `max N` annotation: R0113 at run time.
                if (rng_.chance(75)) return v.name + " + [" + expr(Want{t->elem, true}, depth - 1, indent).code + "]";
                return expr(Want{withMax(t, std::nullopt)}, depth - 1, indent).code;
            default: break;
        }
        return expr(Want{t}, depth, indent).code;
    }

    // `returns`: set when the block returns on every path. Without "dead-code", nothing follows
    // a statement that does.
    std::string block(int indent, int depth, int stmts, bool allowExit, bool allowBreak, bool* returns = nullptr) {
        push();
        std::string out;
        bool all = false;
        for (int i = 0; i < stmts && (!all || on("dead-code")); ++i) {
            out += statement(indent, depth, allowExit, allowBreak);
            all = all || returned_;
        }
        pop();
        if (returns) *returns = all;
        returned_ = false;
        return out;
    }

    std::string forStatement(int indent, int depth, bool allowExit) {
        std::string p = pad(indent);
        Iter it = iterate(depth, indent, std::nullopt);
        push();
        declare(it.var, it.elemType, false);
        std::string filter;
        if (rng_.chance(35)) filter = " if " + expr(Want{tBool()}, depth - 1, indent).code;
        std::string out = p + "for " + it.head + filter + " {\n";
        loopDepth_++;
        int stmts = static_cast<int>(rng_.range(1, 3));
        std::string body = block(indent + 1, depth - 1, stmts, allowExit, true);
        loopDepth_--;
        pop();
        return out + body + p + "}\n";
    }

    std::string ifStatement(int indent, int depth, bool allowExit, bool allowBreak) {
        std::string p = pad(indent);
        std::string out = p + "if " + expr(Want{tBool()}, depth, indent).code + " {\n";
        bool thenReturns = false, elseReturns = false;
        out += block(indent + 1, depth - 1, static_cast<int>(rng_.range(1, 2)), allowExit, allowBreak, &thenReturns);
        if (thenReturns) {
        } else if (allowExit && fns_[fn_].ret->k != K::Unit && on("early-return") && rng_.chance(30)) {
            out += pad(indent + 1) + "return " + expr(Want{fns_[fn_].ret}, depth - 1, indent + 1).code + "\n";
            thenReturns = true;
        } else if (allowBreak && on("break") && rng_.chance(20)) {
            out += pad(indent + 1) + "break\n";
        }
        out += p + "}";
        if (rng_.chance(50)) {
            out += " else {\n" + block(indent + 1, depth - 1, static_cast<int>(rng_.range(1, 2)), allowExit, allowBreak, &elseReturns) + p + "}";
            returned_ = thenReturns && elseReturns;
        }
        return out + "\n";
    }

    std::string matchStatement(int indent, int depth, bool allowExit, bool allowBreak) {
        std::string p = pad(indent);
        auto [subject, arms] = matchHead(depth, indent);
        std::string out = p + "match " + operand(subject) + " {\n";
        bool all = true;
        for (const auto& arm : arms) {
            out += pad(indent + 1) + (arm ? quote(*arm) : "_") + " => {\n";
            bool armReturns = false;
            out += block(indent + 2, depth - 1, static_cast<int>(rng_.range(0, 2)), allowExit, allowBreak, &armReturns);
            if (!armReturns && allowExit && fns_[fn_].ret->k != K::Unit && on("early-return") && rng_.chance(20)) {
                out += pad(indent + 2) + "return " + expr(Want{fns_[fn_].ret}, depth - 1, indent + 2).code + "\n";
                armReturns = true;
            }
            all = all && armReturns;
            out += pad(indent + 1) + "}\n";
        }
        // Exhaustive by construction (an enum's options or `_`), so returning arms all return.
        returned_ = all;
        return out + p + "}\n";
    }

    std::string functionBody(FnSpec& f) {
        scopes_.clear();
        push();
        for (const auto& [name, t] : f.params) declare(name, t, false);
        counter_ = 0;
        effects_ = 0;
        loopDepth_ = 0;
        std::string out;
        int stmts = static_cast<int>(rng_.range(1, f.index == 0 ? 6 : 4));
        int depth = static_cast<int>(rng_.range(2, 3));
        bool returns = false;
        for (int i = 0; i < stmts && (!returns || on("dead-code")); ++i) {
            out += statement(1, depth);
            returns = returns || returned_;
        }
        if (returns && !on("dead-code")) {
            pop();
            return out;
        }
        // A Unit function ends in a bare return: its last statement's value must not be used.
        out += f.ret->k != K::Unit ? "  return " + expr(Want{f.ret}, depth, 1).code + "\n" : "  return\n";
        pop();
        return out;
    }

    // ---- texts

    std::string programText() {
        std::string out = "# generated by tests/difftest\nprogram gen\n";
        std::vector<std::string> uses(used_.begin(), used_.end());
        // Sometimes a resource the program does not call (W0201), which the policy must still grant.
        if (rng_.chance(10) && !caps_.empty()) uses.push_back(rng_.pick(caps_).name);
        std::sort(uses.begin(), uses.end());
        uses.erase(std::unique(uses.begin(), uses.end()), uses.end());
        usesList_ = uses;
        if (!uses.empty()) {
            out += "uses ";
            for (size_t i = 0; i < uses.size(); ++i) out += (i ? ", " : "") + uses[i];
            out += "\n";
        }
        if (budget_) out += "budget usd " + formatFloatPlain(*budget_) + "\n";
        out += "\n";
        for (const auto& [name, t] : programTypes_) {
            GType bare = *t;
            bare.alias.clear();
            out += "type " + name + " = " + show(std::make_shared<GType>(bare)) + "\n";
        }
        for (const AgentSpec& a : agents_)
            if (used_.count(a.model))
                out += "\nagent " + a.name + " {\n  model: " + a.model + "\n  system: \"Be brief.\"\n  max_calls: " +
                       std::to_string(a.maxCalls) + "\n}\n";
        // Declarations in a shuffled order: a function may be used before it is declared.
        std::vector<const FnSpec*> order;
        for (const FnSpec& f : fns_) order.push_back(&f);
        for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng_.below(i)]);
        for (const FnSpec* f : order) {
            out += "\nfn " + f->name + "(";
            for (size_t i = 0; i < f->params.size(); ++i)
                out += (i ? ", " : "") + f->params[i].first + ": " + show(f->params[i].second);
            out += ")";
            if (f->ret->k != K::Unit) out += " -> " + show(f->ret);
            out += " {\n" + f->body + "}\n";
        }
        if (needSkip_) out += "\nfn skip() {}\n";
        return out;
    }

    std::vector<std::string> usesList_;

    std::string hostText() {
        std::string out = "# generated by tests/difftest\n";
        for (const auto& [name, t] : hostTypes_) {
            GType bare = *t;
            bare.alias.clear();
            out += "type " + name + " = " + show(std::make_shared<GType>(bare)) + "\n";
        }
        auto tagList = [](const std::vector<std::string>& tags) {
            if (tags.size() == 1) return tags[0];
            std::string text = "(";
            for (size_t i = 0; i < tags.size(); ++i) text += (i ? ", " : "") + tags[i];
            return text + ")";
        };
        auto joined = [](const std::vector<std::string>& tags) {
            std::string text;
            for (size_t i = 0; i < tags.size(); ++i) text += (i ? ", " : "") + tags[i];
            return text;
        };
        for (const CapSpec& c : caps_) {
            out += "\ncapability " + c.name + "(";
            for (size_t i = 0; i < c.params.size(); ++i) {
                const CapParam& p = c.params[i];
                out += (i ? ", " : "") + p.name + ": " + show(p.type);
                if (!p.deny.empty()) out += " deny " + tagList(p.deny);
                if (!p.approve.empty()) out += " approve " + tagList(p.approve);
            }
            out += ")";
            if (c.ret->k != K::Unit) out += " -> " + show(c.ret);
            out += "\n";
            if (!c.tags.empty()) out += "  tags " + joined(c.tags) + "\n";
            if (!c.clears.empty()) out += "  clears " + joined(c.clears) + "\n";
            if (c.cost > 0) out += "  cost " + formatFloatPlain(c.cost) + "\n";
            if (c.idempotent) out += "  idempotent\n";
            if (c.approvalAlways) out += "  approval always\n";
        }
        out += "\n";
        for (const ModelSpec& m : models_) out += "model " + m.name + (m.cost > 0 ? " cost " + formatFloatPlain(m.cost) : "") + "\n";
        for (const auto& [name, tags] : inputTags_) out += "input " + name + " tags " + joined(tags) + "\n";
        return out;
    }

    std::string policyText() {
        std::string out = "# generated by tests/difftest\n";
        // Strict flows are the host's choice, in the policy.
        if (options_.strict) out += "[flows]\nstrict = true\n\n";
        if (rng_.chance(15)) out += "[budget]\nmax_usd = " + formatFloatPlain(rng_.chance(70) ? 50.0 : 0.02) + "\n\n";
        auto strList = [](const std::vector<std::string>& items) {
            std::string text = "[";
            for (size_t i = 0; i < items.size(); ++i) text += (i ? ", " : "") + json(items[i]).dump();
            return text + "]";
        };
        for (const std::string& r : usesList_) {
            // Now and then a resource without a grant (E0501, then R0303 at run time).
            if (rng_.chance(1)) continue;
            out += "[grant." + json(r).dump() + "]\n";
            if (rng_.chance(6)) out += "max_calls = " + std::to_string(rng_.range(0, 4)) + "\n";
            else if (rng_.chance(5)) out += "max_calls = 500\n";
            const CapSpec* cap = nullptr;
            for (const CapSpec& c : caps_)
                if (c.name == r) cap = &c;
            if (cap && rng_.chance(25)) {
                std::map<std::string, std::string> prefix, oneOf, max, approve;
                for (const CapParam& p : cap->params) {
                    if (p.type->k == K::Str && rng_.chance(40)) {
                        std::vector<std::string> pool = {"", "a", "h", " ", "Str", "ye"};
                        if (rng_.chance(50)) prefix[p.name] = strList({rng_.pick(pool), rng_.pick(pool)});
                        else oneOf[p.name] = strList({rng_.pick(stringPool()), "a", "yes"});
                    }
                    if (isNum(p.type) && rng_.chance(40)) max[p.name] = std::to_string(rng_.range(0, 10));
                    if (p.type->k == K::Int && rng_.chance(20)) oneOf[p.name] = "[1, 2.0, 3]";
                }
                auto table = [&](const char* key, const std::map<std::string, std::string>& m) {
                    if (m.empty()) return;
                    out += std::string(key) + " = { ";
                    size_t i = 0;
                    for (const auto& [k, v] : m) out += (i++ ? ", " : "") + k + " = " + v;
                    out += " }\n";
                };
                table("arg_prefix", prefix);
                table("arg_one_of", oneOf);
                table("arg_max", max);
            }
            bool isModel = !cap;
            bool approvals = !isModel || on("policy-model-approvals");
            if (approvals && rng_.chance(15)) {
                std::string param = cap && !cap->params.empty() ? rng_.pick(cap->params).name : rng_.chance(70) ? "prompt" : "context";
                out += "approve = { " + param + " = [" + json(rng_.pick(kTags)).dump() + "] }\n";
            }
            if (approvals && rng_.chance(6)) out += "approval = \"always\"\n";
            out += "\n";
        }
        return out;
    }

    json valueOf(const T& t, int depth) {
        switch (t->k) {
            case K::Int: return rng_.chance(90) ? json(rng_.range(-3, 20)) : json(rng_.pick(std::vector<int64_t>{9223372036854775807, -9223372036854775807 - 1, 1000000}));
            case K::Float: return json(rng_.pick(std::vector<double>{0.5, -1.25, 2.0, 1e16, 0.1, 7.0}));
            case K::Bool: return rng_.chance(50);
            case K::Str: return t->options.empty() ? json(rng_.pick(stringPool())) : json(rng_.pick(t->options));
            case K::Enum: return rng_.pick(t->options);
            case K::List: {
                json out = json::array();
                int64_t n = rng_.range(0, std::min<int64_t>(t->max ? *t->max : 4, depth > 0 ? 2 : 4));
                for (int64_t i = 0; i < n; ++i) out.push_back(valueOf(t->elem, depth + 1));
                return out;
            }
            case K::Record: {
                json out = json::object();
                for (const auto& [n, f] : t->fields) out[n] = valueOf(f, depth + 1);
                return out;
            }
            case K::Unit:
            case K::Never: return nullptr;
        }
        return nullptr;
    }

    json inputsJson() {
        json out = json::object();
        for (const auto& [name, t] : fns_[0].params) out[name] = valueOf(t, 0);
        return out;
    }
};

}  // namespace

const std::set<std::string>& generatorSwitches() { return kSwitchNames; }

Case generateCase(uint64_t seed, const GeneratorOptions& options) {
    Generator g(stableHash("difftest-case", seed), options);
    return g.generate();
}

}  // namespace remit::difftest
