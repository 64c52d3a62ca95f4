// What one run of a program comes to, in a form both sides of the differential test produce and
// compare: the VM (through the real broker and its trace) and the reference evaluator (through the
// oracle). Everything is normalised JSON, so a comparison is a string comparison and a divergence
// prints readably.
//
// - `value`: the result with the labels of every node: {"v": scalar, "t": [tags], "p": [seqs]}, a
//   list {"l": [nodes], "t", "p"}, a record {"r": [[field, node], ...], "t", "p"}. Floats are JSON
//   floats and Ints JSON integers, and nlohmann prints them apart (1 vs 1.0), so an Int that turned
//   into a Float is a difference.
// - `events`: the broker's decisions in trace order, only the fields both sides can know (no
//   run ids, digests, idempotency keys, times, costs or messages):
//     call             resource, site, attempt, args, arg_tags, pc_tags, derived_from, approval
//                      (null, or the reasons), status, result + result_tags (ok) or error (code)
//     violation        resource, site, param, tags, via ("control" in strict flows, else null)
//     approval_granted resource, site
//     pending_approval resource, site, reasons
//     invalid_output   resource, site
//     fallback         site
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace remit::difftest {

struct Outcome {
    enum class Status { Completed, Failed, Limit };
    Status status = Status::Completed;
    std::string code;        // Failed: "R0101", ...
    uint32_t line = 0, col = 0, endLine = 0, endCol = 0;  // Failed: where (the span)
    std::string message;     // Failed: for reports only, never compared
    nlohmann::json value;    // Completed: the labelled result
    std::vector<nlohmann::json> events;
};

// The normalised form of one trace event (nlohmann::json sorts keys), or null for the events the
// comparison ignores (run_start, dispatch, run_end).
nlohmann::json normaliseTraceEvent(const nlohmann::json& event);

// Differences between two outcomes (`a` the VM, `b` the reference), one line each; empty when equal.
std::vector<std::string> compareOutcomes(const Outcome& vm, const Outcome& ref);

std::string describe(const Outcome& outcome);

}  // namespace remit::difftest
