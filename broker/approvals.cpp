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

double unixNow() {
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
}

// Holds `<store>.lock` exclusively while alive: a read-modify-write of the store by one process
// (a run deciding, `approve`) cannot lose another's change. flock needs no write access, so the
// file is opened read-only (a lock file made by another user still locks).
class StoreLock {
public:
    StoreLock(const std::string& storePath, std::string& error) {
        std::error_code ec;
        std::filesystem::path p(storePath);
        if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
        std::string path = storePath + ".lock";
        fd_ = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
        int rc = -1;
        if (fd_ >= 0)
            do rc = ::flock(fd_, LOCK_EX);
            while (rc != 0 && errno == EINTR);
        if (rc != 0) {
            error = fmt::format("cannot lock the approval store: {} ({}); nothing was changed", path,
                                std::strerror(errno));
            if (fd_ >= 0) ::close(fd_);
            fd_ = -1;
        }
    }
    ~StoreLock() {
        if (fd_ >= 0) ::close(fd_);
    }
    StoreLock(const StoreLock&) = delete;
    StoreLock& operator=(const StoreLock&) = delete;
    bool held() const { return fd_ >= 0; }

private:
    int fd_ = -1;
};

// A string field of a store entry, or nullopt when it is missing or not a string (stores are
// edited by hand).
std::optional<std::string> stringMember(const nlohmann::json& entry, const char* key) {
    auto it = entry.find(key);
    if (it == entry.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
}

bool writeAll(int fd, const std::string& text) {
    for (size_t done = 0; done < text.size();) {
        ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += static_cast<size_t>(n);
    }
    return true;
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
    std::filesystem::path p(path_);
    std::error_code ec;
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
    std::string text = dumpJson(data_, JsonTextStyle{true, true, 2, ",", ": "});
    // One temporary name: writers are serialised by the lock, and one killed half-way leaves only
    // this file, which the next save truncates and reuses.
    std::string tmp = path_ + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    bool ok = fd >= 0 && writeAll(fd, text) && ::fsync(fd) == 0;
    int savedErrno = errno;
    if (fd >= 0) ok = ::close(fd) == 0 && ok;
    if (ok) std::filesystem::rename(tmp, p, ec);
    if (!ok || ec) {
        std::filesystem::remove(tmp, ec);
        error = fmt::format("cannot write the approval store {} ({})", path_, std::strerror(savedErrno));
        return false;
    }
    // Earlier versions used `<store>.tmp<pid>`; a killed writer left those behind.
    std::string stem = p.filename().string() + ".tmp";
    for (const auto& entry : std::filesystem::directory_iterator(p.has_parent_path() ? p.parent_path() : ".", ec)) {
        std::string name = entry.path().filename().string();
        if (name.size() > stem.size() && name.starts_with(stem) &&
            std::all_of(name.begin() + static_cast<std::ptrdiff_t>(stem.size()), name.end(),
                        [](char c) { return c >= '0' && c <= '9'; }))
            std::filesystem::remove(entry.path(), ec);
    }
    return true;
}

std::optional<std::string> ApprovalStore::decide(const std::string& digest, const nlohmann::json& pendingRequest,
                                                 const std::string& runId, const std::string& idempotencyKey,
                                                 std::string& error, Denial* denied) {
    StoreLock lock(path_, error);
    if (!lock.held()) return std::nullopt;
    if (!load(error)) return std::nullopt;  // what others wrote since this run started counts
    nlohmann::json& approved = data_["approved"];
    if (auto it = approved.find(digest); it != approved.end()) {
        std::string by = stringMember(*it, "by").value_or("unknown");
        // The approval as it was is kept, so restore() can put it back if the dispatch it allowed
        // never reaches the adapter.
        nlohmann::json consumed = {
            {"by", by}, {"run_id", runId}, {"at", unixNow()}, {"idempotency_key", idempotencyKey}};
        if (auto at = it->find("at"); at != it->end() && at->is_number()) consumed["approved_at"] = *at;
        if (auto request = it->find("request"); request != it->end() && request->is_object())
            consumed["request"] = *request;
        approved.erase(it);
        data_["consumed"][digest] = std::move(consumed);
        data_["pending"].erase(digest);
        if (!save(error)) return std::nullopt;
        return by;
    }
    // Consumed by this very attempt (same key: same run family, site and k) in a run that stopped
    // before recording the call: still its one use. The entry's fields are read with their types
    // checked, as the approver above is: load() only checks that each entry is an object, and a
    // hand-edited `"by": ["x"]` must not throw here.
    if (auto it = data_["consumed"].find(digest); it != data_["consumed"].end() && !idempotencyKey.empty() &&
                                                  stringMember(*it, "idempotency_key") == idempotencyKey)
        return stringMember(*it, "by").value_or("unknown");
    nlohmann::json& denials = data_["denied"];
    if (auto it = denials.find(digest); it != denials.end()) {
        Denial denial{stringMember(*it, "by").value_or("unknown"), stringMember(*it, "reason").value_or("")};
        denials.erase(it);
        data_["pending"].erase(digest);
        data_["refused"][digest] = {{"by", denial.by},
                                    {"reason", denial.reason},
                                    {"run_id", runId},
                                    {"at", unixNow()},
                                    {"idempotency_key", idempotencyKey}};
        if (!save(error)) return std::nullopt;
        if (denied) *denied = std::move(denial);
        return std::nullopt;
    }
    // Pending: when it was first asked for stays, the run that asked last is named.
    nlohmann::json request = pendingRequest;
    auto earlier = data_["pending"].find(digest);
    bool askedBefore = earlier != data_["pending"].end() && earlier->contains("requested_at");
    request["requested_at"] = askedBefore ? (*earlier)["requested_at"] : nlohmann::json(unixNow());
    request["run_id"] = runId;
    data_["pending"][digest] = std::move(request);
    if (!save(error)) return std::nullopt;
    return std::nullopt;
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
    StoreLock lock(path_, error);
    if (!lock.held()) return false;
    if (!load(error)) return false;
    auto it = data_["consumed"].find(digest);
    if (it == data_["consumed"].end() || idempotencyKey.empty() ||
        stringMember(*it, "idempotency_key") != idempotencyKey)
        return false;
    nlohmann::json asked = request;
    if (auto kept = it->find("request"); kept != it->end() && kept->is_object()) asked = *kept;
    auto at = it->find("approved_at");
    data_["approved"][digest] = {{"by", stringMember(*it, "by").value_or("unknown")},
                                 {"at", at != it->end() && at->is_number() ? *at : nlohmann::json(unixNow())},
                                 {"request", asked}};
    // Pending again, unless the operator has since denied the same call (a denial stays one).
    if (!data_["denied"].contains(digest)) data_["pending"][digest] = asked;
    data_["consumed"].erase(it);
    return save(error);
}

bool ApprovalStore::approve(const std::string& digest, const std::string& by, std::string& error) {
    StoreLock lock(path_, error);
    if (!lock.held()) return false;
    if (!load(error)) return false;
    auto it = data_["pending"].find(digest);
    if (it == data_["pending"].end()) return false;
    data_["approved"][digest] = {{"by", by}, {"at", unixNow()}, {"request", *it}};
    return save(error);
}

bool ApprovalStore::deny(const std::string& digest, const std::string& by, const std::string& reason,
                         std::string& error) {
    StoreLock lock(path_, error);
    if (!lock.held()) return false;
    if (!load(error)) return false;
    auto it = data_["pending"].find(digest);
    if (it == data_["pending"].end()) return false;
    data_["denied"][digest] = {{"by", by}, {"at", unixNow()}, {"reason", reason}, {"request", *it}};
    data_["pending"].erase(it);
    data_["approved"].erase(digest);  // a denial overrides an approval not yet used
    return save(error);
}

}  // namespace remit
