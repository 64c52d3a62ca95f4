// Unit tests for the run lifecycle every front end shares (session/run_lifecycle.h): how a run's
// VM limits are composed from defaults, a policy's [limits], flags and a front end's ceiling, and
// the shape of run ids.
#include <doctest/doctest.h>

#include <cctype>
#include <string>

#include "session/run_lifecycle.h"

using namespace remit;

TEST_CASE("run limits: overlay replaces exactly the keys the policy sets") {
    const VmLimits defaults;
    CHECK(overlay(defaults, RunLimits{}).maxSteps == defaults.maxSteps);
    CHECK(overlay(defaults, RunLimits{}).maxMemory == defaults.maxMemory);
    CHECK(overlay(defaults, RunLimits{}).maxWallMs == defaults.maxWallMs);

    RunLimits policy;
    policy.maxSteps = 500;
    VmLimits lowered = overlay(defaults, policy);
    CHECK(lowered.maxSteps == 500);
    CHECK(lowered.maxMemory == defaults.maxMemory);
    CHECK(lowered.maxWallMs == defaults.maxWallMs);
    CHECK(lowered.maxResultBytes == defaults.maxResultBytes);  // no policy key: never touched

    // A policy may raise a default (remitvm run's policy is the operator's); flags come after it.
    policy.maxWallMs = 60'000;
    policy.maxMemory = int64_t(1) << 30;
    VmLimits raised = overlay(defaults, policy);
    CHECK(raised.maxWallMs == 60'000);
    CHECK(raised.maxMemory == size_t(1) << 30);
    RunLimits flags;
    flags.maxWallMs = 5;
    VmLimits withFlags = overlay(raised, flags);
    CHECK(withFlags.maxWallMs == 5);
    CHECK(withFlags.maxSteps == 500);
    CHECK(withFlags.maxMemory == size_t(1) << 30);
}

TEST_CASE("run limits: clampTo keeps each limit at most the ceiling's") {
    VmLimits ceiling{1'000, 4'096, 100, 64};
    VmLimits over{5'000, 1 << 20, 50, 128};
    VmLimits clamped = clampTo(over, ceiling);
    CHECK(clamped.maxSteps == 1'000);
    CHECK(clamped.maxMemory == 4'096);
    CHECK(clamped.maxWallMs == 50);  // already under
    CHECK(clamped.maxResultBytes == 64);

    // The embedding API's rule: the policy only lowers what the host chose.
    VmLimits options{200, 1 << 20, 1'000, 1 << 20};
    RunLimits policy;
    policy.maxSteps = 100;      // lower: wins
    policy.maxWallMs = 99'999;  // higher: ignored
    VmLimits embedded = clampTo(options, overlay(options, policy));
    CHECK(embedded.maxSteps == 100);
    CHECK(embedded.maxWallMs == 1'000);
    CHECK(embedded.maxMemory == size_t(1) << 20);
}

TEST_CASE("run ids: date, time and 24 random bits in hex") {
    std::string id = newRunId();
    REQUIRE(id.size() == 22);
    for (size_t i : {8u, 15u}) CHECK(id[i] == '-');
    for (size_t i = 0; i < id.size(); ++i) {
        if (i == 8 || i == 15) continue;
        if (i < 15) CHECK(std::isdigit(static_cast<unsigned char>(id[i])));
        else CHECK(std::isxdigit(static_cast<unsigned char>(id[i])));
    }
    CHECK(newRunId() != newRunId());
}
