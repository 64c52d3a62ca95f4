// The PostgreSQL store (session/pg_store.h) against a real PostgreSQL: the private cluster that
// ctest's fixture "pg: cluster" starts (tests/pg/cluster.py; its state file in
// $REMIT_TEST_PG_STATE). Each case gets a fresh database. The shared-state rules are held to the
// independent models of reference_models.h on random schedules, as the file store is in
// tests/unit/test_shared_state.cpp, and to racing connections; traces, run holds and the schema's
// versions are checked as the store's invariants say.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "store_schedules.h"
#include "session/pg_store.h"
#include "session/run_lifecycle.h"

namespace {

using namespace remit;

// The cluster's socket directory, from the fixture's state file (fails the case when absent:
// these tests never skip).
std::string clusterDir() {
    const char* state = std::getenv("REMIT_TEST_PG_STATE");
    REQUIRE_MESSAGE(state, "REMIT_TEST_PG_STATE is not set: run these tests through ctest (fixture pg: cluster)");
    std::ifstream in(state);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    REQUIRE_MESSAGE(j.is_object(), "no PostgreSQL cluster state in " << state);
    return j["dir"].get<std::string>();
}

// A fresh database for one case; its URL.
std::string freshDatabase() {
    static int serial = 0;
    std::string dir = clusterDir();
    std::string name = "store_" + std::to_string(::getpid()) + "_" + std::to_string(++serial);
    std::string error;
    auto admin = pg::Connection::open("postgresql://remit@/postgres?host=" + dir, error);
    REQUIRE_MESSAGE(admin, error);
    admin->exec("DROP DATABASE IF EXISTS " + name);
    REQUIRE(admin->exec("CREATE DATABASE " + name).ok());
    return "postgresql://remit@/" + name + "?host=" + dir;
}

std::unique_ptr<PgStore> openPg(const std::string& url) {
    std::string error;
    std::unique_ptr<PgStore> store = PgStore::open(url, error);
    REQUIRE_MESSAGE(store, error);
    return store;
}

// Runs `body(store, n)` on eight threads at once, each with a connection of its own (as eight
// workers have); how many could not connect.
template <class Body>
int onEightConnections(const std::string& url, Body body) {
    std::atomic<int> failed{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&, t] {
            std::string e;
            auto mine = PgStore::open(url, e);
            if (mine) body(*mine, t);
            else ++failed;
        });
    for (auto& t : threads) t.join();
    return failed;
}

}  // namespace

TEST_CASE("pg store: approvals agree with the reference model") {
    std::string url = freshDatabase();
    for (unsigned seed = 1; seed <= 12; ++seed) {
        auto store = openPg(url);
        auto reader = openPg(url);
        store->connection().exec("DELETE FROM remit_approvals");
        std::mt19937 rng(seed);
        // What another connection reads, not what this one holds.
        reference::ApprovalSubject subject = reference::storeSubject(store->approvals(), [&] {
            std::string e;
            REQUIRE(reader->approvals().load(e));
            return reader->approvals().contents();
        });
        std::string difference =
            reference::runApprovalSchedule(rng, 20, subject, false, [] { return 0.0; }, [](double) {});
        CAPTURE(seed);
        REQUIRE_MESSAGE(difference.empty(), difference);
    }
}

TEST_CASE("pg store: an approval is consumed by exactly one of many racing attempts") {
    std::string url = freshDatabase();
    auto store = openPg(url);
    std::string digest(64, 'c'), error;
    REQUIRE_FALSE(store->approvals().decide(digest, reference::requestFor(2), "r", "first", error));
    REQUIRE(store->approvals().approve(digest, "ann", error));
    REQUIRE(store->approvals().approve(digest, "bob", error));
    std::atomic<int> granted{0}, failed{0};
    failed += onEightConnections(url, [&](PgStore& mine, int t) {
        std::string e;
        if (mine.approvals().decide(digest, reference::requestFor(2), "r", "key" + std::to_string(t), e)) ++granted;
        if (!e.empty()) ++failed;
    });
    CHECK(failed == 0);
    CHECK(granted == 1);
}

TEST_CASE("pg store: a quorum's approval whose dispatch reached nobody goes back with its approvers") {
    std::string url = freshDatabase();
    auto store = openPg(url);
    auto reader = openPg(url);
    reference::checkRestoreKeepsTheQuorum(store->approvals(), [&] {
        std::string e;
        REQUIRE(reader->approvals().load(e));
        return reader->approvals().contents();
    });
}

TEST_CASE("pg store: the ledger agrees with the reference model") {
    std::string url = freshDatabase();
    auto store = openPg(url);
    BudgetLedger& ledger = store->ledger();
    for (unsigned seed = 1; seed <= 10; ++seed) reference::runLedgerSchedule(ledger, seed, "scope-" + std::to_string(seed));
}

TEST_CASE("pg store: eight connections racing for a budget take exactly what it covers") {
    std::string url = freshDatabase();
    BudgetScope scope{"team-a", "month", 0.25};
    std::atomic<int> reserved{0}, failed{0};
    failed += onEightConnections(url, [&](PgStore& mine, int t) {
        for (int i = 0;; ++i) {
            Reservation r = mine.ledger().reserve(scope, "t" + std::to_string(t) + "-" + std::to_string(i), 0.01, "r");
            if (r.kind == Reservation::Kind::Failed) ++failed;
            if (r.kind != Reservation::Kind::Reserved) break;
            ++reserved;
        }
    });
    CHECK(failed == 0);
    CHECK(reserved == 25);
}

TEST_CASE("pg store: traces keep their records byte for byte, and a changed one is refused") {
    std::string url = freshDatabase();
    auto store = openPg(url);
    std::string runId = "20260101-120000-a1b2c3", error;
    std::unique_ptr<TraceWriter> trace = store->createTrace(runId, error);
    REQUIRE(trace);
    REQUIRE(trace->emit({{"event", "run_start"}, {"run_id", runId}, {"idempotency_root", runId}}));
    REQUIRE(trace->emit({{"event", "dispatch"}, {"run_id", runId}, {"k", 0}}));
    REQUIRE(trace->sync());
    REQUIRE(trace->emit({{"event", "run_end"}, {"run_id", runId}, {"status", "ok"}}));
    std::unique_ptr<TraceWriter> twice = store->createTrace(runId, error);  // a run id names one trace
    CHECK_FALSE(twice->emit({{"event", "run_start"}, {"run_id", runId}, {"idempotency_root", runId}}));
    TraceFile read = store->readTrace(runId, TraceCheck::Verify, static_cast<size_t>(-1));
    CHECK(read.error.empty());
    REQUIRE(read.events.size() == 3);
    CHECK(read.events[1]["event"] == "dispatch");
    CHECK(store->traceIds(runId) == std::vector<std::string>{runId});
    // The first record alone (a resume looks for its parent in it).
    CHECK(store->readTrace(runId, TraceCheck::Verify, 1).events.size() == 1);
    // One changed byte in the database: the chain refuses the record, naming it.
    REQUIRE(store->connection()
                .exec("UPDATE remit_trace_records SET record = replace(record, '\"k\":0', '\"k\":1') WHERE line = 2")
                .ok());
    read = store->readTrace(runId, TraceCheck::Verify, static_cast<size_t>(-1));
    CHECK(read.error.find("#" + runId + ":2: damaged record") != std::string::npos);
    // A connection lost mid-run: the writer fails, and stays failed.
    std::unique_ptr<TraceWriter> other = store->createTrace("20260101-120000-a1b2c4", error);
    REQUIRE(other->emit({{"event", "run_start"}, {"run_id", "20260101-120000-a1b2c4"}}));
    auto killer = openPg(url);
    REQUIRE(killer->connection()
                .exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND "
                      "datname = current_database()")
                .ok());
    CHECK_FALSE(other->emit({{"event", "dispatch"}}));
    CHECK_FALSE(other->ok());
    CHECK_FALSE(other->sync());
}

TEST_CASE("pg store: a run's hold is exclusive and ends with its holder's connection") {
    std::string url = freshDatabase();
    auto a = openPg(url), b = openPg(url);
    std::string error;
    std::unique_ptr<RunHold> held = a->holdRun("20260101-120000-a1b2c3", error);
    REQUIRE(held);
    CHECK_FALSE(b->holdRun("20260101-120000-a1b2c3", error));
    CHECK(error.find("another remitvm is running or resuming this run") != std::string::npos);
    CHECK(b->holdRun("20260101-120000-a1b2c4", error));  // another run is free
    held.reset();
    CHECK(b->holdRun("20260101-120000-a1b2c3", error));
    // The holder's connection ends without letting go (a killed worker): the server frees it.
    auto c = openPg(url);
    std::unique_ptr<RunHold> orphan = c->holdRun("20260101-120000-a1b2c5", error);
    REQUIRE(orphan);
    CHECK_FALSE(b->holdRun("20260101-120000-a1b2c5", error));
    // (Only this database's: other tests share the cluster.)
    b->connection().exec("SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND "
                         "pid <> pg_backend_pid() AND granted AND database = (SELECT oid FROM pg_database WHERE "
                         "datname = current_database())");
    std::unique_ptr<RunHold> taken;
    for (int i = 0; i < 200 && !(taken = b->holdRun("20260101-120000-a1b2c5", error)); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(taken);
}

TEST_CASE("pg store: the schema is migrated once, and a newer one is refused with both versions named") {
    std::string url = freshDatabase();
    std::string error;
    auto c = pg::Connection::open(url, error);
    REQUIRE(c);
    int applied = -1;
    REQUIRE(PgStore::migrateSchema(*c, applied, error));
    CHECK(applied == kStoreSchemaVersion);
    REQUIRE(PgStore::migrateSchema(*c, applied, error));
    CHECK(applied == 0);
    REQUIRE(c->exec("INSERT INTO remit_schema (version) VALUES (99)").ok());
    CHECK_FALSE(PgStore::open(url, error));
    CHECK(error.find("schema version 99, newer than this remitvm, which knows versions up to " +
                     std::to_string(kStoreSchemaVersion)) != std::string::npos);
    CHECK_FALSE(PgStore::migrateSchema(*c, applied, error));
    CHECK(error.find("version 99") != std::string::npos);
    // A malformed URL and an unreachable database are errors naming the store, never its password.
    CHECK_FALSE(PgStore::open("postgresql://ann:s3cret@/db?host=" + clusterDir() + "&port=notaport", error));
    CHECK(error.find("s3cret") == std::string::npos);
    CHECK_FALSE(PgStore::open("mysql://db", error));
    CHECK(error.starts_with("malformed store URL"));
    CHECK_FALSE(PgStore::open("postgresql://ann:s3cret@/db?host=/nonexistent-dir", error));
    CHECK(error.starts_with("cannot connect to the PostgreSQL store postgresql://ann@/db?host=/nonexistent-dir"));
    CHECK(error.find("s3cret") == std::string::npos);
}
