// The MCP tools through their C++ API (session/mcp_tools.h): what needs threads or timing the
// JSON-RPC transports cannot show deterministically, such as a cancellation arriving while a tool
// call runs, or the server ending while a call waits for the user's answer (MCP elicitation).
#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "session/mcp_tools.h"

namespace {

using remit::Json;
namespace mcp = remit::mcp;

// About a second of work before the step limit, so a cancellation lands while it runs.
constexpr const char* kSpin =
    "program spin\n\nfn main() -> Int {\n  var n = 0\n  for i in range(1000000) {\n"
    "    for j in range(1000000) {\n      n = n + len(str(j) + str(i))\n    }\n  }\n  return n\n}\n";

Json spinArguments() { return Json{{"program", kSpin}, {"host", ""}, {"fixtures", "{}"}}; }

// Runs `tool` on another thread and cancels it (again and again, until it returns: the first
// cancellation may come before the call is registered) from this one.
std::optional<mcp::ToolOutcome> callAndCancel(mcp::Tools& tools, const char* tool, const char* caller,
                                              const Json& cancelAs) {
    std::optional<mcp::ToolOutcome> outcome;
    std::atomic<bool> done{false};
    std::thread call([&] {
        mcp::BadParams bad;
        outcome = tools.call(tool, spinArguments(), bad, caller, Json(7));
        done = true;
    });
    while (!done) {
        tools.cancel(cancelAs.value("caller", std::string()), cancelAs["id"]);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    call.join();
    return outcome;
}

}  // namespace

TEST_CASE("mcp tools: notifications/cancelled aborts the running call it names, and only that one") {
    mcp::Tools tools;
    SUBCASE("the caller's own request: the run stops with R0702, and no reply is due") {
        std::optional<mcp::ToolOutcome> outcome =
            callAndCancel(tools, "remit_run_fixtures", "key:a", Json{{"caller", "key:a"}, {"id", 7}});
        REQUIRE(outcome);
        CHECK(outcome->cancelled);
        CHECK(outcome->text.find("R0702") != std::string::npos);
    }
    SUBCASE("remit_run too") {
        std::optional<mcp::ToolOutcome> outcome =
            callAndCancel(tools, "remit_run", "", Json{{"caller", ""}, {"id", 7}});
        REQUIRE(outcome);
        CHECK(outcome->cancelled);
        CHECK(outcome->text.find("R0702") != std::string::npos);
        CHECK(tools.pausedRuns() == 0);
    }
    SUBCASE("another caller's cancellation, or another id, is ignored") {
        for (Json other : {Json{{"caller", "key:b"}, {"id", 7}}, Json{{"caller", "key:a"}, {"id", 8}}}) {
            std::optional<mcp::ToolOutcome> outcome = callAndCancel(tools, "remit_run_fixtures", "key:a", other);
            REQUIRE(outcome);
            CHECK_FALSE(outcome->cancelled);
            CHECK(outcome->text.find("R0701") != std::string::npos);  // it ran to its step limit
        }
    }
    SUBCASE("a cancellation after the call ended changes nothing") {
        mcp::BadParams bad;
        std::optional<mcp::ToolOutcome> outcome =
            tools.call("remit_check", Json{{"program", kSpin}, {"host", ""}}, bad, "", Json(7));
        tools.cancel("", Json(7));
        REQUIRE(outcome);
        CHECK_FALSE(outcome->cancelled);
        outcome = tools.call("remit_check", Json{{"program", kSpin}, {"host", ""}}, bad, "", Json(8));
        REQUIRE(outcome);
        CHECK_FALSE(outcome->cancelled);
    }
    SUBCASE("a cancellation that comes before its call (the transport was slower) cancels it as it starts") {
        tools.cancel("key:a", Json("r-1"));
        mcp::BadParams bad;
        std::optional<mcp::ToolOutcome> outcome = tools.call("remit_run_fixtures", spinArguments(), bad, "key:a", Json("r-1"));
        REQUIRE(outcome);
        CHECK(outcome->cancelled);
        CHECK(outcome->text.find("R0702") != std::string::npos);  // aborted at its first step
    }
}

// ---------------------------------------------------------------- asking the user (elicitation)

namespace {

constexpr const char* kMailHost =
    "capability mail.send(to: Str, body: Str approve untrusted) -> Str\ninput note tags untrusted\n";
constexpr const char* kMail =
    "program mail\nuses mail.send\n\nfn main(note: Str) -> Str {\n  return mail.send(to: \"ops\", body: note)\n}\n";

Json mailArguments() {
    return Json{{"program", kMail},
                {"host", kMailHost},
                {"fixtures", R"({"capabilities": {"mail.send": [{"output": "m-1"}]}})"},
                {"inputs", R"({"note": "hi"})"}};
}

// The client side of a transport: keeps what the server sends it; the test answers through
// Tools::deliver, as a transport's reading thread does.
struct RecordingClient : remit::mcp::ClientChannel {
    std::mutex mutex;
    std::condition_variable arrived;
    std::vector<Json> sent;
    bool send(const Json& message) override {
        std::lock_guard<std::mutex> lock(mutex);
        sent.push_back(message);
        arrived.notify_all();
        return true;
    }
    // The n-th message sent (1-based), waiting up to 10 s for it.
    Json message(size_t n) {
        std::unique_lock<std::mutex> lock(mutex);
        REQUIRE(arrived.wait_for(lock, std::chrono::seconds(10), [&] { return sent.size() >= n; }));
        return sent[n - 1];
    }
};

// A server in operator mode (its state directory removed at the end) and a client that can be
// asked, with remit_run of kMail started on another thread.
struct AskingServer {
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("remit-unit-elicit-" + std::to_string(::getpid()));
    mcp::Tools tools{options(dir)};
    RecordingClient client;
    std::optional<mcp::ToolOutcome> outcome;
    std::thread call;

    static mcp::ToolsOptions options(const std::filesystem::path& dir) {
        mcp::ToolsOptions o;
        o.operatorApprovals = true;
        o.stateDir = dir.string();
        return o;
    }
    void start(const char* caller) {
        call = std::thread([this, caller] {
            mcp::BadParams bad;
            outcome = tools.call("remit_run", mailArguments(), bad, caller, Json(1), &client);
        });
    }
    // The run's result, once the call has returned.
    Json finish() {
        call.join();
        REQUIRE(outcome);
        return Json::parse(outcome->text);
    }
    ~AskingServer() {
        if (call.joinable()) call.join();
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
};

}  // namespace

TEST_CASE("mcp tools: which clients can be asked") {
    Json declared = {{"capabilities", {{"elicitation", Json::object()}}}};
    CHECK(mcp::clientCanElicit(declared, "2025-06-18"));
    CHECK_FALSE(mcp::clientCanElicit(declared, "2025-03-26"));  // the protocol has no elicitation yet
    CHECK_FALSE(mcp::clientCanElicit(Json{{"capabilities", Json::object()}}, "2025-06-18"));
    CHECK_FALSE(mcp::clientCanElicit(Json{{"capabilities", {{"elicitation", true}}}}, "2025-06-18"));
    CHECK_FALSE(mcp::clientCanElicit(Json{{"capabilities", {{"elicitation", {{"url", Json::object()}}}}}}, "2025-06-18"));
    CHECK(mcp::clientCanElicit(
        Json{{"capabilities", {{"elicitation", {{"form", Json::object()}, {"url", Json::object()}}}}}}, "2025-06-18"));
    CHECK_FALSE(mcp::clientCanElicit(Json("x"), "2025-06-18"));
}

TEST_CASE("mcp tools: only the caller's response with the question's id answers it, once") {
    AskingServer server;
    server.start("key:a");
    Json question = server.client.message(1);
    CHECK(question["method"] == "elicitation/create");
    Json approve = {{"jsonrpc", "2.0"},
                    {"id", question["id"]},
                    {"result", {{"action", "accept"}, {"content", {{"decision", "approve"}}}}}};
    mcp::Tools& tools = server.tools;
    CHECK_FALSE(tools.deliver("key:b", approve));  // another caller
    Json elsewhere = approve;
    elsewhere["id"] = "remit-elicitation-000000000000000000000000";
    CHECK_FALSE(tools.deliver("key:a", elsewhere));
    CHECK_FALSE(tools.deliver("key:a", Json{{"id", 1}, {"result", approve["result"]}}));  // not our kind of id
    CHECK(tools.deliver("key:a", approve));
    Json result = server.finish();
    CHECK_FALSE(tools.deliver("key:a", approve));  // answered already
    CHECK(result["status"] == "completed");
    CHECK(result["result"] == "m-1");
    CHECK(tools.pausedRuns() == 0);
}

TEST_CASE("mcp tools: the server's end stops a wait for the user, and the run stays paused") {
    AskingServer server;
    server.start("");
    Json question = server.client.message(1);
    server.tools.interruptWaits();
    Json paused = server.finish();
    CHECK(paused["status"] == "approval_required");
    CHECK(paused["elicitation"]["outcome"] == "interrupted");
    // The question was withdrawn, naming its id.
    Json withdrawn = server.client.message(2);
    CHECK(withdrawn["method"] == "notifications/cancelled");
    CHECK(withdrawn["params"]["requestId"] == question["id"]);
    CHECK(server.tools.pausedRuns() == 1);
    // Nothing waits any more: the next run pauses at once, unasked.
    server.start("");
    CHECK(server.finish()["elicitation"]["outcome"] == "interrupted");
    CHECK(server.client.sent.size() == 2);
    CHECK(server.tools.pausedRuns() == 2);
}
