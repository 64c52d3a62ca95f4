// The approval store `<state>/approvals.json`: one file, keyed by the approval digest, shared by
// every run in that state directory:
//   {"approved": {D: {by, at, request}},
//    "consumed": {D: {by, run_id, at, idempotency_key, approved_at, request}},
//    "pending": {D: {resource, site, args, program_hash, reasons, run_id, requested_at}},
//    "denied": {D: {by, at, reason, request}}, "refused": {D: {by, reason, run_id, at, idempotency_key}}}
// written as sorted JSON with indent 2 (Python's json.dump(indent=2, sort_keys=True)), `at` a Unix
// time float. An approval is single use: deciding consumes it, for one attempt (idempotency key);
// a dispatch that never reaches the adapter gives it back (restore).
// A denial is single use too: the attempt that meets it fails and moves it to `refused`, and the
// same call made again asks again. The prototype's store has the first three sections; a store
// without the others reads as having them empty (docs/operators.md).
//
// Invariants:
// - Only a store that does not exist is empty. One that cannot be read, does not parse or has the
//   wrong shape is an error, and nothing is written over it (that would forget consumed approvals
//   and pending requests).
// - Every change re-reads the file under `<store>.lock` (flock) and writes it back before
//   unlocking, so concurrent runs and `approve` never lose each other's changes. A lock that cannot
//   be taken is an error: no lock, no write.
// - The file is replaced atomically through one temporary name, `<store>.tmp` (written, fsynced,
//   renamed, under the lock), so a crash never leaves half a store, and a writer killed half-way
//   leaves at most that one file, which the next writer reuses.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/json_text.h"

namespace remit {

// The approval digest: SHA-256 hex of canonical {"args", "program_hash", "resource", "site"}.
std::string approvalDigest(const std::string& programHash, const std::string& site, const std::string& resource,
                           const Json& args);

// An operator's refusal of a pending request (`remitvm approvals deny`).
struct Denial {
    std::string by, reason;
};

class ApprovalStore {
public:
    explicit ApprovalStore(std::string path) : path_(std::move(path)) {}

    // Reads the file (a missing file is an empty store). False with `error` when it cannot be read
    // or does not parse.
    bool load(std::string& error);
    // A granted approval for `digest` is consumed by the attempt `idempotencyKey` and its approver
    // returned. An approval that attempt already consumed is returned again: the run that consumed it
    // stopped before the call was recorded (a crash), and its resume is the same attempt — the one
    // effect the approval allows. Otherwise the request is recorded under `pending` and nullopt
    // returned. `error` is set (and nullopt returned) if the store cannot be read, locked or written.
    // A denied request is neither: nullopt is returned with `*denied` set (when given), and the
    // denial is used up by this attempt.
    std::optional<std::string> decide(const std::string& digest, const nlohmann::json& pendingRequest,
                                      const std::string& runId, const std::string& idempotencyKey, std::string& error,
                                      Denial* denied = nullptr);
    // `remitvm approve`: the pending digests starting with `prefix` (or equal to it, when `exact`).
    std::vector<std::string> pendingMatching(const std::string& prefix, bool exact = false) const;
    const nlohmann::json& pending(const std::string& digest) const { return data_["pending"][digest]; }
    // A consumed approval whose digest starts with `prefix` ({by, run_id, at}), for a clear error.
    std::optional<std::pair<std::string, nlohmann::json>> consumedMatching(const std::string& prefix) const;
    // The approval `idempotencyKey` consumed goes back to `approved` (and its request to `pending`):
    // the attempt's dispatch never reached the adapter, so nothing was done with it. `request` is
    // the pending request, used when the consumed entry does not keep the one it was approved as
    // (a store written before). False with an empty `error` when that attempt consumed no approval
    // of `digest`; false with `error` when the store cannot be read, locked or written.
    bool restore(const std::string& digest, const std::string& idempotencyKey, const nlohmann::json& request,
                 std::string& error);
    // Moves nothing: records an approval of a pending request (it stays pending until consumed).
    // False with `error` when the store cannot be read, locked or written; false with an empty
    // `error` when the request is no longer pending.
    bool approve(const std::string& digest, const std::string& by, std::string& error);
    // Refuses a pending request: it leaves `pending` (and `approved`, if it was approved but not yet
    // used) for `denied`. The same results as approve.
    bool deny(const std::string& digest, const std::string& by, const std::string& reason, std::string& error);
    // Everything as last loaded, for `remitvm approvals list|show`.
    const nlohmann::json& contents() const { return data_; }

private:
    std::string path_;
    nlohmann::json data_ = {{"approved", nlohmann::json::object()},
                            {"consumed", nlohmann::json::object()},
                            {"pending", nlohmann::json::object()},
                            {"denied", nlohmann::json::object()},
                            {"refused", nlohmann::json::object()}};
    bool save(std::string& error) const;
};

}  // namespace remit
