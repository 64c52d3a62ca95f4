#include "compiler/parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <utility>

#include "compiler/habits.h"
#include "compiler/lexer.h"
#include "runtime/builtins.h"

namespace remit {

using namespace ast;

namespace {

// Thrown after a syntax error has been recorded; caught at the nearest recovery point.
struct SyntaxError {};
// Thrown when parsing must stop: too many errors, or a limit was exceeded.
struct ParseStop {};

// State shared by a parser and the sub-parsers of string interpolations in the same file.
struct ParseContext {
    std::string_view file;
    DiagnosticList& diags;
    const FrontendLimits& limits;
    uint32_t nextId = 1;
    size_t errors = 0;
    size_t depth = 0;
    // Lines with a lexical error: a syntax error on one of them is the lexical error's cascade,
    // not a new mistake, so it is not reported (the statement is still skipped).
    std::vector<uint32_t> lexicalErrorLines;
};

class Parser {
public:
    Parser(ParseContext& ctx, LexResult lexed)
        : ctx_(ctx), toks_(std::move(lexed.tokens)), comments_(std::move(lexed.comments)),
          strings_(std::move(lexed.strings)) {
        taken_.assign(comments_.size(), false);
    }

    std::unique_ptr<Program> program();
    std::unique_ptr<HostInterface> host();
    // An interpolated expression: exactly one expression and nothing after it.
    ExprPtr fragment();

private:
    ParseContext& ctx_;
    std::vector<Token> toks_;
    std::vector<Comment> comments_;
    std::vector<std::vector<StrPiece>> strings_;
    std::vector<bool> taken_;
    size_t pos_ = 0;
    Span lastSpan_;  // the span of the last consumed token
    // The first token of the statement being parsed (npos outside statements): a statement that
    // starts with a habit word (`while`, `try`, ...) and fails is reported as that habit.
    size_t stmtStart_ = std::string::npos;
    std::string forVar_;  // the variable of the `for` whose list is being parsed, for range hints
    // The calls whose arguments are being parsed, innermost last: a lambda passed to `map` or
    // `filter` is hinted as the `for` it should be.
    struct OpenCall {
        const std::vector<std::string>* callee;
        size_t firstArgBegin = std::string::npos, firstArgEnd = std::string::npos;  // token indices
    };
    std::vector<OpenCall> openCalls_;

    // ------------------------------------------------------------ tokens

    const Token& peek(size_t ahead = 0) const { return toks_[std::min(pos_ + ahead, toks_.size() - 1)]; }
    bool at(Tok kind) const { return peek().kind == kind; }
    const Token& advance() {
        const Token& t = toks_[pos_];
        lastSpan_ = t.span;
        if (pos_ + 1 < toks_.size()) ++pos_;
        return t;
    }
    const std::vector<StrPiece>& pieces(const Token& t) const { return strings_[t.strIndex]; }
    bool accept(Tok kind) {
        if (!at(kind)) return false;
        advance();
        return true;
    }

    NodeId newId() { return NodeId{ctx_.nextId++}; }
    Span from(const Span& start) const { return Span{start.line, start.col, lastSpan_.endLine, lastSpan_.endCol}; }

    [[noreturn]] void fail(std::string message, Span span, std::string hint = {}) {
        record(DiagCode::E0100, std::move(message), span, std::move(hint));
        throw SyntaxError{};
    }
    // Every generic syntax error passes here: where a habit explains it better, the habit is
    // reported instead (failHabit throws).
    [[noreturn]] void failAt(std::string message, std::string hint = {}) {
        failKnownHabit();
        fail(std::move(message), peek().span, std::move(hint));
    }
    void record(DiagCode code, std::string message, Span span, std::string hint = {}, Json details = nullptr) {
        if (code == DiagCode::E0100 && afterLexicalError(span)) return;
        Diagnostic d = makeDiagnostic(code, std::move(message), std::string(ctx_.file), span, std::move(hint));
        d.details = std::move(details);
        if (ctx_.diags.add(std::move(d))) ++ctx_.errors;
        if (ctx_.errors >= ctx_.limits.maxErrors) throw ParseStop{};
    }

    bool afterLexicalError(const Span& span) const {
        const std::vector<uint32_t>& lines = ctx_.lexicalErrorLines;
        if (std::binary_search(lines.begin(), lines.end(), span.line)) return true;
        return stmtStart_ != std::string::npos &&
               std::binary_search(lines.begin(), lines.end(), toks_[stmtStart_].span.line);
    }

    // ------------------------------------------------------------ habits (compiler/habits.def)

    // The source text from token `first` to token `last`, both included; empty when it cannot be
    // cut out (synthetic tokens, or a range that is not one piece of text).
    std::string_view textBetween(size_t first, size_t last) const {
        if (first > last || last >= toks_.size()) return {};
        const char* begin = toks_[first].text.data();
        const char* end = toks_[last].text.data();
        if (!begin || !end || end < begin) return {};
        return std::string_view(begin, static_cast<size_t>(end - begin) + toks_[last].text.size());
    }
    std::optional<std::string> snippet(size_t first, size_t last) const {
        return habitSnippet(textBetween(first, last));
    }
    static void addName(HabitNames& names, std::string_view key, std::optional<std::string> value) {
        if (value) names.emplace_back(key, std::move(*value));
    }
    // Index of the bracket closing the one at `open` (same kind), or npos.
    size_t matching(size_t open) const {
        Tok o = toks_[open].kind;
        Tok c = o == Tok::LParen ? Tok::RParen : o == Tok::LBracket ? Tok::RBracket : Tok::RBrace;
        int depth = 0;
        for (size_t i = open; i < toks_.size(); ++i) {
            if (toks_[i].kind == o)
                ++depth;
            else if (toks_[i].kind == c && --depth == 0)
                return i;
            else if (toks_[i].kind == Tok::Eof)
                break;
        }
        return std::string::npos;
    }
    const Token& tok(size_t i) const { return toks_[std::min(i, toks_.size() - 1)]; }

    [[noreturn]] void failHabit(Habit habit, std::string_view word, const HabitNames& names, Span span) {
        const HabitInfo& info = habitInfo(habit);
        HabitText text = renderHabit(habit, word, names);
        record(info.trigger == HabitTrigger::Lexical ? DiagCode::E0001 : DiagCode::E0100, std::move(text.message), span,
               std::move(text.hint));
        throw SyntaxError{};
    }

    // The Word habit (or, at a statement's start, the statement form of a Call habit such as
    // `print x`) spelled by token `i`, when what follows it shows it is not the user's own name:
    // something no name can be followed by, or `(...)` and then a block or `:`.
    Habit wordHabitAt(size_t i, bool statementStart) const {
        const Token& w = tok(i);
        if (w.kind != Tok::Ident && !isKeyword(w.kind)) return Habit::None;
        Habit habit = findHabit(HabitTrigger::Word, w.text);
        if (habit == Habit::None && statementStart) habit = findHabit(HabitTrigger::Call, w.text);
        if (habit == Habit::None || (habit == Habit::ElseLine && !statementStart)) return Habit::None;
        if (isKeyword(w.kind)) return habit;  // `else`, `fn`, `import`: never a user's name
        const Token& next = tok(i + 1);
        switch (next.kind) {
            case Tok::Ident:
            case Tok::Int:
            case Tok::Float:
            case Tok::Str:
            case Tok::LBrace:
            case Tok::Colon:
            case Tok::Habit:
                return habit;
            case Tok::LParen: {
                size_t close = matching(i + 1);
                if (close == std::string::npos) return Habit::None;
                Tok after = tok(close + 1).kind;
                return after == Tok::LBrace || after == Tok::Colon || after == Tok::Ident ? habit : Habit::None;
            }
            default:
                break;
        }
        bool operatorLike = next.kind == Tok::KwIn || next.kind == Tok::KwAnd || next.kind == Tok::KwOr ||
                            next.kind == Tok::KwElse || next.kind == Tok::KwRetry || next.kind == Tok::KwTimeout;
        return isKeyword(next.kind) && !operatorLike ? habit : Habit::None;
    }

    // Reports the Word habit at token `i` with the names that follow it; returns only when there
    // is none.
    void failWordHabit(size_t i, bool statementStart) {
        Habit habit = wordHabitAt(i, statementStart);
        if (habit == Habit::None) return;
        HabitNames names;
        // $cond: up to the block (or `:`) on the same line, outer parentheses dropped.
        size_t first = i + 1, last = first;
        int depth = 0;
        while (last < toks_.size() && tok(last).kind != Tok::Eof && tok(last).span.line == tok(i).span.line) {
            Tok k = tok(last).kind;
            if (depth == 0 && (k == Tok::LBrace || k == Tok::Colon || k == Tok::Newline || k == Tok::Semicolon)) break;
            if (k == Tok::LParen || k == Tok::LBracket) ++depth;
            if ((k == Tok::RParen || k == Tok::RBracket) && depth > 0) --depth;
            ++last;
        }
        if (last > first) {
            size_t a = first, b = last - 1;
            if (tok(a).kind == Tok::LParen && matching(a) == b) ++a, --b;
            addName(names, "cond", snippet(a, b));
            addName(names, "arg", snippet(a, b));
        }
        // $name: the dotted name after the word (`def greet`, `class Point`, `use web.fetch`).
        if (tok(i + 1).kind == Tok::Ident) {
            size_t end = i + 1;
            while (tok(end + 1).kind == Tok::Dot && tok(end + 2).kind == Tok::Ident) end += 2;
            addName(names, "name", snippet(i + 1, end));
            // $params: the first name of each parameter (`def f(a, b=1)`, `func f(a int)`).
            if (tok(end + 1).kind == Tok::LParen) {
                size_t close = matching(end + 1);
                std::string params;
                bool expectName = true;
                for (size_t k = end + 2; close != std::string::npos && k < close; ++k) {
                    if (tok(k).kind == Tok::Comma)
                        expectName = true;
                    else if (expectName && tok(k).kind == Tok::Ident) {
                        if (!params.empty()) params += ", ";
                        params += fmt::format("{}: Str", tok(k).text);
                        expectName = false;
                    }
                }
                names.emplace_back("params", params);
            }
            // $form for `enum Color { Red, Green }`: the union of its names.
            if (habit == Habit::Enum && tok(end + 1).kind == Tok::LBrace) {
                size_t close = matching(end + 1);
                std::string form;
                for (size_t k = end + 2; close != std::string::npos && k < close; ++k)
                    if (tok(k).kind == Tok::Ident && tok(k - 1).kind != Tok::Assign) {
                        if (!form.empty()) form += " | ";
                        form += fmt::format("\"{}\"", tok(k).text);
                    }
                if (!form.empty() && form.size() <= 60) names.emplace_back("form", form);
            }
        }
        failHabit(habit, tok(i).text, names, tok(i).span);
    }

    // At a failure: the habit that explains it, if any — a statement that starts with a habit
    // word, a habit operator where the parser stopped, or a habit word right after a `}`
    // (`} elif x {`, `} catch (e) {`).
    void failKnownHabit() {
        if (stmtStart_ != std::string::npos) failWordHabit(stmtStart_, true);
        // A `?` that expr() did not take for `c ? a : b` is an optional type (`Str?`) or the like.
        if (at(Tok::Habit))
            failHabit(peek().habit == Habit::Ternary ? Habit::Nullish : peek().habit, peek().text, {}, peek().span);
        if (pos_ > 0 && tok(pos_ - 1).kind == Tok::RBrace) failWordHabit(pos_, false);
    }

    [[noreturn]] void failLambda(size_t first, std::string params, size_t bodyFirst, size_t bodyLast);
    [[noreturn]] void failRange(size_t lowerFirst);
    [[noreturn]] void failCFor(size_t forIndex);
    [[noreturn]] void failDict(size_t open);
    [[noreturn]] void failComprehension(size_t itemFirst, size_t itemLast);
    [[noreturn]] void failMethodOnValue(size_t objectFirst, size_t dot);

    // The hint is a view: a std::string built from a literal for every expected token (almost
    // always found) was a measurable part of parsing.
    const Token& expect(Tok kind, std::string_view hint = {}) {
        if (!at(kind))
            failAt(fmt::format("expected '{}', found {}", tokenSpelling(kind), describeToken(peek())), std::string(hint));
        return advance();
    }
    const Token& expectIdent(std::string_view what) {
        if (!at(Tok::Ident)) {
            std::string hint = isKeyword(peek().kind) ? fmt::format("'{}' is a reserved word", peek().text) : "";
            failAt(fmt::format("expected {}, found {}", what, describeToken(peek())), hint);
        }
        return advance();
    }
    // A name where keywords are harmless: field names, agent setting keys, dotted path parts.
    const Token& expectNameOrKeyword(std::string_view what) {
        if (!at(Tok::Ident) && !isKeyword(peek().kind))
            failAt(fmt::format("expected {}, found {}", what, describeToken(peek())));
        return advance();
    }
    int64_t intLiteral(std::string_view what) {
        if (!at(Tok::Int))
            failAt(fmt::format("expected an integer literal for {}, found {}", what, describeToken(peek())),
                   fmt::format("{} must be a constant so that bounds can be computed before running", what));
        return advance().intValue;
    }
    double number() {
        bool negative = accept(Tok::Minus);
        if (!at(Tok::Int) && !at(Tok::Float)) failAt(fmt::format("expected a number, found {}", describeToken(peek())));
        const Token& t = advance();
        double value = t.kind == Tok::Int ? static_cast<double>(t.intValue) : t.floatValue;
        return negative ? -value : value;
    }
    std::string plainString(std::string_view what) {
        if (!at(Tok::Str) || pieces(peek()).size() != 1 || pieces(peek())[0].isExpr)
            failAt(fmt::format("expected a plain string literal for {}, found {}", what, describeToken(peek())),
                   at(Tok::Str) ? "interpolation is not allowed here" : "");
        return pieces(advance())[0].text;
    }

    void skipNewlines() {
        while (at(Tok::Newline) || at(Tok::Semicolon)) advance();
    }
    void endStatement(std::string_view hint = "put each statement on its own line") {
        if (at(Tok::Newline) || at(Tok::Semicolon)) {
            skipNewlines();
            return;
        }
        if (at(Tok::RBrace) || at(Tok::Eof)) return;
        failAt(fmt::format("expected end of statement, found {}", describeToken(peek())), std::string(hint));
    }

    // Nesting guard: brackets, blocks, prefix operators and `else if` chains all count.
    struct Nest {
        Parser& p;
        explicit Nest(Parser& parser) : p(parser) {
            if (++p.ctx_.depth > p.ctx_.limits.maxNesting) {
                p.record(DiagCode::E0003, fmt::format("nesting deeper than {} levels", p.ctx_.limits.maxNesting),
                         p.peek().span, "flatten the expression with let bindings or helper functions",
                         {{"limit", "nesting"}, {"value", p.ctx_.limits.maxNesting}});
                throw ParseStop{};
            }
        }
        ~Nest() { --p.ctx_.depth; }
    };

    // ------------------------------------------------------------ comments

    std::vector<std::string> takeComments(uint32_t beforeLine) {
        std::vector<std::string> out;
        for (size_t i = 0; i < comments_.size() && comments_[i].span.line < beforeLine; ++i) {
            if (taken_[i]) continue;
            taken_[i] = true;
            out.push_back(comments_[i].text);
        }
        return out;
    }
    std::string takeTrailing(uint32_t line) {
        for (size_t i = 0; i < comments_.size() && comments_[i].span.line <= line; ++i) {
            if (!taken_[i] && comments_[i].span.line == line && comments_[i].trailing) {
                taken_[i] = true;
                return comments_[i].text;
            }
        }
        return {};
    }
    // After a node that may span lines: comments inside it join its leading comments (they stay
    // near their code), and a comment ending its last line becomes its trailing comment.
    void attachComments(Comments& comments, const Span& span) {
        if (!(at(Tok::Newline) || at(Tok::Semicolon) || at(Tok::RBrace) || at(Tok::Eof))) return;
        std::string trailing = takeTrailing(span.endLine);
        std::vector<std::string> inner = takeComments(span.endLine + 1);
        comments.leading.insert(comments.leading.end(), inner.begin(), inner.end());
        comments.trailing = std::move(trailing);
    }

    // ------------------------------------------------------------ recovery

    // Skip the rest of a broken statement: to the next newline or ';' outside brackets, or to the
    // '}' that closes the current block (left for the caller).
    void synchronizeStatement() {
        int depth = 0;
        while (!at(Tok::Eof)) {
            Tok k = peek().kind;
            if (depth == 0 && (k == Tok::Newline || k == Tok::Semicolon)) {
                skipNewlines();
                return;
            }
            if (depth == 0 && k == Tok::RBrace) return;
            if (k == Tok::LBrace || k == Tok::LParen || k == Tok::LBracket) ++depth;
            if ((k == Tok::RBrace || k == Tok::RParen || k == Tok::RBracket) && depth > 0) --depth;
            advance();
        }
    }
    // Skip to the next line that starts with one of `starters` (a declaration keyword).
    void synchronizeDeclaration(std::initializer_list<Tok> starters) {
        while (!at(Tok::Eof)) {
            if (at(Tok::Newline)) {
                skipNewlines();
                for (Tok k : starters)
                    if (at(k)) return;
                continue;
            }
            advance();
        }
    }

    // ------------------------------------------------------------ grammar

    std::string dottedName(Span& span) {
        const Token& first = expectIdent("name");
        span = first.span;
        std::string name(first.text);
        while (at(Tok::Dot) && (peek(1).kind == Tok::Ident || isKeyword(peek(1).kind))) {
            advance();
            name += ".";
            name += advance().text;
        }
        span = from(span);
        return name;
    }

    TypePtr typeExpr();
    std::vector<Param> params(bool capability);
    DeclPtr typeDecl();
    DeclPtr fnDecl();
    DeclPtr agentDecl();
    DeclPtr testDecl();
    DeclPtr capabilityDecl();
    DeclPtr modelDecl();
    DeclPtr inputDecl();

    BlockPtr block();
    StmtPtr statement();

    ExprPtr expr();
    ExprPtr binaryExpr(int minPrecedence);
    ExprPtr unary();
    ExprPtr postfix();
    ExprPtr primary();
    ExprPtr stringLiteral();
    ExprPtr ifExpr();
    ExprPtr forExpr();
    ExprPtr matchExpr();
    void matchArm(MatchExpr& match);
    bool atAskType() const;
    void callArgs(CallExpr& call);
    void callModifiers(CallExpr& call, const Span& start);

    template <class T> std::unique_ptr<T> node(const Span& start) {
        auto n = std::make_unique<T>();
        n->span = start;
        n->id = newId();
        return n;
    }
    ExprPtr binary(BinaryOp op, ExprPtr left, ExprPtr right) {
        auto n = node<BinaryExpr>(left->span);
        n->op = op;
        n->left = std::move(left);
        n->right = std::move(right);
        n->span = from(n->left->span);
        return n;
    }
    template <class T> DeclPtr decl(DeclKind kind, const Span& start, T payload) {
        auto d = std::make_unique<Decl>(Decl{kind, from(start), newId(), {}, std::move(payload)});
        return d;
    }
};

// ---------------------------------------------------------------- types

TypePtr Parser::typeExpr() {
    Span start = peek().span;
    auto t = std::make_unique<TypeExpr>();
    t->id = newId();
    if (at(Tok::Str)) {
        t->kind = TypeKind::Union;
        t->options.push_back(plainString("an enum option"));
        while (accept(Tok::Pipe)) t->options.push_back(plainString("an enum option"));
    } else if (at(Tok::LBrace)) {
        Nest nest(*this);
        advance();
        t->kind = TypeKind::Record;
        skipNewlines();
        while (!at(Tok::RBrace)) {
            const Token& name = expectNameOrKeyword("a field name");
            for (const TypeField& f : t->fields)
                if (f.name == name.text) fail(fmt::format("duplicate field '{}'", name.text), name.span);
            TypeField field;
            field.name = std::string(name.text);
            field.nameSpan = name.span;
            expect(Tok::Colon, "record fields are written name: Type");
            field.type = typeExpr();
            t->fields.push_back(std::move(field));
            skipNewlines();
            if (accept(Tok::Comma)) skipNewlines();
            else if (!at(Tok::RBrace))
                failAt(fmt::format("expected ',' or '}}' in record type, found {}", describeToken(peek())));
        }
        advance();
    } else {
        const Token& name = expectIdent("a type name");
        t->kind = TypeKind::Named;
        t->name = std::string(name.text);
        if (at(Tok::LBracket)) {
            Nest nest(*this);
            advance();
            t->args.push_back(typeExpr());
            while (accept(Tok::Comma)) t->args.push_back(typeExpr());
            expect(Tok::RBracket);
        }
        if (accept(Tok::KwMax)) t->max = intLiteral("a list size bound");
    }
    t->span = from(start);
    return t;
}

// ---------------------------------------------------------------- declarations

std::vector<Param> Parser::params(bool capability) {
    Nest nest(*this);
    expect(Tok::LParen);
    std::vector<Param> out;
    while (!at(Tok::RParen)) {
        const Token& name = expectIdent("a parameter name");
        for (const Param& p : out)
            if (p.name == name.text) fail(fmt::format("duplicate parameter '{}'", name.text), name.span);
        Param p;
        p.name = std::string(name.text);
        expect(Tok::Colon, "parameters need a type, e.g. (name: Str)");
        p.type = typeExpr();
        while (capability && (at(Tok::KwDeny) || at(Tok::KwApprove))) {
            bool deny = advance().kind == Tok::KwDeny;
            std::vector<std::string>& into = deny ? p.deny : p.approve;
            if (accept(Tok::LParen)) {
                into.emplace_back(expectIdent("a tag").text);
                while (accept(Tok::Comma)) into.emplace_back(expectIdent("a tag").text);
                expect(Tok::RParen);
            } else {
                into.emplace_back(expectIdent("a tag").text);
            }
        }
        if (!capability && (at(Tok::KwDeny) || at(Tok::KwApprove)))
            failAt("'deny' and 'approve' belong on capability parameters in the host interface");
        p.span = from(name.span);
        out.push_back(std::move(p));
        if (accept(Tok::Comma)) continue;
        if (!at(Tok::RParen))
            failAt(fmt::format("expected ',' or ')' in parameter list, found {}", describeToken(peek())));
    }
    advance();
    return out;
}

DeclPtr Parser::typeDecl() {
    Span start = advance().span;
    TypeDecl d;
    const Token& name = expectIdent("a type name");
    d.name = std::string(name.text);
    d.nameSpan = name.span;
    expect(Tok::Assign, "type declarations are written type Name = T");
    d.type = typeExpr();
    return decl(DeclKind::Type, start, std::move(d));
}

DeclPtr Parser::fnDecl() {
    Span start = advance().span;
    FnDecl d;
    const Token& name = expectIdent("a function name");
    d.name = std::string(name.text);
    d.nameSpan = name.span;
    d.params = params(false);
    if (accept(Tok::Arrow)) d.ret = typeExpr();
    d.body = block();
    return decl(DeclKind::Fn, start, std::move(d));
}

DeclPtr Parser::agentDecl() {
    Span start = advance().span;
    AgentDecl d;
    const Token& name = expectIdent("an agent name");
    d.name = std::string(name.text);
    d.nameSpan = name.span;
    {
        Nest nest(*this);
        expect(Tok::LBrace);
        skipNewlines();
        bool seenModel = false, seenSystem = false, seenMaxCalls = false;
        while (!at(Tok::RBrace)) {
            auto inner = takeComments(peek().span.line);
            d.innerComments.insert(d.innerComments.end(), inner.begin(), inner.end());
            if (!at(Tok::Ident) && !isKeyword(peek().kind))
                failAt(fmt::format("expected an agent setting (model, system, max_calls), found {}", describeToken(peek())));
            const Token& key = advance();
            expect(Tok::Colon, "agent settings are written key: value");
            auto once = [&](bool& seen) {
                if (seen) fail(fmt::format("duplicate agent setting '{}'", key.text), key.span);
                seen = true;
            };
            if (key.text == "model") {
                once(seenModel);
                const Token& model = expectIdent("a model name");
                d.model = std::string(model.text);
                d.modelSpan = model.span;
            } else if (key.text == "system") {
                once(seenSystem);
                d.system = plainString("system");
            } else if (key.text == "max_calls") {
                once(seenMaxCalls);
                d.maxCalls = intLiteral("max_calls");
            } else {
                fail(fmt::format("unknown agent setting '{}'", key.text), key.span, "valid settings: model, system, max_calls");
            }
            std::string trailing = takeTrailing(lastSpan_.endLine);
            if (!trailing.empty()) d.innerComments.push_back(trailing);
            // Settings are separated by commas or newlines; on one line, by spaces.
            if (accept(Tok::Comma) || at(Tok::Newline) || at(Tok::Semicolon)) skipNewlines();
            else if (!at(Tok::RBrace) && !((at(Tok::Ident) || isKeyword(peek().kind)) && peek(1).kind == Tok::Colon))
                failAt(fmt::format("expected a new line or '}}' after an agent setting, found {}", describeToken(peek())),
                       "put each agent setting on its own line");
        }
        auto inner = takeComments(peek().span.line);
        d.innerComments.insert(d.innerComments.end(), inner.begin(), inner.end());
        advance();
        if (!seenModel) fail(fmt::format("agent '{}' needs a 'model:' setting", d.name), start, "add a line such as: model: llm");
    }
    return decl(DeclKind::Agent, start, std::move(d));
}

DeclPtr Parser::testDecl() {
    Span start = advance().span;
    TestDecl d;
    d.name = plainString("the test name");
    if (at(Tok::Ident) && peek().text == "fixtures") {
        advance();
        d.fixtures = plainString("the fixtures path");
    }
    d.body = block();
    return decl(DeclKind::Test, start, std::move(d));
}

DeclPtr Parser::capabilityDecl() {
    Span start = advance().span;
    CapabilityDecl d;
    d.name = dottedName(d.nameSpan);
    if (d.name.find('.') == std::string::npos)
        fail("capability names must be namespaced, e.g. email.send", d.nameSpan);
    d.params = params(true);
    if (accept(Tok::Arrow)) d.ret = typeExpr();
    Span signatureEnd = lastSpan_;
    std::string signatureTrailing = takeTrailing(signatureEnd.endLine);
    endStatement("attributes (tags, clears, cost, idempotent, approval always) go on the following lines");
    auto isAttribute = [&] {
        return at(Tok::KwTags) || at(Tok::KwClears) || at(Tok::KwCost) || at(Tok::KwIdempotent) || at(Tok::KwApproval);
    };
    while (isAttribute()) {
        auto inner = takeComments(peek().span.line);
        d.innerComments.insert(d.innerComments.end(), inner.begin(), inner.end());
        Tok kind = advance().kind;
        if (kind == Tok::KwTags || kind == Tok::KwClears) {
            std::vector<std::string>& into = kind == Tok::KwTags ? d.tags : d.clears;
            into.emplace_back(expectIdent("a tag").text);
            while (accept(Tok::Comma)) into.emplace_back(expectIdent("a tag").text);
        } else if (kind == Tok::KwCost) {
            d.cost = number();
        } else if (kind == Tok::KwIdempotent) {
            d.idempotent = true;
        } else {
            expect(Tok::KwAlways, "the only approval attribute is: approval always");
            d.approvalAlways = true;
        }
        std::string trailing = takeTrailing(lastSpan_.endLine);
        if (!trailing.empty()) d.innerComments.push_back(trailing);
        endStatement("put each capability attribute on its own line");
    }
    DeclPtr out = decl(DeclKind::Capability, start, std::move(d));
    out->span = Span{start.line, start.col, signatureEnd.endLine, signatureEnd.endCol};
    out->comments.trailing = std::move(signatureTrailing);
    return out;
}

DeclPtr Parser::modelDecl() {
    Span start = advance().span;
    ModelDecl d;
    const Token& name = expectIdent("a model name");
    d.name = std::string(name.text);
    d.nameSpan = name.span;
    if (accept(Tok::KwCost)) d.cost = number();
    return decl(DeclKind::Model, start, std::move(d));
}

DeclPtr Parser::inputDecl() {
    Span start = advance().span;
    InputDecl d;
    const Token& name = expectIdent("an input name");
    d.name = std::string(name.text);
    d.nameSpan = name.span;
    expect(Tok::KwTags, "inputs are declared as: input NAME tags TAG, TAG");
    d.tags.emplace_back(expectIdent("a tag").text);
    while (accept(Tok::Comma)) d.tags.emplace_back(expectIdent("a tag").text);
    return decl(DeclKind::Input, start, std::move(d));
}

std::unique_ptr<Program> Parser::program() {
    auto prog = std::make_unique<Program>();
    prog->file = std::string(ctx_.file);
    try {
        skipNewlines();
        prog->headerComments = takeComments(peek().span.line);
        try {
            if (!at(Tok::KwProgram))
                failAt("a Remit program must start with 'program <name>'", "add a first line such as: program my_workflow");
            Span start = advance().span;
            prog->name = std::string(expectIdent("a program name").text);
            prog->span = from(start);
            prog->programTrailing = takeTrailing(lastSpan_.endLine);
            endStatement();
        } catch (SyntaxError&) {
            // Without a header, read on as if there were one: later errors are still worth seeing.
            while (!at(Tok::Eof) && !at(Tok::KwUses) && !at(Tok::KwBudget) && !at(Tok::KwFn) && !at(Tok::KwType) &&
                   !at(Tok::KwAgent) && !at(Tok::KwTest))
                advance();
        }
        while (at(Tok::KwUses) || at(Tok::KwBudget)) {
            try {
                auto leading = takeComments(peek().span.line);
                prog->usesComments.insert(prog->usesComments.end(), leading.begin(), leading.end());
                if (accept(Tok::KwUses)) {
                    if (!prog->usesTrailing.empty()) prog->usesComments.push_back(std::move(prog->usesTrailing));
                    do {
                        UseEntry entry;
                        entry.name = dottedName(entry.span);
                        prog->uses.push_back(std::move(entry));
                    } while (accept(Tok::Comma));
                    prog->usesTrailing = takeTrailing(lastSpan_.endLine);
                } else {
                    Span budget = advance().span;
                    if (prog->budgetUsd) fail("duplicate 'budget' line", budget, "a program has one budget");
                    expect(Tok::KwUsd, "budgets are written: budget usd 0.50");
                    Span amount = peek().span;
                    prog->budgetUsd = number();
                    if (*prog->budgetUsd < 0) fail("a budget cannot be negative", from(amount), "write budget usd 0.50");
                    prog->budgetSpan = from(budget);
                    prog->budgetTrailing = takeTrailing(lastSpan_.endLine);
                }
                endStatement();
            } catch (SyntaxError&) {
                synchronizeStatement();
            }
        }
        while (!at(Tok::Eof)) {
            auto leading = takeComments(peek().span.line);
            try {
                DeclPtr d;
                switch (peek().kind) {
                    case Tok::KwType: d = typeDecl(); break;
                    case Tok::KwFn: d = fnDecl(); break;
                    case Tok::KwAgent: d = agentDecl(); break;
                    case Tok::KwTest: d = testDecl(); break;
                    case Tok::KwUses:
                    case Tok::KwBudget:
                        failAt(fmt::format("'{}' must appear in the program header, before any declaration", peek().text),
                               "move it up, right after the 'program' line");
                    default:
                        failWordHabit(pos_, true);  // def, class, import, ...
                        failAt(fmt::format("expected a declaration (type, fn, agent, test), found {}", describeToken(peek())));
                }
                d->comments.leading = std::move(leading);
                attachComments(d->comments, d->span);
                prog->decls.push_back(std::move(d));
                endStatement();
            } catch (SyntaxError&) {
                synchronizeDeclaration({Tok::KwType, Tok::KwFn, Tok::KwAgent, Tok::KwTest, Tok::KwUses, Tok::KwBudget});
            }
        }
        prog->endComments = takeComments(UINT32_MAX);
    } catch (ParseStop&) {
    }
    prog->nodeCount = ctx_.nextId;
    return prog;
}

std::unique_ptr<HostInterface> Parser::host() {
    auto h = std::make_unique<HostInterface>();
    h->file = std::string(ctx_.file);
    try {
        skipNewlines();
        while (!at(Tok::Eof)) {
            auto leading = takeComments(peek().span.line);
            try {
                DeclPtr d;
                bool ownsLine = true;
                switch (peek().kind) {
                    case Tok::KwType: d = typeDecl(); break;
                    case Tok::KwCapability: d = capabilityDecl(); ownsLine = false; break;
                    case Tok::KwModel: d = modelDecl(); break;
                    case Tok::KwInput: d = inputDecl(); break;
                    default:
                        failAt(fmt::format("expected a host declaration (type, capability, model, input), found {}",
                                           describeToken(peek())));
                }
                d->comments.leading = std::move(leading);
                if (ownsLine) {
                    attachComments(d->comments, d->span);
                    endStatement("put each host declaration on its own line");
                }
                h->decls.push_back(std::move(d));
            } catch (SyntaxError&) {
                synchronizeDeclaration({Tok::KwType, Tok::KwCapability, Tok::KwModel, Tok::KwInput});
            }
        }
        h->endComments = takeComments(UINT32_MAX);
    } catch (ParseStop&) {
    }
    return h;
}

// ---------------------------------------------------------------- statements

BlockPtr Parser::block() {
    Nest nest(*this);
    Span open = expect(Tok::LBrace, "blocks are written with braces").span;
    auto b = std::make_unique<Block>();
    b->id = newId();
    skipNewlines();
    while (!at(Tok::RBrace)) {
        if (at(Tok::Eof)) {
            // Every enclosing block is unclosed too; one report is enough.
            record(DiagCode::E0100, "unclosed block: expected '}'", open, "add the missing '}'");
            throw ParseStop{};
        }
        auto leading = takeComments(peek().span.line);
        size_t outerStart = stmtStart_;
        stmtStart_ = pos_;
        struct Restore {
            size_t& slot;
            size_t value;
            ~Restore() { slot = value; }
        } restore{stmtStart_, outerStart};
        try {
            StmtPtr s = statement();
            s->comments.leading = std::move(leading);
            attachComments(s->comments, s->span);
            b->stmts.push_back(std::move(s));
            endStatement();
        } catch (SyntaxError&) {
            synchronizeStatement();
        }
    }
    b->closingComments = takeComments(peek().span.line);
    advance();
    b->span = from(open);
    return b;
}

StmtPtr Parser::statement() {
    Span start = peek().span;
    if (at(Tok::KwLet) || at(Tok::KwVar)) {
        auto s = std::make_unique<Stmt>(StmtKind::Let);
        s->id = newId();
        s->isVar = advance().kind == Tok::KwVar;
        const Token& name = expectIdent("a variable name");
        s->name = std::string(name.text);
        s->nameSpan = name.span;
        if (accept(Tok::Colon)) s->type = typeExpr();
        expect(Tok::Assign, "variables must be initialised: let x = ...");
        s->value = expr();
        s->span = from(start);
        return s;
    }
    if (at(Tok::KwReturn)) {
        auto s = std::make_unique<Stmt>(StmtKind::Return);
        s->id = newId();
        advance();
        if (!(at(Tok::Newline) || at(Tok::Semicolon) || at(Tok::RBrace) || at(Tok::Eof))) s->value = expr();
        s->span = from(start);
        return s;
    }
    if (at(Tok::KwExpect)) {
        auto s = std::make_unique<Stmt>(StmtKind::Expect);
        s->id = newId();
        advance();
        s->value = expr();
        if (accept(Tok::Comma)) s->message = plainString("the expect message");
        s->span = from(start);
        return s;
    }
    if (at(Tok::KwBreak)) {
        auto s = std::make_unique<Stmt>(StmtKind::Break);
        s->id = newId();
        advance();
        s->span = from(start);
        return s;
    }
    // `total += n`, `i++`, `++i` (never valid Remit: `--i` is, a double negation).
    auto adjacent = [](const Token& a, const Token& b) {
        return a.span.line == b.span.line && a.span.endCol == b.span.col;
    };
    auto arithmetic = [](Tok k) {
        return k == Tok::Plus || k == Tok::Minus || k == Tok::Star || k == Tok::Slash || k == Tok::Percent;
    };
    auto ends = [](Tok k) { return k == Tok::Newline || k == Tok::Semicolon || k == Tok::RBrace || k == Tok::Eof; };
    if (at(Tok::Ident) && arithmetic(peek(1).kind) && peek(2).kind == Tok::Assign && adjacent(peek(1), peek(2))) {
        size_t target = pos_;
        advance();
        advance();
        advance();
        size_t rhsFirst = pos_;
        expr();
        HabitNames names{{"name", std::string(tok(target).text)}, {"op", std::string(tok(target + 1).text)}};
        if (auto rhs = snippet(rhsFirst, pos_ - 1)) {
            // `total -= a + b` is total - (a + b)
            bool group = tok(target + 1).kind != Tok::Plus && rhs->find(' ') != std::string::npos;
            names.emplace_back("rhs", group ? "(" + *rhs + ")" : *rhs);
        }
        failHabit(Habit::CompoundAssign, fmt::format("{}=", tok(target + 1).text), names,
                  Span{tok(target + 1).span.line, tok(target + 1).span.col, tok(target + 2).span.endLine,
                       tok(target + 2).span.endCol});
    }
    bool postfixStep = at(Tok::Ident) && (peek(1).kind == Tok::Plus || peek(1).kind == Tok::Minus) &&
                       peek(2).kind == peek(1).kind && adjacent(peek(1), peek(2)) && ends(peek(3).kind);
    bool prefixStep =
        at(Tok::Plus) && peek(1).kind == Tok::Plus && adjacent(peek(), peek(1)) && peek(2).kind == Tok::Ident;
    if (postfixStep || prefixStep) {
        const Token& target = postfixStep ? peek() : peek(2);
        const Token& op = postfixStep ? peek(1) : peek();
        HabitNames names{{"name", std::string(target.text)}, {"op", std::string(op.text)}};
        failHabit(Habit::Increment, fmt::format("{}{}", op.text, op.text), names,
                  Span{op.span.line, op.span.col, op.span.line, op.span.endCol + 1});
    }
    if (at(Tok::Ident) && peek(1).kind == Tok::Assign) {
        auto s = std::make_unique<Stmt>(StmtKind::Assign);
        s->id = newId();
        const Token& name = advance();
        s->name = std::string(name.text);
        s->nameSpan = name.span;
        advance();
        s->value = expr();
        s->span = from(start);
        return s;
    }
    if (at(Tok::Ident) && peek(1).kind == Tok::Colon)
        failAt("expected a statement, found a record field",
               "braces after =>, if or else open a block; write a record value in parentheses: ({ a: 1 })");
    auto s = std::make_unique<Stmt>(StmtKind::Expr);
    s->id = newId();
    s->value = expr();
    if (at(Tok::Assign))
        failAt("only a variable can be assigned to", "to change a field, rebuild the record: r = {a: r.a, b: 2}");
    s->span = from(start);
    return s;
}

// ---------------------------------------------------------------- habits of other languages

// A lambda from token `first`, its parameters and its body's tokens: inside `map`/`filter` (a
// function or a method) the hint is the `for` that does the same, else a `for` or a named fn.
void Parser::failLambda(size_t first, std::string params, size_t bodyFirst, size_t bodyLast) {
    // A braced body `{ return x * 2 }` is quoted without its braces and its `return`.
    if (bodyFirst <= bodyLast && tok(bodyFirst).kind == Tok::LBrace && tok(bodyLast).kind == Tok::RBrace) {
        ++bodyFirst;
        --bodyLast;
        if (tok(bodyFirst).kind == Tok::KwReturn) ++bodyFirst;
    }
    std::string param = params.substr(0, params.find(','));
    HabitNames names;
    if (!param.empty()) names.emplace_back("arg", param);
    addName(names, "body", snippet(bodyFirst, bodyLast));
    Habit habit = Habit::Lambda;
    std::string word = std::string(tok(first).text);
    if (!openCalls_.empty()) {
        const OpenCall& call = openCalls_.back();
        const std::vector<std::string>& callee = *call.callee;
        const std::string& last = callee.back();
        Habit inCall = findHabit(HabitTrigger::Call, callee.size() >= 2 ? "." + last : last);
        if (inCall == Habit::Map || inCall == Habit::Filter || inCall == Habit::Reduce) {
            habit = inCall;
            word = callee.size() >= 2 ? "." + last : last;
            if (callee.size() >= 2) {  // xs.map(x => ...): the list is the object
                std::string object;
                for (size_t i = 0; i + 1 < callee.size(); ++i) object += (i ? "." : "") + callee[i];
                names.emplace_back("list", object);
            } else if (call.firstArgBegin != std::string::npos) {  // map(xs, x => ...)
                addName(names, "list", snippet(call.firstArgBegin, call.firstArgEnd));
            } else if (at(Tok::Comma)) {  // map(lambda x: ..., xs)
                advance();
                size_t listFirst = pos_;
                expr();
                addName(names, "list", snippet(listFirst, pos_ - 1));
            }
        }
    }
    failHabit(habit, word, names, tok(first).span);
}

// `a..b`, `a..<b`, `a..=b`, `a...b` from token `lowerFirst`; the parser stands at the first dot.
void Parser::failRange(size_t lowerFirst) {
    size_t dots = pos_;
    advance();
    advance();
    std::string word = "..";
    if (at(Tok::Dot))
        word = "...";
    else if (at(Tok::Less))
        word = "..<";
    else if (at(Tok::Assign))
        word = "..=";
    if (word != "..") advance();
    size_t upperFirst = pos_;
    unary();
    size_t upperLast = pos_ - 1;
    // `..=` and `...` include the upper end (Rust, Swift, Ruby); `..` and `..<` do not.
    int64_t inclusive = word == "..=" || word == "..." ? 1 : 0;
    std::string var = forVar_.empty() ? "i" : forVar_;
    bool lowerLiteral = dots == lowerFirst + 1 && tok(lowerFirst).kind == Tok::Int;
    bool upperLiteral = upperFirst == upperLast && tok(upperFirst).kind == Tok::Int;
    std::string lower = snippet(lowerFirst, dots - 1).value_or("a");
    std::string upper = snippet(upperFirst, upperLast).value_or("b");
    std::string form;
    if (lowerLiteral && upperLiteral) {
        int64_t low = tok(lowerFirst).intValue,
                count = std::max<int64_t>(0, tok(upperFirst).intValue - low + inclusive);
        form = low == 0 ? fmt::format("range({})", count)
                        : fmt::format("for step in range({}) {{ let {} = step + {} ... }}", count, var, low);
    } else if (lowerLiteral && tok(lowerFirst).intValue == 0) {
        form = fmt::format("for {0} in range(100) if {0} {1} {2} {{ ... }}, with 100 a bound on {2}", var,
                           inclusive ? "<=" : "<", upper);
    } else {
        form = fmt::format(
            "for step in range(100) if step {0} {1} - {2} {{ let {3} = step + {2} ... }}, with 100 a bound on {1} - "
            "{2}",
            inclusive ? "<=" : "<", upper, lower, var);
    }
    failHabit(Habit::RangeOperator, word, {{"form", form}}, tok(dots).span);
}

// `for (i = 0; i < n; i++)` and `for (const x of xs)`; the parser stands at the `(`.
void Parser::failCFor(size_t forIndex) {
    size_t open = pos_, close = matching(open);
    if (close == std::string::npos) failAt("expected a loop variable, found '('");
    std::string form = "for i in range(10) { ... }";
    // for (const x of xs) / for (x in xs)
    for (size_t k = open + 1; k < close; ++k) {
        if ((tok(k).kind == Tok::KwIn || (tok(k).kind == Tok::Ident && tok(k).text == "of")) &&
            tok(k - 1).kind == Tok::Ident) {
            form = fmt::format("for {} in {} {{ ... }}", tok(k - 1).text, snippet(k + 1, close - 1).value_or("xs"));
            failHabit(
                Habit::CFor, "for (", {{"form", form}},
                Span{tok(forIndex).span.line, tok(forIndex).span.col, tok(close).span.endLine, tok(close).span.endCol});
        }
    }
    // for (init; cond; step): the variable is the name assigned in init, the bound what cond compares it with.
    size_t semi1 = std::string::npos, semi2 = std::string::npos;
    int depth = 0;
    for (size_t k = open + 1; k < close; ++k) {
        Tok kind = tok(k).kind;
        if (kind == Tok::LParen || kind == Tok::LBracket) ++depth;
        if (kind == Tok::RParen || kind == Tok::RBracket) --depth;
        if (depth == 0 && kind == Tok::Semicolon) (semi1 == std::string::npos ? semi1 : semi2) = k;
    }
    if (semi2 != std::string::npos) {
        std::string var;
        int64_t low = 0;
        bool lowKnown = false;
        for (size_t k = open + 1; k + 1 < semi1; ++k)
            if (tok(k).kind == Tok::Ident && tok(k + 1).kind == Tok::Assign) {
                var = std::string(tok(k).text);
                lowKnown = k + 3 == semi1 && tok(k + 2).kind == Tok::Int;
                if (lowKnown) low = tok(k + 2).intValue;
                break;
            }
        size_t c = semi1 + 1;
        bool compares = !var.empty() && c + 2 < semi2 && tok(c).text == var &&
                        (tok(c + 1).kind == Tok::Less || tok(c + 1).kind == Tok::LessEq);
        if (compares) {
            int64_t inclusive = tok(c + 1).kind == Tok::LessEq ? 1 : 0;
            size_t b = c + 2, e = semi2 - 1;
            std::string bound = snippet(b, e).value_or("n");
            // len(xs), xs.length, xs.size(), xs.len(), xs.count: loop over the list itself.
            std::optional<std::string> list;
            if (tok(b).text == "len" && tok(b + 1).kind == Tok::LParen && matching(b + 1) == e)
                list = snippet(b + 2, e - 1);
            for (size_t k = b; k < e; ++k) {
                std::string_view m = tok(k + 1).text;
                if (tok(k).kind == Tok::Dot && k > b && (m == "length" || m == "size" || m == "len" || m == "count")) {
                    list = snippet(b, k - 1);
                    break;
                }
            }
            if (list && lowKnown && low == 0)
                form = fmt::format("for x in {} {{ ... }}", *list);
            else if (b == e && tok(b).kind == Tok::Int && lowKnown)
                form = low == 0 ? fmt::format("for {} in range({}) {{ ... }}", var, tok(b).intValue + inclusive)
                                : fmt::format("for step in range({}) {{ let {} = step + {} ... }}",
                                              std::max<int64_t>(0, tok(b).intValue + inclusive - low), var, low);
            else if (lowKnown && low != 0)
                form = fmt::format(
                    "for step in range(100) if step + {0} {1} {2} {{ let {3} = step + {0} ... }}, with 100 a bound on "
                    "{2}",
                    low, inclusive ? "<=" : "<", bound, var);
            else
                form = fmt::format("for {0} in range(100) if {0} {1} {2} {{ ... }}, with 100 a bound on {2}", var,
                                   inclusive ? "<=" : "<", bound);
        } else if (!var.empty()) {
            form = fmt::format("for {} in range(10) {{ ... }}", var);
        }
    }
    failHabit(Habit::CFor, "for (", {{"form", form}},
              Span{tok(forIndex).span.line, tok(forIndex).span.col, tok(close).span.endLine, tok(close).span.endCol});
}

// `{"a": 1, "b": x}` from its `{`: a record when the keys are names, else a list of records.
void Parser::failDict(size_t open) {
    std::vector<std::pair<std::string, std::string>> entries;
    bool namesOnly = true;
    while (at(Tok::Str) && peek(1).kind == Tok::Colon) {
        const std::vector<StrPiece>& key = pieces(peek());
        std::string text = key.size() == 1 && !key[0].isExpr ? key[0].text : "key";
        bool isName = !text.empty() && (std::isalpha(static_cast<unsigned char>(text[0])) || text[0] == '_');
        for (char c : text) isName = isName && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
        namesOnly = namesOnly && isName;
        advance();
        advance();
        size_t valueFirst = pos_;
        expr();
        entries.emplace_back(text, snippet(valueFirst, pos_ - 1).value_or("..."));
        skipNewlines();
        if (!accept(Tok::Comma)) break;
        skipNewlines();
    }
    // Past the closing brace, so recovery does not take it for the end of the enclosing block.
    accept(Tok::RBrace);
    std::string form;
    if (namesOnly) {
        for (size_t i = 0; i < entries.size() && i < 3; ++i)
            form += fmt::format("{}{}: {}", i ? ", " : "", entries[i].first, entries[i].second);
        form = fmt::format("{{ {}{} }}", form, entries.size() > 3 ? ", ..." : "");
    } else {
        const auto& [key, value] = entries.empty() ? std::pair<std::string, std::string>{"key", "..."} : entries[0];
        form = fmt::format("a list of records, [{{ key: \"{}\", value: {} }}, ...]", key, value);
    }
    failHabit(Habit::DictLiteral, "{", {{"form", form}}, tok(open).span);
}

// `[x * 2 for x in xs if x > 0]`; the parser stands at the `for`.
void Parser::failComprehension(size_t itemFirst, size_t itemLast) {
    size_t forIndex = pos_;
    advance();
    std::string var = std::string(expectIdent("a loop variable").text);
    expect(Tok::KwIn);
    size_t listFirst = pos_;
    expr();
    std::string list = snippet(listFirst, pos_ - 1).value_or("xs");
    std::string item = snippet(itemFirst, itemLast).value_or(var);
    std::string form = fmt::format("for {} in {} {{ {} }}", var, list, item);
    if (accept(Tok::KwIf)) {
        size_t condFirst = pos_;
        expr();
        form = fmt::format("for {} in {} if {} {{ {} }}", var, list, snippet(condFirst, pos_ - 1).value_or("c"), item);
    }
    failHabit(Habit::Comprehension, "for", {{"form", form}}, tok(forIndex).span);
}

// `", ".join(xs)`, `"abc".upper()`: a method called on a value that is not a name; the parser
// stands at the `(`. A builtin's name gets the call with the value first (join's separator goes
// second); anything else the generic error.
void Parser::failMethodOnValue(size_t objectFirst, size_t dot) {
    std::string method = std::string(tok(dot + 1).text);
    bool builtin = false;
    for (const BuiltinInfo& b : kBuiltins)  // startsWith is startswith
        if (b.name.size() == method.size() && std::equal(method.begin(), method.end(), b.name.begin(),
                                                         [](char x, char y) { return std::tolower(x) == y; })) {
            builtin = true;
            method = std::string(b.name);
        }
    if (!builtin) failAt("only named functions and capabilities can be called", "call a function by name: f(x)");
    size_t open = pos_, close = matching(open);
    std::string object = snippet(objectFirst, dot - 1).value_or("x");
    std::optional<std::string> args =
        close == std::string::npos || close == open + 1 ? std::nullopt : snippet(open + 1, close - 1);
    std::string form = method == "join" && args ? fmt::format("join({}, {})", *args, object)
                       : args                   ? fmt::format("{}({}, {})", method, object, *args)
                                                : fmt::format("{}({})", method, object);
    failHabit(Habit::MethodBuiltin, method, {{"form", form}}, tok(dot + 1).span);
}

// ---------------------------------------------------------------- expressions

ExprPtr Parser::expr() {
    size_t first = pos_;
    ExprPtr e = binaryExpr(1);
    if (at(Tok::Habit) && peek().habit == Habit::Ternary) {  // c ? a : b
        size_t question = pos_;
        advance();
        size_t thenFirst = pos_;
        expr();
        size_t thenLast = pos_ - 1;
        HabitNames names;
        addName(names, "cond", snippet(first, question - 1));
        addName(names, "lhs", snippet(thenFirst, thenLast));
        if (accept(Tok::Colon)) {
            size_t elseFirst = pos_;
            binaryExpr(1);
            // a ? b : c ? d : e — the else part is a conditional itself: a stand-in shows the shape
            if (!(at(Tok::Habit) && peek().habit == Habit::Ternary))
                addName(names, "rhs", snippet(elseFirst, pos_ - 1));
        }
        failHabit(Habit::Ternary, "?", names, tok(question).span);
    }
    return e;
}

// The binary operator at the current token and its precedence (spec §6: or 1, and 2, then `not`
// at 3 as a prefix, comparisons and `in` 4, + - 5, * / % 6); 0 when the token is none.
static int binaryOperator(const Token& token, BinaryOp& op) {
    // Other languages' spellings parse as the Remit operator, so the habit can quote both operands.
    if (token.kind == Tok::Habit) {
        switch (token.habit) {
            case Habit::OrOr:
                op = BinaryOp::Or;
                return 1;
            case Habit::AndAnd:
                op = BinaryOp::And;
                return 2;
            case Habit::StrictEq:
                op = BinaryOp::Eq;
                return 4;
            case Habit::StrictNe:
                op = BinaryOp::Ne;
                return 4;
            default:
                return 0;
        }
    }
    switch (token.kind) {
        case Tok::KwOr: op = BinaryOp::Or; return 1;
        case Tok::KwAnd: op = BinaryOp::And; return 2;
        case Tok::EqEq: op = BinaryOp::Eq; return 4;
        case Tok::NotEq: op = BinaryOp::Ne; return 4;
        case Tok::Less: op = BinaryOp::Lt; return 4;
        case Tok::LessEq: op = BinaryOp::Le; return 4;
        case Tok::Greater: op = BinaryOp::Gt; return 4;
        case Tok::GreaterEq: op = BinaryOp::Ge; return 4;
        case Tok::KwIn: op = BinaryOp::In; return 4;
        case Tok::Plus: op = BinaryOp::Add; return 5;
        case Tok::Minus: op = BinaryOp::Sub; return 5;
        case Tok::Star: op = BinaryOp::Mul; return 6;
        case Tok::Slash: op = BinaryOp::Div; return 6;
        case Tok::Percent: op = BinaryOp::Mod; return 6;
        default: return 0;
    }
}

// Precedence climbing over the whole binary grammar: one call per operand instead of one per
// precedence level. Operators are left-associative, and comparisons do not chain.
ExprPtr Parser::binaryExpr(int minPrecedence) {
    constexpr int kNotPrecedence = 3, kComparison = 4;
    size_t leftFirst = pos_;
    ExprPtr left;
    if (at(Tok::KwNot) && minPrecedence <= kNotPrecedence) {
        Nest nest(*this);
        auto n = node<UnaryExpr>(advance().span);
        n->op = UnaryOp::Not;
        n->operand = binaryExpr(kNotPrecedence);
        n->span = from(n->span);
        left = std::move(n);
    } else {
        left = unary();
    }
    BinaryOp op;
    for (int precedence; (precedence = binaryOperator(peek(), op)) >= minPrecedence && precedence > 0;) {
        size_t opIndex = pos_;
        advance();
        left = binary(op, std::move(left), binaryExpr(precedence + 1));
        if (tok(opIndex).kind == Tok::Habit) {
            HabitNames names;
            addName(names, "lhs", snippet(leftFirst, opIndex - 1));
            addName(names, "rhs", snippet(opIndex + 1, pos_ - 1));
            failHabit(tok(opIndex).habit, tok(opIndex).text, names, tok(opIndex).span);
        }
        BinaryOp next;
        if (precedence == kComparison && binaryOperator(peek(), next) == kComparison)
            failAt("comparisons cannot be chained", "use 'and': a < b and b < c");
    }
    return left;
}

ExprPtr Parser::unary() {
    if (at(Tok::Habit) && peek().habit == Habit::Bang) {  // `!x`: quote the operand it negates
        size_t bang = pos_;
        advance();
        unary();
        HabitNames names;
        addName(names, "arg", snippet(bang + 1, pos_ - 1));
        failHabit(Habit::Bang, "!", names, tok(bang).span);
    }
    if (!at(Tok::Minus)) return postfix();
    Nest nest(*this);
    auto n = node<UnaryExpr>(advance().span);
    n->op = UnaryOp::Neg;
    n->operand = unary();
    n->span = from(n->span);
    return n;
}

// The dotted path of a callee (`f`, `ns.cap`, `Agent.ask`), or false when `e` is not one.
static bool calleePath(const Expr& e, std::vector<std::string>& path) {
    if (e.kind == ExprKind::Name) {
        path.push_back(e.as<NameExpr>().name);
        return true;
    }
    if (e.kind == ExprKind::Field) {
        const auto& f = e.as<FieldExpr>();
        if (!calleePath(*f.object, path)) return false;
        path.push_back(f.name);
        return true;
    }
    return false;
}

ExprPtr Parser::postfix() {
    Span start = peek().span;
    size_t first = pos_;
    ExprPtr e = primary();
    size_t lastDot = std::string::npos;
    while (true) {
        if (at(Tok::Dot) && peek(1).kind == Tok::Dot) failRange(first);  // 0..10
        if (at(Tok::Dot)) {
            lastDot = pos_;
            advance();
            const Token& name = expectNameOrKeyword("a field name");
            auto f = node<FieldExpr>(start);
            f->object = std::move(e);
            f->name = std::string(name.text);
            f->nameSpan = name.span;
            f->span = from(start);
            e = std::move(f);
        } else if (at(Tok::LBracket)) {
            Nest nest(*this);
            advance();
            auto ix = node<IndexExpr>(start);
            ix->object = std::move(e);
            ix->index = expr();
            expect(Tok::RBracket);
            ix->span = from(start);
            e = std::move(ix);
        } else if (at(Tok::LParen)) {
            auto call = node<CallExpr>(start);
            if (!calleePath(*e, call->callee)) {
                if (e->kind == ExprKind::Field && lastDot != std::string::npos) failMethodOnValue(first, lastDot);
                failAt("only named functions and capabilities can be called", "call a function by name: f(x)");
            }
            call->calleeSpan = e->span;
            callArgs(*call);
            call->callSpan = from(start);
            callModifiers(*call, start);
            e = std::move(call);
        } else {
            return e;
        }
    }
}

// Does the first argument of `X.ask(` start a type? An uppercase name (`Summary`, `List[...]`),
// a record type, or a union of string literals. Anything else is an ordinary argument (and the
// checker says the type is missing).
bool Parser::atAskType() const {
    const Token& t = peek();
    if (t.kind == Tok::Ident) return !t.text.empty() && t.text[0] >= 'A' && t.text[0] <= 'Z' && peek(1).kind != Tok::LParen;
    if (t.kind == Tok::LBrace) return peek(1).kind == Tok::RBrace || peek(2).kind == Tok::Colon;
    if (t.kind == Tok::Str) return peek(1).kind == Tok::Pipe;
    return false;
}

void Parser::callArgs(CallExpr& call) {
    Nest nest(*this);
    expect(Tok::LParen);
    if (call.callee.size() == 2 && call.callee[1] == "ask" && atAskType()) {
        call.askType = typeExpr();
        if (!at(Tok::RParen) && !accept(Tok::Comma))
            failAt(fmt::format("expected ',' after the output type, found {}", describeToken(peek())),
                   "write X.ask(Type, \"prompt\", context: value)");
    }
    openCalls_.push_back(OpenCall{&call.callee});
    struct Pop {
        std::vector<OpenCall>& calls;
        ~Pop() { calls.pop_back(); }
    } pop{openCalls_};
    bool named = false;
    while (!at(Tok::RParen)) {
        CallArg arg;
        Span start = peek().span;
        size_t argFirst = pos_;
        if (at(Tok::Ident) && peek(1).kind == Tok::Colon) {
            arg.name = std::string(advance().text);
            advance();
            named = true;
        } else if (named) {
            failAt("positional arguments must come before named arguments", "move this argument before the named ones");
        }
        arg.value = expr();
        arg.span = from(start);
        if (call.args.empty()) {
            openCalls_.back().firstArgBegin = argFirst;
            openCalls_.back().firstArgEnd = pos_ - 1;
        }
        call.args.push_back(std::move(arg));
        if (accept(Tok::Comma)) continue;
        if (!at(Tok::RParen))
            failAt(fmt::format("expected ',' or ')' in argument list, found {}", describeToken(peek())));
    }
    advance();
}

void Parser::callModifiers(CallExpr& call, const Span& start) {
    while (true) {
        if (at(Tok::KwRetry)) {
            if (call.retry) failAt("duplicate 'retry'", "a call has at most one retry modifier");
            advance();
            call.retry = intLiteral("the retry count");
        } else if (at(Tok::KwTimeout)) {
            if (call.timeoutSeconds) failAt("duplicate 'timeout'", "a call has at most one timeout modifier");
            advance();
            if (!at(Tok::Duration))
                failAt(fmt::format("expected a duration such as 10s or 500ms after 'timeout', found {}", describeToken(peek())));
            call.timeoutSeconds = advance().floatValue;
        } else if (at(Tok::KwElse)) {
            if (call.fallback) failAt("duplicate 'else'", "a call has at most one fallback");
            advance();
            call.fallback = unary();
        } else {
            break;
        }
    }
    call.span = from(start);
}

ExprPtr Parser::primary() {
    const Token& t = peek();
    switch (t.kind) {
        case Tok::Int: {
            auto n = node<IntLit>(t.span);
            n->value = advance().intValue;
            return n;
        }
        case Tok::Float: {
            auto n = node<FloatLit>(t.span);
            n->value = advance().floatValue;
            return n;
        }
        case Tok::Duration:
            failAt("durations are only allowed after 'timeout'", "write a number without the unit");
        case Tok::Str: return stringLiteral();
        case Tok::KwTrue:
        case Tok::KwFalse: {
            auto n = node<BoolLit>(t.span);
            n->value = advance().kind == Tok::KwTrue;
            return n;
        }
        case Tok::KwIf: return ifExpr();
        case Tok::KwFor: return forExpr();
        case Tok::KwMatch: return matchExpr();
        case Tok::KwMax:  // the builtin max(a, b) shares its name with the `max` keyword
        case Tok::Ident: {
            // Lambdas: `x => ...` and Python's `lambda x: ...` (a name is never followed by those).
            if (peek(1).kind == Tok::FatArrow) {
                size_t first = pos_;
                advance();
                advance();
                size_t body = pos_;
                if (at(Tok::LBrace))
                    pos_ = std::min(matching(pos_), toks_.size() - 2) + 1;
                else
                    expr();
                failLambda(first, std::string(t.text), body, pos_ - 1);
            }
            if (t.text == "lambda" && (peek(1).kind == Tok::Ident || peek(1).kind == Tok::Colon)) {
                size_t first = pos_;
                advance();
                std::string params;
                while (at(Tok::Ident) || at(Tok::Comma)) {
                    if (at(Tok::Ident))
                        params += params.empty() ? std::string(peek().text) : ", " + std::string(peek().text);
                    advance();
                }
                expect(Tok::Colon);
                size_t body = pos_;
                expr();
                failLambda(first, params, body, pos_ - 1);
            }
            auto n = node<NameExpr>(t.span);
            n->name = std::string(advance().text);
            return n;
        }
        case Tok::LParen: {
            // `(a, b) => ...`
            if (size_t close = matching(pos_); close != std::string::npos && tok(close + 1).kind == Tok::FatArrow) {
                size_t first = pos_;
                std::string params;
                for (size_t k = first + 1; k < close; ++k)
                    if (tok(k).kind == Tok::Ident && (tok(k - 1).kind == Tok::LParen || tok(k - 1).kind == Tok::Comma))
                        params += params.empty() ? std::string(tok(k).text) : ", " + std::string(tok(k).text);
                pos_ = close + 2;
                size_t body = pos_;
                if (at(Tok::LBrace))
                    pos_ = std::min(matching(pos_), toks_.size() - 2) + 1;
                else
                    expr();
                failLambda(first, params, body, pos_ - 1);
            }
            Nest nest(*this);
            advance();
            ExprPtr inner = expr();
            expect(Tok::RParen);
            return inner;
        }
        case Tok::LBracket: {
            Nest nest(*this);
            auto n = node<ListExpr>(advance().span);
            while (!at(Tok::RBracket)) {
                size_t itemFirst = pos_;
                n->items.push_back(expr());
                if (at(Tok::KwFor) && n->items.size() == 1) failComprehension(itemFirst, pos_ - 1);
                if (accept(Tok::Comma)) continue;
                if (!at(Tok::RBracket))
                    failAt(fmt::format("expected ',' or ']' in list, found {}", describeToken(peek())));
            }
            advance();
            n->span = from(n->span);
            return n;
        }
        case Tok::LBrace: {
            Nest nest(*this);
            size_t open = pos_;
            auto n = node<RecordExpr>(advance().span);
            skipNewlines();
            if (at(Tok::Str) && peek(1).kind == Tok::Colon) failDict(open);  // {"a": 1}
            while (!at(Tok::RBrace)) {
                const Token& name = expectNameOrKeyword("a field name");
                for (const RecordField& f : n->fields)
                    if (f.name == name.text) fail(fmt::format("duplicate field '{}'", name.text), name.span);
                RecordField field;
                field.name = std::string(name.text);
                field.nameSpan = name.span;
                expect(Tok::Colon, "record fields are written name: value");
                field.value = expr();
                n->fields.push_back(std::move(field));
                skipNewlines();
                if (accept(Tok::Comma)) skipNewlines();
                else if (!at(Tok::RBrace))
                    failAt(fmt::format("expected ',' or '}}' in record, found {}", describeToken(peek())));
            }
            advance();
            n->span = from(n->span);
            return n;
        }
        default:
            if (t.kind == Tok::KwFn && peek(1).kind == Tok::LParen) {  // an anonymous fn(x) { ... }
                size_t first = pos_;
                size_t close = matching(pos_ + 1);
                std::string params;
                for (size_t k = first + 2; close != std::string::npos && k < close; ++k)
                    if (tok(k).kind == Tok::Ident && (tok(k - 1).kind == Tok::LParen || tok(k - 1).kind == Tok::Comma))
                        params += params.empty() ? std::string(tok(k).text) : ", " + std::string(tok(k).text);
                size_t body = close == std::string::npos ? first : close + 1;
                while (tok(body).kind != Tok::LBrace && tok(body).kind != Tok::Newline && tok(body).kind != Tok::Eof)
                    ++body;
                size_t bodyEnd = tok(body).kind == Tok::LBrace ? matching(body) : std::string::npos;
                if (bodyEnd == std::string::npos) failLambda(first, params, body, body - 1);
                pos_ = bodyEnd + 1;
                failLambda(first, params, body, bodyEnd);
            }
            if (isKeyword(t.kind))
                failAt(fmt::format("unexpected keyword '{}' in expression", t.text));
            failAt(fmt::format("expected an expression, found {}", describeToken(t)));
    }
}

ExprPtr Parser::stringLiteral() {
    const Token& t = advance();
    const std::vector<StrPiece>& parts = pieces(t);
    bool plain = parts.size() == 1 && !parts[0].isExpr;
    if (plain) {
        auto n = node<StrLit>(t.span);
        n->value = parts[0].text;
        return n;
    }
    auto n = node<InterpExpr>(t.span);
    for (const StrPiece& piece : parts) {
        InterpPart part;
        if (!piece.isExpr) {
            part.text = piece.text;
        } else {
            LexResult sub = lex(piece.text, ctx_.file, ctx_.limits, ctx_.diags, piece.line, piece.col, true);
            if (sub.fatal) throw SyntaxError{};
            Parser inner(ctx_, std::move(sub));
            part.expr = inner.fragment();
        }
        n->parts.push_back(std::move(part));
    }
    return n;
}

ExprPtr Parser::fragment() {
    if (at(Tok::Newline) || at(Tok::Eof))
        failAt("empty string interpolation", "put an expression between the braces, or write \\{ \\} for braces");
    ExprPtr e = expr();
    if (!at(Tok::Newline) && !at(Tok::Eof))
        failAt(fmt::format("unexpected {} in string interpolation", describeToken(peek())));
    return e;
}

ExprPtr Parser::ifExpr() {
    Nest nest(*this);
    auto n = node<IfExpr>(advance().span);
    n->cond = expr();
    n->thenBlock = block();
    if (accept(Tok::KwElse)) {
        if (at(Tok::KwIf)) n->elseIf = ifExpr();
        else n->elseBlock = block();
    }
    n->span = from(n->span);
    return n;
}

ExprPtr Parser::forExpr() {
    size_t forIndex = pos_;
    auto n = node<ForExpr>(advance().span);
    if (at(Tok::LParen)) failCFor(forIndex);
    const Token& var = expectIdent("a loop variable");
    n->var = std::string(var.text);
    n->varSpan = var.span;
    if (at(Tok::Ident) && peek().text == "of") {  // JavaScript's for (x of xs)
        size_t of = pos_;
        size_t last = of + 1;
        while (tok(last).kind != Tok::LBrace && tok(last).kind != Tok::Newline && tok(last).kind != Tok::Eof) ++last;
        HabitNames names{{"arg", n->var}};
        addName(names, "list", snippet(of + 1, last - 1));
        failHabit(Habit::ForOf, "of", names, tok(of).span);
    }
    expect(Tok::KwIn, "loops are written: for x in xs { ... }");
    std::string outerVar = std::exchange(forVar_, n->var);
    n->iter = expr();
    forVar_ = std::move(outerVar);
    if (accept(Tok::KwLimit)) n->limit = intLiteral("the loop limit");
    if (accept(Tok::KwIf)) n->filter = expr();
    n->body = block();
    n->span = from(n->span);
    return n;
}

ExprPtr Parser::matchExpr() {
    auto n = node<MatchExpr>(advance().span);
    n->subject = expr();
    Nest nest(*this);
    expect(Tok::LBrace, "a match is written: match x { \"a\" => 1, _ => 2 }");
    skipNewlines();
    while (!at(Tok::RBrace)) {
        if (at(Tok::Eof)) failAt("unclosed match: expected '}'", "add the missing '}'");
        try {
            matchArm(*n);
        } catch (SyntaxError&) {
            // Skip the rest of the broken arm: to the next line or ',' inside the match.
            int depth = 0;
            while (!at(Tok::Eof)) {
                Tok k = peek().kind;
                if (depth == 0 && (k == Tok::Newline || k == Tok::Comma || k == Tok::Semicolon)) {
                    advance();
                    skipNewlines();
                    break;
                }
                if (depth == 0 && k == Tok::RBrace) break;
                if (k == Tok::LBrace || k == Tok::LParen || k == Tok::LBracket) ++depth;
                if ((k == Tok::RBrace || k == Tok::RParen || k == Tok::RBracket) && depth > 0) --depth;
                advance();
            }
        }
    }
    n->closingComments = takeComments(peek().span.line);
    advance();
    n->span = from(n->span);
    return n;
}

void Parser::matchArm(MatchExpr& match) {
    MatchArm arm;
    arm.comments.leading = takeComments(peek().span.line);
    Span start = peek().span;
    if (at(Tok::Str)) arm.pattern = plainString("a match pattern");
    else if (at(Tok::Ident) && peek().text == "_") advance();
    else failAt("match patterns must be string literals or '_'", "write \"value\" => ... or _ => ...");
    expect(Tok::FatArrow, "match arms are written: \"value\" => result");
    if (at(Tok::LBrace)) {
        arm.body = block();
        arm.braced = true;
    } else {
        Span bodyStart = peek().span;
        auto s = std::make_unique<Stmt>(StmtKind::Expr);
        s->id = newId();
        s->value = expr();
        s->span = from(bodyStart);
        arm.body = std::make_unique<Block>();
        arm.body->id = newId();
        arm.body->span = s->span;
        arm.body->stmts.push_back(std::move(s));
    }
    arm.span = from(start);
    arm.comments.trailing = takeTrailing(lastSpan_.endLine);
    match.arms.push_back(std::move(arm));
    if (accept(Tok::Comma)) skipNewlines();
    else if (at(Tok::Newline) || at(Tok::Semicolon)) skipNewlines();
    else if (!at(Tok::RBrace))
        failAt(fmt::format("expected ',' or a new line between match arms, found {}", describeToken(peek())));
}

template <class Tree, class Parse>
std::unique_ptr<Tree> parseFile(const SourceFile& source, DiagnosticList& diags, const FrontendLimits& limits, Parse parse) {
    ParseContext ctx{source.name(), diags, limits, 1, 0, 0, {}};
    LexResult lexed = lex(source.text(), source.name(), limits, diags);
    if (lexed.fatal) return nullptr;
    for (const Diagnostic& d : diags.items())
        if (d.code == DiagCode::E0001 && d.file == source.name()) ctx.lexicalErrorLines.push_back(d.span.line);
    std::sort(ctx.lexicalErrorLines.begin(), ctx.lexicalErrorLines.end());
    Parser parser(ctx, std::move(lexed));
    auto tree = parse(parser);
    diags.sortByPosition();
    return tree;
}

}  // namespace

std::unique_ptr<Program> parseProgram(const SourceFile& source, DiagnosticList& diags, const FrontendLimits& limits) {
    return parseFile<Program>(source, diags, limits, [](Parser& p) { return p.program(); });
}

std::unique_ptr<HostInterface> parseHost(const SourceFile& source, DiagnosticList& diags, const FrontendLimits& limits) {
    return parseFile<HostInterface>(source, diags, limits, [](Parser& p) { return p.host(); });
}

}  // namespace remit
