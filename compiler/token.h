// Tokens of Remit source (.rmt and .rmti). Keywords and punctuation are each one X-macro list, so
// the enum, their spellings and the lexer's lookup cannot drift apart.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/habits.h"
#include "runtime/source.h"

namespace remit {

// Every keyword of spec §3. `model`, `max`, `input`, `tags`, ... are keywords too; the parser
// accepts some of them where the grammar needs a plain name (agent settings, `max(...)`, fields).
#define REMIT_KEYWORDS(X)                                                                          \
    X(Program, "program") X(Uses, "uses") X(Budget, "budget") X(Usd, "usd") X(Type, "type")       \
    X(Fn, "fn") X(Let, "let") X(Var, "var") X(Return, "return") X(If, "if") X(Else, "else")       \
    X(For, "for") X(In, "in") X(Limit, "limit") X(Match, "match") X(And, "and") X(Or, "or")       \
    X(Not, "not") X(True, "true") X(False, "false") X(Retry, "retry") X(Timeout, "timeout")       \
    X(Capability, "capability") X(Model, "model") X(Agent, "agent") X(Tags, "tags")               \
    X(Cost, "cost") X(Idempotent, "idempotent") X(Approval, "approval") X(Always, "always")       \
    X(Deny, "deny") X(Approve, "approve") X(Clears, "clears") X(Max, "max") X(Test, "test")       \
    X(Expect, "expect") X(Break, "break") X(Input, "input") X(Import, "import") X(As, "as")

// Longest spellings first: the lexer takes the first that matches.
#define REMIT_PUNCTUATION(X)                                                                       \
    X(FatArrow, "=>") X(Arrow, "->") X(EqEq, "==") X(NotEq, "!=") X(LessEq, "<=")                 \
    X(GreaterEq, ">=") X(LParen, "(") X(RParen, ")") X(LBrace, "{") X(RBrace, "}")                 \
    X(LBracket, "[") X(RBracket, "]") X(Comma, ",") X(Colon, ":") X(Dot, ".") X(Assign, "=")      \
    X(Plus, "+") X(Minus, "-") X(Star, "*") X(Slash, "/") X(Percent, "%") X(Less, "<")            \
    X(Greater, ">") X(Pipe, "|") X(Semicolon, ";")

enum class Tok : uint8_t {
    Eof,
    Newline,  // ends a statement; not produced inside ( ) or [ ]
    Ident,
    Int,
    Float,
    Str,
    Duration,
    Habit,  // an operator of another language (`&&`, `===`, `?`, ...); Token::habit says which
#define REMIT_X(name, text) name,
    REMIT_PUNCTUATION(REMIT_X)
#undef REMIT_X
#define REMIT_X(name, text) Kw##name,
    REMIT_KEYWORDS(REMIT_X)
#undef REMIT_X
};

// One piece of a string literal: decoded text, or the raw source of an `{expr}` interpolation
// (the parser lexes and parses it in place, so its positions are real file positions).
struct StrPiece {
    bool isExpr = false;
    std::string text;       // decoded literal text, or the expression's source text
    uint32_t line = 0;      // where an expression's text starts
    uint32_t col = 0;
};

struct Token {
    Tok kind = Tok::Eof;
    Span span;
    std::string_view text;  // the source spelling
    int64_t intValue = 0;
    double floatValue = 0;  // Float; Duration in seconds
    uint32_t strIndex = 0;  // Str: its pieces are LexResult::strings[strIndex] (keeps Token trivially copyable)
    Habit habit = Habit::None;  // Habit tokens: which one (the parser reports it where it stands)
};

struct Comment {
    std::string text;       // including the leading '#'
    Span span;
    bool trailing = false;  // code precedes it on its line
};

bool isKeyword(Tok kind);
// The spelling of a keyword or punctuation token ("fn", "=>"); a description for the others.
std::string_view tokenSpelling(Tok kind);
// How a token is named in an error message: 'fn', end of line, string literal, ...
std::string describeToken(const Token& token);

}  // namespace remit
