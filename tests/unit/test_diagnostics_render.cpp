// renderDiagnostics (runtime/diagnostics.h), the text a model reads when it repairs a program:
// the same bytes for the same input, the order given, errors before warnings when max_diagnostics
// hides some, the closing count; excerpts for diagnostics without a span or a source, tabs and wide
// characters in the caret line. Then the structured `details` that repair tools key on, as the
// checker, the front end and the broker make them. Last, the golden renderings of the runtime codes
// no command can produce (tests/golden/render/unit/*.out): the checker rejects such programs
// first, so they are made here the way the broker makes them for a forged or stale artifact.
// REMIT_UPDATE_GOLDEN=1 rewrites those files.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "broker/broker.h"
#include "runtime/json_text.h"
#include "broker/fixture_adapter.h"
#include "compiler/checker.h"
#include "compiler/parser.h"
#include "session/pipeline.h"
#include "vm/run.h"
#include "runtime/diagnostics.h"
#include "host_fixture.h"

namespace {

using namespace remit;
using remit::test::hostFrom;

Diagnostic diag(DiagCode code, std::string message, Span span = Span{1, 1, 1, 2}, std::string file = "p.rmt") {
    return makeDiagnostic(code, std::move(message), std::move(file), span);
}

// Three errors and two warnings, warnings first, as a file with an unused `uses` entry reads.
std::vector<Diagnostic> mixed() {
    return {diag(DiagCode::W0201, "w1", Span{2, 1, 2, 2}), diag(DiagCode::E0103, "e1", Span{3, 1, 3, 2}),
            diag(DiagCode::W0101, "w2", Span{4, 1, 4, 2}), diag(DiagCode::E0101, "e2", Span{5, 1, 5, 2}),
            diag(DiagCode::E0108, "e3", Span{6, 1, 6, 2})};
}

// The header lines of a rendering, in order.
std::vector<std::string> headers(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (line.rfind("p.rmt:", 0) == 0) out.push_back(line);
    return out;
}

std::string readFile(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

}  // namespace

TEST_CASE("renderDiagnostics: each diagnostic as renderText prints it, in the order given, the same every time") {
    SourceFile source("p.rmt", "program p\nuses web.fetch\nlet a = 1\nfn f() {\nx\ny\n");
    SourceLookup sources = [&](const std::string& file) { return file == "p.rmt" ? &source : nullptr; };
    std::vector<Diagnostic> list = mixed();
    list[1].hint = "a hint";
    list[1].notes = {"a note"};
    std::string text = renderDiagnostics(list, sources);
    std::string expected;
    for (const Diagnostic& d : list) expected += renderText(d, &source) + "\n";
    CHECK(text == expected);
    CHECK(renderDiagnostics(list, sources) == text);
    CHECK(renderDiagnostics({}, sources).empty());
    // Exactly as many as the cap: nothing is counted.
    CHECK(renderDiagnostics(list, sources, RenderOptions{5}) == text);
}

TEST_CASE("renderDiagnostics: over max_diagnostics, errors are shown before warnings and the rest counted") {
    SUBCASE("two of five: the first two errors, then the count by kind") {
        std::string text = renderDiagnostics(mixed(), nullptr, RenderOptions{2});
        CHECK(headers(text) == std::vector<std::string>{"p.rmt:3:1: error[E0103]: e1", "p.rmt:5:1: error[E0101]: e2"});
        CHECK(
            text.ends_with("\n... and 3 more diagnostics not shown (1 error, 2 warnings); fix the ones above first\n"));
    }
    SUBCASE("four of five: every error, then the first warning, all in the order given") {
        std::string text = renderDiagnostics(mixed(), nullptr, RenderOptions{4});
        CHECK(headers(text) == std::vector<std::string>{"p.rmt:2:1: warning[W0201]: w1", "p.rmt:3:1: error[E0103]: e1",
                                                        "p.rmt:5:1: error[E0101]: e2", "p.rmt:6:1: error[E0108]: e3"});
        CHECK(text.ends_with("\n... and 1 more diagnostic not shown (1 warning); fix the ones above first\n"));
    }
    SUBCASE("one: the first error, never the warning before it") {
        std::string text = renderDiagnostics(mixed(), nullptr, RenderOptions{1});
        CHECK(headers(text) == std::vector<std::string>{"p.rmt:3:1: error[E0103]: e1"});
        CHECK(text.ends_with(
            "\n... and 4 more diagnostics not shown (2 errors, 2 warnings); fix the ones above first\n"));
    }
    SUBCASE("zero: only the count") {
        CHECK(renderDiagnostics(mixed(), nullptr, RenderOptions{0}) ==
              "5 diagnostics not shown (3 errors, 2 warnings)\n");
        CHECK(renderDiagnostics({diag(DiagCode::W0101, "w")}, nullptr, RenderOptions{0}) ==
              "1 diagnostic not shown (1 warning)\n");
    }
    SUBCASE("runtime errors count as errors") {
        std::vector<Diagnostic> list = {diag(DiagCode::W0101, "w"), diag(DiagCode::R0101, "r1"),
                                        diag(DiagCode::R0701, "r2")};
        std::string text = renderDiagnostics(list, nullptr, RenderOptions{1});
        CHECK(text ==
              "p.rmt:1:1: runtime error[R0101]: r1\n"
              "... and 2 more diagnostics not shown (1 error, 1 warning); fix the ones above first\n");
    }
}

TEST_CASE("renderDiagnostics: no span, no source, no file") {
    SourceFile source("p.rmt", "program p\n");
    SourceLookup sources = [&](const std::string&) { return &source; };
    Diagnostic noSpan = makeDiagnostic(DiagCode::E0002, "no host.rmti found", "p.rmt", Span{}, "pass --host PATH");
    CHECK(renderDiagnostics({noSpan}, sources) ==
          "p.rmt: error[E0002]: no host.rmti found\n  hint: pass --host PATH\n");
    Diagnostic noFile = noSpan;
    noFile.file.clear();
    CHECK(renderDiagnostics({noFile}, sources).starts_with("<unknown>: error[E0002]: "));
    // The file's text is not available (a policy read elsewhere, serve's `grants`): the header,
    // notes and hint only.
    Diagnostic elsewhere = makeDiagnostic(DiagCode::E0505, "policy grants 'x'", "grants", Span{1, 1, 1, 4},
                                          "did you mean 'y'?", {"a note"});
    SourceLookup none = [](const std::string&) -> const SourceFile* { return nullptr; };
    std::string expected = "grants:1:1: error[E0505]: policy grants 'x'\n  note: a note\n  hint: did you mean 'y'?\n";
    CHECK(renderDiagnostics({elsewhere}, none) == expected);
    CHECK(renderDiagnostics({elsewhere}, nullptr) == expected);
    // A span past the end of the text: no excerpt.
    CHECK(renderDiagnostics({diag(DiagCode::E0100, "late", Span{9, 1, 9, 2})}, sources) ==
          "p.rmt:9:1: error[E0100]: late\n");
}

TEST_CASE("renderDiagnostics: the caret line keeps tabs, and counts a wide character as one column") {
    SUBCASE("tabs") {
        SourceFile source("p.rmt", "fn f() {\n\t\tlet x = y\n}\n");
        // Columns count code points, a tab as one: `y` is column 11.
        std::string text = renderDiagnostics({diag(DiagCode::E0101, "unknown variable 'y'", Span{2, 11, 2, 12})},
                                             [&](const std::string&) { return &source; });
        CHECK(text ==
              "p.rmt:2:11: error[E0101]: unknown variable 'y'\n"
              "   2 | \t\tlet x = y\n"
              "       \t\t        ^\n");
    }
    SUBCASE("wide characters and other multi-byte code points") {
        SourceFile source("p.rmt", "let s = \"日本\" + 1\n");
        std::string text = renderDiagnostics({diag(DiagCode::E0106, "cannot apply '+'", Span{1, 9, 1, 17})},
                                             [&](const std::string&) { return &source; });
        CHECK(text ==
              "p.rmt:1:9: error[E0106]: cannot apply '+'\n"
              "   1 | let s = \"日本\" + 1\n"
              "               ^^^^^^^^\n");
    }
    SUBCASE("a span over several lines has one caret at its start") {
        SourceFile source("p.rmt", "for x in xs {\n  y\n}\n");
        std::string text = renderDiagnostics({diag(DiagCode::R0701, "steps", Span{1, 1, 3, 2})},
                                             [&](const std::string&) { return &source; });
        CHECK(text == "p.rmt:1:1: runtime error[R0701]: steps\n   1 | for x in xs {\n       ^\n");
    }
}

// ---------------------------------------------------------------- details

namespace {

constexpr const char* kHost =
    "capability web.fetch(url: Str deny private) -> Str\n  tags untrusted\n  cost 0.01\n  idempotent\n"
    "capability mail.send(to: Str, body: Str)\n"
    "model llm cost 0.02\n"
    "input secret tags private\n";

// The only diagnostic with `code` that checking `source` against kHost reports.
Diagnostic only(const std::string& source, DiagCode code) {
    CompileOutcome out = compileProgram(source, "p.rmt", kHost, "host.rmti");
    std::vector<Diagnostic> found;
    std::string all;
    for (const Diagnostic& d : out.diagnostics.items()) {
        all += renderText(d, nullptr) + "\n";
        if (d.code == code) found.push_back(d);
    }
    INFO(all);
    REQUIRE(found.size() == 1);
    return found[0];
}


}  // namespace

TEST_CASE("details: type mismatches name the expected and the actual type") {
    CHECK(only("program p\nfn main() -> Int {\n  let n: Int = \"five\"\n  return n\n}\n", DiagCode::E0103).details ==
          Json{{"expected", "Int"}, {"actual", "Str"}});
    CHECK(only("program p\nfn main() -> Int {\n  return \"one\"\n}\n", DiagCode::E0109).details ==
          Json{{"expected", "Int"}, {"actual", "Str"}});
    CHECK(only("program p\nfn f(x: Int) -> Int {\n  return x\n}\nfn main() -> Int {\n  return f(true)\n}\n",
               DiagCode::E0103)
              .details == Json{{"expected", "Int"}, {"actual", "Bool"}});
    CHECK(
        only("program p\nfn main() -> Int {\n  if 1 {\n    return 1\n  }\n  return 2\n}\n", DiagCode::E0103).details ==
        Json{{"expected", "Bool"}, {"actual", "Int"}});
    CHECK(only("program p\nfn main() -> List[Int] max 2 {\n  return [1, 2, 3]\n}\n", DiagCode::E0113).details ==
          Json{{"expected", "List[Int] max 2"}, {"actual", "List[Int] max 3"}});
}

TEST_CASE("details: a missing or unknown capability names it") {
    CHECK(only("program p\nfn main() -> Str {\n  return web.fetch(\"u\")\n}\n", DiagCode::E0201).details ==
          Json{{"resource", "web.fetch"}});
    CHECK(
        only("program p\nuses web.fetch, web.fetc\nfn main() -> Str {\n  return web.fetch(\"u\")\n}\n", DiagCode::E0202)
            .details == Json{{"resource", "web.fetc"}});
    CHECK(only("program p\nuses mail.send\nfn main() {\n  mail.send(\"a\", \"b\") retry 1\n}\n", DiagCode::E0405)
              .details == Json{{"resource", "mail.send"}});
}

TEST_CASE("details: a denied flow names the resource, the parameter and the tags") {
    CHECK(only("program p\nuses web.fetch\nfn main(secret: Str) -> Str {\n  return web.fetch(secret)\n}\n",
               DiagCode::E0301)
              .details == Json{{"resource", "web.fetch"}, {"param", "url"}, {"tags", {"private"}}});
}

TEST_CASE("details: an exceeded limit names the limit, its value and the worst case") {
    CHECK(only("program p\nuses llm\nagent A {\n  model: llm\n  max_calls: 1\n}\n"
               "fn main() -> Int {\n  let xs = for i in range(3) {\n    A.ask(Str, \"q\")\n  }\n  return len(xs)\n}\n",
               DiagCode::E0403)
              .details == Json{{"agent", "A"}, {"limit", "max_calls"}, {"value", 1}, {"worst_case", 3}});
    CHECK(only("program p\nuses llm\nbudget usd 0.01\nfn main() -> Str {\n  return llm.ask(Str, \"q\")\n}\n",
               DiagCode::E0404)
              .details == Json{{"limit", "budget_usd"}, {"value", 0.01}, {"worst_case", 0.02}});
    CHECK(
        only("program p\nfn main() -> Int {\n  let " + std::string(257, 'n') + " = 1\n  return 1\n}\n", DiagCode::E0003)
            .details == Json{{"limit", "identifier_length"}, {"value", 256}});
    CHECK(
        only("program p\nfn main() -> Int {\n  return " + std::string(130, '(') + "1" + std::string(130, ')') + "\n}\n",
             DiagCode::E0003)
            .details == Json{{"limit", "nesting"}, {"value", 128}});
}

// ---------------------------------------------------------------- golden renderings of R codes

namespace {

// Compiles `source` against `checkedHost`, runs main() through a broker that holds `runHost` (the
// host as it is now) and the fixtures, and renders the failure as `remitvm run` prints it.
std::string brokerFailure(const std::string& file, const std::string& source, const std::string& checkedHost,
                          const std::string& runHost, const std::string& fixtureJson) {
    CompileOutcome compiled = compileProgram(source, file, checkedHost, "host.rmti");
    REQUIRE(compiled.program);
    HostModel host = hostFrom(runHost);
    std::string error, hint;
    auto adapter = FixtureAdapter::fromJson(nlohmann::json::parse(fixtureJson), "fixtures.json", error, hint);
    REQUIRE(adapter);
    Policy policy = Policy::allowAllPolicy();
    Run run(compiled.program, {});
    BrokerOptions options;
    options.runId = "20260101-000000-abcdef";
    options.idempotencyRoot = options.runId;
    options.programHash = compiled.program->module().programHash;
    options.host = &host;
    options.policy = &policy;
    Broker broker(options, run);
    run.start(compiled.program->entry(), {});
    REQUIRE(driveWith(run, broker, adapter.get()) == RunStatus::Failed);
    const RunFailure& f = run.failure();
    Diagnostic d = makeDiagnostic(f.error.code, f.error.message, file,
                                  f.span);
    SourceFile text(file, source);
    return renderDiagnostics({d}, [&](const std::string&) { return &text; });
}

void compareWithGolden(const std::string& name, const std::string& actual) {
    std::filesystem::path path = std::filesystem::path(REMIT_SOURCE_DIR) / "tests/golden/render/unit" / name;
    if (const char* update = std::getenv("REMIT_UPDATE_GOLDEN"); update && std::string(update) == "1") {
        std::ofstream(path, std::ios::binary) << actual;
        return;
    }
    INFO("golden " << path.generic_string() << " (REMIT_UPDATE_GOLDEN=1 rewrites it)");
    CHECK(readFile(path) == actual);
}

}  // namespace

TEST_CASE("golden: R0405, a retry of a capability the host no longer declares idempotent") {
    constexpr const char* kThen = "capability crm.lookup(id: Str) -> Str\n  idempotent\n";
    constexpr const char* kNow = "capability crm.lookup(id: Str) -> Str\n";
    std::string text = brokerFailure("r0405_retry_not_idempotent.rmt",
                                     "program lookup\nuses crm.lookup\n\nfn main() -> Str {\n"
                                     "  return crm.lookup(\"42\") retry 2\n}\n",
                                     kThen, kNow, R"({"capabilities": {"crm.lookup": [{"error": "down"}]}})");
    compareWithGolden("r0405_retry_not_idempotent.out", text);
}

TEST_CASE("golden: R0301, a value the host tags reaching a parameter that now denies the tag") {
    constexpr const char* kRead = "capability crm.read(id: Str) -> Str\n  tags untrusted\n  idempotent\n";
    std::string then = std::string(kRead) + "capability crm.note(text: Str)\n";
    std::string now = std::string(kRead) + "capability crm.note(text: Str deny untrusted)\n";
    std::string text =
        brokerFailure("r0301_denied_tag.rmt",
                      "program note\nuses crm.read, crm.note\n\nfn main() {\n"
                      "  let ticket = crm.read(\"42\")\n  crm.note(\"re: {ticket}\")\n}\n",
                      then, now, R"({"capabilities": {"crm.read": [{"output": "refund please"}], "crm.note": []}})");
    compareWithGolden("r0301_denied_tag.out", text);
}
