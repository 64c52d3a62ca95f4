// Unit tests for the canonical formatter (compiler/formatter.h) and structural equality
// (compiler/ast_equal.h). Every corpus program is checked for the two properties `remitc fmt`
// promises: formatting never changes meaning (the re-parsed output is sameProgram as the input)
// and formatted text is a fixed point (formatting it again changes nothing). No comment may be
// lost on the way. Golden checks pin the exact layout, inline and in tests/golden/fmt.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/ast_equal.h"
#include "compiler/formatter.h"
#include "compiler/lexer.h"
#include "compiler/parser.h"

// The test build defines the repository root; this fallback is for building the file by hand.
#ifndef REMIT_SOURCE_DIR
#define REMIT_SOURCE_DIR "/work/main"
#endif

using namespace remit;

namespace {

std::string renderAll(const DiagnosticList& diags, const SourceFile& source) {
    std::string out;
    for (const Diagnostic& d : diags.items()) out += renderText(d, &source) + "\n";
    return out;
}

std::unique_ptr<ast::Program> parseProgramOk(const std::string& text) {
    SourceFile source("test.rmt", text);
    DiagnosticList diags;
    auto program = parseProgram(source, diags);
    INFO("source:\n" << text << "\ndiagnostics:\n" << renderAll(diags, source));
    REQUIRE_FALSE(diags.hasErrors());
    REQUIRE(program);
    return program;
}

std::unique_ptr<ast::HostInterface> parseHostOk(const std::string& text) {
    SourceFile source("test.rmti", text);
    DiagnosticList diags;
    auto host = parseHost(source, diags);
    INFO("source:\n" << text << "\ndiagnostics:\n" << renderAll(diags, source));
    REQUIRE_FALSE(diags.hasErrors());
    REQUIRE(host);
    return host;
}

// Every comment of a file, as the formatter prints it (trailing blanks dropped), in sorted order:
// formatting may move a comment but must keep each one.
std::vector<std::string> commentsOf(const std::string& text) {
    DiagnosticList diags;
    LexResult lexed = lex(text, "comments", FrontendLimits{}, diags);
    std::vector<std::string> out;
    for (const Comment& c : lexed.comments) {
        std::string t = c.text;
        while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.pop_back();
        out.push_back(t);
    }
    std::sort(out.begin(), out.end());
    return out;
}

// Layout hygiene every formatted file has: one final newline, no trailing blanks, no tabs
// used for indentation, no two blank lines in a row.
void checkHygiene(const std::string& text) {
    REQUIRE_FALSE(text.empty());
    CHECK(text.back() == '\n');
    CHECK(text.find("\n\n\n") == std::string::npos);
    if (text.size() > 1) CHECK(text[text.size() - 2] != '\n');
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        INFO("line: [" << line << "]");
        CHECK((line.empty() || (line.back() != ' ' && line.back() != '\t')));
        CHECK((line.empty() || line[0] != '\t'));
    }
}

// Formats `text`, then checks meaning preservation, idempotency and comment preservation.
// `limits` go to the formatter only: a tiny maxNesting forces the Minimal parenthesisation.
std::string checkProgram(const std::string& text, const FrontendLimits& limits = {}) {
    auto original = parseProgramOk(text);
    std::string formatted = formatProgram(*original, limits);
    INFO("input:\n" << text << "\nformatted:\n" << formatted);
    auto reparsed = parseProgramOk(formatted);
    CHECK(sameProgram(*original, *reparsed));
    CHECK(formatProgram(*reparsed, limits) == formatted);
    CHECK(commentsOf(text) == commentsOf(formatted));
    checkHygiene(formatted);
    return formatted;
}

std::string checkHost(const std::string& text, const FrontendLimits& limits = {}) {
    auto original = parseHostOk(text);
    std::string formatted = formatHost(*original, limits);
    INFO("input:\n" << text << "\nformatted:\n" << formatted);
    auto reparsed = parseHostOk(formatted);
    CHECK(sameHost(*original, *reparsed));
    CHECK(formatHost(*reparsed, limits) == formatted);
    CHECK(commentsOf(text) == commentsOf(formatted));
    checkHygiene(formatted);
    return formatted;
}

// The body of `fn main() { ... }` formatted, for golden checks of single constructs.
std::string formatBody(const std::string& body, const FrontendLimits& limits = {}) {
    std::string formatted = checkProgram("program t\nfn main() {\n" + body + "\n}\n", limits);
    const std::string head = "program t\n\nfn main() {\n";
    REQUIRE(formatted.compare(0, head.size(), head) == 0);
    REQUIRE(formatted.size() >= head.size() + 2);
    return formatted.substr(head.size(), formatted.size() - head.size() - 2);  // drop "}\n"
}

std::string readFile(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in.good(), "cannot read " << path.string());
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// ------------------------------------------------------------------ corpus

const char* const kStatements = R"(program statements
uses email.send, llm, web.fetch
budget usd 2

type Priority = "low" | "high" | "needs \{review\}"
type Ticket = { id: Int, body: Str, tags: List[Str] max 5 }
type Nested = { inner: { a: Int, b: List[{ c: Float }] }, empty: {}, model: Str }
type Matrix = List[List[Float] max 3] max 3

fn main(t: Ticket, n: Int) -> Str {
  let a = 1
  let b: Int = 2
  let r: { x: Int, y: "a" | "b" } = { x: 1, y: "a" }
  var c = 3
  c = c + 1
  var xs: List[Int] max 3 = []
  if c > 2 {
    return "big"
  }
  for x in xs {
    if x == 0 {
      break
    }
  }
  helper(1, 2); helper(3, 4)
  return
}

fn helper(p: Int, q: Int) {
}

fn nothing() {}

test "statements work" fixtures "fixtures/statements.json" {
  expect main({ id: 1, body: "x", tags: [] }, 2) == "big", "main says big"
  expect true
  expect 1 < 2, ""
}

test "no fixtures" {}
)";

const char* const kPrecedence = R"(program precedence

fn f(a: Int, b: Int, c: Int, d: Bool, e: Bool, xs: List[Int], s: Str) -> Int {
  let p1 = (a + b) * c
  let p2 = a - (b - c)
  let p3 = a - b - c
  let p4 = not (d and e)
  let p5 = -(-a)
  let p6 = (if d { 1 } else { 2 }) + 1
  let p7 = a * b + c * (a - b) / c % 2
  let p8 = d or e and not d
  let p9 = (d or e) and d
  let p10 = (a == b) == d
  let p11 = a == (b == c)
  let p12 = (not d) == e
  let p13 = -a * b
  let p14 = -(a * b)
  let p15 = a in [1, 2, 3]
  let p16 = not not d
  let p17 = -(not d)
  let p18 = xs[0].name[1]
  let p19 = (a + b).x
  let p20 = (-a).x
  let p21 = [1, 2.5, "s", true, false, [], {}]
  let p22 = { a: { b: { c: 1 } }, d: [{ e: 2 }] }
  let p23 = -1.5 + 0.00001 + 10000000000000000.0 + 1_000_000 + 0.1 + 123456789012345678.0
  let p24 = (for x in xs { x }) + [1]
  let p25 = (match s { "a" => 1, _ => 2 }) * 3
  let p26 = -(if d { 1 } else { 2 })
  let p27 = not (if d { true } else { false })
  let p28 = (if d { { a: 1 } } else { { a: 2 } }).a
  let p29 = a - -b
  let p30 = a + (b + c)
  let p31 = (a or b) or (c or d)
  let p32 = a and (b and c)
  let p33 = not a == b
  let p34 = (not a) and b
  let p35 = --a
  let p36 = ((((a))))
  let p37 = (a * b) * c
  let p38 = a * (b * c)
  let p39 = (a < b) and (b <= c) or (c != a)
  let p40 = {a: 1}.a + [1, 2][0]
  let p41 = 5.x + 1.5.y
  let p42 = if if d { e } else { d } { 1 } else { 2 }
  let p43 = for x in for y in xs { y } { x }
  let p44 = match match s { _ => "a" } { _ => 1 }
  let p45 = max(a, b) + max(1, 2)
  let p46 = 0.1 + 0.2 + 1.0 + 100.0 + 0.0001
  return p1
}
)";

const char* const kCalls = R"(program calls
uses web.fetch, llm

agent Summarizer { model: llm }

fn g(a: Int, b: Int, c: Bool, d: Bool, xs: List[Int]) -> Str {
  let r1 = web.fetch("u") retry 2 timeout 500ms else "none"
  let r2 = web.fetch("u") timeout 10s
  let r3 = web.fetch("u") timeout 2m
  let r4 = web.fetch("u") timeout 1500ms
  let r5 = web.fetch("u") timeout 1.5s
  let r6 = llm.ask(Summary, "prompt", context: r1) else { mood: "x", line: "y" }
  let r7 = web.fetch("u") else (a + b)
  let r8 = web.fetch("u") else -1
  let r9 = web.fetch("u") else web.fetch("v") retry 1 else "z"
  let r10 = (web.fetch("u") else "a").x
  let r11 = web.fetch("u") else (if c { "a" } else { "b" })
  let r12 = max(a, b) + min(1, 2)
  let r13 = web.fetch(url: "u", retry_hint: 3)
  let r14 = (web.fetch("u") retry 1)[0]
  let r15 = web.fetch("u") else (not d)
  let r16 = web.fetch("u") else xs[0].y
  let r17 = web.fetch("u") timeout 0.25s
  let r18 = -web.fetch("u") else 1
  let r19 = web.fetch("u") else 1 + 2
  let r20 = web.fetch("u") else (1 + 2)
  let r21 = Summarizer.ask(T, "p")
  let r22 = web.fetch("u") timeout 0ms
  let r23 = web.fetch("u") timeout 1ms
  let r24 = web.fetch("u") timeout 999ms
  let r25 = web.fetch("u") timeout 3600s
  let r26 = web.fetch("u") timeout 0.0015s
  let r27 = web.fetch("u") timeout 1.0005s
  let r28 = web.fetch("u") timeout 100000000000000000000s
  let r29 = web.fetch("u") timeout 0.1ms
  let r30 = web.fetch("u") else -2.5
  let r31 = web.fetch("u") else (-a)
  let r32 = web.fetch("u") else [1, 2]
  let r33 = web.fetch("u") else f(1)
  let r35 = web.fetch("u") else { a: 1 } == { a: 1 }
  let r36 = f(web.fetch("u") else "a", g: web.fetch("v") retry 1)
  let r37 = web.fetch("u") else (match a { _ => 1 })
  let r38 = (web.fetch("u") timeout 1s).body
  let r39 = web.fetch("u") else "a".b
  let r40 = web.fetch("u") else (web.fetch("v") else "w")
  let a1 = llm.ask(List[Str] max 5, "p", context: r1)
  let a2 = llm.ask({ a: Int, b: "x" | "y" }, "p")
  let a3 = llm.ask({}, "p")
  let a4 = llm.ask("yes" | "no", "p")
  let a5 = Summarizer.ask(Summary)
  let a6 = llm.ask((Summary), "p")
  let a7 = llm.ask(({ a: 1 }), "p")
  let a8 = llm.ask(lower, "p")
  let a9 = llm.ask(Make(1), "p")
  let a10 = llm.ask((Summary.x), "p")
  let a11 = llm.ask(context: "c")
  let a12 = llm.ask(List[{ a: Int }] max 2, "p") retry 1 else []
  let r41 = web.fetch(
    "u",
    headers: { a: 1 },
  ) retry 1
  return r1
}
)";

const char* const kControl = R"(program control

fn h(s: Str, xs: List[Int]) -> Int {
  let v = if s == "a" {
    1
  } else if s == "b" {
    2
  } else if s == "c" { 3 } else {
    let y = 4
    y
  }
  let w = for x in xs limit 10 if x > 0 { x * 2 }
  let w2 = for x in xs if x > 0 and x < 5 {
  }
  let w3 = for x in xs limit 3 { x }
  let m = match s {
    "a" => 1,
    "b" => { 2 },
    "c" => {
      let z = 3
      z
    }
    "d" => { { k: 1 } }
    "e" => { { k: 1 }.k }
    "f" => { return 2 }
    "g" => [1, 2]
    "" => { { x: 1 }.x == 1 }
    "h" => ({ x: 1 }).x
    _ => if s == "" { 0 } else { 9 }
  }
  let m2 = match s { "x" => "y", _ => "z" }
  let empty = match s {}
  if s == "" {}
  if s == "" {} else {}
  if s == "" { 1 } else if s == "b" {}
  for x in xs { if x > 1 { break } }
  return v
}
)";

const char* const kStrings = R"(program strings

fn s(name: Str, n: Int, r: { a: Int }, c: Bool) -> Str {
  let a = "quote \" backslash \\ newline \n tab \t braces \{ \} unicode é 日本 🎉"
  let b = "Hello {name}, you have {n + 1} items; {r.a * 2} \{literal\}"
  let c2 = "{name}"
  let d = "{ {x: 1}.x }"
  let e = "{if n > 0 { n } else { 0 }}"
  let f2 = "{match name { _ => 1 }}"
  let g = "{ for x in [1, 2] { let y = x; y * 2 } }"
  let h = "nested {f(g(1), [2, 3])} and {-n} and {not c} and {-(-n)}"
  let i = ""
  let j = "{{ a: 1, b: [1, 2] }}"
  let k = "{ {first_field: 1111111111, second_field: 2222222222, third_field: 3333333333, x: 1}.x }"
  let l = "{if c {} else { let q = 1; q }}{n}{n}"
  let m = "a#b {n} # not a comment"
  let o = "{web.fetch(name) retry 1 timeout 500ms else name}"
  return a
}
)";

const char* const kComments = R"(# header comment 1
# header comment 2
program commented  # program trailing
# before uses
uses a.b  # uses trailing
uses llm  # second uses trailing
# before budget
budget usd 0.5  # budget trailing

# type doc
type A = Int  # type trailing
type B = Str
# doc for C
type C = {
  x: Int,  # inside a record type
  y: Str
}

# agent doc
agent Bot {  # agent open trailing
  # inner
  model: llm  # model trailing
  system: "be nice"
  max_calls: 3
  # after the settings
}  # agent trailing

# fn doc
fn main(x: Int) -> Int {  # open brace trailing
  # before let
  let y = x + 1  # let trailing
  let r = {
    a: 1,  # inside record
    # own line inside record
    b: 2
  }
  if y > 1 {
    # only a comment
  }
  let m = match x {  # match trailing
    # arm comment
    "a" => 1  # arm trailing
    _ => {
      2  # in arm block
      # closing arm block
    }
    # closing match
  }
  let z = if y > 2 {  # if trailing
    1
  } else {  # else trailing
    2
  }  # after the if
  let w = f(
    1,  # first argument
    2
  )
  return y  #   trailing with blanks after it    
  # closing fn
}  # fn trailing
fn one() { return 1 }  # one-line fn trailing

test "t" {
  expect main(1) == 2  # expect trailing
}
# end comment 1

# end comment 2
)";

const char* const kLongRecords = R"(program records

fn long(c: Bool) -> Int {
  let r = { first_field: "aaaaaaaaaaaaaaa", second_field: "bbbbbbbbbbbbbbbbbb", third_field: 12345678 }
  let nested = { outer: { first_field: "aaaaaaaaaaaaaaa", second_field: "bbbbbbbbbbbbbbbbbb", third: 1 }, x: 1 }
  let inlist = [{ first_field: "aaaaaaaaaaaaaaa", second_field: "bbbbbbbbbbbbbbbbbb", third_field: 12345678 }, 2]
  let inarg = f({ first_field: "aaaaaaaaaaaaaaa", second_field: "bbbbbbbbbbbbbbbbbb", third_field: 12345678 })
  let withblock = { a: if c { 1 } else { 2 }, b: 2 }
  let fb = web.fetch("u") else { first_field: "aaaaaaaaaaaaaaa", second_field: "bbbbbbbbbbbbbbbbbb", third: 1 }
  let arm = match "x" {
    "x" => { { first_field: "aaaaaaaaaaaaaaa", second_field: "bbbbbbbbbbbbbbbbbb", third_field: 12345678 } }
    _ => { { a: 1 } }
  }
  let exactly80 = { aaaaaaaaaa: 1111111111, bbbbbbbbbb: 2222222222, cccccccccc: 3333333333, d: 1 }
  let exactly81 = { aaaaaaaaaa: 1111111111, bbbbbbbbbb: 2222222222, cccccccccc: 3333333333, dd: 1 }
  let access = { first_field: "aaaaaaaaaaaaaaa", second_field: "bbbbbbbbbbbbbbbbbb", third_field: 1 }.third_field
  let unicode = { a: "日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本" }
  if c {
    let deep = { level: { level: { first_field: "aaaaaaaaaaaaaaa", second_field: "bbbbbbbbbbbbbbbbbb", t: 1 } } }
  }
  return { a: 1 }.a
}
)";

const char* const kHeaders[] = {
    "program empty\n",
    "program only_budget\nbudget usd 10\n",
    "program fractional\nbudget usd 0.25\n",
    "program integral_float\nbudget usd 5.0\n",
    "program negative_zero\nbudget usd -0\n",
    "program negative\nbudget usd 2.5\n",
    "program tiny\nbudget usd 0.00001\n",
    "program huge\nbudget usd 100000000000000000000.0\n",
    "program large_int\nbudget usd 9007199254740993\n",
    "program uses_only\nuses a.b, c.d\nuses e.f\n",
    "program budget_first\nbudget usd 1\nuses llm\n",
    "program comment_only  # t\n# between\n",
    "# just a header\nprogram x\n\n\n# end\n",
    "program x\n# before the first decl\nfn main() {}\n",
    "program x\nuses llm\n# comment between uses and decl\nfn main() {}\n",
    "program x\ntype A = Int\ntype B = Int\nfn f() {}\ntype C = Int\n# doc\ntype D = Int\n",
    "program x\nagent A { model: llm, system: \"s \\\"q\\\"\", max_calls: 1 }\nagent B {\n  model: m\n  system: \"\"\n}\n",
    "program x\nagent A { model: llm max_calls: 2 }  # one line\n",
};

const char* const kHost = R"(# host header
type Page = Str
type Id = Int
# doc for Rec
type Rec = { a: Int, b: List[Str] max 3 }

input topic tags untrusted
input secret tags private, untrusted  # trailing

# cap doc
capability web.fetch(url: Str deny private) -> Str  # sig trailing
  # inner before tags
  tags untrusted  # tags trailing
  clears private
  cost 0.001
  idempotent
  approval always
capability payments.refund(order_id: Str deny untrusted approve untrusted, amount: Float approve (untrusted, private))
  cost -1
capability log.write(msg: Str deny (private, secret) deny other approve a approve b)
capability x.y() -> { ok: Bool }
  cost 1
capability deep.name.space(a: Int)
  tags a, b, c
  clears d, e
  cost 0.00001
model llm cost 0.02
model cheap
model big cost 100000000000000000000.0
model zero cost 0
input later tags x
# end
)";

const char* const kHostVariants[] = {
    "",
    "# only a comment\n",
    "model a\nmodel b\ninput c tags d\ninput e tags f\ntype T = Int\n",
    "capability a.b()\ncapability c.d()\n  idempotent\n",
    "model llm  # t\n\n\n# doc\nmodel other cost 0.5\n",
};

}  // namespace

TEST_SUITE("formatter") {

TEST_CASE("the program corpus keeps its meaning and is a fixed point") {
    const char* const corpus[] = {kStatements, kPrecedence, kCalls, kControl, kStrings, kComments, kLongRecords};
    for (std::string text : corpus) {
        CAPTURE(text);
        checkProgram(text);
    }
    for (std::string text : kHeaders) {
        CAPTURE(text);
        checkProgram(text);
    }
}

// Parentheses for readability only are dropped when they would nest too deeply; the layout
// that remains must keep meaning and be a fixed point just the same.
TEST_CASE("the Minimal parenthesisation keeps meaning and is a fixed point") {
    FrontendLimits tight;
    tight.maxNesting = 1;
    const char* const corpus[] = {kStatements, kPrecedence, kCalls, kControl, kStrings, kComments, kLongRecords};
    for (std::string text : corpus) {
        CAPTURE(text);
        checkProgram(text, tight);
    }
    checkHost(kHost, tight);
    CHECK(formatBody("-(-x)", tight) == "  - -x\n");
    CHECK(formatBody("-(-(-1))", tight) == "  - - -1\n");
    CHECK(formatBody("-(not x)", tight) == "  -(not x)\n");
    CHECK(formatBody("(if c {1} else {2}) + 1", tight) == "  if c {\n    1\n  } else {\n    2\n  } + 1\n");
    CHECK(formatBody("1 + (if c {1} else {2}) * 3", tight) == "  1 + if c {\n    1\n  } else {\n    2\n  } * 3\n");
    CHECK(formatBody("(if c {1}).x", tight) == "  if c {\n    1\n  }.x\n");
    CHECK(formatBody("w.f() else (-a)", tight) == "  w.f() else -a\n");
    CHECK(formatBody("w.f() else (if c {1} else {2})", tight) == "  w.f() else if c {\n    1\n  } else {\n    2\n  }\n");
    CHECK(formatBody("w.f() else (not a)", tight) == "  w.f() else (not a)\n");
    CHECK(formatBody("(w.f() retry 1).x", tight) == "  w.f() retry 1.x\n");
    CHECK(formatBody("(w.f() timeout 1s)[0]", tight) == "  w.f() timeout 1s[0]\n");
    CHECK(formatBody("(w.f() else 1).x", tight) == "  (w.f() else 1).x\n");
    CHECK(formatBody("if (if c {d} else {e}) {1}", tight) == formatBody("if (if c {d} else {e}) {1}"));
}

TEST_CASE("a file nested near the parser's limit is formatted within it") {
    // 65 negations: -(-(...)) would need 130 levels, so the formatter writes `- - ...` instead.
    std::string minus;
    for (int i = 0; i < 65; ++i) minus += "- ";
    std::string deep = checkProgram("program p\nfn main() -> Int {\n  return " + minus + "1\n}\n");
    CHECK(deep.find("- - - -") != std::string::npos);
    CHECK(deep.find("(") == deep.find("()"));  // the only parentheses are those of main()
    // Nested block expressions as operands: each wrap would add a level.
    std::string nested = "x";
    for (int i = 0; i < 40; ++i) nested = "-if c { " + nested + " } else { 1 }";
    checkProgram("program p\nfn main() {\n  " + nested + "\n}\n");
    // Nested fallbacks: `else (-...)` would add a level each time.
    std::string fallbacks = "x";
    for (int i = 0; i < 60; ++i) fallbacks = "w.f() else -" + fallbacks;
    checkProgram("program p\nfn main() {\n  " + fallbacks + "\n}\n");
    // Shallow files keep the readable parentheses.
    CHECK(formatBody("--x") == "  -(-x)\n");
}

TEST_CASE("long data lists break one item per line, under the line limit") {
    std::string items;
    for (int i = 0; i < 2400; ++i) items += "    100000,\n";
    std::string formatted = checkProgram("program p\nfn main() {\n  let x = [\n" + items + "  ]\n  f(\n" + items + "  )\n}\n");
    CHECK(formatted.find("  let x = [\n    100000,\n    100000,\n") != std::string::npos);
    CHECK(formatted.find("  f(\n    100000,\n") != std::string::npos);
    std::istringstream lines(formatted);
    for (std::string line; std::getline(lines, line);) CHECK(line.size() < 1100);

    // Short lists stay on one line, however their items are laid out.
    CHECK(formatBody("[1, 2]") == "  [1, 2]\n");

    // Parameters, record types, `uses`, `tags` and `clears` wrap the same way.
    std::string params, fields, names, args;
    for (int i = 0; i < 300; ++i) {
        std::string n = "name_number_" + std::to_string(i);
        params += n + ": Int,\n";
        fields += n + ": Int,\n";
        names += std::string(i ? ", " : "") + "ns.capability_" + std::to_string(i);
        args += std::string(i ? ", " : "") + "tag_" + std::to_string(i);
    }
    std::string program = checkProgram("program p\nuses " + names + "\ntype T = {\n" + fields + "}\nfn f(\n" + params + ") {}\n");
    CHECK(program.find("uses ns.capability_0, ") == program.find("uses "));
    CHECK(program.find("\nuses ", program.find("uses ") + 1) != std::string::npos);  // a second uses line
    CHECK(program.find("type T = {\n  name_number_0: Int,\n") != std::string::npos);
    CHECK(program.find("fn f(\n  name_number_0: Int,\n") != std::string::npos);
    std::string host = checkHost("capability a.b(\n" + params + ")\n  tags " + args + "\n  clears " + args + "\n");
    CHECK(host.find("capability a.b(\n  name_number_0: Int,\n") == 0);
    CHECK(host.find("\n  tags tag_0, ") != std::string::npos);
    CHECK(host.find("\n  tags ", host.find("\n  tags ") + 1) != std::string::npos);
    CHECK(host.find("\n  clears ", host.find("\n  clears ") + 1) != std::string::npos);
}

TEST_CASE("fuzz regressions that parse format safely") {
    const std::filesystem::path dir = std::filesystem::path(REMIT_SOURCE_DIR) / "tests" / "fuzz" / "regressions";
    if (!std::filesystem::is_directory(dir)) return;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        std::string text = readFile(entry.path());
        CAPTURE(entry.path().string());
        SourceFile source("regression", text);
        DiagnosticList diags;
        auto program = parseProgram(source, diags);
        if (program && !diags.hasErrors()) checkProgram(text);
        DiagnosticList hostDiags;
        auto host = parseHost(source, hostDiags);
        if (host && !hostDiags.hasErrors()) checkHost(text);
    }
}

TEST_CASE("formatExpression prints one expression on one line") {
    auto program = parseProgramOk(
        "program p\nfn main() {\n  inv.iban + f(x, y: { a: 1 })\n  if c {\n    # note\n    1\n  } else {\n    let z = 2\n    z\n  }\n"
        "  match s {\n    \"a\" => { { b: 1 } }\n    _ => 2\n  }\n}\n");
    const auto& stmts = program->decls[0]->as<ast::FnDecl>().body->stmts;
    CHECK(formatExpression(*stmts[0]->value) == "inv.iban + f(x, y: { a: 1 })");
    CHECK(formatExpression(*stmts[1]->value) == "if c { 1 } else { let z = 2; z }");
    CHECK(formatExpression(*stmts[2]->value) == "match s { \"a\" => { { b: 1 } }, _ => 2 }");
}

TEST_CASE("the host corpus keeps its meaning and is a fixed point") {
    checkHost(kHost);
    for (std::string text : kHostVariants) {
        CAPTURE(text);
        checkHost(text);
    }
}

TEST_CASE("the example programs are already canonical") {
    const std::filesystem::path dir = std::filesystem::path(REMIT_SOURCE_DIR) / "examples" / "hello";
    std::string program = readFile(dir / "hello.rmt");
    CHECK(checkProgram(program) == program);
    std::string host = readFile(dir / "host.rmti");
    CHECK(checkHost(host) == host);
}

TEST_CASE("a messy program formats to the canonical layout") {
    const std::string messy =
        "# top\n"
        "program   messy   # t\n"
        "uses b.c\n"
        "uses llm,   d.e\n"
        "budget usd 1.50\n"
        "type A=Int\n"
        "type B = {x:Int,y:List[Str]max 2}\n"
        "fn main( x : Int )->Int{let y=x*(2+3)   # c\n"
        "if y>1{return y}else if y<0 {return -y} else{return 0}}\n"
        "agent Bot{model:llm,system:\"hi\"}\n"
        "test \"t\"{expect main(1)==1,\"m\"}\n";
    const std::string expected =
        "# top\n"
        "program messy  # t\n"
        "uses b.c, llm, d.e\n"
        "budget usd 1.5\n"
        "\n"
        "type A = Int\n"
        "type B = { x: Int, y: List[Str] max 2 }\n"
        "\n"
        "fn main(x: Int) -> Int {\n"
        "  let y = x * (2 + 3)  # c\n"
        "  if y > 1 {\n"
        "    return y\n"
        "  } else if y < 0 {\n"
        "    return -y\n"
        "  } else {\n"
        "    return 0\n"
        "  }\n"
        "}\n"
        "\n"
        "agent Bot {\n"
        "  model: llm\n"
        "  system: \"hi\"\n"
        "}\n"
        "\n"
        "test \"t\" {\n"
        "  expect main(1) == 1, \"m\"\n"
        "}\n";
    CHECK(checkProgram(messy) == expected);
}

TEST_CASE("parentheses are minimal and precedence-aware") {
    CHECK(formatBody("((a + b)) * c") == "  (a + b) * c\n");
    CHECK(formatBody("a - (b - c)") == "  a - (b - c)\n");
    CHECK(formatBody("(a - b) - c") == "  a - b - c\n");
    CHECK(formatBody("a + b * c") == "  a + b * c\n");
    CHECK(formatBody("(a * b) + c") == "  a * b + c\n");
    CHECK(formatBody("a / (b * c)") == "  a / (b * c)\n");
    CHECK(formatBody("not (a and b)") == "  not (a and b)\n");
    CHECK(formatBody("(not a) and b") == "  not a and b\n");
    CHECK(formatBody("not (a == b)") == "  not a == b\n");
    CHECK(formatBody("(not a) == b") == "  (not a) == b\n");
    CHECK(formatBody("a or (b and c)") == "  a or b and c\n");
    CHECK(formatBody("(a or b) and c") == "  (a or b) and c\n");
    CHECK(formatBody("(a == b) == c") == "  (a == b) == c\n");
    CHECK(formatBody("a == (b == c)") == "  a == (b == c)\n");
    CHECK(formatBody("(a < b) in c") == "  (a < b) in c\n");
    CHECK(formatBody("-(-x)") == "  -(-x)\n");
    CHECK(formatBody("--x") == "  -(-x)\n");
    CHECK(formatBody("- -1") == "  -(-1)\n");
    CHECK(formatBody("a - -b") == "  a - -b\n");
    CHECK(formatBody("-(a + b)") == "  -(a + b)\n");
    CHECK(formatBody("(-a) * b") == "  -a * b\n");
    CHECK(formatBody("-(not a)") == "  -(not a)\n");
    CHECK(formatBody("(-a).b") == "  (-a).b\n");
    CHECK(formatBody("(a + b)[0]") == "  (a + b)[0]\n");
    CHECK(formatBody("(((a)))") == "  a\n");
    CHECK(formatBody("(if c {1} else {2}) + 1") == "  (if c {\n    1\n  } else {\n    2\n  }) + 1\n");
    CHECK(formatBody("-(for x in xs { x })") == "  -(for x in xs {\n    x\n  })\n");
    CHECK(formatBody("not (match s { _ => true })") == "  not (match s {\n    _ => true\n  })\n");
    CHECK(formatBody("(if c {} ).x") == "  (if c {}).x\n");
}

TEST_CASE("calls print their modifiers and a safely wrapped fallback") {
    CHECK(formatBody("f(a,name:b)") == "  f(a, name: b)\n");
    CHECK(formatBody("web.fetch(u) else x retry 2 timeout 10s") == "  web.fetch(u) retry 2 timeout 10s else x\n");
    CHECK(formatBody("w.f() timeout 500ms") == "  w.f() timeout 500ms\n");
    CHECK(formatBody("w.f() timeout 0.5s") == "  w.f() timeout 500ms\n");
    CHECK(formatBody("w.f() timeout 2m") == "  w.f() timeout 120s\n");
    CHECK(formatBody("w.f() timeout 1500ms") == "  w.f() timeout 1500ms\n");
    CHECK(formatBody("w.f() timeout 1.5s") == "  w.f() timeout 1500ms\n");
    CHECK(formatBody("w.f() timeout 10000ms") == "  w.f() timeout 10s\n");
    CHECK(formatBody("w.f() else {a:1}") == "  w.f() else { a: 1 }\n");
    CHECK(formatBody("w.f() else (a + 1)") == "  w.f() else (a + 1)\n");
    CHECK(formatBody("w.f() else -1") == "  w.f() else -1\n");
    CHECK(formatBody("w.f() else (-a)") == "  w.f() else (-a)\n");
    CHECK(formatBody("w.f() else (not a)") == "  w.f() else (not a)\n");
    CHECK(formatBody("w.f() else a.b[0]") == "  w.f() else a.b[0]\n");
    CHECK(formatBody("w.f() else (if c {1} else {2})") ==
          "  w.f() else (if c {\n    1\n  } else {\n    2\n  })\n");
    CHECK(formatBody("(w.f() else a).b") == "  (w.f() else a).b\n");
    CHECK(formatBody("(w.f() retry 1)[0]") == "  (w.f() retry 1)[0]\n");
    CHECK(formatBody("w.f() else a + 1") == "  w.f() else a + 1\n");
    CHECK(formatBody("w.f() else g() retry 1") == "  w.f() else g() retry 1\n");
    CHECK(formatBody("llm.ask( Summary ,\"p\",context:x)") == "  llm.ask(Summary, \"p\", context: x)\n");
    CHECK(formatBody("llm.ask({a:Int},\"p\")") == "  llm.ask({ a: Int }, \"p\")\n");
    CHECK(formatBody("llm.ask(\"y\"|\"n\",\"p\")") == "  llm.ask(\"y\" | \"n\", \"p\")\n");
    CHECK(formatBody("llm.ask(((Summary)), \"p\")") == "  llm.ask((Summary), \"p\")\n");
    CHECK(formatBody("llm.ask(({a: 1}).a, \"p\")") == "  llm.ask(({ a: 1 }.a), \"p\")\n");
    CHECK(formatBody("llm.ask((Make(1)), \"p\")") == "  llm.ask(Make(1), \"p\")\n");
    CHECK(formatBody("other.f((Summary), \"p\")") == "  other.f(Summary, \"p\")\n");
}

TEST_CASE("records, lists and blocks") {
    CHECK(formatBody("{a:1,b:2}") == "  { a: 1, b: 2 }\n");
    CHECK(formatBody("let r = {}") == "  let r = {}\n");
    CHECK(formatBody("[ 1 ,2 ]") == "  [1, 2]\n");
    CHECK(formatBody("let r = { first_field: \"aaaaaaaaaaaaaaa\", second_field: \"bbbbbbbbbbbbbbbbbb\", third: 12345678 }") ==
          "  let r = {\n    first_field: \"aaaaaaaaaaaaaaa\",\n    second_field: \"bbbbbbbbbbbbbbbbbb\",\n    third: 12345678\n  }\n");
    CHECK(formatBody("let r = { a: if c { 1 } else { 2 } }") ==
          "  let r = {\n    a: if c {\n      1\n    } else {\n      2\n    }\n  }\n");
    // The limit is 80 code points for the record itself, wherever it sits.
    CHECK(formatBody("{ aaaaaaaaaa: 1111111111, bbbbbbbbbb: 2222222222, cccccccccc: 3333333333, d: 1 }") ==
          "  { aaaaaaaaaa: 1111111111, bbbbbbbbbb: 2222222222, cccccccccc: 3333333333, d: 1 }\n");
    CHECK(formatBody("{ aaaaaaaaaa: 1111111111, bbbbbbbbbb: 2222222222, cccccccccc: 3333333333, dd: 1 }") ==
          "  {\n    aaaaaaaaaa: 1111111111,\n    bbbbbbbbbb: 2222222222,\n    cccccccccc: 3333333333,\n    dd: 1\n  }\n");
    CHECK(formatBody("{ a: \"日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本\" }") ==
          "  { a: \"日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本\" }\n");
    CHECK(formatBody("if c {}") == "  if c {}\n");
    CHECK(formatBody("for x in xs limit 3 if x > 1 { x }") == "  for x in xs limit 3 if x > 1 {\n    x\n  }\n");
    CHECK(formatBody("let x = match s { \"a\" => 1, \"b\" => { 2 }, \"c\" => { {k: 1} }, _ => { let y = 1\ny } }") ==
          "  let x = match s {\n"
          "    \"a\" => 1\n"
          "    \"b\" => 2\n"
          "    \"c\" => {\n"
          "      { k: 1 }\n"
          "    }\n"
          "    _ => {\n"
          "      let y = 1\n"
          "      y\n"
          "    }\n"
          "  }\n");
    CHECK(formatBody("match s {}") == "  match s {}\n");
}

TEST_CASE("strings, interpolation and numbers re-lex to the same values") {
    CHECK(formatBody(R"(let s = "a\"b\\c\nd\te\{f\}g é")") == "  let s = \"a\\\"b\\\\c\\nd\\te\\{f\\}g é\"\n");
    CHECK(formatBody(R"(let s = "x {a+1} \{y\} {f(b,c)}")") == "  let s = \"x {a + 1} \\{y\\} {f(b, c)}\"\n");
    CHECK(formatBody(R"(let s = "{if c {1} else {let y = 2;y}}")") == "  let s = \"{if c { 1 } else { let y = 2; y }}\"\n");
    CHECK(formatBody("let s = \"{match x { _ => { {a: 1} } }}\"") == "  let s = \"{match x { _ => { { a: 1 } } }}\"\n");
    CHECK(formatBody("let f = 1_000 + 0.50 + 1.0 + 10000000000000000.0 + 0.00001") ==
          "  let f = 1000 + 0.5 + 1.0 + 10000000000000000.0 + 0.00001\n");
}

TEST_CASE("comments stay where the parser attached them") {
    CHECK(formatBody("let r = {\n  a: 1,  # inside\n  b: 2\n}  # after") == "  # inside\n  let r = { a: 1, b: 2 }  # after\n");
    CHECK(formatBody("if c { 1 }  # t") == "  if c {\n    1  # t\n  }\n");
    CHECK(formatBody("x\n# closing") == "  x\n  # closing\n");
    CHECK(formatBody("match s {\n# a\n\"a\" => 1 # t\n# closing\n}") ==
          "  match s {\n    # a\n    \"a\" => 1  # t\n    # closing\n  }\n");
    CHECK(checkProgram("program p\nagent A {  # open\n  # in\n  model: m  # m\n}  # close\n") ==
          "program p\n\nagent A {\n  # open\n  # in\n  # m\n  model: m\n}  # close\n");
}

TEST_CASE("a messy host interface formats to the canonical layout") {
    const std::string messy =
        "type A=Int\n"
        "type B = {x:Int}\n"
        "model llm cost 0.020\n"
        "model cheap cost 0\n"
        "input t tags untrusted,private\n"
        "capability a.b(x:Str deny private approve(untrusted,other))->Str  # sig\n"
        "  cost 1\n"
        "  tags t\n"
        "  approval always\n"
        "  idempotent\n"
        "  clears c\n"
        "# end\n";
    const std::string expected =
        "type A = Int\n"
        "type B = { x: Int }\n"
        "\n"
        "model llm cost 0.02\n"
        "model cheap\n"
        "\n"
        "input t tags untrusted, private\n"
        "\n"
        "capability a.b(x: Str deny private approve (untrusted, other)) -> Str  # sig\n"
        "  tags t\n"
        "  clears c\n"
        "  cost 1.0\n"
        "  idempotent\n"
        "  approval always\n"
        "\n"
        "# end\n";
    CHECK(checkHost(messy) == expected);
    CHECK(checkHost("") == "\n");
    CHECK(checkHost("# c\n") == "# c\n");
}

TEST_CASE("trees built in code still print as source that parses") {
    // The parser never makes negative literals, but the printed text must not read as `--`.
    auto program = parseProgramOk("program p\nfn main() {\n  -5\n  -2.5\n  -x\n}\n");
    auto& body = program->decls[0]->as<ast::FnDecl>().body->stmts;
    body[0]->value->as<ast::UnaryExpr>().operand->as<ast::IntLit>().value = -5;
    body[1]->value->as<ast::UnaryExpr>().operand->as<ast::FloatLit>().value = -2.5;
    std::string text = formatProgram(*program);
    CHECK(text.find("--") == std::string::npos);
    CHECK(text.find("-(-5)") != std::string::npos);
    CHECK(text.find("-(-2.5)") != std::string::npos);
    parseProgramOk(text);
}

TEST_CASE("golden pairs in tests/golden/fmt") {
    const std::filesystem::path dir = std::filesystem::path(REMIT_SOURCE_DIR) / "tests" / "golden" / "fmt";
    REQUIRE(std::filesystem::is_directory(dir));
    int pairs = 0;
    bool sawHost = false;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        std::string name = entry.path().filename().string();
        size_t marker = name.find(".input.");
        if (marker == std::string::npos) continue;
        std::string extension = name.substr(marker + std::strlen(".input."));
        std::filesystem::path expectedPath = dir / (name.substr(0, marker) + ".expected." + extension);
        CAPTURE(name);
        std::string input = readFile(entry.path());
        std::string expected = readFile(expectedPath);
        if (extension == "rmti") {
            sawHost = true;
            CHECK(checkHost(input) == expected);
            CHECK(checkHost(expected) == expected);
            CHECK(sameHost(*parseHostOk(input), *parseHostOk(expected)));
        } else {
            REQUIRE(extension == "rmt");
            CHECK(checkProgram(input) == expected);
            CHECK(checkProgram(expected) == expected);
            CHECK(sameProgram(*parseProgramOk(input), *parseProgramOk(expected)));
        }
        ++pairs;
    }
    CHECK(pairs >= 4);
    CHECK(sawHost);
}

TEST_CASE("formatFloatLiteral spells every double so that the lexer reads it back") {
    CHECK(formatFloatLiteral(1e16) == "10000000000000000.0");
    CHECK(formatFloatLiteral(1e-5) == "0.00001");
    CHECK(formatFloatLiteral(0.1) == "0.1");
    CHECK(formatFloatLiteral(1.0) == "1.0");
    CHECK(formatFloatLiteral(0.0) == "0.0");
    CHECK(formatFloatLiteral(-0.0) == "-0.0");
    CHECK(formatFloatLiteral(123.456) == "123.456");
    CHECK(formatFloatLiteral(1.5e-7) == "0.00000015");
    CHECK(formatFloatLiteral(1.2345e20) == "123450000000000000000.0");
    CHECK(formatFloatLiteral(-1e16) == "-10000000000000000.0");

    // A deterministic spread of bit patterns: every finite non-negative double must round-trip.
    uint64_t state = 0x9E3779B97F4A7C15ull;
    int checked = 0;
    for (int i = 0; i < 20000; ++i) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        double value;
        uint64_t bits = state & 0x7FFFFFFFFFFFFFFFull;
        std::memcpy(&value, &bits, sizeof value);
        if (!std::isfinite(value)) continue;
        std::string text = formatFloatLiteral(value);
        DiagnosticList diags;
        LexResult lexed = lex(text, "float", FrontendLimits{}, diags);
        INFO(text);
        REQUIRE_FALSE(diags.hasErrors());
        REQUIRE(lexed.tokens.size() == 3);  // the literal, Newline, Eof
        CHECK(lexed.tokens[0].kind == Tok::Float);
        CHECK(lexed.tokens[0].floatValue == value);
        ++checked;
    }
    CHECK(checked > 19000);
}

TEST_CASE("formatDuration prefers ms below a second, s on whole seconds, and always round-trips") {
    CHECK(formatDuration(0.5) == "500ms");
    CHECK(formatDuration(10) == "10s");
    CHECK(formatDuration(120) == "120s");
    CHECK(formatDuration(1.5) == "1500ms");
    CHECK(formatDuration(0) == "0ms");
    CHECK(formatDuration(0.001) == "1ms");
    CHECK(formatDuration(1) == "1s");

    auto lexesTo = [](const std::string& text, double seconds) {
        DiagnosticList diags;
        LexResult lexed = lex(text, "duration", FrontendLimits{}, diags);
        return !diags.hasErrors() && lexed.tokens.size() == 3 && lexed.tokens[0].kind == Tok::Duration &&
               lexed.tokens[0].floatValue == seconds;
    };
    const double samples[] = {0.0015, 1.0005, 1e20, 1e-10, 0.1, 0.3, 2.675, 59.999, 1e-300, 123456.789, 0.0001};
    for (double seconds : samples) {
        CAPTURE(seconds);
        CHECK(lexesTo(formatDuration(seconds), seconds));
    }
    for (int ms = 0; ms < 5000; ms += 7) {
        double seconds = ms * 0.001;
        CAPTURE(ms);
        CHECK(lexesTo(formatDuration(seconds), seconds));
    }
    for (int i = 1; i < 2000; ++i) {
        double seconds = i / 64.0 + i * 1e-6;
        CAPTURE(seconds);
        CHECK(lexesTo(formatDuration(seconds), seconds));
    }
}

}  // TEST_SUITE("formatter")

TEST_SUITE("ast_equal") {

TEST_CASE("sameProgram ignores layout and comments") {
    auto a = parseProgramOk("program p\nuses x.y, llm\nfn f() -> Int {\n  return (1 + 2) * 3  # c\n}\n");
    auto b = parseProgramOk("# h\nprogram p\nuses x.y\nuses llm\nfn f()->Int{return ((1+2))*3}\n");
    CHECK(sameProgram(*a, *b));
    auto c = parseProgramOk("program p\nfn f() {\n  match s {\n    \"a\" => { 1 }\n  }\n}\n");
    auto d = parseProgramOk("program p\nfn f() {\n  match s { \"a\" => 1 }\n}\n");
    CHECK(sameProgram(*c, *d));
}

TEST_CASE("sameProgram sees every semantic difference") {
    const std::string base = "program p\nuses a.b\nbudget usd 1\nfn f(x: Int) -> Int {\n  BODY\n}\n";
    auto with = [&](const std::string& body) {
        std::string text = base;
        text.replace(text.find("BODY"), 4, body);
        return parseProgramOk(text);
    };
    const std::pair<const char*, const char*> differing[] = {
        {"a - b - c", "a - (b - c)"},
        {"a + b", "a - b"},
        {"not a and b", "not (a and b)"},
        {"-x", "x"},
        {"1", "2"},
        {"1.5", "1.25"},
        {"1", "1.0"},
        {"\"a\"", "\"b\""},
        {"\"{a}\"", "\"{b}\""},
        {"\"x{a}\"", "\"y{a}\""},
        {"true", "false"},
        {"r.a", "r.b"},
        {"xs[0]", "xs[1]"},
        {"[1, 2]", "[1]"},
        {"{ a: 1 }", "{ b: 1 }"},
        {"{ a: 1 }", "{ a: 2 }"},
        {"f(1)", "g(1)"},
        {"a.f(1)", "b.f(1)"},
        {"f(1)", "f(1, 2)"},
        {"f(x: 1)", "f(y: 1)"},
        {"f(x: 1)", "f(1)"},
        {"llm.ask(A, \"p\")", "llm.ask(B, \"p\")"},
        {"llm.ask(A, \"p\")", "llm.ask((A), \"p\")"},
        {"llm.ask(List[A] max 2)", "llm.ask(List[A] max 3)"},
        {"a.b() retry 1", "a.b() retry 2"},
        {"a.b() retry 1", "a.b()"},
        {"a.b() timeout 1s", "a.b() timeout 2s"},
        {"a.b() else 1", "a.b() else 2"},
        {"a.b() else 1", "a.b()"},
        {"if c { 1 }", "if c { 2 }"},
        {"if c { 1 } else { 2 }", "if c { 1 }"},
        {"if c { 1 } else if d { 2 }", "if c { 1 } else { 2 }"},
        {"for x in xs { x }", "for y in xs { x }"},
        {"for x in xs limit 2 { x }", "for x in xs { x }"},
        {"for x in xs if x { x }", "for x in xs { x }"},
        {"match s { \"a\" => 1 }", "match s { \"b\" => 1 }"},
        {"match s { \"a\" => 1 }", "match s { _ => 1 }"},
        {"match s { \"a\" => 1 }", "match s { \"a\" => 2 }"},
        {"let x = 1", "var x = 1"},
        {"let x = 1", "let y = 1"},
        {"let x: Int = 1", "let x = 1"},
        {"let x: Int = 1", "let x: Str = 1"},
        {"let x: List[Int] max 2 = 1", "let x: List[Int] max 3 = 1"},
        {"let x: \"a\" | \"b\" = 1", "let x: \"a\" = 1"},
        {"let x: { a: Int } = 1", "let x: { b: Int } = 1"},
        {"x = 1", "y = 1"},
        {"return", "return 1"},
        {"expect a", "expect a, \"m\""},
        {"expect a, \"m\"", "expect a, \"n\""},
        {"break", "a"},
        {"a\nb", "a"},
    };
    for (const auto& [left, right] : differing) {
        CAPTURE(left);
        CAPTURE(right);
        CHECK_FALSE(sameProgram(*with(left), *with(right)));
        CHECK(sameProgram(*with(left), *with(left)));
    }
    auto plain = with("a");
    CHECK_FALSE(sameProgram(*plain, *parseProgramOk("program q\nuses a.b\nbudget usd 1\nfn f(x: Int) -> Int {\n  a\n}\n")));
    CHECK_FALSE(sameProgram(*plain, *parseProgramOk("program p\nuses a.c\nbudget usd 1\nfn f(x: Int) -> Int {\n  a\n}\n")));
    CHECK_FALSE(sameProgram(*plain, *parseProgramOk("program p\nuses a.b\nbudget usd 2\nfn f(x: Int) -> Int {\n  a\n}\n")));
    CHECK_FALSE(sameProgram(*plain, *parseProgramOk("program p\nuses a.b\nfn f(x: Int) -> Int {\n  a\n}\n")));
    CHECK_FALSE(sameProgram(*plain, *parseProgramOk("program p\nuses a.b\nbudget usd 1\nfn f(x: Str) -> Int {\n  a\n}\n")));
    CHECK_FALSE(sameProgram(*plain, *parseProgramOk("program p\nuses a.b\nbudget usd 1\nfn f(y: Int) -> Int {\n  a\n}\n")));
    CHECK_FALSE(sameProgram(*plain, *parseProgramOk("program p\nuses a.b\nbudget usd 1\nfn f(x: Int) {\n  a\n}\n")));
    CHECK_FALSE(sameProgram(*plain, *parseProgramOk("program p\nuses a.b\nbudget usd 1\nfn g(x: Int) -> Int {\n  a\n}\n")));

    auto agents = [](const char* settings) { return parseProgramOk(std::string("program p\nagent A { ") + settings + " }\n"); };
    CHECK(sameProgram(*agents("model: m"), *agents("model: m")));
    CHECK_FALSE(sameProgram(*agents("model: m"), *agents("model: n")));
    CHECK_FALSE(sameProgram(*agents("model: m"), *agents("model: m, system: \"s\"")));
    CHECK_FALSE(sameProgram(*agents("model: m"), *agents("model: m, max_calls: 1")));
    CHECK_FALSE(sameProgram(*parseProgramOk("program p\ntest \"a\" {}\n"), *parseProgramOk("program p\ntest \"b\" {}\n")));
    CHECK_FALSE(sameProgram(*parseProgramOk("program p\ntest \"a\" {}\n"),
                            *parseProgramOk("program p\ntest \"a\" fixtures \"f.json\" {}\n")));
    CHECK_FALSE(sameProgram(*parseProgramOk("program p\ntype A = Int\n"), *parseProgramOk("program p\ntype B = Int\n")));
    CHECK_FALSE(sameProgram(*parseProgramOk("program p\ntype A = Int\nfn f() {}\n"),
                            *parseProgramOk("program p\nfn f() {}\ntype A = Int\n")));
}

TEST_CASE("sameHost sees every semantic difference") {
    const std::string base = "capability a.b(x: Str deny p approve q) -> Str\n  tags t\n  clears c\n  cost 1\n  idempotent\n  approval always\nmodel m cost 2\ninput i tags u\n";
    auto host = parseHostOk(base);
    CHECK(sameHost(*host, *parseHostOk("# c\n" + base)));
    const std::pair<const char*, const char*> edits[] = {
        {"a.b", "a.c"}, {"x: Str", "x: Int"}, {"deny p", "deny r"}, {"approve q", "approve r"}, {"-> Str", "-> Int"},
        {"tags t", "tags t, v"}, {"clears c", "clears d"}, {"cost 1", "cost 1.5"}, {"  idempotent\n", ""},
        {"  approval always\n", ""}, {"model m", "model n"}, {"cost 2", "cost 3"}, {"input i", "input j"}, {"tags u", "tags w"},
    };
    for (const auto& [from, to] : edits) {
        std::string text = base;
        text.replace(text.find(from), std::strlen(from), to);
        CAPTURE(text);
        CHECK_FALSE(sameHost(*host, *parseHostOk(text)));
    }
}

}  // TEST_SUITE("ast_equal")
