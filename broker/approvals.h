// The approval store `<state>/approvals.json` (shared/PROTOTYPE.md §2.7): one file, keyed by the
// approval digest, shared by every run in that state directory:
//   {"approved": {D: {by, at, request}}, "consumed": {D: {by, run_id, at}},
//    "pending": {D: {resource, site, args, program_hash, reasons}}}
// written as sorted JSON with indent 2 (Python's json.dump(indent=2, sort_keys=True)), `at` a Unix
// time float. An approval is single use: deciding consumes it.
//
// Invariants: every change re-reads the file under `<store>.lock` (flock) and writes it back before
// unlocking, so concurrent runs and `approve` never lose each other's changes; the file is replaced atomically (write a temporary file, then rename), so a crash
// never leaves half a store; a store that does not parse is reported, never silently reset
// (resetting would forget consumed approvals and pending requests).
#pragma once

#include <optional>
#include <utility>
#include <string>

#include <nlohmann/json.hpp>

namespace remit {

// The approval digest: SHA-256 hex of canonical {"args", "program_hash", "resource", "site"}.
std::string approvalDigest(const std::string& programHash, const std::string& site, const std::string& resource,
                           const nlohmann::ordered_json& args);

class ApprovalStore {
public:
    explicit ApprovalStore(std::string path) : path_(std::move(path)) {}

    // Reads the file (a missing file is an empty store). False with `error` when it does not parse.
    bool load(std::string& error);
    // A granted approval for `digest` is consumed and its approver returned; otherwise the request
    // is recorded under `pending` and nullopt returned. `error` is set if the file cannot be written.
    std::optional<std::string> decide(const std::string& digest, const nlohmann::json& pendingRequest,
                                      const std::string& runId, std::string& error);
    // `remitvm approve`: the pending digests starting with `prefix`.
    std::vector<std::string> pendingMatching(const std::string& prefix) const;
    const nlohmann::json& pending(const std::string& digest) const { return data_["pending"][digest]; }
    // A consumed approval whose digest starts with `prefix` ({by, run_id, at}), for a clear error.
    std::optional<std::pair<std::string, nlohmann::json>> consumedMatching(const std::string& prefix) const;
    // Moves nothing: records an approval of a pending request (it stays pending until consumed).
    bool approve(const std::string& digest, const std::string& by, std::string& error);

private:
    std::string path_;
    nlohmann::json data_ = {{"approved", nlohmann::json::object()},
                            {"consumed", nlohmann::json::object()},
                            {"pending", nlohmann::json::object()}};
    bool save(std::string& error) const;
};

}  // namespace remit
