// The VM through the embedding API (include/remit/remit.h): programs compiled from source run to
// the prototype's values; runs stop at host calls exposing the site, resource, tagged arguments
// and pc tags, and resume with a result, a retried error, a fallback or a failure; labels follow
// PROTOTYPE.md §4.7; limits and the host abort stop runs with R0701 and R0702.
#include <doctest/doctest.h>

#include <thread>

#include "remit/remit.h"
#include "runtime/value_json.h"

namespace {

using namespace remit;

constexpr const char* kHost =
    "capability crm.lookup(id: Str) -> Str\n  tags private\n  idempotent\n"
    "capability mail.send(to: Str, body: Str)\n"
    "model llm cost 0.01\n"
    "input ticket tags untrusted\n";

std::shared_ptr<const LoadedProgram> compile(const std::string& source) {
    CompileOutcome out = compileProgram(source, "t.rmt", kHost, "host.rmti");
    std::string messages;
    for (const Diagnostic& d : out.diagnostics.items()) messages += d.message + "\n";
    INFO(messages);
    REQUIRE(out.program);
    return out.program;
}

std::string resultJson(Run& run) {
    REQUIRE(run.status() == RunStatus::Completed);
    return valueToJson(run.result())->dump();
}

std::vector<std::string> tagNames(Run& run, TagSetId tags) { return run.heap().tagTable().names(tags); }

TEST_CASE("vm: a pure program runs to its value") {
    auto program = compile(
        "program p\n"
        "fn fib() -> List[Int] max 20 {\n"
        "  var xs = [0, 1]\n"
        "  for i in range(18) {\n"
        "    xs = xs + [xs[-1] + xs[-2]]\n"
        "  }\n"
        "  return take(xs, 20)\n"
        "}\n"
        "fn main() -> Int {\n"
        "  return sum(fib())\n"
        "}\n");
    Run run(program, {});
    CHECK(run.start(program->entry(), {}) == RunStatus::Completed);
    CHECK(resultJson(run) == "10945");
}

TEST_CASE("vm: a run stops at a host call and resumes with the result") {
    auto program = compile(
        "program p\nuses crm.lookup, mail.send\n"
        "fn main(ticket: Str) -> Str {\n"
        "  let who = crm.lookup(ticket)\n"
        "  if ticket == \"vip\" {\n"
        "    mail.send(to: who, body: \"hello {who}\")\n"
        "  }\n"
        "  return who\n"
        "}\n");
    Run run(program, {});
    TagSetId untrusted = *run.heap().internTags({"untrusted"});
    std::vector<Value> args;
    args.push_back(*run.heap().makeStr("vip", untrusted));
    REQUIRE(run.start(program->entry(), std::move(args)) == RunStatus::HostCall);
    const HostCall& lookup = run.hostCall();
    CHECK(lookup.site->id == "main#0");
    CHECK(lookup.site->resource == "crm.lookup");
    CHECK(lookup.site->span.line == 4);
    REQUIRE(lookup.args.size() == 1);
    CHECK(lookup.args[0].asStr() == "vip");
    CHECK(tagNames(run, lookup.args[0].tags()) == std::vector<std::string>{"untrusted"});
    CHECK(lookup.pcTags == kNoTags);

    TagSetId privateTags = *run.heap().internTags({"private"});
    REQUIRE(run.resumeWithResult(*run.heap().makeStr("ada", privateTags)) == RunStatus::HostCall);
    const HostCall& send = run.hostCall();
    CHECK(send.site->id == "main#1");
    CHECK(send.site->argNames == std::vector<std::string>{"to", "body"});
    // Under `if ticket == "vip"` the pc carries the ticket's tags.
    CHECK(tagNames(run, send.pcTags) == std::vector<std::string>{"untrusted"});
    CHECK(send.args[1].asStr() == "hello ada");
    CHECK(tagNames(run, send.args[1].tags()) == std::vector<std::string>{"private"});
    REQUIRE(run.resumeWithResult(Value()) == RunStatus::Completed);
    CHECK(resultJson(run) == "\"ada\"");
}

TEST_CASE("vm: operational errors are retried, then take the else branch") {
    auto program = compile(
        "program p\nuses crm.lookup\n"
        "fn main() -> Str {\n"
        "  return crm.lookup(\"x\") retry 2 else \"fallback\"\n"
        "}\n");
    Run run(program, {});
    REQUIRE(run.start(program->entry(), {}) == RunStatus::HostCall);
    for (uint32_t attempt = 0; attempt < 2; ++attempt) {
        CHECK(run.hostCall().attempt == attempt);
        CHECK_FALSE(run.willFallBack(true));
        REQUIRE(run.resumeWithError(RuntimeError{DiagCode::R0501, "down", {}}, true) == RunStatus::HostCall);
    }
    CHECK(run.hostCall().attempt == 2);
    CHECK(run.hostCall().args[0].asStr() == "x");  // the same call again
    CHECK(run.willFallBack(true));
    REQUIRE(run.resumeWithError(RuntimeError{DiagCode::R0501, "down", {}}, true) == RunStatus::Completed);
    CHECK(resultJson(run) == "\"fallback\"");
}

TEST_CASE("vm: a security error is never caught by else") {
    auto program = compile(
        "program p\nuses crm.lookup\n"
        "fn main() -> Str {\n"
        "  return crm.lookup(\"x\") retry 2 else \"fallback\"\n"
        "}\n");
    Run run(program, {});
    REQUIRE(run.start(program->entry(), {}) == RunStatus::HostCall);
    REQUIRE(run.resumeWithError(RuntimeError{DiagCode::R0301, "denied", {}}, false) == RunStatus::Failed);
    CHECK(run.failure().error.code == DiagCode::R0301);
    CHECK(run.failure().span.line == 4);
}

TEST_CASE("vm: model calls carry the requested type and prompt/context") {
    auto program = compile(
        "program p\nuses llm\n"
        "type Verdict = { label: \"spam\" | \"ham\", score: Float }\n"
        "fn main(ticket: Str) -> Str {\n"
        "  let v = llm.ask(Verdict, \"classify\", context: ticket)\n"
        "  return v.label\n"
        "}\n");
    Run run(program, {});
    std::vector<Value> args;
    args.push_back(*run.heap().makeStr("buy now", *run.heap().internTags({"untrusted"})));
    REQUIRE(run.start(program->entry(), std::move(args)) == RunStatus::HostCall);
    const HostCall& call = run.hostCall();
    CHECK(call.site->kind == SiteKind::Model);
    CHECK(call.site->resource == "llm");
    REQUIRE(call.askType);
    CHECK(showType(call.askType) == "Verdict");
    CHECK(call.args[0].asStr() == "classify");
    CHECK(call.args[1].asStr() == "buy now");
    nlohmann::json answer = {{"label", "ham"}, {"score", 0.5}};
    ValueFromJson v = valueFromJson(run.heap(), answer, call.askType, "output");
    REQUIRE(v.value);
    REQUIRE(run.resumeWithResult(std::move(*v.value)) == RunStatus::Completed);
    CHECK(resultJson(run) == "\"ham\"");
}

TEST_CASE("vm: labels follow the prototype's rules") {
    auto program = compile(
        "program p\n"
        "fn main(ticket: Str) -> { a: Str, b: Int, c: Bool, d: List[Str] max 2 } {\n"
        "  let xs = [ticket, \"clean\"]\n"
        "  var n = 0\n"
        "  if len(ticket) > 3 {\n"
        "    n = 1\n"
        "  }\n"
        "  return { a: xs[1], b: len(\"abc\"), c: ticket == \"x\", d: xs }\n"
        "}\n");
    Run run(program, {});
    std::vector<Value> args;
    args.push_back(*run.heap().makeStr("long ticket", *run.heap().internTags({"untrusted"})));
    REQUIRE(run.start(program->entry(), std::move(args)) == RunStatus::Completed);
    const RecordObject& r = run.result().asRecord();
    // A clean element of a list holding a tagged one stays clean (tags are per element).
    CHECK(tagNames(run, r.values[0].tags()).empty());
    CHECK(tagNames(run, r.values[1].tags()).empty());
    CHECK(tagNames(run, r.values[2].tags()) == std::vector<std::string>{"untrusted"});  // == labels deeply
    CHECK(tagNames(run, contentTags(r.values[3])) == std::vector<std::string>{"untrusted"});
}

TEST_CASE("vm: the step limit, the memory limit and the host abort") {
    auto program = compile(
        "program p\nfn main() -> Int {\n  var t = 0\n  for i in range(100000000) {\n    t = t + 1\n  }\n"
        "  return t\n}\n");
    SUBCASE("steps") {
        VmLimits limits;
        limits.maxSteps = 10000;
        Run run(program, limits);
        REQUIRE(run.start(program->entry(), {}) == RunStatus::Failed);
        CHECK(run.failure().error.code == DiagCode::R0701);
        CHECK(run.failure().error.details["limit"] == "steps");
        CHECK(run.stepsUsed() > 10000);
        CHECK(run.stepsUsed() < 10100);
    }
    SUBCASE("abort from another thread") {
        VmLimits limits;
        limits.maxSteps = UINT64_MAX / 2;
        limits.maxWallMs = 600000;
        Run run(program, limits);
        std::thread aborter([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            run.requestAbort();
        });
        RunStatus status = run.start(program->entry(), {});
        aborter.join();
        REQUIRE(status == RunStatus::Failed);
        CHECK(run.failure().error.code == DiagCode::R0702);
    }
    SUBCASE("memory") {
        auto growing = compile(
            "program p\nfn main() -> Int {\n  var s = \"\"\n  for i in range(100000000) {\n"
            "    s = s + \"more text {i}\"\n  }\n  return len(s)\n}\n");
        VmLimits limits;
        limits.maxSteps = UINT64_MAX / 2;
        limits.maxMemory = 1 << 20;
        Run run(growing, limits);
        REQUIRE(run.start(growing->entry(), {}) == RunStatus::Failed);
        CHECK(run.failure().error.code == DiagCode::R0701);
        CHECK(run.heap().peakBytes() <= (1u << 20));
    }
}

TEST_CASE("vm: an expect in a test block fails with its message") {
    auto program = compile(
        "program p\nfn double(x: Int) -> Int {\n  return x * 2\n}\n"
        "fn main() -> Int {\n  return double(1)\n}\n"
        "test \"doubles\" {\n  expect double(2) == 4, \"two\"\n  expect double(3) == 7\n}\n");
    REQUIRE(program->module().tests.size() == 1);
    Run run(program, {});
    REQUIRE(run.start(program->module().tests[0].function, {}) == RunStatus::Failed);
    CHECK(run.failure().expectationFailed);
    CHECK(run.failure().error.message == "expectation failed: double(3) == 7");
    CHECK(run.failure().span.line == 10);
}

}  // namespace
