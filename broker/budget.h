// Shared budgets (docs/policy.md "[budget]", `scope`): many runs — in one state directory, or on
// every worker of a fleet (docs/fleet.md) — spend from one budget per day or month. The broker
// reserves each dispatch's declared cost in the scope's ledger before it sends the call, under the
// ledger's lock, and turns the reservation into the actual cost when the outcome is recorded, so
// runs racing for the last dollars of a scope dispatch exactly as many calls as it covers.
//
// Invariants:
// - A reservation belongs to one attempt, named by its idempotency key, and is counted once: an
//   in-flight call sent again after a crash keeps the reservation its first dispatch made.
// - Settling is idempotent: a reservation is turned into spending once; settling a key that holds
//   none does nothing. A resume that answers a recorded call from its trace settles it again, so a
//   crash between the call's record and its settlement loses nothing.
// - The check is the broker's: spent + reserved + cost > max_usd + 1e-12 is refused (R0401).
#pragma once

#include <optional>
#include <string>

namespace remit {

// A policy's shared scope: its name, its period ("day" or "month", UTC) and what it may spend in one.
struct BudgetScope {
    std::string name;
    std::string period;
    double maxUsd = 0;
};

// The key of the period `unixTime` falls in: "2026-01-15" (day) or "2026-01" (month), in UTC.
std::string budgetPeriodKey(const std::string& period, double unixTime);

// What a reservation found.
struct Reservation {
    enum class Kind { Reserved, Exceeded, Failed } kind = Kind::Failed;
    std::string period;          // the period's key
    double spent = 0, reserved = 0;  // the scope's in that period, before this reservation (Exceeded)
    std::string error;           // Failed: the ledger could not be read, locked or written
};

// One scope-period's totals and the rule on them, shared by every ledger.
struct LedgerTotals {
    double spent = 0, reserved = 0;
};
// Whether `amount` more fits under `maxUsd`.
bool ledgerAllows(const LedgerTotals& totals, double amount, double maxUsd);

class BudgetLedger {
public:
    virtual ~BudgetLedger() = default;
    // Reserves `amount` in the scope's current period for the attempt `key`; a reservation the key
    // already holds is kept (Reserved, nothing added).
    virtual Reservation reserve(const BudgetScope& scope, const std::string& key, double amount,
                                const std::string& runId) = 0;
    // The attempt's outcome: its reservation (if it still holds one) becomes `actual` spent in the
    // reservation's period. False with `error` when the ledger cannot be changed.
    virtual bool settle(const std::string& key, double actual, std::string& error) = 0;
    // The attempt was not sent after all: its reservation is dropped.
    virtual bool release(const std::string& key, std::string& error) = 0;
    // What a scope has spent and holds reserved in a period (zero when it has not begun); nullopt
    // with `error` when the ledger cannot be read.
    virtual std::optional<LedgerTotals> totals(const std::string& scope, const std::string& period,
                                               std::string& error) = 0;
};

// The ledger of a state directory: `<state>/budgets.json`, changed as broker/state_file.h says:
//   {"scopes": {NAME: {PERIOD: {"spent_usd", "reserved_usd"}}},
//    "reservations": {KEY: {"scope", "period", "amount", "run_id", "at"}}}
class FileBudgetLedger : public BudgetLedger {
public:
    explicit FileBudgetLedger(std::string path) : path_(std::move(path)) {}
    Reservation reserve(const BudgetScope& scope, const std::string& key, double amount,
                        const std::string& runId) override;
    bool settle(const std::string& key, double actual, std::string& error) override;
    bool release(const std::string& key, std::string& error) override;
    std::optional<LedgerTotals> totals(const std::string& scope, const std::string& period,
                                       std::string& error) override;

private:
    std::string path_;
};

}  // namespace remit
