// See harness.h.
#include "tests/difftest/harness.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "broker/adapter.h"
#include "broker/broker.h"
#include "broker/trace.h"
#include "compiler/checker.h"
#include "compiler/manifest.h"
#include "compiler/parser.h"
#include "vm/run.h"
#include "runtime/policy.h"
#include "runtime/source.h"
#include "runtime/value_json.h"
#include "tests/difftest/outcome.h"
#include "tests/difftest/reference.h"
#include "tests/difftest/world.h"
#include "session/pipeline.h"

namespace remit::difftest {

namespace {

using json = nlohmann::json;
using OJ = nlohmann::ordered_json;

const char* kProgramFile = "prog.rmt";
const char* kHostFile = "host.rmti";
const char* kPolicyFile = "policy.toml";

// Rejections the generator cannot cheaply predict: a denied data flow (E0301, which needs the
// checker's flow analysis), the agent and budget bounds (E0403, E0404) and the policy's call and
// budget limits (E0502, E0503), which need its call counting. Anything else is a disagreement
// between the generator's typing and the checker's.
const std::set<std::string> kUnpredictable = {"E0301", "E0403", "E0404", "E0502", "E0503"};

std::string code(DiagCode c) { return std::string(diagInfo(c).code); }

// The adapter of the VM side: the world's answer to each dispatched attempt.
class WorldAdapter : public Adapter {
public:
    WorldAdapter(uint64_t seed, const HostModel& host, const Run& run) : seed_(seed), host_(host), run_(run) {}

    AdapterReply perform(const AdapterRequest& request) override {
        bool isModel = request.kind == AdapterRequest::Kind::Ask;
        const HostCall& call = run_.hostCall();  // the run is paused at this very call
        TypeRef type;
        double cost;
        if (isModel) {
            type = call.askType;
            cost = host_.model(request.resource)->cost;
        } else {
            const Capability* cap = host_.capability(request.resource);
            type = cap->ret;
            cost = cap->cost;
        }
        WorldReply w = worldAnswer(seed_, request.resource, isModel, json::parse(request.args.dump()), call.attempt,
                                   type, cost);
        AdapterReply reply;
        reply.ok = w.ok;
        reply.result = OJ::parse(w.result.dump());
        reply.costUsd = w.costUsd;
        reply.errorCode = w.errorCode;
        reply.message = w.message;
        return reply;
    }
    const char* kind() const override { return "world"; }

private:
    uint64_t seed_;
    const HostModel& host_;
    const Run& run_;
};

json vmLabelled(const Value& v, const Heap& heap) {
    json node = json::object();
    switch (v.kind()) {
        case ValueKind::List: {
            json items = json::array();
            for (const Value& item : v.asList().items) items.push_back(vmLabelled(item, heap));
            node["l"] = items;
            break;
        }
        case ValueKind::Record: {
            json fields = json::array();
            const RecordObject& r = v.asRecord();
            for (size_t i = 0; i < r.values.size(); ++i)
                fields.push_back(json::array({r.shape->names[i], vmLabelled(r.values[i], heap)}));
            node["r"] = fields;
            break;
        }
        default: node["v"] = json::parse(valueToJson(v)->dump());
    }
    node["t"] = heap.tagTable().names(v.tags());
    node["p"] = heap.provTable().flatten(v.prov());
    return node;
}

struct Parsed {
    std::unique_ptr<ast::Program> program;
    std::unique_ptr<ast::HostInterface> host;
    DiagnosticList diags;
};

std::unique_ptr<ast::HostInterface> parseHostText(const std::string& text, DiagnosticList& diags) {
    SourceFile source(kHostFile, text);
    return parseHost(source, diags);
}

std::string firstError(const DiagnosticList& diags) {
    for (const Diagnostic& d : diags.items())
        if (d.isError()) return fmt::format("{} at {}:{}: {}", code(d.code), d.span.line, d.span.col, d.message);
    return "";
}

// The errors (the first few) that the generator should have avoided.
std::vector<std::string> unexpectedErrors(const DiagnosticList& diags, const std::set<std::string>& expected) {
    std::vector<std::string> out;
    for (const Diagnostic& d : diags.items())
        if (d.isError() && !expected.count(code(d.code)) && out.size() < 5)
            out.push_back(fmt::format("{} at {}:{}: {}", code(d.code), d.span.line, d.span.col, d.message));
    return out;
}

// Static soundness (docs/manifest.md): every tag a capability parameter received at run time is
// in the manifest's flow for that sink, at that site, via data (the argument's deep tags) or via
// control (the pc); a site the manifest calls `approval: none` never needed an approval (the
// manifest includes the approvals of the policy the program is checked with); an `always` site
// always did; and a checked program never meets a deny rule at run time.
std::vector<std::string> soundness(const Manifest& m, const HostModel& host, const std::vector<json>& events,
                                   bool strippedDeny) {
    std::vector<std::string> out;
    std::map<std::string, const Flow*> flows;
    for (const Flow& f : m.flows) flows[f.sink] = &f;
    std::map<std::string, const CallSiteInfo*> sites;
    for (const CallSiteInfo& s : m.callSites) sites[s.site] = &s;
    auto flowHas = [&](const std::string& sink, const std::string& tag, const std::string& site, const char* via) {
        auto it = flows.find(sink);
        if (it == flows.end()) return false;
        const Flow& f = *it->second;
        return std::find(f.tags.begin(), f.tags.end(), tag) != f.tags.end() &&
               std::find(f.sites.begin(), f.sites.end(), FlowSite{site, via}) != f.sites.end();
    };
    for (const json& e : events) {
        std::string kind = e.value("event", "");
        if (kind == "violation" && !strippedDeny)
            out.push_back(fmt::format("a checked program met a deny rule at run time: {}", e.dump()));
        if (kind != "call") continue;
        std::string site = e.at("site"), resource = e.at("resource");
        auto siteIt = sites.find(site);
        if (siteIt == sites.end()) {
            out.push_back(fmt::format("call at {} ({}) is not among the manifest's call_sites", site, resource));
            continue;
        }
        bool needed = e.at("approval").is_object();
        bool always = needed && e.at("approval").at("reasons").size() > 0 &&
                      e.at("approval").at("reasons")[0] == "always requires approval";
        Approval predicted = siteIt->second->approval;
        if (predicted == Approval::None && needed)
            out.push_back(fmt::format("{} ({}) needed approval ({}), but the manifest says approval: none", site, resource,
                                      e.at("approval").at("reasons").dump()));
        if (predicted == Approval::Always && !always)
            out.push_back(fmt::format("{} ({}) is approval: always, but the call did not need it", site, resource));
        const Capability* cap = host.capability(resource);
        if (!cap) continue;  // models have no flows
        std::vector<std::string> pc = e.at("pc_tags");
        for (const CapabilityParam& p : cap->params) {
            std::vector<std::string> data = e.at("arg_tags").value(p.name, std::vector<std::string>{});
            std::string sink = resource + "." + p.name;
            for (const std::string& t : data)
                if (!flowHas(sink, t, site, "data"))
                    out.push_back(fmt::format("{} at {} received {} through data, which the manifest's flows do not list",
                                              sink, site, t));
            for (const std::string& t : pc)
                if (!flowHas(sink, t, site, "control"))
                    out.push_back(fmt::format("{} at {} received {} through control flow, which the manifest's flows do "
                                              "not list",
                                              sink, site, t));
        }
    }
    return out;
}

}  // namespace

CaseReport runCase(const Case& c, const std::string& tracePath) {
    CaseReport report;
    auto divergent = [&](std::string reason, std::vector<std::string> details) {
        report.kind = CaseReport::Kind::Divergent;
        report.reason = std::move(reason);
        report.details = std::move(details);
        return report;
    };

    // The host the broker enforces.
    DiagnosticList hostDiags;
    std::unique_ptr<ast::HostInterface> hostAst = parseHostText(c.host, hostDiags);
    HostModel realHost;
    if (!hostDiags.hasErrors()) resolveHost(*hostAst, kHostFile, realHost, hostDiags);
    if (hostDiags.hasErrors()) return divergent("host invalid", {firstError(hostDiags)});

    // The flow mode: the case's, or the policy's `[flows] strict` (the host chooses it).
    DiagnosticList policyDiags;
    std::optional<Policy> policy = parsePolicy(kPolicyFile, c.policy, policyDiags);
    if (!policy) return divergent("policy invalid", {firstError(policyDiags)});
    const bool strict = c.strict || policy->strictFlows;

    DiagnosticList diags;
    SourceFile programText(kProgramFile, c.source);
    std::unique_ptr<ast::Program> program = parseProgram(programText, diags);
    if (diags.hasErrors()) return divergent("rejected " + code(diags.items().front().code), {firstError(diags)});

    // Check against `hostText`'s interface, without its deny lists when `stripDeny`.
    auto check = [&](bool stripDeny, DiagnosticList& out) {
        DiagnosticList local;
        std::unique_ptr<ast::HostInterface> h = parseHostText(c.host, local);
        if (stripDeny)
            for (ast::DeclPtr& d : h->decls)
                if (d->kind == ast::DeclKind::Capability)
                    for (ast::Param& p : d->as<ast::CapabilityDecl>().params) p.deny.clear();
        HostModel model;
        resolveHost(*h, kHostFile, model, out);
        CheckerOptions options;
        options.programFile = kProgramFile;
        options.hostFile = kHostFile;
        options.strictFlows = strict;
        options.policy = &*policy;  // its approvals are part of the manifest's call sites
        return checkProgram(*program, std::move(model), out, options);
    };
    std::optional<CheckResult> checked = check(false, diags);
    if (diags.hasErrors()) {
        std::set<std::string> codes;
        for (const Diagnostic& d : diags.items())
            if (d.isError()) codes.insert(code(d.code));
        // Every unexpected code is in the reason, so a minimized case keeps exactly them.
        std::string unexpected;
        for (const std::string& k : codes)
            if (!kUnpredictable.count(k)) unexpected += (unexpected.empty() ? "" : "+") + k;
        if (!unexpected.empty()) return divergent("rejected " + unexpected, unexpectedErrors(diags, kUnpredictable));
        report.reason = *codes.begin();
        if (codes != std::set<std::string>{"E0301"}) {
            report.kind = CaseReport::Kind::Rejected;
            return report;
        }
        // A denied data flow: run it anyway, compiled against the host without deny lists, so the
        // broker's run-time deny rule (R0301) is exercised against the real host.
        DiagnosticList stripped;
        checked = check(true, stripped);
        if (stripped.hasErrors()) {
            report.kind = CaseReport::Kind::Rejected;
            return report;
        }
        report.strippedDeny = true;
    }

    checkPolicyAgainstHost(*policy, realHost.resourceNames(), policyDiags);
    if (policyDiags.hasErrors()) return divergent("policy invalid", {firstError(policyDiags)});
    checkManifestAgainstPolicy(checked->manifest, *policy, kProgramFile, program->span, policyDiags);
    if (policyDiags.hasErrors()) {
        std::string k = code(policyDiags.items().front().code);
        if (!kUnpredictable.count(k) && k != "E0501") return divergent("rejected " + k, {firstError(policyDiags)});
        // Over the policy's limits: run it anyway, so the broker's own call limits, budget and
        // grants are exercised (as when a changed policy applies to a resumed run).
        if (report.reason.empty()) report.reason = k;
        report.uncheckedPolicy = true;
    }

    std::string buildError;
    std::shared_ptr<const LoadedProgram> loaded = buildProgram(*program, *checked, kProgramFile, buildError);
    if (!loaded) return divergent("build failed", {buildError});

    // ---- The VM, through the real broker.
    VmLimits limits;
    limits.maxSteps = 4'000'000;
    limits.maxMemory = size_t(64) << 20;
    limits.maxWallMs = 4'000;
    Outcome vm;
    std::vector<json> rawEvents;
    {
        Run run(loaded, limits);
        Heap& heap = run.heap();
        const Function& main = loaded->module().functions[loaded->entry()];
        std::vector<Value> args;
        for (size_t p = 0; p < main.paramNames.size(); ++p) {
            const std::string& name = main.paramNames[p];
            std::vector<std::string> tagNames = realHost.inputTags(name);
            std::optional<TagSetId> tags = heap.internTags(std::span<const std::string>(tagNames));
            ValueFromJson v = valueFromJson(heap, c.inputs.at(name), loaded->type(main.paramTypes[p]), "input." + name,
                                            tags.value_or(kNoTags));
            if (!v.value) return divergent("inputs", {fmt::format("input {} does not fit: {}", name, v.mismatch ? v.mismatch->text() : "memory")});
            args.push_back(std::move(*v.value));
        }
        WorldAdapter adapter(c.worldSeed, realHost, run);
        TraceWriter trace;
        std::string traceError;
        if (!trace.open(tracePath, traceError)) return divergent("trace", {traceError});
        BrokerOptions options;
        options.runId = "difftest";
        options.idempotencyRoot = "difftest";
        options.programHash = loaded->module().programHash;
        options.host = &realHost;
        options.policy = &*policy;
        options.adapterKind = adapter.kind();
        options.trace = &trace;
        options.approveAll = true;
        options.programBudget = loaded->module().budgetUsd;
        options.strictFlows = strict;
        Broker broker(options, run);
        run.start(loaded->entry(), std::move(args));
        RunStatus status = driveWith(run, broker, &adapter);
        if (status == RunStatus::Completed) {
            vm.status = Outcome::Status::Completed;
            vm.value = vmLabelled(run.result(), heap);
            report.vmEnd = "ok";
        } else {
            const RunFailure& f = run.failure();
            vm.status = f.error.code == DiagCode::R0701 ? Outcome::Status::Limit : Outcome::Status::Failed;
            vm.code = code(f.error.code);
            vm.line = f.span.line;
            vm.col = f.span.col;
            vm.endLine = f.span.endLine;
            vm.endCol = f.span.endCol;
            vm.message = f.error.message;
            report.vmEnd = vm.code;
        }
    }
    TraceFile traced = readTrace(tracePath);
    if (!traced.error.empty()) return divergent("trace", {traced.error});
    for (json& e : traced.events) {
        json n = normaliseTraceEvent(e);
        if (n.is_null()) continue;
        if (n["event"] == "call") ++report.calls;
        vm.events.push_back(std::move(n));
        rawEvents.push_back(std::move(e));
    }

    // ---- The reference, on the same checked tree.
    ReferenceOptions refOptions;
    refOptions.strict = strict;
    refOptions.worldSeed = c.worldSeed;
    Outcome ref = runReference(*program, *checked, realHost, *policy, c.inputs, refOptions);

    if (vm.status == Outcome::Status::Limit || ref.status == Outcome::Status::Limit) {
        report.kind = CaseReport::Kind::Limit;
        return report;
    }
    std::vector<std::string> differences = compareOutcomes(vm, ref);
    if (!differences.empty()) return divergent("vm vs reference", differences);
    std::vector<std::string> unsound = soundness(checked->manifest, realHost, rawEvents, report.strippedDeny);
    if (!unsound.empty()) return divergent("soundness", unsound);
    report.kind = CaseReport::Kind::Compared;
    return report;
}

namespace {

bool writeFile(const std::filesystem::path& path, const std::string& text, std::string& error) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    if (!out) error = "cannot write " + path.string();
    return static_cast<bool>(out);
}

std::optional<std::string> readFile(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

bool saveCase(const Case& c, const std::string& dir, const std::string& report, std::string& error) {
    std::filesystem::path d(dir);
    std::error_code ec;
    std::filesystem::create_directories(d, ec);
    if (ec) {
        error = "cannot create " + dir + ": " + ec.message();
        return false;
    }
    json meta = {{"inputs", c.inputs}, {"world_seed", c.worldSeed}, {"strict", c.strict}};
    return writeFile(d / kProgramFile, c.source, error) && writeFile(d / kHostFile, c.host, error) &&
           writeFile(d / kPolicyFile, c.policy, error) && writeFile(d / "case.json", meta.dump(2) + "\n", error) &&
           (report.empty() || writeFile(d / "report.txt", report, error));
}

std::optional<Case> loadCase(const std::string& dir, std::string& error) {
    std::filesystem::path d(dir);
    Case c;
    auto source = readFile(d / kProgramFile), host = readFile(d / kHostFile), policy = readFile(d / kPolicyFile),
         meta = readFile(d / "case.json");
    if (!source || !host || !policy || !meta) {
        error = dir + ": a case needs prog.rmt, host.rmti, policy.toml and case.json";
        return std::nullopt;
    }
    json m = json::parse(*meta, nullptr, false);
    if (m.is_discarded() || !m.is_object()) {
        error = dir + "/case.json is not a JSON object";
        return std::nullopt;
    }
    c.source = *source;
    c.host = *host;
    c.policy = *policy;
    c.inputs = m.value("inputs", json::object());
    c.worldSeed = m.value("world_seed", uint64_t(0));
    c.strict = m.value("strict", false);
    return c;
}

}  // namespace remit::difftest

namespace remit::difftest {

namespace {

std::vector<std::string> splitLines(const std::string& text) {
    std::vector<std::string> lines;
    size_t from = 0;
    while (from < text.size()) {
        size_t nl = text.find('\n', from);
        if (nl == std::string::npos) nl = text.size();
        lines.push_back(text.substr(from, nl - from));
        from = nl + 1;
    }
    return lines;
}

std::string joinLines(const std::vector<std::string>& lines) {
    std::string out;
    for (const std::string& l : lines) out += l + "\n";
    return out;
}

// The last line of the block that line `i` opens (it ends with `{`), by brace depth outside
// strings; `i` itself when it opens none.
size_t blockEnd(const std::vector<std::string>& lines, size_t i) {
    auto depthChange = [](const std::string& line) {
        int d = 0;
        bool inString = false;
        for (size_t k = 0; k < line.size(); ++k) {
            char c = line[k];
            if (inString) {
                if (c == '\\') ++k;
                else if (c == '"') inString = false;
                continue;
            }
            if (c == '"') inString = true;
            else if (c == '#') break;
            else if (c == '{') ++d;
            else if (c == '}') --d;
        }
        return d;
    };
    int depth = depthChange(lines[i]);
    if (depth <= 0) return i;
    for (size_t j = i + 1; j < lines.size(); ++j) {
        depth += depthChange(lines[j]);
        if (depth <= 0) return j;
    }
    return i;
}

}  // namespace

Case minimizeCase(const Case& c, const std::string& reason, const std::string& tracePath, size_t maxRuns) {
    Case best = c;
    size_t runs = 0;
    auto stillDiverges = [&](const Case& candidate) {
        ++runs;
        CaseReport r = runCase(candidate, tracePath);
        return r.kind == CaseReport::Kind::Divergent && r.reason == reason;
    };
    bool changed = true;
    while (changed && runs < maxRuns) {
        changed = false;
        std::vector<std::string> lines = splitLines(best.source);
        // Whole blocks first (largest savings), then single lines, from the end backwards so
        // that indices before the cut stay valid.
        for (int pass = 0; pass < 2 && runs < maxRuns; ++pass) {
            for (size_t i = lines.size(); i-- > 0 && runs < maxRuns;) {
                if (i >= lines.size()) continue;
                size_t end = pass == 0 ? blockEnd(lines, i) : i;
                if (pass == 0 && end == i) continue;
                if (lines[i].rfind("program", 0) == 0) continue;
                std::vector<std::string> shorter(lines.begin(), lines.begin() + static_cast<long>(i));
                shorter.insert(shorter.end(), lines.begin() + static_cast<long>(end) + 1, lines.end());
                Case candidate = best;
                candidate.source = joinLines(shorter);
                if (stillDiverges(candidate)) {
                    best = candidate;
                    lines = std::move(shorter);
                    changed = true;
                }
            }
        }
    }
    return best;
}

}  // namespace remit::difftest
