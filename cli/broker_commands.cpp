// The commands that read the broker's state: `remitvm trace RUN [--why SEQ]` (a readable timeline,
// or the chain of calls and approvals behind one call) and `approve DIGEST-PREFIX|RUN_ID` (records
// a single-use approval in the store). Flag parsing and printing only; the formats live in
// broker/trace.* and broker/approvals.*.
#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>

#include "broker/approvals.h"
#include "broker/replay.h"
#include "broker/trace.h"
#include "cli/commands.h"
#include "session/run_lifecycle.h"
#include "runtime/canonical_json.h"

namespace remit::cli {


int traceCommand(std::string_view tool, const std::vector<std::string>& argv) {
    Args args;
    if (!parseArgs(tool, argv, {}, {"--why", "--state-dir"}, args)) return kUsage;
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
    if (const std::string* why = args.value("--why")) {
        uint64_t seq = 0;
        auto [end, ec] = std::from_chars(why->data(), why->data() + why->size(), seq);
        if (ec != std::errc() || end != why->data() + why->size() || seq == 0) {
            fmt::print(stderr, "{}: error: --why needs a call's seq number (1, 2, ...), not '{}'\n", tool, *why);
            return kUsage;
        }
        std::string error;
        std::string text = renderWhy(trace.events, seq, error);
        if (!error.empty()) {
            fmt::print(stderr, "{}: error: {}\n", tool, error);
            return kUsage;
        }
        fmt::print("{}", text);
        return kOk;
    }
    fmt::print("{}", renderTimeline(trace.events));
    return kOk;
}

int approveCommand(std::string_view tool, const std::vector<std::string>& argv) {
    Args args;
    if (!parseArgs(tool, argv, {}, {"--by", "--state-dir"}, args)) return kUsage;
    if (args.positional.size() != 1 || args.positional[0].empty()) {
        fmt::print(stderr, "{}: error: approve needs a DIGEST (or a unique prefix of one) or a RUN_ID\n", tool);
        return kUsage;
    }
    std::string key = args.positional[0];
    ApprovalStore store(approvalStorePath(stateDirOf(args)).string());
    std::string error;
    if (!store.load(error)) {
        fmt::print(stderr, "{}: error: {}\n", tool, error);
        return kUsage;
    }
    // A run id (exactly one: the format names a file) approves that run's pending request, the last
    // pending_approval of its trace, whose digest must then be pending exactly: a digest read from
    // a file is never a prefix that could match another run's request.
    std::error_code ec;
    bool byRun = false;
    if (isRunId(key)) {
        std::string runTrace = runTracePath(stateDirOf(args), key).string();
        if (std::filesystem::is_regular_file(runTrace, ec)) {
            TraceFile trace = readTrace(runTrace);
            if (!trace.error.empty()) {
                fmt::print(stderr, "{}: error: {}\n", tool, trace.error);
                return kUsage;
            }
            std::string digest;
            for (const auto& e : trace.events)
                if (e["event"] == "pending_approval") digest = stringField(e, "digest");
            if (digest.empty()) {
                fmt::print(stderr, "{}: error: run '{}' has no pending approval\n", tool, key);
                return kUsage;
            }
            if (!isLowerHex(digest, 64)) {
                fmt::print(stderr, "{}: error: {}: its pending approval's digest is not a full SHA-256 digest (64 hex digits)\n", tool,
                           runTrace);
                return kUsage;
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
            return kUsage;
        }
    if (matches.size() != 1) {
        fmt::print(stderr, "error: {} pending approval matching '{}'\n", matches.empty() ? "no" : "ambiguous", key);
        return kUsage;
    }
    fmt::print("{}\n", dumpJson(store.pending(matches[0]), JsonTextStyle{false, false, 2, ",", ": "}));
    std::string by;
    if (const std::string* b = args.value("--by")) by = *b;
    else if (const char* user = std::getenv("USER"); user && *user) by = user;
    else by = "cli";
    if (!store.approve(matches[0], by, error)) {
        fmt::print(stderr, "{}: error: {}\n", tool,
                   error.empty() ? "the request is no longer pending (another process approved or used it)" : error);
        return kUsage;
    }
    fmt::print("approved {} (single use, bound to this program version, call site and arguments)\n", matches[0]);
    return kOk;
}

}  // namespace remit::cli
