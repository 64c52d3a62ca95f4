// The state many runs share — the approval store's rules (single use, denials, quorum, expiry)
// and the shared budgets' ledger — against the independent models of tests/store/reference_models.h
// on random schedules: the rules alone with a clock the test moves (expiry included), and the
// file store (approvals.json, budgets.json) through its locks and files. The PostgreSQL store is
// held to the same models by tests/store/test_stores.cpp.
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "../store/store_schedules.h"
#include "broker/approvals.h"
#include "broker/budget.h"

namespace {

using namespace remit;

std::filesystem::path freshDir(const std::string& name) {
    auto dir = std::filesystem::temp_directory_path() / ("remit-unit-shared-" + std::to_string(::getpid()) + "-" + name);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

reference::Decision decisionOf(const ApprovalStore::Decided& d) {
    if (d.by) return reference::Decision::Granted;
    if (d.denial) return d.denial->expired ? reference::Decision::Expired : reference::Decision::Denied;
    return reference::Decision::Pending;
}

}  // namespace

TEST_CASE("approval rules: quorum, expiry, denials, single use and restore agree with the reference model") {
    // The rules on a document, with a clock the schedule moves: 3,000 schedules of 30 steps.
    for (unsigned seed = 1; seed <= 3000; ++seed) {
        std::mt19937 rng(seed);
        nlohmann::json doc = ApprovalStore::emptyDocument();
        double clock = 1000;
        reference::ApprovalSubject rules;
        rules.decide = [&](const std::string& d, int q, std::optional<double> e, const std::string& key, double now) {
            ApprovalStore::Decided got = ApprovalStore::decideIn(doc, d, reference::requestFor(q, e), "20260101-120000-a1b2c3", key, now);
            return std::pair{decisionOf(got), got.by.value_or("")};
        };
        rules.approve = [&](const std::string& d, const std::string& by, double now) {
            ApprovalProgress p;
            bool done = ApprovalStore::approveIn(doc, d, by, now, p);
            return reference::approvalOf(done, p);
        };
        rules.deny = [&](const std::string& d, const std::string& by) {
            return ApprovalStore::denyIn(doc, d, by, "no", clock);
        };
        rules.restore = [&](const std::string& d, const std::string& key, int q, std::optional<double> e, double now) {
            return ApprovalStore::restoreIn(doc, d, key, reference::requestFor(q, e), now);
        };
        rules.document = [&] { return doc; };
        std::string difference = reference::runApprovalSchedule(
            rng, 30, rules, true, [&] { return clock; }, [&](double dt) { clock += dt; });
        CAPTURE(seed);
        REQUIRE_MESSAGE(difference.empty(), difference);
    }
}

TEST_CASE("approval store (file): every change is kept as the reference model says") {
    auto dir = freshDir("approvals");
    for (unsigned seed = 1; seed <= 40; ++seed) {
        std::filesystem::remove(dir / "approvals.json");
        ApprovalStore store((dir / "approvals.json").string());
        std::string error;
        REQUIRE(store.load(error));
        std::mt19937 rng(seed);
        // What another process reads from the file, not what this object holds.
        reference::ApprovalSubject subject = reference::storeSubject(store, [&] {
            ApprovalStore reader((dir / "approvals.json").string());
            std::string e;
            REQUIRE(reader.load(e));
            return reader.contents();
        });
        std::string difference =
            reference::runApprovalSchedule(rng, 25, subject, false, [] { return 0.0; }, [](double) {});
        CAPTURE(seed);
        REQUIRE_MESSAGE(difference.empty(), difference);
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("approval store (file): a quorum's approval whose dispatch reached nobody goes back with its approvers") {
    auto dir = freshDir("restore");
    ApprovalStore store((dir / "approvals.json").string());
    std::string error;
    REQUIRE(store.load(error));
    reference::checkRestoreKeepsTheQuorum(store, [&] {
        ApprovalStore reader((dir / "approvals.json").string());
        std::string e;
        REQUIRE(reader.load(e));
        return reader.contents();
    });
    std::filesystem::remove_all(dir);
}

TEST_CASE("budget ledger (file): reservations and settlements agree with the reference model") {
    auto dir = freshDir("ledger");
    for (unsigned seed = 1; seed <= 40; ++seed) {
        FileBudgetLedger ledger((dir / ("budgets-" + std::to_string(seed) + ".json")).string());
        reference::runLedgerSchedule(ledger, seed, "team-a");
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("budget ledger (file): racing reservations take exactly what the scope covers") {
    // Eight threads, each with its own ledger object (its own lock file descriptor, as separate
    // processes would have), reserve $0.01 until refused: exactly max / cost get through.
    auto dir = freshDir("race");
    std::string path = (dir / "budgets.json").string();
    BudgetScope scope{"team-a", "month", 0.25};
    std::atomic<int> reserved{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&, t] {
            FileBudgetLedger ledger(path);
            for (int i = 0;; ++i) {
                Reservation r = ledger.reserve(scope, "t" + std::to_string(t) + "-" + std::to_string(i), 0.01, "r");
                if (r.kind != Reservation::Kind::Reserved) break;
                ++reserved;
            }
        });
    for (auto& t : threads) t.join();
    CHECK(reserved == 25);
    std::filesystem::remove_all(dir);
}
