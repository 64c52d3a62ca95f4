// Re-executing a recorded run: what `resume` and `replay` take from a trace. Both re-run the
// program from the recorded inputs and answer every recorded call from the trace instead of
// dispatching it; `resume` then continues live, `replay` must not need anything live.
//
// Decisions (docs/broker.md "Resume and replay"):
// - Every recorded `call` event is replayed in order, failed ones too (replaying only the
//   successful ones makes a run that took an `else` fallback diverge on resume). A resume of a
//   run that *ended* with an error drops the failed calls at the end of the record: they are what
//   stopped the run, so they are tried again live. A run that stopped without a run_end (killed,
//   or stopped because its trace could not be written) keeps them: the uninterrupted run would
//   have gone on from them (to the next attempt of a `retry`), and so does its resume.
// - Idempotency keys are derived, never chosen: key = H(idempotency_root, site, k), where k numbers
//   the attempts at the site (idempotencyKey below). Every recorded key is recomputed when the
//   trace is read, so a trace whose key does not match its (root, site, k) is refused.
// - A dispatch whose outcome was never recorded (the process died between the `dispatch` event and
//   the `call` event) is "in flight": the resumed run reaches the same (site, k) — so the same key —
//   and sends that call again, under the approval the dispatch had consumed, so an adapter that
//   de-duplicates by key performs it at most once. Each resumed trace carries the in-flight calls
//   it has not resolved yet in its `run_start`, so a crash during a resume loses nothing. A dispatch
//   followed by a `not_delivered` event reached nobody (the adapter could not be started, say): it
//   is not in flight, and the resume makes that attempt as if for the first time.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "broker/trace.h"
#include "runtime/json_text.h"

namespace remit {

// A call recorded in an earlier trace, answered from the record.
struct RecordedCall {
    Json event;                    // the `call` event as read
    size_t line = 0;               // its line in the trace, for divergence messages
};

// A dispatch an earlier run began and never recorded the outcome of.
struct InFlightCall {
    std::string runId, resource, site, idempotencyKey, argsDigest;
    uint64_t k = 0;
    int64_t attempt = 0;
    Json approval;  // null, or {digest, approved_by}
};

struct ReplayPlan {
    std::string tracePath;
    Json start;  // the trace's run_start
    Json end;    // its last run_end, or null when the run stopped without one
    size_t endLine = 0;
    Json pendingApproval;  // the last pending_approval event, or null
    std::vector<RecordedCall> calls;
    std::vector<InFlightCall> inFlight;
    bool liveAfter = true;  // resume: continue live once the record is used up; replay: diverge
    // A resume that stopped before it had replayed every call it set out to (`replaying` in its
    // run_start): its record holds nothing its parent's does not, so a resume continues from the
    // parent's plan instead.
    bool replayUnfinished = false;
};

enum class ReplayPurpose { Resume, Replay };

// Builds the plan from a trace read by readTrace. Empty `error` on success; otherwise it names the
// trace's file and line and what is wrong (a run_start missing, a call event without its fields).
ReplayPlan planFromTrace(const TraceFile& trace, const std::string& path, ReplayPurpose purpose, std::string& error);

// A string field of a trace event, or "" when it is missing or not a string (traces may be edited).
template <class Json>
std::string stringField(const Json& event, const char* key) {
    auto it = event.find(key);
    return it != event.end() && it->is_string() ? it->template get<std::string>() : std::string();
}

// The idempotency key of the k-th attempt (0-based, counting every attempt, retries included) at
// `site` in the run family `root`: the first 32 hex digits of SHA-256 of canonical [root, site, k].
std::string idempotencyKey(const std::string& root, const std::string& site, uint64_t k);

// SHA-256 of the canonical arguments: how a `dispatch` event names them without repeating them.
std::string argsDigest(const Json& args);

// The in-flight calls as `run_start` records them, and back.
Json inFlightJson(const std::vector<InFlightCall>& calls);

}  // namespace remit
