// Program and host hashes, and call-site ids: the hashes ignore everything `remitc fmt`, comment
// edits and the file name can change and see every change in meaning; site ids follow the
// prototype's walk order (docs/language.md "Call-site ids" and "The program hash").
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "compiler/formatter.h"
#include "compiler/parser.h"
#include "compiler/program_hash.h"

using namespace remit;

namespace {

std::unique_ptr<ast::Program> parseOk(const std::string& text, const std::string& file = "t.rmt") {
    SourceFile source(file, text);
    DiagnosticList diags;
    auto program = parseProgram(source, diags);
    REQUIRE_FALSE(diags.hasErrors());
    return program;
}

std::unique_ptr<ast::HostInterface> parseHostOk(const std::string& text, const std::string& file = "host.rmti") {
    SourceFile source(file, text);
    DiagnosticList diags;
    auto host = parseHost(source, diags);
    REQUIRE_FALSE(diags.hasErrors());
    return host;
}

std::string hashOf(const std::string& text, const std::string& file = "t.rmt") { return programHash(*parseOk(text, file)); }

// `text` with its single occurrence of `from` replaced, so each variant below is one edit.
std::string replaceOnce(const std::string& text, const std::string& from, const std::string& to) {
    size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    REQUIRE(text.find(from, at + 1) == std::string::npos);
    return text.substr(0, at) + to + text.substr(at + from.size());
}

// Written in an unusual layout, with comments everywhere the grammar allows them.
const std::string kProgram =
    "# header comment\n"
    "program triage   # trailing\n"
    "uses web.fetch\n"
    "uses llm   # models\n"
    "budget usd 0.25\n"
    "\n"
    "type Mood = \"up\"|\"down\"\n"
    "type Summary = {mood: Mood, line: Str, tags: List[Str] max 4}\n"
    "agent Summarizer { model: llm  max_calls: 2 }\n"
    "\n"
    "fn main(topic: Str, urls: List[Str] max 5) -> Str {\n"
    "  # own-line comment\n"
    "  let pages = for u in urls limit 3 if u != \"\" { web.fetch(u, mode: \"fast\") else \"\" }\n"
    "  var n = 0   # counter\n"
    "  n = n + 1\n"
    "  let s = Summarizer.ask(Summary, \"About {topic}?\", context: pages) timeout 1500ms else {mood: \"down\", line: \"none\", tags: []}\n"
    "  let opener = match s.mood { \"up\" => { \"Good\" }\n"
    "    _ => \"Hi\"\n"
    "  }\n"
    "  let ratio = if n > 2 { 0.5 } else if not (n == 1) { -1.25 } else { pages[0] == \"x\" }\n"
    "  return \"{opener}: {s.line}\"\n"
    "}\n"
    "\n"
    "test \"opener\" fixtures \"f.json\" {\n"
    "  expect main(\"tea\", []) == \"Hi: none\", \"fallback\"\n"
    "}\n"
    "# end comment\n";

const std::string kHost =
    "# host comment\n"
    "type Page = {url: Str, body: Str}\n"
    "input topic tags untrusted   # trailing\n"
    "capability web.fetch(url: Str deny (private, secret) approve untrusted, mode: Str) -> List[Page] max 3\n"
    "  tags untrusted\n"
    "  # inner comment\n"
    "  cost 0.001\n"
    "  idempotent\n"
    "model llm cost 0.01\n";

}  // namespace

TEST_CASE("program hash: bare lowercase hex SHA-256 of a versioned canonical text") {
    auto program = parseOk(kProgram);
    std::string hash = programHash(*program);
    CHECK(hash.size() == 64);
    CHECK(hash.find_first_not_of("0123456789abcdef") == std::string::npos);
    std::string canon = canonicalProgram(*program);
    CHECK(canon.rfind("remit-hash-v1\n", 0) == 0);
    CHECK(canon == canonicalProgram(*parseOk(kProgram)));  // deterministic
    // No layout, comment or position leaks into what is hashed.
    CHECK(canon.find("comment") == std::string::npos);
    CHECK(canon.find("t.rmt") == std::string::npos);
}

TEST_CASE("program hash: unchanged by remitc fmt") {
    auto program = parseOk(kProgram);
    std::string formatted = formatProgram(*program);
    REQUIRE(formatted != kProgram);  // the layout really changes
    auto reparsed = parseOk(formatted);
    CHECK(canonicalProgram(*reparsed) == canonicalProgram(*program));
    CHECK(programHash(*reparsed) == programHash(*program));
    // and once more, from the formatter's own output
    CHECK(programHash(*parseOk(formatProgram(*reparsed))) == programHash(*program));
}

TEST_CASE("program hash: unchanged by adding or removing comments") {
    std::string base = hashOf(kProgram);
    std::string noComments;
    for (size_t start = 0; start < kProgram.size();) {
        size_t end = kProgram.find('\n', start);
        std::string line = kProgram.substr(start, end - start);
        start = end + 1;
        // Every '#' in kProgram starts a comment (none is inside a string).
        size_t hash = line.find('#');
        if (hash != std::string::npos) line.erase(hash);
        noComments += line + "\n";
    }
    REQUIRE(noComments.find('#') == std::string::npos);
    CHECK(hashOf(noComments) == base);
    CHECK(hashOf("# a new first line\n" + kProgram) == base);
    CHECK(hashOf(replaceOnce(kProgram, "  n = n + 1\n", "  # why\n  n = n + 1  # more\n")) == base);
    CHECK(hashOf(kProgram + "# another end comment\n") == base);
}

TEST_CASE("program hash: unchanged by the file name") {
    CHECK(hashOf(kProgram, "a.rmt") == hashOf(kProgram, "some/dir/b.rmt"));
}

TEST_CASE("program hash: unchanged by a braced or unbraced match arm") {
    CHECK(hashOf(kProgram) == hashOf(replaceOnce(kProgram, "{ \"Good\" }", "\"Good\"")));
}

TEST_CASE("program hash: changed by every change in meaning") {
    const std::string base = hashOf(kProgram);
    const std::vector<std::pair<std::string, std::string>> edits = {
        {"limit 3", "limit 4"},
        {"\"fast\"", "\"fasT\""},
        {"line: \"none\"", "text: \"none\""},      // a record literal's field name
        {"line: Str", "text: Str"},                // a record type's field name
        {"var n = 0", "let n = 0"},
        {"web.fetch(u, mode: \"fast\")", "web.fetch(u, \"fast\")"},  // a named argument becomes positional
        {"else \"\" }", "retry 1 else \"\" }"},
        {"timeout 1500ms", "timeout 1501ms"},
        {"budget usd 0.25", "budget usd 0.2500000000000001"},  // a neighbouring double: bit-exact
        {"budget usd 0.25\n", ""},
        {"max_calls: 2", "max_calls: 3"},
        {"max 4", "max 5"},
        {"0.5", "0.50001"},
        {"-1.25", "1.25"},
        {"n > 2", "n >= 2"},
        {"pages[0]", "pages[1]"},
        {"About {topic}?", "About {topic} ?"},
        {"_ => \"Hi\"", "\"down\" => \"Hi\""},
        {"if u != \"\" ", ""},
        {"fixtures \"f.json\" ", ""},
        {", \"fallback\"", ""},
        {"program triage", "program triage2"},
        {"uses web.fetch\nuses llm", "uses llm\nuses web.fetch"},  // order counts
        {"Summarizer.ask", "llm.ask"},
        {"else if not (n == 1) { -1.25 } ", ""},
        {"\"up\"|\"down\"", "\"up\"|\"down\"|\"flat\""},
    };
    std::vector<std::string> seen = {base};
    for (const auto& [from, to] : edits) {
        CAPTURE(from);
        std::string hash = hashOf(replaceOnce(kProgram, from, to));
        for (const std::string& other : seen) CHECK(hash != other);
        seen.push_back(hash);
    }
}

TEST_CASE("program hash: string contents cannot masquerade as structure") {
    // One string holding `a", "b` against two strings; an escaped quote against a split list.
    CHECK(hashOf("program p\nfn main() {\n  let x = [\"a\", \"b\"]\n}\n") !=
          hashOf("program p\nfn main() {\n  let x = [\"a\\\", \\\"b\"]\n}\n"));
    // A string spelled `nil` is not an absent value, and text is not an interpolated name.
    CHECK(hashOf("program p\ntest \"t\" fixtures \"nil\" {\n}\n") != hashOf("program p\ntest \"t\" {\n}\n"));
    CHECK(hashOf("program p\nfn main() {\n  let x = \"{y}\"\n}\n") !=
          hashOf("program p\nfn main() {\n  let x = \"\\{y\\}\"\n}\n"));
    // An Int and the Float of the same value are different literals.
    CHECK(hashOf("program p\nfn main() {\n  let x = 1\n}\n") != hashOf("program p\nfn main() {\n  let x = 1.0\n}\n"));
}

TEST_CASE("host hash: unchanged by comments, layout and file name; changed by meaning") {
    auto host = parseHostOk(kHost);
    std::string base = hostHash(*host);
    CHECK(base.size() == 64);
    CHECK(canonicalHost(*host).rfind("remit-host-hash-v1\n", 0) == 0);

    std::string formatted = formatHost(*host);
    REQUIRE(formatted != kHost);
    CHECK(hostHash(*parseHostOk(formatted)) == base);
    CHECK(hostHash(*parseHostOk(kHost, "other/host.rmti")) == base);
    CHECK(hostHash(*parseHostOk(replaceOnce(kHost, "  # inner comment\n", ""))) == base);
    CHECK(hostHash(*parseHostOk("# one more\n" + kHost + "# and at the end\n")) == base);

    const std::vector<std::pair<std::string, std::string>> edits = {
        {"cost 0.001", "cost 0.002"},
        {"model llm cost 0.01", "model llm cost 0.02"},
        {"  idempotent\n", ""},
        {"  idempotent\n", "  idempotent\n  approval always\n"},
        {"tags untrusted\n  #", "tags untrusted, private\n  #"},
        {"deny (private, secret)", "deny private"},
        {"approve untrusted", ""},
        {"max 3", "max 4"},
        {"input topic tags untrusted", "input topic tags private"},
        {"body: Str", "text: Str"},
    };
    std::vector<std::string> seen = {base};
    for (const auto& [from, to] : edits) {
        CAPTURE(from);
        std::string hash = hostHash(*parseHostOk(replaceOnce(kHost, from, to)));
        for (const std::string& other : seen) CHECK(hash != other);
        seen.push_back(hash);
    }
}

namespace {

// For the tests a call is effectful when its callee is dotted (`ns.cap`, `llm.ask`, `A.ask`);
// the checker's real predicate consults the host and the agents.
bool dotted(const ast::CallExpr& call) { return call.callee.size() > 1; }

std::vector<std::pair<std::string, std::string>> siteList(const ast::Program& program) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const CallSite& site : numberCallSites(program, dotted)) {
        CHECK(site.id.rfind(site.function + "#", 0) == 0);
        out.emplace_back(site.id, site.call->calleeName());
    }
    return out;
}

using Sites = std::vector<std::pair<std::string, std::string>>;

}  // namespace

TEST_CASE("call sites: a call is numbered before the calls in its arguments") {
    auto program = parseOk("program p\nfn main() {\n  let x = web.fetch(llm.ask(T, \"p\"))\n}\n");
    CHECK(siteList(*program) == Sites{{"main#0", "web.fetch"}, {"main#1", "llm.ask"}});
}

TEST_CASE("call sites: a for loop's body comes before its filter") {
    auto program = parseOk("program p\nfn main(xs: List[Str] max 3) {\n"
                           "  let r = for x in xs if web.ok(x) { web.fetch(x) }\n}\n");
    CHECK(siteList(*program) == Sites{{"main#0", "web.fetch"}, {"main#1", "web.ok"}});
}

TEST_CASE("call sites: per function, helpers carry their own ids, tests are never numbered") {
    auto program = parseOk("program p\n"
                           "fn main(u: Str) -> Str {\n  let a = helper(u)\n  return web.fetch(u)\n}\n"
                           "test \"t\" {\n  expect web.fetch(\"x\") == \"\"\n}\n"
                           "agent A { model: llm }\n"
                           "fn helper(u: Str) -> Str {\n  return A.ask(Str, u)\n}\n");
    CHECK(siteList(*program) == Sites{{"main#0", "web.fetch"}, {"helper#0", "A.ask"}});
}

TEST_CASE("call sites: every expression position, in the prototype's field order") {
    // s.nK must get id main#K: the names spell out the expected order.
    auto program = parseOk(
        "program p\n"
        "fn main(u: Str) -> Str {\n"
        "  let a = s.n0(s.n1(u), s.n2(u), key: s.n3(u)) else s.n4(u)\n"
        "  let b = for x in s.n5(u) limit 2 if s.n8(x) { s.n6(x)\n  s.n7(x) }\n"
        "  let c = if s.n9(u) { s.n10(u) } else if s.n11(u) { s.n12(u) } else { s.n13(u) }\n"
        "  let d = match s.n14(u) {\n    \"a\" => s.n15(u)\n    _ => { s.n16(u) }\n  }\n"
        "  var e = [{ k: s.n17(u) }][s.n18(u)].k + -s.n19(u)\n"
        "  e = \"{s.n20(u)} and {s.n21(u)}\"\n"
        "  expect s.n22(u), \"m\"\n"
        "  s.n23(u) retry 1 timeout 2s\n"
        "  return s.n24(u)\n"
        "}\n");
    std::vector<CallSite> sites = numberCallSites(*program, dotted);
    REQUIRE(sites.size() == 25);
    for (size_t k = 0; k < sites.size(); ++k) {
        CAPTURE(k);
        CHECK(sites[k].id == "main#" + std::to_string(k));
        CHECK(sites[k].function == "main");
        CHECK(sites[k].call->calleeName() == "s.n" + std::to_string(k));
    }
    auto ids = siteIdsByCall(sites);
    CHECK(ids.size() == 25);
    CHECK(ids.at(sites[7].call) == "main#7");
}

TEST_CASE("call sites: only calls the predicate accepts are counted") {
    auto program = parseOk("program p\nfn main(u: Str) {\n  let a = len(web.fetch(str(u)))\n  let b = web.get(u)\n}\n");
    CHECK(siteList(*program) == Sites{{"main#0", "web.fetch"}, {"main#1", "web.get"}});
    CHECK(numberCallSites(*program, [](const ast::CallExpr&) { return false; }).empty());
}

TEST_CASE("call sites: unchanged by remitc fmt and comments") {
    const std::string text = "program p\n# c\nfn main(u: Str) {\n  let a = web.fetch(llm.ask(T, \"p\"))  # t\n"
                             "  let b = for x in [u] if web.ok(x) {web.fetch(x)}\n}\n";
    auto program = parseOk(text);
    auto reparsed = parseOk(formatProgram(*program));
    CHECK(siteList(*program) == siteList(*reparsed));
    CHECK(siteList(*program).size() == 4);
}
