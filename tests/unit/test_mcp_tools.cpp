// The MCP tools through their C++ API (session/mcp_tools.h): what needs threads or timing the
// JSON-RPC transports cannot show deterministically, such as a cancellation arriving while a tool
// call runs.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

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
