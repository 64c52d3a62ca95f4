// See reference.h. The rules cited are docs/language.md's unless said otherwise; "table" is its
// table in "Labels, exactly".
#include "tests/difftest/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include "runtime/canonical_json.h"
#include "runtime/numfmt.h"
#include "runtime/pytext.h"
#include "runtime/source.h"
#include "tests/difftest/oracle.h"
#include "tests/difftest/world.h"

namespace remit::difftest {

namespace {

using json = nlohmann::json;
using Tags = std::set<std::string>;
using Prov = std::set<uint64_t>;
using K = RVal::Kind;

__extension__ typedef __int128 Int128;
__extension__ typedef unsigned __int128 UInt128;

// ---------------------------------------------------------------- labels

struct Labels {
    Tags tags;
    Prov prov;
    void add(const Labels& other) {
        tags.insert(other.tags.begin(), other.tags.end());
        prov.insert(other.prov.begin(), other.prov.end());
    }
};

Labels top(const RVal& v) { return Labels{v.tags, v.prov}; }

void addDeep(Labels& out, const RVal& v) {
    out.tags.insert(v.tags.begin(), v.tags.end());
    out.prov.insert(v.prov.begin(), v.prov.end());
    for (const RVal& item : v.items) addDeep(out, item);
    for (const auto& [name, field] : v.fields) addDeep(out, field);
}

Labels deep(const RVal& v) {
    Labels out;
    addDeep(out, v);
    return out;
}

RVal withLabels(RVal v, const Labels& labels) {
    v.tags.insert(labels.tags.begin(), labels.tags.end());
    v.prov.insert(labels.prov.begin(), labels.prov.end());
    return v;
}

RVal replaceLabels(RVal v, const Labels& labels) {
    v.tags = labels.tags;
    v.prov = labels.prov;
    return v;
}

void labelEveryNode(RVal& v, const Labels& labels) {
    v.tags = labels.tags;
    v.prov = labels.prov;
    for (RVal& item : v.items) labelEveryNode(item, labels);
    for (auto& [name, field] : v.fields) labelEveryNode(field, labels);
}

Tags unite(const Tags& a, const Tags& b) {
    Tags out = a;
    out.insert(b.begin(), b.end());
    return out;
}

json sortedTags(const Tags& tags) { return json(std::vector<std::string>(tags.begin(), tags.end())); }
json sortedProv(const Prov& prov) { return json(std::vector<uint64_t>(prov.begin(), prov.end())); }

// ---------------------------------------------------------------- values

RVal unitVal() { return RVal{}; }
RVal boolVal(bool b) {
    RVal v;
    v.kind = K::Bool;
    v.b = b;
    return v;
}
RVal intVal(int64_t i) {
    RVal v;
    v.kind = K::Int;
    v.i = i;
    return v;
}
RVal floatVal(double f) {
    RVal v;
    v.kind = K::Float;
    v.f = f;
    return v;
}
RVal strVal(std::string s) {
    RVal v;
    v.kind = K::Str;
    v.s = std::move(s);
    return v;
}
RVal listVal(std::vector<RVal> items) {
    RVal v;
    v.kind = K::List;
    v.items = std::move(items);
    return v;
}

bool isNumber(const RVal& v) { return v.kind == K::Int || v.kind == K::Float; }
double asDouble(const RVal& v) { return v.kind == K::Int ? static_cast<double>(v.i) : v.f; }

// Exact comparison of an Int with a finite Float (Python compares int and float exactly).
int compareIntFloat(int64_t i, double f) {
    constexpr double two63 = 9223372036854775808.0;
    if (f >= two63) return -1;
    if (f < -two63) return 1;
    double whole = std::trunc(f);
    auto w = static_cast<int64_t>(whole);
    if (i != w) return i < w ? -1 : 1;
    double frac = f - whole;
    return frac > 0 ? -1 : frac < 0 ? 1 : 0;
}

int compareNumbers(const RVal& a, const RVal& b) {
    if (a.kind == K::Int && b.kind == K::Int) return a.i < b.i ? -1 : a.i > b.i ? 1 : 0;
    if (a.kind == K::Float && b.kind == K::Float) return a.f < b.f ? -1 : a.f > b.f ? 1 : 0;
    if (a.kind == K::Int) return compareIntFloat(a.i, b.f);
    return -compareIntFloat(b.i, a.f);
}

// `==`: structural and deep; 1 == 1.0; records compare as maps.
bool equal(const RVal& a, const RVal& b) {
    if (isNumber(a) && isNumber(b)) return compareNumbers(a, b) == 0;
    if (a.kind != b.kind) return false;
    switch (a.kind) {
        case K::Unit: return true;
        case K::Bool: return a.b == b.b;
        case K::Str: return a.s == b.s;
        case K::List:
            if (a.items.size() != b.items.size()) return false;
            for (size_t i = 0; i < a.items.size(); ++i)
                if (!equal(a.items[i], b.items[i])) return false;
            return true;
        case K::Record:
            if (a.fields.size() != b.fields.size()) return false;
            for (const auto& [name, value] : a.fields) {
                auto it = std::find_if(b.fields.begin(), b.fields.end(), [&](const auto& f) { return f.first == name; });
                if (it == b.fields.end() || !equal(value, it->second)) return false;
            }
            return true;
        default: return false;
    }
}

nlohmann::ordered_json toOrderedJson(const RVal& v) {
    switch (v.kind) {
        case K::Unit: return nullptr;
        case K::Bool: return v.b;
        case K::Int: return v.i;
        case K::Float: return v.f;
        case K::Str: return v.s;
        case K::List: {
            nlohmann::ordered_json out = nlohmann::ordered_json::array();
            for (const RVal& item : v.items) out.push_back(toOrderedJson(item));
            return out;
        }
        case K::Record: {
            nlohmann::ordered_json out = nlohmann::ordered_json::object();
            for (const auto& [name, field] : v.fields) out[name] = toOrderedJson(field);
            return out;
        }
    }
    return nullptr;
}

json toJson(const RVal& v) { return json::parse(toOrderedJson(v).dump()); }

// str(x): Str as is, Unit "", true/false, Int in decimal, Float as Python's repr, containers as
// Python's json.dumps with ", " and ": ", non-ASCII kept, record fields in order.
std::string textOf(const RVal& v) {
    switch (v.kind) {
        case K::Unit: return "";
        case K::Bool: return v.b ? "true" : "false";
        case K::Int: return std::to_string(v.i);
        case K::Float: return formatFloatRepr(v.f);
        case K::Str: return v.s;
        default: return dumpJson(toOrderedJson(v), JsonTextStyle{false, false, -1, ", ", ": "});
    }
}

json labelledJson(const RVal& v) {
    json node = json::object();
    switch (v.kind) {
        case K::List: {
            json items = json::array();
            for (const RVal& item : v.items) items.push_back(labelledJson(item));
            node["l"] = items;
            break;
        }
        case K::Record: {
            json fields = json::array();
            for (const auto& [name, field] : v.fields) fields.push_back(json::array({name, labelledJson(field)}));
            node["r"] = fields;
            break;
        }
        default:
            node["v"] = toJson(v);
    }
    node["t"] = sortedTags(v.tags);
    node["p"] = sortedProv(v.prov);
    return node;
}

// JSON checked against a static type and converted (docs: value_json.h's rules, which the broker
// applies to capability results, model answers and inputs): Unit <- null; Bool <- a bool; Int <-
// an integer, or an integral float within the 64-bit range; Float <- any number; Str <- a string;
// an enum <- one of its options; List <- an array of at most `max` items; a record <- an object
// with exactly its fields. Every node gets `labels`.
std::optional<RVal> fromJson(const json& j, TypeRef type, const Labels& labels) {
    std::optional<RVal> out;
    switch (type->kind) {
        case TypeKind::Never: return std::nullopt;
        case TypeKind::Unit:
            if (j.is_null()) out = unitVal();
            break;
        case TypeKind::Bool:
            if (j.is_boolean()) out = boolVal(j.get<bool>());
            break;
        case TypeKind::Int:
            if (j.is_number_unsigned()) {
                if (j.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max())) out = intVal(j.get<int64_t>());
            } else if (j.is_number_integer()) {
                out = intVal(j.get<int64_t>());
            } else if (j.is_number_float()) {
                double f = j.get<double>();
                if (std::isfinite(f) && f == std::trunc(f) && f >= -9223372036854775808.0 && f < 9223372036854775808.0)
                    out = intVal(static_cast<int64_t>(f));
            }
            break;
        case TypeKind::Float:
            if (j.is_number_unsigned()) out = floatVal(static_cast<double>(j.get<uint64_t>()));
            else if (j.is_number_integer()) out = floatVal(static_cast<double>(j.get<int64_t>()));
            else if (j.is_number_float() && std::isfinite(j.get<double>())) out = floatVal(j.get<double>());
            break;
        case TypeKind::Str:
            if (j.is_string() &&
                (type->options.empty() ||
                 std::find(type->options.begin(), type->options.end(), j.get<std::string>()) != type->options.end()))
                out = strVal(j.get<std::string>());
            break;
        case TypeKind::Enum:
            if (j.is_string() && std::find(type->options.begin(), type->options.end(), j.get<std::string>()) !=
                                     type->options.end())
                out = strVal(j.get<std::string>());
            break;
        case TypeKind::List: {
            if (!j.is_array()) break;
            if (type->max && static_cast<int64_t>(j.size()) > *type->max) break;
            std::vector<RVal> items;
            for (const json& item : j) {
                std::optional<RVal> v = fromJson(item, type->elem, labels);
                if (!v) return std::nullopt;
                items.push_back(std::move(*v));
            }
            out = listVal(std::move(items));
            break;
        }
        case TypeKind::Record: {
            if (!j.is_object() || j.size() != type->fields.size()) break;
            RVal r;
            r.kind = K::Record;
            for (const RecordFieldType& f : type->fields) {
                auto it = j.find(f.name);
                if (it == j.end()) return std::nullopt;
                std::optional<RVal> v = fromJson(*it, f.type, labels);
                if (!v) return std::nullopt;
                r.fields.emplace_back(f.name, std::move(*v));
            }
            out = std::move(r);
            break;
        }
    }
    if (out) {
        out->tags = labels.tags;
        out->prov = labels.prov;
    }
    return out;
}

// ---------------------------------------------------------------- control flow

struct EvalError {
    std::string code;
    Span span;
    std::string message;
};
struct ReturnSignal {
    RVal value;
};
struct BreakSignal {};
struct OutOfFuel {};

// ---------------------------------------------------------------- arithmetic

bool finite(double f) { return std::isfinite(f); }

// a / b for Ints, correctly rounded as Python's int / int: the exact quotient rounded once to the
// nearest double, ties to even. (double(a) / double(b) rounds twice when |a| or |b| > 2^53.)
double divideInts(int64_t a, int64_t b) {
    bool negative = (a < 0) != (b < 0);
    using U = UInt128;
    U n = a < 0 ? static_cast<U>(-static_cast<Int128>(a)) : static_cast<U>(a);
    U d = b < 0 ? static_cast<U>(-static_cast<Int128>(b)) : static_cast<U>(b);
    if (n == 0) return negative ? -0.0 : 0.0;
    auto bitLength = [](U x) {
        int bits = 0;
        for (; x; x >>= 1) ++bits;
        return bits;
    };
    // Scale n by 2^s so the integer quotient has at least 55 bits (53, a guard and a round bit):
    // n * 2^s < 2^(55 + bits(d)) <= 2^119 fits. The remainder is the sticky bit.
    int s = std::max(0, 55 + bitLength(d) - bitLength(n));
    n <<= s;
    U q = n / d;
    bool sticky = n % d != 0;
    int drop = bitLength(q) - 53;  // >= 2
    U rest = q & ((U(1) << drop) - 1);
    U half = U(1) << (drop - 1);
    q >>= drop;
    if (rest > half || (rest == half && (sticky || (q & 1)))) ++q;
    double magnitude = std::ldexp(static_cast<double>(static_cast<uint64_t>(q)), drop - s);
    return negative ? -magnitude : magnitude;
}

// Python's float %: the result has the divisor's sign; a zero result is ±0.0 with its sign.
double floatMod(double a, double b) {
    double mod = std::fmod(a, b);
    if (mod != 0) {
        if ((b < 0) != (mod < 0)) mod += b;
    } else {
        mod = std::copysign(0.0, b);
    }
    return mod;
}

// ---------------------------------------------------------------- the evaluator

struct Slot {
    RVal value;
    bool isVar = false;
    std::optional<int64_t> maxItems;  // an annotated `List[T] max N` (R0113 when outgrown)
};

struct Frame {
    const ast::FnDecl* fn = nullptr;
    std::vector<std::map<std::string, Slot>> scopes;
    Tags guards;  // strict flows: guard tags added to the pc for the rest of the call
};

class Evaluator {
public:
    Evaluator(const ast::Program& program, const CheckResult& check, const HostModel& host, const Policy& policy,
              const ReferenceOptions& options)
        : program_(program), check_(check), host_(host), options_(options), fuel_(options.fuel),
          oracle_(host, policy, program.budgetUsd, options.strict) {
        for (const ast::DeclPtr& d : program.decls) {
            if (d->kind == ast::DeclKind::Fn) functions_[d->as<ast::FnDecl>().name] = &d->as<ast::FnDecl>();
            if (d->kind == ast::DeclKind::Agent) agents_[d->as<ast::AgentDecl>().name] = &d->as<ast::AgentDecl>();
        }
    }

    Outcome run(const json& inputs) {
        Outcome out;
        const ast::FnDecl* main = functions_.at("main");
        try {
            std::vector<RVal> args;
            for (const ast::Param& p : main->params) {
                // Every node of an input carries the host's `input` tags (untrusted by default).
                std::vector<std::string> tagNames = host_.inputTags(p.name);
                Labels labels{Tags(tagNames.begin(), tagNames.end()), {}};
                std::optional<RVal> v = fromJson(inputs.at(p.name), typeOf(p.type->id), labels);
                if (!v) throw EvalError{"input", Span{}, "input " + p.name + " does not fit its type"};
                args.push_back(std::move(*v));
            }
            RVal result = callFunction(*main, std::move(args), Tags{});
            out.status = Outcome::Status::Completed;
            out.value = labelledJson(result);
        } catch (const EvalError& e) {
            out.status = Outcome::Status::Failed;
            out.code = e.code;
            out.line = e.span.line;
            out.col = e.span.col;
            out.endLine = e.span.endLine;
            out.endCol = e.span.endCol;
            out.message = e.message;
        } catch (const OutOfFuel&) {
            out.status = Outcome::Status::Limit;
        }
        out.events = std::move(events_);
        return out;
    }

private:
    const ast::Program& program_;
    const CheckResult& check_;
    const HostModel& host_;
    ReferenceOptions options_;
    uint64_t fuel_;
    Oracle oracle_;
    std::vector<json> events_;
    std::map<std::string, const ast::FnDecl*> functions_;
    std::map<std::string, const ast::AgentDecl*> agents_;
    std::map<const ast::FnDecl*, std::map<const ast::Expr*, std::string>> sites_;
    std::map<const void*, bool> exitCache_;
    Frame* frame_ = nullptr;
    size_t depth_ = 0;

    void burn() {
        if (fuel_ == 0) throw OutOfFuel{};
        --fuel_;
    }

    TypeRef typeOf(ast::NodeId id) const {
        auto index = static_cast<size_t>(id);
        return index < check_.exprTypes.size() ? check_.exprTypes[index] : nullptr;
    }
    bool unitTyped(const ast::Expr& e) const {
        TypeRef t = typeOf(e.id);
        return t && t->kind == TypeKind::Unit;
    }

    [[noreturn]] void fail(const Span& span, std::string message, const char* code = "R0101") {
        throw EvalError{code, span, std::move(message)};
    }

    // The pc in force: the lexical one plus, in strict mode, the call's guard tags.
    Tags effectivePc(const Tags& pc) const { return options_.strict ? unite(pc, frame_->guards) : pc; }

    // ---- scopes

    Slot* lookup(const std::string& name) {
        for (auto it = frame_->scopes.rbegin(); it != frame_->scopes.rend(); ++it) {
            auto found = it->find(name);
            if (found != it->end()) return &found->second;
        }
        return nullptr;
    }
    struct ScopeGuard {
        Frame* frame;
        explicit ScopeGuard(Frame* f) : frame(f) { frame->scopes.emplace_back(); }
        ~ScopeGuard() { frame->scopes.pop_back(); }
    };

    // ---- call-site ids ("Call-site ids"): `fn#k`, k counted per function in a pre-order walk
    // where a call comes before the calls in its arguments, arguments before the `else`; an if is
    // condition, then, else; a for is the list, the body, then the filter; a match the subject,
    // then the arms.

    enum class Target { Function, Builtin, Capability, Model };
    Target targetOf(const ast::CallExpr& e) const {
        if (e.callee.size() == 2 && e.callee[1] == "ask" &&
            (host_.models.count(e.callee[0]) || agents_.count(e.callee[0])))
            return Target::Model;
        if (e.callee.size() >= 2) return Target::Capability;
        return functions_.count(e.callee[0]) ? Target::Function : Target::Builtin;
    }

    void numberBlock(const ast::Block& b, std::map<const ast::Expr*, std::string>& ids, const std::string& fn, int& k) {
        for (const ast::StmtPtr& s : b.stmts)
            if (s->value) numberExpr(*s->value, ids, fn, k);
    }
    void numberExpr(const ast::Expr& e, std::map<const ast::Expr*, std::string>& ids, const std::string& fn, int& k) {
        using EK = ast::ExprKind;
        switch (e.kind) {
            case EK::Call: {
                const auto& c = e.as<ast::CallExpr>();
                Target t = targetOf(c);
                if (t == Target::Capability || t == Target::Model) ids[&e] = fn + "#" + std::to_string(k++);
                for (const ast::CallArg& a : c.args) numberExpr(*a.value, ids, fn, k);
                if (c.fallback) numberExpr(*c.fallback, ids, fn, k);
                break;
            }
            case EK::If: {
                const auto& i = e.as<ast::IfExpr>();
                numberExpr(*i.cond, ids, fn, k);
                numberBlock(*i.thenBlock, ids, fn, k);
                if (i.elseBlock) numberBlock(*i.elseBlock, ids, fn, k);
                if (i.elseIf) numberExpr(*i.elseIf, ids, fn, k);
                break;
            }
            case EK::For: {
                const auto& f = e.as<ast::ForExpr>();
                numberExpr(*f.iter, ids, fn, k);
                numberBlock(*f.body, ids, fn, k);
                if (f.filter) numberExpr(*f.filter, ids, fn, k);
                break;
            }
            case EK::Match: {
                const auto& m = e.as<ast::MatchExpr>();
                numberExpr(*m.subject, ids, fn, k);
                for (const ast::MatchArm& arm : m.arms) numberBlock(*arm.body, ids, fn, k);
                break;
            }
            case EK::Interp:
                for (const ast::InterpPart& p : e.as<ast::InterpExpr>().parts)
                    if (p.expr) numberExpr(*p.expr, ids, fn, k);
                break;
            case EK::Field: numberExpr(*e.as<ast::FieldExpr>().object, ids, fn, k); break;
            case EK::Index:
                numberExpr(*e.as<ast::IndexExpr>().object, ids, fn, k);
                numberExpr(*e.as<ast::IndexExpr>().index, ids, fn, k);
                break;
            case EK::List:
                for (const ast::ExprPtr& item : e.as<ast::ListExpr>().items) numberExpr(*item, ids, fn, k);
                break;
            case EK::Record:
                for (const ast::RecordField& f : e.as<ast::RecordExpr>().fields) numberExpr(*f.value, ids, fn, k);
                break;
            case EK::Unary: numberExpr(*e.as<ast::UnaryExpr>().operand, ids, fn, k); break;
            case EK::Binary:
                numberExpr(*e.as<ast::BinaryExpr>().left, ids, fn, k);
                numberExpr(*e.as<ast::BinaryExpr>().right, ids, fn, k);
                break;
            default: break;
        }
    }
    const std::string& siteOf(const ast::CallExpr& e) {
        auto it = sites_.find(frame_->fn);
        if (it == sites_.end()) {
            std::map<const ast::Expr*, std::string> ids;
            int k = 0;
            numberBlock(*frame_->fn->body, ids, frame_->fn->name, k);
            it = sites_.emplace(frame_->fn, std::move(ids)).first;
        }
        return it->second.at(&e);
    }

    // ---- strict flows: which constructs guard an exit ("Strict flows", rule 3)

    // Does `b` contain a `return` (anywhere), or a `break` that leaves the loop around it (one not
    // inside a nested `for` body or filter)?
    bool blockHas(const ast::Block& b, bool returns) {
        for (const ast::StmtPtr& s : b.stmts) {
            if (returns && s->kind == ast::StmtKind::Return) return true;
            if (!returns && s->kind == ast::StmtKind::Break) return true;
            if (s->value && exprHas(*s->value, returns)) return true;
        }
        return false;
    }
    bool exprHas(const ast::Expr& e, bool returns) {
        using EK = ast::ExprKind;
        switch (e.kind) {
            case EK::If: {
                const auto& i = e.as<ast::IfExpr>();
                return exprHas(*i.cond, returns) || blockHas(*i.thenBlock, returns) ||
                       (i.elseBlock && blockHas(*i.elseBlock, returns)) || (i.elseIf && exprHas(*i.elseIf, returns));
            }
            case EK::Match: {
                const auto& m = e.as<ast::MatchExpr>();
                if (exprHas(*m.subject, returns)) return true;
                for (const ast::MatchArm& arm : m.arms)
                    if (blockHas(*arm.body, returns)) return true;
                return false;
            }
            case EK::For: {
                const auto& f = e.as<ast::ForExpr>();
                if (exprHas(*f.iter, returns)) return true;
                // A break inside a nested loop leaves that loop; a return leaves the function.
                if (!returns) return false;
                return blockHas(*f.body, true) || (f.filter && exprHas(*f.filter, true));
            }
            case EK::Call: {
                const auto& c = e.as<ast::CallExpr>();
                for (const ast::CallArg& a : c.args)
                    if (exprHas(*a.value, returns)) return true;
                return c.fallback && exprHas(*c.fallback, returns);
            }
            case EK::Binary:
                return exprHas(*e.as<ast::BinaryExpr>().left, returns) || exprHas(*e.as<ast::BinaryExpr>().right, returns);
            case EK::Unary: return exprHas(*e.as<ast::UnaryExpr>().operand, returns);
            case EK::Field: return exprHas(*e.as<ast::FieldExpr>().object, returns);
            case EK::Index:
                return exprHas(*e.as<ast::IndexExpr>().object, returns) || exprHas(*e.as<ast::IndexExpr>().index, returns);
            case EK::List:
                for (const ast::ExprPtr& item : e.as<ast::ListExpr>().items)
                    if (exprHas(*item, returns)) return true;
                return false;
            case EK::Record:
                for (const ast::RecordField& f : e.as<ast::RecordExpr>().fields)
                    if (exprHas(*f.value, returns)) return true;
                return false;
            case EK::Interp:
                for (const ast::InterpPart& p : e.as<ast::InterpExpr>().parts)
                    if (p.expr && exprHas(*p.expr, returns)) return true;
                return false;
            default: return false;
        }
    }
    bool hasExit(const void* node, const std::function<bool()>& compute) {
        auto it = exitCache_.find(node);
        if (it != exitCache_.end()) return it->second;
        bool v = compute();
        exitCache_[node] = v;
        return v;
    }
    // An if or match guards an exit when one of its branches contains one.
    bool ifGuards(const ast::IfExpr& e) {
        return hasExit(&e, [&] {
            auto branches = [&](bool returns) {
                return blockHas(*e.thenBlock, returns) || (e.elseBlock && blockHas(*e.elseBlock, returns)) ||
                       (e.elseIf && exprHas(*e.elseIf, returns));
            };
            return branches(true) || branches(false);
        });
    }
    bool matchGuards(const ast::MatchExpr& e) {
        return hasExit(&e, [&] {
            for (const ast::MatchArm& arm : e.arms)
                if (blockHas(*arm.body, true) || blockHas(*arm.body, false)) return true;
            return false;
        });
    }
    // A for's filter guards the exits of its body (a return, or a break of this loop); its list
    // guards the returns in its body.
    bool filterGuards(const ast::ForExpr& e) {
        return hasExit(&e.filter, [&] { return blockHas(*e.body, true) || blockHas(*e.body, false); });
    }
    bool listGuards(const ast::ForExpr& e) {
        return hasExit(&e.body, [&] { return blockHas(*e.body, true); });
    }
    // Guard tags last until the function returns. Adding them when the guard is evaluated rather
    // than when its construct finishes is the same: the code in between (the branches, the body)
    // has them in its pc anyway, as do a taken return (its pc) and a taken break (rule 3).
    void guard(const RVal& v) {
        if (options_.strict) frame_->guards.insert(v.tags.begin(), v.tags.end());
    }

    // ---- statements and blocks

    RVal execBlock(const ast::Block& b, const Tags& pc) {
        burn();
        ScopeGuard scope(frame_);
        RVal value;
        for (size_t i = 0; i < b.stmts.size(); ++i) {
            const ast::Stmt& s = *b.stmts[i];
            bool last = i + 1 == b.stmts.size();
            burn();
            switch (s.kind) {
                case ast::StmtKind::Let: {
                    RVal v = eval(*s.value, pc);
                    Slot slot;
                    slot.isVar = s.isVar;
                    // `var x = e`: the pc's tags are added to the value's own.
                    if (s.isVar) v = withLabels(std::move(v), Labels{effectivePc(pc), {}});
                    if (s.type) {
                        TypeRef t = typeOf(s.type->id);
                        if (t && t->kind == TypeKind::List && t->max) slot.maxItems = t->max;
                    }
                    checkBound(slot, v, s);
                    slot.value = std::move(v);
                    frame_->scopes.back()[s.name] = std::move(slot);
                    value = unitVal();
                    break;
                }
                case ast::StmtKind::Assign: {
                    RVal v = eval(*s.value, pc);
                    v = withLabels(std::move(v), Labels{effectivePc(pc), {}});
                    Slot* slot = lookup(s.name);
                    if (!slot) fail(s.span, "assignment to an unknown variable", "internal");
                    checkBound(*slot, v, s);
                    slot->value = std::move(v);
                    value = unitVal();
                    break;
                }
                case ast::StmtKind::Return: {
                    RVal v = s.value ? eval(*s.value, pc) : unitVal();
                    // `return e` adds the pc's tags to top(e).
                    throw ReturnSignal{withLabels(std::move(v), Labels{effectivePc(pc), {}})};
                }
                case ast::StmtKind::Break:
                    // Strict: a taken break adds the pc at the break to the rest of the function.
                    if (options_.strict) {
                        Tags here = effectivePc(pc);
                        frame_->guards.insert(here.begin(), here.end());
                    }
                    throw BreakSignal{};
                case ast::StmtKind::Expr: {
                    RVal v = eval(*s.value, pc);
                    value = last ? std::move(v) : unitVal();
                    break;
                }
                case ast::StmtKind::Expect:
                    fail(s.span, "expect outside a test", "internal");
            }
        }
        return value;
    }

    // R0113: a list stored in a variable annotated `List[T] max N` has more than N items. The
    // docs do not say where it is reported; what fails is the store, so at the `let`, `var` or
    // assignment statement (as the VM does).
    void checkBound(const Slot& slot, const RVal& v, const ast::Stmt& s) {
        if (slot.maxItems && v.kind == K::List && static_cast<int64_t>(v.items.size()) > *slot.maxItems)
            fail(s.span, "list outgrows its annotation", "R0113");
    }

    RVal callFunction(const ast::FnDecl& fn, std::vector<RVal> args, const Tags& basePc) {
        if (++depth_ > 200) fail(fn.nameSpan, "call depth", "internal");
        Frame frame;
        frame.fn = &fn;
        frame.scopes.emplace_back();
        for (size_t i = 0; i < fn.params.size(); ++i) frame.scopes.back()[fn.params[i].name] = Slot{std::move(args[i]), false, {}};
        Frame* saved = frame_;
        frame_ = &frame;
        RVal result;
        try {
            // A called function starts with its caller's pc.
            result = execBlock(*fn.body, basePc);
        } catch (ReturnSignal& r) {
            result = std::move(r.value);
        } catch (...) {
            frame_ = saved;
            --depth_;
            throw;
        }
        frame_ = saved;
        --depth_;
        // A function without a result type returns Unit, whatever its last statement computed.
        // The docs say that `return e` adds the pc's tags to e; for a bare `return`, and for
        // falling off the end, they say nothing, and the VM and the checker give Unit no labels
        // (a Unit is the same value on every path). docs/testing.md lists this reading.
        if (!fn.ret || (typeOf(fn.ret->id) && typeOf(fn.ret->id)->kind == TypeKind::Unit)) result = unitVal();
        return result;
    }

    // ---- expressions

    RVal eval(const ast::Expr& e, const Tags& pc) {
        burn();
        using EK = ast::ExprKind;
        switch (e.kind) {
            case EK::Int: return intVal(e.as<ast::IntLit>().value);
            case EK::Float: return floatVal(e.as<ast::FloatLit>().value);
            case EK::Bool: return boolVal(e.as<ast::BoolLit>().value);
            case EK::Str: return strVal(e.as<ast::StrLit>().value);
            case EK::Interp: {
                // The union of the parts' deep labels.
                std::string text;
                Labels labels;
                for (const ast::InterpPart& p : e.as<ast::InterpExpr>().parts) {
                    if (!p.expr) {
                        text += p.text;
                        continue;
                    }
                    RVal v = eval(*p.expr, pc);
                    text += textOf(v);
                    addDeep(labels, v);
                }
                return replaceLabels(strVal(std::move(text)), labels);
            }
            case EK::Name: {
                Slot* slot = lookup(e.as<ast::NameExpr>().name);
                if (!slot) fail(e.span, "unknown name", "internal");
                return slot->value;
            }
            case EK::Field: {
                const auto& f = e.as<ast::FieldExpr>();
                RVal r = eval(*f.object, pc);
                if (r.kind != K::Record) fail(e.span, "field of a non-record", "internal");
                auto it = std::find_if(r.fields.begin(), r.fields.end(), [&](const auto& x) { return x.first == f.name; });
                if (it == r.fields.end()) fail(e.span, "no field " + f.name);
                // The element, with top(r) added.
                return withLabels(it->second, top(r));
            }
            case EK::Index: {
                const auto& ix = e.as<ast::IndexExpr>();
                RVal xs = eval(*ix.object, pc);
                RVal i = eval(*ix.index, pc);
                if (xs.kind != K::List || i.kind != K::Int) fail(e.span, "bad index operands", "internal");
                auto n = static_cast<int64_t>(xs.items.size());
                int64_t at = i.i < 0 ? i.i + n : i.i;
                if (i.i < -n || i.i >= n) fail(e.span, "index out of range");
                Labels labels = top(xs);
                labels.add(top(i));
                return withLabels(xs.items[static_cast<size_t>(at)], labels);
            }
            case EK::List: {
                std::vector<RVal> items;
                for (const ast::ExprPtr& item : e.as<ast::ListExpr>().items) items.push_back(eval(*item, pc));
                return listVal(std::move(items));
            }
            case EK::Record: {
                RVal r;
                r.kind = K::Record;
                for (const ast::RecordField& f : e.as<ast::RecordExpr>().fields) r.fields.emplace_back(f.name, eval(*f.value, pc));
                return r;
            }
            case EK::Unary: return unary(e.as<ast::UnaryExpr>(), pc);
            case EK::Binary: return binary(e.as<ast::BinaryExpr>(), pc);
            case EK::Call: return call(e.as<ast::CallExpr>(), pc);
            case EK::If: return ifExpr(e.as<ast::IfExpr>(), pc);
            case EK::For: return forExpr(e.as<ast::ForExpr>(), pc);
            case EK::Match: return matchExpr(e.as<ast::MatchExpr>(), pc);
        }
        fail(e.span, "unknown expression", "internal");
    }

    RVal unary(const ast::UnaryExpr& e, const Tags& pc) {
        RVal a = eval(*e.operand, pc);
        Labels labels = top(a);
        if (e.op == ast::UnaryOp::Not) {
            if (a.kind != K::Bool) fail(e.span, "not of a non-Bool", "internal");
            return replaceLabels(boolVal(!a.b), labels);
        }
        if (a.kind == K::Int) {
            if (a.i == std::numeric_limits<int64_t>::min()) fail(e.span, "integer overflow in negation");
            return replaceLabels(intVal(-a.i), labels);
        }
        if (a.kind == K::Float) return replaceLabels(floatVal(-a.f), labels);
        fail(e.span, "negation of a non-number", "internal");
    }

    RVal binary(const ast::BinaryExpr& e, const Tags& pc) {
        using Op = ast::BinaryOp;
        if (e.op == Op::And || e.op == Op::Or) {
            RVal a = eval(*e.left, pc);
            if (a.kind != K::Bool) fail(e.span, "and/or of a non-Bool", "internal");
            // `a` itself when it decides (false for and, true for or).
            if (e.op == Op::And ? !a.b : a.b) return a;
            // Strict: the right side runs under the pc plus top(a).
            RVal b = eval(*e.right, options_.strict ? unite(pc, a.tags) : pc);
            if (b.kind != K::Bool) fail(e.span, "and/or of a non-Bool", "internal");
            Labels labels = top(a);
            labels.add(top(b));
            return replaceLabels(boolVal(b.b), labels);
        }
        RVal a = eval(*e.left, pc);
        RVal b = eval(*e.right, pc);
        Labels tops = top(a);
        tops.add(top(b));
        switch (e.op) {
            case Op::Eq:
            case Op::Ne:
            case Op::In: {
                Labels labels = deep(a);
                labels.add(deep(b));
                bool result;
                if (e.op == Op::In) {
                    if (b.kind == K::Str && a.kind == K::Str) result = b.s.find(a.s) != std::string::npos;
                    else if (b.kind == K::List)
                        result = std::any_of(b.items.begin(), b.items.end(), [&](const RVal& x) { return equal(a, x); });
                    else fail(e.span, "bad in", "internal");
                } else {
                    result = equal(a, b) == (e.op == Op::Eq);
                }
                return replaceLabels(boolVal(result), labels);
            }
            case Op::Lt:
            case Op::Le:
            case Op::Gt:
            case Op::Ge: {
                int order;
                if (isNumber(a) && isNumber(b)) order = compareNumbers(a, b);
                else if (a.kind == K::Str && b.kind == K::Str) order = a.s < b.s ? -1 : a.s > b.s ? 1 : 0;  // code points = UTF-8 bytes
                else fail(e.span, "bad comparison", "internal");
                bool result = e.op == Op::Lt ? order < 0 : e.op == Op::Le ? order <= 0 : e.op == Op::Gt ? order > 0 : order >= 0;
                return replaceLabels(boolVal(result), tops);
            }
            case Op::Add:
                if (a.kind == K::Str && b.kind == K::Str) return replaceLabels(strVal(a.s + b.s), tops);
                if (a.kind == K::List && b.kind == K::List) {
                    std::vector<RVal> items = a.items;
                    items.insert(items.end(), b.items.begin(), b.items.end());
                    return replaceLabels(listVal(std::move(items)), tops);
                }
                [[fallthrough]];
            case Op::Sub:
            case Op::Mul:
            case Op::Div:
            case Op::Mod: return replaceLabels(arithmetic(e, a, b), tops);
            default: break;
        }
        fail(e.span, "unknown operator", "internal");
    }

    RVal arithmetic(const ast::BinaryExpr& e, const RVal& a, const RVal& b) {
        using Op = ast::BinaryOp;
        if (!isNumber(a) || !isNumber(b)) fail(e.span, "arithmetic on non-numbers", "internal");
        if (e.op == Op::Div) {
            // Always Float; division by zero (Int or Float) is R0101.
            if ((b.kind == K::Int && b.i == 0) || (b.kind == K::Float && b.f == 0)) fail(e.span, "division by zero");
            double r = a.kind == K::Int && b.kind == K::Int ? divideInts(a.i, b.i) : asDouble(a) / asDouble(b);
            if (!finite(r)) fail(e.span, "float overflow");
            return floatVal(r);
        }
        if (a.kind == K::Int && b.kind == K::Int) {
            int64_t r = 0;
            switch (e.op) {
                case Op::Add:
                    if (__builtin_add_overflow(a.i, b.i, &r)) fail(e.span, "integer overflow");
                    return intVal(r);
                case Op::Sub:
                    if (__builtin_sub_overflow(a.i, b.i, &r)) fail(e.span, "integer overflow");
                    return intVal(r);
                case Op::Mul:
                    if (__builtin_mul_overflow(a.i, b.i, &r)) fail(e.span, "integer overflow");
                    return intVal(r);
                case Op::Mod: {
                    if (b.i == 0) fail(e.span, "modulo by zero");
                    if (b.i == -1) return intVal(0);  // also INT64_MIN % -1, which C++ leaves undefined
                    int64_t m = a.i % b.i;
                    if (m != 0 && ((m < 0) != (b.i < 0))) m += b.i;  // floored: the divisor's sign
                    return intVal(m);
                }
                default: break;
            }
        }
        double x = asDouble(a), y = asDouble(b), r = 0;
        switch (e.op) {
            case Op::Add: r = x + y; break;
            case Op::Sub: r = x - y; break;
            case Op::Mul: r = x * y; break;
            case Op::Mod:
                if (y == 0) fail(e.span, "modulo by zero");
                r = floatMod(x, y);
                break;
            default: fail(e.span, "unknown operator", "internal");
        }
        if (!finite(r)) fail(e.span, "float overflow");
        return floatVal(r);
    }

    RVal ifExpr(const ast::IfExpr& e, const Tags& pc) {
        RVal c = eval(*e.cond, pc);
        if (c.kind != K::Bool) fail(e.span, "if on a non-Bool", "internal");
        if (ifGuards(e)) guard(c);
        Tags branchPc = unite(pc, c.tags);  // inside a branch the pc gains top(c)
        RVal v;
        if (c.b) v = execBlock(*e.thenBlock, branchPc);
        else if (e.elseBlock) v = execBlock(*e.elseBlock, branchPc);
        else if (e.elseIf) v = eval(*e.elseIf, branchPc);
        // Decision 50: a Unit-typed if has the value Unit; with top(c) added, a Unit one too.
        if (unitTyped(e) || (!c.b && !e.elseBlock && !e.elseIf)) v = unitVal();
        return withLabels(std::move(v), top(c));
    }

    RVal matchExpr(const ast::MatchExpr& e, const Tags& pc) {
        RVal s = eval(*e.subject, pc);
        if (s.kind != K::Str) fail(e.span, "match on a non-Str", "internal");
        if (matchGuards(e)) guard(s);
        Tags armPc = unite(pc, s.tags);
        RVal v;
        for (const ast::MatchArm& arm : e.arms) {
            // The first arm equal to the subject; `_` matches whatever reaches it.
            if (arm.pattern && *arm.pattern != s.s) continue;
            v = execBlock(*arm.body, armPc);
            break;
        }
        if (unitTyped(e)) v = unitVal();
        return withLabels(std::move(v), top(s));
    }

    RVal forExpr(const ast::ForExpr& e, const Tags& pc) {
        RVal xs = eval(*e.iter, pc);
        if (xs.kind != K::List) fail(e.span, "for over a non-list", "internal");
        if (listGuards(e)) guard(xs);
        bool filterIsGuard = e.filter && filterGuards(e);
        Tags loopPc = unite(pc, xs.tags);  // the body's pc gains top(xs)
        std::vector<RVal> items = xs.items;
        if (e.limit && static_cast<int64_t>(items.size()) > *e.limit) items.resize(static_cast<size_t>(*e.limit));  // before the filter
        std::vector<RVal> out;
        Labels filterLabels;
        for (const RVal& item : items) {
            burn();
            ScopeGuard scope(frame_);
            frame_->scopes.back()[e.var] = Slot{withLabels(item, top(xs)), false, {}};  // the element with top(xs)
            Tags bodyPc = loopPc;
            if (e.filter) {
                RVal f = eval(*e.filter, loopPc);
                if (f.kind != K::Bool) fail(e.span, "filter is not a Bool", "internal");
                filterLabels.add(top(f));
                if (filterIsGuard) guard(f);
                bodyPc = unite(loopPc, f.tags);  // past the filter, its top
                if (!f.b) continue;
            }
            try {
                out.push_back(execBlock(*e.body, bodyPc));
            } catch (const BreakSignal&) {
                break;  // keeps what was collected
            }
        }
        RVal list = replaceLabels(listVal(std::move(out)), top(xs));
        if (options_.strict) {
            // Rule 4: the list also carries its filter's labels and the pc when the loop ends.
            // The docs say "the tags of every evaluation of its filter"; the VM adds the filter's
            // provenance too, like an if's value gets its condition's (docs/testing.md lists this
            // as a reading of ours).
            list = withLabels(std::move(list), filterLabels);
            Tags end = effectivePc(pc);
            list.tags.insert(end.begin(), end.end());
        }
        return list;
    }

    // ---- calls

    std::vector<std::pair<const ast::CallArg*, RVal>> evalArgs(const ast::CallExpr& e, const Tags& pc) {
        std::vector<std::pair<const ast::CallArg*, RVal>> out;
        for (const ast::CallArg& a : e.args) out.emplace_back(&a, eval(*a.value, pc));  // left to right, as written
        return out;
    }

    // Binds evaluated arguments to parameter names: positional ones by position, then named ones.
    std::vector<RVal> bind(const ast::CallExpr& e, std::vector<std::pair<const ast::CallArg*, RVal>> args,
                           const std::vector<std::string>& names) {
        std::vector<std::optional<RVal>> bound(names.size());
        size_t position = 0;
        for (auto& [arg, value] : args) {
            size_t index;
            if (arg->name) {
                index = static_cast<size_t>(std::find(names.begin(), names.end(), *arg->name) - names.begin());
            } else {
                index = position++;
            }
            if (index >= names.size()) fail(e.span, "bad argument", "internal");
            bound[index] = std::move(value);
        }
        std::vector<RVal> out;
        for (auto& b : bound) {
            if (!b) fail(e.span, "missing argument", "internal");
            out.push_back(std::move(*b));
        }
        return out;
    }

    RVal call(const ast::CallExpr& e, const Tags& pc) {
        Target target = targetOf(e);
        if (target == Target::Capability || target == Target::Model) return hostCall(e, target, pc);
        auto args = evalArgs(e, pc);
        if (target == Target::Function) {
            const ast::FnDecl& fn = *functions_.at(e.callee[0]);
            std::vector<std::string> names;
            for (const ast::Param& p : fn.params) names.push_back(p.name);
            std::vector<RVal> bound = bind(e, std::move(args), names);
            return callFunction(fn, std::move(bound), effectivePc(pc));
        }
        std::vector<RVal> values;
        for (auto& [arg, v] : args) values.push_back(std::move(v));
        return builtin(e, e.callee[0], std::move(values));
    }

    // ---- builtins ("Builtins" for behaviour, the table for labels)

    RVal builtin(const ast::CallExpr& e, const std::string& name, std::vector<RVal> a) {
        auto tops = [&] {
            Labels l;
            for (const RVal& v : a) l.add(top(v));
            return l;
        };
        auto needs = [&](size_t n) {
            if (a.size() != n) fail(e.span, name + ": wrong arity", "internal");
        };
        if (name == "len") {
            needs(1);
            if (a[0].kind == K::Str) return replaceLabels(intVal(static_cast<int64_t>(codePointCount(a[0].s))), tops());
            return replaceLabels(intVal(static_cast<int64_t>(a[0].items.size())), tops());
        }
        if (name == "take") {
            needs(2);
            // A negative N takes nothing (decision 39); the elements keep their labels.
            size_t n = a[1].i <= 0 ? 0 : std::min<size_t>(static_cast<size_t>(a[1].i), a[0].items.size());
            std::vector<RVal> items(a[0].items.begin(), a[0].items.begin() + static_cast<long>(n));
            return replaceLabels(listVal(std::move(items)), tops());
        }
        if (name == "range") {
            needs(1);
            std::vector<RVal> items;
            for (int64_t i = 0; i < a[0].i; ++i) {
                burn();
                items.push_back(intVal(i));
            }
            return replaceLabels(listVal(std::move(items)), tops());
        }
        if (name == "str") {
            needs(1);
            return replaceLabels(strVal(textOf(a[0])), deep(a[0]));
        }
        if (name == "lower" || name == "upper" || name == "trim") {
            needs(1);
            std::string s = name == "lower" ? pytext::lower(a[0].s) : name == "upper" ? pytext::upper(a[0].s)
                                                                                      : std::string(pytext::strip(a[0].s));
            return replaceLabels(strVal(std::move(s)), tops());
        }
        if (name == "startswith" || name == "endswith") {
            needs(2);
            bool r = name == "startswith" ? a[0].s.starts_with(a[1].s) : a[0].s.ends_with(a[1].s);
            return replaceLabels(boolVal(r), tops());
        }
        if (name == "contains") {
            needs(2);
            if (a[0].kind == K::Str) return replaceLabels(boolVal(a[0].s.find(a[1].s) != std::string::npos), tops());
            // On a list: deep(xs) ∪ deep(x), as `x in xs`.
            bool found = std::any_of(a[0].items.begin(), a[0].items.end(), [&](const RVal& x) { return equal(x, a[1]); });
            Labels l = deep(a[0]);
            l.add(deep(a[1]));
            return replaceLabels(boolVal(found), l);
        }
        if (name == "replace") {
            needs(3);
            const std::string &s = a[0].s, &old = a[1].s, &rep = a[2].s;
            std::string out;
            if (old.empty()) {
                // Python: the replacement before every code point and once at the end.
                for (size_t at = 0; at < s.size();) {
                    size_t n = std::max<size_t>(1, utf8SequenceLength(s, at));
                    out += rep;
                    out += s.substr(at, n);
                    at += n;
                }
                out += rep;
            } else {
                size_t from = 0;
                for (size_t hit = s.find(old); hit != std::string::npos; hit = s.find(old, from)) {
                    out += s.substr(from, hit - from) + rep;
                    from = hit + old.size();
                }
                out += s.substr(from);
            }
            return replaceLabels(strVal(std::move(out)), tops());
        }
        if (name == "split") {
            needs(2);
            if (a[1].s.empty()) fail(e.span, "empty separator");
            // Every piece and the list carry top(s) ∪ top(sep).
            Labels l = tops();
            std::vector<RVal> pieces;
            const std::string &s = a[0].s, &sep = a[1].s;
            size_t from = 0;
            while (true) {
                size_t hit = s.find(sep, from);
                pieces.push_back(replaceLabels(strVal(s.substr(from, hit == std::string::npos ? std::string::npos : hit - from)), l));
                if (hit == std::string::npos) break;
                from = hit + sep.size();
            }
            return replaceLabels(listVal(std::move(pieces)), l);
        }
        if (name == "join") {
            needs(2);
            std::string out;
            for (size_t i = 0; i < a[0].items.size(); ++i) {
                if (i) out += a[1].s;
                out += textOf(a[0].items[i]);
            }
            Labels l = deep(a[0]);
            l.add(top(a[1]));
            return replaceLabels(strVal(std::move(out)), l);
        }
        if (name == "sum") {
            needs(1);
            // Python 3.11: in Int while the items are Ints (64-bit, overflow R0101), then in Float
            // from the first Float on, adding each item converted, left to right.
            int64_t is = 0;
            double fs = 0;
            bool isFloat = false;
            for (const RVal& x : a[0].items) {
                if (x.kind == K::Int && !isFloat) {
                    if (__builtin_add_overflow(is, x.i, &is)) fail(e.span, "integer overflow in sum");
                    continue;
                }
                if (!isFloat) fs = static_cast<double>(is);
                isFloat = true;
                fs += asDouble(x);
                if (!finite(fs)) fail(e.span, "float overflow in sum");
            }
            return replaceLabels(isFloat ? floatVal(fs) : intVal(is), deep(a[0]));
        }
        if ((name == "min" || name == "max") && a.size() == 2) {
            // Python's min/max of two: the first unless the second is strictly smaller (larger).
            int order = compareNumbers(a[1], a[0]);
            bool second = name == "min" ? order < 0 : order > 0;
            return replaceLabels(a[second ? 1 : 0], tops());
        }
        if (name == "min" || name == "max") {
            needs(1);
            if (a[0].items.empty()) fail(e.span, "min/max of an empty list");
            const RVal* best = &a[0].items[0];
            for (const RVal& x : a[0].items) {
                int order = compareNumbers(x, *best);
                if (name == "min" ? order < 0 : order > 0) best = &x;
            }
            return replaceLabels(*best, deep(a[0]));
        }
        if (name == "abs") {
            needs(1);
            if (a[0].kind == K::Int) {
                if (a[0].i == std::numeric_limits<int64_t>::min()) fail(e.span, "integer overflow in abs");
                return replaceLabels(intVal(a[0].i < 0 ? -a[0].i : a[0].i), tops());
            }
            return replaceLabels(floatVal(std::fabs(a[0].f)), tops());
        }
        if (name == "round" && a.size() == 1) {
            if (a[0].kind == K::Int) return replaceLabels(a[0], tops());
            std::optional<int64_t> r = integral(pytext::roundHalfEven(a[0].f));
            if (!r) fail(e.span, "integer overflow in round");
            return replaceLabels(intVal(*r), tops());
        }
        if (name == "round") {
            needs(2);
            // Python keeps an Int an Int.
            if (a[0].kind == K::Int) {
                std::optional<int64_t> r = pytext::roundIntTo(a[0].i, a[1].i);
                if (!r) fail(e.span, "integer overflow in round");
                return replaceLabels(intVal(*r), tops());
            }
            double r = pytext::roundFloatTo(a[0].f, a[1].i);
            if (!finite(r)) fail(e.span, "float overflow in round");
            return replaceLabels(floatVal(r), tops());
        }
        if (name == "int") {
            needs(1);
            if (a[0].kind == K::Int) return replaceLabels(a[0], tops());
            if (a[0].kind == K::Float) {
                std::optional<int64_t> r = integral(std::trunc(a[0].f));  // toward zero
                if (!r) fail(e.span, "integer overflow in int");
                return replaceLabels(intVal(*r), tops());
            }
            int64_t v = 0;
            if (pytext::parseInt(a[0].s, v) != pytext::NumberParse::Ok) fail(e.span, "bad int()");
            return replaceLabels(intVal(v), tops());
        }
        if (name == "float") {
            needs(1);
            if (a[0].kind == K::Int) return replaceLabels(floatVal(static_cast<double>(a[0].i)), tops());
            if (a[0].kind == K::Float) return replaceLabels(a[0], tops());
            double v = 0;
            if (pytext::parseFloat(a[0].s, v) != pytext::NumberParse::Ok) fail(e.span, "bad float()");
            return replaceLabels(floatVal(v), tops());
        }
        if (name == "first") {
            needs(1);
            if (a[0].items.empty()) fail(e.span, "first of an empty list");
            return withLabels(a[0].items[0], top(a[0]));
        }
        if (name == "unique") {
            needs(1);
            // The kept elements with their labels; the list carries deep(xs).
            std::vector<RVal> kept;
            for (const RVal& x : a[0].items)
                if (std::none_of(kept.begin(), kept.end(), [&](const RVal& k) { return equal(k, x); })) kept.push_back(x);
            return replaceLabels(listVal(std::move(kept)), deep(a[0]));
        }
        fail(e.span, "unknown builtin " + name, "internal");
    }

    static std::optional<int64_t> integral(double d) {
        if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) return std::nullopt;
        return static_cast<int64_t>(d);
    }

    // ---- host calls (spec §8, docs/broker.md): every attempt is decided by the oracle, answered
    // by the world, recorded as the trace's events, and its result labelled on every node.

    RVal hostCall(const ast::CallExpr& e, Target target, const Tags& pc) {
        OracleCall oc;
        oc.site = siteOf(e);
        TypeRef resultType = nullptr;
        const Capability* cap = nullptr;
        std::vector<RVal> args;
        if (target == Target::Capability) {
            oc.resource = e.calleeName();
            cap = &host_.capabilities.at(oc.resource);
            for (const CapabilityParam& p : cap->params) oc.argNames.push_back(p.name);
            args = bind(e, evalArgs(e, pc), oc.argNames);
            resultType = cap->ret;
        } else {
            oc.isModel = true;
            const std::string& callee = e.callee[0];
            if (auto agent = agents_.find(callee); agent != agents_.end()) {
                oc.agent = callee;
                oc.agentMaxCalls = agent->second->maxCalls;
                oc.resource = agent->second->model;
            } else {
                oc.resource = callee;
            }
            // The prompt, then `context:` (Unit when left out).
            oc.argNames = {"prompt", "context"};
            auto evaluated = evalArgs(e, pc);
            std::vector<std::optional<RVal>> slots(2);
            for (auto& [arg, v] : evaluated) slots[arg->name ? 1 : 0] = std::move(v);
            args = {slots[0] ? *slots[0] : unitVal(), slots[1] ? *slots[1] : unitVal()};
            auto resolved = check_.calls.find(static_cast<uint32_t>(e.id));
            if (resolved == check_.calls.end() || !resolved->second.askType) fail(e.span, "no ask type", "internal");
            resultType = resolved->second.askType;
        }
        Labels all;
        for (const RVal& a : args) {
            oc.args.push_back(toJson(a));
            Labels d = deep(a);
            oc.argTags.push_back(d.tags);
            all.add(d);
        }
        oc.pc = effectivePc(pc);
        int64_t retry = e.retry.value_or(0);
        std::string lastCode;
        for (int64_t attempt = 0; attempt <= retry; ++attempt) {
            oc.attempt = static_cast<uint32_t>(attempt);
            OracleDecision d = oracle_.decide(oc);
            if (d.violation)
                events_.push_back(json{{"event", "violation"}, {"resource", oc.resource}, {"site", oc.site},
                                       {"param", d.violation->param}, {"tags", d.violation->tags},
                                       {"via", d.violation->viaControl ? json("control") : json(nullptr)}});
            // A needed approval is granted (approveAll) before the budget is reserved, so a budget
            // refusal comes after its approval_granted.
            if (!d.reasons.empty())
                events_.push_back(json{{"event", "approval_granted"}, {"resource", oc.resource}, {"site", oc.site}});
            if (d.refused) fail(e.span, "refused by the broker", d.refused->c_str());
            WorldReply reply = worldAnswer(options_.worldSeed, oc.resource, oc.isModel, argsObject(oc), oc.attempt,
                                           resultType, d.reserve);
            uint64_t seq = oracle_.dispatched(oc, d.reserve, reply.costUsd);
            json event = callEvent(oc, all, d.reasons);
            // Result tags: (declared ∪ deep args ∪ pc) − clears for a capability; a model's are the
            // deep tags of its prompt and context and the pc. Provenance: deep args ∪ {seq}.
            Labels resultLabels{unite(all.tags, oc.pc), all.prov};
            resultLabels.prov.insert(seq);
            if (cap) {
                resultLabels.tags.insert(cap->tags.begin(), cap->tags.end());
                for (const std::string& t : cap->clears) resultLabels.tags.erase(t);
            }
            std::optional<RVal> value;
            bool invalidOutput = false;
            if (!reply.ok) {
                lastCode = reply.errorCode == "Timeout" ? "R0503" : reply.errorCode == "ModelOutputInvalid" ? "R0502" : "R0501";
                event["status"] = "error";
                event["error"] = lastCode;
            } else {
                value = fromJson(reply.result, resultType, resultLabels);
                if (!value && cap) {
                    // A capability result that does not fit its declared type: a failed call.
                    lastCode = "R0501";
                    event["status"] = "error";
                    event["error"] = lastCode;
                } else {
                    // A model's call is recorded ok, then its output is validated.
                    event["status"] = "ok";
                    event["result"] = reply.result;
                    event["result_tags"] = sortedTags(resultLabels.tags);
                    if (!value) {
                        invalidOutput = true;
                        lastCode = "R0502";
                    }
                }
            }
            events_.push_back(std::move(event));
            if (invalidOutput)
                events_.push_back(json{{"event", "invalid_output"}, {"resource", oc.resource}, {"site", oc.site}});
            if (value) return std::move(*value);
            // Operational: the next attempt, then `else`, else the run fails.
        }
        if (e.fallback) {
            events_.push_back(json{{"event", "fallback"}, {"site", oc.site}});
            return eval(*e.fallback, pc);  // F's value with its own labels
        }
        fail(e.span, "the call failed", lastCode.c_str());
    }

    static json argsObject(const OracleCall& oc) {
        json out = json::object();
        for (size_t i = 0; i < oc.argNames.size(); ++i) out[oc.argNames[i]] = oc.args[i];
        return out;
    }

    json callEvent(const OracleCall& oc, const Labels& all, const std::vector<std::string>& reasons) {
        json argTags = json::object();
        for (size_t i = 0; i < oc.argNames.size(); ++i) argTags[oc.argNames[i]] = sortedTags(oc.argTags[i]);
        return json{{"event", "call"},
                    {"resource", oc.resource},
                    {"site", oc.site},
                    {"attempt", oc.attempt},
                    {"args", argsObject(oc)},
                    {"arg_tags", argTags},
                    {"pc_tags", sortedTags(oc.pc)},
                    {"derived_from", sortedProv(all.prov)},
                    {"approval", reasons.empty() ? json(nullptr) : json{{"reasons", reasons}}}};
    }
};

}  // namespace

Outcome runReference(const ast::Program& program, const CheckResult& check, const HostModel& host,
                     const Policy& policy, const nlohmann::json& inputs, const ReferenceOptions& options) {
    Evaluator evaluator(program, check, host, policy, options);
    return evaluator.run(inputs);
}

}  // namespace remit::difftest
