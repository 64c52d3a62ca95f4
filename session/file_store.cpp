// The file store (see store.h): a state directory in the prototype's layout.
#include <fmt/format.h>

#include <filesystem>

#include "session/run_lifecycle.h"
#include "session/store.h"

namespace remit {

std::filesystem::path budgetLedgerPath(const std::filesystem::path& stateDir) { return stateDir / "budgets.json"; }

namespace {

class FileRunHold : public RunHold {
public:
    RunLock lock;
};

}  // namespace

FileStore::FileStore(std::filesystem::path stateDir)
    : stateDir_(std::move(stateDir)),
      approvals_(approvalStorePath(stateDir_).string()),
      ledger_(budgetLedgerPath(stateDir_).string()) {}

std::string FileStore::describe() const { return "the state directory " + stateDir_.string(); }

std::unique_ptr<TraceWriter> FileStore::createTrace(const std::string& runId, std::string& error, bool synced) {
    auto trace = std::make_unique<TraceWriter>();
    trace->setSynced(synced);
    if (!trace->open(runTracePath(stateDir_, runId).string(), error)) return nullptr;
    return trace;
}

void FileStore::discardTrace(const std::string& runId) {
    std::error_code ec;
    std::filesystem::remove(runTracePath(stateDir_, runId), ec);
}

std::string FileStore::traceName(const std::string& runId) const { return runTracePath(stateDir_, runId).string(); }

bool FileStore::hasTrace(const std::string& runId) {
    std::error_code ec;
    return std::filesystem::is_regular_file(runTracePath(stateDir_, runId), ec);
}

TraceFile FileStore::readTrace(const std::string& runId, TraceCheck check, size_t maxRecords) {
    return remit::readTrace(runTracePath(stateDir_, runId).string(), check, maxRecords);
}

std::vector<std::string> FileStore::traceIds(const std::string&) {
    std::vector<std::string> ids;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(stateDir_ / "runs", ec))
        // Only regular files: opening a FIFO named like a trace would wait forever.
        if (entry.path().extension() == ".jsonl" && entry.is_regular_file(ec))
            ids.push_back(entry.path().stem().string());
    return ids;
}

std::unique_ptr<RunHold> FileStore::holdRun(const std::string& root, std::string& error) {
    auto hold = std::make_unique<FileRunHold>();
    if (!hold->lock.acquire(runLockPath(stateDir_, root).string(), error)) return nullptr;
    return hold;
}

}  // namespace remit
