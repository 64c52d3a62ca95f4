// One differential case end to end: check a generated (or saved) program with the real checker,
// build it, run it in the VM under the real broker (an adapter answering from the world, every
// approval granted, a trace on /dev/shm read back), run the reference evaluator on the same
// checked tree, and compare; then check the static soundness of the manifest against what the run
// did. Cases are saved to and loaded from directories (regressions, divergences).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace remit::difftest {

struct Case {
    std::string source;  // prog.rmt
    std::string host;    // host.rmti
    std::string policy;  // policy.toml
    nlohmann::json inputs = nlohmann::json::object();  // main's parameters
    uint64_t worldSeed = 0;
    bool strict = false;  // strict flows: checker, codegen and broker, and the reference
};

struct CaseReport {
    enum class Kind {
        Compared,   // both sides ran and agreed, and the manifest was sound
        Rejected,   // the checker rejected it for a reason a generator cannot cheaply predict
        Limit,      // a side hit a run limit: not compared
        Divergent,  // a difference: VM vs reference, soundness, or an unexpected rejection
    };
    Kind kind = Kind::Compared;
    std::string reason;   // Rejected: the code; Divergent: "outcome", "soundness", "rejected E0103", ...
    std::vector<std::string> details;
    // Runs that exercise run-time rules the checker would have refused statically.
    bool strippedDeny = false;      // E0301: compiled against the host without deny lists
    bool uncheckedPolicy = false;   // E0501-E0503: run under a policy it was not checked against
    std::string vmEnd;              // "ok", or the error code the run ended with
    size_t calls = 0;               // call events in the trace
};

// `tracePath`: where the broker writes the trace (a file on /dev/shm, reused case after case).
CaseReport runCase(const Case& c, const std::string& tracePath);

// A case directory: prog.rmt, host.rmti, policy.toml and case.json ({inputs, world_seed, strict}),
// plus report.txt when there is something to say.
bool saveCase(const Case& c, const std::string& dir, const std::string& report, std::string& error);
std::optional<Case> loadCase(const std::string& dir, std::string& error);

}  // namespace remit::difftest

namespace remit::difftest {

// A smaller case that still diverges for the same reason: whole lines and whole blocks (a line
// ending in `{` through its closing line) of the program are dropped, one at a time, for as long
// as the case stays divergent with the same `reason` (harness.h CaseReport::reason). Programs
// that no longer check diverge for another reason ("rejected E0101"), so they are not kept.
Case minimizeCase(const Case& c, const std::string& reason, const std::string& tracePath, size_t maxRuns = 4000);

}  // namespace remit::difftest
