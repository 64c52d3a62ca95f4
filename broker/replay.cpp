// See replay.h. A trace is hostile input (a person may edit it, a disk may damage it; readTrace
// refuses damaged records): every field is read with a type check, every id that names a path is
// checked against its format, every key is recomputed, and a record that lacks what a replay needs
// is an error naming its line.
#include "broker/replay.h"
#include "runtime/json_text.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>

#include "runtime/canonical_json.h"
#include "runtime/hash.h"

namespace remit {

namespace {


bool isString(const Json& e, const char* key) { return e.contains(key) && e[key].is_string(); }

// A non-negative integer field, or nothing.
std::optional<uint64_t> countField(const Json& e, const char* key) {
    auto it = e.find(key);
    if (it == e.end() || !it->is_number_integer() || it->get<int64_t>() < 0) return std::nullopt;
    return it->get<uint64_t>();
}

}  // namespace

std::string idempotencyKey(const std::string& root, const std::string& site, uint64_t k) {
    // canonicalJson(Json::array({root, site, k})), written directly: one per call.
    std::string text = "[";
    appendJsonString(text, root, false);
    text += ',';
    appendJsonString(text, site, false);
    text += ',';
    text += std::to_string(k);
    text += ']';
    return sha256Hex(text, {}, 32);
}

std::string argsDigest(const Json& args) { return sha256Hex(canonicalJson(args)); }

Json inFlightJson(const std::vector<InFlightCall>& calls) {
    Json out = Json::array();
    for (const InFlightCall& c : calls)
        out.push_back({{"run_id", c.runId}, {"resource", c.resource}, {"site", c.site},
                       {"idempotency_key", c.idempotencyKey}, {"k", c.k}, {"attempt", c.attempt},
                       {"args_sha256", c.argsDigest}, {"approval", c.approval}});
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
    // Ids name files (runs/<id>.jsonl, runs/<root>.lock): only the exact format is accepted.
    for (const char* key : {"run_id", "idempotency_root", "resumed_from"})
        if (plan.start.contains(key) && !isRunId(stringField(plan.start, key)))
            return bad(0, fmt::format("run_start's \"{}\" is not a run id (YYYYMMDD-HHMMSS-xxxxxx)", key));
    const std::string root = stringField(plan.start, "idempotency_root").empty() ? stringField(plan.start, "run_id")
                                                                                 : stringField(plan.start, "idempotency_root");
    // Keys are derived: one that is not H(root, site, k) was not written by this broker.
    auto checkKey = [&](const Json& e, const char* what) -> std::string {
        std::optional<uint64_t> k = countField(e, "k");
        if (!isString(e, "idempotency_key") || !isString(e, "site") || !k || !countField(e, "attempt"))
            return fmt::format("{} lacks its idempotency_key, site, k or attempt", what);
        if (e["idempotency_key"].get<std::string>() != idempotencyKey(root, e["site"].get<std::string>(), *k))
            return fmt::format("{}'s idempotency_key is not the key of {} attempt {} in run {}", what,
                               e["site"].get<std::string>(), *k, root);
        return "";
    };
    auto inFlightFrom = [&](const Json& e) {
        InFlightCall c{stringField(e, "run_id"), stringField(e, "resource"), stringField(e, "site"),
                       stringField(e, "idempotency_key"), stringField(e, "args_sha256"), *countField(e, "k"),
                       static_cast<int64_t>(*countField(e, "attempt")), nullptr};
        if (e.contains("approval") && e["approval"].is_object()) c.approval = e["approval"];
        return c;
    };

    // In flight: carried over from an earlier resume, plus this run's dispatches without an outcome.
    std::vector<InFlightCall> inFlight;
    if (plan.start.contains("in_flight")) {
        if (!plan.start["in_flight"].is_array()) return bad(0, "run_start's \"in_flight\" is not a list");
        for (const auto& c : plan.start["in_flight"]) {
            if (!c.is_object()) return bad(0, "an entry of run_start's \"in_flight\" is not an object");
            if (std::string why = checkKey(c, "an in-flight call of run_start"); !why.empty()) return bad(0, why);
            if (!isRunId(stringField(c, "run_id")) || !isString(c, "resource"))
                return bad(0, "an in-flight call of run_start lacks its run_id or resource");
            inFlight.push_back(inFlightFrom(c));
        }
    }
    std::set<std::string> resolved;  // idempotency keys with a call or not_delivered event in this trace
    size_t replayedCopies = 0;

    for (size_t i = 1; i < trace.events.size(); ++i) {
        const Json& e = trace.events[i];
        std::string kind = stringField(e, "event");
        if (kind == "call") {
            bool ok = stringField(e, "status") == "ok";
            if (!isString(e, "resource") || !isString(e, "site") || !e.contains("args") || !e["args"].is_object())
                return bad(i, "call event lacks resource, site or an args object");
            if (stringField(e, "status") != "ok" && stringField(e, "status") != "error")
                return bad(i, "call event has a status other than \"ok\" or \"error\"");
            if (ok && !e.contains("result")) return bad(i, "call event with status ok has no result");
            if (std::string why = checkKey(e, "call event"); !why.empty()) return bad(i, why);
            plan.calls.push_back(RecordedCall{e, lineOf(i)});
            resolved.insert(e["idempotency_key"].get<std::string>());
            if (auto r = e.find("replayed"); r != e.end() && r->is_boolean() && r->get<bool>()) ++replayedCopies;
        } else if (kind == "dispatch") {
            if (std::string why = checkKey(e, "dispatch event"); !why.empty()) return bad(i, why);
            if (!isString(e, "resource") || !isString(e, "args_sha256") || !isRunId(stringField(e, "run_id")))
                return bad(i, "dispatch event lacks its resource, args_sha256 or run_id");
            inFlight.push_back(inFlightFrom(e));
        } else if (kind == "not_delivered") {
            // The dispatch before it reached nobody: it is not in flight, and the attempt is made
            // afresh (same key) by the resume.
            if (std::string why = checkKey(e, "not_delivered event"); !why.empty()) return bad(i, why);
            resolved.insert(e["idempotency_key"].get<std::string>());
        } else if (kind == "pending_approval") {
            if (!isLowerHex(stringField(e, "digest"), 64)) return bad(i, "pending_approval's digest is not 64 hex digits");
            plan.pendingApproval = e;
        } else if (kind == "run_end") {
            plan.end = e;
            plan.endLine = lineOf(i);
        }
    }
    for (const InFlightCall& c : inFlight)
        if (!resolved.count(c.idempotencyKey)) plan.inFlight.push_back(c);
    if (plan.start.contains("resumed_from"))
        if (std::optional<uint64_t> n = countField(plan.start, "replaying"); n && replayedCopies < *n)
            plan.replayUnfinished = true;

    // A resume retries the failures that ended the run (those after the last successful call). A
    // run without a run_end was interrupted, not ended by them: its resume goes on from them, as
    // the run would have (a `retry`'s next attempt, or an `else`).
    bool failed = plan.end.is_object() && stringField(plan.end, "status") == "error";
    if (purpose == ReplayPurpose::Resume && failed)
        while (!plan.calls.empty() && stringField(plan.calls.back().event, "status") != "ok") plan.calls.pop_back();
    return plan;
}

}  // namespace remit
