// The schedules of reference_models.h driven through a store's own objects — an ApprovalStore
// (decide, approve, deny) and a BudgetLedger (reserve, settle, release) — as the file store's
// tests (tests/unit/test_shared_state.cpp) and the PostgreSQL store's (test_stores.cpp) both do.
#pragma once

#include <doctest/doctest.h>

#include "broker/approvals.h"
#include "broker/budget.h"
#include "reference_models.h"

namespace reference {

// The request a run's broker records: the grant's quorum only when it sets one.
inline nlohmann::json requestFor(int quorum, std::optional<double> expires = std::nullopt) {
    nlohmann::json request = {{"resource", "pay"}, {"site", "main#0"}, {"args", {{"n", 1}}}};
    if (quorum > 1) request["quorum"] = quorum;
    if (expires) request["expires_s"] = *expires;
    return request;
}

inline Approval approvalOf(bool done, const remit::ApprovalProgress& p) {
    if (done) return p.granted ? Approval::Granted : Approval::Partial;
    if (p.expired) return Approval::Expired;
    if (p.repeated) return Approval::Repeated;
    return Approval::NotPending;
}

// `store` as a schedule's subject, its entries read by `document` (another reader's view). Times
// are the store's own clock, so the schedule runs without expiry.
inline ApprovalSubject storeSubject(remit::ApprovalStore& store, std::function<nlohmann::json()> document) {
    ApprovalSubject subject;
    subject.decide = [&store](const std::string& d, int q, std::optional<double>, const std::string& key, double) {
        remit::Denial denial;
        std::string error;
        std::optional<std::string> by = store.decide(d, requestFor(q), "20260101-120000-a1b2c3", key, error, &denial);
        REQUIRE_MESSAGE(error.empty(), error);
        return std::pair{by ? Decision::Granted : denial.by.empty() ? Decision::Pending : Decision::Denied,
                         by.value_or("")};
    };
    subject.approve = [&store](const std::string& d, const std::string& by, double) {
        remit::ApprovalProgress p;
        std::string error;
        bool done = store.approve(d, by, error, &p);
        REQUIRE_MESSAGE(error.empty(), error);
        return approvalOf(done, p);
    };
    subject.deny = [&store](const std::string& d, const std::string& by) {
        std::string error;
        bool done = store.deny(d, by, "no", error);
        REQUIRE_MESSAGE(error.empty(), error);
        return done;
    };
    subject.restore = [&store](const std::string& d, const std::string& key, int q, std::optional<double>, double) {
        std::string error;
        bool done = store.restore(d, key, requestFor(q), error);
        REQUIRE_MESSAGE(error.empty(), error);
        return done;
    };
    subject.document = std::move(document);
    return subject;
}

// A quorum's approval whose dispatch reached nobody goes back (restore), in `store`, as
// `document` (another reader) sees it: only the attempt that consumed it gives it back, once; it
// comes back approved by the same approvers, so it still meets the quorum, and the next attempt
// uses it; unless the call was denied since, when the denial wins. Checked with doctest's CHECKs.
inline void checkRestoreKeepsTheQuorum(remit::ApprovalStore& store, const std::function<nlohmann::json()>& document) {
    std::string digest(64, 'r'), error;
    nlohmann::json request = requestFor(2);
    CHECK_FALSE(store.decide(digest, request, "20260101-120000-a1b2c3", "k1", error));
    REQUIRE(store.approve(digest, "ann", error));
    REQUIRE(store.approve(digest, "bob", error));
    REQUIRE(store.decide(digest, request, "20260101-120000-a1b2c3", "k1", error) == std::optional<std::string>("ann, bob"));
    CHECK_FALSE(store.restore(digest, "k2", request, error));  // not the attempt that consumed it
    CHECK(error.empty());
    REQUIRE(store.restore(digest, "k1", request, error));
    nlohmann::json doc = document();
    CHECK(doc["consumed"].empty());
    CHECK(doc["approved"][digest]["by"] == "ann, bob");
    CHECK(doc["approved"][digest]["approvers"] == nlohmann::json::array({"ann", "bob"}));
    CHECK(doc["pending"][digest]["quorum"] == 2);
    CHECK_FALSE(store.restore(digest, "k1", request, error));  // given back once
    CHECK(error.empty());
    CHECK(store.decide(digest, request, "20260101-120001-a1b2c3", "k3", error) == std::optional<std::string>("ann, bob"));
    CHECK_FALSE(store.decide(digest, request, "20260101-120001-a1b2c3", "k4", error));  // single use still
    CHECK(error.empty());
    // Denied meanwhile (another run asked for the same call): the denial wins over the approval
    // that would have gone back, and the attempt that consumed it meets the denial.
    REQUIRE(store.approve(digest, "ann", error));
    REQUIRE(store.approve(digest, "bob", error));
    REQUIRE(store.decide(digest, request, "20260101-120002-a1b2c3", "k5", error));
    CHECK_FALSE(store.decide(digest, request, "20260101-120003-a1b2c3", "k6", error));
    REQUIRE(store.deny(digest, "cy", "no", error));
    CHECK_FALSE(store.restore(digest, "k5", request, error));
    CHECK(error.empty());
    doc = document();
    CHECK(doc["consumed"].empty());
    CHECK(doc["approved"].empty());
    remit::Denial denial;
    CHECK_FALSE(store.decide(digest, request, "20260101-120002-a1b2c3", "k5", error, &denial));
    CHECK(denial.by == "cy");
}

// Thirty random reservations, settlements (overruns included) and releases on one scope of
// `ledger` and on the model; after each, the scope's totals must be the model's.
inline void runLedgerSchedule(remit::BudgetLedger& ledger, unsigned seed, const std::string& scope) {
    std::mt19937 rng(seed);
    double max = 0.05 * static_cast<double>(1 + rng() % 10);
    Ledger model(max);
    remit::BudgetScope budget{scope, "day", max};
    std::string period;
    for (int step = 0; step < 30; ++step) {
        std::string key = scope + "-key" + std::to_string(rng() % 6), error;
        switch (rng() % 3) {
            case 0: {
                double amount = 0.01 * static_cast<double>(rng() % 6);
                remit::Reservation r = ledger.reserve(budget, key, amount, "20260101-120000-a1b2c3");
                REQUIRE_MESSAGE(r.kind != remit::Reservation::Kind::Failed, r.error);
                period = r.period;
                CHECK((r.kind == remit::Reservation::Kind::Reserved) == (model.reserve(key, amount) == Reserve::Reserved));
                break;
            }
            case 1: {
                double actual = 0.01 * static_cast<double>(rng() % 8);
                REQUIRE(ledger.settle(key, actual, error));
                model.settle(key, actual);
                break;
            }
            default:
                REQUIRE(ledger.release(key, error));
                model.release(key);
        }
        if (period.empty()) continue;
        std::optional<remit::LedgerTotals> totals = ledger.totals(scope, period, error);
        REQUIRE(totals);
        CHECK(totals->spent == doctest::Approx(model.spent).epsilon(1e-9));
        CHECK(totals->reserved == doctest::Approx(model.reserved).epsilon(1e-9));
    }
}

}  // namespace reference
