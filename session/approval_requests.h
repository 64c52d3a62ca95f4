// What an operator sees of, and does to, the approval store (docs/operators.md): the pending
// requests, one request in full with its provenance and the program's manifest, finding a request
// by digest, prefix or run id, and approving or denying it. One implementation for every front end
// that serves operators: `remitvm approvals …` (cli/broker_commands.cpp) prints it as text or JSON,
// `remitvm inbox` (cli/inbox_http.cpp) renders it as HTML. Every read and write of the store goes
// through broker/approvals.h's ApprovalStore, and every trace it reads through session/store.h's
// Store, so the same code serves a state directory and a fleet's PostgreSQL store.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "broker/approvals.h"
#include "runtime/json_text.h"
#include "session/store.h"

namespace remit {

// One pending request as `approvals list --json` gives it: {"digest", "resource", "site", "args",
// "reasons", "program_hash", "run_id", "requested_at", "age_s", "status": "pending" | "approved" |
// "expired", "approved_by", "quorum", "approvers", "expires_at"} (`quorum` 1, `approvers` the
// approvals given so far, `expires_at` a Unix time or null: docs/operators.md, "Quorum and
// expiry"). Every member of the stored entry is read with its type checked (a hand-edited
// store never makes this throw); `run_id`, `requested_at` and `age_s` are null for a request the
// prototype recorded.
nlohmann::json pendingRequestJson(const ApprovalStore& store, const std::string& digest);

// Every pending request of the store as loaded, oldest first (the one that waited longest is the
// first to decide; requests without a time first).
nlohmann::json pendingRequestsJson(const ApprovalStore& store);

// One request in full (`approvals show --json`): pendingRequestJson plus what the run that asked
// recorded and what its program says about the call —
//   "program": {"name", "path", "program_hash"} | null   from the run's run_start;
//   "inputs": the run's inputs | null;
//   "arg_tags": {param: [tag]}, "derived_from": [seq], "arg_derived_from": {param: [seq]} (null
//     when the run's pending_approval did not record them);
//   "provenance": [call]: every call the arguments derive from, directly or through other calls,
//     in seq order, each {"seq", "resource", "site", "args", "arg_tags", "derived_from", "status",
//     "result", "result_tags", "error", "approved_by"};
//   "manifest": {"resource", "call_site", "flows", "worst_case_cost_usd", "budget_usd"}, members
//     null or empty when the program cannot be read or checked any more.
// `events` receives the run's trace (for renderWhy), empty when there is none.
// The approval store read is `records.approvals()` as last loaded.
nlohmann::json requestDetailsJson(Store& records, const std::string& digest,
                                  std::vector<nlohmann::json>* events = nullptr);

// "3 min ago" for a Unix time; empty when it is not a number (a prototype's request).
std::string ageText(const nlohmann::json& unixTime);

// The pending request an operator's ID names: a digest, a unique prefix of one, or a run id (the
// request that run's trace paused at, which must then be pending exactly: a digest read from a file
// is never a prefix that could match another run's request). On failure `digest` is empty and
// `error` (and maybe `hint`) say why; `error` names the store it looked in. `stateDirGiven` says
// whether the operator named the state directory or store (else the hint suggests --state-dir).
struct PendingLookup {
    std::string digest, error, hint;
};
PendingLookup findPendingRequest(Store& records, const std::string& id, bool stateDirGiven = true);

// Records an operator's decision on a pending request under `by`. False with `error` saying why
// (the store cannot be read, locked or written; the request is no longer pending, has expired, or
// `by` already approved it) and maybe `hint`. An approval recorded short of its quorum is true with
// `progress->granted` false (`progress` may be null).
bool approveRequest(ApprovalStore& store, const std::string& digest, const std::string& by, std::string& error,
                    ApprovalProgress* progress = nullptr, std::string* hint = nullptr);
bool denyRequest(ApprovalStore& store, const std::string& digest, const std::string& by, const std::string& reason,
                 std::string& error);

}  // namespace remit
