// See run_lifecycle.h.
#include "session/run_lifecycle.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <random>

#include "broker/broker.h"
#include "broker/replay.h"
#include "broker/trace.h"
#include "runtime/canonical_json.h"
#include "runtime/source.h"
#include "runtime/value_json.h"

namespace remit {

std::string newRunId() {
    std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
    std::random_device random;
    return fmt::format("{}-{:06x}", stamp, random() & 0xffffff);
}

BrokerOptions brokerOptionsFor(const Module& module, const HostModel& host, const Policy& policy, std::string runId,
                               bool strictFlows, std::string idempotencyRoot) {
    BrokerOptions options;
    options.idempotencyRoot = idempotencyRoot.empty() ? runId : std::move(idempotencyRoot);
    options.runId = std::move(runId);
    options.programHash = module.programHash;
    options.host = &host;
    options.policy = &policy;
    options.programBudget = module.budgetUsd;
    options.strictFlows = strictFlows;
    return options;
}

std::filesystem::path runTracePath(const std::filesystem::path& stateDir, std::string_view runId) {
    return stateDir / "runs" / (std::string(runId) + ".jsonl");
}

std::filesystem::path mcpLogPath(const std::filesystem::path& stateDir, std::string_view runId) {
    return stateDir / "logs" / (std::string(runId) + ".mcp.log");
}

std::filesystem::path runLockPath(const std::filesystem::path& stateDir, std::string_view idempotencyRoot) {
    return stateDir / "runs" / (std::string(idempotencyRoot) + ".lock");
}

std::filesystem::path approvalStorePath(const std::filesystem::path& stateDir) { return stateDir / "approvals.json"; }

std::optional<std::string> newestResumeOf(const std::filesystem::path& stateDir, const std::string& runId,
                                          StateProblem& problem) {
    std::filesystem::path runsDir = stateDir / "runs";
    std::map<std::string, std::string> newestChild;  // resumed_from -> newest run id (ids sort by time)
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(runsDir, ec)) {
        // Only regular files: opening a FIFO named like a trace would wait forever.
        if (entry.path().extension() != ".jsonl" || !entry.is_regular_file(ec)) continue;
        TraceFile first = readTrace(entry.path().string(), TraceCheck::AllowUnchained, 1);
        if (!first.error.empty()) {
            problem.message = fmt::format("cannot tell which run {} continues: {}", entry.path().string(), first.error);
            problem.hint = fmt::format("restore the file, or move it out of {} to resume other runs", runsDir.string());
            return std::nullopt;
        }
        if (first.events.empty()) continue;
        const nlohmann::json& start = first.events[0];
        std::string parent = stringField(start, "resumed_from"), id = stringField(start, "run_id");
        if (!isRunId(parent) || id != entry.path().stem().string() || !isRunId(id)) continue;
        std::string& child = newestChild[parent];
        child = std::max(child, id);
    }
    std::string current = runId;
    for (size_t hops = 0; hops < newestChild.size() && newestChild.count(current); ++hops)
        current = newestChild[current];
    return current;
}

Json runStartEvent(const RunStart& s) {
    bool hashed = s.policy && !s.policy->sha256.empty();
    Json start = {{"event", "run_start"},
                  {"run_id", s.runId},
                  {"idempotency_root", s.idempotencyRoot},
                  {"program", s.module->programName},
                  {"path", s.path},
                  {"program_hash", s.module->programHash},
                  {"host_hash", s.module->hostHash},
                  {"policy_hash", hashed ? Json(s.policy->sha256) : Json(nullptr)},
                  {"inputs", s.inputs},
                  {"mode", s.mode},
                  {"replaying", s.replaying}};
    if (s.adapters) {
        start["adapters"] = adapterSpecsJson(*s.adapters);
        for (const AdapterSpec& spec : *s.adapters)
            if (spec.kind == AdapterSpec::Kind::Process) {
                start["adapter_command"] = spec.command;
                start["adapter_cwd"] = spec.workingDir;
            }
    }
    if (s.strictFlows) start["strict_flows"] = true;
    if (s.resumedFrom) start["resumed_from"] = *s.resumedFrom;
    if (!s.inFlight.is_null()) start["in_flight"] = s.inFlight;
    if (s.signer) start["signer"] = *s.signer;
    if (s.trustedKey) start["trusted_key"] = *s.trustedKey;
    return start;
}

VmLimits overlay(VmLimits limits, const RunLimits& policy) {
    // The policy parser keeps each value positive and max_memory at most 32 GiB (docs/policy.md).
    if (policy.maxSteps) limits.maxSteps = static_cast<uint64_t>(*policy.maxSteps);
    if (policy.maxMemory) limits.maxMemory = static_cast<size_t>(*policy.maxMemory);
    if (policy.maxWallMs) limits.maxWallMs = static_cast<uint64_t>(*policy.maxWallMs);
    return limits;
}

VmLimits clampTo(VmLimits limits, const VmLimits& ceiling) {
    limits.maxSteps = std::min(limits.maxSteps, ceiling.maxSteps);
    limits.maxMemory = std::min(limits.maxMemory, ceiling.maxMemory);
    limits.maxWallMs = std::min(limits.maxWallMs, ceiling.maxWallMs);
    limits.maxResultBytes = std::min(limits.maxResultBytes, ceiling.maxResultBytes);
    return limits;
}

std::vector<Value> mainArguments(const LoadedProgram& program, const HostModel& host, Heap& heap,
                                 const nlohmann::json& given, std::string& problem) {
    std::vector<Value> out;
    const Function& main = program.module().functions[program.entry()];
    auto takes = [&] {
        return main.paramNames.empty() ? std::string("no inputs") : fmt::format("{}", fmt::join(main.paramNames, ", "));
    };
    if (!given.is_object()) {
        problem = fmt::format("inputs must be a JSON object with one entry per input of main (main takes {})", takes());
        return {};
    }
    for (auto it = given.begin(); it != given.end(); ++it)
        if (std::find(main.paramNames.begin(), main.paramNames.end(), it.key()) == main.paramNames.end()) {
            problem = fmt::format("unknown input '{}': main takes {}", firstCodePoints(it.key(), 64), takes());
            return {};
        }
    for (size_t p = 0; p < main.paramNames.size(); ++p) {
        const std::string& name = main.paramNames[p];
        auto it = given.find(name);
        if (it == given.end()) {
            problem = fmt::format("missing input '{}' (main takes {})", name, takes());
            return {};
        }
        std::vector<std::string> tagNames = host.inputTags(name);
        std::optional<TagSetId> tags = heap.internTags(std::span<const std::string>(tagNames));
        ValueFromJson v = tags ? valueFromJson(heap, *it, program.type(main.paramTypes[p]), "input." + name, *tags)
                               : ValueFromJson{};
        if (v.mismatch) {
            problem = fmt::format("input '{}' does not fit its type: {}", name, v.mismatch->text());
            return {};
        }
        if (!v.value) {
            problem = fmt::format("input '{}' does not fit in the run's memory limit", name);
            return {};
        }
        out.push_back(std::move(*v.value));
    }
    return out;
}

RunResult resultOf(Run& run, size_t maxBytes) {
    RunResult out;
    if (std::optional<Json> v = valueToJson(run.result(), maxBytes)) out.value = std::move(*v);
    std::optional<TagSetId> deep = run.heap().deepTags(run.result());
    for (const std::string& n : run.heap().tagTable().names(deep ? *deep : kNoTags)) out.tags.push_back(n);
    return out;
}

Json failureJson(const RunFailure& f) {
    const DiagInfo& info = diagInfo(f.error.code);
    Json error = {{"code", info.code},
                  {"name", info.name},
                  {"message", f.error.message},
                  {"line", f.span.line},
                  {"col", f.span.col}};
    if (!f.error.details.is_null()) error["details"] = f.error.details;
    return error;
}

Json runEndPaused(const std::string& runId, const std::string& digest) {
    return {{"event", "run_end"}, {"run_id", runId}, {"status", "pending_approval"}, {"digest", digest}};
}

Json runEndFailed(const std::string& runId, const RunFailure& f) {
    return {{"event", "run_end"}, {"run_id", runId}, {"status", "error"},
            {"code", std::string(diagInfo(f.error.code).code)}, {"message", f.error.message}};
}

Json runEndCompleted(const std::string& runId, const RunResult& result, double spentUsd) {
    return {{"event", "run_end"}, {"run_id", runId}, {"status", "ok"}, {"result", result.value},
            {"result_tags", result.tags}, {"spent_usd", spentUsd}};
}

std::optional<std::string> beginRunRecord(const std::filesystem::path& stateDir, const RunStart& start,
                                          TraceWriter& trace) {
    std::string path = runTracePath(stateDir, start.runId).string();
    if (std::string error; !trace.open(path, error)) return "the trace cannot be created";
    if (!trace.emit(runStartEvent(start)) || !trace.sync()) {
        std::error_code ec;
        std::filesystem::remove(path, ec);
        return fmt::format("the trace cannot be written ({})", trace.failure());
    }
    return std::nullopt;
}

ReplayVerdict replayVerdict(const ReplayPlan& plan, Run& run, RunStatus status, const Broker& broker) {
    ReplayVerdict verdict;
    auto diverged = [&](std::string message, bool showFailure) {
        verdict.divergence = std::move(message);
        verdict.showFailure = showFailure;
        return verdict;
    };
    auto atEnd = [&](const std::string& what) {
        return fmt::format("replay diverged at run_end ({}:{}): {}", plan.tracePath, plan.endLine, what);
    };
    auto reproduced = [&](std::string outcome) {
        verdict.reproduced = true;
        verdict.outcome = std::move(outcome);
        return verdict;
    };
    const Json& end = plan.end;
    std::string endStatus =
        end.is_object() && end.contains("status") && end["status"].is_string() ? end["status"].get<std::string>() : "";
    size_t recorded = plan.calls.size();
    std::string tooFew =
        fmt::format("replay diverged: program made {} of {} recorded calls", broker.replayed(), recorded);

    if (status == RunStatus::Failed) {
        const RunFailure& f = run.failure();
        std::string code(diagInfo(f.error.code).code);
        const std::optional<UnrecordedCall>& next = broker.unrecorded();
        bool usedUp = f.error.code == DiagCode::R0601 && next && broker.replayed() == recorded;
        if (usedUp && endStatus == "pending_approval") {
            // The run paused at this call: the replay reproduced everything up to the pause.
            const Json& p = plan.pendingApproval;
            auto field = [&](const char* key) {
                return p.contains(key) && p[key].is_string() ? p[key].get<std::string>() : std::string();
            };
            bool same = p.is_object() && field("resource") == next->resource && field("site") == next->site &&
                        p.contains("args") && canonicalJson(p["args"]) == canonicalJson(next->args);
            if (!same)
                return diverged(atEnd(fmt::format("the run paused for approval of another call than '{}' at {}",
                                                  next->resource, next->site)),
                                false);
            return reproduced(fmt::format("the run paused for approval of '{}' as recorded", next->resource));
        }
        if (usedUp && endStatus.empty()) return reproduced("the recorded run stopped here without a run_end");
        if (f.error.code == DiagCode::R0601) return diverged(f.error.message, true);
        if (broker.replayed() < recorded) return diverged(tooFew, true);
        if (endStatus == "error" && end.contains("code") && end["code"] == code)
            return reproduced(fmt::format("the run failed with {} as recorded", code));
        return diverged(atEnd(fmt::format("the run ended with {}, the replay failed with {}",
                                          endStatus.empty() ? "no run_end" : endStatus, code)),
                        true);
    }
    if (broker.replayed() < recorded) return diverged(tooFew, false);
    if (endStatus.empty()) return reproduced("the recorded run has no run_end to compare the result with");
    if (endStatus != "ok")
        return diverged(atEnd(fmt::format("the run ended with {}, the replay completed", endStatus)), false);
    RunResult result = resultOf(run);
    if (!end.contains("result") || canonicalJson(end["result"]) != canonicalJson(result.value))
        return diverged(atEnd("the final result differs from the recorded result"), false);
    if (end.contains("result_tags") && canonicalJson(end["result_tags"]) != canonicalJson(result.tags))
        return diverged(atEnd(fmt::format("the final result's tags differ: recorded {}, replayed {}",
                                          canonicalJson(end["result_tags"]), canonicalJson(result.tags))),
                        false);
    return reproduced("");
}

}  // namespace remit
