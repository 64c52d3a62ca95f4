// The broker against the embedding API, for the rules a checked program cannot reach from the
// command line because the checker already enforces them statically (grants, deny tags, call and
// agent limits, non-idempotent retries): the broker enforces them again at run time, so a forged
// artifact or a host/policy that changed after the check gains nothing. Here the program is
// compiled against one host interface and the broker is handed a stricter one (or a stricter
// policy, or a doctored .rbc). Also: fixture matching and JSON Schema generation.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <set>

#include "broker/approvals.h"
#include "runtime/json_text.h"
#include "broker/broker.h"
#include "broker/fixture_adapter.h"
#include "broker/replay.h"
#include "broker/trace.h"
#include "compiler/checker.h"
#include "compiler/parser.h"
#include "session/pipeline.h"
#include "vm/run.h"
#include "runtime/canonical_json.h"
#include "runtime/hash.h"
#include "runtime/json_schema.h"
#include "runtime/value_json.h"
#include "bytecode/rbc.h"
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
    std::vector<size_t> lines;
    uint64_t calls = 0;
    std::string ioError;
    std::optional<Broker::NotDelivered> notDelivered;
};

// How a test run differs from a plain first run: a resume's plan and root, a failing trace.
struct RunConfig {
    const ReplayPlan* replay = nullptr;
    std::string root = "20260101-000000-abcdef";
    size_t failTraceFromEmit = 0;  // the n-th event and every later one cannot be written (ENOSPC)
    ApprovalStore* approvals = nullptr;
    bool strictFlows = false;
};

// Runs main(ticket) through a broker with `host`, `policy` and `adapter`, tracing to a temp file.
Outcome runWith(std::shared_ptr<const LoadedProgram> program, const HostModel& host, const Policy& policy,
                Adapter& adapter, const std::string& ticket = "t", const RunConfig& config = {}) {
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
        if (config.failTraceFromEmit) trace.failFromEmit(config.failTraceFromEmit, ENOSPC);
        BrokerOptions options;
        options.runId = config.replay ? "20260101-000001-abcdef" : "20260101-000000-abcdef";
        options.idempotencyRoot = config.root;
        options.replay = config.replay;
        options.approvals = config.approvals;
        options.programHash = program->module().programHash;
        options.host = &host;
        options.policy = &policy;
        options.adapterKind = adapter.kind();
        options.trace = &trace;
        options.strictFlows = config.strictFlows;
        Broker broker(options, run);
        trace.emit({{"event", "run_start"}, {"run_id", options.runId}, {"idempotency_root", config.root},
                    {"program_hash", options.programHash}, {"inputs", nlohmann::json::object()}, {"path", "t.rmt"}});
        run.start(program->entry(), std::move(args));
        out.status = driveWith(run, broker, &adapter);
        out.calls = broker.calls();
        out.ioError = broker.ioError();
        out.notDelivered = broker.notDelivered();
        if (out.status == RunStatus::Failed) out.error = run.failure().error;
    }
    TraceFile read = readTrace(path);
    INFO(read.error);
    CHECK(read.error.empty());
    out.events = read.events;
    out.lines = read.lines;
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
    Outcome out = runWith(program, strict, Policy::allowAllPolicy(), *adapter, "refund", RunConfig{.strictFlows = true});
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
    CHECK(runWith(program, strict, Policy::allowAllPolicy(), *adapter, "other", RunConfig{.strictFlows = true}).status == RunStatus::Completed);
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
    sealProgramHash(doctored);  // a forger recomputes the content hash too
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

TEST_CASE("fixtures: Python's == across the two JSON types is the same as within one, on generated values") {
    // The fixture adapter matches a request's arguments (a Json) against its file (an
    // nlohmann::json) without converting either; the oracle is pyJsonEqual after converting.
    std::mt19937 rng(2201);
    const std::vector<nlohmann::json> leaves = {
        nullptr, true, false, 0, 1, 1.0, -1, nlohmann::json(static_cast<uint64_t>(-1)), 2.5, "", "a", "\u00e9",
        nlohmann::json::array(), nlohmann::json::object()};
    std::function<nlohmann::json(int)> make = [&](int depth) -> nlohmann::json {
        switch (depth > 0 ? rng() % 4 : 0) {
            case 1: {
                nlohmann::json list = nlohmann::json::array();
                for (size_t n = rng() % 3; n > 0; --n) list.push_back(make(depth - 1));
                return list;
            }
            case 2: {
                nlohmann::json object = nlohmann::json::object();
                for (size_t n = rng() % 3; n > 0; --n) object[std::string(1, static_cast<char>('a' + rng() % 3))] = make(depth - 1);
                return object;
            }
            default:
                return leaves[rng() % leaves.size()];
        }
    };
    int equal = 0;
    for (int round = 0; round < 3000; ++round) {
        nlohmann::json a = make(2), b = rng() % 3 == 0 ? a : make(2);
        bool expected = pyJsonEqual(a, b);
        equal += expected;
        CHECK(pyJsonEqual(Json(a), b) == expected);
    }
    CHECK(equal > 100);  // the generator makes equal pairs, not only different ones
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

constexpr const char* kRoot = "20260101-120000-a1b2c3";
const std::string kStart = R"({"event":"run_start","run_id":"20260101-120000-a1b2c3","idempotency_root":"20260101-120000-a1b2c3","program_hash":"h","inputs":{},"path":"p.rmt"})";

// A call or dispatch event of attempt k at `site`, with the key the broker derives for it.
std::string keyed(Json event, const std::string& site, uint64_t k, int64_t attempt = 0) {
    event["site"] = site;
    event["k"] = k;
    event["attempt"] = attempt;
    event["idempotency_key"] = remit::idempotencyKey(kRoot, site, k);
    if (!event.contains("run_id")) event["run_id"] = kRoot;
    return event.dump();
}
std::string okCall(const std::string& site, uint64_t k) {
    return keyed({{"event", "call"}, {"resource", "a"}, {"args", Json::object()}, {"status", "ok"}, {"result", 1}}, site, k);
}
std::string failedCall(const std::string& site, uint64_t k, int64_t attempt = 0) {
    return keyed({{"event", "call"}, {"resource", "b"}, {"args", Json::object()}, {"status", "error"},
                  {"error", {{"code", "R0501"}, {"message", "x"}}}},
                 site, k, attempt);
}
std::string dispatch(const std::string& site, uint64_t k, int64_t attempt = 0, Json approval = nullptr) {
    return keyed({{"event", "dispatch"}, {"resource", "b"}, {"args_sha256", "d"}, {"approval", approval}}, site, k,
                 attempt);
}

std::filesystem::path tempPath(const std::string& name) {
    return std::filesystem::temp_directory_path() / ("remit-unit-" + std::to_string(::getpid()) + "-" + name);
}

void writeFile(const std::filesystem::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
}

std::string readFile(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// Writes `events` with remit's TraceWriter (so with their chains) and returns the file's text.
std::string writtenTrace(const std::filesystem::path& path, const std::vector<std::string>& events) {
    {
        remit::TraceWriter w;
        std::string error;
        REQUIRE(w.open(path.string(), error));
        for (const std::string& e : events) REQUIRE(w.emit(Json::parse(e)));
    }
    return readFile(path);
}

}  // namespace

TEST_CASE("replay plan: failed calls are replayed, except those that ended a resumed run") {
    using namespace remit;
    std::string error;
    TraceFile failed = traceOf({kStart, okCall("main#0", 0), failedCall("main#1", 0),
                                R"({"event":"run_end","status":"error","code":"R0501"})"});
    CHECK(planFromTrace(failed, "t.jsonl", ReplayPurpose::Replay, error).calls.size() == 2);
    CHECK(planFromTrace(failed, "t.jsonl", ReplayPurpose::Resume, error).calls.size() == 1);
    TraceFile paused = traceOf({kStart, okCall("main#0", 0), failedCall("main#1", 0),
                                R"({"event":"run_end","status":"pending_approval"})"});
    ReplayPlan plan = planFromTrace(paused, "t.jsonl", ReplayPurpose::Resume, error);
    CHECK(error.empty());
    CHECK(plan.calls.size() == 2);  // the run moved past the failure (an `else`) before it paused
    CHECK(plan.liveAfter);
}

TEST_CASE("replay plan: a run killed after a failed attempt keeps it, so its resume goes on to the retry") {
    // Issue #14, item 1: dropping the failed first attempt made the resume send the first attempt
    // again, pair it with the in-flight retry's key, and give that key to the next call.
    using namespace remit;
    std::string error;
    TraceFile killed = traceOf({kStart, failedCall("main#0", 0), dispatch("main#0", 1, 1)});
    ReplayPlan plan = planFromTrace(killed, "t.jsonl", ReplayPurpose::Resume, error);
    CHECK(error.empty());
    REQUIRE(plan.calls.size() == 1);
    REQUIRE(plan.inFlight.size() == 1);
    CHECK(plan.inFlight[0].k == 1);
    CHECK(plan.inFlight[0].attempt == 1);
    CHECK(plan.inFlight[0].idempotencyKey == idempotencyKey(kRoot, "main#0", 1));
}

TEST_CASE("replay plan: a dispatch without its call event is in flight, carried over by a resume") {
    using namespace remit;
    std::string error;
    TraceFile t = traceOf({kStart, dispatch("main#0", 0), okCall("main#0", 0),
                           dispatch("main#2", 0, 0, {{"digest", "g"}, {"approved_by", "ann"}})});
    ReplayPlan plan = planFromTrace(t, "t.jsonl", ReplayPurpose::Resume, error);
    INFO(error);
    REQUIRE(plan.inFlight.size() == 1);
    CHECK(plan.inFlight[0].idempotencyKey == idempotencyKey(kRoot, "main#2", 0));
    CHECK(plan.inFlight[0].approval["approved_by"] == "ann");
    // A resume that has not reached it yet carries it in run_start.
    Json start = Json::parse(kStart);
    start["in_flight"] = inFlightJson(plan.inFlight);
    TraceFile resumed = traceOf({start.dump()});
    ReplayPlan again = planFromTrace(resumed, "t2.jsonl", ReplayPurpose::Resume, error);
    CHECK(error.empty());
    REQUIRE(again.inFlight.size() == 1);
    CHECK(again.inFlight[0].k == 0);
}

TEST_CASE("replay plan: a resume that stopped while replaying continues from its parent's plan") {
    using namespace remit;
    std::string error;
    Json start = Json::parse(kStart);
    start["run_id"] = "20260101-120001-a1b2c3";
    start["resumed_from"] = kRoot;
    start["replaying"] = 2;
    Json copy = Json::parse(okCall("main#0", 0));
    copy["replayed"] = true;
    ReplayPlan plan = planFromTrace(traceOf({start.dump(), copy.dump()}), "t.jsonl", ReplayPurpose::Resume, error);
    CHECK(error.empty());
    CHECK(plan.replayUnfinished);
    Json copy2 = Json::parse(okCall("main#0", 1));
    copy2["replayed"] = true;
    plan = planFromTrace(traceOf({start.dump(), copy.dump(), copy2.dump()}), "t.jsonl", ReplayPurpose::Resume, error);
    CHECK_FALSE(plan.replayUnfinished);
}

TEST_CASE("replay plan: hostile traces are errors naming the line, never exceptions") {
    using namespace remit;
    Json start = Json::parse(kStart);
    auto startWith = [&](const char* key, Json value) {
        Json s = start;
        s[key] = std::move(value);
        return s.dump();
    };
    Json otherKey = Json::parse(okCall("main#0", 0));
    otherKey["idempotency_key"] = idempotencyKey(kRoot, "main#0", 1);  // a digit changed, say
    Json otherK = Json::parse(okCall("main#0", 0));
    otherK["k"] = 3;
    Json inFlight = Json::parse(dispatch("main#0", 0));
    Json badInFlightKey = inFlight;
    badInFlightKey["idempotency_key"] = "00000000000000000000000000000000";
    Json badInFlightRun = inFlight;
    badInFlightRun["run_id"] = "../../etc";
    for (std::vector<std::string> lines : std::vector<std::vector<std::string>>{
             {R"({"event":"call"})"},
             {R"({"event":"run_start","run_id":1,"program_hash":"h","inputs":{}})"},
             {kStart, R"({"event":"call","resource":"a","site":"main#0","args":[],"status":"ok","result":1})"},
             {kStart, R"({"event":"call","resource":"a","site":"main#0","args":{},"status":"ok"})"},
             {kStart, R"({"event":"call","resource":"a","site":"main#0","args":{},"status":"maybe"})"},
             {kStart, R"({"event":"dispatch","idempotency_key":7})"},
             {startWith("path", 3)},
             // Ids that name paths (issue #14, item 6).
             {startWith("idempotency_root", "../../outside")},
             {startWith("idempotency_root", "/tmp/elsewhere")},
             {startWith("run_id", "../x")},
             {startWith("resumed_from", "20260101-120000-A1B2C3")},
             {startWith("in_flight", Json::array({badInFlightRun}))},
             // Keys are recomputed (item 3).
             {kStart, otherKey.dump()},
             {kStart, otherK.dump()},
             {startWith("in_flight", Json::array({badInFlightKey}))},
             {kStart, R"({"event":"pending_approval","digest":"4f"})"}}) {
        std::string error;
        planFromTrace(traceOf(lines), "t.jsonl", ReplayPurpose::Resume, error);
        CHECK_MESSAGE(error.starts_with("t.jsonl:"), lines.back());
    }
}

TEST_CASE("trace reading: a last line cut short is a warning, a damaged record anywhere an error") {
    using namespace remit;
    auto path = tempPath("trace.jsonl");
    std::string text = writtenTrace(path, {kStart, okCall("main#0", 0), okCall("main#0", 1)});
    TraceFile t = readTrace(path.string());
    CHECK(t.error.empty());
    REQUIRE(t.events.size() == 3);
    CHECK_FALSE(t.events[1].contains("chain"));  // readers never see the checksum
    size_t lastStart = text.rfind('\n', text.size() - 2) + 1;
    // Cut at every byte of the last record: a warning, and the records before it intact.
    for (size_t cut = lastStart + 1; cut < text.size() - 1; ++cut) {
        writeFile(path, text.substr(0, cut));
        t = readTrace(path.string());
        CHECK(t.error.empty());
        CHECK(t.events.size() == 2);
        CHECK(t.warning.find(":3: the last line is cut short") != std::string::npos);
    }
    writeFile(path, text.substr(0, text.size() - 1));  // only the newline is missing: complete
    CHECK(readTrace(path.string()).events.size() == 3);
    // A flipped bit anywhere is refused with its line (the last line's newline included).
    for (size_t i = 0; i < text.size(); ++i) {
        std::string damaged = text;
        damaged[i] = static_cast<char>(damaged[i] ^ (1 << (i % 7)));
        writeFile(path, damaged);
        t = readTrace(path.string());
        size_t line = static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(i), '\n')) + 1;
        if (text[i] == '\n' && i + 1 < text.size()) {
            CHECK_MESSAGE(!t.error.empty(), i);  // two records run together
            continue;
        }
        CHECK_MESSAGE(t.error.find(":" + std::to_string(line) + ":") != std::string::npos, i, " ", t.error);
        CHECK(t.events.empty());
    }
    // A record removed: the next one no longer chains.
    size_t secondEnd = text.find('\n', text.find('\n') + 1);
    writeFile(path, text.substr(0, text.find('\n') + 1) + text.substr(secondEnd + 1));
    CHECK(readTrace(path.string()).error.find(":2: damaged record: its checksum does not match") != std::string::npos);
    // A trace from before chains: refused for resume and replay, shown by `trace`.
    writeFile(path, canonicalJson(Json::parse(kStart)) + "\n");
    CHECK(readTrace(path.string()).error.find(":1: the trace has no record checksums") != std::string::npos);
    t = readTrace(path.string(), TraceCheck::AllowUnchained);
    CHECK(t.error.empty());
    CHECK(t.events.size() == 1);
    CHECK(t.warning.find("unverified") != std::string::npos);
    std::filesystem::remove(path);
}

TEST_CASE("idempotency keys: the first 32 hex digits of SHA-256 of canonical [root, site, k]") {
    // idempotencyKey writes the canonical array itself; the oracle builds it as a Json tree.
    for (const char* root : {"20260101-000000-abcdef", "", "r\"o\\ot\n\u00e9"})
        for (const char* site : {"main#0", "f#12", "\xf0\x9f\x98\x80#3"})
            for (uint64_t k : {uint64_t(0), uint64_t(7), UINT64_MAX}) {
                CAPTURE(root);
                CAPTURE(site);
                CHECK(idempotencyKey(root, site, k) ==
                      sha256Hex(canonicalJson(Json::array({root, site, k}))).substr(0, 32));
            }
    // And on generated ids: any bytes (quotes, controls, non-ASCII, bytes that are not UTF-8), any k.
    std::mt19937_64 rng(14);
    auto randomText = [&] {
        std::string text(rng() % 24, ' ');
        for (char& c : text) c = static_cast<char>(rng() % 4 ? 0x20 + rng() % 0x60 : rng() % 256);
        return text;
    };
    for (int round = 0; round < 2000; ++round) {
        std::string root = randomText(), site = randomText();
        uint64_t k = round % 2 ? rng() : rng() % 1000;
        CAPTURE(round);
        CHECK(idempotencyKey(root, site, k) == sha256Hex(canonicalJson(Json::array({root, site, k}))).substr(0, 32));
    }
}

TEST_CASE("trace records: a record written from a Json tree is its canonical JSON plus its chain") {
    // TraceWriter::emit serialises each record once and inserts `chain` into that text; the file
    // must read back exactly as one canonicalJson per line with the chain over the record without it.
    std::filesystem::path path = std::filesystem::temp_directory_path() / ("remit-chain-" + std::to_string(::getpid()) + ".jsonl");
    std::vector<Json> events = {
        Json{{"event", "run_start"}, {"z", 1}, {"a", Json::array({1.5, "x"})}},
        Json{{"event", "call"}, {"chain", "stale"}, {"args", {{"b", 2}, {"a", "\u00e9"}}}, {"cost_usd", 0.0}},
        Json{{"event", "run_end"}},
    };
    {
        TraceWriter writer;
        std::string error;
        REQUIRE(writer.open(path.string(), error));
        for (const Json& e : events) REQUIRE(writer.emit(e));
    }
    std::ifstream in(path);
    std::string line, chain;
    for (const Json& e : events) {
        REQUIRE(std::getline(in, line));
        Json without = e;
        without.erase("chain");
        chain = traceChain(chain, canonicalJson(without));
        Json with = without;
        with["chain"] = chain;
        CHECK(line == canonicalJson(with));
    }
    TraceFile read = readTrace(path.string());
    CHECK(read.error.empty());
    CHECK(read.events.size() == events.size());
    std::filesystem::remove(path);
}

TEST_CASE("trace records: a write-ahead record waits for the next record only in a trace without fsync") {
    // A fixture run's trace (setSynced(false)) hands the `dispatch` record to the OS with the
    // `call` record after it, in one writev; a synced trace writes it at once. Either way the file
    // reads back as the same canonical, chained records, and a held record is not lost when the
    // writer is closed without another record (a run stopped after its dispatch).
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("remit-ahead-" + std::to_string(::getpid()) + ".jsonl");
    auto fileSize = [&] { return std::filesystem::file_size(path); };
    CanonicalObject dispatch;
    dispatch.add("event", "dispatch").add("k", 0).add("site", "main#1");
    CanonicalObject call;
    call.add("event", "call").add("result", Json::array({"\u00e9", 2.5})).add("seq", 1);
    std::vector<std::string> written;
    for (bool synced : {true, false}) {
        CAPTURE(synced);
        {
            TraceWriter writer;
            writer.setSynced(synced);
            std::string error;
            REQUIRE(writer.open(path.string(), error));
            REQUIRE(writer.emit(Json{{"event", "run_start"}}));
            auto before = fileSize();
            REQUIRE(writer.emitWriteAhead(dispatch));
            CHECK((fileSize() > before) == synced);
            REQUIRE(writer.emit(call));
            REQUIRE(writer.emitWriteAhead(dispatch));  // held at the end: the destructor writes it
        }
        std::ifstream in(path);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        written.push_back(text);
        TraceFile read = readTrace(path.string());
        CHECK(read.error.empty());
        REQUIRE(read.events.size() == 4);
        CHECK(read.events[1]["event"] == "dispatch");
        CHECK(read.events[2]["result"] == nlohmann::json::array({"\u00e9", 2.5}));
        CHECK(read.events[3]["event"] == "dispatch");
    }
    CHECK(written[0] == written[1]);  // the same bytes, whenever they were written
    std::filesystem::remove(path);
}

TEST_CASE("ids read from files are checked against their formats") {
    using namespace remit;
    CHECK(isRunId("20260101-120000-a1b2c3"));
    for (const char* bad : {"", "20260101-120000-a1b2c", "20260101-120000-A1B2C3", "../20260101-120000-a1b2c",
                            "2026010a-120000-a1b2c3", "20260101_120000-a1b2c3", "/tmp/x"})
        CHECK_FALSE(isRunId(bad));
    CHECK(isLowerHex(std::string(64, 'a'), 64));
    CHECK_FALSE(isLowerHex("4f", 64));
    CHECK_FALSE(isLowerHex(std::string(64, 'A'), 64));
}

namespace {

// An adapter with effects that de-duplicates by idempotency key, as docs/adapters.md recommends:
// a key it has seen gets the reply it got the first time (failures included). The first attempt
// for "u0" fails.
struct DedupAdapter final : remit::Adapter {
    std::map<std::string, remit::AdapterReply> replies;
    std::vector<std::string> keys;  // every request's key, in order
    std::set<std::string> tried;    // ids attempted (a real service remembers across runs)
    size_t performed = 0;
    remit::AdapterReply perform(const remit::AdapterRequest& r) override {
        keys.push_back(r.idempotencyKey);
        if (auto it = replies.find(r.idempotencyKey); it != replies.end()) return it->second;
        ++performed;
        std::string id = r.args.value("id", "");
        bool fail = id == "u0" && tried.insert(id).second;
        remit::AdapterReply reply = fail ? remit::AdapterReply::failure("CapabilityFailed", "flaky")
                                         : remit::AdapterReply::success(Json("page " + id));
        replies[r.idempotencyKey] = reply;
        return reply;
    }
    const char* kind() const override { return "process"; }
};

const char* kPages =
    "program p\nuses crm.lookup\nfn main(ticket: Str) -> Str {\n"
    "  let pages = for u in [\"u0\", \"u1\"] {\n    crm.lookup(u) retry 1 else \"none\"\n  }\n"
    "  return join(pages, \",\")\n}\n";

std::vector<std::string> dispatchedKeys(const std::vector<nlohmann::json>& events) {
    std::vector<std::string> out;
    for (const auto& e : events)
        if (e["event"] == "dispatch") out.push_back(e["idempotency_key"].get<std::string>());
    return out;
}

// The trace of `events` up to and including the `n`-th dispatch, as a killed run leaves it.
remit::TraceFile killedAfterDispatch(const Outcome& out, size_t n) {
    remit::TraceFile t;
    size_t seen = 0;
    for (size_t i = 0; i < out.events.size() && seen < n; ++i) {
        t.events.push_back(out.events[i]);
        t.lines.push_back(out.lines[i]);
        if (out.events[i]["event"] == "dispatch") ++seen;
    }
    return t;
}

}  // namespace

TEST_CASE("resume: a retry in flight keeps its key, and the next call gets its own (issue #14, item 1)") {
    using namespace remit;
    auto program = compile(kPages);
    HostModel host = hostFrom(kLaxHost);
    DedupAdapter reference;
    Outcome uninterrupted = runWith(program, host, Policy::allowAllPolicy(), reference);
    REQUIRE(uninterrupted.status == RunStatus::Completed);
    std::vector<std::string> keys = dispatchedKeys(uninterrupted.events);
    REQUIRE(keys.size() == 3);  // u0 fails, u0 again, u1

    // Killed after the retry of u0 was dispatched and performed, before its reply was recorded.
    DedupAdapter adapter;
    Outcome killedRun = runWith(program, host, Policy::allowAllPolicy(), adapter);
    TraceFile killed = killedAfterDispatch(killedRun, 2);
    std::string error;
    ReplayPlan plan = planFromTrace(killed, "t.jsonl", ReplayPurpose::Resume, error);
    INFO(error);
    REQUIRE(plan.inFlight.size() == 1);
    adapter.keys.clear();
    Outcome resumed = runWith(program, host, Policy::allowAllPolicy(), adapter, "t", RunConfig{&plan});
    REQUIRE(resumed.status == RunStatus::Completed);
    CHECK(adapter.performed == 3);  // each effect once, across both runs
    CHECK(dispatchedKeys(resumed.events) == std::vector<std::string>{keys[1], keys[2]});
    bool sawResult = false;
    for (const auto& e : resumed.events)
        if (e["event"] == "call" && e["k"] == 1) {
            CHECK(e["in_flight_retry"]["run_id"] == "20260101-000000-abcdef");
            CHECK(e["result"] == "page u0");
        } else if (e["event"] == "call" && e["site"] == "main#0" && e["args"]["id"] == "u1") {
            CHECK(e["result"] == "page u1");
            sawResult = true;
        }
    CHECK(sawResult);
}

TEST_CASE("resume: fixtures answer the next call as in the uninterrupted run") {
    using namespace remit;
    auto program = compile(kPages);
    HostModel host = hostFrom(kLaxHost);
    const char* doc = R"({"capabilities": {"crm.lookup": [{"args": {"id": "u0"}, "error": "flaky"},
                                                          {"args": {"id": "u0"}, "output": "page u0"},
                                                          {"args": {"id": "u1"}, "output": "page u1"}]}})";
    auto first = fixtures(doc);
    Outcome run = runWith(program, host, Policy::allowAllPolicy(), *first);
    REQUIRE(run.status == RunStatus::Completed);
    // Killed after the failed first attempt was recorded: the resume replays it, and its retry
    // gets the entry after it, not the failure again.
    TraceFile killed = killedAfterDispatch(run, 1);
    killed.events.push_back(run.events[killed.events.size()]);  // the failed call event
    killed.lines.push_back(killed.lines.size() + 1);
    std::string error;
    ReplayPlan plan = planFromTrace(killed, "t.jsonl", ReplayPurpose::Resume, error);
    REQUIRE(plan.calls.size() == 1);
    auto fresh = fixtures(doc);
    Outcome resumed = runWith(program, host, Policy::allowAllPolicy(), *fresh, "t", RunConfig{&plan});
    REQUIRE(resumed.status == RunStatus::Completed);
    CHECK(dispatchedKeys(resumed.events) ==
          std::vector<std::string>{dispatchedKeys(run.events)[1], dispatchedKeys(run.events)[2]});
}

TEST_CASE("broker: nothing is dispatched once the trace cannot be written (issue #14, item 2)") {
    using namespace remit;
    auto program = compile(kPages);
    HostModel host = hostFrom(kLaxHost);
    for (size_t failAt = 1; failAt <= 7; ++failAt) {
        CAPTURE(failAt);
        DedupAdapter adapter;
        Outcome out = runWith(program, host, Policy::allowAllPolicy(), adapter, "t", RunConfig{nullptr, kRoot, failAt});
        REQUIRE(out.status == RunStatus::Failed);
        CHECK(out.error->code == DiagCode::R0702);
        CHECK(out.ioError.find("cannot write the trace (No space left on device)") != std::string::npos);
        // Every dispatch that went out has its record on disk.
        CHECK(adapter.keys == dispatchedKeys(out.events));
    }
}

TEST_CASE("approval store: a denial fails one attempt, overrides an unused approval, and is then used up") {
    using namespace remit;
    auto dir = tempPath("denials");
    std::filesystem::create_directories(dir);
    ApprovalStore s((dir / "approvals.json").string());
    std::string error;
    REQUIRE(s.load(error));
    nlohmann::json request = {{"resource", "pay"}, {"site", "main#0"}};
    std::string digest(64, 'c');
    CHECK_FALSE(s.deny(digest, "ann", "no", error));  // nothing pending yet
    CHECK(error.empty());
    CHECK_FALSE(s.decide(digest, request, kRoot, "key1", error));
    const nlohmann::json& pending = s.contents()["pending"][digest];
    CHECK(pending["run_id"] == kRoot);
    double firstAsked = pending["requested_at"].get<double>();
    // Asked again: the first time stays.
    CHECK_FALSE(s.decide(digest, request, "20260101-120001-a1b2c3", "key1", error));
    CHECK(s.contents()["pending"][digest]["requested_at"].get<double>() == firstAsked);
    CHECK(s.contents()["pending"][digest]["run_id"] == "20260101-120001-a1b2c3");
    // Approved, then denied before the run used it: the denial wins.
    REQUIRE(s.approve(digest, "bob", error));
    REQUIRE(s.deny(digest, "ann", "wrong account", error));
    CHECK(s.contents()["approved"].empty());
    CHECK(s.contents()["pending"].empty());
    Denial denial;
    CHECK_FALSE(s.decide(digest, request, kRoot, "key1", error, &denial));
    CHECK(error.empty());
    CHECK(denial.by == "ann");
    CHECK(denial.reason == "wrong account");
    CHECK(s.contents()["refused"][digest]["idempotency_key"] == "key1");
    CHECK(s.contents()["denied"].empty());
    // Used up: the same call asked again is pending again, not refused.
    Denial none;
    CHECK_FALSE(s.decide(digest, request, kRoot, "key2", error, &none));
    CHECK(none.by.empty());
    CHECK(s.contents()["pending"].contains(digest));
    // A store written by the prototype (three sections) loads with the others empty.
    writeFile((dir / "approvals.json").string(), R"({"approved": {}, "consumed": {}, "pending": {}})");
    REQUIRE(s.load(error));
    CHECK(s.contents()["denied"].empty());
    CHECK(s.contents()["refused"].empty());
}

TEST_CASE("broker: a person's answer goes through the store, and a denial recorded meanwhile wins") {
    using namespace remit;
    constexpr const char* kAskHost =
        "capability mail.send(to: Str, body: Str approve untrusted) -> Str\ninput ticket tags untrusted\n";
    auto program = compile(
        "program p\nuses mail.send\n\nfn main(ticket: Str) -> Str {\n  return mail.send(to: \"a\", body: ticket)\n}\n",
        kAskHost);
    HostModel host = hostFrom(kAskHost);
    Policy policy = Policy::allowAllPolicy();
    enum Scenario { Denied, DeniedInStoreThenApproved, Approved };
    for (Scenario scenario : {Denied, DeniedInStoreThenApproved, Approved}) {
        CAPTURE(int(scenario));
        auto dir = tempPath("answers-" + std::to_string(int(scenario)));
        std::filesystem::create_directories(dir);
        struct Cleanup {
            std::filesystem::path dir;
            ~Cleanup() {
                std::error_code ec;
                std::filesystem::remove_all(dir, ec);
            }
        } cleanup{dir};
        std::string path = (dir / "approvals.json").string(), error;
        ApprovalStore store(path);
        REQUIRE(store.load(error));
        Run run(program, {});
        std::vector<Value> args{*run.heap().makeStr("refund me", *run.heap().internTags({"untrusted"}))};
        TraceWriter trace;
        REQUIRE(trace.open((dir / "trace.jsonl").string(), error));
        BrokerOptions options;
        options.runId = kRoot;
        options.idempotencyRoot = kRoot;
        options.programHash = program->module().programHash;
        options.host = &host;
        options.policy = &policy;
        options.approvals = &store;
        options.trace = &trace;
        Broker broker(options, run);
        auto adapter = fixtures(R"({"capabilities": {"mail.send": [{"output": "m-1"}]}})");
        run.start(program->entry(), std::move(args));
        std::optional<PendingApproval> waiting;
        REQUIRE(driveWith(run, broker, adapter.get(), {}, &waiting) == RunStatus::HostCall);
        REQUIRE(waiting);
        const std::string digest = waiting->digest;
        RunStatus status;
        if (scenario == Denied) {
            status = carryOut(broker, adapter.get(), broker.denied("user via MCP elicitation", "no thanks"));
        } else {
            if (scenario == DeniedInStoreThenApproved) {
                ApprovalStore operatorView(path);  // `remitvm approvals deny` from another process
                REQUIRE(operatorView.deny(digest, "ops", "stop", error));
            }
            status = carryOut(broker, adapter.get(), broker.approved("user via MCP elicitation"));
        }
        REQUIRE(store.load(error));
        const nlohmann::json& kept = store.contents();
        TraceFile recorded = readTrace((dir / "trace.jsonl").string());
        REQUIRE(recorded.error.empty());
        auto event = [&](const char* kind) {
            for (const nlohmann::json& e : recorded.events)
                if (e["event"] == kind) return e;
            return nlohmann::json();
        };
        if (scenario == Approved) {
            CHECK(status == RunStatus::Completed);
            CHECK(kept["consumed"][digest]["by"] == "user via MCP elicitation");
            CHECK(kept["pending"].empty());
            // In the trace as any approval: granted by the person, then the call bound to it.
            CHECK(event("approval_granted")["approved_by"] == "user via MCP elicitation");
            CHECK(event("call")["approval"]["approved_by"] == "user via MCP elicitation");
            continue;
        }
        CHECK(event("approval_denied")["denied_by"] == (scenario == Denied ? "user via MCP elicitation" : "ops"));
        CHECK(event("approval_granted").is_null());
        REQUIRE(status == RunStatus::Failed);
        CHECK(run.failure().error.code == DiagCode::R0302);
        std::string expected = scenario == Denied
                                   ? "'mail.send' was denied by user via MCP elicitation: no thanks; the call was not made"
                                   : "'mail.send' was denied by ops: stop; the call was not made";
        CHECK(run.failure().error.message == expected);
        CHECK(kept["refused"][digest]["by"] == (scenario == Denied ? "user via MCP elicitation" : "ops"));
        CHECK(kept["pending"].empty());
        CHECK(kept["consumed"].empty());
        CHECK(broker.calls() == 0);  // nothing was sent
    }
}

TEST_CASE("approval store: hand-edited fields of the wrong type are read as missing, never thrown") {
    // tests/fuzz/regressions/approvals-*: stores, some the loader accepts (objects of objects) whose
    // entries hold `by` or `idempotency_key` of another type — deciding their consumed approval used
    // to throw nlohmann's type_error — and some it must refuse without throwing (a number no double
    // can hold threw out_of_range). Both found by tests/fuzz/fuzz_approvals.cpp.
    using namespace remit;
    const std::filesystem::path regressions =
        std::filesystem::path(REMIT_SOURCE_DIR) / "tests" / "fuzz" / "regressions";
    auto dir = tempPath("odd-store");
    std::filesystem::create_directories(dir);
    const std::string store = (dir / "approvals.json").string();
    size_t replayed = 0;
    for (const auto& entry : std::filesystem::directory_iterator(regressions)) {
        if (entry.path().filename().string().rfind("approvals-", 0) != 0) continue;
        CAPTURE(entry.path().string());
        const std::string text = readFile(entry.path());
        writeFile(store, text);
        ApprovalStore s(store);
        std::string error;
        if (!s.load(error)) {  // a store that is not one is an error with a reason, never a throw
            CHECK_FALSE(error.empty());
            ++replayed;
            continue;
        }
        nlohmann::json doc = nlohmann::json::parse(text);
        for (const char* section : {"approved", "consumed"}) {
            if (!doc.contains(section)) continue;
            for (auto it = doc[section].begin(); it != doc[section].end(); ++it) {
                auto key = it->find("idempotency_key");
                std::string attempt = key != it->end() && key->is_string() ? key->get<std::string>() : "another";
                std::optional<std::string> by = s.decide(it.key(), {{"resource", "pay"}}, kRoot, attempt, error);
                CHECK(error.empty());
                // A `by` that is not a string (or none) reads as "unknown", as it does for a granted
                // approval; an approved entry is granted whatever it names.
                auto named = it->find("by");
                if (std::string_view(section) == "approved") CHECK(by.has_value());
                if (by)
                    CHECK(*by == (named != it->end() && named->is_string() ? named->get<std::string>() : "unknown"));
            }
        }
        ++replayed;
    }
    CHECK(replayed >= 1);

    // The case itself: a consumed approval with `"by": ["x"]`, decided again by its own attempt.
    writeFile(store, R"({"consumed": {"d": {"by": ["x"], "idempotency_key": "k"}}})");
    ApprovalStore s(store);
    std::string error;
    REQUIRE(s.load(error));
    CHECK(s.decide("d", {{"resource", "pay"}}, kRoot, "k", error) == std::optional<std::string>("unknown"));
    // An approved entry that names nobody is one approval, by "unknown" (found by the fuzzer after
    // quorums came: it was read as no approval at all, dropped, and the call asked for again).
    writeFile(store, R"({"approved": {"d": {"hy": ["x"]}}})");
    ApprovalStore u(store);
    REQUIRE(u.load(error));
    CHECK(u.decide("d", {{"resource", "pay"}}, kRoot, "k", error) == std::optional<std::string>("unknown"));
    CHECK(u.decide("d", {{"resource", "pay"}}, kRoot, "other", error) == std::nullopt);  // used up
    // An idempotency key that is not a string matches no attempt.
    writeFile(store, R"({"consumed": {"d": {"by": "ann", "idempotency_key": 5}}})");
    ApprovalStore t(store);
    REQUIRE(t.load(error));
    CHECK_FALSE(t.decide("d", {{"resource", "pay"}}, kRoot, "5", error));
    CHECK(error.empty());
    std::filesystem::remove_all(dir);
}

TEST_CASE("approval store: one use per attempt, unreadable stores and locks change nothing (items 7, 8)") {
    using namespace remit;
    auto dir = tempPath("state");
    std::filesystem::create_directories(dir);
    std::string store = (dir / "approvals.json").string();
    ApprovalStore s(store);
    std::string error;
    REQUIRE(s.load(error));
    nlohmann::json request = {{"resource", "pay"}};
    std::string digest(64, 'a');
    CHECK_FALSE(s.decide(digest, request, kRoot, "key1", error));
    CHECK(error.empty());
    REQUIRE(s.approve(digest, "ann", error));
    CHECK(s.decide(digest, request, kRoot, "key1", error) == std::optional<std::string>("ann"));
    // The same attempt again (its run stopped before recording the call): still its one use.
    CHECK(s.decide(digest, request, "20260101-120001-a1b2c3", "key1", error) == std::optional<std::string>("ann"));
    // Another attempt with the same arguments needs an approval of its own.
    CHECK_FALSE(s.decide(digest, request, kRoot, "key2", error));
    CHECK(error.empty());
    std::string saved = readFile(store);
    CHECK_FALSE(std::filesystem::exists(store + ".tmp"));
    // A leftover of a killed writer (of an earlier version) is cleaned up by the next save.
    writeFile(store + ".tmp12345", "{");
    REQUIRE(s.approve(digest, "bob", error));
    CHECK_FALSE(std::filesystem::exists(store + ".tmp12345"));
    saved = readFile(store);

    // A lock that cannot be opened: no lock, no write.
    std::filesystem::rename(store + ".lock", store + ".lock.moved");
    std::filesystem::create_directory(store + ".lock");
    writeFile(store + ".lock/x", "");  // a directory cannot be opened for locking... as a file
    error.clear();
    CHECK_FALSE(s.decide(std::string(64, 'b'), request, kRoot, "key3", error));
    CHECK(error.find("cannot lock the approval store") != std::string::npos);
    error.clear();
    CHECK_FALSE(s.approve(digest, "eve", error));
    CHECK(error.find("cannot lock the approval store") != std::string::npos);
    CHECK(readFile(store) == saved);
    std::filesystem::remove_all(store + ".lock");
    std::filesystem::rename(store + ".lock.moved", store + ".lock");

    // A store that cannot be read (here: a directory where the file should be) is not empty.
    std::filesystem::rename(store, store + ".saved");
    std::filesystem::create_directory(store);
    ApprovalStore unreadable(store);
    error.clear();
    CHECK_FALSE(unreadable.load(error));
    CHECK(error.find("cannot read the approval store") != std::string::npos);
    error.clear();
    CHECK_FALSE(unreadable.decide(digest, request, kRoot, "key4", error));
    CHECK_FALSE(error.empty());
    CHECK(std::filesystem::is_directory(store));  // nothing was written over it
    std::filesystem::remove_all(dir);
}

namespace {

// An adapter whose process cannot be started: every request reaches nobody.
struct UnstartableAdapter final : remit::Adapter {
    size_t asked = 0;
    remit::AdapterReply perform(const remit::AdapterRequest&) override {
        ++asked;
        remit::AdapterReply r = remit::AdapterReply::failure(
            "CapabilityFailed", "cannot start adapter process [./ad.py]: No such file or directory");
        r.delivered = false;
        return r;
    }
    const char* kind() const override { return "process"; }
};

constexpr const char* kApprovalHost =
    "capability mail.send(to: Str, body: Str approve untrusted) -> Str\n"
    "input ticket tags untrusted\n";
constexpr const char* kMailer =
    "program m\nuses mail.send\nfn main(ticket: Str) -> Str {\n  return mail.send(to: \"ops\", body: ticket)\n}\n";

remit::TraceFile traceFrom(const Outcome& out) {
    remit::TraceFile t;
    t.events = out.events;
    t.lines = out.lines;
    return t;
}

}  // namespace

TEST_CASE("approval store: an approval whose dispatch reached nobody goes back, for the attempt that reaches it") {
    using namespace remit;
    auto dir = tempPath("restore");
    std::filesystem::create_directories(dir);
    ApprovalStore s((dir / "approvals.json").string());
    std::string error;
    REQUIRE(s.load(error));
    nlohmann::json request = {{"resource", "pay"}, {"site", "main#0"}};
    std::string digest(64, 'd');
    CHECK_FALSE(s.decide(digest, request, kRoot, "key1", error));
    REQUIRE(s.approve(digest, "ann", error));
    double approvedAt = s.contents()["approved"][digest]["at"].get<double>();
    REQUIRE(s.decide(digest, request, kRoot, "key1", error) == std::optional<std::string>("ann"));
    CHECK(s.contents()["pending"].empty());
    // Only the attempt that consumed it gives it back.
    CHECK_FALSE(s.restore(digest, "key2", request, error));
    CHECK(error.empty());
    CHECK_FALSE(s.restore(std::string(64, 'e'), "key1", request, error));
    REQUIRE(s.restore(digest, "key1", request, error));
    const nlohmann::json& back = s.contents()["approved"][digest];
    CHECK(back["by"] == "ann");
    CHECK(back["at"].get<double>() == approvedAt);
    CHECK(s.contents()["pending"][digest]["run_id"] == kRoot);  // the request as it was approved
    CHECK(s.contents()["consumed"].empty());
    // Given back once: a second restore of the same attempt changes nothing.
    CHECK_FALSE(s.restore(digest, "key1", request, error));
    // Any attempt may now use it, once (it reached nobody, so it was never used).
    CHECK(s.decide(digest, request, "20260101-120001-a1b2c3", "key3", error) == std::optional<std::string>("ann"));
    CHECK_FALSE(s.decide(digest, request, kRoot, "key4", error));
    // An approval denied after it was consumed is given back as approved but not pending: the
    // denial stays the last word.
    REQUIRE(s.approve(digest, "ann", error));
    REQUIRE(s.decide(digest, request, kRoot, "key4", error));
    REQUIRE(s.restore(digest, "key4", request, error));
    REQUIRE(s.deny(digest, "bob", "no", error));
    REQUIRE(s.approve(digest, "ann", error) == false);  // no longer pending
    std::filesystem::remove_all(dir);
}

TEST_CASE("broker: a dispatch that reaches nobody records no call, gives its approval back and stops resumable") {
    using namespace remit;
    auto program = compile(kMailer, kApprovalHost);
    HostModel host = hostFrom(kApprovalHost);
    Policy policy = Policy::allowAllPolicy();
    auto dir = tempPath("undelivered");
    std::filesystem::create_directories(dir);
    ApprovalStore store((dir / "approvals.json").string());
    std::string error;
    REQUIRE(store.load(error));
    DedupAdapter effects;

    // 1. The call waits for approval; the operator approves it once.
    RunConfig first;
    first.approvals = &store;
    Outcome paused = runWith(program, host, policy, effects, "refund A-1", first);
    REQUIRE(paused.status == RunStatus::Failed);
    CHECK(paused.error->code == DiagCode::R0302);
    std::vector<std::string> digests = store.pendingMatching("");
    REQUIRE(digests.size() == 1);
    REQUIRE(store.approve(digests[0], "ann", error));

    // 2. Resumed with an adapter that cannot start: the approval is consumed for the dispatch,
    // then given back; no call is recorded and the run stops (R0702), resumable.
    std::string why;
    ReplayPlan plan = planFromTrace(traceFrom(paused), "t.jsonl", ReplayPurpose::Resume, why);
    REQUIRE(why.empty());
    UnstartableAdapter broken;
    RunConfig resume{&plan};
    resume.approvals = &store;
    Outcome stopped = runWith(program, host, policy, broken, "refund A-1", resume);
    REQUIRE(stopped.status == RunStatus::Failed);
    CHECK(stopped.error->code == DiagCode::R0702);
    CHECK(stopped.error->message.find("did not reach the adapter") != std::string::npos);
    CHECK(stopped.ioError.empty());
    REQUIRE(stopped.notDelivered);
    CHECK(stopped.notDelivered->approvedBy == "ann");
    CHECK(broken.asked == 1);
    CHECK(count(stopped.events, "call") == 0);
    CHECK(count(stopped.events, "dispatch") == 1);
    REQUIRE(count(stopped.events, "not_delivered") == 1);
    for (const auto& e : stopped.events)
        if (e["event"] == "not_delivered") {
            CHECK(e["approval"]["kept"] == true);
            CHECK(e["approval"]["approved_by"] == "ann");
            CHECK(e["error"].get<std::string>().find("cannot start adapter process") != std::string::npos);
        }
    REQUIRE(store.load(error));
    CHECK(store.contents()["approved"].contains(digests[0]));
    CHECK(store.contents()["pending"].contains(digests[0]));
    CHECK(store.contents()["consumed"].empty());

    // 3. The plan of the stopped run: nothing in flight (the dispatch reached nobody).
    ReplayPlan again = planFromTrace(traceFrom(stopped), "t2.jsonl", ReplayPurpose::Resume, why);
    REQUIRE(why.empty());
    CHECK(again.inFlight.empty());
    CHECK(again.calls.empty());

    // 4. Resumed with a working adapter: the same attempt (same key) under the same approval; the
    // effect happens once and the approval is used.
    RunConfig fixed{&again};
    fixed.approvals = &store;
    Outcome done = runWith(program, host, policy, effects, "refund A-1", fixed);
    REQUIRE(done.status == RunStatus::Completed);
    CHECK(effects.performed == 1);
    CHECK(dispatchedKeys(done.events) == dispatchedKeys(stopped.events));
    REQUIRE(store.load(error));
    CHECK(store.contents()["consumed"].contains(digests[0]));
    CHECK(store.contents()["pending"].empty());
    std::filesystem::remove_all(dir);
}
