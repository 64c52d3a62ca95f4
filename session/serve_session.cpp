// See serve_session.h and docs/serve.md. The rules a paused call goes through are the broker's
// (broker/broker.cpp), in its order, minus what a serve host decides itself: deny tags (R0301) →
// the grant's max_calls (R0402) → the run's host_calls limit (R0701) → approval reasons, which
// turn the call's mode into "ask" → the host performs, fails or denies the call → the result is
// validated against the declared type (R0501, or R0502 for models) and tagged (declared ∪
// argument tags ∪ pc − clears) on every node.
#include "session/serve_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>

#include "broker/broker.h"
#include "session/run_lifecycle.h"  // deniedArgument: the broker's deny-tag rule
#include "compiler/ast.h"
#include "compiler/checker.h"
#include "compiler/driver.h"
#include "compiler/parser.h"
#include "vm/run.h"
#include "runtime/diagnostics.h"
#include "runtime/json_schema.h"
#include "runtime/json_text.h"
#include "runtime/source.h"
#include "runtime/suggest.h"
#include "runtime/value_json.h"
#include "session/pipeline.h"

namespace remit::serve {

namespace {

using Clock = std::chrono::steady_clock;

// Virtual file names: diagnostics never name a host path.
constexpr const char* kProgramFile = "program.rmt";
constexpr const char* kHostFile = "host.rmti";
constexpr const char* kExpectedFile = "expected_type";
constexpr const char* kGrantsFile = "grants";
// The alias the expected type is declared under, in a copy of the host interface.
constexpr const char* kExpectedAlias = "ServeExpectedResultType__";
constexpr size_t kMaxIdBytes = 256;
constexpr size_t kMaxReasonBytes = 4096;
constexpr size_t kMaxExpectedTypeBytes = 4096;

// ---------------------------------------------------------------- replies

Json envelope(std::string_view status, const Json& id, std::string_view session) {
    Json out = Json::object();
    out["status"] = status;
    if (!id.is_null()) out["id"] = id;
    out["session"] = session;
    return out;
}

Json tagNames(const Heap& heap, TagSetId tags) {
    Json out = Json::array();
    for (const std::string& name : heap.tagTable().names(tags)) out.push_back(name);
    return out;
}

Json spanJson(const Span& s) {
    if (s.line == 0) return nullptr;
    return Json{{"line", s.line}, {"col", s.col}, {"end_line", s.endLine}, {"end_col", s.endCol}};
}

// The rejection stages in pipeline order; a rejection names the first one that failed.
enum class Stage : uint8_t { Parse, Typecheck, Grant, Bounds, Flow, ExpectedType };
constexpr const char* kStageNames[] = {"parse", "typecheck", "grant", "bounds", "flow", "expected-type"};

// The rejection stage of a diagnostic, from its registry entry (runtime/diagnostics.def).
Stage stageOfCode(DiagCode code) {
    std::string_view stage = diagInfo(code).stage;
    for (size_t i = 0; i < std::size(kStageNames); ++i)
        if (stage == kStageNames[i]) return static_cast<Stage>(i);
    return Stage::Typecheck;
}

// The failure stage of a run — what the host is told it was — from the registry too.
const char* failureStage(DiagCode code) { return diagInfo(code).stage.data(); }

RuntimeError err(DiagCode code, std::string message, Json details = nullptr) {
    return RuntimeError{code, std::move(message), std::move(details)};
}

// ---------------------------------------------------------------- request parsing

// Field readers: each returns false with `problem` set.
struct Fields {
    const Json& object;
    std::string& problem;
    std::string where;  // "" or "limits." etc.

    const Json* get(const char* key) const {
        auto it = object.find(key);
        return it == object.end() ? nullptr : &*it;
    }
    bool fail(std::string message) const {
        problem = std::move(message);
        return false;
    }
    bool onlyKeys(std::initializer_list<std::string_view> allowed) const {
        for (auto it = object.begin(); it != object.end(); ++it)
            if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end()) {
                std::vector<std::string> names(allowed.begin(), allowed.end());
                std::optional<std::string> close = closestName(it.key(), names);
                return fail(fmt::format("unknown field '{}{}'{}", where, firstCodePoints(it.key(), 64),
                                        close ? fmt::format(" (did you mean '{}{}'?)", where, *close) : std::string()));
            }
        return true;
    }
    bool string(const char* key, std::string& out, bool required, size_t maxBytes = SIZE_MAX) const {
        const Json* v = get(key);
        if (!v) return required ? fail(fmt::format("missing field '{}{}'", where, key)) : true;
        if (!v->is_string()) return fail(fmt::format("'{}{}' must be a string", where, key));
        out = v->get<std::string>();
        if (out.size() > maxBytes) return fail(fmt::format("'{}{}' is longer than {} bytes", where, key, maxBytes));
        return true;
    }
    bool positive(const char* key, uint64_t& out, uint64_t max) const {
        const Json* v = get(key);
        if (!v) return true;
        if (!v->is_number_unsigned() || v->get<uint64_t>() < 1)
            return fail(fmt::format("'{}{}' must be a positive integer", where, key));
        if (v->get<uint64_t>() > max)
            return fail(
                fmt::format("'{}{}' is {}, over this server's maximum of {}", where, key, v->get<uint64_t>(), max));
        out = v->get<uint64_t>();
        return true;
    }
};

bool parseLimits(const Json& j, Limits& out, std::string& problem) {
    if (!j.is_object()) {
        problem = "'limits' must be an object";
        return false;
    }
    Fields f{j, problem, "limits."};
    return f.onlyKeys({"steps", "wall_ms", "host_calls", "result_bytes", "memory"}) &&
           f.positive("steps", out.steps, kMaxLimits.steps) && f.positive("wall_ms", out.wallMs, kMaxLimits.wallMs) &&
           f.positive("host_calls", out.hostCalls, kMaxLimits.hostCalls) &&
           f.positive("result_bytes", out.resultBytes, kMaxLimits.resultBytes) &&
           f.positive("memory", out.memory, kMaxLimits.memory);
}

// A grant's table of per-parameter settings ({param: ...}), each value read by `one`.
template <class One>
bool parseParamTable(const Fields& f, const char* key, One&& one) {
    const Json* t = f.get(key);
    if (!t) return true;
    if (!t->is_object()) return f.fail(fmt::format("'{}{}' must be an object of parameters", f.where, key));
    for (auto it = t->begin(); it != t->end(); ++it)
        if (!one(it.key(), it.value(), fmt::format("{}{}.{}", f.where, key, firstCodePoints(it.key(), 64))))
            return false;
    return true;
}

bool parseGrantSettings(const Fields& f, Grant& g) {
    if (const Json* m = f.get("max_calls")) {
        if (!m->is_number_integer() || m->get<int64_t>() < 0)
            return f.fail(fmt::format("'{}max_calls' must be an integer >= 0", f.where));
        g.maxCalls = m->get<int64_t>();
    }
    auto strings = [&](const Json& v, const std::string& where, std::vector<std::string>& out) {
        if (!v.is_array()) return f.fail(fmt::format("'{}' must be a list of strings", where));
        for (const Json& x : v) {
            if (!x.is_string()) return f.fail(fmt::format("'{}' must be a list of strings", where));
            out.push_back(x.get<std::string>());
        }
        return true;
    };
    if (!parseParamTable(f, "arg_prefix", [&](const std::string& p, const Json& v, const std::string& where) {
            return strings(v, where, g.argPrefix[p]);
        }))
        return false;
    if (!parseParamTable(f, "approve", [&](const std::string& p, const Json& v, const std::string& where) {
            return strings(v, where, g.approve[p]);
        }))
        return false;
    if (!parseParamTable(f, "arg_one_of", [&](const std::string& p, const Json& v, const std::string& where) {
            if (!v.is_array()) return f.fail(fmt::format("'{}' must be a list of allowed values", where));
            for (const Json& x : v) g.argOneOf[p].push_back(nlohmann::json(x));
            return true;
        }))
        return false;
    if (!parseParamTable(f, "arg_max", [&](const std::string& p, const Json& v, const std::string& where) {
            if (!v.is_number() || !std::isfinite(v.get<double>()))
                return f.fail(fmt::format("'{}' must be a number", where));
            g.argMax[p] = v.get<double>();
            return true;
        }))
        return false;
    std::string approval;
    if (!f.string("approval", approval, false, 16)) return false;
    if (f.get("approval") && approval != "always")
        return f.fail(fmt::format("'{}approval' must be \"always\" (leave it out otherwise)", f.where));
    g.approvalAlways = approval == "always";
    return true;
}

bool parseGrants(const Json& j, std::vector<GrantSpec>& out, std::string& problem) {
    if (!j.is_array()) {
        problem = "'grants' must be a list of {name, mode, max_calls?}";
        return false;
    }
    std::set<std::string> seen;
    for (size_t i = 0; i < j.size(); ++i) {
        const Json& g = j[i];
        std::string where = fmt::format("grants[{}].", i);
        if (!g.is_object()) {
            problem = fmt::format("grants[{}] must be an object {{name, mode, max_calls?}}", i);
            return false;
        }
        Fields f{g, problem, where};
        GrantSpec spec;
        std::string mode = "ask";
        if (!f.onlyKeys({"name", "mode", "max_calls", "arg_prefix", "arg_one_of", "arg_max", "approve", "approval"}) ||
            !f.string("name", spec.name, true, 256) || !f.string("mode", mode, false, 16))
            return false;
        if (mode != "ask" && mode != "allow")
            return f.fail(fmt::format("'{}mode' must be \"ask\" or \"allow\"", where));
        spec.ask = mode == "ask";
        spec.grant.resource = spec.name;
        if (!parseGrantSettings(f, spec.grant)) return false;
        if (!seen.insert(spec.name).second)
            return f.fail(fmt::format("'{}' is granted twice", firstCodePoints(spec.name, 64)));
        out.push_back(std::move(spec));
    }
    return true;
}

bool parseRun(const Json& j, RunRequest& r, std::string& problem) {
    Fields f{j, problem, ""};
    if (!f.onlyKeys({"type", "id", "session", "program", "source", "host", "grants", "inputs", "limits",
                     "expected_type", "max_diagnostics", "strict_flows", "budget"}))
        return false;
    // The program text is `program`, as in the MCP tools; `source`, its first name here, stays
    // accepted so that clients written against it keep working (docs/serve.md, "Field names").
    if (f.get("program") && f.get("source"))
        return f.fail("give the program text as 'program' or as its older name 'source', not both");
    if (!f.string(f.get("source") ? "source" : "program", r.program, true) || !f.string("host", r.host, true) ||
        !f.positive("max_diagnostics", r.maxDiagnostics, kMaxMaxDiagnostics))
        return false;
    if (const Json* g = f.get("grants"); g && !parseGrants(*g, r.grants, problem)) return false;
    if (const Json* in = f.get("inputs")) {
        if (!in->is_object()) return f.fail("'inputs' must be an object of main's parameters");
        r.inputs = *in;
    }
    if (const Json* l = f.get("limits"); l && !parseLimits(*l, r.limits, problem)) return false;
    if (f.get("expected_type")) {
        std::string t;
        if (!f.string("expected_type", t, true, kMaxExpectedTypeBytes)) return false;
        if (t.find_first_of("\r\n") != std::string::npos) return f.fail("'expected_type' must be one line");
        r.expectedType = std::move(t);
    }
    if (const Json* strict = f.get("strict_flows")) {
        if (!strict->is_boolean()) return f.fail("'strict_flows' must be true or false");
        r.strictFlows = strict->get<bool>();
    }
    if (const Json* budget = f.get("budget")) {
        if (!budget->is_number() || !std::isfinite(budget->get<double>()) || budget->get<double>() < 0)
            return f.fail("'budget' must be a non-negative number of dollars");
        r.budgetUsd = budget->get<double>();
    }
    return true;
}

bool parseResume(const Json& j, ResumeRequest& r, std::string& problem) {
    Fields f{j, problem, ""};
    if (!f.onlyKeys({"type", "id", "session", "call", "perform", "deny", "fail"})) return false;
    const Json* call = f.get("call");
    if (!call) return f.fail("missing field 'call' (the id of the host call being answered)");
    if (!call->is_number_integer() || call->get<int64_t>() < 1) return f.fail("'call' must be a positive integer");
    r.call = call->get<uint64_t>();
    int given = (f.get("perform") ? 1 : 0) + (f.get("deny") ? 1 : 0) + (f.get("fail") ? 1 : 0);
    if (given != 1) return f.fail("a resume needs exactly one of 'perform', 'deny' and 'fail'");
    if (const Json* p = f.get("perform")) {
        if (!p->is_object()) return f.fail("'perform' must be an object {result, cost_usd?}");
        Fields pf{*p, problem, "perform."};
        if (!pf.onlyKeys({"result", "cost_usd"})) return false;
        if (!pf.get("result")) return pf.fail("missing field 'perform.result' (null for a Unit result)");
        r.kind = ResumeKind::Perform;
        r.result = *pf.get("result");
        if (const Json* cost = pf.get("cost_usd")) {
            if (!cost->is_number() || !std::isfinite(cost->get<double>()) || cost->get<double>() < 0)
                return pf.fail("'perform.cost_usd' must be a non-negative number of dollars");
            r.costUsd = cost->get<double>();
        }
    } else if (const Json* d = f.get("deny")) {
        if (!d->is_object()) return f.fail("'deny' must be an object {reason?}");
        Fields df{*d, problem, "deny."};
        if (!df.onlyKeys({"reason"}) || !df.string("reason", r.reason, false, kMaxReasonBytes)) return false;
        r.kind = ResumeKind::Deny;
    } else {
        const Json& x = *f.get("fail");
        if (!x.is_object()) return f.fail("'fail' must be an object {error?, message?}");
        Fields xf{x, problem, "fail."};
        r.error = "CapabilityFailed";
        if (!xf.onlyKeys({"error", "message"}) || !xf.string("error", r.error, false, 64) ||
            !xf.string("message", r.reason, false, kMaxReasonBytes))
            return false;
        if (r.error != "CapabilityFailed" && r.error != "Timeout")
            return xf.fail("'fail.error' must be \"CapabilityFailed\" or \"Timeout\"");
        r.kind = ResumeKind::Fail;
    }
    return true;
}

}  // namespace

Json errorReply(const Json& id, std::string_view session, std::string_view code, std::string_view message) {
    Json out = Json::object();
    out["status"] = "error";
    if (!id.is_null()) out["id"] = id;
    if (!session.empty()) out["session"] = session;
    out["error"] = Json{{"code", code}, {"message", message}};
    return out;
}

Json internalErrorReply(const Json& id, std::string_view session) {
    return errorReply(id, session, "host_error",
                      "internal error: the request could not be completed and its session was closed");
}

std::optional<Request> parseRequest(std::string_view line, Json& reply) {
    auto bad = [&](const Json& id, std::string_view session, std::string message) {
        reply = errorReply(id, session, "bad_request", message);
        return std::nullopt;
    };
    if (line.size() > kMaxRequestBytes)
        return bad(nullptr, {}, fmt::format("the request line is longer than {} bytes", kMaxRequestBytes));
    // Deeper JSON is refused before it is parsed, so no parser, printer or destructor recursion
    // depends on the client.
    if (jsonNestsDeeperThan(line, kMaxJsonDepth))
        return bad(nullptr, {}, fmt::format("the request is nested deeper than {} levels", kMaxJsonDepth));
    Json j;
    if (line.find('\0') != std::string_view::npos) return bad(nullptr, {}, "the request line contains a NUL byte");
    try {
        j = Json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
        return bad(nullptr, {}, fmt::format("the request line is not valid JSON (error at byte {})", e.byte));
    } catch (const nlohmann::json::out_of_range&) {
        // A number no double can hold (`1e999`): valid grammar, no value. It used to escape to the
        // server's catch-all, which answered host_error instead of bad_request (found through
        // parseJsonText by the model_reply and approvals fuzz harnesses; replayed from
        // tests/fuzz/regressions/serve-number-overflow).
        return bad(nullptr, {}, "the request line holds a number too large for a 64-bit float");
    }
    if (!j.is_object()) return bad(nullptr, {}, "a request must be a JSON object");

    Json id = nullptr;
    if (auto it = j.find("id"); it != j.end()) {
        if (!(it->is_string() && it->get_ref<const std::string&>().size() <= kMaxIdBytes) && !it->is_number_integer())
            return bad(nullptr, {},
                       fmt::format("'id' must be an integer or a string of at most {} bytes", kMaxIdBytes));
        id = *it;
    }
    std::string session, type, problem;
    Fields f{j, problem, ""};
    if (!f.string("session", session, true, kMaxIdBytes) || !f.string("type", type, true, 16))
        return bad(id, {}, problem);
    if (session.empty()) return bad(id, {}, "'session' must not be empty");

    Request request;
    bool ok = false;
    if (type == "run") {
        request.type = Request::Type::Run;
        request.run.id = id;
        request.run.session = session;
        ok = parseRun(j, request.run, problem);
    } else if (type == "resume") {
        request.type = Request::Type::Resume;
        request.resume.id = id;
        request.resume.session = session;
        ok = parseResume(j, request.resume, problem);
    } else if (type == "abort") {
        request.type = Request::Type::Abort;
        request.abort.id = id;
        request.abort.session = session;
        ok = f.onlyKeys({"type", "id", "session"});
    } else {
        problem =
            fmt::format("unknown request type '{}': use \"run\", \"resume\" or \"abort\"", firstCodePoints(type, 16));
    }
    if (!ok) return bad(id, session, problem);
    return request;
}

// ---------------------------------------------------------------- the session

struct Session::Impl {
    RunRequest request;
    std::atomic<bool> abortRequested{false};
    std::mutex runMutex;  // guards `run` against requestAbort from other threads

    enum class State : uint8_t { New, Paused, Finished } state = State::New;
    HostModel host;  // resolved: capabilities' types, tags and clears
    std::map<std::string, const GrantSpec*, std::less<>> grants;
    std::shared_ptr<const LoadedProgram> program;
    std::unique_ptr<Run> run;
    // The request's texts under their virtual names, for the excerpts of `rendered`.
    std::unique_ptr<SourceFile> programSource, hostSource, expectedSource;

    // The grants as a policy, and the broker that enforces it (the same rules as `remitvm run`).
    // Serve is its adapter: each call the broker dispatches is reported to the host, which
    // performs it (or denies it) and answers with its result.
    Policy policy;
    std::unique_ptr<Broker> broker;

    uint64_t hostCalls = 0;  // calls reported to the host
    uint64_t callId = 0;     // the call the run is paused at

    explicit Impl(RunRequest r) : request(std::move(r)) {
        for (const GrantSpec& g : request.grants) {
            grants[g.name] = &g;
            policy.grants[g.name] = g.grant;
        }
        policy.maxUsd = request.budgetUsd;
        policy.file = kGrantsFile;
    }

    Json start();
    Json resume(const ResumeRequest& r);
    Json abortPaused(const Json& id);

    Json rejected(const std::vector<std::pair<Stage, Diagnostic>>& diags, const std::vector<std::string>& required);
    // Sets a reply's `diagnostics` (JSON, every one) and `rendered` (text, at most max_diagnostics in full).
    void withDiagnostics(Json& reply, const std::vector<Diagnostic>& diags) const {
        Json list = Json::array();
        for (const Diagnostic& d : diags) list.push_back(toJson(d));
        reply["diagnostics"] = std::move(list);
        SourceLookup sources = [this](const std::string& file) -> const SourceFile* {
            if (file == kProgramFile) return programSource.get();
            if (file == kHostFile) return hostSource.get();
            if (file == kExpectedFile) return expectedSource.get();
            return nullptr;  // grants: no text to show
        };
        reply["rendered"] = renderDiagnostics(diags, sources, RenderOptions{request.maxDiagnostics});
    }
    Json failedBeforeRun(const Json& id, RuntimeError error);
    Json drive(const Json& id, RunStatus status);
    Json finish(Json reply) {
        state = State::Finished;
        std::lock_guard<std::mutex> lock(runMutex);
        broker.reset();  // it refers to the run
        run.reset();     // values go with their heap, before the program
        program.reset();
        return reply;
    }
    // The host-call reply for a call the broker dispatched; null when its arguments are over the
    // result_bytes limit.
    Json hostCallReply(const Json& id, const HostCall& call, const Decision& decision);
    bool interrupted(Clock::time_point deadline) const {
        return abortRequested.load(std::memory_order_relaxed) || Clock::now() > deadline;
    }
};

Json Session::Impl::rejected(const std::vector<std::pair<Stage, Diagnostic>>& diags,
                             const std::vector<std::string>& required) {
    Stage stage = Stage::ExpectedType;
    for (const auto& [s, d] : diags)
        if (d.isError()) stage = std::min(stage, s);
    Json out = envelope("rejected", request.id, request.session);
    out["stage"] = kStageNames[static_cast<size_t>(stage)];
    std::vector<Diagnostic> list;
    for (const auto& [s, d] : diags) list.push_back(d);
    withDiagnostics(out, list);
    out["requires"] = required;
    return finish(std::move(out));
}

Json Session::Impl::failedBeforeRun(const Json& id, RuntimeError error) {
    Json out = envelope("failed", id, request.session);
    out["stage"] = failureStage(error.code);
    Diagnostic d = makeDiagnostic(error.code, error.message, kProgramFile);
    d.details = std::move(error.details);
    withDiagnostics(out, {d});
    out["host_calls"] = hostCalls;
    return finish(std::move(out));
}

Json Session::Impl::start() {
    const Clock::time_point started = Clock::now();
    const Clock::time_point deadline = started + std::chrono::milliseconds(request.limits.wallMs);
    auto stopped = [&](const char* phase) -> std::optional<Json> {
        if (abortRequested.load(std::memory_order_relaxed))
            return failedBeforeRun(request.id, err(DiagCode::R0702, "the run was aborted by the host"));
        if (Clock::now() <= deadline) return std::nullopt;
        return failedBeforeRun(
            request.id, err(DiagCode::R0701,
                            fmt::format("checking the program exceeded the time limit of {} ms", request.limits.wallMs),
                            Json{{"limit", "wall_ms"}, {"value", request.limits.wallMs}, {"phase", phase}}));
    };

    // The one check of a program (compiler/driver.h): parse the program and the host interface
    // (both, so one reply names the problems of each), resolve the host, check — stopping at the
    // deadline or an abort.
    std::vector<std::pair<Stage, Diagnostic>> diags;
    auto take = [&](DiagnosticList& list, std::optional<Stage> stage = std::nullopt) {
        for (Diagnostic& d : list.items()) {
            Stage s = stage ? *stage : stageOfCode(d.code);
            diags.emplace_back(s, std::move(d));
        }
        list = DiagnosticList();
    };
    if (request.expectedType) expectedSource = std::make_unique<SourceFile>(kExpectedFile, *request.expectedType);
    CheckOptions options;
    options.checkPolicy = false;  // the grants are the policy; they are checked below
    options.strictFlows = request.strictFlows;
    options.interrupted = [this, deadline] { return interrupted(deadline); };
    options.hostDespiteProgramErrors = true;
    CheckOutcome outcome = checkSources(kProgramFile, std::move(request.program), textSources(kHostFile, request.host),
                                        options);
    programSource = std::move(outcome.sources[kProgramFile]);
    hostSource = std::move(outcome.sources[kHostFile]);
    const ast::Program* ast = outcome.program.get();
    std::vector<std::string> required;
    if (ast)
        for (const ast::UseEntry& u : ast->uses) required.push_back(u.name);
    std::sort(required.begin(), required.end());
    required.erase(std::unique(required.begin(), required.end()), required.end());
    // No checker result: the program or the host interface did not parse or resolve.
    if (!outcome.checked) {
        take(outcome.diags, Stage::Parse);
        return rejected(diags, required);
    }
    CheckResult& check = *outcome.checked;
    if (check.interrupted || interrupted(deadline)) {
        if (auto s = stopped("check")) return *s;
        return failedBeforeRun(request.id, err(DiagCode::R0702, "the run was aborted by the host"));
    }
    for (const ResourceUse& r : check.manifest.resources) required.push_back(r.name);
    std::sort(required.begin(), required.end());
    required.erase(std::unique(required.begin(), required.end()), required.end());
    take(outcome.diags);

    // Grants must name what the host declares (a typo must not go unnoticed).
    DiagnosticList grantDiags;
    std::vector<std::string> declared = check.host.resourceNames();
    for (const GrantSpec& g : request.grants) {
        if (check.host.capability(g.name) || check.host.model(g.name)) continue;
        std::optional<std::string> close = closestName(g.name, declared);
        Diagnostic d = makeDiagnostic(
            DiagCode::E0505, fmt::format("grant of '{}', which the host does not declare", g.name), kGrantsFile, Span{},
            close ? fmt::format("did you mean '{}'?", *close)
                  : "grant only capabilities and models declared in the host interface");
        d.details = Json{{"grant", g.name}};
        grantDiags.add(std::move(d));
    }

    // Every resource the program needs must be granted: at each call site, else at its `uses` entry.
    for (const std::string& r : required) {
        if (grants.count(r)) continue;
        Json granted = Json::array();
        for (const GrantSpec& g : request.grants) granted.push_back(g.name);
        auto add = [&](Span span) {
            Diagnostic d =
                makeDiagnostic(DiagCode::E0501, fmt::format("'{}' is not granted to this run", r), kProgramFile, span,
                               fmt::format("remove the call, or ask the host to grant '{}'", r));
            d.details = Json{{"resource", r}, {"granted", granted}};
            grantDiags.add(std::move(d));
        };
        bool atSite = false;
        for (const CallSiteInfo& site : check.manifest.callSites) {
            if (site.resource != r) continue;
            uint32_t width = static_cast<uint32_t>(codePointCount(site.agent ? *site.agent : r));
            add(Span{site.line, site.col, site.line, site.col + width});
            atSite = true;
        }
        if (!atSite)
            for (const ast::UseEntry& u : ast->uses)
                if (u.name == r) add(u.span);
    }
    take(grantDiags, Stage::Grant);

    // The expected type: declared as an alias in a copy of the host interface, so it may use the
    // host's named types; main's return type must fit it.
    const ast::FnDecl* mainFn = nullptr;
    for (const ast::DeclPtr& d : ast->decls)
        if (d->kind == ast::DeclKind::Fn && d->as<ast::FnDecl>().name == "main") mainFn = &d->as<ast::FnDecl>();
    if (request.expectedType && mainFn) {
        std::string prefix = fmt::format("type {} = ", kExpectedAlias);
        uint32_t lastLine = 1;
        for (char c : request.host) lastLine += c == '\n';
        SourceFile expectedSource(kExpectedFile, request.host + "\n" + prefix + *request.expectedType + "\n");
        DiagnosticList expectedDiags;
        std::unique_ptr<ast::HostInterface> expectedAst = parseHost(expectedSource, expectedDiags);
        HostModel expectedModel;
        if (expectedAst && !expectedDiags.hasErrors())
            resolveHost(*expectedAst, kExpectedFile, expectedModel, expectedDiags);
        // Positions relative to the expected type's own text.
        uint32_t shift = static_cast<uint32_t>(prefix.size());
        uint32_t endCol = static_cast<uint32_t>(codePointCount(*request.expectedType)) + 1;
        for (Diagnostic& d : expectedDiags.items()) {
            if (d.span.line == lastLine + 1) {
                d.span.col = d.span.col > shift ? std::min(d.span.col - shift, endCol) : 1;
                d.span.endCol = d.span.endLine == d.span.line && d.span.endCol > shift
                                    ? std::min(d.span.endCol - shift, endCol + 1)
                                    : d.span.col + 1;
            } else if (d.span.line > lastLine + 1) {  // at the end of the text: just after the type
                d.span.col = endCol;
                d.span.endCol = endCol + 1;
            } else {
                d.span = Span{};
                continue;
            }
            d.span.line = d.span.endLine = 1;
        }
        auto it = expectedModel.types.find(kExpectedAlias);
        if (!expectedDiags.hasErrors() && it != expectedModel.types.end()) {
            TypeRef actual = check.host.arena->unit();
            if (mainFn->ret && static_cast<size_t>(mainFn->ret->id) < check.exprTypes.size() &&
                check.exprTypes[static_cast<size_t>(mainFn->ret->id)])
                actual = check.exprTypes[static_cast<size_t>(mainFn->ret->id)];
            if (!assignable(actual, it->second) || !boundViolation(actual, it->second).empty()) {
                std::string why = boundViolation(actual, it->second);
                Diagnostic d = makeDiagnostic(
                    DiagCode::E0103,
                    fmt::format("main returns {}, but the host expects {}", showType(actual), *request.expectedType),
                    kProgramFile, mainFn->ret ? mainFn->ret->span : mainFn->nameSpan,
                    fmt::format("make main return a value of type {}", *request.expectedType),
                    why.empty() ? std::vector<std::string>{} : std::vector<std::string>{why});
                d.details = Json{{"expected", *request.expectedType}, {"actual", showType(actual)}};
                expectedDiags.add(std::move(d));
            }
        } else if (!expectedDiags.hasErrors()) {
            expectedDiags.add(makeDiagnostic(DiagCode::E0105, "the expected type could not be read", kExpectedFile));
        }
        take(expectedDiags, Stage::ExpectedType);
    }

    bool anyError = std::any_of(diags.begin(), diags.end(), [](const auto& p) { return p.second.isError(); });
    if (anyError) return rejected(diags, required);
    if (auto s = stopped("check")) return *s;

    // Compile.
    DiagnosticList buildDiags;
    program = buildProgram(*ast, check, kProgramFile, buildDiags);
    if (!program) {
        take(buildDiags, Stage::Parse);
        return rejected(diags, required);
    }
    host = std::move(check.host);
    if (auto s = stopped("compile")) return *s;

    // Inputs, typed and tagged per the host's `input` lines; then the run.
    VmLimits limits;
    limits.maxSteps = request.limits.steps;
    limits.maxMemory = static_cast<size_t>(request.limits.memory);
    limits.maxResultBytes = static_cast<size_t>(request.limits.resultBytes);
    auto spentMs =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count());
    limits.maxWallMs = request.limits.wallMs > spentMs ? request.limits.wallMs - spentMs : 1;
    {
        std::lock_guard<std::mutex> lock(runMutex);
        run = std::make_unique<Run>(program, limits);
    }
    if (abortRequested.load()) run->requestAbort();
    // The host performs the calls itself, so the broker's idempotency keys are not shown to it.
    BrokerOptions brokerOptions = brokerOptionsFor(program->module(), host, policy, "serve", request.strictFlows);
    brokerOptions.adapterKind = "host";
    broker = std::make_unique<Broker>(brokerOptions, *run);
    std::string problem;
    std::vector<Value> args = mainArguments(*program, host, run->heap(), request.inputs, problem);
    if (!problem.empty()) {
        finish(nullptr);
        return errorReply(request.id, request.session, "bad_request", problem);
    }
    return drive(request.id, run->start(program->entry(), std::move(args)));
}

Json Session::Impl::hostCallReply(const Json& id, const HostCall& call, const Decision& decision) {
    Heap& heap = run->heap();
    const Site& site = *call.site;
    Json args = Json::object(), argTags = Json::object();
    for (size_t i = 0; i < site.argNames.size() && i < call.args.size(); ++i) {
        std::optional<Json> j = valueToJson(call.args[i], static_cast<size_t>(request.limits.resultBytes));
        std::optional<TagSetId> t = heap.deepTags(call.args[i]);
        if (!j || !t) return nullptr;
        args[site.argNames[i]] = std::move(*j);
        argTags[site.argNames[i]] = tagNames(heap, *t);
    }
    ++hostCalls;
    callId = hostCalls;
    // A call that needs approval is the host's to decide at this pause, whatever its grant says.
    auto grant = grants.find(site.resource);
    bool ask = (grant != grants.end() && grant->second->ask) || !decision.reasons.empty();
    Json c = Json::object();
    c["id"] = callId;
    c["kind"] = site.kind == SiteKind::Capability ? "capability" : site.kind == SiteKind::Model ? "model" : "agent";
    c["resource"] = site.resource;
    if (site.kind == SiteKind::Agent) c["agent"] = site.agent;
    c["site"] = site.id;
    c["span"] = spanJson(site.span);
    c["mode"] = ask ? "ask" : "allow";
    c["reasons"] = decision.reasons;
    c["args"] = std::move(args);
    c["arg_tags"] = std::move(argTags);
    c["pc_tags"] = tagNames(heap, call.pcTags);
    c["attempt"] = call.attempt;
    if (site.kind == SiteKind::Capability) {
        const Capability* cap = host.capability(site.resource);
        c["returns"] = cap && cap->ret ? showType(cap->ret) : "Unit";
    } else {
        if (call.agent) c["system"] = call.agent->system;
        c["returns"] = call.askType ? showType(call.askType) : "Unit";
        c["schema"] = jsonSchemaFor(call.askType);
    }
    c["result_tags"] = tagNames(heap, decision.resultTags);
    Json out = envelope("host-call", id, request.session);
    out["call"] = std::move(c);
    return out;
}

Json Session::Impl::drive(const Json& id, RunStatus status) {
    while (status == RunStatus::HostCall) {
        const HostCall& call = run->hostCall();
        Decision d = broker->decide(call);
        // No approver but the host: it decides at this pause (mode "ask"), and answers by performing
        // or denying the call.
        if (d.kind == Decision::Kind::NeedsApproval) d = broker->approved("host");
        if (d.kind != Decision::Kind::Dispatch) {
            status = broker->settle(std::move(d));
            continue;
        }
        if (hostCalls >= request.limits.hostCalls) {
            status = broker->settle(broker->cancel(
                err(DiagCode::R0701, fmt::format("the run exceeded its limit of {} host call(s)", request.limits.hostCalls),
                    Json{{"limit", "host_calls"}, {"value", request.limits.hostCalls}})));
            continue;
        }
        Json reply = hostCallReply(id, call, d);
        if (reply.is_null()) {
            status = broker->settle(broker->cancel(
                err(DiagCode::R0701,
                    fmt::format("the arguments of this call to '{}' are larger than the result_bytes limit of {} bytes",
                                call.site->resource, request.limits.resultBytes),
                    Json{{"limit", "result_bytes"}, {"value", request.limits.resultBytes}})));
            continue;
        }
        if (abortRequested.load()) return abortPaused(id);
        state = State::Paused;
        return reply;
    }
    if (status == RunStatus::Completed) {
        Json out = envelope("completed", id, request.session);
        RunResult result = resultOf(*run);
        const Function& main = program->module().functions[program->entry()];
        TypeRef type = program->type(main.returnType);
        out["result"] = std::move(result.value);
        out["type"] = type ? showType(type) : "Unit";
        // `result_tags`, as remit_run's reply and a host-call's `result_tags` say it; `tags` is the
        // same list under its first name, kept for the clients written against it.
        out["result_tags"] = result.tags;
        out["tags"] = std::move(result.tags);
        out["host_calls"] = hostCalls;
        out["steps"] = run->stepsUsed();
        out["spent_usd"] = broker->spent();
        return finish(std::move(out));
    }
    const RunFailure& f = run->failure();
    Json out = envelope("failed", id, request.session);
    out["stage"] = failureStage(f.error.code);
    Diagnostic d = makeDiagnostic(f.error.code, f.error.message, kProgramFile,
                                  f.span);
    d.details = f.error.details;
    withDiagnostics(out, {d});
    out["host_calls"] = hostCalls;
    return finish(std::move(out));
}

Json Session::Impl::resume(const ResumeRequest& r) {
    if (state != State::Paused)
        return errorReply(r.id, request.session, "not_paused", "the session is not paused at a host call");
    if (r.call != callId)
        return errorReply(r.id, request.session, "wrong_call",
                          fmt::format("the session is paused at call {}, not call {}", callId, r.call));
    if (abortRequested.load()) return abortPaused(r.id);
    state = State::New;
    const Site& site = *run->hostCall().site;
    const std::string& resource = site.resource;
    AdapterReply reply;
    switch (r.kind) {
        case ResumeKind::Deny: {
            Json details = {{"resource", resource}, {"site", site.id}, {"call", callId}, {"denied_by", "host"}};
            if (!r.reason.empty()) details["reason"] = r.reason;
            std::string message = fmt::format("the host denied the call to '{}'", resource);
            if (!r.reason.empty()) {
                message += ": ";
                message += firstCodePoints(r.reason, 200);
            }
            return drive(r.id, broker->settle(broker->cancel(err(DiagCode::R0303, std::move(message), std::move(details)))));
        }
        case ResumeKind::Fail:
            reply.ok = false;
            reply.errorCode = r.error;
            reply.message = !r.reason.empty()           ? std::string(firstCodePoints(r.reason, 200))
                            : r.error == "Timeout"      ? fmt::format("'{}' timed out", resource)
                                                        : fmt::format("'{}' failed", resource);
            break;
        case ResumeKind::Perform:
            // Checked as an adapter's result is (the declared type, the asked type: R0501/R0502,
            // operational), labelled, and its cost reconciled against the reservation.
            reply.ok = true;
            reply.result = r.result;
            reply.costUsd = r.costUsd;
            break;
    }
    return drive(r.id, broker->settle(broker->complete(reply)));
}

Json Session::Impl::abortPaused(const Json& id) {
    Json out = envelope("failed", id, request.session);
    out["stage"] = "aborted";
    Span span;
    if (run && run->status() == RunStatus::HostCall) span = run->hostCall().site->span;
    Diagnostic d = makeDiagnostic(DiagCode::R0702, "the run was aborted by the host", kProgramFile,
                                  span);
    withDiagnostics(out, {d});
    out["host_calls"] = hostCalls;
    return finish(std::move(out));
}

// ---------------------------------------------------------------- Session

Session::Session(RunRequest request) : impl_(std::make_unique<Impl>(std::move(request))) {}
Session::~Session() = default;

Json Session::start() {
    if (impl_->state != Impl::State::New || impl_->run)
        return errorReply(impl_->request.id, impl_->request.session, "session_busy", "the session has already started");
    return impl_->start();
}

Json Session::resume(const ResumeRequest& request) { return impl_->resume(request); }

Json Session::abortPaused(const Json& id) {
    if (impl_->state != Impl::State::Paused) return nullptr;
    return impl_->abortPaused(id);
}

void Session::requestAbort() {
    impl_->abortRequested.store(true);
    std::lock_guard<std::mutex> lock(impl_->runMutex);
    if (impl_->run) impl_->run->requestAbort();
}

bool Session::paused() const { return impl_->state == Impl::State::Paused; }
bool Session::finished() const { return impl_->state == Impl::State::Finished; }
const std::string& Session::id() const { return impl_->request.session; }

}  // namespace remit::serve
