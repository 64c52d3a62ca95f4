// The run lifecycle every front end shares (`remitvm run`/`resume`, MCP, serve, the embedding API
// of include/remit/remit.hpp): run ids, main's arguments from JSON (typed and tagged per the host's
// `input` lines, so no front end can forget a label), the result as JSON, the trace's
// `run_start` and `run_end` events, and whether a replay reproduced its recorded run. One home for each, so the front
// ends cannot drift apart.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "broker/broker.h"
#include "bytecode/module.h"
#include "runtime/host_model.h"
#include "runtime/json_text.h"
#include "runtime/policy.h"
#include "session/run_adapters.h"
#include "vm/run.h"

namespace remit {

struct ReplayPlan;

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

// The broker's options for a run of `module` under `host` and `policy`, set alike by every front
// end: the run id and idempotency root (a resume passes the root of the run it continues; empty:
// the run id), the program's hash and declared budget, strict flows. The caller adds what is its
// own: the trace, the approval store or approve-all, the adapter kind, a replay plan.
BrokerOptions brokerOptionsFor(const Module& module, const HostModel& host, const Policy& policy, std::string runId,
                               bool strictFlows, std::string idempotencyRoot = "");

// main's arguments from `given`, an object with one entry per parameter: each value checked
// against the parameter's type and tagged as the host's `input` lines say (undeclared: untrusted).
// Empty with `problem` set ("unknown input 'x'", "missing input 'x'", "input 'x' does not fit its
// type: …", "input 'x' does not fit in the run's memory limit") when they do not fit.
std::vector<Value> mainArguments(const LoadedProgram& program, const HostModel& host, Heap& heap,
                                 const nlohmann::json& given, std::string& problem);

// A completed run's result as JSON and its deep tags (names). A result whose JSON text would be
// longer than `maxBytes` is null.
struct RunResult {
    Json value = nullptr;
    Json tags = Json::array();
};
RunResult resultOf(Run& run, size_t maxBytes = SIZE_MAX);

// A failure as the `--json` envelopes show it: {code, name, message, line, col, details?}.
Json failureJson(const RunFailure& failure);

// Where a state directory keeps a run's records (docs/broker.md "Traces", "Resume and replay"):
// the trace `runs/<run id>.jsonl`; the lock `runs/<idempotency root>.lock`, held by the one process that runs
// or continues the run (a resume shares its run's root, so it takes the same lock); the approval
// store `approvals.json`, shared by every run of the directory; the log `logs/<run id>.mcp.log` that
// the run's MCP servers write their stderr to (docs/adapters.md "MCP servers as capabilities").
std::filesystem::path runTracePath(const std::filesystem::path& stateDir, std::string_view runId);
std::filesystem::path mcpLogPath(const std::filesystem::path& stateDir, std::string_view runId);
std::filesystem::path runLockPath(const std::filesystem::path& stateDir, std::string_view idempotencyRoot);
std::filesystem::path approvalStorePath(const std::filesystem::path& stateDir);

// Why a state directory cannot be used as asked: the message, and what to do about it.
struct StateProblem {
    std::string message;
    std::string hint;
};

// The newest run that continues `runId` (resumes of resumes) in `stateDir`, so that resuming an
// old run id again answers every call any of its resumes made from a trace: `runId` itself when
// none does. Only the first record of each trace is read (verified); only traces named by their
// own well-formed run id count. A trace whose first line is missing or cut short is a run that
// never started and is skipped; one whose first line is damaged could be a resume of this run, so
// it is a problem (nullopt): continuing from an older record could send again what that run
// recorded as done. Call it holding the run's lock, so no resume starts meanwhile.
std::optional<std::string> newestResumeOf(const std::filesystem::path& stateDir, const std::string& runId,
                                          StateProblem& problem);

// What a trace's first event records about the run (docs/broker.md "Traces").
struct RunStart {
    std::string runId;
    std::string idempotencyRoot;  // the run id, or for a resume the root of the run it continues
    const Module* module = nullptr;  // program name, program and host hashes
    std::string path;                // the program file as given
    const Policy* policy = nullptr;  // its hash; null (or allow-all) records policy_hash null
    nlohmann::json inputs = nlohmann::json::object();
    std::string mode;                         // the adapter kind: fixtures, live, process, embedder
    // The adapters the run opened (session/run_adapters.h), recorded as `adapters` so a resume
    // opens them again; for the last process adapter, also `adapter_command` and `adapter_cwd`.
    std::optional<std::vector<AdapterSpec>> adapters;
    size_t replaying = 0;                     // calls a resume answers from the old trace
    bool strictFlows = false;                 // recorded only when true
    std::optional<std::string> resumedFrom;     // the run a resume continues
    Json inFlight;                              // a resume's calls whose outcome is unknown (null: none)
    std::optional<std::string> signer;          // a signed .rbc: signerName of its key
    std::optional<std::string> trustedKey;      // its name in the trust directory that admitted it
};
Json runStartEvent(const RunStart& start);

// Starts a run's record in `stateDir`: creates the trace runs/<run id>.jsonl and writes its
// run_start durably (synced), before anything can be dispatched. Returns nothing, or why not:
// "the trace cannot be created", or "the trace cannot be written (…)" — then the file is removed,
// since nothing in it could be resumed. The message names no path: the caller names the state
// directory, the one thing to fix.
std::optional<std::string> beginRunRecord(const std::filesystem::path& stateDir, const RunStart& start,
                                          TraceWriter& trace);

// The `run_end` events (docs/broker.md "Traces").
Json runEndPaused(const std::string& runId, const std::string& digest);
Json runEndFailed(const std::string& runId, const RunFailure& failure);
Json runEndCompleted(const std::string& runId, const RunResult& result, double spentUsd);

// Whether a replay — `run`, re-executed by `broker` answering every call from `plan` and nothing
// live — reproduced the recorded run (docs/broker.md "Resume and replay"). The broker has
// compared each call as it was made; this compares what is left with the recorded `run_end`:
// that every recorded call was made, then the outcome — the same pause for the same call, the same
// error code, or the same result with the same tags. A trace without a `run_end` (the recorded run
// was stopped) is reproduced when every call is.
struct ReplayVerdict {
    bool reproduced = false;
    // Not reproduced: the R0601 message naming the first difference (the trace line of a
    // `run_end`), and whether the replay's own failure explains it, so it is worth showing first.
    std::string divergence;
    bool showFailure = false;
    // Reproduced: how the recorded run ended when that was not a result ("the run failed with
    // R0303 as recorded"), else empty.
    std::string outcome;
};
ReplayVerdict replayVerdict(const ReplayPlan& plan, Run& run, RunStatus status, const Broker& broker);

}  // namespace remit
