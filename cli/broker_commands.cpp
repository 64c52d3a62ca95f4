// The commands that read the broker's state: `remitvm trace RUN [--why SEQ]` (a readable timeline,
// or the chain of calls and approvals behind one call), `approve DIGEST-PREFIX|RUN_ID` (records a
// single-use approval in the store) and `approvals list|show|approve|deny`. Flag parsing and
// printing only; the formats live in broker/trace.* and broker/approvals.*, and what an operator
// sees and decides in session/approval_requests.h, which the web inbox (cli/inbox_http.cpp) shares.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "broker/approvals.h"
#include "broker/state_file.h"
#include "broker/replay.h"
#include "broker/trace.h"
#include "cli/commands.h"
#include "runtime/canonical_json.h"
#include "runtime/files.h"
#include "runtime/numfmt.h"
#include "session/approval_requests.h"
#include "session/run_lifecycle.h"
#include "session/store.h"

namespace remit::cli {

std::string usdOf(const nlohmann::json& amount) {
    return amount.is_number() ? formatUsd(amount.get<double>()) : "?";
}


int traceCommand(std::string_view tool, Args& args) {
    if (args.positional.size() != 1) {
        fmt::print(stderr, "{}: error: trace needs exactly one RUN_ID (or trace path)\n", tool);
        return kUsage;
    }
    std::unique_ptr<Store> store = openStoreFor(tool, args);
    if (!store) return kUsage;
    // Showing a trace acts on nothing, so one written before record checksums is shown (with a
    // warning); a damaged record is still refused, as resume and replay refuse it.
    TraceFile trace;
    std::string path;
    if (!readRunTrace(tool, *store, args.positional[0], TraceCheck::AllowUnchained, trace, path)) return kUsage;
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

// "in 3 h", for a Unix time to come.
std::string untilText(double at) {
    double seconds = std::max(0.0, at - unixNow());
    if (seconds < 120) return fmt::format("in {:.0f} s", seconds);
    if (seconds < 7200) return fmt::format("in {:.0f} min", seconds / 60);
    if (seconds < 172800) return fmt::format("in {:.0f} h", seconds / 3600);
    return fmt::format("in {:.0f} days", seconds / 86400);
}

// The approval store, loaded; prints why not (exit 2).
bool loadStore(std::string_view tool, ApprovalStore& store) {
    std::string error;
    if (store.load(error)) return true;
    fmt::print(stderr, "{}: error: {}\n", tool, error);
    return false;
}

// The pending request an ID names (session/approval_requests.h); prints why not and returns empty.
std::string resolvePending(std::string_view tool, const Args& args, Store& records, const std::string& id) {
    PendingLookup found =
        findPendingRequest(records, id, args.value("--state-dir") != nullptr || args.value("--store") != nullptr);
    if (!found.digest.empty()) return found.digest;
    fmt::print(stderr, "{}: error: {}\n", tool, found.error);
    if (!found.hint.empty()) fmt::print(stderr, "  hint: {}\n", found.hint);
    return {};
}

// Who is approving or denying: --by, else $USER, else "cli".
std::string approverName(const Args& args) {
    if (const std::string* b = args.value("--by")) return *b;
    if (const char* user = std::getenv("USER"); user && *user) return user;
    return "cli";
}

// `approvals approve|deny --json`: the request as `list --json` gave it before the decision, with
// the decision in it — "status" "approved" or "denied", who ("approved_by" or "denied_by"), the
// denial's "reason" — and "resume", the command that continues its run (null without a run id).
nlohmann::json decidedJson(std::string_view tool, const Args& args, nlohmann::json request, bool approved,
                           const std::string& by, const std::string& reason) {
    request["status"] = approved ? "approved" : "denied";
    request["approved_by"] = approved ? nlohmann::json(by) : nlohmann::json();  // a denial overrides an approval
    if (!approved) {
        request["denied_by"] = by;
        request["reason"] = reason;
    }
    request["resume"] = request["run_id"].is_string()
                            ? nlohmann::json(fmt::format("{} resume {}{}", tool, request["run_id"].get<std::string>(),
                                                         stateFlags(args)))
                            : nlohmann::json();
    return request;
}

int approveResolved(std::string_view tool, const Args& args, ApprovalStore& store, const std::string& digest) {
    std::string error;
    std::string by = approverName(args);
    ApprovalProgress progress;
    std::string hint;
    if (!approveRequest(store, digest, by, error, &progress, &hint)) {
        fmt::print(stderr, "{}: error: {}\n", tool, error);
        if (!hint.empty()) fmt::print(stderr, "  hint: {}\n", hint);
        return kUsage;
    }
    // The request as it is now: its approvers so far, and who approved it once the quorum is reached.
    nlohmann::json request = pendingRequestJson(store, digest);
    if (args.has("--json")) {
        if (progress.granted) {
            std::string approvedBy = stringField(request, "approved_by");
            request = decidedJson(tool, args, std::move(request), true, approvedBy.empty() ? by : approvedBy, "");
        } else {
            request["resume"] = nullptr;  // the run waits for more approvers
        }
        fmt::print("{}\n", prettyJson(request));
        return kOk;
    }
    if (!progress.granted) {
        fmt::print("approved {} by {}: {} of the {} approvers it needs; the run waits for {} more\n", digest, by,
                   progress.approvers, progress.quorum, progress.quorum - progress.approvers);
        return kOk;
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
    std::unique_ptr<Store> records = openStoreFor(tool, args);
    if (!records) return kUsage;
    ApprovalStore& store = records->approvals();
    if (!loadStore(tool, store)) return kUsage;
    std::string digest = resolvePending(tool, args, *records, args.positional[0]);
    if (digest.empty()) return kUsage;
    fmt::print("{}\n", prettyJson(store.pending(digest)));
    return approveResolved(tool, args, store, digest);
}

namespace {

int approvalsList(std::string_view tool, const Args& args, const ApprovalStore& store) {
    nlohmann::json requests = pendingRequestsJson(store);
    if (args.has("--json")) {
        fmt::print("{}\n", prettyJson(requests));
        return kOk;
    }
    std::string storePath = store.where();
    if (requests.empty()) {
        fmt::print("no pending approvals in {}\n", storePath);
        return kOk;
    }
    fmt::print("{} pending approval(s) in {}, oldest first:\n", requests.size(), storePath);
    for (const nlohmann::json& r : requests) {
        std::string age = ageText(r["requested_at"]);
        fmt::print("\n{}  {} @ {}{}{}\n", r["digest"].get<std::string>().substr(0, 16), r["resource"].get<std::string>(),
                   r["site"].get<std::string>(),
                   r["run_id"].is_string() ? "  run " + r["run_id"].get<std::string>() : "",
                   age.empty() ? "" : "  asked " + age);
        for (const auto& reason : r["reasons"]) fmt::print("    needs approval: {}\n", reason.get<std::string>());
        std::string argsText = oneLineJson(r["args"]);
        if (argsText.size() > 100) argsText = argsText.substr(0, 100) + "… (`approvals show` has them all)";
        fmt::print("    args: {}\n", argsText);
        if (r["status"] == "approved")
            fmt::print("    approved by {}; the run uses it when it resumes\n", r["approved_by"].get<std::string>());
        else if (r["status"] == "expired")
            fmt::print("    expired {}: it can no longer be approved\n", ageText(r["expires_at"]));
        else if (r["quorum"].get<int64_t>() > 1 || r["expires_at"].is_number())
            fmt::print("    needs {} approver(s){}{}\n", r["quorum"].get<int64_t>(),
                       r["approvers"].empty() ? "" : ", approved so far by " + dumpJson(r["approvers"], JsonTextStyle{false, false, -1, ", ", ": "}),
                       r["expires_at"].is_number() ? ", expires " + untilText(r["expires_at"].get<double>()) : "");
    }
    fmt::print("\nto decide: {} approvals show|approve|deny DIGEST-PREFIX{}\n", tool, stateFlags(args));
    return kOk;
}

int approvalsShow(std::string_view tool, const Args& args, Store& records, const std::string& digest) {
    std::vector<nlohmann::json> events;
    nlohmann::json request = requestDetailsJson(records, digest, &events);
    if (args.has("--json")) {
        fmt::print("{}\n", prettyJson(request));
        return kOk;
    }
    const nlohmann::json& program = request["program"];
    std::string programPath = program.is_object() ? stringField(program, "path") : "";
    std::string age = ageText(request["requested_at"]);
    fmt::print("request {}\n", digest);
    fmt::print("  call       {} @ {}\n", request["resource"].get<std::string>(), request["site"].get<std::string>());
    if (program.is_object())
        fmt::print("  program    {} ({}), hash {}\n", stringField(program, "name"), programPath,
                   stringField(program, "program_hash"));
    if (request["run_id"].is_string()) fmt::print("  run        {}\n", request["run_id"].get<std::string>());
    if (!age.empty()) fmt::print("  asked      {}\n", age);
    fmt::print("  status     {}\n", request["status"] == "approved"
                                        ? "approved by " + request["approved_by"].get<std::string>() +
                                              ", not yet used (the run uses it when it resumes)"
                                        : request["status"] == "expired" ? "expired " + ageText(request["expires_at"])
                                                                         : std::string("pending"));
    if (request["quorum"].get<int64_t>() > 1)
        fmt::print("  quorum     {} different approvers; so far {}\n", request["quorum"].get<int64_t>(),
                   request["approvers"].empty() ? std::string("none")
                                                : dumpJson(request["approvers"], JsonTextStyle{false, false, -1, ", ", ": "}));
    if (request["expires_at"].is_number() && request["status"] != "expired")
        fmt::print("  expires    {}\n", untilText(request["expires_at"].get<double>()));
    for (const auto& reason : request["reasons"]) fmt::print("  needs approval: {}\n", reason.get<std::string>());
    fmt::print("  arguments, in full:\n");
    std::istringstream lines(prettyJson(request["args"]));
    for (std::string line; std::getline(lines, line);) fmt::print("    {}\n", line);
    if (request["arg_tags"].is_object())
        for (auto it = request["arg_tags"].begin(); it != request["arg_tags"].end(); ++it)
            if (it->is_array() && !it->empty()) fmt::print("  '{}' carries {}\n", it.key(), oneLineJson(*it));
    if (request["arg_derived_from"].is_object())
        for (auto it = request["arg_derived_from"].begin(); it != request["arg_derived_from"].end(); ++it)
            if (it->is_array() && !it->empty()) fmt::print("  '{}' derives from call(s) {}\n", it.key(), oneLineJson(*it));
    if (request["derived_from"].is_array()) {
        if (request["derived_from"].empty()) {
            fmt::print("  the arguments derive only from the run's inputs and the program's constants{}\n",
                       request["inputs"].is_null() ? "" : ": " + oneLineJson(request["inputs"]));
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
                       oneLineJson(f.value("tags", nlohmann::json::array())), stringField(f, "verdict"));
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

// The pending request `approvals SUB ID` names, in `records`; prints why not and returns empty
// (exit 2).
std::string resolveOperand(std::string_view tool, std::string_view sub, const Args& args, Store& records) {
    if (args.positional.size() != 1 || args.positional[0].empty()) {
        fmt::print(stderr, "{}: error: approvals {} needs one ID: a digest (or a unique prefix of one) or a run id\n",
                   tool, sub);
        return {};
    }
    if (!loadStore(tool, records.approvals())) return {};
    return resolvePending(tool, args, records, args.positional[0]);
}

}  // namespace

int approvalsListCommand(std::string_view tool, Args& args) {
    if (!args.positional.empty()) {
        fmt::print(stderr, "{}: error: approvals list takes no arguments\n", tool);
        return kUsage;
    }
    std::unique_ptr<Store> records = openStoreFor(tool, args);
    if (!records) return kUsage;
    ApprovalStore& store = records->approvals();
    if (!loadStore(tool, store)) return kUsage;
    return approvalsList(tool, args, store);
}

int approvalsShowCommand(std::string_view tool, Args& args) {
    std::unique_ptr<Store> records = openStoreFor(tool, args);
    if (!records) return kUsage;
    std::string digest = resolveOperand(tool, "show", args, *records);
    return digest.empty() ? kUsage : approvalsShow(tool, args, *records, digest);
}

int approvalsApproveCommand(std::string_view tool, Args& args) {
    std::unique_ptr<Store> records = openStoreFor(tool, args);
    if (!records) return kUsage;
    std::string digest = resolveOperand(tool, "approve", args, *records);
    return digest.empty() ? kUsage : approveResolved(tool, args, records->approvals(), digest);
}

int approvalsDenyCommand(std::string_view tool, Args& args) {
    std::unique_ptr<Store> records = openStoreFor(tool, args);
    if (!records) return kUsage;
    std::string digest = resolveOperand(tool, "deny", args, *records);
    if (digest.empty()) return kUsage;
    ApprovalStore& store = records->approvals();
    std::string error;
    std::string by = approverName(args);
    std::string reason = args.value("--reason") ? *args.value("--reason") : "";
    nlohmann::json request = pendingRequestJson(store, digest);
    if (!denyRequest(store, digest, by, reason, error)) {
        fmt::print(stderr, "{}: error: {}\n", tool, error);
        return kUsage;
    }
    if (args.has("--json")) {
        fmt::print("{}\n", prettyJson(decidedJson(tool, args, std::move(request), false, by, reason)));
        return kOk;
    }
    fmt::print("denied {} by {}{}: the run fails at this call when it resumes\n", digest, by,
               reason.empty() ? "" : " (" + reason + ")");
    return kOk;
}

}  // namespace remit::cli
