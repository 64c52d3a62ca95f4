// The run lifecycle every front end shares (`remitvm run`/`resume`, MCP, serve, the embedding API
// of include/remit/remit.hpp): run ids, main's arguments from JSON (typed and tagged per the host's
// `input` lines, so no front end can forget a label), the result as JSON, and the trace's
// `run_start` and `run_end` events. One home for each, so the front ends cannot drift apart.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vm/run.h"
#include "runtime/host_model.h"
#include "runtime/policy.h"

namespace remit {

// `YYYYMMDD-HHMMSS-xxxxxx`: the local time (as the prototype's time.strftime) and 24 random bits.
std::string newRunId();

// A run's VM limits are composed the same way by every front end (docs/policy.md "[limits]"):
//   remitvm run/resume/replay  overlay(VmLimits{}, policy), then the flags overlaid the same way;
//   MCP remit_run              clampTo(overlay(VmLimits{}, policy), the server's per-run ceiling);
//   the embedding API          clampTo(options, overlay(options, policy)): the policy only lowers.
// `overlay`: each limit the policy's [limits] sets replaces the one in `limits`.
VmLimits overlay(VmLimits limits, const RunLimits& policy);
// `clampTo`: each limit at most the ceiling's.
VmLimits clampTo(VmLimits limits, const VmLimits& ceiling);

// main's arguments from `given`, an object with one entry per parameter: each value checked
// against the parameter's type and tagged as the host's `input` lines say (undeclared: untrusted).
// Empty with `problem` set ("unknown input 'x'", "missing input 'x'", "input 'x' does not fit its
// type: …", "input 'x' does not fit in the run's memory limit") when they do not fit.
std::vector<Value> mainArguments(const LoadedProgram& program, const HostModel& host, Heap& heap,
                                 const nlohmann::json& given, std::string& problem);

// A completed run's result as JSON and its deep tags (names).
struct RunResult {
    nlohmann::ordered_json value = nullptr;
    nlohmann::ordered_json tags = nlohmann::ordered_json::array();
};
RunResult resultOf(Run& run);

// A failure as the `--json` envelopes show it: {code, name, message, line, col, details?}.
nlohmann::ordered_json failureJson(const RunFailure& failure);

// The `run_end` events (docs/broker.md "Traces").
nlohmann::ordered_json runEndPaused(const std::string& runId, const std::string& digest);
nlohmann::ordered_json runEndFailed(const std::string& runId, const RunFailure& failure);
nlohmann::ordered_json runEndCompleted(const std::string& runId, const RunResult& result, double spentUsd);

}  // namespace remit
