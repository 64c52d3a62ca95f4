#include "compiler/formatter.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "runtime/numfmt.h"
#include "runtime/source.h"

namespace remit {

using namespace ast;

namespace {

constexpr std::string_view kIndent = "  ";
// A record literal stays on one line up to this many code points (the prototype's limit).
constexpr size_t kMaxInlineRecord = 80;
// Lists, argument and parameter lists, record types and `uses`/`tags`/`clears` lines stay on one
// line up to this many code points. Code never gets near it; a data table does, and breaking it
// one item per line keeps it under the lexer's per-line limit (FrontendLimits::maxLineBytes).
constexpr size_t kMaxInlineList = 1000;

// How tightly an expression binds, to decide where parentheses are needed. Binary operators use
// ast::binaryPrecedence (1 = or .. 6 = * / %); these levels place the other forms around them.
// An operand position asks for a minimum level and parenthesises anything looser; delimited
// positions (arguments, list items, record values, let values, conditions) never do.
constexpr int kLevelBlockExpr = 0;     // if / for / match, in the readable style (see Style)
constexpr int kLevelNot = 3;           // `not x` binds looser than comparisons, tighter than `and`
constexpr int kLevelNeg = 7;           // `-x`, and a negative literal (printed with its '-')
constexpr int kLevelModifiedCall = 8;  // f() retry/timeout/else: `else E` would swallow a `.x`
constexpr int kLevelAtom = 9;

// Which parentheses the printer adds. Readable adds some the grammar does not need: around a
// block expression used as an operand (`(if c { 1 } else { 2 }) + 1`), around a nested negation
// (`-(-x)`), a non-atomic fallback (`else (-x)`) and a call with modifiers under `.x`. Each of
// them deepens the parser's nesting, so a file written close to FrontendLimits::maxNesting is
// printed Minimal instead: only the parentheses the grammar needs, which the source must have
// had too, so the output is never nested deeper than the input.
enum class Style : uint8_t { Readable, Minimal };

std::string indent(int depth) {
    std::string out;
    for (int i = 0; i < depth; ++i) out += kIndent;
    return out;
}

// A printed construct moved one level deeper. Every newline in printed text is layout (strings
// escape theirs, comments have none), and each construct indents its later lines from its depth,
// so printing at depth+1 equals re-indenting. Re-indenting instead of printing again keeps the
// cost linear: a re-print at every level of a nested construct would be exponential.
std::string reindent(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        out += c;
        if (c == '\n') out += kIndent;
    }
    return out;
}

// Comments keep their text; only trailing blanks go, so a formatted file has none.
std::string commentText(std::string_view comment) {
    while (!comment.empty() && (comment.back() == ' ' || comment.back() == '\t')) comment.remove_suffix(1);
    return std::string(comment);
}

std::string withTrailing(std::string line, const std::string& trailing) {
    if (!trailing.empty()) line += "  " + commentText(trailing);
    return line;
}

// The body of a string literal: the lexer's escapes reversed. Braces are escaped so literal text
// never reads back as an interpolation; other characters (UTF-8 included) stay as they are.
std::string escapeText(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
            case '\\': out += "\\\\"; break;
            case '"': out += "\\\""; break;
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            case '{': out += "\\{"; break;
            case '}': out += "\\}"; break;
            default: out += c;
        }
    }
    return out;
}

std::string quote(std::string_view text) { return "\"" + escapeText(text) + "\""; }

std::string join(const std::vector<std::string>& items, std::string_view separator) {
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += separator;
        out += items[i];
    }
    return out;
}

// `keyword a, b, c` lines for a list of names, wrapped onto further lines with the same keyword
// when one would pass kMaxInlineList (the grammar allows repeated `uses`, `tags`, `clears`).
std::vector<std::string> nameLines(const std::string& keyword, const std::vector<std::string>& names) {
    std::vector<std::string> lines;
    std::string line;
    for (const std::string& name : names) {
        if (!line.empty() && codePointCount(line) + 2 + codePointCount(name) > kMaxInlineList) {
            lines.push_back(std::move(line));
            line.clear();
        }
        line += line.empty() ? keyword + " " + name : ", " + name;
    }
    if (!line.empty()) lines.push_back(std::move(line));
    return lines;
}

// A whole number without the ".0": budgets print as `budget usd 5`. Goes through the Float
// spelling, not int64_t, so values beyond 2^63 stay exact too.
std::string formatIntegral(double value) {
    std::string text = formatFloatLiteral(value);
    if (text.size() > 2 && text.compare(text.size() - 2, 2, ".0") == 0) text.resize(text.size() - 2);
    return text;
}

bool isWhole(double value) { return std::isfinite(value) && value == std::trunc(value); }

// What the lexer makes of a duration: the digits read as a double, times the unit's scale.
double lexedDuration(const std::string& digits, double scale) {
    double value = 0;
    std::from_chars(digits.data(), digits.data() + digits.size(), value);
    return value * scale;
}

// ---------------------------------------------------------------- expressions

int levelOf(const Expr& e, Style style) {
    switch (e.kind) {
        case ExprKind::Binary: return binaryPrecedence(e.as<BinaryExpr>().op);
        case ExprKind::Unary: return e.as<UnaryExpr>().op == UnaryOp::Not ? kLevelNot : kLevelNeg;
        // The parser never makes negative literals (`-5` is a negation), but a tree built in code may.
        case ExprKind::Int: return e.as<IntLit>().value < 0 ? kLevelNeg : kLevelAtom;
        case ExprKind::Float: return std::signbit(e.as<FloatLit>().value) ? kLevelNeg : kLevelAtom;
        case ExprKind::Call: {
            // A fallback must be closed off before a postfix; retry/timeout only for readability.
            const auto& c = e.as<CallExpr>();
            if (c.fallback) return kLevelModifiedCall;
            return (c.retry || c.timeoutSeconds) && style == Style::Readable ? kLevelModifiedCall : kLevelAtom;
        }
        // A block expression ends with '}', after which any operator or postfix binds to the
        // whole expression: the grammar never needs parentheses around one.
        case ExprKind::If:
        case ExprKind::For:
        case ExprKind::Match: return style == Style::Readable ? kLevelBlockExpr : kLevelAtom;
        default: return kLevelAtom;
    }
}

// `-1`, `-2.5`: what the parser makes of a negative number.
bool isNegatedNumber(const Expr& e) {
    if (e.kind != ExprKind::Unary || e.as<UnaryExpr>().op != UnaryOp::Neg) return false;
    const Expr& operand = *e.as<UnaryExpr>().operand;
    return (operand.kind == ExprKind::Int || operand.kind == ExprKind::Float) &&
           levelOf(operand, Style::Minimal) == kLevelAtom;
}

// A match arm whose body can be written `"a" => expr`: one expression statement and no comments.
const Expr* plainArmExpr(const MatchArm& arm) {
    const Block& body = *arm.body;
    if (body.stmts.size() != 1 || !body.closingComments.empty()) return nullptr;
    const Stmt& s = *body.stmts[0];
    if (s.kind != StmtKind::Expr || !s.comments.leading.empty() || !s.comments.trailing.empty()) return nullptr;
    return s.value.get();
}

// `X.ask(...)`, whose first argument the parser reads as the output type when it looks like one.
bool isAskCall(const CallExpr& c) { return c.callee.size() == 2 && c.callee[1] == "ask"; }

// Would the parser take this printed first argument of an `ask` call for a type? It does for an
// uppercase name not followed by '(' and for anything starting with '{'. Such an argument can
// only have been written in parentheses, so it gets them back. (A string followed by '|' is a
// type too, but no expression prints that way.)
bool readsAsAskType(std::string_view text) {
    if (text.empty()) return false;
    if (text[0] == '{') return true;
    if (text[0] < 'A' || text[0] > 'Z') return false;
    size_t end = 0;
    while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) ++end;
    return end == text.size() || text[end] != '(';
}

// Prints one construct at a time; a result's first line is unindented (the caller places it) and
// its later lines carry their full indentation from `depth`. `oneLine` is for interpolations,
// whose expression must fit between the braces on one line: blocks become `{ a; b }`, match arms
// are separated by commas and nothing breaks. (Interpolations cannot hold comments, so none is
// lost.) The printer also follows the parser's nesting count (Parser::Nest) through the text it
// produces, so that formatProgram can tell when the Readable style nests too deeply.
class Printer {
public:
    explicit Printer(Style style) : style_(style) {}

    size_t maxNesting() const { return maxNest_; }

    // `e` on one line, the layout of an interpolation (blocks as `{ a; b }`; comments left out).
    std::string flatExpr(const Expr& e) {
        oneLine_ = true;
        std::string text = expr(e, 0);
        oneLine_ = false;
        return text;
    }

    std::string type(const TypeExpr& t, int depth) {
        switch (t.kind) {
            case TypeKind::Union: {
                std::vector<std::string> options;
                for (const std::string& o : t.options) options.push_back(quote(o));
                return join(options, " | ");
            }
            case TypeKind::Record: {
                Nest nest(*this);
                if (t.fields.empty()) return "{}";
                std::vector<std::string> fields;
                for (const TypeField& f : t.fields) fields.push_back(f.name + ": " + type(*f.type, depth));
                return bracketed("{ ", fields, " }", "{", "}", depth);
            }
            case TypeKind::Named: {
                std::string out = t.name;
                if (!t.args.empty()) {
                    Nest nest(*this);
                    std::vector<std::string> args;
                    for (const TypePtr& a : t.args) args.push_back(type(*a, depth));
                    out += bracketed("[", args, "]", "[", "]", depth);
                }
                if (t.max) out += " max " + std::to_string(*t.max);
                return out;
            }
        }
        return {};
    }

    std::string params(const std::vector<Param>& ps, int depth) {
        Nest nest(*this);
        auto tagList = [](const std::vector<std::string>& tags) {
            return tags.size() == 1 ? tags[0] : "(" + join(tags, ", ") + ")";
        };
        std::vector<std::string> out;
        for (const Param& param : ps) {
            std::string text = param.name + ": " + type(*param.type, depth);
            if (!param.deny.empty()) text += " deny " + tagList(param.deny);
            if (!param.approve.empty()) text += " approve " + tagList(param.approve);
            out.push_back(std::move(text));
        }
        return bracketed("(", out, ")", "(", ")", depth);
    }

    std::string expr(const Expr& e, int depth) {
        switch (e.kind) {
            case ExprKind::Int: return std::to_string(e.as<IntLit>().value);
            case ExprKind::Float: return formatFloatLiteral(e.as<FloatLit>().value);
            case ExprKind::Bool: return e.as<BoolLit>().value ? "true" : "false";
            case ExprKind::Str: return quote(e.as<StrLit>().value);
            case ExprKind::Interp: return interp(e.as<InterpExpr>());
            case ExprKind::Name: return e.as<NameExpr>().name;
            case ExprKind::Field: {
                const auto& f = e.as<FieldExpr>();
                return operand(*f.object, depth, kLevelAtom) + "." + f.name;
            }
            case ExprKind::Index: {
                const auto& ix = e.as<IndexExpr>();
                std::string object = operand(*ix.object, depth, kLevelAtom);
                Nest nest(*this);
                return object + "[" + expr(*ix.index, depth) + "]";
            }
            case ExprKind::List: {
                Nest nest(*this);
                std::vector<std::string> items;
                for (const ExprPtr& item : e.as<ListExpr>().items) items.push_back(expr(*item, depth));
                return bracketed("[", items, "]", "[", "]", depth);
            }
            case ExprKind::Record: return record(e.as<RecordExpr>(), depth);
            case ExprKind::Unary: return unary(e.as<UnaryExpr>(), depth);
            case ExprKind::Binary: {
                const auto& b = e.as<BinaryExpr>();
                int prec = binaryPrecedence(b.op);
                // Left-associative: an equal-precedence left operand needs no parentheses, an equal
                // right one does. Comparisons do not chain, so a comparison on either side is wrapped.
                bool comparison = prec == binaryPrecedence(BinaryOp::Eq);
                return operand(*b.left, depth, comparison ? prec + 1 : prec) + " " + binaryOpText(b.op) + " " +
                       operand(*b.right, depth, prec + 1);
            }
            case ExprKind::Call: return call(e.as<CallExpr>(), depth);
            case ExprKind::If: return ifExpr(e.as<IfExpr>(), depth);
            case ExprKind::For: return forExpr(e.as<ForExpr>(), depth);
            case ExprKind::Match: return matchExpr(e.as<MatchExpr>(), depth);
        }
        return {};
    }

    // Statements and comments inside, then the closing brace at `depth`.
    std::string block(const Block& b, int depth) {
        Nest nest(*this);
        if (b.stmts.empty() && b.closingComments.empty()) return "{}";
        if (oneLine_) {
            std::vector<std::string> stmts;
            for (const StmtPtr& s : b.stmts) stmts.push_back(stmt(*s, depth));
            return "{ " + join(stmts, "; ") + " }";
        }
        std::string inner = indent(depth + 1);
        std::string out = "{\n";
        for (const StmtPtr& s : b.stmts) {
            for (const std::string& c : s->comments.leading) out += inner + commentText(c) + "\n";
            out += withTrailing(inner + stmt(*s, depth + 1), s->comments.trailing) + "\n";
        }
        for (const std::string& c : b.closingComments) out += inner + commentText(c) + "\n";
        return out + indent(depth) + "}";
    }

    // A declaration's lines, without its leading comments; the trailing comment goes on the line
    // it was found on: the end of a capability's signature, the last line for everything else.
    std::vector<std::string> declLines(const Decl& d) {
        std::vector<std::string> lines;
        switch (d.kind) {
            case DeclKind::Type: {
                const auto& t = d.as<TypeDecl>();
                lines.push_back("type " + t.name + " = " + type(*t.type, 0));
                break;
            }
            case DeclKind::Fn: {
                const auto& f = d.as<FnDecl>();
                std::string sig = "fn " + f.name + params(f.params, 0);
                if (f.ret) sig += " -> " + type(*f.ret, 0);
                lines.push_back(sig + " " + block(*f.body, 0));
                break;
            }
            case DeclKind::Agent: {
                const auto& a = d.as<AgentDecl>();
                Nest nest(*this);
                lines.push_back("agent " + a.name + " {");
                for (const std::string& c : a.innerComments) lines.push_back(indent(1) + commentText(c));
                lines.push_back(indent(1) + "model: " + a.model);
                if (!a.system.empty()) lines.push_back(indent(1) + "system: " + quote(a.system));
                if (a.maxCalls) lines.push_back(indent(1) + "max_calls: " + std::to_string(*a.maxCalls));
                lines.push_back("}");
                break;
            }
            case DeclKind::Test: {
                const auto& t = d.as<TestDecl>();
                std::string head = "test " + quote(t.name);
                if (t.fixtures) head += " fixtures " + quote(*t.fixtures);
                lines.push_back(head + " " + block(*t.body, 0));
                break;
            }
            case DeclKind::Capability: {
                const auto& c = d.as<CapabilityDecl>();
                std::string sig = "capability " + c.name + params(c.params, 0);
                if (c.ret) sig += " -> " + type(*c.ret, 0);
                lines.push_back(withTrailing(sig, d.comments.trailing));
                for (const std::string& comment : c.innerComments) lines.push_back(indent(1) + commentText(comment));
                for (std::string& line : nameLines("tags", c.tags)) lines.push_back(indent(1) + line);
                for (std::string& line : nameLines("clears", c.clears)) lines.push_back(indent(1) + line);
                if (c.cost != 0) lines.push_back(indent(1) + "cost " + formatFloatLiteral(c.cost));
                if (c.idempotent) lines.push_back(indent(1) + "idempotent");
                if (c.approvalAlways) lines.push_back(indent(1) + "approval always");
                return lines;  // the trailing comment is already on the signature
            }
            case DeclKind::Model: {
                const auto& m = d.as<ModelDecl>();
                std::string line = "model " + m.name;
                if (m.cost != 0) line += " cost " + formatFloatLiteral(m.cost);
                lines.push_back(line);
                break;
            }
            case DeclKind::Input: {
                const auto& in = d.as<InputDecl>();
                lines.push_back("input " + in.name + " tags " + join(in.tags, ", "));
                break;
            }
        }
        lines.back() = withTrailing(lines.back(), d.comments.trailing);
        return lines;
    }

private:
    Style style_;
    bool oneLine_ = false;
    size_t nest_ = 0;
    size_t maxNest_ = 0;

    // One level of the parser's nesting count, held while the nested text is printed.
    struct Nest {
        Printer& p;
        explicit Nest(Printer& printer) : p(printer) { p.maxNest_ = std::max(p.maxNest_, ++p.nest_); }
        ~Nest() { --p.nest_; }
        Nest(const Nest&) = delete;
        Nest& operator=(const Nest&) = delete;
    };

    std::string wrap(const Expr& e, int depth) {
        Nest nest(*this);
        return "(" + expr(e, depth) + ")";
    }

    // Prints `e` once; when `deeper(text)` then puts the text inside one more bracket (which the
    // caller adds), the nesting count is raised as if `e` had been printed in it.
    template <class Deeper>
    std::string exprThenMaybeDeeper(const Expr& e, int depth, Deeper deeper) {
        size_t outerMax = maxNest_;
        maxNest_ = nest_;
        std::string text = expr(e, depth);
        size_t innerMax = maxNest_ + (deeper(text) ? 1 : 0);
        maxNest_ = std::max(outerMax, innerMax);
        return text;
    }

    std::string operand(const Expr& e, int depth, int minLevel) {
        return levelOf(e, style_) < minLevel ? wrap(e, depth) : expr(e, depth);
    }

    // Items printed at `depth`, between brackets: `flatOpen a, b flatClose` on one line, or one per
    // line when that is longer than kMaxInlineList. (Multi-line items, such as a long record in
    // a list, stay in the one-line form below that length: `[{` ... `}, 2]`.)
    std::string bracketed(std::string_view flatOpen, const std::vector<std::string>& items, std::string_view flatClose,
                          std::string_view open, std::string_view close, int depth) const {
        if (items.empty()) return std::string(open) + std::string(close);
        std::string flat = std::string(flatOpen) + join(items, ", ") + std::string(flatClose);
        if (oneLine_ || codePointCount(flat) <= kMaxInlineList) return flat;
        std::string inner = indent(depth + 1);
        std::string out = std::string(open) + "\n";
        for (size_t i = 0; i < items.size(); ++i) out += inner + reindent(items[i]) + (i + 1 < items.size() ? ",\n" : "\n");
        return out + indent(depth) + std::string(close);
    }

    std::string unary(const UnaryExpr& u, int depth) {
        Nest nest(*this);
        if (u.op == UnaryOp::Not) return "not " + operand(*u.operand, depth, kLevelNot);
        if (style_ == Style::Readable) return "-" + operand(*u.operand, depth, kLevelNeg + 1);  // -(-x)
        // Minimal: a nested negation is `- -x`; a space keeps the two signs apart all the same.
        std::string text = operand(*u.operand, depth, kLevelNeg);
        return (!text.empty() && text[0] == '-' ? "- " : "-") + text;
    }

    std::string interp(const InterpExpr& e) {
        // The expression is parsed where it stands, so it nests from here; only the layout changes.
        bool wasOneLine = oneLine_;
        oneLine_ = true;
        std::string out = "\"";
        for (const InterpPart& part : e.parts) out += part.expr ? "{" + expr(*part.expr, 0) + "}" : escapeText(part.text);
        oneLine_ = wasOneLine;
        return out + "\"";
    }

    std::string record(const RecordExpr& r, int depth) {
        Nest nest(*this);
        if (r.fields.empty()) return "{}";
        // Values are printed for the broken layout; a value without newlines reads the same inline.
        std::vector<std::string> fields;
        bool multiLine = false;
        for (const RecordField& f : r.fields) {
            fields.push_back(f.name + ": " + expr(*f.value, depth + 1));
            multiLine = multiLine || fields.back().find('\n') != std::string::npos;
        }
        std::string flat = "{ " + join(fields, ", ") + " }";
        if (oneLine_ || (!multiLine && codePointCount(flat) <= kMaxInlineRecord)) return flat;
        std::string inner = indent(depth + 1);
        std::string out = "{\n";
        for (size_t i = 0; i < fields.size(); ++i) out += inner + fields[i] + (i + 1 < fields.size() ? ",\n" : "\n");
        return out + indent(depth) + "}";
    }

    std::string call(const CallExpr& c, int depth) {
        std::string out = c.calleeName();
        {
            Nest nest(*this);
            std::vector<std::string> args;
            if (c.askType) args.push_back(type(*c.askType, depth));
            for (const CallArg& a : c.args) {
                std::string value;
                if (!a.name && args.empty() && isAskCall(c)) {
                    value = exprThenMaybeDeeper(*a.value, depth, [](const std::string& text) { return readsAsAskType(text); });
                    if (readsAsAskType(value)) value = "(" + value + ")";
                } else {
                    value = expr(*a.value, depth);
                }
                args.push_back((a.name ? *a.name + ": " : "") + value);
            }
            out += bracketed("(", args, ")", "(", ")", depth);
        }
        if (c.retry) out += " retry " + std::to_string(*c.retry);
        if (c.timeoutSeconds) out += " timeout " + formatDuration(*c.timeoutSeconds);
        if (c.fallback) out += " else " + fallback(*c.fallback, depth);
        return out;
    }

    // The parser reads `else` E at unary level. Readable keeps only atoms (and a negative number)
    // bare; Minimal wraps only what a unary-level parse would not take (`not`, binary operators).
    std::string fallback(const Expr& e, int depth) {
        if (style_ == Style::Minimal) return operand(e, depth, kLevelNeg);
        return isNegatedNumber(e) ? expr(e, depth) : operand(e, depth, kLevelModifiedCall);
    }

    std::string ifExpr(const IfExpr& e, int depth) {
        Nest nest(*this);
        std::string out = "if " + expr(*e.cond, depth) + " " + block(*e.thenBlock, depth);
        if (e.elseIf) out += " else " + expr(*e.elseIf, depth);
        else if (e.elseBlock) out += " else " + block(*e.elseBlock, depth);
        return out;
    }

    std::string forExpr(const ForExpr& e, int depth) {
        std::string out = "for " + e.var + " in " + expr(*e.iter, depth);
        if (e.limit) out += " limit " + std::to_string(*e.limit);
        if (e.filter) out += " if " + expr(*e.filter, depth);
        return out + " " + block(*e.body, depth);
    }

    std::string arm(const MatchArm& a, int depth) {
        std::string out = (a.pattern ? quote(*a.pattern) : std::string("_")) + " => ";
        const Expr* body = plainArmExpr(a);
        if (!body) return out + block(*a.body, depth);
        // `=> {` always opens a block, so a body starting with a record goes inside one. This is
        // what block() would print, built from `text` so that nothing is printed twice.
        auto needsBlock = [](const std::string& text) { return !text.empty() && text[0] == '{'; };
        std::string text = exprThenMaybeDeeper(*body, depth, needsBlock);
        if (!needsBlock(text)) return out + text;
        if (oneLine_) return out + "{ " + text + " }";
        return out + "{\n" + indent(depth + 1) + reindent(text) + "\n" + indent(depth) + "}";
    }

    std::string matchExpr(const MatchExpr& m, int depth) {
        std::string head = "match " + expr(*m.subject, depth) + " ";
        Nest nest(*this);
        if (m.arms.empty() && m.closingComments.empty()) return head + "{}";
        if (oneLine_) {
            std::vector<std::string> arms;
            for (const MatchArm& a : m.arms) arms.push_back(arm(a, depth));
            return head + "{ " + join(arms, ", ") + " }";
        }
        std::string inner = indent(depth + 1);
        std::string out = head + "{\n";
        for (const MatchArm& a : m.arms) {
            for (const std::string& c : a.comments.leading) out += inner + commentText(c) + "\n";
            out += withTrailing(inner + arm(a, depth + 1), a.comments.trailing) + "\n";
        }
        for (const std::string& c : m.closingComments) out += inner + commentText(c) + "\n";
        return out + indent(depth) + "}";
    }

    // A statement without its comments (the enclosing block prints those).
    std::string stmt(const Stmt& s, int depth) {
        switch (s.kind) {
            case StmtKind::Let: {
                std::string out = (s.isVar ? "var " : "let ") + s.name;
                if (s.type) out += ": " + type(*s.type, depth);
                return out + " = " + expr(*s.value, depth);
            }
            case StmtKind::Assign: return s.name + " = " + expr(*s.value, depth);
            case StmtKind::Return: return s.value ? "return " + expr(*s.value, depth) : "return";
            case StmtKind::Expr: return expr(*s.value, depth);
            case StmtKind::Expect: {
                std::string out = "expect " + expr(*s.value, depth);
                if (s.message) out += ", " + quote(*s.message);
                return out;
            }
            case StmtKind::Break: return "break";
        }
        return {};
    }
};

void emitComments(const std::vector<std::string>& comments, std::vector<std::string>& out) {
    for (const std::string& c : comments) out.push_back(commentText(c));
}

void emitDecl(Printer& printer, const Decl& d, std::vector<std::string>& out) {
    emitComments(d.comments.leading, out);
    for (std::string& line : printer.declLines(d)) out.push_back(std::move(line));
}

std::string joinLines(const std::vector<std::string>& lines) {
    std::string out;
    for (const std::string& line : lines) out += line + "\n";
    return out.empty() ? "\n" : out;
}

std::string printProgram(const Program& program, Printer& printer) {
    std::vector<std::string> out;
    emitComments(program.headerComments, out);
    out.push_back(withTrailing("program " + program.name, program.programTrailing));
    emitComments(program.usesComments, out);
    // A header trailing comment without its line (a tree built in code) still must not be dropped.
    std::vector<std::string> useNames;
    for (const UseEntry& u : program.uses) useNames.push_back(u.name);
    std::vector<std::string> usesLines = nameLines("uses", useNames);
    if (!usesLines.empty()) usesLines.back() = withTrailing(usesLines.back(), program.usesTrailing);
    else if (!program.usesTrailing.empty()) usesLines.push_back(commentText(program.usesTrailing));
    for (std::string& line : usesLines) out.push_back(std::move(line));
    if (program.budgetUsd) {
        double budget = *program.budgetUsd;
        // Whole amounts print as integers, but only where an Int literal can hold them.
        bool asInt = isWhole(budget) && std::fabs(budget) < 0x1p63;
        std::string amount = asInt ? formatIntegral(budget) : formatFloatLiteral(budget);
        out.push_back(withTrailing("budget usd " + amount, program.budgetTrailing));
    } else if (!program.budgetTrailing.empty()) {
        out.push_back(commentText(program.budgetTrailing));
    }
    const Decl* prev = nullptr;
    for (const DeclPtr& d : program.decls) {
        // Runs of type aliases stay together, unless a comment introduces the next one.
        bool typeRun = prev && prev->kind == DeclKind::Type && d->kind == DeclKind::Type && d->comments.leading.empty();
        if (!typeRun) out.emplace_back();
        emitDecl(printer, *d, out);
        prev = d.get();
    }
    if (!program.endComments.empty()) {
        out.emplace_back();
        emitComments(program.endComments, out);
    }
    return joinLines(out);
}

std::string printHost(const HostInterface& host, Printer& printer) {
    std::vector<std::string> out;
    const Decl* prev = nullptr;
    for (const DeclPtr& d : host.decls) {
        // One-line declarations of a kind (types, models, inputs) stay together, unless a comment
        // introduces the next one; a capability, with its attribute lines, always stands apart.
        bool run = prev && prev->kind == d->kind && d->kind != DeclKind::Capability && d->comments.leading.empty();
        if (prev && !run) out.emplace_back();
        emitDecl(printer, *d, out);
        prev = d.get();
    }
    if (!host.endComments.empty()) {
        if (!out.empty()) out.emplace_back();
        emitComments(host.endComments, out);
    }
    return joinLines(out);
}

// Readable unless that would nest deeper than the parser accepts (see Style).
template <class Tree, class Print>
std::string printTree(const Tree& tree, const FrontendLimits& limits, Print print) {
    Printer readable(Style::Readable);
    std::string text = print(tree, readable);
    if (readable.maxNesting() <= limits.maxNesting) return text;
    Printer minimal(Style::Minimal);
    return print(tree, minimal);
}

}  // namespace

std::string formatFloatLiteral(double value) { return formatFloatPlain(value); }

std::string formatDuration(double seconds) {
    // The parser only makes finite non-negative durations; anything else gets a plain spelling.
    if (!std::isfinite(seconds) || seconds < 0) return formatFloatLiteral(seconds) + "s";
    auto roundTrips = [&](const std::string& digits, double scale) { return lexedDuration(digits, scale) == seconds; };
    if (isWhole(seconds) && seconds >= 1) return formatIntegral(seconds) + "s";  // scale 1: always exact
    // Not a whole number of seconds, so below 2^52 and `millis` is finite.
    double millis = seconds * 1000;
    std::string wholeMillis = formatIntegral(std::round(millis));
    if (roundTrips(wholeMillis, 0.001)) return wholeMillis + "ms";
    std::string fractionalMillis = formatFloatLiteral(millis);
    if (roundTrips(fractionalMillis, 0.001)) return fractionalMillis + "ms";
    // Shortest round-trip digits read back exactly, and scale 1 keeps them so.
    return formatFloatLiteral(seconds) + "s";
}

std::string formatExpression(const Expr& expr) {
    Printer printer(Style::Readable);
    return printer.flatExpr(expr);
}

std::string formatProgram(const Program& program, const FrontendLimits& limits) {
    return printTree(program, limits, printProgram);
}

std::string formatHost(const HostInterface& host, const FrontendLimits& limits) {
    return printTree(host, limits, printHost);
}

}  // namespace remit
