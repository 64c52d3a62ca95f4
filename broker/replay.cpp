// See replay.h. A trace is hostile input (a person may edit it): every field is read with a type
// check, and a call event that lacks what a replay needs is an error naming its line.
#include "broker/replay.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "runtime/canonical_json.h"
#include "runtime/hash.h"

namespace remit {

namespace {

using OJ = nlohmann::ordered_json;

bool isString(const OJ& e, const char* key) { return e.contains(key) && e[key].is_string(); }

InFlightCall inFlightFrom(const OJ& e) {
    InFlightCall c{stringField(e, "run_id"), stringField(e, "resource"), stringField(e, "site"),
                   stringField(e, "idempotency_key"), stringField(e, "args_sha256"), nullptr};
    if (e.contains("approval") && e["approval"].is_object()) c.approval = e["approval"];
    return c;
}

}  // namespace

std::string argsDigest(const OJ& args) { return sha256Hex(canonicalJson(args)); }

OJ inFlightJson(const std::vector<InFlightCall>& calls) {
    OJ out = OJ::array();
    for (const InFlightCall& c : calls)
        out.push_back({{"run_id", c.runId}, {"resource", c.resource}, {"site", c.site},
                       {"idempotency_key", c.idempotencyKey}, {"args_sha256", c.argsDigest},
                       {"approval", c.approval}});
    return out;
}

ReplayPlan planFromTrace(const TraceFile& trace, const std::string& path, ReplayPurpose purpose, std::string& error) {
    ReplayPlan plan;
    plan.tracePath = path;
    plan.liveAfter = purpose == ReplayPurpose::Resume;
    plan.end = nullptr;
    plan.pendingApproval = nullptr;
    auto lineOf = [&](size_t i) { return i < trace.lines.size() ? trace.lines[i] : i + 1; };
    auto bad = [&](size_t i, std::string what) {
        error = fmt::format("{}:{}: {}", path, lineOf(i), what);
        return plan;
    };
    if (trace.events.empty() || trace.events[0].value("event", "") != "run_start")
        return bad(0, "not a run trace: the first event is not run_start");
    plan.start = trace.events[0];
    if (!isString(plan.start, "run_id") || !isString(plan.start, "program_hash") || !plan.start.contains("inputs") ||
        !plan.start["inputs"].is_object())
        return bad(0, "run_start lacks run_id, program_hash or an inputs object");
    for (const char* key : {"idempotency_root", "path", "mode", "host_hash", "adapter_command"})
        if (plan.start.contains(key) && !plan.start[key].is_string() && !plan.start[key].is_null())
            return bad(0, fmt::format("run_start's \"{}\" is not a string", key));

    // In flight: carried over from an earlier resume, plus this run's dispatches without an outcome.
    std::vector<InFlightCall> inFlight;
    if (plan.start.contains("in_flight") && plan.start["in_flight"].is_array())
        for (const auto& c : plan.start["in_flight"])
            if (c.is_object()) inFlight.push_back(inFlightFrom(c));
    std::set<std::string> resolved;  // idempotency keys with a call event in this trace

    for (size_t i = 1; i < trace.events.size(); ++i) {
        const OJ& e = trace.events[i];
        std::string kind = stringField(e, "event");
        if (kind == "call") {
            bool ok = stringField(e, "status") == "ok";
            if (!isString(e, "resource") || !isString(e, "site") || !e.contains("args") || !e["args"].is_object())
                return bad(i, "call event lacks resource, site or an args object");
            if (stringField(e, "status") != "ok" && stringField(e, "status") != "error")
                return bad(i, "call event has a status other than \"ok\" or \"error\"");
            if (ok && !e.contains("result")) return bad(i, "call event with status ok has no result");
            plan.calls.push_back(RecordedCall{e, lineOf(i)});
            if (isString(e, "idempotency_key")) resolved.insert(e["idempotency_key"].get<std::string>());
        } else if (kind == "dispatch") {
            if (!isString(e, "idempotency_key")) return bad(i, "dispatch event lacks its idempotency_key");
            inFlight.push_back(inFlightFrom(e));
        } else if (kind == "pending_approval") {
            plan.pendingApproval = e;
        } else if (kind == "run_end") {
            plan.end = e;
            plan.endLine = lineOf(i);
        }
    }
    for (const InFlightCall& c : inFlight)
        if (!resolved.count(c.idempotencyKey)) plan.inFlight.push_back(c);

    // A resume retries the failures that stopped the run (those after the last successful call),
    // unless the run paused: then it had moved past them (an `else`) to the call awaiting approval.
    bool paused = plan.end.is_object() && stringField(plan.end, "status") == "pending_approval";
    if (purpose == ReplayPurpose::Resume && !paused)
        while (!plan.calls.empty() && stringField(plan.calls.back().event, "status") != "ok") plan.calls.pop_back();
    return plan;
}

}  // namespace remit
