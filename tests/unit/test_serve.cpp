// The session engine of `remitvm serve` (session/serve_session.h) in process: request parsing,
// rejections by stage with `requires`, pauses at host calls with spans, tags and modes, resume
// with a result, a denial or a failure, limits, expected types, aborts from another thread, the
// checker's cooperative stop (CheckerOptions::interrupted) that the wall limit relies on, and the
// rendered text of rejections and failures under max_diagnostics.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <thread>

#include "compiler/checker.h"
#include "compiler/parser.h"
#include "session/serve_session.h"

namespace {

using namespace remit;
using remit::Json;

constexpr const char* kHost =
    "capability web.fetch(url: Str deny private) -> Str\n  tags untrusted\n  idempotent\n"
    "capability mail.send(to: Str, body: Str approve untrusted)\n"
    "capability crm.lookup(id: Str) -> { name: Str, tier: Int }\n  tags private\n  clears untrusted\n  idempotent\n"
    "model llm cost 0.01\n"
    "input topic tags untrusted\n";

constexpr const char* kPure = "program p\n\nfn main(x: Int) -> Int {\n  return x + 1\n}\n";

constexpr const char* kFetch =
    "program f\nuses web.fetch\n\nfn main(topic: Str) -> Str {\n"
    "  let page = web.fetch(\"https://example.org/{topic}\")\n  return \"got {page}\"\n}\n";

constexpr const char* kSpin =
    "program spin\n\nfn main() -> Int {\n  var n = 0\n  for i in range(1000000) {\n"
    "    for j in range(1000000) {\n      n = n + 1\n    }\n  }\n  return n\n}\n";

serve::RunRequest request(std::string source, Json grants = Json::array(), Json inputs = Json::object(),
                          Json extra = Json::object()) {
    Json j = {{"type", "run"}, {"id", 1},          {"session", "s"},  {"program", source},
              {"host", kHost}, {"grants", grants}, {"inputs", inputs}};
    for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
    Json reply;
    std::optional<serve::Request> r = serve::parseRequest(j.dump(), reply);
    INFO(reply.dump());
    REQUIRE(r);
    REQUIRE(r->type == serve::Request::Type::Run);
    return std::move(r->run);
}

serve::ResumeRequest resumeLine(const Json& j) {
    Json reply;
    std::optional<serve::Request> r = serve::parseRequest(j.dump(), reply);
    INFO(reply.dump());
    REQUIRE(r);
    REQUIRE(r->type == serve::Request::Type::Resume);
    return std::move(r->resume);
}

Json grant(const char* name, const char* mode = "ask") { return Json{{"name", name}, {"mode", mode}}; }

std::string badRequest(const std::string& line) {
    Json reply;
    CHECK_FALSE(serve::parseRequest(line, reply));
    CHECK(reply["status"] == "error");
    CHECK(reply["error"]["code"] == "bad_request");
    return reply["error"]["message"].get<std::string>();
}

}  // namespace

TEST_CASE("serve: a pure program completes with its result, type and tags") {
    serve::Session s(request(kPure, Json::array(), {{"x", 41}}));
    Json r = s.start();
    INFO(r.dump());
    CHECK(r["status"] == "completed");
    CHECK(r["id"] == 1);
    CHECK(r["session"] == "s");
    CHECK(r["result"] == 42);
    CHECK(r["type"] == "Int");
    CHECK(r["result_tags"] == Json::array({"untrusted"}));  // an undeclared input is untrusted
    CHECK(r["tags"] == r["result_tags"]);                  // the older name of the same list
    CHECK(r["host_calls"] == 0);
    CHECK(s.finished());
}

TEST_CASE("serve: rejections name their stage, diagnostics and requirements") {
    SUBCASE("parse") {
        serve::Session s(request("program p\nuses web.fetch\n\nfn main() -> Int {\n  return (1\n}\n"));
        Json r = s.start();
        CHECK(r["status"] == "rejected");
        CHECK(r["stage"] == "parse");
        CHECK(r["diagnostics"][0]["code"] == "E0100");
        CHECK(r["requires"] == Json::array({"web.fetch"}));  // the header's uses, even on a parse error
    }
    SUBCASE("typecheck") {
        serve::Session s(request("program p\n\nfn main() -> Int {\n  return \"one\"\n}\n"));
        Json r = s.start();
        CHECK(r["status"] == "rejected");
        CHECK(r["stage"] == "typecheck");
        CHECK(r["diagnostics"][0]["line"] == 4);
        CHECK(r["requires"] == Json::array());
    }
    SUBCASE("an ungranted capability, at its call") {
        serve::Session s(request(kFetch, Json::array({grant("mail.send")}), {{"topic", "tea"}}));
        Json r = s.start();
        INFO(r.dump());
        CHECK(r["status"] == "rejected");
        CHECK(r["stage"] == "grant");
        CHECK(r["diagnostics"][0]["code"] == "E0501");
        CHECK(r["diagnostics"][0]["line"] == 5);
        CHECK(r["diagnostics"][0]["col"] == 14);
        CHECK(r["diagnostics"][0]["details"]["resource"] == "web.fetch");
        CHECK(r["requires"] == Json::array({"web.fetch"}));
    }
    SUBCASE("a grant of something the host does not declare") {
        serve::Session s(request(kPure, Json::array({grant("web.fetchh")}), {{"x", 1}}));
        Json r = s.start();
        CHECK(r["stage"] == "grant");
        CHECK(r["diagnostics"][0]["code"] == "E0505");
        CHECK(r["diagnostics"][0]["hint"] == "did you mean 'web.fetch'?");
    }
    SUBCASE("bounds") {
        serve::Session s(
            request("program p\n\nfn main(xs: List[Int]) -> Int {\n  var n = 0\n"
                    "  for x in xs {\n    n = n + x\n  }\n  return n\n}\n",
                    Json::array(), {{"xs", Json::array()}}));
        Json r = s.start();
        CHECK(r["stage"] == "bounds");
        CHECK(r["diagnostics"][0]["code"] == "E0401");
    }
    SUBCASE("a host interface that does not parse") {
        serve::RunRequest rq = request(kPure);
        rq.host = "capability broken(";
        serve::Session s(std::move(rq));
        Json r = s.start();
        CHECK(r["stage"] == "parse");
        CHECK(r["diagnostics"][0]["file"] == "host.rmti");
    }
    SUBCASE("neither the program nor the host interface parses: one reply names both") {
        serve::RunRequest rq = request("program p\nuses web.fetch\n\nfn main() -> Int {\n  return (1\n}\n");
        rq.host = "capability broken(";
        serve::Session s(std::move(rq));
        Json r = s.start();
        INFO(r.dump());
        CHECK(r["stage"] == "parse");
        std::set<std::string> files;
        for (const Json& d : r["diagnostics"]) files.insert(d["file"].get<std::string>());
        CHECK(files == std::set<std::string>{"program.rmt", "host.rmti"});
        CHECK(r["requires"] == Json::array({"web.fetch"}));
    }
}

TEST_CASE("serve: expected_type") {
    SUBCASE("fits") {
        serve::Session s(request(kPure, Json::array(), {{"x", 1}}, {{"expected_type", "Float"}}));
        CHECK(s.start()["status"] == "completed");  // Int fits Float
    }
    SUBCASE("does not fit") {
        serve::Session s(request(kPure, Json::array(), {{"x", 1}}, {{"expected_type", "List[Str] max 3"}}));
        Json r = s.start();
        INFO(r.dump());
        CHECK(r["status"] == "rejected");
        CHECK(r["stage"] == "expected-type");
        CHECK(r["diagnostics"][0]["code"] == "E0103");
        CHECK(r["diagnostics"][0]["line"] == 3);
        CHECK(r["diagnostics"][0]["details"]["actual"] == "Int");
    }
    SUBCASE("does not parse") {
        serve::Session s(request(kPure, Json::array(), {{"x", 1}}, {{"expected_type", "List[Str"}}));
        Json r = s.start();
        CHECK(r["stage"] == "expected-type");
        CHECK(r["diagnostics"][0]["file"] == "expected_type");
        CHECK(r["diagnostics"][0]["line"] == 1);
    }
}

TEST_CASE("serve: a call pauses with its span, arguments and tags, and resumes with a result") {
    serve::Session s(request(kFetch, Json::array({grant("web.fetch", "allow")}), {{"topic", "tea"}}));
    Json r = s.start();
    INFO(r.dump());
    REQUIRE(r["status"] == "host-call");
    const Json& call = r["call"];
    CHECK(call["id"] == 1);
    CHECK(call["resource"] == "web.fetch");
    CHECK(call["site"] == "main#0");
    CHECK(call["mode"] == "allow");
    CHECK(call["span"]["line"] == 5);
    CHECK(call["span"]["col"] == 14);
    CHECK(call["args"]["url"] == "https://example.org/tea");
    CHECK(call["arg_tags"]["url"] == Json::array({"untrusted"}));
    CHECK(call["returns"] == "Str");
    CHECK(s.paused());

    SUBCASE("perform") {
        Json done = s.resume(resumeLine(
            {{"type", "resume"}, {"id", 2}, {"session", "s"}, {"call", 1}, {"perform", {{"result", "a page"}}}}));
        INFO(done.dump());
        CHECK(done["status"] == "completed");
        CHECK(done["id"] == 2);
        CHECK(done["result"] == "got a page");
        CHECK(done["tags"] == Json::array({"untrusted"}));
        CHECK(done["host_calls"] == 1);
    }
    SUBCASE("deny") {
        Json done = s.resume(
            resumeLine({{"type", "resume"}, {"session", "s"}, {"call", 1}, {"deny", {{"reason", "not today"}}}}));
        CHECK(done["status"] == "failed");
        CHECK(done["stage"] == "denied");
        CHECK(done["diagnostics"][0]["code"] == "R0303");
        CHECK(done["diagnostics"][0]["line"] == 5);
        CHECK(done["diagnostics"][0]["details"]["reason"] == "not today");
    }
    SUBCASE("a result that does not fit the declared type") {
        Json done = s.resume(resumeLine(
            {{"type", "resume"}, {"session", "s"}, {"call", 1}, {"perform", {{"result", Json::array({1, 2})}}}}));
        CHECK(done["status"] == "failed");
        CHECK(done["stage"] == "evaluate");
        CHECK(done["diagnostics"][0]["code"] == "R0501");
        CHECK(done["diagnostics"][0]["details"]["expected"] == "Str");
    }
    SUBCASE("the wrong call id leaves the session paused") {
        Json e =
            s.resume(resumeLine({{"type", "resume"}, {"session", "s"}, {"call", 7}, {"perform", {{"result", "x"}}}}));
        CHECK(e["status"] == "error");
        CHECK(e["error"]["code"] == "wrong_call");
        CHECK(s.paused());
    }
    SUBCASE("abort while paused") {
        s.requestAbort();
        Json done = s.abortPaused(9);
        CHECK(done["status"] == "failed");
        CHECK(done["stage"] == "aborted");
        CHECK(done["id"] == 9);
        CHECK(done["diagnostics"][0]["code"] == "R0702");
        CHECK(s.finished());
    }
}

TEST_CASE("serve: an operational failure takes the call's else") {
    const char* source =
        "program f\nuses web.fetch\n\nfn main() -> Str {\n"
        "  return web.fetch(\"u\") retry 1 else \"fallback\"\n}\n";
    serve::Session s(request(source, Json::array({grant("web.fetch")})));
    Json r = s.start();
    REQUIRE(r["status"] == "host-call");
    CHECK(r["call"]["mode"] == "ask");
    r = s.resume(resumeLine({{"type", "resume"}, {"session", "s"}, {"call", 1}, {"fail", {{"error", "Timeout"}}}}));
    REQUIRE(r["status"] == "host-call");  // the retry
    CHECK(r["call"]["id"] == 2);
    CHECK(r["call"]["attempt"] == 1);
    r = s.resume(resumeLine({{"type", "resume"}, {"session", "s"}, {"call", 2}, {"perform", {{"result", 5}}}}));
    CHECK(r["status"] == "completed");
    CHECK(r["result"] == "fallback");
}

TEST_CASE("serve: approve tags force mode ask; deny tags fail the call; clears and tags apply") {
    const char* source =
        "program m\nuses mail.send, crm.lookup\n\nfn main(topic: Str) -> Str {\n"
        "  let c = crm.lookup(\"42\")\n  mail.send(\"ops@example.org\", topic)\n  return c.name\n}\n";
    serve::Session s(
        request(source, Json::array({grant("mail.send", "allow"), grant("crm.lookup", "allow")}), {{"topic", "tea"}}));
    Json r = s.start();
    REQUIRE(r["status"] == "host-call");
    CHECK(r["call"]["resource"] == "crm.lookup");
    CHECK(r["call"]["result_tags"] == Json::array({"private"}));
    r = s.resume(resumeLine({{"type", "resume"},
                             {"session", "s"},
                             {"call", 1},
                             {"perform", {{"result", {{"name", "Ada"}, {"tier", 2}}}}}}));
    INFO(r.dump());
    REQUIRE(r["status"] == "host-call");
    CHECK(r["call"]["resource"] == "mail.send");
    CHECK(r["call"]["mode"] == "ask");
    CHECK(r["call"]["reasons"] == Json::array({"'body' is untrusted"}));
    r = s.resume(resumeLine({{"type", "resume"}, {"session", "s"}, {"call", 2}, {"perform", {{"result", nullptr}}}}));
    CHECK(r["status"] == "completed");
    CHECK(r["result"] == "Ada");
    CHECK(r["tags"] == Json::array({"private"}));
}

TEST_CASE("serve: limits fail the run with the limit named") {
    SUBCASE("steps") {
        serve::Session s(request(kSpin, Json::array(), Json::object(), {{"limits", {{"steps", 10000}}}}));
        Json r = s.start();
        CHECK(r["status"] == "failed");
        CHECK(r["stage"] == "limit");
        CHECK(r["diagnostics"][0]["code"] == "R0701");
        CHECK(r["diagnostics"][0]["details"]["limit"] == "steps");
    }
    SUBCASE("max_calls") {
        serve::Session s(request(kFetch,
                                 Json::array({Json{{"name", "web.fetch"}, {"mode", "allow"}, {"max_calls", 0}}}),
                                 {{"topic", "tea"}}));
        Json r = s.start();
        CHECK(r["status"] == "failed");
        CHECK(r["stage"] == "limit");
        CHECK(r["diagnostics"][0]["code"] == "R0402");
        CHECK(r["diagnostics"][0]["line"] == 5);
        CHECK(r["host_calls"] == 0);
    }
    SUBCASE("host_calls") {
        const char* source =
            "program f\nuses web.fetch\n\nfn main() -> Str {\n  let a = web.fetch(\"1\")\n"
            "  let b = web.fetch(\"2\")\n  return a + b\n}\n";
        serve::Session s(
            request(source, Json::array({grant("web.fetch")}), Json::object(), {{"limits", {{"host_calls", 1}}}}));
        REQUIRE(s.start()["status"] == "host-call");
        Json r =
            s.resume(resumeLine({{"type", "resume"}, {"session", "s"}, {"call", 1}, {"perform", {{"result", "x"}}}}));
        CHECK(r["status"] == "failed");
        CHECK(r["diagnostics"][0]["details"]["limit"] == "host_calls");
        CHECK(r["diagnostics"][0]["line"] == 6);
    }
    SUBCASE("result_bytes") {
        const char* source =
            "program big\n\nfn main() -> List[Int] {\n  return for i in range(1000) {\n    i\n  }\n}\n";
        serve::Session s(request(source, Json::array(), Json::object(), {{"limits", {{"result_bytes", 100}}}}));
        Json r = s.start();
        CHECK(r["stage"] == "limit");
        CHECK(r["diagnostics"][0]["details"]["limit"] == "result_bytes");
    }
}

TEST_CASE("serve: requestAbort from another thread stops a pure loop") {
    serve::Session s(
        request(kSpin, Json::array(), Json::object(), {{"limits", {{"steps", 1000000000000}, {"wall_ms", 600000}}}}));
    std::thread aborter([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        s.requestAbort();
    });
    auto t0 = std::chrono::steady_clock::now();
    Json r = s.start();
    aborter.join();
    CHECK(r["status"] == "failed");
    CHECK(r["stage"] == "aborted");
    CHECK(r["diagnostics"][0]["code"] == "R0702");
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
}

TEST_CASE("serve: the wall limit covers checking") {
    std::string source = "program big\n\nfn main() -> Int {\n  var n = 0\n";
    for (int i = 0; i < 20000; ++i) source += "  n = n + " + std::to_string(i) + " * 2 - 1\n";
    source += "  return n\n}\n";
    serve::Session s(request(source, Json::array(), Json::object(), {{"limits", {{"wall_ms", 1}}}}));
    Json r = s.start();
    INFO(r.dump());
    CHECK(r["status"] == "failed");
    CHECK(r["stage"] == "limit");
    CHECK(r["diagnostics"][0]["details"]["limit"] == "wall_ms");
    CHECK(r["diagnostics"][0]["details"]["phase"] != "run");
}

TEST_CASE("checker: CheckerOptions::interrupted stops the walk with an E0003") {
    std::string text = "program big\n\nfn main() -> Int {\n  var n = 0\n";
    for (int i = 0; i < 2000; ++i) text += "  n = n + 1\n";
    text += "  return n\n}\n";
    DiagnosticList diags;
    SourceFile file("big.rmt", text);
    auto program = parseProgram(file, diags);
    REQUIRE(program);
    SourceFile hostFile("host.rmti", "");
    auto hostAst = parseHost(hostFile, diags);
    HostModel host;
    resolveHost(*hostAst, "host.rmti", host, diags);
    REQUIRE_FALSE(diags.hasErrors());
    int polls = 0;
    CheckerOptions options{"big.rmt", "host.rmti"};
    options.interrupted = [&] { return ++polls >= 3; };
    CheckResult result = checkProgram(*program, std::move(host), diags, options);
    CHECK(result.interrupted);
    CHECK_FALSE(result.ok);
    REQUIRE(diags.items().size() == 1);
    CHECK(diags.items()[0].code == DiagCode::E0003);
    CHECK(polls == 3);  // no polling after the stop
}

TEST_CASE("serve: the fuzz regressions are answered, never thrown") {
    // tests/fuzz/regressions/serve-*: serve sessions, one request a line; each line must give a
    // request or a bad_request reply.
    const std::filesystem::path dir = std::filesystem::path(REMIT_SOURCE_DIR) / "tests" / "fuzz" / "regressions";
    size_t replayed = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.path().filename().string().rfind("serve-", 0) != 0) continue;
        CAPTURE(entry.path().string());
        std::ifstream in(entry.path(), std::ios::binary);
        std::string line;
        while (std::getline(in, line)) {
            Json reply;
            std::optional<serve::Request> r;
            CHECK_NOTHROW(r = serve::parseRequest(line, reply));
            if (!r) CHECK(reply["error"]["code"] == "bad_request");
        }
        ++replayed;
    }
    CHECK(replayed >= 1);
}

TEST_CASE("serve: the program text is 'program', and its older name 'source' still works") {
    Json reply;
    std::optional<serve::Request> r =
        serve::parseRequest(R"({"type":"run","session":"s","program":"program p\n","host":""})", reply);
    REQUIRE(r);
    CHECK(r->run.program == "program p\n");
    r = serve::parseRequest(R"({"type":"run","session":"s","source":"program q\n","host":""})", reply);
    REQUIRE(r);
    CHECK(r->run.program == "program q\n");
    CHECK(badRequest(R"({"type":"run","session":"s","host":""})") == "missing field 'program'");
    CHECK(badRequest(R"({"type":"run","session":"s","program":"","source":"","host":""})") ==
          "give the program text as 'program' or as its older name 'source', not both");
    CHECK(badRequest(R"({"type":"run","session":"s","source":1,"host":""})") == "'source' must be a string");
    CHECK(badRequest(R"({"type":"run","session":"s","progam":"","host":""})") ==
          "unknown field 'progam' (did you mean 'program'?)");
}

TEST_CASE("serve: request parsing") {
    CHECK(badRequest("not json").find("not valid JSON") != std::string::npos);
    CHECK(badRequest("[1]") == "a request must be a JSON object");
    // The JSON parser would stop at a raw NUL and accept the text before it.
    CHECK(badRequest(std::string(R"({"type":"run","session":"s","program":"","host":""})") + '\0' + "junk") ==
          "the request line contains a NUL byte");
    // A number no double can hold: nlohmann throws out_of_range, which used to escape parseRequest.
    CHECK(badRequest(R"({"type":"run","session":"s","budget":1e999})") ==
          "the request line holds a number too large for a 64-bit float");
    CHECK(badRequest(R"({"type":"run","session":"s","program":"","host":"","limit":{}})") ==
          "unknown field 'limit' (did you mean 'limits'?)");
    CHECK(badRequest(R"({"type":"launch","session":"s"})").find("unknown request type") != std::string::npos);
    CHECK(badRequest(R"({"type":"run","program":"","host":""})") == "missing field 'session'");
    CHECK(badRequest(R"({"type":"run","session":"s","program":"","host":"","limits":{"steps":0}})") ==
          "'limits.steps' must be a positive integer");
    CHECK(badRequest(R"({"type":"run","session":"s","program":"","host":"","limits":{"memory":99999999999}})")
              .find("over this server's maximum") != std::string::npos);
    CHECK(badRequest(R"({"type":"run","session":"s","program":"","host":"","grants":[{"name":"a","mode":"maybe"}]})") ==
          "'grants[0].mode' must be \"ask\" or \"allow\"");
    CHECK(badRequest(R"({"type":"resume","session":"s","call":1})") ==
          "a resume needs exactly one of 'perform', 'deny' and 'fail'");
    CHECK(badRequest(std::string(100000, '[')).find("nested deeper") != std::string::npos);
    Json reply;
    CHECK_FALSE(serve::parseRequest(R"({"type":"abort","id":"x7","session":"s","extra":1})", reply));
    CHECK(reply["id"] == "x7");
    CHECK(reply["session"] == "s");
}

TEST_CASE("serve: default limits") {
    serve::Limits d;
    CHECK(d.steps == 10'000'000);
    CHECK(d.wallMs == 5'000);
    CHECK(d.hostCalls == 100);
    CHECK(d.resultBytes == 1u << 20);
    CHECK(d.memory == uint64_t(64) << 20);
    serve::RunRequest r = request(kPure);
    CHECK(r.limits.steps == d.steps);
}

TEST_CASE("serve: bad inputs are a bad_request that names the input") {
    serve::Session s(request(kPure, Json::array(), {{"x", "one"}}));
    Json r = s.start();
    CHECK(r["status"] == "error");
    CHECK(r["error"]["code"] == "bad_request");
    CHECK(r["error"]["message"] == "input 'x' does not fit its type: input.x: expected Int, found string");
    CHECK(s.finished());
}

TEST_CASE("serve: model calls pause with the requested type and validate the answer") {
    const char* source =
        "program a\nuses llm\n\nfn main() -> Str {\n"
        "  let v = llm.ask(\"yes\" | \"no\", \"Is it?\")\n  return v\n}\n";
    serve::Session s(request(source, Json::array({grant("llm", "allow")})));
    Json r = s.start();
    INFO(r.dump());
    REQUIRE(r["status"] == "host-call");
    CHECK(r["call"]["kind"] == "model");
    CHECK(r["call"]["args"]["prompt"] == "Is it?");
    CHECK(r["call"]["schema"].is_object());
    r = s.resume(resumeLine({{"type", "resume"}, {"session", "s"}, {"call", 1}, {"perform", {{"result", "maybe"}}}}));
    CHECK(r["status"] == "failed");
    CHECK(r["diagnostics"][0]["code"] == "R0502");
}

TEST_CASE("serve: rejected and failed replies carry the rendered text of their diagnostics") {
    SUBCASE("a type error, with its excerpt from the source") {
        serve::Session s(request("program p\n\nfn main() -> Int {\n  return \"one\"\n}\n"));
        Json r = s.start();
        CHECK(r["rendered"] ==
              "program.rmt:4:10: error[E0109]: 'main' returns Int but this value has type Str\n"
              "   4 |   return \"one\"\n"
              "                ^^^^^\n");
    }
    SUBCASE("the host interface and the expected type under their virtual names") {
        serve::RunRequest rq = request(kPure);
        rq.host = "capability broken(";
        serve::Session s(std::move(rq));
        Json r = s.start();
        CHECK(r["rendered"].get<std::string>().starts_with("host.rmti:1:"));
        CHECK(r["rendered"].get<std::string>().find("   1 | capability broken(\n") != std::string::npos);
        serve::Session t(request(kPure, Json::array(), {{"x", 1}}, {{"expected_type", "List[Int"}}));
        r = t.start();
        INFO(r.dump());
        CHECK(r["stage"] == "expected-type");
        CHECK(r["rendered"].get<std::string>().find("   1 | List[Int\n") != std::string::npos);
    }
    SUBCASE("grants have no text: the header and the hint") {
        serve::Session s(request(kPure, Json::array({grant("web.fetchh")}), {{"x", 1}}));
        Json r = s.start();
        CHECK(r["rendered"] ==
              "grants: error[E0505]: grant of 'web.fetchh', which the host does not declare\n"
              "  hint: did you mean 'web.fetch'?\n");
    }
    SUBCASE("a runtime failure") {
        serve::Session s(request(kSpin, Json::array(), Json::object(), {{"limits", {{"steps", 10000}}}}));
        Json r = s.start();
        REQUIRE(r["status"] == "failed");
        CHECK(r["rendered"] ==
              "program.rmt:6:5: runtime error[R0701]: the run exceeded its step limit of 10000 steps\n"
              "   6 |     for j in range(1000000) {\n"
              "           ^\n");
    }
    SUBCASE("an abort while paused, at the call") {
        serve::Session s(request(kFetch, Json::array({grant("web.fetch")}), {{"topic", "tea"}}));
        REQUIRE(s.start()["status"] == "host-call");
        s.requestAbort();
        Json r = s.abortPaused(2);
        CHECK(r["rendered"].get<std::string>().starts_with(
            "program.rmt:5:14: runtime error[R0702]: the run was aborted by the host\n"));
    }
}

TEST_CASE("serve: max_diagnostics caps the rendered text, never the diagnostics") {
    std::string source = "program p\n\nfn main() -> Int {\n";
    for (int i = 0; i < 25; ++i) source += fmt::format("  let a{}: Int = \"x\"\n", i);
    source += "  return 1\n}\n";
    SUBCASE("20 by default") {
        serve::Session s(request(source));
        Json r = s.start();
        CHECK(r["diagnostics"].size() == 25);
        std::string rendered = r["rendered"];
        CHECK(rendered.ends_with("\n... and 5 more diagnostics not shown (5 errors); fix the ones above first\n"));
        CHECK(rendered.find("a19") != std::string::npos);
        CHECK(rendered.find("a20") == std::string::npos);
    }
    SUBCASE("as the request says") {
        serve::Session s(request(source, Json::array(), Json::object(), {{"max_diagnostics", 1}}));
        Json r = s.start();
        CHECK(r["diagnostics"].size() == 25);
        CHECK(r["rendered"] ==
              "program.rmt:4:17: error[E0103]: 'a0' is declared as Int but the value has type Str\n"
              "   4 |   let a0: Int = \"x\"\n"
              "                       ^^^\n"
              "... and 24 more diagnostics not shown (24 errors); fix the ones above first\n");
    }
    SUBCASE("from 1 to 1000") {
        CHECK(request(kPure, Json::array(), Json::object(), {{"max_diagnostics", 1000}}).maxDiagnostics == 1000);
        CHECK(request(kPure).maxDiagnostics == serve::kDefaultMaxDiagnostics);
        CHECK(badRequest(R"({"type":"run","session":"s","program":"","host":"","max_diagnostics":0})") ==
              "'max_diagnostics' must be a positive integer");
        CHECK(badRequest(R"({"type":"run","session":"s","program":"","host":"","max_diagnostics":"5"})") ==
              "'max_diagnostics' must be a positive integer");
        CHECK(badRequest(R"({"type":"run","session":"s","program":"","host":"","max_diagnostics":1001})") ==
              "'max_diagnostics' is 1001, over this server's maximum of 1000");
    }
}

// R0301 cannot be reached through serve: deny tags come only from the host interface, which the
// program is checked against in the same request, and the checker's flow analysis over-approximates
// the run's tags, so every flow the broker would refuse is rejected first (E0301). A run-time R0301
// needs the host to change after the check: tests/unit/test_broker.cpp and test_diagnostics_render.cpp.
TEST_CASE("serve: a value the host tags reaching a parameter that denies the tag is rejected before it runs") {
    const char* source =
        "program leak\nuses crm.lookup, web.fetch\n\nfn main() -> Str {\n"
        "  let c = crm.lookup(\"42\")\n  return web.fetch(\"https://example.org/{c.name}\")\n}\n";
    serve::Session s(request(source, Json::array({grant("crm.lookup", "allow"), grant("web.fetch", "allow")})));
    Json r = s.start();
    INFO(r.dump());
    CHECK(r["status"] == "rejected");
    CHECK(r["stage"] == "flow");
    CHECK(r["diagnostics"][0]["code"] == "E0301");
    CHECK(r["diagnostics"][0]["details"] == Json{{"resource", "web.fetch"}, {"param", "url"}, {"tags", {"private"}}});
    CHECK(
        r["rendered"].get<std::string>().starts_with("program.rmt:6:20: error[E0301]: data tagged private flows into "
                                                     "'web.fetch' parameter 'url', which denies it\n"));
}
