// Independent reference models of the shared-state rules, written from docs/operators.md
// ("Quorum and expiry"), docs/broker.md ("Approvals") and docs/policy.md ("[budget]" scope), not
// from broker/approvals.cpp or broker/budget.cpp: the oracle that tests/unit/test_shared_state.cpp
// (the rules, and the file store) and tests/store/test_stores.cpp (the PostgreSQL store, and
// racing workers) drive random schedules through and compare with. Plain structs, no JSON.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace reference {

// ---------------------------------------------------------------- approvals

// What one digest's entries are, as the docs describe them.
struct Entry {
    bool pending = false;
    double requestedAt = 0;
    std::optional<double> expiresAt;
    int quorum = 1;
    std::vector<std::string> given;  // approvers of the pending request so far (quorum > 1, or carried)
    bool approved = false;
    std::vector<std::string> approvers;  // of the approval (one for a plain approval)
    std::optional<std::string> consumedKey, consumedBy;
    std::optional<std::string> deniedBy;
    bool refused = false;
    bool operator==(const Entry&) const = default;
};

enum class Decision { Granted, Pending, Denied, Expired };
enum class Approval { NotPending, Expired, Repeated, Partial, Granted };

inline std::string joined(const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
}

inline void addDistinct(std::vector<std::string>& names, const std::string& n) {
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
}

class Approvals {
public:
    std::map<std::string, Entry> entries;

    // A consumed approval as it was (docs/broker.md: the consumed entry keeps the approval, its
    // request and its approvers), for restore to give back.
    struct Kept {
        bool hadRequest = false;  // a pending request was kept with it
        double requestedAt = 0;
        std::optional<double> expiresAt;
        int quorum = 1;
        std::vector<std::string> given, approvers;
    };
    std::map<std::string, Kept> kept;

    // A run's attempt `key` meets the request `digest` under a grant asking `quorum` approvers
    // within `expires` seconds. Returns the decision and, when granted, by whom.
    std::pair<Decision, std::string> decide(const std::string& digest, int quorum, std::optional<double> expires,
                                            const std::string& key, double now) {
        Entry& e = entries[digest];
        std::vector<std::string> carried;
        if (e.approved) {
            if (static_cast<int>(e.approvers.size()) >= quorum) {
                kept[digest] = Kept{e.pending, e.requestedAt, e.expiresAt, e.quorum, e.given, e.approvers};
                std::string by = joined(e.approvers);
                e.approved = false;
                e.approvers.clear();
                e.pending = false;
                e.given.clear();
                e.consumedKey = key;
                e.consumedBy = by;
                return {Decision::Granted, by};
            }
            carried = e.approvers;  // the quorum grew since: they count towards it
            e.approved = false;
            e.approvers.clear();
        }
        if (e.consumedKey == key) return {Decision::Granted, *e.consumedBy};
        if (e.deniedBy) {
            e.deniedBy.reset();
            e.pending = false;
            e.given.clear();
            e.refused = true;
            return {Decision::Denied, ""};
        }
        std::vector<std::string> given = e.pending ? e.given : std::vector<std::string>{};
        for (const std::string& n : carried) addDistinct(given, n);
        if (!given.empty() && static_cast<int>(given.size()) >= quorum) {
            kept[digest] = Kept{e.pending, e.requestedAt, e.expiresAt, e.quorum, given, given};
            e.pending = false;
            e.given.clear();
            e.consumedKey = key;
            e.consumedBy = joined(given);
            return {Decision::Granted, joined(given)};
        }
        if (e.pending && expires && now > e.requestedAt + *expires) {
            e.pending = false;
            e.given.clear();
            e.refused = true;
            return {Decision::Expired, ""};
        }
        double asked = e.pending ? e.requestedAt : now;
        e.pending = true;
        e.requestedAt = asked;
        e.expiresAt = expires ? std::optional<double>(asked + *expires) : std::nullopt;
        e.quorum = quorum;
        e.given = given;
        return {Decision::Pending, ""};
    }

    Approval approve(const std::string& digest, const std::string& by, double now) {
        Entry& e = entries[digest];
        if (!e.pending) return Approval::NotPending;
        if (e.expiresAt && now > *e.expiresAt) return Approval::Expired;
        if (e.quorum <= 1 && e.given.empty()) {  // one approver, the prototype's way: the last one counts
            e.approved = true;
            e.approvers = {by};
            return Approval::Granted;
        }
        if (std::find(e.given.begin(), e.given.end(), by) != e.given.end()) return Approval::Repeated;
        e.given.push_back(by);
        if (static_cast<int>(e.given.size()) >= e.quorum) {
            e.approved = true;
            e.approvers = e.given;
            return Approval::Granted;
        }
        return Approval::Partial;
    }

    bool deny(const std::string& digest, const std::string& by) {
        Entry& e = entries[digest];
        if (!e.pending) return false;
        e.deniedBy = by;
        e.pending = false;
        e.given.clear();
        e.approved = false;
        e.approvers.clear();
        return true;
    }

    // The attempt `key`'s dispatch never reached the adapter: the approval it consumed goes back to
    // approved, by the same approvers, and its request to pending, as they were when it was used —
    // unless the call was denied since, when the denial wins and the approval is dropped. A request
    // kept without its pending entry comes back as the run asks it now (`quorum`, no time).
    bool restore(const std::string& digest, const std::string& key, int quorum) {
        Entry& e = entries[digest];
        if (e.consumedKey != key) return false;
        e.consumedKey.reset();
        e.consumedBy.reset();
        if (e.deniedBy) return false;
        const Kept& k = kept[digest];
        e.approved = true;
        e.approvers = k.approvers;
        e.pending = true;
        e.requestedAt = k.hadRequest ? k.requestedAt : 0;
        e.expiresAt = k.hadRequest ? k.expiresAt : std::nullopt;
        e.quorum = k.hadRequest ? k.quorum : quorum;
        e.given = k.hadRequest ? k.given : std::vector<std::string>{};
        return true;
    }
};

// The entries of an approval store's sections (approvals.json's shape), as the model keeps them.
// `withTimes` false leaves the times out (a store that reads a real clock).
inline std::map<std::string, Entry> fromDocument(const nlohmann::json& doc, bool withTimes) {
    std::map<std::string, Entry> out;
    auto names = [](const nlohmann::json& list, bool objects) {
        std::vector<std::string> n;
        if (list.is_array())
            for (const auto& x : list) n.push_back(objects ? x.value("by", "") : x.get<std::string>());
        return n;
    };
    for (const auto& [d, p] : doc["pending"].items()) {
        Entry& e = out[d];
        e.pending = true;
        if (withTimes) {
            e.requestedAt = p.value("requested_at", 0.0);
            if (p.contains("expires_at")) e.expiresAt = p["expires_at"].get<double>();
        }
        e.quorum = p.value("quorum", 1);
        e.given = names(p.value("approvals", nlohmann::json::array()), true);
    }
    for (const auto& [d, a] : doc["approved"].items()) {
        out[d].approved = true;
        out[d].approvers = a.contains("approvers") ? names(a["approvers"], false)
                                                   : std::vector<std::string>{a.value("by", "")};
    }
    for (const auto& [d, c] : doc["consumed"].items()) {
        out[d].consumedKey = c.value("idempotency_key", "");
        out[d].consumedBy = c.value("by", "");
    }
    for (const auto& [d, x] : doc["denied"].items()) out[d].deniedBy = x.value("by", "");
    for (const auto& [d, x] : doc["refused"].items()) out[d].refused = true;
    return out;
}

// The model's entries as fromDocument gives a store's, for comparing.
inline std::map<std::string, Entry> comparable(const Approvals& model, bool withTimes) {
    std::map<std::string, Entry> out;
    for (auto [d, e] : model.entries) {
        if (e == Entry{}) continue;
        if (!e.pending) {  // only a pending request has these
            e.requestedAt = 0;
            e.expiresAt.reset();
            e.quorum = 1;
        }
        if (!withTimes) {
            e.requestedAt = 0;
            e.expiresAt.reset();
        }
        out[d] = e;
    }
    return out;
}

// A store (or the rules alone) under test, as a schedule drives it.
struct ApprovalSubject {
    std::function<std::pair<Decision, std::string>(const std::string& digest, int quorum, std::optional<double> expires,
                                                   const std::string& key, double now)>
        decide;
    std::function<Approval(const std::string& digest, const std::string& by, double now)> approve;
    std::function<bool(const std::string& digest, const std::string& by)> deny;
    // Gives back what attempt `key` consumed; the run's request is asked with `quorum` and `expires`.
    std::function<bool(const std::string& digest, const std::string& key, int quorum, std::optional<double> expires,
                       double now)>
        restore;
    std::function<nlohmann::json()> document;  // the five sections, as stored now
};

// Drives `subject` and the model through `steps` random operations on two digests — requests with
// random quorums (and expiries, when `expiring`), approvals by three approvers, denials, attempts
// with three keys, approvals given back by an attempt whose call reached nobody (restore), time
// passing — and compares each outcome and, after each step, every entry.
// Returns the first difference ("" when none). `now` gives the subject's time; `advance` moves it.
inline std::string runApprovalSchedule(std::mt19937& rng, int steps, ApprovalSubject& subject, bool expiring,
                                       const std::function<double()>& now,
                                       const std::function<void(double)>& advance) {
    Approvals model;
    const std::string digests[] = {std::string(64, 'a'), std::string(64, 'b')};
    const std::string people[] = {"ann", "bob", "cy"};
    const std::string keys[] = {"k0", "k1", "k2"};
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    // Each digest keeps its grant for a while (a policy changes rarely), sometimes a new one.
    int quorum[2] = {1, 1};
    std::optional<double> expires[2];
    std::string log;
    for (int step = 0; step < steps; ++step) {
        int d = pick(2);
        const std::string& digest = digests[d];
        int op = pick(11);
        std::string what;
        if (op < 4) {
            if (pick(6) == 0) {
                quorum[d] = 1 + pick(3);
                expires[d] = expiring && pick(2) ? std::optional<double>(5.0 + pick(20)) : std::nullopt;
            }
            std::string key = keys[pick(3)];
            auto got = subject.decide(digest, quorum[d], expires[d], key, now());
            auto want = model.decide(digest, quorum[d], expires[d], key, now());
            what = "decide " + digest.substr(0, 1) + " q" + std::to_string(quorum[d]) + " " + key;
            if (got != want)
                return log + what + ": store " + std::to_string(int(got.first)) + " '" + got.second + "', model " +
                       std::to_string(int(want.first)) + " '" + want.second + "'";
        } else if (op < 8) {
            std::string by = people[pick(3)];
            Approval got = subject.approve(digest, by, now()), want = model.approve(digest, by, now());
            what = "approve " + digest.substr(0, 1) + " " + by;
            if (got != want)
                return log + what + ": store " + std::to_string(int(got)) + ", model " + std::to_string(int(want));
        } else if (op < 9) {
            std::string by = people[pick(3)];
            bool got = subject.deny(digest, by), want = model.deny(digest, by);
            what = "deny " + digest.substr(0, 1);
            if (got != want) return log + what + ": store " + std::to_string(got) + ", model " + std::to_string(want);
        } else if (op < 10) {
            std::string key = keys[pick(3)];
            bool got = subject.restore(digest, key, quorum[d], expires[d], now());
            bool want = model.restore(digest, key, quorum[d]);
            what = "restore " + digest.substr(0, 1) + " " + key;
            if (got != want) return log + what + ": store " + std::to_string(got) + ", model " + std::to_string(want);
        } else {
            double dt = pick(12);
            advance(dt);
            what = "wait " + std::to_string(int(dt));
        }
        log += what + "; ";
        if (comparable(model, expiring) != fromDocument(subject.document(), expiring))
            return log + "the entries differ from the model's after this step: " + subject.document().dump();
    }
    return "";
}

// ---------------------------------------------------------------- the ledger

enum class Reserve { Reserved, Exceeded };

class Ledger {
public:
    explicit Ledger(double max) : max_(max) {}
    double spent = 0, reserved = 0;
    std::map<std::string, double> held;

    Reserve reserve(const std::string& key, double amount) {
        if (held.count(key)) return Reserve::Reserved;
        if (spent + reserved + amount > max_ + 1e-12) return Reserve::Exceeded;
        reserved += amount;
        held[key] = amount;
        return Reserve::Reserved;
    }
    void settle(const std::string& key, double actual) {
        auto it = held.find(key);
        if (it == held.end()) return;
        reserved = std::max(0.0, reserved - it->second);
        spent += actual;
        held.erase(it);
    }
    void release(const std::string& key) { settle(key, 0); }

private:
    double max_;
};

}  // namespace reference
