// The broker against the embedding API, for the rules a checked program cannot reach from the
// command line because the checker already enforces them statically (grants, deny tags, call and
// agent limits, non-idempotent retries): the broker enforces them again at run time, so a forged
// artifact or a host/policy that changed after the check gains nothing. Here the program is
// compiled against one host interface and the broker is handed a stricter one (or a stricter
// policy, or a doctored .rbc). Also: fixture matching and JSON Schema generation.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>

#include "broker/broker.h"
#include "broker/fixture_adapter.h"
#include "broker/replay.h"
#include "broker/trace.h"
#include "compiler/checker.h"
#include "compiler/parser.h"
#include "remit/remit.h"
#include "runtime/json_schema.h"
#include "runtime/value_json.h"
#include "vm/rbc.h"
#include "host_fixture.h"

namespace {

using namespace remit;
using remit::test::hostFrom;

constexpr const char* kLaxHost =
    "capability crm.lookup(id: Str) -> Str\n  tags private\n  idempotent\n"
    "capability mail.send(to: Str, body: Str)\n"
    "model llm cost 0.01\n"
    "input ticket tags untrusted\n";

std::shared_ptr<const LoadedProgram> compile(const std::string& source, const char* host = kLaxHost) {
    CompileOutcome out = compileProgram(source, "t.rmt", host, "host.rmti");
    std::string messages;
    for (const Diagnostic& d : out.diagnostics.items()) messages += d.message + "\n";
    INFO(messages);
    REQUIRE(out.program);
    return out.program;
}

Policy policyFrom(const std::string& text) {
    DiagnosticList diags;
    std::optional<Policy> policy = parsePolicy("policy.toml", text, diags);
    REQUIRE(policy);
    return *policy;
}

std::unique_ptr<FixtureAdapter> fixtures(const std::string& text) {
    std::string error, hint;
    auto adapter = FixtureAdapter::fromJson(nlohmann::json::parse(text), "f.json", error, hint);
    INFO(error);
    REQUIRE(adapter);
    return adapter;
}

struct Outcome {
    RunStatus status;
    std::optional<RuntimeError> error;
    std::vector<nlohmann::json> events;
    uint64_t calls = 0;
};

// Runs main(ticket) through a broker with `host`, `policy` and `adapter`, tracing to a temp file.
Outcome runWith(std::shared_ptr<const LoadedProgram> program, const HostModel& host, const Policy& policy,
                Adapter& adapter, const std::string& ticket = "t", bool strictFlows = false) {
    Run run(program, {});
    std::vector<Value> args;
    const Function& main = program->module().functions[program->entry()];
    if (!main.paramNames.empty()) {
        auto tags = run.heap().internTags({"untrusted"});
        args.push_back(*run.heap().makeStr(ticket, *tags));
    }
    // Unique per process and call: ctest runs each test case as its own process, in parallel.
    static int serial = 0;
    std::string path = (std::filesystem::temp_directory_path() /
                        ("remit-unit-broker-" + std::to_string(::getpid()) + "-" + std::to_string(++serial) + ".jsonl"))
                           .string();
    Outcome out;
    {
        TraceWriter trace;
        std::string error;
        REQUIRE(trace.open(path, error));
        BrokerOptions options;
        options.runId = "20260101-000000-abcdef";
        options.idempotencyRoot = options.runId;
        options.programHash = program->module().programHash;
        options.host = &host;
        options.policy = &policy;
        options.adapter = &adapter;
        options.trace = &trace;
        options.strictFlows = strictFlows;
        Broker broker(options, run);
        out.status = broker.drive(run.start(program->entry(), std::move(args)));
        out.calls = broker.calls();
        if (out.status == RunStatus::Failed) out.error = run.failure().error;
    }
    out.events = readTrace(path).events;
    std::filesystem::remove(path);
    return out;
}

size_t count(const std::vector<nlohmann::json>& events, const char* kind) {
    size_t n = 0;
    for (const auto& e : events) n += e["event"] == kind;
    return n;
}

}  // namespace

TEST_CASE("broker: an ungranted resource is R0303 and nothing is performed") {
    auto program = compile("program p\nuses crm.lookup\nfn main(ticket: Str) -> Str {\n  return crm.lookup(ticket)\n}\n");
    HostModel host = hostFrom(kLaxHost);
    auto adapter = fixtures(R"({"capabilities": {"crm.lookup": [{"output": "x", "repeat": true}]}})");
    Outcome out = runWith(program, host, policyFrom("[grant.\"mail.send\"]\n"), *adapter);
    REQUIRE(out.error);
    CHECK(out.error->code == DiagCode::R0303);
    CHECK(out.error->message == "host policy does not grant 'crm.lookup'");
    CHECK(out.calls == 0);
    out = runWith(program, host, Policy::allowAllPolicy(), *adapter);
    CHECK(out.status == RunStatus::Completed);
}

TEST_CASE("broker: deny tags are checked on deep argument tags at run time (R0301 + violation)") {
    auto program = compile(
        "program p\nuses mail.send\nfn main(ticket: Str) -> Str {\n"
        "  mail.send(to: \"a@b\", body: [ticket][0])\n  return \"sent\"\n}\n");
    HostModel strict = hostFrom(
        "capability crm.lookup(id: Str) -> Str\n  tags private\n  idempotent\n"
        "capability mail.send(to: Str, body: Str deny untrusted)\n"
        "model llm cost 0.01\ninput ticket tags untrusted\n");
    auto adapter = fixtures(R"({"capabilities": {"mail.send": [{"output": null}]}})");
    Outcome out = runWith(program, strict, Policy::allowAllPolicy(), *adapter);
    REQUIRE(out.error);
    CHECK(out.error->code == DiagCode::R0301);
    CHECK(out.error->message == "data tagged untrusted reached 'mail.send' parameter 'body', which denies it");
    CHECK(count(out.events, "violation") == 1);
    for (const auto& e : out.events)
        if (e["event"] == "violation") {
            CHECK(e["param"] == "body");
            CHECK(e["tags"] == nlohmann::json::array({"untrusted"}));
            CHECK(e["site"] == "main#0");
        }
    CHECK(count(out.events, "call") == 0);
}

TEST_CASE("broker: in strict flows the pc reaches deny parameters (R0301 via control)") {
    // Checked against the lax host (no deny), run with a host whose mail.send denies untrusted:
    // the body is untagged, but the call runs only because of the untrusted ticket.
    auto program = compile(
        "program p\nuses mail.send\nfn main(ticket: Str) -> Str {\n"
        "  if ticket == \"refund\" {\n    mail.send(to: \"a@b\", body: \"ok\")\n  }\n  return \"sent\"\n}\n");
    HostModel strict = hostFrom(
        "capability crm.lookup(id: Str) -> Str\n  tags private\n  idempotent\n"
        "capability mail.send(to: Str, body: Str deny untrusted)\n"
        "model llm cost 0.01\ninput ticket tags untrusted\n");
    auto adapter = fixtures(R"({"capabilities": {"mail.send": [{"output": null, "repeat": true}]}})");
    Outcome lax = runWith(program, strict, Policy::allowAllPolicy(), *adapter, "refund");
    CHECK(lax.status == RunStatus::Completed);  // the default mode: control flow never meets deny
    Outcome out = runWith(program, strict, Policy::allowAllPolicy(), *adapter, "refund", true);
    REQUIRE(out.error);
    CHECK(out.error->code == DiagCode::R0301);
    CHECK(out.error->message ==
          "control flow tagged untrusted reached 'mail.send' parameter 'body', which denies it (strict flows)");
    CHECK(out.error->details["via"] == "control");
    for (const auto& e : out.events)
        if (e["event"] == "violation") CHECK(e["via"] == "control");
    CHECK(count(out.events, "violation") == 1);
    CHECK(count(out.events, "call") == 0);
    // Not taken: nothing is refused.
    CHECK(runWith(program, strict, Policy::allowAllPolicy(), *adapter, "other", true).status == RunStatus::Completed);
}

TEST_CASE("broker: a policy call limit is enforced per resource (R0402)") {
    auto program = compile(
        "program p\nuses crm.lookup\nfn main(ticket: Str) -> Str {\n"
        "  let a = crm.lookup(\"1\")\n  let b = crm.lookup(\"2\")\n  return a + b\n}\n");
    HostModel host = hostFrom(kLaxHost);
    auto adapter = fixtures(R"({"capabilities": {"crm.lookup": [{"output": "x", "repeat": true}]}})");
    Outcome out = runWith(program, host, policyFrom("[grant.\"crm.lookup\"]\nmax_calls = 1\n"), *adapter);
    REQUIRE(out.error);
    CHECK(out.error->code == DiagCode::R0402);
    CHECK(out.error->message == "policy allows at most 1 call(s) to 'crm.lookup'");
    CHECK(out.calls == 1);
}

TEST_CASE("broker: retrying a capability the host says is not idempotent is R0405") {
    auto program = compile("program p\nuses crm.lookup\nfn main(ticket: Str) -> Str {\n"
                           "  return crm.lookup(\"1\") retry 2\n}\n");
    HostModel strict = hostFrom(
        "capability crm.lookup(id: Str) -> Str\n  tags private\n"
        "capability mail.send(to: Str, body: Str)\nmodel llm cost 0.01\ninput ticket tags untrusted\n");
    auto adapter = fixtures(R"({"capabilities": {"crm.lookup": [{"error": "down"}, {"output": "x"}]}})");
    Outcome out = runWith(program, strict, Policy::allowAllPolicy(), *adapter);
    REQUIRE(out.error);
    CHECK(out.error->code == DiagCode::R0405);
    CHECK(out.calls == 1);  // the first attempt was made; the retry never reached the adapter
}

TEST_CASE("broker: an agent's max_calls holds even in a doctored artifact (R0402)") {
    auto program = compile(
        "program p\nuses llm\nagent A {\n  model: llm\n  system: \"s\"\n  max_calls: 2\n}\n"
        "fn main(ticket: Str) -> Str {\n  let a = A.ask(Str, \"one\")\n  let b = A.ask(Str, \"two\")\n"
        "  return a + b\n}\n");
    // Lower the agent's limit in the bytes, as a forger might raise it: the broker reads the
    // artifact's own agent table, and the verifier accepts a consistent artifact.
    Module doctored = program->module();
    REQUIRE(doctored.agents.size() == 1);
    doctored.agents[0].maxCalls = 1;
    LoadOutcome loaded = loadProgram(writeRbc(doctored));
    INFO(loaded.error);
    REQUIRE(loaded.program);
    HostModel host = hostFrom(kLaxHost);
    auto adapter = fixtures(R"({"model": [{"agent": "A", "output": "x", "repeat": true}]})");
    Outcome out = runWith(loaded.program, host, Policy::allowAllPolicy(), *adapter);
    REQUIRE(out.error);
    CHECK(out.error->code == DiagCode::R0402);
    CHECK(out.error->message == "agent 'A' reached max_calls=1");
    for (const auto& e : out.events)
        if (e["event"] == "call") CHECK(e["resource"] == "llm");  // agents are counted under their model
}

TEST_CASE("fixtures: subset args, Python equality, used and repeat entries") {
    auto adapter = fixtures(R"({"capabilities": {"r": [
        {"args": {"n": 1}, "output": "one"},
        {"args": {"n": 2}, "output": "two", "repeat": true},
        {"error": "nothing else", "error_code": "Timeout"}]}})");
    AdapterRequest req;
    req.resource = "r";
    req.args = {{"n", 1.0}, {"other", "x"}};
    AdapterReply a = adapter->perform(req);
    CHECK(a.ok);
    CHECK(a.result == "one");
    CHECK_FALSE(a.costUsd);  // the declared cost applies
    a = adapter->perform(req);  // entry 0 is used; entry 1 does not match; entry 2 is the error
    CHECK_FALSE(a.ok);
    CHECK(a.errorCode == "Timeout");
    req.args = {{"n", 2}};
    CHECK(adapter->perform(req).result == "two");
    CHECK(adapter->perform(req).result == "two");  // repeat
    req.resource = "other";
    a = adapter->perform(req);
    CHECK(a.message == "no fixture for other({\"n\": 2})");
    CHECK(pyJsonEqual(nlohmann::json(1), nlohmann::json(1.0)));
    CHECK_FALSE(pyJsonEqual(nlohmann::json(true), nlohmann::json(1)));
    CHECK_FALSE(pyJsonEqual(nlohmann::json(-1), nlohmann::json(static_cast<uint64_t>(-1))));
}

TEST_CASE("fixtures: models match on agent and rendered prompt, each model with its own used flags") {
    auto adapter = fixtures(R"({"model": [
        {"agent": "V", "match": "MIT", "output": "v"},
        {"match": "Lunch", "answer": "business", "repeat": true}]})");
    AdapterRequest req;
    req.kind = AdapterRequest::Kind::Ask;
    req.model = "llm";
    req.agent = "V";
    req.renderedPrompt = "license MIT";
    CHECK(adapter->perform(req).result == "v");
    CHECK_FALSE(adapter->perform(req).ok);  // used
    req.model = "other";
    CHECK(adapter->perform(req).result == "v");  // another model keeps its own flags
    req.agent = "";
    req.prompt = "Lunch with client";
    req.renderedPrompt = req.prompt;
    req.schema = {{"type", "object"},
                  {"properties", {{"business", {{"type", "boolean"}}}, {"note", {{"type", "string"}}},
                                  {"n", {{"type", "integer"}}}, {"xs", {{"type", "array"}}}}}};
    AdapterReply r = adapter->perform(req);
    CHECK(r.result.dump() == R"({"business":true,"note":"business","n":0,"xs":[]})");
    CHECK(r.costUsd == 0.0);
    req.renderedPrompt = req.prompt = "no such thing";
    CHECK(adapter->perform(req).message == "no fixture output for agent=None prompt='no such thing'");
}

TEST_CASE("fixtures: malformed files are refused with the file and the place") {
    for (const char* bad : {"[]", R"({"capabilities": []})", R"({"capabilities": {"r": [1]}})",
                            R"({"model": [{"output": 1, "cost_usd": -1}]})", R"({"model": [{"agent": "A"}]})",
                            R"({"capabilities": {"r": [{"error_code": "Nope", "error": "x"}]}})"}) {
        std::string error, hint;
        CHECK_FALSE(FixtureAdapter::fromJson(nlohmann::json::parse(bad), "fx.json", error, hint));
        CHECK(error.find("fx.json") != std::string::npos);
        CHECK_FALSE(hint.empty());
    }
}

TEST_CASE("json schema: the prototype's shapes") {
    TypeArena arena;
    TypeRef verdict = arena.enumOf({"supported", "refuted"}, "Verdict");
    TypeRef rec = arena.record({{"verdict", verdict}, {"quotes", arena.list(arena.str(), 3)}, {"n", arena.integer()},
                                {"x", arena.floating()}, {"ok", arena.boolean()}});
    CHECK(jsonSchemaFor(rec).dump() ==
          R"({"type":"object","properties":{"verdict":{"type":"string","enum":["supported","refuted"]},)"
          R"("quotes":{"type":"array","items":{"type":"string"},"maxItems":3},"n":{"type":"integer"},)"
          R"("x":{"type":"number"},"ok":{"type":"boolean"}},"required":["verdict","quotes","n","x","ok"],)"
          R"("additionalProperties":false})");
    CHECK(jsonSchemaFor(arena.list(arena.integer(), std::nullopt)).dump() ==
          R"({"type":"array","items":{"type":"integer"}})");
}

namespace {

remit::TraceFile traceOf(const std::vector<std::string>& lines) {
    remit::TraceFile t;
    for (size_t i = 0; i < lines.size(); ++i) {
        t.events.push_back(nlohmann::json::parse(lines[i]));
        t.lines.push_back(i + 1);
    }
    return t;
}

const char* kStart = R"({"event":"run_start","run_id":"r1","idempotency_root":"r1","program_hash":"h","inputs":{},"path":"p.rmt"})";
const char* kOkCall = R"({"event":"call","resource":"a","site":"main#0","args":{},"status":"ok","result":1,"idempotency_key":"k0"})";
const char* kFailedCall = R"({"event":"call","resource":"b","site":"main#1","args":{},"status":"error","error":{"code":"R0501","message":"x"},"idempotency_key":"k1"})";

}  // namespace

TEST_CASE("replay plan: failed calls are replayed, except those that stopped a resumed run") {
    using namespace remit;
    std::string error;
    TraceFile failed = traceOf({kStart, kOkCall, kFailedCall, R"({"event":"run_end","status":"error","code":"R0501"})"});
    CHECK(planFromTrace(failed, "t.jsonl", ReplayPurpose::Replay, error).calls.size() == 2);
    CHECK(planFromTrace(failed, "t.jsonl", ReplayPurpose::Resume, error).calls.size() == 1);
    TraceFile paused = traceOf({kStart, kOkCall, kFailedCall, R"({"event":"run_end","status":"pending_approval"})"});
    ReplayPlan plan = planFromTrace(paused, "t.jsonl", ReplayPurpose::Resume, error);
    CHECK(error.empty());
    CHECK(plan.calls.size() == 2);  // the run moved past the failure (an `else`) before it paused
    CHECK(plan.liveAfter);
}

TEST_CASE("replay plan: a dispatch without its call event is in flight, carried over by a resume") {
    using namespace remit;
    std::string error;
    TraceFile t = traceOf({kStart, R"({"event":"dispatch","run_id":"r1","resource":"a","site":"main#0","idempotency_key":"k0","args_sha256":"d"})",
                           kOkCall,
                           R"({"event":"dispatch","run_id":"r1","resource":"c","site":"main#2","idempotency_key":"k2","args_sha256":"d2","approval":{"digest":"g","approved_by":"ann"}})"});
    ReplayPlan plan = planFromTrace(t, "t.jsonl", ReplayPurpose::Resume, error);
    REQUIRE(plan.inFlight.size() == 1);
    CHECK(plan.inFlight[0].idempotencyKey == "k2");
    CHECK(plan.inFlight[0].approval["approved_by"] == "ann");
    // A resume that has not reached it yet carries it in run_start.
    nlohmann::ordered_json start = nlohmann::ordered_json::parse(kStart);
    start["in_flight"] = inFlightJson(plan.inFlight);
    TraceFile resumed = traceOf({start.dump()});
    CHECK(planFromTrace(resumed, "t2.jsonl", ReplayPurpose::Resume, error).inFlight.size() == 1);
}

TEST_CASE("replay plan: hostile traces are errors naming the line, never exceptions") {
    using namespace remit;
    for (std::vector<std::string> lines : std::vector<std::vector<std::string>>{
             {R"({"event":"call"})"},
             {R"({"event":"run_start","run_id":1,"program_hash":"h","inputs":{}})"},
             {kStart, R"({"event":"call","resource":"a","site":"main#0","args":[],"status":"ok","result":1})"},
             {kStart, R"({"event":"call","resource":"a","site":"main#0","args":{},"status":"ok"})"},
             {kStart, R"({"event":"call","resource":"a","site":"main#0","args":{},"status":"maybe"})"},
             {kStart, R"({"event":"dispatch","idempotency_key":7})"},
             {R"({"event":"run_start","run_id":"r","program_hash":"h","inputs":{},"path":3})"}}) {
        std::string error;
        planFromTrace(traceOf(lines), "t.jsonl", ReplayPurpose::Resume, error);
        CHECK_MESSAGE(error.starts_with("t.jsonl:"), lines.back());
    }
}

TEST_CASE("trace reading: a last line cut short is a warning, a broken line elsewhere an error") {
    using namespace remit;
    auto path = std::filesystem::temp_directory_path() / ("remit-trace-" + std::to_string(::getpid()) + ".jsonl");
    auto write = [&](const std::string& text) {
        std::FILE* f = std::fopen(path.c_str(), "wb");
        std::fwrite(text.data(), 1, text.size(), f);
        std::fclose(f);
    };
    write(std::string(kStart) + "\n" + R"({"event":"call","reso)");
    TraceFile t = readTrace(path.string());
    CHECK(t.error.empty());
    CHECK(t.events.size() == 1);
    CHECK(t.warning.find(":2: the last line is cut short") != std::string::npos);
    write(std::string(kStart) + "\n{broken\n" + kOkCall + "\n");
    t = readTrace(path.string());
    CHECK(t.error.find(":2:") != std::string::npos);
    std::filesystem::remove(path);
}
