// See approvals.h.
#include "broker/approvals.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "broker/state_file.h"
#include "runtime/canonical_json.h"
#include "runtime/hash.h"
#include "runtime/files.h"
#include "runtime/json_text.h"

namespace remit {

std::string approvalDigest(const std::string& programHash, const std::string& site, const std::string& resource,
                           const Json& args) {
    Json request = {{"args", args}, {"program_hash", programHash}, {"resource", resource}, {"site", site}};
    return sha256Hex(canonicalJson(request));
}

namespace {

// The largest approval store read: thousands of pending calls with their arguments fit easily.
constexpr size_t kMaxStoreBytes = size_t(64) << 20;
constexpr const char* kSections[] = {"approved", "consumed", "pending", "denied", "refused"};


// A string field of a store entry, or nullopt when it is missing or not a string (stores are
// edited by hand).
std::optional<std::string> stringMember(const nlohmann::json& entry, const char* key) {
    auto it = entry.find(key);
    if (it == entry.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
}

}  // namespace

bool ApprovalStore::load(std::string& error) {
    // A regular file of bounded size and nesting (runtime/json_text.h), so a FIFO, a device or a
    // store nested 200,000 deep is an error, never a hang or a crash.
    std::string text, problem;
    if (std::optional<FileProblem> unreadable = readRegularFile(path_, kMaxStoreBytes, text)) {
        if (unreadable->missing) {  // no store yet: the only store that is empty
            for (const char* section : kSections) data_[section] = nlohmann::json::object();
            return true;
        }
        error = fmt::format("cannot read the approval store {}: {}; nothing was changed", path_, unreadable->message);
        return false;
    }
    if (text.size() > kMaxStoreBytes) {
        error = tooLargeMessage(path_, kMaxStoreBytes, "an approval store");
        return false;
    }
    std::optional<nlohmann::json> doc = parseJsonText(path_, text, problem);
    if (!doc) {
        error = fmt::format("{} is not a valid approval store: {}", path_, problem);
        return false;
    }
    nlohmann::json& parsed = *doc;
    if (!parsed.is_object()) {
        error = fmt::format("{} is not a valid approval store (expected a JSON object)", path_);
        return false;
    }
    for (const char* section : kSections) {
        auto it = parsed.find(section);
        if (it == parsed.end()) {
            parsed[section] = nlohmann::json::object();
            continue;
        }
        if (!it->is_object()) {
            error = fmt::format("{}: \"{}\" must be an object of digests", path_, section);
            return false;
        }
        for (auto entry = it->begin(); entry != it->end(); ++entry)
            if (!entry->is_object()) {
                error = fmt::format("{}: \"{}\".\"{}\" must be an object", path_, section, entry.key());
                return false;
            }
    }
    data_ = std::move(parsed);  // what is on disk now, not what an earlier load saw
    return true;
}

bool ApprovalStore::save(std::string& error) const {
    std::string text = dumpJson(data_, JsonTextStyle{true, true, 2, ",", ": "});
    std::string why;
    if (!replaceStateFile(path_, text, why)) {
        error = fmt::format("cannot write the approval store {} ({})", path_, why);
        return false;
    }
    return true;
}

nlohmann::json ApprovalStore::emptyDocument() {
    nlohmann::json doc = nlohmann::json::object();
    for (const char* section : kSections) doc[section] = nlohmann::json::object();
    return doc;
}

namespace {

// How many approvers a request needs: its `quorum`, at least 1 (a hand-edited store may say 0).
int quorumOf(const nlohmann::json& request) {
    auto it = request.find("quorum");
    return it != request.end() && it->is_number_integer() ? static_cast<int>(std::clamp<int64_t>(it->get<int64_t>(), 1, 1000)) : 1;
}

std::optional<double> numberMember(const nlohmann::json& entry, const char* key) {
    auto it = entry.find(key);
    if (it == entry.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
}

// The distinct approvers of an entry: an approved entry's `approvers` (or its one `by`), a pending
// entry's `approvals` so far.
std::vector<std::string> approversOf(const nlohmann::json& entry) {
    std::vector<std::string> names;
    auto add = [&](const std::string& n) {
        if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    };
    if (auto a = entry.find("approvers"); a != entry.end() && a->is_array()) {
        for (const auto& n : *a)
            if (n.is_string()) add(n.get<std::string>());
    } else if (auto g = entry.find("approvals"); g != entry.end() && g->is_array()) {
        for (const auto& given : *g)
            if (auto by = given.is_object() ? stringMember(given, "by") : std::nullopt) add(*by);
    } else if (entry.contains("by")) {
        add(stringMember(entry, "by").value_or("unknown"));
    }
    return names;
}

std::string joinNames(const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
}

}  // namespace

ApprovalStore::Decided ApprovalStore::decideIn(nlohmann::json& doc, const std::string& digest,
                                               const nlohmann::json& pendingRequest, const std::string& runId,
                                               const std::string& idempotencyKey, double now) {
    Decided out;
    const int quorum = quorumOf(pendingRequest);
    std::vector<std::string> downgraded;  // approvers of an approval the grant's quorum has since outgrown
    nlohmann::json& approved = doc["approved"];
    if (auto it = approved.find(digest); it != approved.end()) {
        std::vector<std::string> approvers = approversOf(*it);
        // An entry in "approved" is one approval even when it names nobody (written by hand, or by
        // a tool that records no approver): "unknown" gave it, as before approvals had quorums.
        if (approvers.empty()) approvers.push_back("unknown");
        if (static_cast<int>(approvers.size()) >= quorum) {
            std::string by = stringMember(*it, "by").value_or("unknown");
            // The approval as it was is kept, so restoreIn can put it back if the dispatch it
            // allowed never reaches the adapter.
            nlohmann::json consumed = {{"by", by}, {"run_id", runId}, {"at", now}, {"idempotency_key", idempotencyKey}};
            if (auto at = numberMember(*it, "at")) consumed["approved_at"] = *at;
            if (auto request = it->find("request"); request != it->end() && request->is_object())
                consumed["request"] = *request;
            if (it->contains("approvers")) consumed["approvers"] = approvers;
            approved.erase(it);
            doc["consumed"][digest] = std::move(consumed);
            doc["pending"].erase(digest);
            out.by = by;
            return out;
        }
        // Approved by fewer than the grant now asks for: those approvals count towards the quorum.
        downgraded = std::move(approvers);
        approved.erase(it);
    }
    // Consumed by this very attempt (same key: same run family, site and k) in a run that stopped
    // before recording the call: still its one use. The entry's fields are read with their types
    // checked, as the approver above is: load() only checks that each entry is an object, and a
    // hand-edited `"by": ["x"]` must not throw here.
    if (auto it = doc["consumed"].find(digest); it != doc["consumed"].end() && !idempotencyKey.empty() &&
                                                stringMember(*it, "idempotency_key") == idempotencyKey) {
        out.by = stringMember(*it, "by").value_or("unknown");
        return out;
    }
    auto refuse = [&](Denial denial) {
        doc["pending"].erase(digest);
        doc["refused"][digest] = {{"by", denial.by},
                                  {"reason", denial.reason},
                                  {"run_id", runId},
                                  {"at", now},
                                  {"idempotency_key", idempotencyKey}};
        if (denial.expired) doc["refused"][digest]["expired"] = true;
        out.denial = std::move(denial);
        return out;
    };
    nlohmann::json& denials = doc["denied"];
    if (auto it = denials.find(digest); it != denials.end()) {
        Denial denial{stringMember(*it, "by").value_or("unknown"), stringMember(*it, "reason").value_or(""), false};
        denials.erase(it);
        return refuse(std::move(denial));
    }
    // Pending: when it was first asked for stays, the run that asked last is named, and the
    // approvals given so far are kept. It expires `expires_s` after it was first asked for.
    nlohmann::json request = pendingRequest;
    std::optional<double> expiresIn = numberMember(request, "expires_s");
    request.erase("expires_s");
    auto earlier = doc["pending"].find(digest);
    // When it was first asked for (`now` for a first request, or one recorded without a time).
    const double requestedAt =
        earlier != doc["pending"].end() ? numberMember(*earlier, "requested_at").value_or(now) : now;
    nlohmann::json carried = nlohmann::json::array();  // the approvals given so far
    if (earlier != doc["pending"].end())
        if (auto given = earlier->find("approvals"); given != earlier->end() && given->is_array()) carried = *given;
    std::vector<std::string> named = approversOf(nlohmann::json{{"approvals", carried}});
    for (const std::string& n : downgraded)
        if (std::find(named.begin(), named.end(), n) == named.end()) carried.push_back({{"by", n}, {"at", now}});
    // Enough approvers already (the grant's quorum was lowered since): granted.
    if (std::vector<std::string> names = approversOf(nlohmann::json{{"approvals", carried}});
        !names.empty() && static_cast<int>(names.size()) >= quorum) {
        std::string by = joinNames(names);
        nlohmann::json consumed = {{"by", by},       {"run_id", runId}, {"at", now}, {"idempotency_key", idempotencyKey},
                                   {"approved_at", now}, {"approvers", names}};
        if (earlier != doc["pending"].end() && earlier->is_object()) {
            consumed["request"] = *earlier;
            consumed["request"]["approvals"] = carried;
        }
        doc["consumed"][digest] = std::move(consumed);
        doc["pending"].erase(digest);
        out.by = by;
        return out;
    }
    if (expiresIn && now > requestedAt + *expiresIn) {
        size_t had = approversOf(nlohmann::json{{"approvals", carried}}).size();
        return refuse(Denial{"", fmt::format("the request expired {:.0f} s after it was made, with {} of the {} "
                                             "approval(s) it needs",
                                             *expiresIn, had, quorum),
                             true});
    }
    request["requested_at"] = requestedAt;
    request["run_id"] = runId;
    if (expiresIn) request["expires_at"] = requestedAt + *expiresIn;
    if (!carried.empty()) request["approvals"] = std::move(carried);
    doc["pending"][digest] = std::move(request);
    return out;
}

bool ApprovalStore::approveIn(nlohmann::json& doc, const std::string& digest, const std::string& by, double now,
                              ApprovalProgress& progress) {
    auto it = doc["pending"].find(digest);
    if (it == doc["pending"].end()) return false;
    nlohmann::json& entry = *it;
    progress.quorum = quorumOf(entry);
    progress.expiresAt = numberMember(entry, "expires_at").value_or(0);
    if (progress.expiresAt > 0 && now > progress.expiresAt) {
        progress.expired = true;
        return false;
    }
    if (progress.quorum <= 1 && !entry.contains("approvals")) {  // the prototype's one approver
        doc["approved"][digest] = {{"by", by}, {"at", now}, {"request", entry}};
        progress.approvers = 1;
        progress.granted = true;
        return true;
    }
    std::vector<std::string> names = approversOf(entry);
    progress.approvers = static_cast<int>(names.size());
    if (std::find(names.begin(), names.end(), by) != names.end()) {
        progress.repeated = true;
        return false;
    }
    nlohmann::json given = entry.contains("approvals") && entry["approvals"].is_array() ? entry["approvals"]
                                                                                         : nlohmann::json::array();
    given.push_back({{"by", by}, {"at", now}});
    entry["approvals"] = std::move(given);
    names.push_back(by);
    progress.approvers = static_cast<int>(names.size());
    if (progress.approvers >= progress.quorum) {
        doc["approved"][digest] = {{"by", joinNames(names)}, {"at", now}, {"request", entry}, {"approvers", names}};
        progress.granted = true;
    }
    return true;
}

bool ApprovalStore::denyIn(nlohmann::json& doc, const std::string& digest, const std::string& by,
                           const std::string& reason, double now) {
    auto it = doc["pending"].find(digest);
    if (it == doc["pending"].end()) return false;
    doc["denied"][digest] = {{"by", by}, {"at", now}, {"reason", reason}, {"request", *it}};
    doc["pending"].erase(it);
    doc["approved"].erase(digest);  // a denial overrides an approval not yet used
    return true;
}

bool ApprovalStore::restoreIn(nlohmann::json& doc, const std::string& digest, const std::string& idempotencyKey,
                              const nlohmann::json& request, double now) {
    auto it = doc["consumed"].find(digest);
    if (it == doc["consumed"].end() || idempotencyKey.empty() ||
        stringMember(*it, "idempotency_key") != idempotencyKey)
        return false;
    // Denied since (another run asked for the same call and the operator refused it): the denial
    // is the last word, so the approval is not given back; nor is it this attempt's any more, so
    // the resume meets the denial instead of reusing it.
    if (doc["denied"].contains(digest)) {
        doc["consumed"].erase(it);
        return false;
    }
    nlohmann::json asked = request;
    if (auto kept = it->find("request"); kept != it->end() && kept->is_object()) asked = *kept;
    nlohmann::json back = {{"by", stringMember(*it, "by").value_or("unknown")},
                           {"at", numberMember(*it, "approved_at").value_or(now)},
                           {"request", asked}};
    // A quorum's approval goes back with its approvers, so it still meets the quorum.
    if (auto names = it->find("approvers"); names != it->end() && names->is_array()) back["approvers"] = *names;
    doc["approved"][digest] = std::move(back);
    doc["pending"][digest] = asked;
    doc["consumed"].erase(it);
    return true;
}

std::optional<std::string> ApprovalStore::decide(const std::string& digest, const nlohmann::json& pendingRequest,
                                                 const std::string& runId, const std::string& idempotencyKey,
                                                 std::string& error, Denial* denied) {
    StateFileLock lock(path_, "the approval store", error);
    if (!lock.held()) return std::nullopt;
    if (!load(error)) return std::nullopt;  // what others wrote since this run started counts
    // The rules change only `digest`'s entries; a decision that changed none (this attempt's own
    // consumed approval, met again) writes nothing. One that did is saved whatever it returns: an
    // approval outgrown by the grant's quorum is dropped even when the attempt's own consumed
    // approval answers, as in every store.
    auto entriesOf = [&digest](const nlohmann::json& doc) {
        nlohmann::json out = nlohmann::json::object();
        for (const auto& [section, entries] : doc.items())
            if (entries.contains(digest)) out[section] = entries[digest];
        return out;
    };
    nlohmann::json before = entriesOf(data_);
    Decided decided = decideIn(data_, digest, pendingRequest, runId, idempotencyKey, unixNow());
    if (entriesOf(data_) != before && !save(error)) return std::nullopt;
    if (decided.denial && denied) *denied = std::move(*decided.denial);
    return decided.by;
}

std::vector<std::string> ApprovalStore::pendingMatching(const std::string& prefix, bool exact) const {
    std::vector<std::string> out;
    for (auto it = data_["pending"].begin(); it != data_["pending"].end(); ++it)
        if (exact ? it.key() == prefix : it.key().starts_with(prefix)) out.push_back(it.key());
    return out;
}

std::optional<std::pair<std::string, nlohmann::json>> ApprovalStore::consumedMatching(const std::string& prefix) const {
    for (auto it = data_["consumed"].begin(); it != data_["consumed"].end(); ++it)
        if (it.key().starts_with(prefix)) return std::pair{it.key(), it.value()};
    return std::nullopt;
}

bool ApprovalStore::restore(const std::string& digest, const std::string& idempotencyKey,
                            const nlohmann::json& request, std::string& error) {
    StateFileLock lock(path_, "the approval store", error);
    if (!lock.held()) return false;
    if (!load(error)) return false;
    nlohmann::json before = data_["consumed"];
    bool kept = restoreIn(data_, digest, idempotencyKey, request, unixNow());
    if (data_["consumed"] != before && !save(error)) return false;
    return kept;
}

bool ApprovalStore::approve(const std::string& digest, const std::string& by, std::string& error,
                            ApprovalProgress* progress) {
    StateFileLock lock(path_, "the approval store", error);
    if (!lock.held()) return false;
    if (!load(error)) return false;
    ApprovalProgress local;
    ApprovalProgress& p = progress ? *progress : local;
    return approveIn(data_, digest, by, unixNow(), p) && save(error);
}

bool ApprovalStore::deny(const std::string& digest, const std::string& by, const std::string& reason,
                         std::string& error) {
    StateFileLock lock(path_, "the approval store", error);
    if (!lock.held()) return false;
    if (!load(error)) return false;
    return denyIn(data_, digest, by, reason, unixNow()) && save(error);
}

}  // namespace remit
