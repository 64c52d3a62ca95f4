// The PostgreSQL store (docs/fleet.md): the records of session/store.h in one database that many
// workers on many machines share, plus the queue of submitted runs that `remitvm submit` fills and
// `remitvm worker` drains. Each PgStore owns one connection; a worker opens one per run it runs at
// a time, so a run's trace, approvals, ledger and lease all go through the connection that holds
// the run's lock.
//
// Invariants (what each guarantee relies on, docs/fleet.md):
// - Trace records are inserted one per statement in autocommit. A durable one (emitDurable:
//   dispatch, call — what the file store fsyncs) commits with synchronous_commit as the
//   database sets it (on by default), so the write-ahead `dispatch` record is on disk before the
//   call goes out; the others commit without waiting for the disk, as the file store hands them
//   to the OS, and the next durable commit flushes them (WAL is written in order). So does the
//   run_start, durable in the file store: no call goes out before a durable commit after it. Queue and
//   ledger changes that a resume makes again commit without waiting too.
// - A run family's lock is a session-level advisory lock on the store's connection: exclusive
//   across every machine, and released by the server when the connection ends, however the
//   holder died. A worker's lease (`lease_until`, renewed by its heartbeat) only says when others
//   may try to take the lock over.
// - Approvals and ledger rows change in transactions under a lock of their digest or scope row
//   (SELECT … FOR UPDATE, pg_advisory_xact_lock), applying the same rules as the file store
//   (ApprovalStore::decideIn/approveIn/denyIn, ledgerAllows); times come from the database's clock.
// - The schema is versioned (remit_schema); a store newer than this binary is refused, an older
//   one migrated on open, under a lock, in one transaction.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/json_text.h"
#include "session/pg.h"
#include "session/store.h"

namespace remit {

// The schema version this binary writes, and reads.
constexpr int kStoreSchemaVersion = 1;

// A run submitted to a fleet, as `runs list` and the workers see it.
struct SubmittedRun {
    std::string runId;   // the id `submit` printed: the run family's idempotency root
    std::string status;  // queued | running | waiting | completed | failed
    std::string program, path;
    Json submission;     // what a worker needs to run it: flags, inputs, adapters
    std::string latest;  // the newest trace of the family (empty before the first)
    std::string waitingDigest;
    Json outcome;        // the last attempt's --json envelope (or error), null before
    std::string worker;
    int attempts = 0;
    bool traced = false;  // claim: the run has a trace already (an attempt began), so it is resumed
    double createdAt = 0, updatedAt = 0;
};

class PgStore : public Store {
public:
    // Connects and brings the schema up to date (`migrate` false: only checks it). Null with
    // `error` naming the store when the URL is malformed, the database unreachable, or its schema
    // newer than this binary.
    static std::unique_ptr<PgStore> open(const std::string& url, std::string& error, bool migrate = true);
    ~PgStore() override;

    Kind kind() const override { return Kind::PostgreSQL; }
    std::string describe() const override { return "the PostgreSQL store " + shown_; }
    const std::string& shownUrl() const { return shown_; }
    std::unique_ptr<TraceWriter> createTrace(const std::string& runId, std::string& error, bool synced = true) override;
    void discardTrace(const std::string& runId) override;
    std::string traceName(const std::string& runId) const override { return shown_ + "#" + runId; }
    bool hasTrace(const std::string& runId) override;
    TraceFile readTrace(const std::string& runId, TraceCheck check, size_t maxRecords) override;
    std::vector<std::string> traceIds(const std::string& root) override;
    std::unique_ptr<RunHold> holdRun(const std::string& root, std::string& error) override;
    ApprovalStore& approvals() override { return *approvals_; }
    BudgetLedger& ledger() override { return *ledger_; }

    // `remitvm store migrate`: applies what is missing; `applied` counts the migrations run.
    static bool migrateSchema(pg::Connection& c, int& applied, std::string& error);
    // The schema version the database holds (0: none).
    int schemaVersion() const { return version_; }

    // ---- The queue of submitted runs (remitvm submit, worker, runs) ----
    // Queues a run (status queued) and wakes the workers.
    bool submit(const SubmittedRun& run, std::string& error);
    // Takes the oldest queued run — or a running one whose worker's lease expired — for `worker`,
    // with its lock (`hold`, on this store's connection) and a lease of `leaseSeconds`. nullopt
    // with an empty `error` when there is none.
    std::optional<SubmittedRun> claim(const std::string& worker, double leaseSeconds,
                                      std::unique_ptr<RunHold>& hold, std::string& error);
    // Records how an attempt ended: completed, failed, waiting (for `waitingDigest`), or queued
    // (to be taken again). A run set waiting whose request was decided meanwhile is queued instead,
    // under the request's lock, so no approval is missed.
    bool finish(const std::string& runId, const std::string& status, const std::string& latest,
                const std::string& waitingDigest, const Json& outcome, std::string& error);
    // Renews `worker`'s leases on the runs it has in hand (`runIds`).
    bool heartbeat(const std::string& worker, const std::vector<std::string>& runIds, double leaseSeconds,
                   std::string& error);
    // Gives up `worker`'s lease on a run it could not keep the records of (its connection was
    // lost): the run is queued again at once, for any worker to continue from its record.
    bool abandon(const std::string& runId, const std::string& worker, std::string& error);
    // Queues the waiting runs whose request expired, so a worker fails them; how many.
    int wakeExpired(std::string& error);
    std::optional<std::vector<SubmittedRun>> listRuns(std::string& error);
    std::optional<SubmittedRun> findRun(const std::string& runId, std::string& error);
    // The submitted run `id` names: its own id, or the run id of one of its traces (a pending
    // request names the trace that paused, which is a resume's after the first attempt).
    std::optional<SubmittedRun> findRunOf(const std::string& id, std::string& error);
    // Queues a failed run again for the workers and wakes them (the web inbox's
    // Continue in a fleet). False with an empty `error` when the run has not failed.
    bool requeue(const std::string& runId, std::string& error);
    // LISTEN for queued runs; then waitForWork wakes on `submit`, approvals and denials.
    bool listen(std::string& error);
    bool waitForWork(int timeoutMs) { return conn_->waitForNotification(timeoutMs); }
    pg::Connection& connection() { return *conn_; }

private:
    PgStore() = default;
    std::unique_ptr<pg::Connection> conn_;
    std::string shown_;
    int version_ = 0;
    std::unique_ptr<ApprovalStore> approvals_;
    std::unique_ptr<BudgetLedger> ledger_;
};

// The store a command uses (docs/fleet.md "Choosing a store"): `storeUrl` (--store) when given,
// else `stateDir` (--state-dir) when given, else $REMIT_STORE, else the state directory `.remit`.
// Null with `error` naming the store when it cannot be opened.
std::unique_ptr<Store> openStore(const std::string* storeUrl, const std::string* stateDir, std::string& error);

}  // namespace remit
