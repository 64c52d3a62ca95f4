// The embedding API (include/remit/remit.hpp and its C ABI remit.h) on a small refund program:
// compile errors come back as diagnostics; a run stops at each call with the broker's decision
// (arguments, tags, pc, approval reasons); an approval, a refusal, a failed call, an invalid
// result, a bad policy, bad inputs and misuse all behave as documented (docs/embedding.md).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "remit/remit.h"
#include "remit/remit.hpp"

namespace {

namespace api = remit::api;

constexpr const char* kHost = R"(type Order = { id: Str, total: Float }
input ticket tags untrusted
capability shop.order(id: Str) -> Order
  clears untrusted
  idempotent
capability payments.refund(order_id: Str deny untrusted, amount: Float approve untrusted) -> Str
  cost 0.01
model llm cost 0.02
)";

constexpr const char* kProgram = R"(program refunds
uses shop.order, payments.refund, llm

fn main(ticket: Str) -> Str {
  let order = shop.order("A1") retry 1
  let intent = llm.ask("refund" | "other", "What does the customer want?", context: ticket)
  if intent == "refund" {
    return payments.refund(order_id: order.id, amount: order.total)
  }
  return "none"
}
)";

constexpr const char* kPolicy = R"([grant."shop.order"]
[grant."payments.refund"]
arg_max = { amount = 100 }
[grant.llm]
)";

api::Program compiled() {
    api::CompileResult r = api::Program::compile(kProgram, kHost);
    INFO(r.rendered);
    REQUIRE(r.program);
    return *r.program;
}

api::Run created(const api::Program& p, const std::string& policy = kPolicy) {
    api::RunOptions options;
    options.policyToml = policy;
    api::CreateResult r = api::Run::create(p, options);
    INFO(r.rendered);
    REQUIRE(r.run);
    return std::move(*r.run);
}

}  // namespace

TEST_CASE("embed: a program that does not check gives diagnostics, not a program") {
    api::CompileResult r = api::Program::compile("program p\nfn main() -> Int {\n  return \"x\"\n}\n", kHost);
    CHECK_FALSE(r.program);
    REQUIRE(r.diagnostics.size() == 1);
    CHECK(r.diagnostics[0].code == "E0109");
    CHECK(r.diagnostics[0].line == 3);
    CHECK(r.rendered.find("program.rmt:3:10: error[E0109]") != std::string::npos);
}

TEST_CASE("embed: every call stops with the broker's decision, labelled; an approval lets the refund through") {
    api::Program p = compiled();
    CHECK(p.name() == "refunds");
    CHECK(nlohmann::json::parse(p.manifestJson())["program"] == "refunds");
    api::Run run = created(p);

    api::Status s = run.start(R"({"ticket": "my kettle broke, refund please"})");
    REQUIRE(s == api::Status::HostCall);
    const api::HostCallView& order = run.hostCall();
    CHECK(order.resource == "shop.order");
    CHECK(order.site == "main#0");
    CHECK(nlohmann::json::parse(order.argsJson) == nlohmann::json{{"id", "A1"}});
    CHECK(order.resultTags.empty());  // the shop clears untrusted
    CHECK(order.idempotencyKey.size() == 32);
    s = run.fail("Timeout");  // retried: retry 1
    REQUIRE(s == api::Status::HostCall);
    CHECK(run.hostCall().attempt == 1);
    s = run.complete(R"({"id": "A1", "total": 49.5})");

    REQUIRE(s == api::Status::HostCall);
    const api::HostCallView& ask = run.hostCall();
    CHECK(ask.kind == api::CallKind::Model);
    CHECK(ask.argTags[1].first == "context");
    CHECK(ask.argTags[1].second == std::vector<std::string>{"untrusted"});
    CHECK(ask.resultTags == std::vector<std::string>{"untrusted"});
    CHECK(nlohmann::json::parse(ask.schemaJson)["enum"] == nlohmann::json{"refund", "other"});
    s = run.complete(R"("refund")");

    // The refund runs only because of the untrusted answer: the broker asks for approval.
    REQUIRE(s == api::Status::NeedsApproval);
    const api::HostCallView& refund = run.hostCall();
    CHECK(refund.resource == "payments.refund");
    CHECK(refund.pcTags == std::vector<std::string>{"untrusted"});
    CHECK(refund.approvalReasons == std::vector<std::string>{"'amount' is untrusted (control flow)"});
    CHECK(refund.approvalDigest.size() == 64);
    s = run.approve("alice");
    REQUIRE(s == api::Status::HostCall);
    CHECK(run.hostCall().approvedBy == "alice");
    s = run.complete(R"("rf_1")", 0.02);
    REQUIRE(s == api::Status::Completed);
    CHECK(run.resultJson() == R"("rf_1")");
    CHECK(run.resultTags() == std::vector<std::string>{"untrusted"});
    CHECK(run.spentUsd() == doctest::Approx(0.04));
}

TEST_CASE("embed: a refusal stops the run with R0302; the policy's constraints and bad results hold") {
    api::Program p = compiled();
    auto toRefund = [&](api::Run& run, const char* total) {
        REQUIRE(run.start(R"({"ticket": "t"})") == api::Status::HostCall);
        REQUIRE(run.complete(std::string(R"({"id": "A1", "total": )") + total + "}") == api::Status::HostCall);
        return run.complete(R"("refund")");
    };
    api::Run refused = created(p);
    REQUIRE(toRefund(refused, "10.0") == api::Status::NeedsApproval);
    REQUIRE(refused.refuse() == api::Status::Failed);
    CHECK(refused.failure().code == "R0302");

    api::Run over = created(p);
    REQUIRE(toRefund(over, "500.0") == api::Status::Failed);  // arg_max comes before approval: nobody is asked
    CHECK(over.failure().code == "R0301");

    api::Run bad = created(p);
    REQUIRE(bad.start(R"({"ticket": "t"})") == api::Status::HostCall);
    CHECK(bad.complete(R"({"id": 1})") == api::Status::HostCall);  // R0501 is operational: the retry
    CHECK(bad.complete("not json") == api::Status::Failed);
    CHECK(bad.failure().code == "R0501");
    CHECK(bad.failure().rendered.find("runtime error[R0501]") != std::string::npos);
}

TEST_CASE("embed: bad inputs, bad policies and misuse") {
    api::Program p = compiled();
    api::Run run = created(p);
    CHECK(run.start(R"({"tickets": 1})") == api::Status::Failed);
    CHECK(run.failure().code == "input");
    CHECK(run.failure().message == "unknown input 'tickets': main takes ticket");
    CHECK_THROWS_AS((void)run.start("{}"), std::logic_error);
    CHECK_THROWS_AS((void)run.complete("1"), std::logic_error);

    api::RunOptions options;
    options.policyToml = "[grant.\"shop.order\"]\nmax_calls = \"2\"\n";
    api::CreateResult r = api::Run::create(p, options);
    CHECK_FALSE(r.run);
    REQUIRE_FALSE(r.diagnostics.empty());
    CHECK(r.diagnostics[0].code == "E0504");

    // Nothing granted: the program is refused before it runs, as `remitvm run` refuses it.
    options.policyToml = "";
    r = api::Run::create(p, options);
    CHECK_FALSE(r.run);
    CHECK(r.diagnostics.size() == 3);
    CHECK(r.diagnostics[0].code == "E0501");
}

TEST_CASE("embed: the C ABI") {
    char* diagnostics = nullptr;
    remit_program* program = remit_compile(kProgram, kHost, nullptr, 0, &diagnostics);
    REQUIRE(program);
    CHECK(std::string(diagnostics) == "[]");
    remit_free(diagnostics);
    CHECK(std::string(remit_version()) == "0.1.0");
    remit_run* run = remit_run_new(program, kPolicy, 0, nullptr, &diagnostics);
    REQUIRE(run);
    remit_free(diagnostics);
    CHECK(remit_run_complete(run, "1", -1) == REMIT_MISUSE);
    CHECK(remit_run_start(run, R"({"ticket": "t"})") == REMIT_HOST_CALL);
    auto call = nlohmann::json::parse(remit_run_call_json(run));
    CHECK(call["resource"] == "shop.order");
    CHECK(remit_run_complete(run, R"({"id": "A1", "total": 5.0})", -1) == REMIT_HOST_CALL);
    CHECK(remit_run_complete(run, R"("other")", -1) == REMIT_COMPLETED);
    auto result = nlohmann::json::parse(remit_run_result_json(run));
    CHECK(result["result"] == "none");
    CHECK(result["tags"] == nlohmann::json::array());  // a literal returned outside the branch
    CHECK(remit_run_failure_json(run) == nullptr);
    remit_run_free(run);
    remit_program_free(program);

    CHECK(remit_compile("program", kHost, nullptr, 0, &diagnostics) == nullptr);
    CHECK(nlohmann::json::parse(diagnostics)[0]["code"] == "E0100");
    remit_free(diagnostics);
}

TEST_CASE("embed: with a state directory the run is traced and approvals come from the store") {
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("remit-embed-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    api::Program p = compiled();
    api::RunOptions options;
    options.policyToml = kPolicy;
    options.stateDir = dir.string();
    api::Run run = std::move(*api::Run::create(p, options).run);
    REQUIRE(run.start(R"({"ticket": "t"})") == api::Status::HostCall);
    REQUIRE(run.complete(R"({"id": "A1", "total": 5.0})") == api::Status::HostCall);
    REQUIRE(run.complete(R"("refund")") == api::Status::NeedsApproval);
    REQUIRE(run.refuse() == api::Status::Failed);  // paused, as `remitvm run` pauses: the store holds the request
    CHECK(std::filesystem::exists(run.tracePath()));
    std::string store = (dir / "approvals.json").string();
    auto pending = nlohmann::json::parse(std::ifstream(store))["pending"];
    CHECK(pending.size() == 1);
    std::filesystem::remove_all(dir);
}
