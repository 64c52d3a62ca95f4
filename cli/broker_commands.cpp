// The commands that read the broker's state: `remitvm trace RUN [--why SEQ]` (a readable timeline,
// or the chain of calls and approvals behind one call) and `approve DIGEST-PREFIX|RUN_ID` (records
// a single-use approval in the store). Flag parsing and printing only; the formats live in
// broker/trace.* and broker/approvals.*.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "broker/approvals.h"
#include "broker/replay.h"
#include "broker/trace.h"
#include "bytecode/rbc.h"
#include "cli/commands.h"
#include "compiler/driver.h"
#include "compiler/manifest.h"
#include "runtime/canonical_json.h"
#include "runtime/files.h"
#include "runtime/numfmt.h"
#include "session/run_lifecycle.h"

namespace remit::cli {


int traceCommand(std::string_view tool, Args& args) {
    if (args.positional.size() != 1) {
        fmt::print(stderr, "{}: error: trace needs exactly one RUN_ID (or trace path)\n", tool);
        return kUsage;
    }
    std::string path = tracePathFor(tool, args, args.positional[0]);
    if (path.empty()) return kUsage;
    // Showing a trace acts on nothing, so one written before record checksums is shown (with a
    // warning); a damaged record is still refused, as resume and replay refuse it.
    TraceFile trace = readTrace(path, TraceCheck::AllowUnchained);
    if (!trace.error.empty()) {
        fmt::print(stderr, "{}: error: {}\n", tool, trace.error);
        return kUsage;
    }
    if (!trace.warning.empty()) fmt::print(stderr, "{}: warning: {}\n", tool, trace.warning);
    // --full: every value whole; the part a cut hides may be the one an approver must check.
    size_t maxChars = args.has("--full") ? kWholeValues : kTraceValueChars;
    if (const std::string* why = args.value("--why")) {
        uint64_t seq = 0;
        auto [end, ec] = std::from_chars(why->data(), why->data() + why->size(), seq);
        if (ec != std::errc() || end != why->data() + why->size() || seq == 0) {
            fmt::print(stderr, "{}: error: --why needs a call's seq number (1, 2, ...), not '{}'\n", tool, *why);
            return kUsage;
        }
        std::string error;
        std::string text = renderWhy(trace.events, seq, error, maxChars);
        if (!error.empty()) {
            fmt::print(stderr, "{}: error: {}\n", tool, error);
            return kUsage;
        }
        fmt::print("{}", text);
        return kOk;
    }
    fmt::print("{}", renderTimeline(trace.events, maxChars));
    return kOk;
}

namespace {

// The store of the state directory, loaded; prints why not (exit 2).
bool loadStore(std::string_view tool, ApprovalStore& store) {
    std::string error;
    if (store.load(error)) return true;
    fmt::print(stderr, "{}: error: {}\n", tool, error);
    return false;
}

// The pending request KEY names: a digest, a unique prefix of one, or a run id (that run's last
// pending_approval, whose digest must then be pending exactly: a digest read from a file is never
// a prefix that could match another run's request). Prints why not and returns empty.
std::string resolvePending(std::string_view tool, const Args& args, const ApprovalStore& store, std::string key) {
    std::error_code ec;
    bool byRun = false;
    std::string storePath = approvalStorePath(stateDirOf(args)).string();
    if (isRunId(key)) {
        std::string runTrace = runTracePath(stateDirOf(args), key).string();
        if (std::filesystem::is_regular_file(runTrace, ec)) {
            TraceFile trace = readTrace(runTrace);
            if (!trace.error.empty()) {
                fmt::print(stderr, "{}: error: {}\n", tool, trace.error);
                return {};
            }
            std::string digest;
            for (const auto& e : trace.events)
                if (e["event"] == "pending_approval") digest = stringField(e, "digest");
            if (digest.empty()) {
                fmt::print(stderr, "{}: error: run '{}' has no pending approval\n", tool, key);
                return {};
            }
            if (!isLowerHex(digest, 64)) {
                fmt::print(stderr, "{}: error: {}: its pending approval's digest is not a full SHA-256 digest (64 hex digits)\n", tool,
                           runTrace);
                return {};
            }
            key = digest;
            byRun = true;
        }
    }
    std::vector<std::string> matches = store.pendingMatching(key, byRun);
    if (matches.empty())
        if (auto used = store.consumedMatching(key)) {
            const nlohmann::json& by = used->second;
            fmt::print(stderr, "error: approval {} was already used by run {} (approved by {}); approvals are single use\n",
                       used->first, stringField(by, "run_id"), stringField(by, "by"));
            fmt::print(stderr, "  hint: run the program again; the same call then asks for a new approval\n");
            return {};
        }
    if (matches.size() != 1) {
        // Say where it looked: a follow-up pasted without its --state-dir looks in .remit.
        fmt::print(stderr, "error: {} pending approval matching '{}' in {}\n", matches.empty() ? "no" : "ambiguous",
                   key, storePath);
        if (matches.empty() && !args.value("--state-dir"))
            fmt::print(stderr,
                       "  hint: a run made with --state-dir D keeps its approvals there; pass the same "
                       "--state-dir\n");
        return {};
    }
    return matches[0];
}

// Who is approving or denying: --by, else $USER, else "cli".
std::string approverName(const Args& args) {
    if (const std::string* b = args.value("--by")) return *b;
    if (const char* user = std::getenv("USER"); user && *user) return user;
    return "cli";
}

int approveResolved(std::string_view tool, const Args& args, ApprovalStore& store, const std::string& digest) {
    std::string error;
    if (!store.approve(digest, approverName(args), error)) {
        fmt::print(stderr, "{}: error: {}\n", tool,
                   error.empty() ? "the request is no longer pending (another process approved or used it)" : error);
        return kUsage;
    }
    fmt::print("approved {} (single use, bound to this program version, call site and arguments)\n", digest);
    return kOk;
}

}  // namespace

int approveCommand(std::string_view tool, Args& args) {
    if (args.positional.size() != 1 || args.positional[0].empty()) {
        fmt::print(stderr, "{}: error: approve needs a DIGEST (or a unique prefix of one) or a RUN_ID\n", tool);
        return kUsage;
    }
    ApprovalStore store(approvalStorePath(stateDirOf(args)).string());
    if (!loadStore(tool, store)) return kUsage;
    std::string digest = resolvePending(tool, args, store, args.positional[0]);
    if (digest.empty()) return kUsage;
    fmt::print("{}\n", prettyJson(store.pending(digest)));
    return approveResolved(tool, args, store, digest);
}

namespace {

double nowSeconds() {
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
}

// "3 min ago", for a Unix time; empty when unknown (a store written by the prototype).
std::string ageText(const nlohmann::json& at) {
    if (!at.is_number()) return "";
    double seconds = std::max(0.0, nowSeconds() - at.get<double>());
    if (seconds < 120) return fmt::format("{:.0f} s ago", seconds);
    if (seconds < 7200) return fmt::format("{:.0f} min ago", seconds / 60);
    if (seconds < 172800) return fmt::format("{:.0f} h ago", seconds / 3600);
    return fmt::format("{:.0f} days ago", seconds / 86400);
}

// One pending request as `approvals list --json` and `show --json` give it.
nlohmann::json requestJson(const ApprovalStore& store, const std::string& digest) {
    const nlohmann::json& data = store.contents();
    const nlohmann::json& pending = data["pending"][digest];
    // Every member is read with its type checked: a hand-edited store must not make this throw.
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
    return out;
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
    nlohmann::json entry = {{"resource", nullptr}, {"call_site", nullptr}, {"flows", nlohmann::json::array()}};
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

int approvalsList(std::string_view tool, const Args& args, const ApprovalStore& store) {
    std::vector<std::string> digests = store.pendingMatching("");
    // Oldest first: the request that has waited longest is the first to decide.
    auto askedAt = [&](const std::string& d) {
        const nlohmann::json& p = store.pending(d);
        return p.contains("requested_at") && p["requested_at"].is_number() ? p["requested_at"].get<double>() : 0.0;
    };
    std::stable_sort(digests.begin(), digests.end(),
                     [&](const std::string& a, const std::string& b) { return askedAt(a) < askedAt(b); });
    if (args.has("--json")) {
        nlohmann::json out = nlohmann::json::array();
        for (const std::string& d : digests) out.push_back(requestJson(store, d));
        fmt::print("{}\n", prettyJson(out));
        return kOk;
    }
    std::string storePath = approvalStorePath(stateDirOf(args)).string();
    if (digests.empty()) {
        fmt::print("no pending approvals in {}\n", storePath);
        return kOk;
    }
    fmt::print("{} pending approval(s) in {}, oldest first:\n", digests.size(), storePath);
    for (const std::string& d : digests) {
        nlohmann::json r = requestJson(store, d);
        std::string age = ageText(r["requested_at"]);
        fmt::print("\n{}  {} @ {}{}{}\n", d.substr(0, 16), r["resource"].get<std::string>(),
                   r["site"].get<std::string>(),
                   r["run_id"].is_string() ? "  run " + r["run_id"].get<std::string>() : "",
                   age.empty() ? "" : "  asked " + age);
        for (const auto& reason : r["reasons"]) fmt::print("    needs approval: {}\n", reason.get<std::string>());
        std::string argsText = dumpJson(r["args"], JsonTextStyle{false, false, -1, ", ", ": "});
        if (argsText.size() > 100) argsText = argsText.substr(0, 100) + "… (`approvals show` has them all)";
        fmt::print("    args: {}\n", argsText);
        if (r["status"] == "approved")
            fmt::print("    approved by {}; the run uses it when it resumes\n", r["approved_by"].get<std::string>());
    }
    fmt::print("\nto decide: {} approvals show|approve|deny DIGEST-PREFIX{}\n", tool,
               stateFlags(args));
    return kOk;
}

// A dollar amount from JSON as every cost is printed; "?" when it is not a number.
std::string usdOf(const nlohmann::json& amount) {
    return amount.is_number() ? formatUsd(amount.get<double>()) : "?";
}

int approvalsShow(std::string_view tool, const Args& args, const ApprovalStore& store, const std::string& digest) {
    nlohmann::json request = requestJson(store, digest);
    // The run that asked: its program and the provenance of the arguments, from its trace.
    nlohmann::json start, pendingEvent;
    std::vector<nlohmann::json> events;
    if (request["run_id"].is_string() && isRunId(request["run_id"].get<std::string>())) {
        TraceFile trace = readTrace(runTracePath(stateDirOf(args), request["run_id"].get<std::string>()).string());
        if (trace.error.empty()) {
            events = std::move(trace.events);
            for (const auto& e : events) {
                if (e["event"] == "run_start" && start.is_null()) start = e;
                if (e["event"] == "pending_approval" && stringField(e, "digest") == digest) pendingEvent = e;
            }
        }
    }
    std::string programPath = start.is_object() ? stringField(start, "path") : "";
    request["program"] = start.is_object() ? nlohmann::json{{"name", stringField(start, "program")},
                                                            {"path", programPath},
                                                            {"program_hash", stringField(start, "program_hash")}}
                                           : nlohmann::json(nullptr);
    request["arg_tags"] = pendingEvent.is_object() && pendingEvent.contains("arg_tags") ? pendingEvent["arg_tags"]
                                                                                        : nlohmann::json(nullptr);
    request["derived_from"] = pendingEvent.is_object() && pendingEvent.contains("derived_from")
                                  ? pendingEvent["derived_from"]
                                  : nlohmann::json(nullptr);
    request["manifest"] = manifestEntry(manifestOfProgram(programPath), request["resource"].get<std::string>(),
                                        request["site"].get<std::string>());
    if (args.has("--json")) {
        fmt::print("{}\n", prettyJson(request));
        return kOk;
    }
    std::string age = ageText(request["requested_at"]);
    fmt::print("request {}\n", digest);
    fmt::print("  call       {} @ {}\n", request["resource"].get<std::string>(), request["site"].get<std::string>());
    if (request["program"].is_object())
        fmt::print("  program    {} ({}), hash {}\n", stringField(request["program"], "name"), programPath,
                   stringField(request["program"], "program_hash"));
    if (request["run_id"].is_string()) fmt::print("  run        {}\n", request["run_id"].get<std::string>());
    if (!age.empty()) fmt::print("  asked      {}\n", age);
    fmt::print("  status     {}\n", request["status"] == "approved"
                                        ? "approved by " + request["approved_by"].get<std::string>() +
                                              ", not yet used (the run uses it when it resumes)"
                                        : std::string("pending"));
    for (const auto& reason : request["reasons"]) fmt::print("  needs approval: {}\n", reason.get<std::string>());
    fmt::print("  arguments, in full:\n");
    std::istringstream lines(prettyJson(request["args"]));
    for (std::string line; std::getline(lines, line);) fmt::print("    {}\n", line);
    if (request["arg_tags"].is_object())
        for (auto it = request["arg_tags"].begin(); it != request["arg_tags"].end(); ++it)
            if (it->is_array() && !it->empty())
                fmt::print("  '{}' carries {}\n", it.key(), dumpJson(*it, JsonTextStyle{false, false, -1, ", ", ": "}));
    if (request["derived_from"].is_array()) {
        if (request["derived_from"].empty()) {
            fmt::print("  the arguments derive only from the run's inputs and the program's constants{}\n",
                       start.is_object() && start.contains("inputs")
                           ? ": " + dumpJson(start["inputs"], JsonTextStyle{false, false, -1, ", ", ": "})
                           : "");
        } else {
            fmt::print("  the arguments derive from these calls (as `trace --why` shows them):\n");
            for (const auto& seq : request["derived_from"]) {
                if (!seq.is_number_unsigned()) continue;
                std::string error;
                std::istringstream why(renderWhy(events, seq.get<uint64_t>(), error, kWholeValues));
                for (std::string line; std::getline(why, line);) fmt::print("    {}\n", line);
            }
        }
    }
    const nlohmann::json& m = request["manifest"];
    if (m["resource"].is_object()) {
        const nlohmann::json& r = m["resource"];
        fmt::print("  the program's manifest: {} at most {} call(s), worst case ${}; the program's worst case ${}\n",
                   request["resource"].get<std::string>(), r.value("max_calls", nlohmann::json()).dump(),
                   usdOf(r.value("worst_case_cost", nlohmann::json())),
                   usdOf(m.value("worst_case_cost_usd", nlohmann::json())));
        for (const auto& f : m["flows"])
            fmt::print("    flow into {}: {} ({})\n", stringField(f, "sink"),
                       dumpJson(f.value("tags", nlohmann::json::array()), JsonTextStyle{false, false, -1, ", ", ": "}),
                       stringField(f, "verdict"));
    } else if (!programPath.empty()) {
        fmt::print("  (the program {} cannot be read or checked any more, so its manifest is not shown)\n",
                   programPath);
    }
    std::string stateFlag = stateFlags(args);
    fmt::print("\nto decide: {} approvals approve {}{}   or   {} approvals deny {} --reason \"...\"{}\n", tool,
               digest.substr(0, 16), stateFlag, tool, digest.substr(0, 16), stateFlag);
    return kOk;
}

}  // namespace

namespace {

// The store of the state directory and the pending request `approvals SUB ID` names; prints why
// not and returns empty (exit 2).
std::string resolveOperand(std::string_view tool, std::string_view sub, const Args& args, ApprovalStore& store) {
    if (args.positional.size() != 1 || args.positional[0].empty()) {
        fmt::print(stderr, "{}: error: approvals {} needs one ID: a digest (or a unique prefix of one) or a run id\n",
                   tool, sub);
        return {};
    }
    if (!loadStore(tool, store)) return {};
    return resolvePending(tool, args, store, args.positional[0]);
}

}  // namespace

int approvalsListCommand(std::string_view tool, Args& args) {
    if (!args.positional.empty()) {
        fmt::print(stderr, "{}: error: approvals list takes no arguments\n", tool);
        return kUsage;
    }
    ApprovalStore store(approvalStorePath(stateDirOf(args)).string());
    if (!loadStore(tool, store)) return kUsage;
    return approvalsList(tool, args, store);
}

int approvalsShowCommand(std::string_view tool, Args& args) {
    ApprovalStore store(approvalStorePath(stateDirOf(args)).string());
    std::string digest = resolveOperand(tool, "show", args, store);
    return digest.empty() ? kUsage : approvalsShow(tool, args, store, digest);
}

int approvalsApproveCommand(std::string_view tool, Args& args) {
    ApprovalStore store(approvalStorePath(stateDirOf(args)).string());
    std::string digest = resolveOperand(tool, "approve", args, store);
    return digest.empty() ? kUsage : approveResolved(tool, args, store, digest);
}

int approvalsDenyCommand(std::string_view tool, Args& args) {
    ApprovalStore store(approvalStorePath(stateDirOf(args)).string());
    std::string digest = resolveOperand(tool, "deny", args, store);
    if (digest.empty()) return kUsage;
    std::string error;
    std::string by = approverName(args);
    std::string reason = args.value("--reason") ? *args.value("--reason") : "";
    if (!store.deny(digest, by, reason, error)) {
        fmt::print(stderr, "{}: error: {}\n", tool,
                   error.empty() ? "the request is no longer pending (another process decided or used it)" : error);
        return kUsage;
    }
    fmt::print("denied {} by {}{}: the run fails at this call when it resumes\n", digest, by,
               reason.empty() ? "" : " (" + reason + ")");
    return kOk;
}

}  // namespace remit::cli
