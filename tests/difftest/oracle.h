// The reference for the broker's decisions (docs/broker.md "Order of the rules, per attempt",
// docs/policy.md, docs/diagnostics.md R0301-R0405), written from the docs and independent of
// broker/broker.cpp: for one attempt of a host call, which rule refuses it, or which approval
// reasons it needs and what it reserves; and the run's counters (calls per resource and agent,
// spent dollars, the `seq` of call events).
//
// The reference evaluator asks it at every attempt and records what it says as the events the
// broker's trace must contain. Approvals are always granted (the VM side runs with
// `approveAll`), so a needed approval shows as reasons on the call plus an `approval_granted`.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/host_model.h"
#include "runtime/policy.h"

namespace remit::difftest {

struct OracleCall {
    std::string resource;  // the capability, or the model (an agent's calls go under its model)
    bool isModel = false;
    std::string agent;     // empty unless an agent call
    std::optional<int64_t> agentMaxCalls;
    std::string site;
    uint32_t attempt = 0;
    std::vector<std::string> argNames;   // capability parameters in declaration order; models: prompt, context
    std::vector<nlohmann::json> args;    // plain JSON, parallel to argNames
    std::vector<std::set<std::string>> argTags;  // deep tags, parallel to argNames
    std::set<std::string> pc;
};

struct OracleDecision {
    std::optional<std::string> refused;  // the code of the rule that refuses the attempt ("R0301", ...)
    // A deny-tag refusal (the `violation` event): the parameter, the refused tags, sorted, and
    // whether they came through the pc (strict flows; `via: "control"`).
    struct Violation {
        std::string param;
        std::vector<std::string> tags;
        bool viaControl = false;
    };
    std::optional<Violation> violation;
    std::vector<std::string> reasons;    // approval reasons, in the broker's wording and order
    double reserve = 0;                  // the declared cost reserved before dispatch
};

class Oracle {
public:
    // `strict`: strict flows, where the pc reaches `deny` too (docs/language.md "Strict flows").
    Oracle(const HostModel& host, const Policy& policy, std::optional<double> programBudget, bool strict);

    OracleDecision decide(const OracleCall& call);
    // The attempt was dispatched and the adapter reported `actualCost` (or none: the declared
    // cost). Returns the call event's seq.
    uint64_t dispatched(const OracleCall& call, double reserve, std::optional<double> actualCost);

private:
    const HostModel& host_;
    const Policy& policy_;
    std::optional<double> budget_;
    bool strict_;
    double spent_ = 0;
    uint64_t seq_ = 0;
    std::map<std::string, int64_t> calls_;
    std::map<std::string, int64_t> agentCalls_;
};

}  // namespace remit::difftest
