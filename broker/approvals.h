// The approval store `<state>/approvals.json`: one file, keyed by the approval digest, shared by
// every run in that state directory:
//   {"approved": {D: {by, at, request}},
//    "consumed": {D: {by, run_id, at, idempotency_key, approved_at, request, approvers}},
//    "pending": {D: {resource, site, args, program_hash, reasons, run_id, requested_at}},
//    "denied": {D: {by, at, reason, request}}, "refused": {D: {by, reason, run_id, at, idempotency_key}}}
// written as sorted JSON with indent 2 (Python's json.dump(indent=2, sort_keys=True)), `at` a Unix
// time float. An approval is single use: deciding consumes it, for one attempt (idempotency key);
// a dispatch that never reaches the adapter gives it back (restore).
// A denial is single use too: the attempt that meets it fails and moves it to `refused`, and the
// same call made again asks again. The prototype's store has the first three sections; a store
// without the others reads as having them empty (docs/operators.md). A request whose grant asks
// for a quorum or an expiry also holds `quorum`, `expires_at` and the approvals given so far
// (`approvals`: [{by, at}]); an approval reached by a quorum names its `approvers`.
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

// An operator's refusal of a pending request (`remitvm approvals deny`), or a request that expired
// before enough approvers approved it.
struct Denial {
    std::string by, reason;
    bool expired = false;  // no operator: the request's `expires` passed without its quorum
};

// What an approval just given did (approve()): a request may need several approvers (`quorum`)
// within a time (`expires`), set by the grant (docs/policy.md, `approval`).
struct ApprovalProgress {
    int approvers = 0;      // distinct approvers so far, this one included
    int quorum = 1;         // how many it needs
    bool granted = false;   // the quorum is reached: the run may use it
    bool expired = false;   // refused: the request expired (nothing was changed)
    bool repeated = false;  // refused: this approver had already approved it (nothing was changed)
    double expiresAt = 0;   // when it expires (Unix time), 0 for never
};

// The approval store of a state directory (the file), and the base of the stores that keep the
// same sections elsewhere (session/pg_store.cpp). The rules — single use, one use per attempt,
// denials, quorum and expiry — are written once, on the sections as JSON (the *In functions
// below), and every store applies them under its own lock.
class ApprovalStore {
public:
    explicit ApprovalStore(std::string path) : path_(std::move(path)) {}
    virtual ~ApprovalStore() = default;
    ApprovalStore(const ApprovalStore&) = delete;
    ApprovalStore& operator=(const ApprovalStore&) = delete;

    // Reads the file (a missing file is an empty store). False with `error` when it cannot be read
    // or does not parse.
    virtual bool load(std::string& error);
    // Whether a run can use the store: before a run starts, so one that cannot be read is refused
    // before anything is performed. The file store reads it; a store that decides one digest at
    // a time in its own transactions needs nothing read up front.
    virtual bool usable(std::string& error) { return load(error); }
    // A granted approval for `digest` is consumed by the attempt `idempotencyKey` and its approver
    // returned. An approval that attempt already consumed is returned again: the run that consumed it
    // stopped before the call was recorded (a crash), and its resume is the same attempt — the one
    // effect the approval allows. Otherwise the request is recorded under `pending` and nullopt
    // returned. `error` is set (and nullopt returned) if the store cannot be read, locked or written.
    // A denied request is neither: nullopt is returned with `*denied` set (when given), and the
    // denial is used up by this attempt; so is a request that expired before its quorum
    // (`denied->expired`). `pendingRequest` may carry `quorum` (approvers needed, default 1) and
    // `expires_s` (seconds from the first request, default never), from the grant.
    virtual std::optional<std::string> decide(const std::string& digest, const nlohmann::json& pendingRequest,
                                              const std::string& runId, const std::string& idempotencyKey,
                                              std::string& error, Denial* denied = nullptr);
    // `remitvm approve`: the pending digests starting with `prefix` (or equal to it, when `exact`).
    std::vector<std::string> pendingMatching(const std::string& prefix, bool exact = false) const;
    const nlohmann::json& pending(const std::string& digest) const { return data_["pending"][digest]; }
    // A consumed approval whose digest starts with `prefix` ({by, run_id, at}), for a clear error.
    std::optional<std::pair<std::string, nlohmann::json>> consumedMatching(const std::string& prefix) const;
    // The approval `idempotencyKey` consumed goes back to `approved` (and its request to `pending`):
    // the attempt's dispatch never reached the adapter, so nothing was done with it. When the same
    // call has been denied since, the denial wins: the approval is dropped (false) and the attempt
    // meets the denial when it resumes. `request` is the pending request, used when the consumed entry does
    // not keep the one it was approved as (a store written before). False with an empty `error`
    // when that attempt consumed no approval of `digest`; false with `error` when the store cannot
    // be read, locked or written.
    virtual bool restore(const std::string& digest, const std::string& idempotencyKey, const nlohmann::json& request,
                         std::string& error);
    // Records `by`'s approval of a pending request (it stays pending until consumed); with a quorum,
    // the request is approved once that many distinct approvers have approved it. True when the
    // approval was recorded (`progress` says whether the quorum is reached). False with `error`
    // when the store cannot be read, locked or written; false with an empty `error` when the
    // request is no longer pending, has expired, or `by` already approved it (`progress` says which).
    virtual bool approve(const std::string& digest, const std::string& by, std::string& error,
                         ApprovalProgress* progress = nullptr);
    // Refuses a pending request: it leaves `pending` (and `approved`, if it was approved but not yet
    // used) for `denied`. The same results as approve.
    virtual bool deny(const std::string& digest, const std::string& by, const std::string& reason, std::string& error);
    // Everything as last loaded, for `remitvm approvals list|show`.
    const nlohmann::json& contents() const { return data_; }
    // Where the store is, for messages: its file, or the database that holds it.
    virtual std::string where() const { return path_; }

    // The rules, applied to `doc` — the five sections, whole or holding only `digest`'s entries — at
    // Unix time `now`. Each changes `doc` as the operation does and returns what it decided; the
    // stores call them under their locks, and tests compare them with a reference model.
    struct Decided {
        std::optional<std::string> by;  // granted, by these approvers
        std::optional<Denial> denial;   // refused: denied or expired
    };
    static Decided decideIn(nlohmann::json& doc, const std::string& digest, const nlohmann::json& pendingRequest,
                            const std::string& runId, const std::string& idempotencyKey, double now);
    // False (nothing changed) when the request is not pending, has expired or `by` already approved it.
    static bool approveIn(nlohmann::json& doc, const std::string& digest, const std::string& by, double now,
                          ApprovalProgress& progress);
    static bool denyIn(nlohmann::json& doc, const std::string& digest, const std::string& by,
                       const std::string& reason, double now);
    // False when the attempt `idempotencyKey` consumed no approval of `digest` (nothing changed),
    // or when the call has been denied since (the consumed approval is dropped).
    static bool restoreIn(nlohmann::json& doc, const std::string& digest, const std::string& idempotencyKey,
                          const nlohmann::json& request, double now);
    // An empty document: every section an empty object.
    static nlohmann::json emptyDocument();

protected:
    ApprovalStore() = default;  // for stores without a file
    nlohmann::json data_ = emptyDocument();

private:
    std::string path_;
    bool save(std::string& error) const;
};

}  // namespace remit
