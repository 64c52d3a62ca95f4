// See budget.h.
#include "broker/budget.h"

#include <fmt/format.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "broker/replay.h"  // stringField
#include "broker/state_file.h"
#include "runtime/canonical_json.h"
#include "runtime/files.h"
#include "runtime/json_text.h"

namespace remit {

std::string budgetPeriodKey(const std::string& period, double unixTime) {
    std::time_t t = static_cast<std::time_t>(unixTime);
    std::tm utc{};
    gmtime_r(&t, &utc);
    char text[16];
    std::strftime(text, sizeof text, period == "day" ? "%Y-%m-%d" : "%Y-%m", &utc);
    return text;
}

bool ledgerAllows(const LedgerTotals& totals, double amount, double maxUsd) {
    return !(totals.spent + totals.reserved + amount > maxUsd + 1e-12);
}

namespace {

constexpr size_t kMaxLedgerBytes = size_t(64) << 20;

// The ledger file, read under its lock; a missing file is an empty ledger, anything else that is
// not one is an error (nothing is written over it).
bool loadLedger(const std::string& path, nlohmann::json& doc, std::string& error) {
    std::string text;
    doc = {{"scopes", nlohmann::json::object()}, {"reservations", nlohmann::json::object()}};
    if (std::optional<FileProblem> problem = readRegularFile(path, kMaxLedgerBytes, text)) {
        if (problem->missing) return true;
        error = fmt::format("cannot read the budget ledger {}: {}; nothing was changed", path, problem->message);
        return false;
    }
    if (text.size() > kMaxLedgerBytes) {
        error = tooLargeMessage(path, kMaxLedgerBytes, "a budget ledger");
        return false;
    }
    std::string why;
    std::optional<nlohmann::json> parsed = parseJsonText(path, text, why);
    auto objectAt = [](const nlohmann::json& j, const char* key) { return j.contains(key) && j[key].is_object(); };
    if (!parsed || !parsed->is_object() || !objectAt(*parsed, "scopes") || !objectAt(*parsed, "reservations")) {
        error = fmt::format("{} is not a valid budget ledger{}", path, why.empty() ? "" : ": " + why);
        return false;
    }
    doc = std::move(*parsed);
    return true;
}

bool saveLedger(const std::string& path, const nlohmann::json& doc, std::string& error) {
    std::string why;
    if (replaceStateFile(path, dumpJson(doc, JsonTextStyle{true, true, 2, ",", ": "}), why)) return true;
    error = fmt::format("cannot write the budget ledger {} ({})", path, why);
    return false;
}

double number(const nlohmann::json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

}  // namespace

Reservation FileBudgetLedger::reserve(const BudgetScope& scope, const std::string& key, double amount,
                                      const std::string& runId) {
    Reservation out;
    StateFileLock lock(path_, "the budget ledger", out.error);
    nlohmann::json doc;
    if (!lock.held() || !loadLedger(path_, doc, out.error)) return out;
    if (auto held = doc["reservations"].find(key); held != doc["reservations"].end() && held->is_object()) {
        out.kind = Reservation::Kind::Reserved;
        out.period = stringField(*held, "period");
        return out;
    }
    out.period = budgetPeriodKey(scope.period, unixNow());
    nlohmann::json& row = doc["scopes"][scope.name][out.period];
    if (!row.is_object()) row = nlohmann::json::object();
    LedgerTotals totals{number(row, "spent_usd"), number(row, "reserved_usd")};
    out.spent = totals.spent;
    out.reserved = totals.reserved;
    if (!ledgerAllows(totals, amount, scope.maxUsd)) {
        out.kind = Reservation::Kind::Exceeded;
        return out;
    }
    row["spent_usd"] = totals.spent;
    row["reserved_usd"] = totals.reserved + amount;
    doc["reservations"][key] = {
        {"scope", scope.name}, {"period", out.period}, {"amount", amount}, {"run_id", runId}, {"at", unixNow()}};
    if (!saveLedger(path_, doc, out.error)) return out;
    out.kind = Reservation::Kind::Reserved;
    return out;
}

namespace {

// Settles (turns into `actual` spent) or, without `actual`, releases the reservation `key` holds.
bool finish(const std::string& path, const std::string& key, const double* actual, std::string& error) {
    StateFileLock lock(path, "the budget ledger", error);
    nlohmann::json doc;
    if (!lock.held() || !loadLedger(path, doc, error)) return false;
    auto held = doc["reservations"].find(key);
    if (held == doc["reservations"].end()) return true;  // settled already, or never reserved
    nlohmann::json reservation = held->is_object() ? *held : nlohmann::json::object();
    doc["reservations"].erase(held);
    std::string scope = stringField(reservation, "scope"), period = stringField(reservation, "period");
    nlohmann::json& row = doc["scopes"][scope][period];
    if (!row.is_object()) row = nlohmann::json::object();
    row["reserved_usd"] = std::max(0.0, number(row, "reserved_usd") - number(reservation, "amount"));
    row["spent_usd"] = number(row, "spent_usd") + (actual ? *actual : 0.0);
    return saveLedger(path, doc, error);
}

}  // namespace

bool FileBudgetLedger::settle(const std::string& key, double actual, std::string& error) {
    return finish(path_, key, &actual, error);
}

bool FileBudgetLedger::release(const std::string& key, std::string& error) {
    return finish(path_, key, nullptr, error);
}

std::optional<LedgerTotals> FileBudgetLedger::totals(const std::string& scope, const std::string& period,
                                                     std::string& error) {
    StateFileLock lock(path_, "the budget ledger", error);
    nlohmann::json doc;
    if (!lock.held() || !loadLedger(path_, doc, error)) return std::nullopt;
    LedgerTotals out;
    if (auto s = doc["scopes"].find(scope); s != doc["scopes"].end() && s->is_object())
        if (auto p = s->find(period); p != s->end() && p->is_object())
            out = LedgerTotals{number(*p, "spent_usd"), number(*p, "reserved_usd")};
    return out;
}

}  // namespace remit
