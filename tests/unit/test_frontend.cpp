// Lexer and parser unit tests: tokens, literals, newline rules, the grammar's shapes and
// precedence, error recovery, habits from other languages, did-you-mean and the front-end limits.
#include <doctest/doctest.h>

#include <string>

#include "compiler/habits.h"
#include "compiler/lexer.h"
#include "compiler/parser.h"
#include "runtime/suggest.h"

using namespace remit;

namespace {

LexResult lexText(const std::string& text, DiagnosticList& diags) { return lex(text, "t.rmt", FrontendLimits{}, diags); }

std::vector<Tok> kinds(const LexResult& r) {
    std::vector<Tok> out;
    for (const Token& t : r.tokens) out.push_back(t.kind);
    return out;
}

struct Parsed {
    SourceFile source;
    DiagnosticList diags{20};
    std::unique_ptr<ast::Program> program;
    explicit Parsed(std::string text, FrontendLimits limits = {}) : source("t.rmt", std::move(text)) {
        program = parseProgram(source, diags, limits);
    }
    std::vector<std::string> codes() const {
        std::vector<std::string> out;
        for (const Diagnostic& d : diags.items()) out.emplace_back(diagInfo(d.code).code);
        return out;
    }
    const ast::Stmt& stmt(size_t fnIndex, size_t i) const {
        return *program->decls.at(fnIndex)->as<ast::FnDecl>().body->stmts.at(i);
    }
};

std::string wrap(const std::string& body) { return "program p\nfn main() {\n" + body + "\n}\n"; }

}  // namespace

TEST_CASE("lexer: numbers, durations and underscores") {
    DiagnosticList diags;
    LexResult r = lexText("1_000 0.5 500ms 2s 2m 7", diags);
    REQUIRE_FALSE(diags.hasErrors());
    REQUIRE(r.tokens.size() >= 6);
    CHECK(r.tokens[0].kind == Tok::Int);
    CHECK(r.tokens[0].intValue == 1000);
    CHECK(r.tokens[1].kind == Tok::Float);
    CHECK(r.tokens[1].floatValue == 0.5);
    CHECK(r.tokens[2].kind == Tok::Duration);
    CHECK(r.tokens[2].floatValue == doctest::Approx(0.5));
    CHECK(r.tokens[3].floatValue == 2.0);
    CHECK(r.tokens[4].floatValue == 120.0);
    CHECK(r.tokens[5].intValue == 7);
}

TEST_CASE("lexer: bad numbers are E0001 and lexing goes on") {
    DiagnosticList diags;
    lexText("1a 1_ 99999999999999999999 x", diags);
    REQUIRE(diags.items().size() == 3);
    for (const Diagnostic& d : diags.items()) CHECK(d.code == DiagCode::E0001);
    CHECK(diags.items()[0].message == "invalid number literal '1a'");
    CHECK(diags.items()[2].message.find("64 bits") != std::string::npos);
}

TEST_CASE("lexer: strings, escapes and interpolation pieces") {
    DiagnosticList diags;
    LexResult r = lexText(R"("a\n\t\"\\\{\}b" "Hi {name}!" "{x}")", diags);
    REQUIRE_FALSE(diags.hasErrors());
    CHECK(r.strings[r.tokens[0].strIndex].size() == 1);
    CHECK(r.strings[r.tokens[0].strIndex][0].text == "a\n\t\"\\{}b");
    REQUIRE(r.strings[r.tokens[1].strIndex].size() == 3);
    CHECK(r.strings[r.tokens[1].strIndex][1].isExpr);
    CHECK(r.strings[r.tokens[1].strIndex][1].text == "name");
    CHECK(r.strings[r.tokens[1].strIndex][1].col == 23);
    CHECK(r.strings[r.tokens[2].strIndex].size() == 1);
}

TEST_CASE("lexer: string errors") {
    for (const char* text : {"\"abc", "\"\\q\"", "\"a } b\"", "\"{ \"x\" }\"", "\"{ a\""}) {
        DiagnosticList diags;
        lexText(text, diags);
        REQUIRE(diags.items().size() == 1);
        CHECK(diags.items()[0].code == DiagCode::E0001);
        CHECK(diags.items()[0].span.line == 1);
    }
}

TEST_CASE("lexer: newlines are dropped inside () and [] but kept inside braces nested in them") {
    DiagnosticList diags;
    LexResult r = lexText("f(a,\n b)\n[1,\n 2]\ng({\n})", diags);
    std::vector<Tok> k = kinds(r);
    size_t newlines = 0;
    for (Tok t : k) newlines += t == Tok::Newline;
    // after f(...), after [...], inside { } (significant again), and the final one
    CHECK(newlines == 4);
}

TEST_CASE("lexer: comments are collected apart, trailing ones marked") {
    DiagnosticList diags;
    LexResult r = lexText("# own\nlet x = 1  # trailing\n", diags);
    REQUIRE(r.comments.size() == 2);
    CHECK_FALSE(r.comments[0].trailing);
    CHECK(r.comments[1].trailing);
    CHECK(r.comments[1].text == "# trailing");
}

TEST_CASE("lexer: invalid UTF-8 is E0001; columns count code points") {
    DiagnosticList diags;
    lexText("let x = \"ok\"\nlet y = \xff", diags);
    REQUIRE(diags.items().size() == 1);
    CHECK(diags.items()[0].code == DiagCode::E0001);
    CHECK(diags.items()[0].span.line == 2);
    CHECK(diags.items()[0].span.col == 9);

    DiagnosticList diags2;
    LexResult r = lexText("\"é\" x", diags2);
    CHECK(r.tokens[1].span.col == 5);
}

TEST_CASE("parser: program header, uses and budget") {
    Parsed p("# head\nprogram demo  # t\nuses web.fetch, llm\nuses email.send\nbudget usd 0.5\n\nfn main() {}\n");
    REQUIRE(p.codes().empty());
    CHECK(p.program->name == "demo");
    REQUIRE(p.program->uses.size() == 3);
    CHECK(p.program->uses[2].name == "email.send");
    CHECK(*p.program->budgetUsd == 0.5);
    CHECK(p.program->headerComments == std::vector<std::string>{"# head"});
    CHECK(p.program->programTrailing == "# t");
}

TEST_CASE("parser: missing program header keeps parsing") {
    Parsed p("fn main() {\n  let x = 1 < 2 < 3\n}\n");
    REQUIRE(p.codes() == std::vector<std::string>{"E0100", "E0100"});
    CHECK(p.diags.items()[0].message.find("must start with 'program") != std::string::npos);
    CHECK(p.diags.items()[1].message.find("chained") != std::string::npos);
}

TEST_CASE("parser: precedence follows the spec") {
    Parsed p(wrap("let a = not x == 1 or y and z\nlet b = 1 + 2 * -3 % 4\nlet c = a in xs"));
    REQUIRE(p.codes().empty());
    const auto& a = p.stmt(0, 0).value->as<ast::BinaryExpr>();
    CHECK(a.op == ast::BinaryOp::Or);
    CHECK(a.left->kind == ast::ExprKind::Unary);  // not binds looser than ==
    CHECK(a.left->as<ast::UnaryExpr>().operand->as<ast::BinaryExpr>().op == ast::BinaryOp::Eq);
    CHECK(a.right->as<ast::BinaryExpr>().op == ast::BinaryOp::And);
    const auto& b = p.stmt(0, 1).value->as<ast::BinaryExpr>();
    CHECK(b.op == ast::BinaryOp::Add);
    const auto& mul = b.right->as<ast::BinaryExpr>();
    CHECK(mul.op == ast::BinaryOp::Mod);
    CHECK(mul.left->as<ast::BinaryExpr>().op == ast::BinaryOp::Mul);
    CHECK(p.stmt(0, 2).value->as<ast::BinaryExpr>().op == ast::BinaryOp::In);
}

TEST_CASE("parser: comparisons and `in` do not chain") {
    for (const char* body : {"let a = 1 < 2 < 3", "let a = x == y != z", "let a = a in b in c"}) {
        Parsed p(wrap(body));
        REQUIRE(p.codes() == std::vector<std::string>{"E0100"});
        CHECK(p.diags.items()[0].message == "comparisons cannot be chained");
    }
}

TEST_CASE("parser: calls, named arguments and modifiers") {
    Parsed p(wrap("let r = web.fetch(u, mode: \"x\") retry 2 timeout 500ms else { a: 1 }"));
    REQUIRE(p.codes().empty());
    const auto& call = p.stmt(0, 0).value->as<ast::CallExpr>();
    CHECK(call.calleeName() == "web.fetch");
    REQUIRE(call.args.size() == 2);
    CHECK_FALSE(call.args[0].name);
    CHECK(*call.args[1].name == "mode");
    CHECK(*call.retry == 2);
    CHECK(*call.timeoutSeconds == doctest::Approx(0.5));
    CHECK(call.fallback->kind == ast::ExprKind::Record);
}

TEST_CASE("parser: call modifier errors") {
    CHECK(Parsed(wrap("f(x) retry 1 retry 2")).diags.items().at(0).message == "duplicate 'retry'");
    CHECK(Parsed(wrap("f(x) timeout 5")).diags.items().at(0).message.find("duration") != std::string::npos);
    CHECK(Parsed(wrap("let x = 5s")).diags.items().at(0).message == "durations are only allowed after 'timeout'");
    CHECK(Parsed(wrap("f(x) retry n")).diags.items().at(0).message.find("integer literal") != std::string::npos);
    CHECK(Parsed(wrap("(a + b)(x)")).diags.items().at(0).message == "only named functions and capabilities can be called");
}

TEST_CASE("parser: if, for and match are expressions") {
    Parsed p(wrap("let a = if x { 1 } else if y { 2 } else { 3 }\n"
                  "let b = for v in xs limit 3 if v > 0 { v * 2 }\n"
                  "let c = match s {\n  \"a\" => 1\n  \"b\" => { 2 }, _ => 3\n}"));
    REQUIRE(p.codes().empty());
    const auto& a = p.stmt(0, 0).value->as<ast::IfExpr>();
    REQUIRE(a.elseIf);
    CHECK(a.elseIf->as<ast::IfExpr>().elseBlock);
    const auto& b = p.stmt(0, 1).value->as<ast::ForExpr>();
    CHECK(b.var == "v");
    CHECK(*b.limit == 3);
    CHECK(b.filter);
    const auto& c = p.stmt(0, 2).value->as<ast::MatchExpr>();
    REQUIRE(c.arms.size() == 3);
    CHECK(*c.arms[0].pattern == "a");
    CHECK(c.arms[1].braced);
    CHECK_FALSE(c.arms[2].pattern);
}

TEST_CASE("parser: statements") {
    Parsed p(wrap("let x: List[Int] max 3 = [1, 2]\nvar y = 0\ny = y + 1\nreturn\nbreak\nexpect x, \"msg\"; f()"));
    REQUIRE(p.codes().empty());
    CHECK(p.stmt(0, 0).type->max == 3);
    CHECK(p.stmt(0, 1).isVar);
    CHECK(p.stmt(0, 2).kind == ast::StmtKind::Assign);
    CHECK(p.stmt(0, 3).kind == ast::StmtKind::Return);
    CHECK_FALSE(p.stmt(0, 3).value);
    CHECK(p.stmt(0, 4).kind == ast::StmtKind::Break);
    CHECK(*p.stmt(0, 5).message == "msg");
    CHECK(p.stmt(0, 6).kind == ast::StmtKind::Expr);
}

TEST_CASE("parser: types, agents and tests") {
    Parsed p("program p\ntype T = { a: Int, b: \"x\" | \"y\", c: List[{ d: Str }] max 4 }\n"
             "agent A {\n  model: llm\n  system: \"be brief\"\n  max_calls: 3\n}\n"
             "agent B { model: llm  max_calls: 1 }\n"
             "test \"t\" fixtures \"f.json\" {\n  expect true\n}\n");
    REQUIRE(p.codes().empty());
    REQUIRE(p.program->decls.size() == 4);
    const auto& t = p.program->decls[0]->as<ast::TypeDecl>();
    CHECK(t.type->fields.size() == 3);
    CHECK(t.type->fields[1].type->options == std::vector<std::string>{"x", "y"});
    const auto& a = p.program->decls[1]->as<ast::AgentDecl>();
    CHECK(a.model == "llm");
    CHECK(*a.maxCalls == 3);
    CHECK(p.program->decls[2]->as<ast::AgentDecl>().maxCalls == 1);
    CHECK(*p.program->decls[3]->as<ast::TestDecl>().fixtures == "f.json");
}

TEST_CASE("parser: declaration errors") {
    auto first = [](const std::string& text) { return Parsed(text).diags.items().at(0).message; };
    CHECK(first("program p\nagent A {\n  system: \"x\"\n}\n") == "agent 'A' needs a 'model:' setting");
    CHECK(first("program p\nagent A {\n  model: llm\n  temperature: 1\n}\n") == "unknown agent setting 'temperature'");
    CHECK(first("program p\nfn f(a: Int, a: Int) {}\n") == "duplicate parameter 'a'");
    CHECK(first("program p\ntype T = { a: Int, a: Str }\n") == "duplicate field 'a'");
    CHECK(first("program p\nfn main() {\n  let r = { a: 1, a: 2 }\n}\n") == "duplicate field 'a'");
    CHECK(first("program p\nbudget usd 1\nbudget usd 2\n") == "duplicate 'budget' line");
    CHECK(first("program p\nfn main() {}\nuses web.fetch\n") ==
          "'uses' must appear in the program header, before any declaration");
    CHECK(first("program p\nfn main() {\n  match s { x => 1 }\n}\n") == "match patterns must be string literals or '_'");
}

TEST_CASE("parser: recovery reports independent errors, capped at the limit") {
    Parsed p(wrap("let a = \nlet b = )\nlet ok = 1\nlet c = [1 2]"));
    CHECK(p.codes() == std::vector<std::string>{"E0100", "E0100", "E0100"});
    std::string many = "program p\nfn main() {\n";
    for (int i = 0; i < 50; ++i) many += "  let = 1\n";
    many += "}\n";
    Parsed capped(many);
    CHECK(capped.diags.errorCount() == 20);
}

TEST_CASE("parser: error inside an unclosed paren is reported past its line") {
    Parsed p("program p\nfn main() {\n  let x = f(1,\n    2\n  let y = 3\n}\n");
    REQUIRE_FALSE(p.codes().empty());
    CHECK(p.diags.items()[0].span.line >= 3);
}

TEST_CASE("parser: host interfaces") {
    SourceFile source("host.rmti",
                      "type V = { id: Str }\n"
                      "capability pay.send(to: Str deny (untrusted, private) approve untrusted, n: Int) -> List[V] max 5\n"
                      "  tags private, pii\n  clears untrusted\n  cost 0.25\n  idempotent\n  approval always\n"
                      "model llm cost 0.02\nmodel cheap\ninput ticket tags untrusted, private\n");
    DiagnosticList diags;
    auto host = parseHost(source, diags);
    REQUIRE_FALSE(diags.hasErrors());
    REQUIRE(host->decls.size() == 5);
    const auto& cap = host->decls[1]->as<ast::CapabilityDecl>();
    CHECK(cap.name == "pay.send");
    CHECK(cap.params[0].deny == std::vector<std::string>{"untrusted", "private"});
    CHECK(cap.params[0].approve == std::vector<std::string>{"untrusted"});
    CHECK(cap.ret->max == 5);
    CHECK(cap.tags == std::vector<std::string>{"private", "pii"});
    CHECK(cap.cost == 0.25);
    CHECK(cap.idempotent);
    CHECK(cap.approvalAlways);
    CHECK(host->decls[2]->as<ast::ModelDecl>().cost == 0.02);
    CHECK(host->decls[4]->as<ast::InputDecl>().tags.size() == 2);
}

TEST_CASE("parser: host interface errors") {
    auto first = [](const std::string& text) {
        SourceFile source("host.rmti", text);
        DiagnosticList diags;
        parseHost(source, diags);
        REQUIRE(diags.hasErrors());
        return diags.items()[0];
    };
    CHECK(first("capability send(to: Str)\n").message == "capability names must be namespaced, e.g. email.send");
    Diagnostic twoOnOneLine = first("capability a.b(x: Str)\n  cost 0.1 idempotent\n");
    CHECK(twoOnOneLine.message == "expected end of statement, found 'idempotent'");
    CHECK(twoOnOneLine.span.line == 2);
    CHECK(first("capability a.b(x: Str) idempotent\n").span.line == 1);
    CHECK(first("fn main() {}\n").message.find("expected a host declaration") == 0);
    CHECK(first("input x untrusted\n").message == "expected 'tags', found 'untrusted'");
}

TEST_CASE("limits: nesting, identifiers, tokens and size are E0003") {
    auto codeOf = [](const std::string& text, FrontendLimits limits = {}) {
        Parsed p(text, limits);
        REQUIRE_FALSE(p.diags.items().empty());
        return std::string(diagInfo(p.diags.items()[0].code).code);
    };
    std::string deep = "program p\nfn main() {\n  let x = ";
    for (int i = 0; i < 200; ++i) deep += "(";
    CHECK(codeOf(deep + "1\n}\n") == "E0003");
    CHECK(codeOf(wrap("let x = " + std::string(300, '-') + "1")) == "E0003");
    CHECK(codeOf(wrap("let x = " + std::string(257, 'a'))) == "E0003");
    FrontendLimits small;
    small.maxTokens = 10;
    CHECK(codeOf(wrap("let x = 1 + 2 + 3 + 4"), small) == "E0003");
    small = {};
    small.maxSourceBytes = 16;
    CHECK(codeOf(wrap("let x = 1"), small) == "E0003");
    CHECK(codeOf(wrap("let x = \"" + std::string(20000, 'a') + "\"")) == "E0003");
}

// Each habit of another language the front end knows (compiler/habits.def), as one statement in
// a function body or one declaration, with the code and the start of the message it must get.
struct HabitCase {
    const char* source;  // a statement, or a declaration when `declaration` is set
    const char* code;
    const char* message;
    bool declaration = false;
};

const HabitCase kFrontEndHabits[] = {
    {"return a && b", "E0001", "Remit has no '&&'"},
    {"if x > 0 && y < 3 {\n    let z = 1 +\n  }", "E0001", "Remit has no '&&'"},
    {"return !done", "E0001", "Remit has no '!'"},
    {"return c ? 1 : 2", "E0001", "Remit has no '? :'"},
    {"return name ?? \"x\"", "E0001",
     "Remit has no null, so no '?"
     "?'"},
    {"let x: Str? = \"a\"", "E0001", "Remit has no null"},  // an optional type
    {"return 'abc'", "E0001", "Remit strings use double quotes"},
    {"let r = {'a': 1}", "E0001", "Remit strings use double quotes"},
    {"return `hi ${name}`", "E0001", "Remit strings use double quotes"},
    {"// a comment", "E0001", "Remit comments start with '#'"},
    {"return a || b", "E0100", "Remit has no '||'"},
    {"return a === b", "E0100", "Remit has no '==='"},
    {"return a !== b", "E0100", "Remit has no '!=='"},
    {"total += n", "E0100", "Remit has no '+='"},
    {"total -= a + b", "E0100", "Remit has no '-='"},
    {"i++", "E0100", "Remit has no '++'"},
    {"i--", "E0100", "Remit has no '--'"},
    {"++i", "E0100", "Remit has no '++'"},
    {"for i in 0..10 { i }", "E0100", "Remit has no '..' ranges"},
    {"for i in 1..=n { i }", "E0100", "Remit has no '..=' ranges"},
    {"for (i = 0; i < n; i++) {\n    x = x + i\n  }", "E0100", "Remit has no C-style 'for'"},
    {"for (const x of xs) { x }", "E0100", "Remit has no C-style 'for'"},
    {"for x of xs { x }", "E0100", "Remit loops are written 'for x in xs'"},
    {"let f = x => x * 2", "E0100", "Remit has no lambdas"},
    {"let f = (a, b) => { return a + b }", "E0100", "Remit has no lambdas"},
    {"let f = fn(x) { x }", "E0100", "Remit has no lambdas"},
    {"let ys = xs.map(x => x + 1)", "E0100", "Remit has no '.map'"},
    {"let ys = filter(lambda x: x > 1, xs)", "E0100", "Remit has no 'filter'"},
    {"let ys = [x * 2 for x in xs if x > 0]", "E0100", "Remit's list comprehension"},
    {"let d = {\"a\": 1, \"b\": 2}", "E0100", "Remit has no maps or dictionaries"},
    {"let s = \", \".join(xs)", "E0100", "Remit has no methods"},
    {"while n < 10 {\n    n = n + 1\n  }", "E0100", "Remit has no 'while' loop"},
    {"while (n < 10) {\n    n += 1\n  }", "E0100", "Remit has no 'while' loop"},
    {"do {\n  } while (x)", "E0100", "Remit has no 'do' loop"},
    {"if a {\n    x\n  } elif b {\n    y\n  }", "E0100", "Remit has no 'elif'"},
    {"if a {\n    x\n  }\n  else {\n    y\n  }", "E0100", "'else' must follow"},
    {"try {\n    x\n  } catch (e) {\n    y\n  }", "E0100", "Remit has no exceptions ('try')"},
    {"raise ValueError(\"no\")", "E0100", "Remit has no exceptions ('raise')"},
    {"switch kind {\n  }", "E0100", "Remit has no 'switch'"},
    {"const n = 1", "E0100", "Remit has no 'const'"},
    {"print \"hello\"", "E0100", "Remit has no 'print'"},
    {"fn helper(x: Int) -> Int {\n    return x\n  }", "E0100", "Remit has no nested functions"},
    {"import json", "E0100", "Remit has no modules ('import')"},
    {"def greet(name):\n  return name", "E0100", "Remit declares functions with 'fn', not 'def'", true},
    {"function greet(name) {\n  return name\n}", "E0100", "Remit declares functions with 'fn', not 'function'", true},
    {"class Point {\n  x: Int\n}", "E0100", "Remit has no classes ('class')", true},
    {"struct Point { x: Int }", "E0100", "Remit has no classes ('struct')", true},
    {"enum Color { Red, Green }", "E0100", "Remit has no 'enum'", true},
    {"import requests", "E0100", "Remit has no modules ('import')", true},
    {"from os import path", "E0100", "Remit has no modules ('from')", true},
    {"use web.fetch", "E0100", "Remit lists capabilities with 'uses'", true},
};

TEST_CASE("habits: each habit of another language is one diagnostic, and nothing else on its statement") {
    for (const HabitCase& c : kFrontEndHabits) {
        std::string text = c.declaration ? "program p\n" + std::string(c.source) + "\nfn main() {}\n"
                                         : "program p\nfn main() {\n  " + std::string(c.source) + "\n  let ok = 1\n}\n";
        CAPTURE(text);
        Parsed p(text);
        REQUIRE(p.codes() == std::vector<std::string>{c.code});
        CHECK(p.diags.items()[0].message.starts_with(c.message));
        CHECK_FALSE(p.diags.items()[0].hint.empty());
    }
}

TEST_CASE("habits: hints use the names of the source") {
    auto hint = [](const std::string& statement) {
        Parsed p(wrap(statement));
        REQUIRE(p.diags.items().size() == 1);
        return p.diags.items()[0].hint;
    };
    CHECK(hint("return ready && count > 0") == "write ready and count > 0");
    CHECK(hint("return done ? total : 0") == "write if done { total } else { 0 }");
    CHECK(hint("total += price * 2") == "write total = total + price * 2 (total must be declared with var)");
    CHECK(hint("for i in 0..10 { i }") == "write range(10) (N is an integer literal, so the loop's bound is known)");
    CHECK(hint("for (k = 0; k < 5; k++) { k }") == "write for k in range(5) { ... }");
    CHECK(hint("for (k = 0; k < len(items); k++) { k }") == "write for x in items { ... }");
    CHECK(hint("let ys = prices.filter(p => p > 10)") == "write for p in prices if p > 10 { p }");
    CHECK(hint("let r = {\"name\": who, \"age\": 3}") == "write { name: who, age: 3 }");
    CHECK(hint("while attempts < 3 {\n  }") ==
          "loop over a list or a fixed range and stop early: for step in range(100) { if not (attempts < 3) { break } "
          "... }");
    CHECK(hint("if a {\n  } elsif b > 2 {\n  }") == "write } else if b > 2 {");
    Parsed def("program p\ndef score(hit, words):\n  return 1\n");
    REQUIRE(def.diags.items().size() == 1);
    CHECK(def.diags.items()[0].hint.starts_with("write fn score(hit: Str, words: Str) -> Str { ... }"));
}

TEST_CASE("habits: recovery goes on after a habit, and words of other languages stay usable as names") {
    // The habit and an independent error two statements later: both, each once.
    Parsed p(wrap("while x {\n  }\n  let ok = 1\n  let bad = (1 +)"));
    CHECK(p.codes() == std::vector<std::string>{"E0100", "E0100"});
    CHECK(p.diags.items()[1].message == "expected an expression, found ')'");
    // A valid program whose names are habit words parses exactly as before.
    Parsed valid(
        "program p\nfn print(x: Str) -> Str {\n  return x\n}\nfn main(count: Int) -> Str {\n  var loop = 0\n"
        "  var time = 1\n  loop = loop + 1\n  let use = print(\"a\")\n  let x = --count\n  let y = count--1\n"
        "  let m = match use { \"a\" => 1, _ => 2 }\n  return \"{x} {y} {m} {time}\"\n}\n");
    CHECK(valid.codes().empty());
    // An error that is not the habit keeps its own message, even in a statement starting with a
    // habit word that is the user's name.
    CHECK(Parsed(wrap("loop = 1 +")).diags.items().at(0).message == "expected an expression, found end of line");
}

TEST_CASE("did you mean: only within max(1, len/3) edits and at most half the name") {
    CHECK(suggestionLimit(1) == 0);
    CHECK(suggestionLimit(2) == 1);
    CHECK(suggestionLimit(5) == 1);
    CHECK(suggestionLimit(6) == 2);
    CHECK(suggestionLimit(13) == 4);
    std::vector<std::string> builtins = {"len", "int", "str", "take", "range"};
    CHECK_FALSE(closestName("print", builtins));  // two edits from int: another word, not a typo
    CHECK_FALSE(closestName("x", std::vector<std::string>{"xs"}));
    CHECK(closestName("emial", std::vector<std::string>{"email", "name"}) == "email");
    CHECK(closestName("cuont", std::vector<std::string>{"count"}) == "count");
    CHECK(closestName("lne", builtins) == "len");
    CHECK(closestName("Int", std::vector<std::string>{"int"}) == "int");
    CHECK(closestName("max_wall_time", std::vector<std::string>{"max_steps", "max_wall_ms"}) == "max_wall_ms");
    CHECK(closestName("trusted", std::vector<std::string>{"trust"}) == "trust");
}
