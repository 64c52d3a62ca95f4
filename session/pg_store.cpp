// See pg_store.h.
#include "session/pg_store.h"

#include <fmt/format.h>

#include <cstdlib>

#include "broker/replay.h"  // stringField
#include "runtime/canonical_json.h"
#include "runtime/json_text.h"
#include "session/run_lifecycle.h"

namespace remit {

namespace {

// The schema, one migration per version. A migration is applied once, in the transaction that
// records its version; a later version adds a new entry, never edits an old one.
struct Migration {
    int version;
    const char* sql;
};

constexpr Migration kMigrations[] = {
    {1, R"sql(
CREATE TABLE remit_traces (
    run_id text PRIMARY KEY,
    root text NOT NULL,
    resumed_from text,
    created_at double precision NOT NULL
);
CREATE INDEX remit_traces_root ON remit_traces (root);
CREATE TABLE remit_trace_records (
    run_id text NOT NULL,
    line integer NOT NULL,
    record text NOT NULL,
    PRIMARY KEY (run_id, line)
);
CREATE TABLE remit_approvals (
    digest text NOT NULL,
    section text NOT NULL,
    entry text NOT NULL,
    PRIMARY KEY (digest, section)
);
CREATE TABLE remit_budgets (
    scope text NOT NULL,
    period text NOT NULL,
    spent_usd double precision NOT NULL DEFAULT 0,
    reserved_usd double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (scope, period)
);
CREATE TABLE remit_budget_reservations (
    key text PRIMARY KEY,
    scope text NOT NULL,
    period text NOT NULL,
    amount double precision NOT NULL,
    run_id text NOT NULL,
    at double precision NOT NULL
);
CREATE TABLE remit_runs (
    run_id text PRIMARY KEY,
    status text NOT NULL CHECK (status IN ('queued', 'running', 'waiting', 'completed', 'failed')),
    program text NOT NULL,
    path text NOT NULL,
    submission text NOT NULL,
    latest text,
    waiting_digest text,
    outcome text,
    worker text,
    lease_until double precision,
    attempts integer NOT NULL DEFAULT 0,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL
);
CREATE INDEX remit_runs_status ON remit_runs (status, updated_at);
CREATE INDEX remit_runs_waiting ON remit_runs (waiting_digest) WHERE status = 'waiting';
)sql"},
};

// The database's clock, as a Unix time: every machine of a fleet judges leases, expiries and
// budget periods by the same clock.
constexpr const char* kNow = "extract(epoch from clock_timestamp())";

// A 64-bit advisory lock key for `kind` and `name` (the lock of a run family, of an approval's
// digest, of the schema).
std::string lockKey(const std::string& param) {
    return fmt::format("('x' || substr(md5({}), 1, 16))::bit(64)::bigint", param);
}

std::string num(double v) { return fmt::format("{}", v); }

class PgRunHold : public RunHold {
public:
    PgRunHold(pg::Connection& c, std::string root) : c_(c), root_(std::move(root)) {}
    ~PgRunHold() override {
        if (c_.alive()) c_.exec("SELECT pg_advisory_unlock(" + lockKey("'remit-run:' || $1") + ")", {root_});
    }

private:
    pg::Connection& c_;
    std::string root_;
};

// A statement prefix that commits the statement's transaction without waiting for its WAL to
// reach the disk (synchronous_commit off, for that transaction only): for records nothing
// depends on surviving a crash of the database server — the next durable commit flushes them
// with it, WAL being written in order.
constexpr const char* kAsync = "WITH async AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true)) ";

// Trace records, one row each, committed as they are written (see pg_store.h): a durable one
// (run_start, dispatch, call) waits for its commit to be on disk, as the file store fsyncs them;
// the others are committed at once, as the file store hands them to the OS.
class PgTraceWriter : public TraceWriter {
public:
    PgTraceWriter(pg::Connection& c, std::string runId, std::string name) : c_(c), runId_(std::move(runId)) {
        path_ = std::move(name);
    }
    ~PgTraceWriter() override { flush(); }  // a held write-ahead record, while this writer still is one

protected:
    bool attached() const override { return true; }
    // One row per line, in order (a fixture call's held `dispatch` record and its `call` record
    // come together; each is its own row, as when they were written one by one).
    bool writeLines(std::span<const std::string_view> lines, bool durable, std::string& why) override {
        for (std::string_view line : lines)
            if (!writeLine(line, durable, why)) return false;
        return true;
    }
    bool writeLine(std::string_view line, bool durable, std::string& why) {
        std::string record(line.substr(0, line.size() - 1));  // without its newline
        pg::Result r;
        if (lines_ == 0) {
            // The first record is the run_start: the trace's row names its family and parent. It
            // commits without waiting for the disk, even in a run whose records are durable: until
            // a call goes out there is nothing a lost run_start could repeat, and the first call's
            // durable `dispatch` — or a pending approval's, or any durable commit after it —
            // flushes it first, WAL being written in order. One flush fewer per run.
            std::string error;
            std::optional<Json> start = parseJsonText("run_start", record, error);
            std::string root = start ? stringField(*start, "idempotency_root") : "";
            std::string parent = start ? stringField(*start, "resumed_from") : "";
            r = c_.exec(fmt::format("{}, t AS (INSERT INTO remit_traces (run_id, root, resumed_from, created_at) "
                                    "VALUES ($1, $2, $3, {})) "
                                    "INSERT INTO remit_trace_records (run_id, line, record) SELECT $1, 1, $4 FROM async",
                                    kAsync, kNow),
                        {runId_, root.empty() ? runId_ : root, parent.empty() ? pg::Param() : parent, record});
            durable = false;
        } else {
            durable = durable && synced();  // a fixture run's trace never waits (TraceWriter::setSynced)
            r = c_.exec(std::string(durable ? "" : kAsync) +
                            "INSERT INTO remit_trace_records (run_id, line, record) SELECT $1, $2, $3" +
                            (durable ? "" : " FROM async"),
                        {runId_, std::to_string(lines_ + 1), record});
        }
        if (!r.ok()) {
            why = c_.lastError();
            return false;
        }
        ++lines_;
        unsynced_ = !durable;
        return true;
    }
    // Records committed without waiting are flushed by any durable commit after them.
    bool syncLines(std::string& why) override {
        if (!unsynced_ || !synced()) return true;
        if (!c_.exec("SELECT pg_current_xact_id()").ok()) {
            why = c_.lastError();
            return false;
        }
        unsynced_ = false;
        return true;
    }

private:
    pg::Connection& c_;
    std::string runId_;
    size_t lines_ = 0;
    bool unsynced_ = false;
};

// The approval sections as rows (digest, section, entry), changed one digest at a time under that
// digest's lock, with the rules every store shares (ApprovalStore::decideIn, approveIn, denyIn, restoreIn).
class PgApprovalStore : public ApprovalStore {
public:
    PgApprovalStore(pg::Connection& c, std::string where) : c_(c), where_(std::move(where)) {}

    std::string where() const override { return where_; }

    // Each decision reads and changes only its digest's rows, in its own transaction.
    bool usable(std::string&) override { return true; }

    bool load(std::string& error) override {
        pg::Result r = c_.exec("SELECT digest, section, entry FROM remit_approvals ORDER BY digest");
        if (!r.ok()) {
            error = fmt::format("cannot read the approvals of {}: {}", where_, c_.lastError());
            return false;
        }
        nlohmann::json doc = emptyDocument();
        for (int i = 0; i < r.rows(); ++i)
            if (!place(doc, r.text(i, 0), r.text(i, 1), r.text(i, 2), error)) return false;
        data_ = std::move(doc);
        return true;
    }

    std::optional<std::string> decide(const std::string& digest, const nlohmann::json& pendingRequest,
                                      const std::string& runId, const std::string& idempotencyKey, std::string& error,
                                      Denial* denied) override {
        Decided decided;
        change(digest, false, error, [&](nlohmann::json& doc, double now) {
            decided = decideIn(doc, digest, pendingRequest, runId, idempotencyKey, now);
            return false;
        });
        if (!error.empty()) return std::nullopt;
        if (decided.denial && denied) *denied = std::move(*decided.denial);
        return decided.by;
    }

    bool approve(const std::string& digest, const std::string& by, std::string& error,
                 ApprovalProgress* progress) override {
        ApprovalProgress local;
        ApprovalProgress& p = progress ? *progress : local;
        bool done = false;
        change(digest, true, error, [&](nlohmann::json& doc, double now) {
            done = approveIn(doc, digest, by, now, p);
            return done && p.granted;  // a run waits for the quorum, not for each approver
        });
        return done && error.empty();
    }

    bool restore(const std::string& digest, const std::string& idempotencyKey, const nlohmann::json& request,
                 std::string& error) override {
        bool done = false;
        change(digest, false, error, [&](nlohmann::json& doc, double now) {
            done = restoreIn(doc, digest, idempotencyKey, request, now);
            return false;  // the run that gives it back resumes it; no run waits on it
        });
        return done && error.empty();
    }

    bool deny(const std::string& digest, const std::string& by, const std::string& reason,
              std::string& error) override {
        bool done = false;
        change(digest, true, error, [&](nlohmann::json& doc, double now) {
            done = denyIn(doc, digest, by, reason, now);
            return done;  // the waiting run fails at once rather than at some later resume
        });
        return done && error.empty();
    }

private:
    pg::Connection& c_;
    std::string where_;

    bool place(nlohmann::json& doc, const std::string& digest, const std::string& section, const std::string& text,
               std::string& error) {
        std::string why;
        std::optional<nlohmann::json> entry = parseJsonText("approval entry", text, why);
        if (!entry || !entry->is_object() || !doc.contains(section)) {
            error = fmt::format("{}: the approval entry {} of {} is damaged", where_, section, digest);
            return false;
        }
        doc[section][digest] = std::move(*entry);
        return true;
    }

    // Applies `rule(doc, now)` to the entries of `digest` under its lock and writes back what
    // changed; when the rule returns true (and `wakes`), the runs waiting on the digest are queued
    // and the workers woken, in the same transaction.
    template <class Rule>
    void change(const std::string& digest, bool wakes, std::string& error, Rule rule) {
        nlohmann::json doc = emptyDocument();
        bool ok = c_.transaction([&] {
            pg::Result now = c_.exec(fmt::format("SELECT {}, pg_advisory_xact_lock({})", kNow,
                                                 lockKey("'remit-approval:' || $1")),
                                     {digest});
            pg::Result rows = now.ok() ? c_.exec("SELECT section, entry FROM remit_approvals WHERE digest = $1", {digest})
                                       : pg::Result();
            if (!rows.ok()) return false;
            for (int i = 0; i < rows.rows(); ++i)
                if (!place(doc, digest, rows.text(i, 0), rows.text(i, 1), error)) return false;
            nlohmann::json before = doc;
            bool wake = rule(doc, now.number(0, 0).value_or(0)) && wakes;
            for (auto& [section, entries] : doc.items()) {
                bool has = entries.contains(digest), had = before[section].contains(digest);
                if (has && (!had || entries[digest] != before[section][digest])) {
                    if (!c_.exec("INSERT INTO remit_approvals (digest, section, entry) VALUES ($1, $2, $3) "
                                 "ON CONFLICT (digest, section) DO UPDATE SET entry = EXCLUDED.entry",
                                 {digest, section, dumpJson(entries[digest], JsonTextStyle{true, true, -1, ",", ":"})})
                             .ok())
                        return false;
                } else if (!has && had) {
                    if (!c_.exec("DELETE FROM remit_approvals WHERE digest = $1 AND section = $2", {digest, section}).ok())
                        return false;
                }
            }
            if (wake) {
                pg::Result woken = c_.exec(fmt::format("UPDATE remit_runs SET status = 'queued', updated_at = {} "
                                                       "WHERE status = 'waiting' AND waiting_digest = $1",
                                                       kNow),
                                           {digest});
                if (!woken.ok() || !c_.exec("SELECT pg_notify('remit_runs', $1)", {digest}).ok()) return false;
            }
            return true;
        });
        if (!ok) {
            if (error.empty()) error = fmt::format("cannot change the approvals of {}: {}", where_, c_.lastError());
            return;
        }
        for (auto& [section, entries] : doc.items()) {
            if (entries.contains(digest)) data_[section][digest] = entries[digest];
            else data_[section].erase(digest);
        }
    }
};

// The ledger as rows: one per scope and period, locked for each reservation (see broker/budget.h).
class PgBudgetLedger : public BudgetLedger {
public:
    PgBudgetLedger(pg::Connection& c, std::string where) : c_(c), where_(std::move(where)) {}

    Reservation reserve(const BudgetScope& scope, const std::string& key, double amount,
                        const std::string& runId) override {
        Reservation out;
        bool ok = c_.transaction([&] {
            // Committed without waiting: the dispatch record's durable commit, which comes after
            // and before the call is sent, flushes it (WAL is written in order).
            pg::Result held = c_.exec(fmt::format("SELECT period, {}, set_config('synchronous_commit', 'off', true) "
                                                  "FROM (SELECT 1) one LEFT JOIN remit_budget_reservations ON key = $1",
                                                  kNow),
                                      {key});
            if (!held.ok()) return false;
            if (!held.isNull(0, 0)) {  // sent again after a crash: its reservation stands
                out.kind = Reservation::Kind::Reserved;
                out.period = held.text(0, 0);
                return true;
            }
            double now = held.number(0, 1).value_or(0);
            out.period = budgetPeriodKey(scope.period, now);
            if (!c_.exec("INSERT INTO remit_budgets (scope, period) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                         {scope.name, out.period})
                     .ok())
                return false;
            pg::Result row = c_.exec("SELECT spent_usd, reserved_usd FROM remit_budgets WHERE scope = $1 AND "
                                     "period = $2 FOR UPDATE",
                                     {scope.name, out.period});
            if (!row.ok() || row.rows() != 1) return false;
            LedgerTotals totals{row.number(0, 0).value_or(0), row.number(0, 1).value_or(0)};
            out.spent = totals.spent;
            out.reserved = totals.reserved;
            if (!ledgerAllows(totals, amount, scope.maxUsd)) {
                out.kind = Reservation::Kind::Exceeded;
                return true;
            }
            if (!c_.exec("UPDATE remit_budgets SET reserved_usd = reserved_usd + $3 WHERE scope = $1 AND period = $2",
                         {scope.name, out.period, num(amount)})
                     .ok() ||
                !c_.exec("INSERT INTO remit_budget_reservations (key, scope, period, amount, run_id, at) "
                         "VALUES ($1, $2, $3, $4, $5, $6)",
                         {key, scope.name, out.period, num(amount), runId, num(now)})
                     .ok())
                return false;
            out.kind = Reservation::Kind::Reserved;
            return true;
        });
        if (!ok) {
            out.kind = Reservation::Kind::Failed;
            out.error = fmt::format("cannot reserve in the budget ledger of {}: {}", where_, c_.lastError());
        }
        return out;
    }

    bool settle(const std::string& key, double actual, std::string& error) override {
        return finish(key, actual, error);
    }
    bool release(const std::string& key, std::string& error) override { return finish(key, 0, error); }
    std::optional<LedgerTotals> totals(const std::string& scope, const std::string& period,
                                       std::string& error) override {
        pg::Result r = c_.exec("SELECT spent_usd, reserved_usd FROM remit_budgets WHERE scope = $1 AND period = $2",
                               {scope, period});
        if (!r.ok()) {
            error = fmt::format("cannot read the budget ledger of {}: {}", where_, c_.lastError());
            return std::nullopt;
        }
        if (r.rows() == 0) return LedgerTotals{};
        return LedgerTotals{r.number(0, 0).value_or(0), r.number(0, 1).value_or(0)};
    }

private:
    pg::Connection& c_;
    std::string where_;

    bool finish(const std::string& key, double actual, std::string& error) {
        // Committed without waiting: a settlement lost with the server is made again when the
        // resume answers the call from its record.
        bool ok = c_.transaction([&] {
            pg::Result held = c_.exec(std::string(kAsync) +
                                          "DELETE FROM remit_budget_reservations WHERE key = $1 AND "
                                          "(SELECT 1 FROM async) = 1 RETURNING scope, period, amount",
                                      {key});
            if (!held.ok()) return false;
            if (held.rows() == 0) return true;  // settled already, or never reserved
            return c_
                .exec("UPDATE remit_budgets SET reserved_usd = greatest(0, reserved_usd - $3), "
                      "spent_usd = spent_usd + $4 WHERE scope = $1 AND period = $2",
                      {held.text(0, 0), held.text(0, 1), held.text(0, 2), num(actual)})
                .ok();
        });
        if (!ok) error = fmt::format("cannot settle in the budget ledger of {}: {}", where_, c_.lastError());
        return ok;
    }
};

SubmittedRun runFromRow(const pg::Result& r, int i) {
    SubmittedRun run;
    run.runId = r.text(i, 0);
    run.status = r.text(i, 1);
    run.program = r.text(i, 2);
    run.path = r.text(i, 3);
    std::string error;
    run.submission = Json(parseJsonText("submission", r.text(i, 4), error).value_or(nlohmann::json()));
    run.latest = r.text(i, 5);
    run.waitingDigest = r.text(i, 6);
    run.outcome = r.isNull(i, 7) ? Json(nullptr) : Json(parseJsonText("outcome", r.text(i, 7), error).value_or(nlohmann::json()));
    run.worker = r.text(i, 8);
    run.attempts = static_cast<int>(r.number(i, 9).value_or(0));
    run.createdAt = r.number(i, 10).value_or(0);
    run.updatedAt = r.number(i, 11).value_or(0);
    return run;
}

constexpr const char* kRunColumns =
    "run_id, status, program, path, submission, latest, waiting_digest, outcome, worker, attempts, created_at, "
    "updated_at";

}  // namespace

bool PgStore::migrateSchema(pg::Connection& c, int& applied, std::string& error) {
    applied = 0;
    int found = 0;
    bool ok = c.transaction([&] {
        if (!c.exec("SELECT pg_advisory_xact_lock(" + lockKey("'remit-schema'") + ")").ok()) return false;
        if (!c.script("CREATE TABLE IF NOT EXISTS remit_schema (version integer NOT NULL)")) return false;
        pg::Result v = c.exec("SELECT coalesce(max(version), 0) FROM remit_schema");
        if (!v.ok()) return false;
        found = static_cast<int>(v.number(0, 0).value_or(0));
        if (found > kStoreSchemaVersion) return false;
        for (const Migration& m : kMigrations) {
            if (m.version <= found) continue;
            if (!c.script(m.sql) ||
                !c.exec("INSERT INTO remit_schema (version) VALUES ($1)", {std::to_string(m.version)}).ok())
                return false;
            ++applied;
        }
        return true;
    });
    if (found > kStoreSchemaVersion) {
        error = fmt::format("its schema is version {}, newer than this remitvm, which knows versions up to {}; "
                            "upgrade remitvm on this machine (every tool and worker that uses the store must "
                            "know its schema)",
                            found, kStoreSchemaVersion);
        return false;
    }
    if (!ok) error = fmt::format("cannot bring its schema up to date: {}", c.lastError());
    return ok;
}

std::unique_ptr<PgStore> PgStore::open(const std::string& url, std::string& error, bool migrate) {
    std::string why;
    std::string shown = pg::displayUrl(url, why);
    if (shown.empty()) {
        error = fmt::format("malformed store URL: {}", why);
        return nullptr;
    }
    std::unique_ptr<pg::Connection> conn = pg::Connection::open(url, why);
    if (!conn) {
        error = fmt::format("cannot connect to the PostgreSQL store {}: {}", shown, why);
        return nullptr;
    }
    std::unique_ptr<PgStore> store(new PgStore());
    store->shown_ = shown;
    // The version first, without a lock: the common case is a store already up to date.
    pg::Result v = conn->exec("SELECT coalesce(max(version), 0) FROM remit_schema");
    if (!v.ok() && v.state() != "42P01") {  // 42P01: no remit_schema yet
        error = fmt::format("cannot read the schema of the PostgreSQL store {}: {}", shown, conn->lastError());
        return nullptr;
    }
    int version = v.ok() ? static_cast<int>(v.number(0, 0).value_or(0)) : 0;
    if (version > kStoreSchemaVersion) {
        error = fmt::format("the PostgreSQL store {} has schema version {}, newer than this remitvm, which knows "
                            "versions up to {}; upgrade remitvm on this machine (every tool and worker that uses the "
                            "store must know its schema)",
                            shown, version, kStoreSchemaVersion);
        return nullptr;
    }
    if (version < kStoreSchemaVersion) {
        if (!migrate) {
            error = fmt::format("the PostgreSQL store {} has schema version {}, older than this remitvm's {}; run "
                                "`remitvm store migrate --store URL`",
                                shown, version, kStoreSchemaVersion);
            return nullptr;
        }
        int applied = 0;
        if (!migrateSchema(*conn, applied, why)) {
            error = fmt::format("the PostgreSQL store {}: {}", shown, why);
            return nullptr;
        }
        version = kStoreSchemaVersion;
    }
    store->version_ = version;
    store->conn_ = std::move(conn);
    store->approvals_ = std::make_unique<PgApprovalStore>(*store->conn_, store->describe());
    store->ledger_ = std::make_unique<PgBudgetLedger>(*store->conn_, store->describe());
    return store;
}

PgStore::~PgStore() {
    approvals_.reset();
    ledger_.reset();
}

std::unique_ptr<TraceWriter> PgStore::createTrace(const std::string& runId, std::string&, bool synced) {
    // A run id that names a trace already makes the first record's insert fail (its primary key).
    auto trace = std::make_unique<PgTraceWriter>(*conn_, runId, traceName(runId));
    trace->setSynced(synced);
    return trace;
}

void PgStore::discardTrace(const std::string& runId) {
    conn_->exec("DELETE FROM remit_trace_records WHERE run_id = $1", {runId});
    conn_->exec("DELETE FROM remit_traces WHERE run_id = $1", {runId});
}

bool PgStore::hasTrace(const std::string& runId) {
    pg::Result r = conn_->exec("SELECT 1 FROM remit_traces WHERE run_id = $1", {runId});
    return r.ok() && r.rows() == 1;
}

TraceFile PgStore::readTrace(const std::string& runId, TraceCheck check, size_t maxRecords) {
    std::string limit = maxRecords == static_cast<size_t>(-1) ? "ALL" : std::to_string(maxRecords);
    pg::Result r = conn_->exec("SELECT record FROM remit_trace_records WHERE run_id = $1 ORDER BY line LIMIT " + limit,
                               {runId});
    if (!r.ok()) {
        TraceFile out;
        out.error = fmt::format("cannot read the trace {}: {}", traceName(runId), conn_->lastError());
        return out;
    }
    // The records as the file store keeps them, one line each, so they are verified the same way.
    std::string text;
    for (int i = 0; i < r.rows(); ++i) {
        text += r.text(i, 0);
        text += '\n';
    }
    return readTraceText(std::move(text), traceName(runId), check, maxRecords);
}

std::vector<std::string> PgStore::traceIds(const std::string& root) {
    std::vector<std::string> ids;
    pg::Result r = conn_->exec("SELECT run_id FROM remit_traces WHERE root = $1 ORDER BY run_id", {root});
    for (int i = 0; i < r.rows(); ++i) ids.push_back(r.text(i, 0));
    return ids;
}

std::unique_ptr<RunHold> PgStore::holdRun(const std::string& root, std::string& error) {
    pg::Result r = conn_->exec("SELECT pg_try_advisory_lock(" + lockKey("'remit-run:' || $1") + ")", {root});
    if (!r.ok()) {
        error = fmt::format("cannot lock the run in {}: {}", describe(), conn_->lastError());
        return nullptr;
    }
    if (r.text(0, 0) != "t") {
        error = fmt::format("another remitvm is running or resuming this run (it holds its lock in {})", describe());
        return nullptr;
    }
    return std::make_unique<PgRunHold>(*conn_, root);
}

bool PgStore::submit(const SubmittedRun& run, std::string& error) {
    bool ok = conn_->transaction([&] {
        return conn_
                   ->exec(fmt::format("INSERT INTO remit_runs (run_id, status, program, path, submission, created_at, "
                                      "updated_at) VALUES ($1, 'queued', $2, $3, $4, {0}, {0})",
                                      kNow),
                          {run.runId, run.program, run.path,
                           dumpJson(run.submission, JsonTextStyle{true, true, -1, ",", ":"})})
                   .ok() &&
               conn_->exec("SELECT pg_notify('remit_runs', $1)", {run.runId}).ok();
    });
    if (!ok) error = fmt::format("cannot queue the run in {}: {}", describe(), conn_->lastError());
    return ok;
}

std::optional<SubmittedRun> PgStore::claim(const std::string& worker, double leaseSeconds,
                                           std::unique_ptr<RunHold>& hold, std::string& error) {
    // Two statements, no transaction: the oldest claimable run (SKIP LOCKED steps over the one
    // another worker's statement is taking) and its run lock, tried in the same statement on that
    // one row only (the subquery with LIMIT is evaluated first); then the lease, only if the run is
    // still claimable — a worker that took and finished it meanwhile has changed its status.
    std::vector<std::string> busy;  // runs whose lock a live process still holds
    for (int tries = 0; tries < 16; ++tries) {
        std::string skip = "{";
        for (size_t i = 0; i < busy.size(); ++i) skip += (i ? "," : "") + busy[i];
        skip += "}";
        std::string claimable =
            fmt::format("(status = 'queued' OR (status = 'running' AND lease_until < {}))", kNow);
        pg::Result candidate = conn_->exec(
            fmt::format("SELECT run_id, pg_try_advisory_lock({}) FROM (SELECT run_id FROM remit_runs WHERE {} AND "
                        "NOT (run_id = ANY($1::text[])) ORDER BY updated_at LIMIT 1 FOR UPDATE SKIP LOCKED) c",
                        lockKey("'remit-run:' || run_id"), claimable),
            {skip});
        if (!candidate.ok()) {
            error = fmt::format("cannot take a run from {}: {}", describe(), conn_->lastError());
            return std::nullopt;
        }
        if (candidate.rows() == 0) return std::nullopt;
        std::string runId = candidate.text(0, 0);
        if (candidate.text(0, 1) != "t") {
            busy.push_back(runId);
            continue;
        }
        auto unlock = [&] {
            if (conn_->alive()) conn_->exec("SELECT pg_advisory_unlock(" + lockKey("'remit-run:' || $1") + ")", {runId});
        };
        pg::Result taken = conn_->exec(
            fmt::format("{3}UPDATE remit_runs SET status = 'running', worker = $2, lease_until = {0} + $3, attempts = "
                        "attempts + 1, updated_at = {0} FROM async WHERE run_id = $1 AND {1} RETURNING {2}, EXISTS "
                        "(SELECT 1 FROM remit_traces WHERE root = $1)",
                        kNow, claimable, kRunColumns, kAsync),
            {runId, worker, num(leaseSeconds)});
        if (!taken.ok()) {
            error = fmt::format("cannot take a run from {}: {}", describe(), conn_->lastError());
            unlock();
            return std::nullopt;
        }
        if (taken.rows() == 0) {  // taken and finished by another worker between the two statements
            unlock();
            continue;
        }
        SubmittedRun run = runFromRow(taken, 0);
        run.traced = taken.text(0, 12) == "t";
        hold = std::make_unique<PgRunHold>(*conn_, runId);
        return run;
    }
    return std::nullopt;
}

bool PgStore::finish(const std::string& runId, const std::string& status, const std::string& latest,
                     const std::string& waitingDigest, const Json& outcome, std::string& error) {
    std::vector<pg::Param> params = {
        runId, status, latest, waitingDigest,
        outcome.is_null() ? pg::Param() : dumpJson(outcome, JsonTextStyle{true, true, -1, ",", ":"})};
    std::string update = fmt::format("UPDATE remit_runs SET status = {{}}, latest = nullif($3, ''), waiting_digest = "
                                     "nullif($4, ''), outcome = $5, lease_until = NULL, updated_at = {} WHERE run_id = $1",
                                     kNow);
    bool ok;
    if (status != "waiting") {
        // One statement; a run queued again wakes the workers.
        // Committed without waiting: lost with the server, the run is taken again when its lease
        // runs out, and its record answers what it did.
        ok = conn_->exec(fmt::format("WITH async AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true)), "
                                     "u AS ({} AND (SELECT 1 FROM async) = 1 RETURNING status) "
                                     "SELECT pg_notify('remit_runs', $1) FROM u WHERE u.status = 'queued'",
                                     fmt::format(fmt::runtime(update), "$2")),
                         params)
                 .ok();
    } else {
        ok = conn_->transaction([&] {
            // Under the request's lock (the one approve and deny take): decided already means the
            // run goes back to the queue now, since nobody will wake it later.
            pg::Result decided = conn_->exec(
                fmt::format("SELECT pg_advisory_xact_lock({}), (SELECT count(*) FROM remit_approvals WHERE digest = $1 "
                            "AND section IN ('approved', 'denied'))",
                            lockKey("'remit-approval:' || $1")),
                {waitingDigest});
            if (!decided.ok()) return false;
            bool wake = decided.text(0, 1) != "0";
            params[1] = wake ? "queued" : "waiting";
            return conn_->exec(fmt::format(fmt::runtime(update), "$2"), params).ok() &&
                   (!wake || conn_->exec("SELECT pg_notify('remit_runs', $1)", {runId}).ok());
        });
    }
    if (!ok) error = fmt::format("cannot record the run's state in {}: {}", describe(), conn_->lastError());
    return ok;
}

bool PgStore::heartbeat(const std::string& worker, const std::vector<std::string>& runIds, double leaseSeconds,
                        std::string& error) {
    if (runIds.empty()) return true;
    std::string ids = "{";
    for (size_t i = 0; i < runIds.size(); ++i) ids += (i ? "," : "") + runIds[i];
    ids += "}";
    pg::Result r = conn_->exec(fmt::format("UPDATE remit_runs SET lease_until = {} + $2 WHERE worker = $1 AND "
                                           "status = 'running' AND run_id = ANY($3::text[])",
                                           kNow),
                               {worker, num(leaseSeconds), ids});
    if (!r.ok()) error = conn_->lastError();
    return r.ok();
}

bool PgStore::abandon(const std::string& runId, const std::string& worker, std::string& error) {
    pg::Result r = conn_->exec(fmt::format("WITH u AS (UPDATE remit_runs SET status = 'queued', lease_until = NULL, "
                                           "updated_at = {} WHERE run_id = $1 AND worker = $2 AND status = 'running' "
                                           "RETURNING run_id) SELECT pg_notify('remit_runs', run_id) FROM u",
                                           kNow),
                               {runId, worker});
    if (!r.ok()) error = conn_->lastError();
    return r.ok();
}

int PgStore::wakeExpired(std::string& error) {
    pg::Result r = conn_->exec(
        fmt::format("WITH woken AS (UPDATE remit_runs r SET status = 'queued', updated_at = {0} FROM remit_approvals a "
                    "WHERE r.status = 'waiting' AND a.digest = r.waiting_digest AND a.section = 'pending' AND "
                    "jsonb_typeof(a.entry::jsonb -> 'expires_at') = 'number' AND "
                    "(a.entry::jsonb ->> 'expires_at')::float8 < {0} RETURNING r.run_id) "
                    "SELECT count(*), (SELECT count(*) FROM (SELECT pg_notify('remit_runs', run_id) FROM woken) n) "
                    "FROM woken",
                    kNow));
    if (!r.ok()) {
        error = conn_->lastError();
        return 0;
    }
    return static_cast<int>(r.number(0, 0).value_or(0));
}

std::optional<std::vector<SubmittedRun>> PgStore::listRuns(std::string& error) {
    pg::Result r = conn_->exec(fmt::format("SELECT {} FROM remit_runs ORDER BY created_at, run_id", kRunColumns));
    if (!r.ok()) {
        error = fmt::format("cannot list the runs of {}: {}", describe(), conn_->lastError());
        return std::nullopt;
    }
    std::vector<SubmittedRun> runs;
    for (int i = 0; i < r.rows(); ++i) runs.push_back(runFromRow(r, i));
    return runs;
}

std::optional<SubmittedRun> PgStore::findRun(const std::string& runId, std::string& error) {
    pg::Result r = conn_->exec(fmt::format("SELECT {} FROM remit_runs WHERE run_id = $1", kRunColumns), {runId});
    if (!r.ok()) {
        error = fmt::format("cannot read the runs of {}: {}", describe(), conn_->lastError());
        return std::nullopt;
    }
    if (r.rows() == 0) return std::nullopt;
    return runFromRow(r, 0);
}

std::optional<SubmittedRun> PgStore::findRunOf(const std::string& id, std::string& error) {
    pg::Result r = conn_->exec(fmt::format("SELECT {} FROM remit_runs WHERE run_id = coalesce((SELECT root FROM "
                                           "remit_traces WHERE run_id = $1), $1)",
                                           kRunColumns),
                               {id});
    if (!r.ok()) {
        error = fmt::format("cannot read the runs of {}: {}", describe(), conn_->lastError());
        return std::nullopt;
    }
    if (r.rows() == 0) return std::nullopt;
    return runFromRow(r, 0);
}

bool PgStore::requeue(const std::string& runId, std::string& error) {
    bool queued = false;
    bool ok = conn_->transaction([&] {
        pg::Result r = conn_->exec(fmt::format("UPDATE remit_runs SET status = 'queued', updated_at = {} WHERE run_id = "
                                               "$1 AND status = 'failed' RETURNING run_id",
                                               kNow),
                                   {runId});
        if (!r.ok()) return false;
        queued = r.rows() == 1;
        return !queued || conn_->exec("SELECT pg_notify('remit_runs', $1)", {runId}).ok();
    });
    if (!ok) error = fmt::format("cannot queue run {} in {}: {}", runId, describe(), conn_->lastError());
    return ok && queued;
}

bool PgStore::listen(std::string& error) {
    if (conn_->exec("LISTEN remit_runs").ok()) return true;
    error = conn_->lastError();
    return false;
}

std::unique_ptr<Store> openStore(const std::string* storeUrl, const std::string* stateDir, std::string& error) {
    if (storeUrl && stateDir) {
        error = "--store and --state-dir name two different stores; give one";
        return nullptr;
    }
    if (storeUrl) return PgStore::open(*storeUrl, error);
    if (stateDir) return std::make_unique<FileStore>(*stateDir);
    if (const char* env = std::getenv("REMIT_STORE"); env && *env) {
        std::unique_ptr<Store> store = PgStore::open(env, error);
        if (!store) error += " (from $REMIT_STORE)";
        return store;
    }
    return std::make_unique<FileStore>(".remit");
}

}  // namespace remit
