// Where runs keep their records (docs/fleet.md "Stores"): one interface for the traces (run
// records and their events, the write-ahead `dispatch` records — the dispatch intents — among
// them), the approval store, the shared budget ledger, and the locks that let one process at a
// time run or continue a run (the run's lease). Two backends:
//   - FileStore (below): a state directory, `.remit/` by default, exactly the prototype's layout —
//     runs/<run id>.jsonl, runs/<root>.lock, approvals.json — plus budgets.json for shared scopes;
//   - PgStore (session/pg_store.h): the same records in PostgreSQL, shared by every worker of a
//     fleet on every machine, with the queue of submitted runs.
// The command line opens one with openStore (session/pg_store.h: `--store URL`, `--state-dir D`,
// `$REMIT_STORE`); the run lifecycle (session/run_lifecycle.h) and the broker (through the
// TraceWriter, ApprovalStore and BudgetLedger a store hands out) never know which.
//
// Invariants every store keeps (docs/fleet.md "What each guarantee relies on"):
// - A trace's records are kept in order, byte for byte as TraceWriter writes them, and read back
//   through readTraceText, so the hash chain and every check on reading are the same for both.
// - TraceWriter::sync() returns only once what was emitted survives a crash of the process (and,
//   for PostgreSQL, of the database server with its default synchronous_commit).
// - holdRun() is exclusive across processes and released when its holder dies, however it dies.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/approvals.h"
#include "broker/budget.h"
#include "broker/trace.h"

namespace remit {

// A hold on a run family (a run and its resumes, by their idempotency root): while it lives, no
// other process can run or continue the run.
class RunHold {
public:
    virtual ~RunHold() = default;
};

class Store {
public:
    enum class Kind { Files, PostgreSQL };
    virtual ~Store() = default;
    virtual Kind kind() const = 0;
    // How messages name it: "the state directory .remit", "the PostgreSQL store postgresql://…"
    // (never with a password).
    virtual std::string describe() const = 0;

    // A new, empty trace for `runId`, ready for its run_start. Null with `error` when it cannot be
    // made. `synced` false: a fixture run's, written without waiting for the disk
    // (TraceWriter::setSynced; docs/broker.md, "Durability").
    virtual std::unique_ptr<TraceWriter> createTrace(const std::string& runId, std::string& error,
                                                     bool synced = true) = 0;
    // Removes a trace whose run_start could not be written (nothing in it could be resumed).
    virtual void discardTrace(const std::string& runId) = 0;
    // How messages and `trace:` lines name a run's trace: its file, or where the database keeps it.
    virtual std::string traceName(const std::string& runId) const = 0;
    virtual bool hasTrace(const std::string& runId) = 0;
    // The trace of `runId`, verified as readTrace verifies a file (`error` set when it is missing,
    // unreadable or damaged).
    virtual TraceFile readTrace(const std::string& runId, TraceCheck check = TraceCheck::Verify,
                                size_t maxRecords = static_cast<size_t>(-1)) = 0;
    // The ids of the traces that may continue the run family `root` (a store that cannot tell
    // without reading them gives all of its traces).
    virtual std::vector<std::string> traceIds(const std::string& root) = 0;

    // Takes the run family's lock, or says who holds it (`error`).
    virtual std::unique_ptr<RunHold> holdRun(const std::string& root, std::string& error) = 0;

    // The approval store and the shared budgets' ledger of this store.
    virtual ApprovalStore& approvals() = 0;
    virtual BudgetLedger& ledger() = 0;
};

class FileStore : public Store {
public:
    explicit FileStore(std::filesystem::path stateDir);
    Kind kind() const override { return Kind::Files; }
    std::string describe() const override;
    std::unique_ptr<TraceWriter> createTrace(const std::string& runId, std::string& error, bool synced = true) override;
    void discardTrace(const std::string& runId) override;
    std::string traceName(const std::string& runId) const override;
    bool hasTrace(const std::string& runId) override;
    TraceFile readTrace(const std::string& runId, TraceCheck check, size_t maxRecords) override;
    std::vector<std::string> traceIds(const std::string& root) override;
    std::unique_ptr<RunHold> holdRun(const std::string& root, std::string& error) override;
    ApprovalStore& approvals() override { return approvals_; }
    BudgetLedger& ledger() override { return ledger_; }
    const std::filesystem::path& stateDir() const { return stateDir_; }

private:
    std::filesystem::path stateDir_;
    ApprovalStore approvals_;
    FileBudgetLedger ledger_;
};

// Where a state directory keeps its shared budgets' ledger.
std::filesystem::path budgetLedgerPath(const std::filesystem::path& stateDir);

}  // namespace remit
