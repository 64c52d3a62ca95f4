// See oracle.h. Each step cites the rule of docs/broker.md it implements.
#include "tests/difftest/oracle.h"

#include <algorithm>
#include <cmath>

namespace remit::difftest {

namespace {

using json = nlohmann::json;

// Python's `==` on JSON values (docs/broker.md step 4: arg_one_of compares as Python does, so
// 1 == 1.0, and a bool is the number 0 or 1).
bool pyEqual(const json& a, const json& b) {
    auto numeric = [](const json& v) { return v.is_number() || v.is_boolean(); };
    if (numeric(a) && numeric(b)) {
        auto exactInt = [](const json& v, long double& out) {
            if (v.is_boolean()) out = v.get<bool>() ? 1 : 0;
            else if (v.is_number_unsigned()) out = static_cast<long double>(v.get<uint64_t>());
            else if (v.is_number_integer()) out = static_cast<long double>(v.get<int64_t>());
            else return false;
            return true;
        };
        long double x = 0, y = 0;
        bool xi = exactInt(a, x), yi = exactInt(b, y);
        if (xi && yi) return x == y;  // long double holds every int64 exactly
        if (!xi) x = a.get<double>();
        if (!yi) y = b.get<double>();
        return x == y;  // an int64 and a double compare exactly in long double's 64-bit mantissa
    }
    if (a.type() != b.type()) return false;
    if (a.is_array()) {
        if (a.size() != b.size()) return false;
        for (size_t i = 0; i < a.size(); ++i)
            if (!pyEqual(a[i], b[i])) return false;
        return true;
    }
    if (a.is_object()) {
        if (a.size() != b.size()) return false;
        for (auto it = a.begin(); it != a.end(); ++it) {
            auto other = b.find(it.key());
            if (other == b.end() || !pyEqual(it.value(), *other)) return false;
        }
        return true;
    }
    return a == b;
}

const json* argument(const OracleCall& call, const std::string& name) {
    for (size_t i = 0; i < call.argNames.size(); ++i)
        if (call.argNames[i] == name) return &call.args[i];
    return nullptr;
}

}  // namespace

Oracle::Oracle(const HostModel& host, const Policy& policy, std::optional<double> programBudget, bool strict)
    : host_(host), policy_(policy), strict_(strict) {
    // docs/language.md "Bounds and budget": the smaller of the program's budget and max_usd.
    if (programBudget && policy.maxUsd) budget_ = std::min(*programBudget, *policy.maxUsd);
    else if (programBudget) budget_ = programBudget;
    else budget_ = policy.maxUsd;
}

OracleDecision Oracle::decide(const OracleCall& call) {
    OracleDecision d;
    auto refuse = [&](const char* code) {
        d.refused = code;
        return d;
    };
    const Capability* cap = nullptr;
    if (!call.isModel) {
        auto it = host_.capabilities.find(call.resource);
        if (it != host_.capabilities.end()) cap = &it->second;
    }
    // Step 0: a retry of a capability that is not idempotent.
    if (call.attempt > 0 && cap && !cap->idempotent) return refuse("R0405");
    // Step 0: the agent's max_calls, checked and counted before the broker's own rules.
    if (!call.agent.empty()) {
        int64_t& n = agentCalls_[call.agent];
        if (call.agentMaxCalls && n >= *call.agentMaxCalls) return refuse("R0402");
        ++n;
    }
    // Steps 1-2: a declared resource, granted by the policy (agents under their model).
    bool declared = call.isModel ? host_.models.count(call.resource) > 0 : cap != nullptr;
    if (!declared) return refuse("R0303");
    auto grantIt = policy_.grants.find(call.resource);
    if (grantIt == policy_.grants.end()) return refuse("R0303");
    const Grant& grant = grantIt->second;
    // Step 3: deny tags against each argument's deep tags; the first parameter in declaration
    // order that receives one. In strict mode the pc reaches deny parameters too: a parameter
    // whose data carries no denied tag is refused for the pc's, `via: "control"`.
    if (cap) {
        for (const CapabilityParam& p : cap->params) {
            for (size_t i = 0; i < call.argNames.size(); ++i) {
                if (call.argNames[i] != p.name) continue;
                OracleDecision::Violation v{p.name, {}, false};
                for (const std::string& t : p.deny)
                    if (call.argTags[i].count(t)) v.tags.push_back(t);
                if (v.tags.empty() && strict_) {
                    for (const std::string& t : p.deny)
                        if (call.pc.count(t)) v.tags.push_back(t);
                    v.viaControl = true;
                }
                if (v.tags.empty()) continue;
                std::sort(v.tags.begin(), v.tags.end());
                v.tags.erase(std::unique(v.tags.begin(), v.tags.end()), v.tags.end());
                d.violation = v;
                return refuse("R0301");
            }
        }
    }
    // Step 4: the policy's argument constraints, arg_prefix, then arg_one_of, then arg_max. A
    // constrained parameter the call does not pass fails its constraint.
    for (const auto& [param, prefixes] : grant.argPrefix) {
        const json* v = argument(call, param);
        bool ok = false;
        if (v && v->is_string())
            for (const std::string& prefix : prefixes) ok = ok || v->get<std::string>().starts_with(prefix);
        if (!ok) return refuse("R0301");
    }
    for (const auto& [param, allowed] : grant.argOneOf) {
        const json* v = argument(call, param);
        bool ok = false;
        if (v)
            for (const json& a : allowed) ok = ok || pyEqual(*v, a);
        if (!ok) return refuse("R0301");
    }
    for (const auto& [param, max] : grant.argMax) {
        const json* v = argument(call, param);
        if (!v || !v->is_number() || !(v->get<double>() <= max)) return refuse("R0301");
    }
    // Step 5: the grant's max_calls for the resource.
    if (grant.maxCalls && calls_[call.resource] >= *grant.maxCalls) return refuse("R0402");
    // Step 7: approval — `approval always` (host or grant), or an approve tag (host parameter, then
    // the grant's `approve` table) in the argument's deep tags, else in the pc ("(control flow)").
    if ((cap && cap->approvalAlways) || grant.approvalAlways) d.reasons.push_back("always requires approval");
    for (size_t i = 0; i < call.argNames.size(); ++i) {
        const std::string& name = call.argNames[i];
        std::vector<std::string> approve;
        if (cap)
            for (const CapabilityParam& p : cap->params)
                if (p.name == name) approve = p.approve;
        if (auto g = grant.approve.find(name); g != grant.approve.end())
            for (const std::string& t : g->second)
                if (std::find(approve.begin(), approve.end(), t) == approve.end()) approve.push_back(t);
        for (const std::string& t : approve) {
            bool inData = call.argTags[i].count(t) > 0;
            if (inData) d.reasons.push_back("'" + name + "' is " + t);
            else if (call.pc.count(t)) d.reasons.push_back("'" + name + "' is " + t + " (control flow)");
        }
    }
    // Step 8: the budget, against the declared cost (nothing else is reserved between calls).
    d.reserve = cap ? cap->cost : host_.models.at(call.resource).cost;
    if (budget_ && spent_ + d.reserve > *budget_ + 1e-12) return refuse("R0401");
    return d;
}

uint64_t Oracle::dispatched(const OracleCall& call, double reserve, std::optional<double> actualCost) {
    // Step 10: the adapter's cost when it is a finite, non-negative number, else the declared one.
    double actual = actualCost && std::isfinite(*actualCost) && *actualCost >= 0 ? *actualCost : reserve;
    spent_ += actual;
    ++calls_[call.resource];
    return ++seq_;
}

}  // namespace remit::difftest
