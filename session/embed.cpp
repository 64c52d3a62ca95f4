// The embedding API (include/remit/remit.hpp, docs/embedding.md) over the session layer: the same
// pipeline as `remitc check`/`remitvm run` (parse, resolve the host, check, compile, verify), the
// same run lifecycle (session/run_lifecycle.h) and the same Broker, whose decisions are handed to
// the embedder instead of to an adapter. Every internal type stays in here.
#include "remit/remit.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <stdexcept>

#include "broker/approvals.h"
#include "broker/broker.h"
#include "broker/trace.h"
#include "compiler/checker.h"
#include "compiler/driver.h"
#include "compiler/manifest.h"
#include "compiler/parser.h"
#include "runtime/json_schema.h"
#include "runtime/json_text.h"
#include "runtime/policy.h"
#include "runtime/source.h"
#include "runtime/value_json.h"
#include "session/pipeline.h"
#include "session/run_lifecycle.h"
#include "vm/run.h"

namespace remit::api {

namespace {


Diagnostic publicDiagnostic(const remit::Diagnostic& d) {
    Diagnostic out;
    out.code = std::string(diagInfo(d.code).code);
    out.severity = d.isError() ? "error" : "warning";
    out.message = d.message;
    out.file = d.file;
    out.line = d.span.line;
    out.col = d.span.col;
    out.endLine = d.span.endLine;
    out.endCol = d.span.endCol;
    out.hint = d.hint;
    out.notes = d.notes;
    return out;
}

// The diagnostics of `list` (sorted as the tools print them) and their rendering against `sources`.
void collect(const DiagnosticList& list, const std::vector<const SourceFile*>& sources,
             std::vector<Diagnostic>& out, std::string& rendered) {
    for (const remit::Diagnostic& d : list.items()) out.push_back(publicDiagnostic(d));
    SourceLookup lookup = [&](const std::string& file) -> const SourceFile* {
        for (const SourceFile* s : sources)
            if (s && s->name() == file) return s;
        return nullptr;
    };
    rendered = renderDiagnostics(list.items(), lookup);
}

std::vector<std::string> names(const Heap& heap, TagSetId tags) { return heap.tagTable().names(tags); }

}  // namespace

// ---------------------------------------------------------------- Program

struct Program::Impl {
    std::shared_ptr<const LoadedProgram> loaded;
    HostModel host;  // capabilities' types, tags and costs, input tags
    std::string programName, programText;
    std::string name, programHash, hostHash, manifestJson;
    bool strictFlows = false;
};

CompileResult Program::compile(std::string_view source, std::string_view host, const CompileOptions& options) {
    CompileResult result;
    CheckOptions check;
    check.strictFlows = options.strictFlows;
    SourceProvider texts = options.policyToml.empty()
                               ? textSources(options.hostName, std::string(host))
                               : textSources(options.hostName, std::string(host), "policy.toml", options.policyToml);
    CheckOutcome outcome = checkSources(options.programName, std::string(source), texts, check);
    std::shared_ptr<const LoadedProgram> loaded;
    if (outcome.ok() && outcome.checked)
        loaded = buildProgram(*outcome.program, *outcome.checked, options.programName, outcome.diags);
    std::vector<const SourceFile*> sources;
    for (const auto& [name, file] : outcome.sources) sources.push_back(file.get());
    collect(outcome.diags, sources, result.diagnostics, result.rendered);
    if (!loaded) return result;
    const Manifest& manifest = outcome.checked->manifest;
    auto impl = std::make_shared<Impl>();
    impl->loaded = std::move(loaded);
    impl->host = std::move(outcome.checked->host);
    impl->programName = options.programName;
    impl->programText = std::string(source);
    impl->name = manifest.program;
    impl->programHash = impl->loaded->module().programHash;
    impl->hostHash = manifest.hostHash;
    impl->manifestJson = manifestToJson(manifest).dump(2);
    impl->strictFlows = manifest.strictFlows;
    Program p;
    p.impl_ = std::move(impl);
    result.program = std::move(p);
    return result;
}

const std::string& Program::name() const { return impl_->name; }
const std::string& Program::programHash() const { return impl_->programHash; }
const std::string& Program::hostHash() const { return impl_->hostHash; }
const std::string& Program::manifestJson() const { return impl_->manifestJson; }
bool Program::strictFlows() const { return impl_->strictFlows; }

// ---------------------------------------------------------------- Run

struct Run::Impl {
    std::shared_ptr<const Program::Impl> program;
    Policy policy;
    std::string runId;
    std::filesystem::path stateDir;
    TraceWriter trace;
    RunLock lock;
    std::unique_ptr<ApprovalStore> approvals;
    std::unique_ptr<remit::Run> vm;
    std::unique_ptr<Broker> broker;

    Status status = Status::Failed;
    bool started = false;
    HostCallView call;
    Failure failure;
    std::string result = "null";
    std::vector<std::string> resultTags;

    ~Impl() {
        broker.reset();  // it refers to the run
        vm.reset();
    }

    void require(bool ok, const char* what) const {
        if (!ok) throw std::logic_error(std::string("remit::api::Run: ") + what);
    }

    // Runs until the next decision the embedder must make, or the end.
    Status drive(RunStatus st) {
        while (st == RunStatus::HostCall) {
            Decision d = broker->decide(vm->hostCall());
            if (d.kind == Decision::Kind::NeedsApproval || d.kind == Decision::Kind::Dispatch) {
                describe(vm->hostCall(), d);
                return status = d.kind == Decision::Kind::Dispatch ? Status::HostCall : Status::NeedsApproval;
            }
            st = broker->settle(std::move(d));
        }
        return finish(st);
    }

    void describe(const HostCall& c, const Decision& d) {
        Heap& heap = vm->heap();
        const Site& site = *c.site;
        HostCallView v;
        v.kind = site.kind == SiteKind::Capability ? CallKind::Capability
                 : site.kind == SiteKind::Model    ? CallKind::Model
                                                   : CallKind::Agent;
        v.site = site.id;
        v.resource = site.resource;
        if (site.kind == SiteKind::Agent) v.agent = site.agent;
        if (c.agent) v.system = c.agent->system;
        v.line = site.span.line;
        v.col = site.span.col;
        v.endLine = site.span.endLine;
        v.endCol = site.span.endCol;
        Json args = Json::object();
        for (size_t i = 0; i < site.argNames.size() && i < c.args.size(); ++i) {
            std::optional<Json> j = valueToJson(c.args[i]);
            args[site.argNames[i]] = j ? std::move(*j) : Json(nullptr);
            std::optional<TagSetId> t = heap.deepTags(c.args[i]);
            v.argTags.emplace_back(site.argNames[i], names(heap, t ? *t : kNoTags));
        }
        v.argsJson = args.dump();
        v.pcTags = names(heap, c.pcTags);
        v.attempt = c.attempt;
        if (site.kind == SiteKind::Capability) {
            const Capability* cap = program->host.capability(site.resource);
            v.returns = cap && cap->ret ? showType(cap->ret) : "Unit";
        } else {
            v.returns = c.askType ? showType(c.askType) : "Unit";
            v.schemaJson = jsonSchemaFor(c.askType).dump();
        }
        v.approvalReasons = d.reasons;
        v.approvalDigest = d.pending ? d.pending->digest : d.approvalDigest;
        if (d.approvedBy) v.approvedBy = *d.approvedBy;
        if (d.kind == Decision::Kind::Dispatch) {
            v.idempotencyKey = d.request.idempotencyKey;
            v.resultTags = names(heap, d.resultTags);
        }
        call = std::move(v);
    }

    Status finish(RunStatus st) {
        if (st == RunStatus::Completed) {
            RunResult r = resultOf(*vm);
            result = r.value.dump();
            resultTags.clear();
            for (const auto& t : r.tags) resultTags.push_back(t.get<std::string>());
            trace.emit(runEndCompleted(runId, r, broker->spent()));
            return status = Status::Completed;
        }
        const RunFailure& f = vm->failure();
        const DiagInfo& info = diagInfo(f.error.code);
        failure.code = std::string(info.code);
        failure.name = std::string(info.name);
        failure.message = f.error.message;
        failure.line = f.span.line;
        failure.col = f.span.col;
        failure.detailsJson = f.error.details.dump();
        remit::Diagnostic d = makeDiagnostic(f.error.code, f.error.message, program->programName,
                                             f.span);
        d.details = f.error.details;
        SourceFile source(program->programName, program->programText);
        failure.rendered = renderText(d, &source);
        if (f.error.code == DiagCode::R0302 && broker->pending())
            trace.emit(runEndPaused(runId, broker->pending()->digest));
        else
            trace.emit(runEndFailed(runId, f));
        return status = Status::Failed;
    }

    Status failBeforeRun(std::string code, std::string name, std::string message) {
        failure = Failure{std::move(code), std::move(name), message, 0, 0, "null", message};
        return status = Status::Failed;
    }
};

Run::Run(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Run::~Run() = default;
Run::Run(Run&&) noexcept = default;
Run& Run::operator=(Run&&) noexcept = default;

CreateResult Run::create(const Program& program, const RunOptions& options) {
    CreateResult out;
    auto impl = std::make_unique<Impl>();
    impl->program = program.impl_;
    const Program::Impl& p = *program.impl_;

    DiagnosticList diags;
    std::unique_ptr<SourceFile> policyText;
    if (options.allowAll) {
        impl->policy = Policy::allowAllPolicy();
    } else {
        policyText = std::make_unique<SourceFile>("policy.toml", options.policyToml);
        std::vector<std::string> hostResources = p.host.resourceNames();
        std::vector<std::string> hostModels = p.host.modelNames();
        std::optional<Policy> parsed =
            parsePolicy("policy.toml", options.policyToml, diags, &hostResources, &hostModels);
        if (parsed) {
            std::optional<Manifest> manifest = manifestFromJson(Json::parse(p.manifestJson));
            if (manifest && !diags.hasErrors())
                checkManifestAgainstPolicy(*manifest, *parsed, p.programName, Span{}, diags);
            if (parsed->strictFlows && !p.strictFlows)
                diags.add(makeDiagnostic(DiagCode::E0504,
                                         "the policy asks for strict flows, but the program was compiled without them",
                                         "policy.toml", Span{},
                                         "compile it with CompileOptions::strictFlows, or with this policy"));
            impl->policy = std::move(*parsed);
        }
    }
    if (diags.hasErrors()) {
        collect(diags, {policyText.get()}, out.diagnostics, out.rendered);
        return out;
    }

    VmLimits limits;
    limits.maxSteps = options.maxSteps;
    limits.maxMemory = static_cast<size_t>(options.maxMemoryBytes);
    limits.maxWallMs = options.maxWallMs;
    limits = clampTo(limits, overlay(limits, impl->policy.limits));  // the policy only lowers the options
    impl->vm = std::make_unique<remit::Run>(p.loaded, limits);
    impl->runId = newRunId();

    BrokerOptions b = brokerOptionsFor(p.loaded->module(), p.host, impl->policy, impl->runId, p.strictFlows);
    b.adapterKind = "embedder";
    if (!options.stateDir.empty()) {
        impl->stateDir = options.stateDir;
        impl->approvals = std::make_unique<ApprovalStore>(approvalStorePath(impl->stateDir).string());
        b.approvals = impl->approvals.get();
        b.trace = &impl->trace;
    }
    impl->broker = std::make_unique<Broker>(b, *impl->vm);
    out.run = Run(std::move(impl));
    return out;
}

Status Run::start(std::string_view inputsJson) {
    Impl& r = *impl_;
    r.require(!r.started, "start() was already called");
    r.started = true;
    std::string problem;
    std::optional<nlohmann::json> given = parseJsonText("the inputs", inputsJson, problem);
    if (!given) return r.failBeforeRun("input", "InputError", problem);
    std::vector<Value> args = mainArguments(*r.program->loaded, r.program->host, r.vm->heap(), *given, problem);
    if (!problem.empty()) return r.failBeforeRun("input", "InputError", problem);
    if (!r.stateDir.empty()) {
        std::string error;
        if (r.approvals && !r.approvals->load(error)) return r.failBeforeRun("state", "StateError", error);
        if (!r.lock.acquire(runLockPath(r.stateDir, r.runId).string(), error))
            return r.failBeforeRun("state", "StateError", error);
        RunStart recorded;
        recorded.runId = r.runId;
        recorded.idempotencyRoot = r.runId;
        recorded.module = &r.program->loaded->module();
        recorded.path = r.program->programName;
        recorded.policy = &r.policy;
        recorded.inputs = *given;
        recorded.mode = "embedder";
        recorded.strictFlows = r.program->strictFlows;
        if (std::optional<std::string> unrecorded = beginRunRecord(r.stateDir, recorded, r.trace))
            return r.failBeforeRun("state", "StateError", *unrecorded);
    }
    return r.drive(r.vm->start(r.program->loaded->entry(), std::move(args)));
}

Status Run::approve(std::string_view by) {
    Impl& r = *impl_;
    r.require(r.status == Status::NeedsApproval, "approve() without a call waiting for approval");
    Decision d = r.broker->approved(std::string(by));
    if (d.kind == Decision::Kind::Dispatch) {
        r.describe(r.vm->hostCall(), d);
        return r.status = Status::HostCall;
    }
    return r.drive(r.broker->settle(std::move(d)));
}

Status Run::refuse() {
    Impl& r = *impl_;
    r.require(r.status == Status::NeedsApproval, "refuse() without a call waiting for approval");
    return r.drive(r.broker->settle(r.broker->decline()));
}

Status Run::complete(std::string_view resultJson, std::optional<double> costUsd) {
    Impl& r = *impl_;
    r.require(r.status == Status::HostCall, "complete() without a call waiting to be performed");
    AdapterReply reply;
    std::string problem;
    if (std::optional<nlohmann::json> parsed = parseJsonText("the result", resultJson, problem)) {
        reply.ok = true;
        reply.result = std::move(*parsed);
        reply.costUsd = costUsd;
    } else {
        // A result that is not JSON is a failed call (operational), as an adapter's would be.
        reply.errorCode = "CapabilityFailed";
        reply.message = problem;
    }
    return r.drive(r.broker->settle(r.broker->complete(reply)));
}

Status Run::fail(std::string_view error, std::string_view message) {
    Impl& r = *impl_;
    r.require(r.status == Status::HostCall, "fail() without a call waiting to be performed");
    r.require(error == "CapabilityFailed" || error == "Timeout", "fail(): error must be CapabilityFailed or Timeout");
    AdapterReply reply;
    reply.errorCode = std::string(error);
    reply.message = message.empty() ? fmt::format("'{}' {}", r.call.resource, error == "Timeout" ? "timed out" : "failed")
                                    : std::string(message);
    return r.drive(r.broker->settle(r.broker->complete(reply)));
}

Status Run::status() const { return impl_->status; }
const HostCallView& Run::hostCall() const {
    impl_->require(impl_->status == Status::HostCall || impl_->status == Status::NeedsApproval,
                   "hostCall() without a call waiting");
    return impl_->call;
}
std::string Run::resultJson() const { return impl_->result; }
std::vector<std::string> Run::resultTags() const { return impl_->resultTags; }
const Failure& Run::failure() const { return impl_->failure; }
double Run::spentUsd() const { return impl_->broker->spent(); }
const std::string& Run::runId() const { return impl_->runId; }
std::string Run::tracePath() const {
    return impl_->stateDir.empty() ? std::string() : runTracePath(impl_->stateDir, impl_->runId).string();
}
void Run::requestAbort() { impl_->vm->requestAbort(); }

}  // namespace remit::api
