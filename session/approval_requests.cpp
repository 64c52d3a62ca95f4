// See approval_requests.h.
#include "session/approval_requests.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "broker/replay.h"
#include "broker/trace.h"
#include "bytecode/rbc.h"
#include "compiler/driver.h"
#include "compiler/manifest.h"
#include "runtime/files.h"
#include "session/run_lifecycle.h"

namespace remit {

namespace {

double nowSeconds() {
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
}

// The program's manifest, read from the path its run recorded (a .rbc's own, a .rmt checked
// again); null when it is gone or no longer builds.
nlohmann::json manifestOfProgram(const std::string& path) {
    if (path.empty()) return nullptr;
    if (path.ends_with(".rbc")) {
        std::string bytes;
        if (readRegularFile(path, kMaxRbcBytes, bytes) || bytes.size() > kMaxRbcBytes) return nullptr;
        RbcLoadResult loaded = loadRbc(bytes);
        if (!loaded.module) return nullptr;
        return nlohmann::json::parse(loaded.module->manifestJson, nullptr, false);
    }
    CheckOptions options;
    options.checkPolicy = false;
    CheckOutcome outcome = checkProgramFile(path, options);
    if (outcome.ioError || !outcome.ok() || !outcome.checked) return nullptr;
    return manifestToJson(outcome.checked->manifest);
}

// What an approver should see of the program about this call: the resource's bounds, the call
// site's entry and the flows into the resource's parameters.
nlohmann::json manifestEntry(const nlohmann::json& manifest, const std::string& resource, const std::string& site) {
    nlohmann::json entry = {{"resource", nullptr},
                            {"call_site", nullptr},
                            {"flows", nlohmann::json::array()},
                            {"worst_case_cost_usd", nullptr},
                            {"budget_usd", nullptr}};
    if (!manifest.is_object()) return entry;
    if (auto r = manifest.find("resources"); r != manifest.end() && r->is_object() && r->contains(resource))
        entry["resource"] = (*r)[resource];
    if (auto sites = manifest.find("call_sites"); sites != manifest.end() && sites->is_array())
        for (const auto& s : *sites)
            if (s.is_object() && stringField(s, "site") == site) entry["call_site"] = s;
    if (auto flows = manifest.find("flows"); flows != manifest.end() && flows->is_array())
        for (const auto& f : *flows)
            if (f.is_object() && stringField(f, "sink").starts_with(resource + ".")) entry["flows"].push_back(f);
    for (const char* key : {"worst_case_cost_usd", "budget_usd"})
        if (manifest.contains(key)) entry[key] = manifest[key];
    return entry;
}

// The calls `roots` derive from, directly or through other calls, in seq order, as the trace
// recorded them (the last call event of each seq: replayed copies take new ones).
nlohmann::json provenanceCalls(const std::vector<nlohmann::json>& events, const nlohmann::json& roots) {
    std::map<uint64_t, const nlohmann::json*> calls;
    for (const nlohmann::json& e : events)
        if (e["event"] == "call")
            if (auto s = e.find("seq"); s != e.end() && s->is_number_unsigned()) calls[s->get<uint64_t>()] = &e;
    std::set<uint64_t> seen;
    std::vector<uint64_t> todo;
    auto push = [&](const nlohmann::json& seqs) {
        if (!seqs.is_array()) return;
        for (const auto& s : seqs)
            if (s.is_number_unsigned() && seen.insert(s.get<uint64_t>()).second) todo.push_back(s.get<uint64_t>());
    };
    push(roots);
    while (!todo.empty()) {
        uint64_t seq = todo.back();
        todo.pop_back();
        if (auto c = calls.find(seq); c != calls.end()) push(c->second->value("derived_from", nlohmann::json()));
    }
    nlohmann::json out = nlohmann::json::array();
    for (uint64_t seq : seen) {  // a std::set: in seq order
        auto c = calls.find(seq);
        if (c == calls.end()) {
            out.push_back({{"seq", seq}, {"resource", nullptr}, {"site", nullptr}, {"status", "not in this trace"}});
            continue;
        }
        const nlohmann::json& e = *c->second;
        auto member = [&](const char* key, nlohmann::json fallback) {
            auto it = e.find(key);
            return it != e.end() ? *it : fallback;
        };
        nlohmann::json approval = member("approval", nullptr);
        out.push_back({{"seq", seq},
                       {"resource", stringField(e, "resource")},
                       {"site", stringField(e, "site")},
                       {"args", member("args", nlohmann::json::object())},
                       {"arg_tags", member("arg_tags", nlohmann::json::object())},
                       {"derived_from", member("derived_from", nlohmann::json::array())},
                       {"status", stringField(e, "status")},
                       {"result", member("result", nullptr)},
                       {"result_tags", member("result_tags", nlohmann::json::array())},
                       {"error", member("error", nullptr)},
                       {"approved_by", approval.is_object() ? nlohmann::json(stringField(approval, "approved_by"))
                                                            : nlohmann::json(nullptr)}});
    }
    return out;
}

}  // namespace

std::string ageText(const nlohmann::json& at) {
    if (!at.is_number()) return "";
    double seconds = std::max(0.0, nowSeconds() - at.get<double>());
    if (seconds < 120) return fmt::format("{:.0f} s ago", seconds);
    if (seconds < 7200) return fmt::format("{:.0f} min ago", seconds / 60);
    if (seconds < 172800) return fmt::format("{:.0f} h ago", seconds / 3600);
    return fmt::format("{:.0f} days ago", seconds / 86400);
}

nlohmann::json pendingRequestJson(const ApprovalStore& store, const std::string& digest) {
    const nlohmann::json& data = store.contents();
    const nlohmann::json& pending = data["pending"][digest];
    auto member = [&](const char* key, bool (nlohmann::json::*is)() const noexcept) {
        auto it = pending.find(key);
        return it != pending.end() && ((*it).*is)() ? *it : nlohmann::json(nullptr);
    };
    nlohmann::json reasons = nlohmann::json::array();
    if (nlohmann::json r = member("reasons", &nlohmann::json::is_array); r.is_array())
        for (const auto& reason : r)
            if (reason.is_string()) reasons.push_back(reason);
    nlohmann::json args = member("args", &nlohmann::json::is_object);
    nlohmann::json out = {{"digest", digest},
                          {"resource", stringField(pending, "resource")},
                          {"site", stringField(pending, "site")},
                          {"args", args.is_null() ? nlohmann::json::object() : args},
                          {"reasons", std::move(reasons)},
                          {"program_hash", stringField(pending, "program_hash")},
                          {"run_id", member("run_id", &nlohmann::json::is_string)},
                          {"requested_at", member("requested_at", &nlohmann::json::is_number)},
                          {"status", "pending"},
                          {"approved_by", nullptr}};
    out["age_s"] = out["requested_at"].is_number()
                       ? nlohmann::json(std::max(0.0, nowSeconds() - out["requested_at"].get<double>()))
                       : nlohmann::json(nullptr);
    // Approved but not yet used: the run has not been resumed since.
    if (auto a = data["approved"].find(digest); a != data["approved"].end()) {
        out["status"] = "approved";
        out["approved_by"] = stringField(*a, "by");
    }
    // A grant with a quorum or an expiry (docs/operators.md "Quorum and expiry").
    out["quorum"] = pending.contains("quorum") && pending["quorum"].is_number_integer() ? pending["quorum"].get<int64_t>() : 1;
    out["approvers"] = nlohmann::json::array();
    if (auto given = pending.find("approvals"); given != pending.end() && given->is_array())
        for (const auto& g : *given)
            if (g.is_object() && !stringField(g, "by").empty()) out["approvers"].push_back(stringField(g, "by"));
    out["expires_at"] = member("expires_at", &nlohmann::json::is_number);
    if (out["status"] == "pending" && out["expires_at"].is_number() && nowSeconds() > out["expires_at"].get<double>())
        out["status"] = "expired";
    return out;
}

nlohmann::json pendingRequestsJson(const ApprovalStore& store) {
    std::vector<std::string> digests = store.pendingMatching("");
    auto askedAt = [&](const std::string& d) {
        const nlohmann::json& p = store.pending(d);
        return p.contains("requested_at") && p["requested_at"].is_number() ? p["requested_at"].get<double>() : 0.0;
    };
    std::stable_sort(digests.begin(), digests.end(),
                     [&](const std::string& a, const std::string& b) { return askedAt(a) < askedAt(b); });
    nlohmann::json out = nlohmann::json::array();
    for (const std::string& d : digests) out.push_back(pendingRequestJson(store, d));
    return out;
}

nlohmann::json requestDetailsJson(Store& records, const std::string& digest, std::vector<nlohmann::json>* eventsOut) {
    const ApprovalStore& store = records.approvals();
    nlohmann::json request = pendingRequestJson(store, digest);
    // The run that asked: its program, inputs and the provenance of the arguments, from its trace.
    nlohmann::json start, pendingEvent;
    std::vector<nlohmann::json> events;
    if (request["run_id"].is_string() && isRunId(request["run_id"].get<std::string>())) {
        TraceFile trace = records.readTrace(request["run_id"].get<std::string>());
        if (trace.error.empty()) events = std::move(trace.events);
        for (const auto& e : events) {
            if (e["event"] == "run_start" && start.is_null()) start = e;
            if (e["event"] == "pending_approval" && stringField(e, "digest") == digest) pendingEvent = e;
        }
    }
    std::string programPath = start.is_object() ? stringField(start, "path") : "";
    request["program"] = start.is_object() ? nlohmann::json{{"name", stringField(start, "program")},
                                                            {"path", programPath},
                                                            {"program_hash", stringField(start, "program_hash")}}
                                           : nlohmann::json(nullptr);
    request["inputs"] = start.is_object() && start.contains("inputs") ? start["inputs"] : nlohmann::json(nullptr);
    for (const char* key : {"arg_tags", "derived_from", "arg_derived_from"})
        request[key] = pendingEvent.is_object() && pendingEvent.contains(key) ? pendingEvent[key]
                                                                              : nlohmann::json(nullptr);
    request["provenance"] = provenanceCalls(events, request["derived_from"]);
    request["manifest"] = manifestEntry(manifestOfProgram(programPath), request["resource"].get<std::string>(),
                                        request["site"].get<std::string>());
    if (eventsOut) *eventsOut = std::move(events);
    return request;
}

PendingLookup findPendingRequest(Store& records, const std::string& id, bool stateDirGiven) {
    const ApprovalStore& store = records.approvals();
    PendingLookup out;
    std::string key = id;
    bool byRun = false;
    std::string storePath = store.where();
    if (isRunId(key)) {
        std::string runTrace = records.traceName(key);
        if (records.hasTrace(key)) {
            TraceFile trace = records.readTrace(key);
            if (!trace.error.empty()) {
                out.error = trace.error;
                return out;
            }
            std::string digest;
            for (const auto& e : trace.events)
                if (e["event"] == "pending_approval") digest = stringField(e, "digest");
            if (digest.empty()) {
                out.error = fmt::format("run '{}' has no pending approval", key);
                return out;
            }
            if (!isLowerHex(digest, 64)) {
                out.error = fmt::format(
                    "{}: its pending approval's digest is not a full SHA-256 digest (64 hex digits)", runTrace);
                return out;
            }
            key = digest;
            byRun = true;
        }
    }
    std::vector<std::string> matches = store.pendingMatching(key, byRun);
    if (matches.empty())
        if (auto used = store.consumedMatching(key)) {
            const nlohmann::json& by = used->second;
            out.error = fmt::format("approval {} was already used by run {} (approved by {}); approvals are single use",
                                    used->first, stringField(by, "run_id"), stringField(by, "by"));
            out.hint = "run the program again; the same call then asks for a new approval";
            return out;
        }
    if (matches.size() != 1) {
        // Say where it looked: a follow-up pasted without its --state-dir looks in .remit.
        out.error = fmt::format("{} pending approval matching '{}' in {}", matches.empty() ? "no" : "ambiguous", key,
                                storePath);
        if (matches.empty() && !stateDirGiven && records.kind() == Store::Kind::Files)
            out.hint = "a run made with --state-dir D keeps its approvals there; pass the same --state-dir";
        return out;
    }
    out.digest = matches[0];
    return out;
}

bool approveRequest(ApprovalStore& store, const std::string& digest, const std::string& by, std::string& error,
                    ApprovalProgress* progress, std::string* hint) {
    ApprovalProgress local;
    ApprovalProgress& p = progress ? *progress : local;
    if (store.approve(digest, by, error, &p)) return true;
    if (!error.empty()) return false;
    if (p.expired) {
        error = fmt::format("the request {} expired {}; it can no longer be approved", digest.substr(0, 16),
                            ageText(p.expiresAt));
        if (hint) *hint = "the run fails at this call when it resumes; run the program again to ask anew";
    } else if (p.repeated) {
        error = fmt::format("{} has already approved {}; it needs {} different approvers ({} so far)", by,
                            digest.substr(0, 16), p.quorum, p.approvers);
    } else {
        error = "the request is no longer pending (another process approved or used it)";
    }
    return false;
}

bool denyRequest(ApprovalStore& store, const std::string& digest, const std::string& by, const std::string& reason,
                 std::string& error) {
    if (store.deny(digest, by, reason, error)) return true;
    if (error.empty()) error = "the request is no longer pending (another process decided or used it)";
    return false;
}

}  // namespace remit
