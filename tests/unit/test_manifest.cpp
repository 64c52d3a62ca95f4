// Unit tests for the manifest (compiler/manifest.h) on hand-built Manifest values: the JSON's key
// order and number formats (the prototype's, plus our additions: docs/manifest.md), the round trip
// through manifestFromJson and its refusal of malformed documents, the `remitc check` summary text,
// the policy codes E0501–E0503 with their exact messages, and each kind of widening and narrowing
// that diffManifests reports.
#include <doctest/doctest.h>

#include <string>

#include "compiler/manifest.h"
#include "runtime/policy.h"

using namespace remit;

namespace {

ResourceUse capability(std::string name, uint64_t calls, double cost, bool idempotent,
                       std::vector<std::string> outputTags, std::vector<std::string> clears) {
    ResourceUse r;
    r.name = std::move(name);
    r.maxCalls = calls;
    r.costPerCall = cost;
    r.worstCaseCost = static_cast<double>(calls) * cost;
    r.idempotent = idempotent;
    r.outputTags = std::move(outputTags);
    r.clears = std::move(clears);
    return r;
}

ResourceUse model(std::string name, uint64_t calls, double cost, double worstCase) {
    ResourceUse r;
    r.name = std::move(name);
    r.isModel = true;
    r.maxCalls = calls;
    r.costPerCall = cost;
    r.worstCaseCost = worstCase;
    return r;
}

CallSiteInfo site(std::string id, uint32_t line, uint32_t col, std::string resource) {
    CallSiteInfo s;
    s.site = std::move(id);
    s.line = line;
    s.col = col;
    s.resource = std::move(resource);
    return s;
}

// A support-triage program: a CRM lookup, an email whose body may carry untrusted text (approval
// possible), two agents on one model (declared out of name order) and a direct model call, and an
// unused `uses` entry.
Manifest sampleManifest() {
    Manifest m;
    m.program = "support_triage";
    m.programHash = "ab12";
    m.hostHash = "cd34";
    m.uses = {"crm.find", "email.send", "llm", "web.fetch"};
    m.resources = {
        capability("crm.find", 1, 0.0, true, {"pii"}, {}),
        capability("email.send", 1, 0.0, false, {}, {"untrusted"}),
        model("llm", 4, 0.01, 0.04),
        capability("web.fetch", 0, 0.0, true, {"untrusted"}, {}),
    };
    m.agents = {AgentUse{"Writer", "llm", std::nullopt, 1}, AgentUse{"Alpha", "llm", 3, 3}};
    m.worstCaseCostUsd = 0.04;
    m.budgetUsd = 0.08;

    CallSiteInfo lookup = site("main#0", 4, 11, "crm.find");
    lookup.maxCalls = 1;
    CallSiteInfo ask = site("main#1", 5, 14, "llm");
    ask.maxCalls = 2;
    ask.agent = "Writer";
    ask.retry = 1;
    ask.timeoutSeconds = 30.0;
    ask.fallback = true;
    CallSiteInfo send = site("main#2", 6, 3, "email.send");
    send.approval = Approval::Possible;
    send.reasons = {"'body' may be untrusted (data: input 'ticket')",
                    "'to' may be pii (control flow: crm.find (line 4))"};
    send.timeoutSeconds = 2.5;
    send.maxCalls = 1;
    CallSiteInfo direct = site("helper#0", 9, 5, "llm");
    direct.maxCalls = 2;
    m.callSites = {lookup, ask, send, direct};

    Flow body;
    body.sink = "email.send.body";
    body.tags = {"pii", "untrusted"};
    body.verdict = "requires approval";
    body.sites = {FlowSite{"main#2", "control"}, FlowSite{"main#2", "data"}};
    m.flows = {body};
    m.inputs = {{"ticket", {"untrusted"}}, {"note", {"untrusted", "pii"}}};
    return m;
}

// Python's json.dumps(manifest, indent=2, ensure_ascii=False) of the same manifest in the prototype's
// shape, with our additions (docs/manifest.md "Differences from the prototype").
constexpr std::string_view kSampleJson = R"json({
  "program": "support_triage",
  "program_hash": "ab12",
  "host_hash": "cd34",
  "uses": [
    "crm.find",
    "email.send",
    "llm",
    "web.fetch"
  ],
  "resources": {
    "crm.find": {
      "kind": "capability",
      "max_calls": 1,
      "cost_per_call": 0.0,
      "worst_case_cost": 0.0,
      "idempotent": true,
      "approval_always": false,
      "output_tags": [
        "pii"
      ],
      "clears": []
    },
    "email.send": {
      "kind": "capability",
      "max_calls": 1,
      "cost_per_call": 0.0,
      "worst_case_cost": 0.0,
      "idempotent": false,
      "approval_always": false,
      "output_tags": [],
      "clears": [
        "untrusted"
      ]
    },
    "llm": {
      "kind": "model",
      "max_calls": 4,
      "cost_per_call": 0.01,
      "worst_case_cost": 0.04
    },
    "web.fetch": {
      "kind": "capability",
      "max_calls": 0,
      "cost_per_call": 0.0,
      "worst_case_cost": 0.0,
      "idempotent": true,
      "approval_always": false,
      "output_tags": [
        "untrusted"
      ],
      "clears": []
    }
  },
  "agents": {
    "Writer": {
      "model": "llm",
      "max_calls_declared": null,
      "max_calls_worst_case": 1
    },
    "Alpha": {
      "model": "llm",
      "max_calls_declared": 3,
      "max_calls_worst_case": 3
    }
  },
  "worst_case_cost_usd": 0.04,
  "budget_usd": 0.08,
  "call_sites": [
    {
      "site": "main#0",
      "line": 4,
      "col": 11,
      "resource": "crm.find",
      "approval": "none",
      "reasons": [],
      "retry": 0,
      "timeout_s": null,
      "fallback": false,
      "max_calls": 1
    },
    {
      "site": "main#1",
      "line": 5,
      "col": 14,
      "resource": "llm",
      "agent": "Writer",
      "approval": "none",
      "reasons": [],
      "retry": 1,
      "timeout_s": 30.0,
      "fallback": true,
      "max_calls": 2
    },
    {
      "site": "main#2",
      "line": 6,
      "col": 3,
      "resource": "email.send",
      "approval": "possible",
      "reasons": [
        "'body' may be untrusted (data: input 'ticket')",
        "'to' may be pii (control flow: crm.find (line 4))"
      ],
      "retry": 0,
      "timeout_s": 2.5,
      "fallback": false,
      "max_calls": 1
    },
    {
      "site": "helper#0",
      "line": 9,
      "col": 5,
      "resource": "llm",
      "agent": null,
      "approval": "none",
      "reasons": [],
      "retry": 0,
      "timeout_s": null,
      "fallback": false,
      "max_calls": 2
    }
  ],
  "approval_sites": [
    {
      "site": "main#2",
      "line": 6,
      "col": 3,
      "resource": "email.send",
      "approval": "possible",
      "reasons": [
        "'body' may be untrusted (data: input 'ticket')",
        "'to' may be pii (control flow: crm.find (line 4))"
      ],
      "retry": 0,
      "timeout_s": 2.5,
      "fallback": false,
      "max_calls": 1
    }
  ],
  "flows": [
    {
      "sink": "email.send.body",
      "tags": [
        "pii",
        "untrusted"
      ],
      "verdict": "requires approval",
      "sites": [
        {
          "site": "main#2",
          "via": "control"
        },
        {
          "site": "main#2",
          "via": "data"
        }
      ]
    }
  ],
  "inputs": {
    "ticket": [
      "untrusted"
    ],
    "note": [
      "untrusted",
      "pii"
    ]
  },
  "ambient_effects": "none: time, randomness, network and files are reachable only through declared capabilities"
})json";

constexpr std::string_view kSampleSummary =
    "program support_triage: worst-case cost $0.0400 (budget $0.0800)\n"
    "  crm.find               ≤   1 call(s)   ≤ $0.0000\n"
    "  email.send             ≤   1 call(s)   ≤ $0.0000\n"
    "  llm                    ≤   4 call(s)   ≤ $0.0400\n"
    "  web.fetch              ≤   0 call(s)   ≤ $0.0000\n"
    "  agent Writer           ≤   1 call(s)  (max_calls None)\n"
    "  agent Alpha            ≤   3 call(s)  (max_calls 3)\n"
    "  approval possible email.send at line 6: 'body' may be untrusted (data: input 'ticket'); 'to' may be pii "
    "(control flow: crm.find (line 4))\n"
    "  flow email.send.body            receives pii, untrusted: requires approval\n";

ResourceUse& resourceOf(Manifest& m, std::string_view name) {
    for (ResourceUse& r : m.resources) {
        if (r.name == name) return r;
    }
    FAIL("no resource " << name);
    return m.resources.front();
}

Grant grant(std::string resource, std::optional<int64_t> maxCalls = std::nullopt) {
    Grant g;
    g.resource = std::move(resource);
    g.maxCalls = maxCalls;
    return g;
}

// A policy granting everything the sample uses, without limits.
Policy fullPolicy() {
    Policy p;
    p.file = "deploy/policy.toml";
    for (const char* name : {"crm.find", "email.send", "llm", "web.fetch"}) p.grants[name] = grant(name);
    return p;
}

std::vector<Diagnostic> policyDiagnostics(const Manifest& m, const Policy& p) {
    DiagnosticList diags;
    Span header{1, 1, 1, 23};
    checkManifestAgainstPolicy(m, p, "triage.rmt", header, diags);
    return diags.items();
}

void checkAtHeader(const Diagnostic& d) {
    CHECK(d.file == "triage.rmt");
    CHECK(d.span.line == 1);
    CHECK(d.span.col == 1);
    CHECK(d.span.endCol == 23);
}

std::vector<std::string> widenings(const AuthorityDiff& diff) {
    REQUIRE(diff.widening.size() == diff.changes.size());
    std::vector<std::string> out;
    for (size_t i = 0; i < diff.changes.size(); ++i) {
        if (diff.widening[i]) out.push_back(diff.changes[i]);
    }
    return out;
}

std::vector<std::string> narrowings(const AuthorityDiff& diff) {
    REQUIRE(diff.widening.size() == diff.changes.size());
    std::vector<std::string> out;
    for (size_t i = 0; i < diff.changes.size(); ++i) {
        if (!diff.widening[i]) out.push_back(diff.changes[i]);
    }
    return out;
}

using Lines = std::vector<std::string>;

}  // namespace

TEST_CASE("manifest JSON: key order, shapes and numbers as in the prototype") {
    Json j = manifestToJson(sampleManifest());
    CHECK(j.dump(2) == kSampleJson);

    std::vector<std::string> keys;
    for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
    CHECK(keys == std::vector<std::string>{"program", "program_hash", "host_hash", "uses", "resources", "agents",
                                           "worst_case_cost_usd", "budget_usd", "call_sites", "approval_sites", "flows",
                                           "inputs", "ambient_effects"});
    // Only model calls carry "agent", null for a direct call.
    CHECK_FALSE(j["call_sites"][0].contains("agent"));
    CHECK(j["call_sites"][1]["agent"] == "Writer");
    CHECK(j["call_sites"][3]["agent"].is_null());
    CHECK(j["approval_sites"].size() == 1);
    CHECK(j["approval_sites"][0] == j["call_sites"][2]);
}

TEST_CASE("manifest JSON: resources are written in name order, and no budget is null") {
    Manifest m = sampleManifest();
    std::swap(m.resources[0], m.resources[3]);
    m.budgetUsd.reset();
    Json j = manifestToJson(m);
    std::vector<std::string> names;
    for (auto it = j["resources"].begin(); it != j["resources"].end(); ++it) names.push_back(it.key());
    CHECK(names == std::vector<std::string>{"crm.find", "email.send", "llm", "web.fetch"});
    CHECK(j["budget_usd"].is_null());
    CHECK(j.dump().find("\"budget_usd\":null") != std::string::npos);
}

TEST_CASE("manifest JSON: empty manifest") {
    Manifest m;
    m.program = "empty";
    Json j = manifestToJson(m);
    CHECK(j.dump() ==
          R"({"program":"empty","program_hash":"","host_hash":"","uses":[],"resources":{},"agents":{},)"
          R"("worst_case_cost_usd":0.0,"budget_usd":null,"call_sites":[],"approval_sites":[],"flows":[],"inputs":{},)"
          R"("ambient_effects":"none: time, randomness, network and files are reachable only through declared )"
          R"(capabilities"})");
    std::optional<Manifest> back = manifestFromJson(j);
    REQUIRE(back);
    CHECK(*back == m);
}

TEST_CASE("manifest JSON: round trip, field by field") {
    Manifest m = sampleManifest();
    std::optional<Manifest> back = manifestFromJson(manifestToJson(m));
    REQUIRE(back);
    CHECK(back->program == m.program);
    CHECK(back->programHash == m.programHash);
    CHECK(back->hostHash == m.hostHash);
    CHECK(back->uses == m.uses);
    CHECK(back->resources == m.resources);
    CHECK(back->agents == m.agents);  // declaration order kept by the ordered_json overload
    CHECK(back->worstCaseCostUsd == m.worstCaseCostUsd);
    CHECK(back->budgetUsd == m.budgetUsd);
    CHECK(back->callSites == m.callSites);
    CHECK(back->flows == m.flows);
    CHECK(back->inputs == m.inputs);
    CHECK(*back == m);
}

TEST_CASE("manifest JSON: reading text, as from an .rbc file") {
    Manifest m = sampleManifest();
    std::string text = manifestToJson(m).dump();

    std::optional<Manifest> ordered = manifestFromJson(Json::parse(text));
    REQUIRE(ordered);
    CHECK(*ordered == m);

    // nlohmann::json sorts object keys: everything survives except the order of agents and inputs.
    std::optional<Manifest> sorted = manifestFromJson(nlohmann::json::parse(text));
    REQUIRE(sorted);
    CHECK(sorted->resources == m.resources);
    CHECK(sorted->callSites == m.callSites);
    CHECK(sorted->flows == m.flows);
    REQUIRE(sorted->agents.size() == 2);
    CHECK(sorted->agents[0] == m.agents[1]);
    CHECK(sorted->agents[1] == m.agents[0]);

    // Key order does not matter, and unknown keys are ignored.
    nlohmann::json shuffled = nlohmann::json::parse(text);
    shuffled["future_field"] = {1, 2, 3};
    shuffled["resources"]["llm"]["note"] = "x";
    CHECK(manifestFromJson(shuffled));
}

TEST_CASE("manifest JSON: a missing top-level member is refused") {
    Json good = manifestToJson(sampleManifest());
    for (auto it = good.begin(); it != good.end(); ++it) {
        CAPTURE(it.key());
        Json bad = good;
        bad.erase(it.key());
        std::optional<Manifest> m;
        CHECK_NOTHROW(m = manifestFromJson(bad));
        CHECK_FALSE(m);
    }
}

TEST_CASE("manifest JSON: missing or mistyped members are refused without throwing") {
    Json good = manifestToJson(sampleManifest());
    using Edit = void (*)(Json&);
    const std::vector<std::pair<const char*, Edit>> edits = {
        {"document is an array", [](Json& j) { j = Json::array(); }},
        {"document is null", [](Json& j) { j = nullptr; }},
        {"program is a number", [](Json& j) { j["program"] = 1; }},
        {"uses holds a number", [](Json& j) { j["uses"].push_back(2); }},
        {"resources is a list", [](Json& j) { j["resources"] = Json::array(); }},
        {"unknown kind", [](Json& j) { j["resources"]["llm"]["kind"] = "tool"; }},
        {"negative max_calls", [](Json& j) { j["resources"]["llm"]["max_calls"] = -1; }},
        {"fractional max_calls", [](Json& j) { j["resources"]["llm"]["max_calls"] = 1.5; }},
        {"max_calls as text", [](Json& j) { j["resources"]["llm"]["max_calls"] = "4"; }},
        {"cost as text", [](Json& j) { j["resources"]["llm"]["cost_per_call"] = "0.01"; }},
        {"capability without clears", [](Json& j) { j["resources"]["crm.find"].erase("clears"); }},
        {"idempotent as text", [](Json& j) { j["resources"]["crm.find"]["idempotent"] = "yes"; }},
        {"agent is a string", [](Json& j) { j["agents"]["Alpha"] = "llm"; }},
        {"agent without declared", [](Json& j) { j["agents"]["Alpha"].erase("max_calls_declared"); }},
        {"declared as float", [](Json& j) { j["agents"]["Alpha"]["max_calls_declared"] = 2.5; }},
        {"budget as text", [](Json& j) { j["budget_usd"] = "0.08"; }},
        {"cost is null", [](Json& j) { j["worst_case_cost_usd"] = nullptr; }},
        {"call site is a string", [](Json& j) { j["call_sites"][0] = "main#0"; }},
        {"site id is a number", [](Json& j) { j["call_sites"][0]["site"] = 7; }},
        {"line too large", [](Json& j) { j["call_sites"][0]["line"] = 1ULL << 40; }},
        {"unknown approval", [](Json& j) { j["call_sites"][0]["approval"] = "sometimes"; }},
        {"agent is a number", [](Json& j) { j["call_sites"][1]["agent"] = 5; }},
        {"retry as text", [](Json& j) { j["call_sites"][1]["retry"] = "1"; }},
        {"retry too large", [](Json& j) { j["call_sites"][1]["retry"] = ~0ULL; }},
        {"timeout missing", [](Json& j) { j["call_sites"][1].erase("timeout_s"); }},
        {"reasons not a list", [](Json& j) { j["call_sites"][2]["reasons"] = "x"; }},
        {"approval_sites an object", [](Json& j) { j["approval_sites"] = Json::object(); }},
        {"unknown verdict", [](Json& j) { j["flows"][0]["verdict"] = "maybe"; }},
        {"flow without sites", [](Json& j) { j["flows"][0].erase("sites"); }},
        {"unknown via", [](Json& j) { j["flows"][0]["sites"][0]["via"] = "both"; }},
        {"flow site is a list",
         [](Json& j) {
             j["flows"][0]["sites"][0] = {{"site", 1}};
         }},
        {"input tags not a list", [](Json& j) { j["inputs"]["ticket"] = "untrusted"; }},
        {"ambient effects a bool", [](Json& j) { j["ambient_effects"] = true; }},
    };
    for (const auto& entry : edits) {
        const char* what = entry.first;  // a plain variable: CAPTURE cannot capture a structured binding
        CAPTURE(what);
        Json bad = good;
        entry.second(bad);
        std::optional<Manifest> m;
        CHECK_NOTHROW(m = manifestFromJson(bad));
        CHECK_FALSE(m);
        CHECK_NOTHROW(m = manifestFromJson(nlohmann::json::parse(bad.dump())));
        CHECK_FALSE(m);
    }
}

TEST_CASE("manifest JSON: a direct model call reads back without an agent") {
    std::optional<Manifest> back = manifestFromJson(manifestToJson(sampleManifest()));
    REQUIRE(back);
    CHECK_FALSE(back->callSites[3].agent);
    CHECK_FALSE(back->callSites[0].agent);
}

TEST_CASE("summary: the prototype's lines, widths and number formats") {
    CHECK(manifestSummary(sampleManifest()) == kSampleSummary);
}

TEST_CASE("summary: no budget, long names and nothing else") {
    Manifest m;
    m.program = "tiny";
    m.worstCaseCostUsd = 0.123456;
    m.resources = {capability("a.very.long.capability.name", 1234, 0.0001, true, {}, {})};
    m.resources[0].worstCaseCost = 0.1234;
    m.agents = {AgentUse{"AVeryLongAgentName", "llm", 12, 12}};
    CHECK(manifestSummary(m) ==
          "program tiny: worst-case cost $0.1235\n"
          "  a.very.long.capability.name ≤ 1234 call(s)   ≤ $0.1234\n"
          "  agent AVeryLongAgentName ≤  12 call(s)  (max_calls 12)\n");
}

TEST_CASE("summary: padding counts characters, not bytes") {
    Manifest m;
    m.program = "p";
    Flow f;
    f.sink = "mail.envoyé.corps";
    f.tags = {"untrusted"};
    f.verdict = "allowed";
    m.flows = {f};
    CHECK(manifestSummary(m) ==
          "program p: worst-case cost $0.0000\n"
          "  flow mail.envoyé.corps          receives untrusted: allowed\n");
}

TEST_CASE("policy: a policy granting everything without limits is silent") {
    CHECK(policyDiagnostics(sampleManifest(), fullPolicy()).empty());
    CHECK(policyDiagnostics(sampleManifest(), Policy::allowAllPolicy()).empty());
}

TEST_CASE("policy: E0501 for each resource not granted, including unused uses entries") {
    Policy p = fullPolicy();
    p.grants.erase("web.fetch");
    p.grants.erase("crm.find");
    std::vector<Diagnostic> diags = policyDiagnostics(sampleManifest(), p);
    REQUIRE(diags.size() == 2);
    CHECK(diags[0].code == DiagCode::E0501);
    CHECK(diags[0].message == "policy deploy/policy.toml does not grant 'crm.find'");
    CHECK(diags[0].hint == "the program cannot widen host policy; ask the operator or remove the use");
    checkAtHeader(diags[0]);
    CHECK(diags[1].code == DiagCode::E0501);
    CHECK(diags[1].message == "policy deploy/policy.toml does not grant 'web.fetch'");
}

TEST_CASE("policy: E0502 when the worst case exceeds max_calls") {
    Policy p = fullPolicy();
    p.grants["llm"].maxCalls = 2;
    p.grants["crm.find"].maxCalls = 1;   // exactly the worst case: allowed
    p.grants["web.fetch"].maxCalls = 0;  // never called: allowed
    std::vector<Diagnostic> diags = policyDiagnostics(sampleManifest(), p);
    REQUIRE(diags.size() == 1);
    CHECK(diags[0].code == DiagCode::E0502);
    CHECK(diags[0].message == "program may call 'llm' up to 4 time(s), but policy allows 2");
    CHECK(diags[0].hint == "lower loop limits or retries around this call");
    // At the site that makes the most calls (the first of equals), with each site's breakdown.
    CHECK(diags[0].span.line == 5);
    CHECK(diags[0].span.col == 14);
    CHECK(diags[0].span.endCol == 14 + std::string_view("Writer.ask").size());
    CHECK(diags[0].notes == std::vector<std::string>{"Writer.ask at main#1 (line 5): 2 = 1 iteration × (retry 1 + 1)",
                                                     "llm.ask at helper#0 (line 9): 2 = 2 iterations"});
    // A manifest without per-site counts (an .rbc built before them) keeps the header.
    Manifest old = sampleManifest();
    for (CallSiteInfo& site : old.callSites) site.maxCalls = 0;
    diags = policyDiagnostics(old, p);
    REQUIRE(diags.size() == 1);
    CHECK(diags[0].notes.empty());
    checkAtHeader(diags[0]);
}

TEST_CASE("policy: E0503 when the worst-case cost exceeds max_usd") {
    Policy p = fullPolicy();
    p.maxUsd = 0.03;
    std::vector<Diagnostic> diags = policyDiagnostics(sampleManifest(), p);
    REQUIRE(diags.size() == 1);
    CHECK(diags[0].code == DiagCode::E0503);
    CHECK(diags[0].message == "worst-case cost $0.0400 exceeds the policy budget $0.0300");
    CHECK(diags[0].hint.empty());
    checkAtHeader(diags[0]);

    p.maxUsd = 0.04;  // equal is within budget
    CHECK(policyDiagnostics(sampleManifest(), p).empty());
    Manifest m = sampleManifest();
    m.worstCaseCostUsd = 0.1 + 0.2;  // 0.30000000000000004: float noise is not an overrun
    p.maxUsd = 0.3;
    CHECK(policyDiagnostics(m, p).empty());
}

TEST_CASE("policy: all three codes, in resource order then cost") {
    Policy p = fullPolicy();
    p.grants.erase("email.send");
    p.grants["crm.find"].maxCalls = 0;
    p.maxUsd = 0.01;
    std::vector<Diagnostic> diags = policyDiagnostics(sampleManifest(), p);
    REQUIRE(diags.size() == 3);
    CHECK(diags[0].message == "program may call 'crm.find' up to 1 time(s), but policy allows 0");
    CHECK(diags[1].message == "policy deploy/policy.toml does not grant 'email.send'");
    CHECK(diags[2].message == "worst-case cost $0.0400 exceeds the policy budget $0.0100");
}

TEST_CASE("diff: identical manifests change nothing") {
    AuthorityDiff diff = diffManifests(sampleManifest(), sampleManifest());
    CHECK_FALSE(diff.widened);
    CHECK(diff.changes.empty());
    CHECK(diff.widening.empty());
}

TEST_CASE("diff: more calls of a resource, and the cost that comes with them") {
    Manifest before = sampleManifest();
    Manifest after = sampleManifest();
    resourceOf(after, "llm").maxCalls = 10;
    resourceOf(after, "llm").worstCaseCost = 0.1;
    after.worstCaseCostUsd = 0.1;
    AuthorityDiff diff = diffManifests(before, after);
    CHECK(diff.widened);
    CHECK(diff.changes == Lines{"'llm' worst-case calls 4 -> 10", "worst-case cost $0.0400 -> $0.1000"});
    CHECK(narrowings(diff).empty());

    AuthorityDiff back = diffManifests(after, before);
    CHECK_FALSE(back.widened);
    CHECK(back.changes == Lines{"'llm' worst-case calls 10 -> 4", "worst-case cost $0.1000 -> $0.0400"});
    CHECK(widenings(back).empty());
}

TEST_CASE("diff: a new resource, and an unused one that gets called") {
    Manifest before = sampleManifest();
    Manifest after = sampleManifest();
    after.uses.push_back("files.read");
    after.resources.push_back(capability("files.read", 1, 0.0, true, {"untrusted"}, {}));
    resourceOf(after, "web.fetch").maxCalls = 2;
    AuthorityDiff diff = diffManifests(before, after);
    CHECK(diff.widened);
    CHECK(diff.changes == Lines{"NEW resource 'files.read' (≤ 1 call(s))", "NEW resource 'web.fetch' (≤ 2 call(s))"});

    AuthorityDiff back = diffManifests(after, before);
    CHECK_FALSE(back.widened);
    CHECK(back.changes ==
          Lines{"REMOVED resource 'files.read' (was ≤ 1 call(s))", "'web.fetch' worst-case calls 2 -> 0"});
}

TEST_CASE("diff: a new uses entry widens even before it is called") {
    Manifest before = sampleManifest();
    Manifest after = sampleManifest();
    after.uses.push_back("files.read");
    after.resources.push_back(capability("files.read", 0, 0.0, true, {}, {}));
    AuthorityDiff diff = diffManifests(before, after);
    CHECK(diff.widened);
    CHECK(diff.changes == Lines{"NEW uses entry 'files.read' (not called)"});

    AuthorityDiff back = diffManifests(after, before);
    CHECK_FALSE(back.widened);
    CHECK(back.changes == Lines{"REMOVED uses entry 'files.read'"});
}

TEST_CASE("diff: budget changes, with the prototype's rule") {
    Manifest before = sampleManifest();
    Manifest after = sampleManifest();
    after.budgetUsd = 0.1;
    AuthorityDiff higher = diffManifests(before, after);
    CHECK(higher.widened);
    CHECK(higher.changes == Lines{"budget 0.08 -> 0.1"});

    AuthorityDiff lower = diffManifests(after, before);
    CHECK_FALSE(lower.widened);
    CHECK(lower.changes == Lines{"budget 0.1 -> 0.08"});

    after.budgetUsd.reset();
    AuthorityDiff dropped = diffManifests(before, after);
    CHECK(dropped.widened);
    CHECK(dropped.changes == Lines{"budget 0.08 -> None"});

    // The prototype compares `budget or 0`, so adding a budget is reported as widening too.
    AuthorityDiff added = diffManifests(after, before);
    CHECK(added.widened);
    CHECK(added.changes == Lines{"budget None -> 0.08"});
}

TEST_CASE("diff: the prototype's case, a new tagged flow plus more approval sites") {
    Manifest before = sampleManifest();
    before.flows.clear();
    before.callSites[2].approval = Approval::None;
    before.callSites[2].reasons.clear();
    Manifest after = sampleManifest();
    AuthorityDiff diff = diffManifests(before, after);
    CHECK(diff.widened);
    CHECK(diff.changes ==
          Lines{"flow into email.send.body now receives pii, untrusted (requires approval)", "approval sites 0 -> 1"});
    CHECK(diff.widening == std::vector<bool>{true, true});

    AuthorityDiff back = diffManifests(after, before);
    CHECK_FALSE(back.widened);
    CHECK(back.changes ==
          Lines{"flow into email.send.body no longer receives pii, untrusted", "approval sites 1 -> 0"});
}

TEST_CASE("diff: a new tag into an existing sink, and a tag that goes away") {
    Manifest before = sampleManifest();
    before.flows[0].tags = {"untrusted"};
    Manifest after = sampleManifest();
    after.flows[0].tags = {"pii", "secret"};
    AuthorityDiff diff = diffManifests(before, after);
    CHECK(diff.widened);
    CHECK(diff.changes == Lines{"flow into email.send.body now receives pii, secret (requires approval)",
                                "flow into email.send.body no longer receives untrusted"});
    CHECK(diff.widening == std::vector<bool>{true, false});
}

TEST_CASE("diff: a verdict that changes with the same tags") {
    Manifest before = sampleManifest();
    Manifest after = sampleManifest();
    after.flows[0].verdict = "allowed";
    AuthorityDiff lenient = diffManifests(before, after);
    CHECK(lenient.widened);
    CHECK(lenient.changes == Lines{"flow into email.send.body verdict requires approval -> allowed"});

    AuthorityDiff strict = diffManifests(after, before);
    CHECK_FALSE(strict.widened);
    CHECK(strict.changes == Lines{"flow into email.send.body verdict allowed -> requires approval"});

    Manifest denied = sampleManifest();
    denied.flows[0].verdict = "denied";
    CHECK(diffManifests(denied, before).widened);
    CHECK_FALSE(diffManifests(before, denied).widened);
}

TEST_CASE("diff: narrowing only is reported but is not widening") {
    Manifest before = sampleManifest();
    Manifest after = sampleManifest();
    resourceOf(after, "llm").maxCalls = 1;
    resourceOf(after, "llm").worstCaseCost = 0.01;
    after.worstCaseCostUsd = 0.01;
    after.flows.clear();
    after.callSites[2].approval = Approval::None;
    AuthorityDiff diff = diffManifests(before, after);
    CHECK_FALSE(diff.widened);
    CHECK(diff.changes == Lines{"'llm' worst-case calls 4 -> 1", "worst-case cost $0.0400 -> $0.0100",
                                "flow into email.send.body no longer receives pii, untrusted",
                                "approval sites 1 -> 0"});
    CHECK(diff.widening == std::vector<bool>(4, false));
}

TEST_CASE("diff: cost noise below a micro-cent is not a change") {
    Manifest before = sampleManifest();
    Manifest after = sampleManifest();
    after.worstCaseCostUsd = before.worstCaseCostUsd + 1e-13;
    CHECK(diffManifests(before, after).changes.empty());
}
