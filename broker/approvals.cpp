// See approvals.h.
#include "broker/approvals.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/canonical_json.h"
#include "runtime/hash.h"
#include "runtime/json_text.h"

namespace remit {

std::string approvalDigest(const std::string& programHash, const std::string& site, const std::string& resource,
                           const nlohmann::ordered_json& args) {
    nlohmann::ordered_json request = {
        {"args", args}, {"program_hash", programHash}, {"resource", resource}, {"site", site}};
    return sha256Hex(canonicalJson(request));
}

namespace {

// The largest approval store read: thousands of pending calls with their arguments fit easily.
constexpr size_t kMaxStoreBytes = size_t(64) << 20;

double unixNow() {
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
}

// Holds `<store>.lock` exclusively while alive: a read-modify-write of the store by one process
// (a run deciding, `approve`) cannot lose another's change.
class StoreLock {
public:
    explicit StoreLock(const std::string& storePath) {
        std::error_code ec;
        std::filesystem::path p(storePath);
        if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
        fd_ = ::open((storePath + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd_ >= 0) ::flock(fd_, LOCK_EX);
    }
    ~StoreLock() {
        if (fd_ >= 0) ::close(fd_);
    }
    StoreLock(const StoreLock&) = delete;
    StoreLock& operator=(const StoreLock&) = delete;

private:
    int fd_ = -1;
};

}  // namespace

bool ApprovalStore::load(std::string& error) {
    // A regular file of bounded size and nesting (runtime/json_text.h), so a FIFO, a device or a
    // store nested 200,000 deep is an error, never a hang or a crash.
    bool missing = false;
    std::string problem;
    std::optional<nlohmann::json> doc = readJsonFile(path_, kMaxStoreBytes, "an approval store", problem, &missing);
    if (!doc && missing) return true;  // no store yet
    if (!doc) {
        error = fmt::format("{} is not a valid approval store: {}", path_, problem);
        return false;
    }
    nlohmann::json& parsed = *doc;
    if (!parsed.is_object()) {
        error = fmt::format("{} is not a valid approval store (expected a JSON object)", path_);
        return false;
    }
    for (const char* section : {"approved", "consumed", "pending"}) {
        auto it = parsed.find(section);
        if (it == parsed.end()) continue;
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
    for (auto it = parsed.begin(); it != parsed.end(); ++it) data_[it.key()] = it.value();
    return true;
}

bool ApprovalStore::save(std::string& error) const {
    std::filesystem::path p(path_);
    std::error_code ec;
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
    std::string text = dumpJson(data_, JsonTextStyle{true, true, 2, ",", ": "});
    std::string tmp = fmt::format("{}.tmp{}", path_, static_cast<long>(::getpid()));
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
    if (f) {
        ok = std::fflush(f) == 0 && ok;
        ok = ::fsync(::fileno(f)) == 0 && ok;
        ok = std::fclose(f) == 0 && ok;
    }
    if (ok) std::filesystem::rename(tmp, p, ec);
    if (!ok || ec) {
        std::filesystem::remove(tmp, ec);
        error = fmt::format("cannot write the approval store {}", path_);
        return false;
    }
    return true;
}

std::optional<std::string> ApprovalStore::decide(const std::string& digest, const nlohmann::json& pendingRequest,
                                                 const std::string& runId, std::string& error) {
    StoreLock lock(path_);
    if (!load(error)) return std::nullopt;  // what others wrote since this run started counts
    nlohmann::json& approved = data_["approved"];
    if (auto it = approved.find(digest); it != approved.end()) {
        std::string by = it->contains("by") && (*it)["by"].is_string() ? (*it)["by"].get<std::string>() : "unknown";
        approved.erase(it);
        data_["consumed"][digest] = {{"by", by}, {"run_id", runId}, {"at", unixNow()}};
        data_["pending"].erase(digest);
        if (!save(error)) return std::nullopt;
        return by;
    }
    data_["pending"][digest] = pendingRequest;
    save(error);
    return std::nullopt;
}

std::vector<std::string> ApprovalStore::pendingMatching(const std::string& prefix) const {
    std::vector<std::string> out;
    for (auto it = data_["pending"].begin(); it != data_["pending"].end(); ++it)
        if (it.key().starts_with(prefix)) out.push_back(it.key());
    return out;
}

std::optional<std::pair<std::string, nlohmann::json>> ApprovalStore::consumedMatching(const std::string& prefix) const {
    for (auto it = data_["consumed"].begin(); it != data_["consumed"].end(); ++it)
        if (it.key().starts_with(prefix)) return std::pair{it.key(), it.value()};
    return std::nullopt;
}

bool ApprovalStore::approve(const std::string& digest, const std::string& by, std::string& error) {
    StoreLock lock(path_);
    if (!load(error)) return false;
    auto it = data_["pending"].find(digest);
    if (it == data_["pending"].end()) return false;
    data_["approved"][digest] = {{"by", by}, {"at", unixNow()}, {"request", *it}};
    return save(error);
}

}  // namespace remit
