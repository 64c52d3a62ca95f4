// The C ABI of include/remit/remit.h over include/remit/remit.hpp. No exception crosses it: misuse
// is REMIT_MISUSE, anything else unexpected a failed run or a NULL handle.
#include "remit/remit.h"
#include "runtime/json_text.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "remit/remit.hpp"

namespace api = remit::api;
using remit::Json;

struct remit_program {
    api::Program program;
    std::string manifest;
};

struct remit_run {
    api::Run run;
    std::string call, result, failure;
};

namespace {

char* copyOut(const std::string& text) {
    char* out = static_cast<char*>(std::malloc(text.size() + 1));
    if (out) std::memcpy(out, text.c_str(), text.size() + 1);
    return out;
}

void give(char** out, const std::vector<api::Diagnostic>& diagnostics) {
    if (!out) return;
    Json list = Json::array();
    for (const api::Diagnostic& d : diagnostics)
        list.push_back({{"code", d.code}, {"severity", d.severity}, {"message", d.message}, {"file", d.file},
                        {"line", d.line}, {"col", d.col}, {"end_line", d.endLine}, {"end_col", d.endCol},
                        {"hint", d.hint}, {"notes", d.notes}});
    *out = copyOut(list.dump());
}

remit_status statusOf(api::Status s) {
    switch (s) {
        case api::Status::HostCall: return REMIT_HOST_CALL;
        case api::Status::NeedsApproval: return REMIT_NEEDS_APPROVAL;
        case api::Status::Completed: return REMIT_COMPLETED;
        case api::Status::Failed: return REMIT_FAILED;
    }
    return REMIT_FAILED;
}

template <class F> remit_status guarded(remit_run* run, F&& f) {
    if (!run) return REMIT_MISUSE;
    try {
        return statusOf(f(run->run));
    } catch (const std::logic_error&) {
        return REMIT_MISUSE;
    } catch (...) {
        return REMIT_MISUSE;
    }
}

const char* orEmpty(const char* s) { return s ? s : ""; }

}  // namespace

extern "C" {

const char* remit_version(void) { return REMIT_VERSION_STRING; }

remit_program* remit_compile(const char* source, const char* host, const char* policy_toml, int strict_flows,
                             char** diagnostics_json) {
    try {
        api::CompileOptions options;
        options.policyToml = orEmpty(policy_toml);
        options.strictFlows = strict_flows != 0;
        api::CompileResult r = api::Program::compile(orEmpty(source), orEmpty(host), options);
        give(diagnostics_json, r.diagnostics);
        if (!r.program) return nullptr;
        return new remit_program{*r.program, r.program->manifestJson()};
    } catch (...) {
        if (diagnostics_json) *diagnostics_json = nullptr;
        return nullptr;
    }
}

void remit_program_free(remit_program* program) { delete program; }
const char* remit_program_manifest_json(const remit_program* program) {
    return program ? program->manifest.c_str() : nullptr;
}
const char* remit_program_hash(const remit_program* program) {
    return program ? program->program.programHash().c_str() : nullptr;
}

remit_run* remit_run_new(const remit_program* program, const char* policy_toml, int allow_all, const char* state_dir,
                         char** diagnostics_json) {
    if (!program) return nullptr;
    try {
        api::RunOptions options;
        options.policyToml = orEmpty(policy_toml);
        options.allowAll = allow_all != 0;
        options.stateDir = orEmpty(state_dir);
        api::CreateResult r = api::Run::create(program->program, options);
        give(diagnostics_json, r.diagnostics);
        if (!r.run) return nullptr;
        return new remit_run{std::move(*r.run), {}, {}, {}};
    } catch (...) {
        if (diagnostics_json) *diagnostics_json = nullptr;
        return nullptr;
    }
}

void remit_run_free(remit_run* run) { delete run; }

remit_status remit_run_start(remit_run* run, const char* inputs_json) {
    return guarded(run, [&](api::Run& r) { return r.start(inputs_json ? inputs_json : "{}"); });
}
remit_status remit_run_approve(remit_run* run, const char* by) {
    return guarded(run, [&](api::Run& r) { return r.approve(orEmpty(by)); });
}
remit_status remit_run_refuse(remit_run* run) {
    return guarded(run, [&](api::Run& r) { return r.refuse(); });
}
remit_status remit_run_complete(remit_run* run, const char* result_json, double cost_usd) {
    return guarded(run, [&](api::Run& r) {
        return r.complete(result_json ? result_json : "null", cost_usd >= 0 ? std::optional<double>(cost_usd) : std::nullopt);
    });
}
remit_status remit_run_fail(remit_run* run, const char* error, const char* message) {
    return guarded(run, [&](api::Run& r) { return r.fail(error ? error : "CapabilityFailed", orEmpty(message)); });
}
remit_status remit_run_status(const remit_run* run) { return run ? statusOf(run->run.status()) : REMIT_MISUSE; }

const char* remit_run_call_json(remit_run* run) {
    if (!run) return nullptr;
    api::Status s = run->run.status();
    if (s != api::Status::HostCall && s != api::Status::NeedsApproval) return nullptr;
    const api::HostCallView& c = run->run.hostCall();
    Json argTags = Json::object();
    for (const auto& [name, tags] : c.argTags) argTags[name] = tags;
    static const char* kKinds[] = {"capability", "model", "agent"};
    Json j = {{"kind", kKinds[static_cast<int>(c.kind)]},
              {"site", c.site},
              {"resource", c.resource},
              {"agent", c.agent},
              {"line", c.line},
              {"col", c.col},
              {"args", Json::parse(c.argsJson)},
              {"arg_tags", argTags},
              {"pc_tags", c.pcTags},
              {"attempt", c.attempt},
              {"returns", c.returns},
              {"schema", c.schemaJson.empty() ? Json(nullptr) : Json::parse(c.schemaJson)},
              {"approval_reasons", c.approvalReasons},
              {"approval_digest", c.approvalDigest},
              {"approved_by", c.approvedBy},
              {"idempotency_key", c.idempotencyKey},
              {"result_tags", c.resultTags}};
    run->call = j.dump();
    return run->call.c_str();
}

const char* remit_run_result_json(remit_run* run) {
    if (!run || run->run.status() != api::Status::Completed) return nullptr;
    run->result = Json{{"result", Json::parse(run->run.resultJson())},
                       {"tags", run->run.resultTags()},
                       {"spent_usd", run->run.spentUsd()}}
                      .dump();
    return run->result.c_str();
}

const char* remit_run_failure_json(remit_run* run) {
    if (!run || run->run.status() != api::Status::Failed) return nullptr;
    const api::Failure& f = run->run.failure();
    run->failure = Json{{"code", f.code},
                        {"name", f.name},
                        {"message", f.message},
                        {"line", f.line},
                        {"col", f.col},
                        {"details", Json::parse(f.detailsJson, nullptr, false)},
                        {"rendered", f.rendered}}
                       .dump();
    return run->failure.c_str();
}

const char* remit_run_id(const remit_run* run) { return run ? run->run.runId().c_str() : nullptr; }
void remit_run_abort(remit_run* run) {
    if (run) run->run.requestAbort();
}
void remit_free(char* text) { std::free(text); }

}  // extern "C"
