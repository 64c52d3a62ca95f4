// The MCP tools (session/mcp_tools.h, docs/mcp.md). Each tool is a function from validated arguments
// to a result object; the checks, formatting, manifests, bytecode and runs all come from the
// library — this file only composes them for text held in memory instead of files.
#include "session/mcp_tools.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <span>
#include <stdexcept>

#include "broker/approvals.h"
#include "broker/broker.h"
#include "broker/fixture_adapter.h"
#include "broker/trace.h"
#include "compiler/checker.h"
#include "compiler/driver.h"
#include "compiler/manifest.h"
#include "compiler/parser.h"
#include "runtime/diagnostics.h"
#include "runtime/hash.h"
#include "runtime/policy.h"
#include "runtime/source.h"
#include "runtime/value_json.h"
#include "session/pipeline.h"
#include "session/run_lifecycle.h"
#include "vm/run.h"

namespace remit::mcp {

namespace {

namespace fs = std::filesystem;

constexpr const char* kProgramFile = "program.rmt";
constexpr const char* kHostFile = "host.rmti";
constexpr const char* kPolicyFile = "policy.toml";
constexpr const char* kGuidePath = "docs/ai-guide.md";
constexpr const char* kSpecPath = "docs/spec/remit-language-v0.1.md";
// JSON given as text (fixtures, inputs) nested deeper than this is refused before it is parsed.
constexpr size_t kMaxJsonDepth = 128;
// Run limits of a tool run: a client's policy may lower them, never raise them (the server is
// shared by every run it holds).
constexpr size_t kMaxRunResultBytes = size_t(1) << 20;
constexpr VmLimits kRunCeiling{VmLimits{}.maxSteps, size_t(64) << 20, 10'000, kMaxRunResultBytes};

// Tool results print as the prototype's server prints them: indented JSON, non-ASCII kept.
std::string dump(const Json& value) { return value.dump(2, ' ', false, Json::error_handler_t::replace); }

Json errorsResult(std::vector<std::string> errors) {
    Json out;
    out["ok"] = false;
    out["errors"] = std::move(errors);
    return out;
}

Json tooLarge() { return errorsResult({"input too large"}); }

// ---------------------------------------------------------------- checking text in memory

// A check of in-memory text: compiler/driver.h's checkSources, plus how MCP shows its outcome.
struct TextCheck : CheckOutcome {
    bool parsed() const { return checked.has_value(); }
    bool ok() const { return checked && !diags.hasErrors(); }

    std::string render(const Diagnostic& d) const { return renderText(d, sourceFor(d.file)); }
    std::vector<std::string> rendered(bool errors) const {
        std::vector<std::string> out;
        for (const Diagnostic& d : diags.items())
            if (d.isError() == errors) out.push_back(render(d));
        return out;
    }
};

void checkText(TextCheck& out, const std::string& programName, const std::string& programText,
               const std::string& hostText, const std::optional<std::string>& policyText, bool strictFlows = false) {
    CheckOptions options;
    options.strictFlows = strictFlows;
    SourceProvider texts = policyText ? textSources(kHostFile, hostText, std::string(kPolicyFile), *policyText)
                                      : textSources(kHostFile, hostText);
    static_cast<CheckOutcome&>(out) = checkSources(programName, programText, texts, options);
}

// The remit_check result for a finished TextCheck (docs/mcp.md "Tools").
Json checkResult(const TextCheck& c) {
    if (!c.parsed()) return errorsResult(c.rendered(true));
    Json out;
    out["ok"] = c.ok();
    out["errors"] = c.rendered(true);
    out["warnings"] = c.rendered(false);
    if (c.ok()) {
        out["summary"] = manifestSummary(c.checked->manifest);
        out["manifest"] = manifestToJson(c.checked->manifest);
        out["program_hash"] = c.checked->manifest.programHash;
    }
    return out;
}

// ---------------------------------------------------------------- runs

// One run of a program on fixtures, driven by the broker on the caller's thread. With `autoApprove`
// every approval is granted (remit_run_fixtures); otherwise the run stops at a call that needs
// approval, and resume() answers it.
struct LiveRun {
    std::string token;
    std::string caller;  // who started it: only they may resume it
    fs::path dir;  // this run's scratch directory: its trace and approval store
    std::string programText;
    std::shared_ptr<const LoadedProgram> program;
    HostModel host;
    Policy policy;
    std::unique_ptr<FixtureAdapter> adapter;
    TraceWriter trace;
    std::unique_ptr<ApprovalStore> approvals;
    std::unique_ptr<Run> run;
    std::unique_ptr<Broker> broker;
    std::vector<Value> args;  // main's inputs, moved into the run when it starts

    // The run goes as far as it can on the caller's thread and stops at a call that needs
    // approval: the pending request is kept with the run and its broker, and remit_resume answers
    // it. No thread waits anywhere.
    std::optional<PendingApproval> pending;  // set while paused for approval
    bool crashed = false;                    // an exception escaped: reported as host_error
    bool denied = false;                     // the last approval was refused
    RunStatus status = RunStatus::NotStarted;

    ~LiveRun() {
        std::error_code ec;
        if (!dir.empty()) fs::remove_all(dir, ec);
    }

    bool paused() const { return pending.has_value(); }

    // Starts the run and runs it until it pauses or ends.
    void start() {
        guarded([&] {
            run->start(program->entry(), std::move(args));
            status = driveWith(*run, *broker, adapter.get(), {}, &pending);
        });
    }

    // Operator mode: continues only if the approval store now holds the operator's approval of
    // the pending call; otherwise the run stays paused, exactly where it was.
    void answerFromStore() {
        guarded([&] {
            Decision d = broker->recheckApproval();
            if (d.kind == Decision::Kind::NeedsApproval) {
                pending = std::move(d.pending);
                return;
            }
            pending.reset();
            status = carryOut(*broker, adapter.get(), std::move(d));
            status = driveWith(*run, *broker, adapter.get(), {}, &pending);
        });
    }

    // Answers the pending approval and runs on until the run pauses again or ends.
    void answer(bool approve) {
        denied = !approve;
        pending.reset();
        guarded([&] {
            status = carryOut(*broker, adapter.get(), approve ? broker->approved("interactive") : broker->decline());
            status = driveWith(*run, *broker, adapter.get(), {}, &pending);
        });
    }

    // Operator mode: the user, asked through the client, answered the pending call. `by`
    // approves it (it is performed, once, and the approval recorded as any other) or denies it
    // with `reason` (R0302 naming them, recorded as `remitvm approvals deny` records a denial).
    // Runs on until the run pauses again or ends.
    void answerByUser(bool approve, const std::string& by, const std::string& reason) {
        pending.reset();
        guarded([&] {
            status = carryOut(*broker, adapter.get(), approve ? broker->approved(by) : broker->denied(by, reason));
            status = driveWith(*run, *broker, adapter.get(), {}, &pending);
        });
    }

    // The line of call site `site` in the program, or 0.
    uint32_t siteLine(const std::string& site) const {
        for (const Site& s : program->module().sites)
            if (s.id == site) return s.span.line;
        return 0;
    }

    template <class F>
    void guarded(F&& f) {
        try {
            f();
        } catch (...) {
            crashed = true;  // reported as host_error; nothing of the exception is kept
            pending.reset();
        }
    }

    // The calls made so far, as the prototype lists them: {resource, args, status, approval_needed?}.
    Json calls() const {
        Json out = Json::array();
        TraceFile t = readTrace(trace.path());
        for (const nlohmann::json& e : t.events) {
            if (!e.is_object() || e.value("event", "") != "call") continue;
            Json c;
            c["resource"] = e.value("resource", "");
            c["args"] = e.contains("args") ? Json(e["args"]) : Json::object();
            c["status"] = e.value("status", "");
            if (e.contains("approval") && e["approval"].is_object()) c["approval_needed"] = true;
            out.push_back(std::move(c));
        }
        return out;
    }

    std::string renderFailure(const RunFailure& f) const {
        Diagnostic d = makeDiagnostic(f.error.code, f.error.message, kProgramFile, f.span);
        d.details = f.error.details;
        SourceFile source(kProgramFile, programText);
        return renderText(d, &source);
    }

    RunResult result() const { return resultOf(*run, kMaxRunResultBytes); }
};

Json pendingJson(const PendingApproval& p) {
    return Json{
        {"resource", p.resource}, {"site", p.site}, {"args", p.args}, {"reasons", p.reasons}, {"digest", p.digest}};
}

// ---------------------------------------------------------------- asking the user (MCP elicitation)

// Who approved or denied a call the user answered through the client: the channel, and the caller
// over HTTP (`key:ID` or `anon:ADDRESS`), recorded in the trace and the store as any approver.
constexpr const char* kUserViaElicitation = "user via MCP elicitation";
// The longest reason kept from an answer, in code points.
constexpr size_t kMaxReasonChars = 500;

// elicitation/create's params for the call `p` a run waits for. The message says what would
// happen and why a person must decide: the program, the resource and its site, every argument in
// full, the reasons, the digest the operator's tools show. The requested schema is what MCP
// allows (a flat object of primitive properties): a required approve/deny choice and an optional
// reason.
Json approvalQuestion(const LiveRun& run, const PendingApproval& p) {
    uint32_t line = run.siteLine(p.site);
    std::string message = fmt::format(
        "Approve this call? The Remit program '{}', run by your agent through this server, wants to call {} at {}{}.\n"
        "It needs a person's approval because: {}.\n"
        "The arguments, in full:\n{}\n"
        "Approve performs this one call, once; deny refuses it and the run stops. (Approval digest {}.)",
        run.program->module().programName, p.resource, p.site, line ? fmt::format(" (line {})", line) : "",
        fmt::join(p.reasons, "; "), dump(p.args), p.digest.substr(0, 16));
    Json decision = {{"type", "string"},
                     {"title", "Decision"},
                     {"description", "approve: perform this one call; deny: refuse it, and the run stops"},
                     {"enum", {"approve", "deny"}},
                     {"enumNames", {"Approve this call", "Deny it"}}};
    Json reason = {{"type", "string"},
                   {"title", "Reason"},
                   {"description", "Optional: why, recorded with your decision"},
                   {"maxLength", kMaxReasonChars}};
    return Json{{"message", std::move(message)},
                {"requestedSchema",
                 {{"type", "object"},
                  {"properties", {{"decision", std::move(decision)}, {"reason", std::move(reason)}}},
                  {"required", {"decision"}}}}};
}

// What became of a question to the user.
struct UserAnswer {
    enum class Kind { Approve, Deny, Unanswered } kind = Kind::Unanswered;
    std::string reason;   // Deny: why, as the user gave it (may be empty)
    std::string outcome;  // Unanswered: cancel, timeout, error, invalid, unsent, interrupted or cancelled_call
    std::string message;  // Unanswered: the same, in words
};

UserAnswer unanswered(std::string outcome, std::string message) {
    return UserAnswer{UserAnswer::Kind::Unanswered, {}, std::move(outcome), std::move(message)};
}

// A reason as it is kept: at most kMaxReasonChars code points, control characters as spaces (it
// is printed by `approvals list` and in error messages).
std::string cleanReason(const std::string& text) {
    std::string out(firstCodePoints(text, kMaxReasonChars));
    for (char& c : out)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
    return out;
}

// Reads the client's response to approvalQuestion. Only `accept` with decision "approve" approves;
// `accept` with "deny" and `decline` deny; `cancel`, an error and anything malformed leave the call
// undecided — never an approval.
UserAnswer readAnswer(const Json& response) {
    if (response.contains("error")) {
        const Json& error = response["error"];
        std::string said = error.is_object() && error.contains("message") && error["message"].is_string()
                               ? cleanReason(std::string(firstCodePoints(error["message"].get_ref<const std::string&>(), 200)))
                               : "no message";
        return unanswered("error", "the client could not ask the user: " + said);
    }
    Json result = response.value("result", Json());
    std::string action, reason;
    Json content = Json::object();
    if (result.is_object()) {
        if (result.contains("action") && result["action"].is_string()) action = result["action"].get<std::string>();
        if (result.contains("content") && result["content"].is_object()) content = result["content"];
    }
    if (content.contains("reason") && content["reason"].is_string())
        reason = cleanReason(content["reason"].get<std::string>());
    if (action == "accept") {
        Json decision = content.value("decision", Json());
        if (decision == "approve") return UserAnswer{UserAnswer::Kind::Approve, {}, {}, {}};
        if (decision == "deny") return UserAnswer{UserAnswer::Kind::Deny, reason, {}, {}};
        return unanswered("invalid", "the client's answer had no decision (approve or deny)");
    }
    if (action == "decline") return UserAnswer{UserAnswer::Kind::Deny, reason.empty() ? "declined" : reason, {}, {}};
    if (action == "cancel") return unanswered("cancel", "the user dismissed the question without deciding");
    return unanswered("invalid", "the client's answer was not accept, decline or cancel");
}

// Arguments after validation: strings by name (absent and null are missing), and booleans.
struct Args {
    std::map<std::string, std::string> strings;
    std::map<std::string, bool> booleans;
    std::optional<std::string> get(const std::string& name) const {
        auto it = strings.find(name);
        return it == strings.end() ? std::nullopt : std::optional(it->second);
    }
    bool flag(const std::string& name) const {
        auto it = booleans.find(name);
        return it != booleans.end() && it->second;
    }
};

}  // namespace

// ---------------------------------------------------------------- embedded text

std::optional<std::string_view> embeddedText(std::string_view path) {
    for (const EmbeddedFile& f : embeddedFiles())
        if (f.path == path) return f.text;
    return std::nullopt;
}

// ---------------------------------------------------------------- tool table

const std::vector<ToolSpec>& toolSpecs() {
    using T = ParamSpec::Type;
    static const ParamSpec program{"program", T::String, true, "The Remit program: the text of a .rmt file."};
    static const ParamSpec host{"host", T::String, true,
                                "The host interface: the text of the host.rmti file the program runs against."};
    static const ParamSpec policy{"policy", T::String, false,
                                  "Optional deployment policy: the text of a policy.toml file (grants, max_calls, "
                                  "budget). Without it nothing is compared with a policy."};
    static const ParamSpec fixtures{
        "fixtures", T::JsonDocument, true,
        "The fixtures, as a JSON object or its text: canned results for each "
        "capability and model call, e.g. {\"capabilities\": {\"ns.cap\": [{\"args\": {...}, \"output\": ...}]}, "
        "\"model\": [{\"match\": \"...\", \"output\": ...}]}."};
    static const ParamSpec inputs{"inputs", T::JsonDocument, false,
                                  "An object with one entry per parameter of main, or its JSON text.", "{}"};
    static const ParamSpec runPolicy{"policy", T::String, false,
                                     "Optional policy.toml text; without it every resource the host declares is "
                                     "granted with no limits."};
    static const ParamSpec strictFlows{"strict_flows", T::Boolean, false,
                                       "true to check and run in strict-flows mode: decisions on tagged data count "
                                       "for deny parameters too, and early exits taint what follows. A policy with "
                                       "[flows] strict = true sets it as well."};
    static const std::vector<ToolSpec> specs = {
        {"remit_guide",
         "Remit guide",
         "Start here. Returns the Remit guide for agents: the workflow, a skeleton program, what each diagnostic "
         "means and how to fix it, a syntax cheat sheet, the fixture format and complete examples. "
         "section='spec' returns the full language specification instead.",
         {{"section", T::String, false, "\"guide\" (default) or \"spec\".", "guide", {"guide", "spec"}}}},
        {"remit_check",
         "Check a program",
         "Type-check a Remit program against a host interface and, optionally, a policy. Returns {ok, errors, "
         "warnings}, each diagnostic rendered with its code, position, source line, notes and hint; when ok, also "
         "a readable summary, the authority manifest (resources with worst-case calls and cost, approval sites, "
         "tagged data flows) and the program hash. Fix every error before finishing.",
         {program, host, policy, strictFlows}},
        {"remit_format",
         "Format a program",
         "Return the program in canonical layout, comments kept: {ok: true, program} or {ok: false, errors}.",
         {{"program", T::String, true, "The Remit program: the text of a .rmt file."}}},
        {"remit_authority_diff",
         "Compare authority",
         "Compare two versions of a program against the same host: {ok, widened, changes}. widened is true when "
         "the new version gains resources, calls, worst-case cost, tagged data flows or approval sites. Run it "
         "after every edit and do not widen authority unless the user asked for it.",
         {{"old_program", T::String, true, "The program before the edit."},
          {"new_program", T::String, true, "The program after the edit."},
          host}},
        {"remit_examples",
         "Example programs",
         "List the bundled example programs ({examples: [names]}), or return one by name as {filename: content}: "
         "its program, host.rmti, policy.toml, inputs.json and fixtures.",
         {{"name", T::String, false, "An example's name; omit it to list them."}}},
        {"remit_run_fixtures",
         "Run on fixtures",
         "Run a program offline on fixtures: canned results stand in for every capability and model call, so "
         "nothing real is ever called. The program is checked first. Every approval is granted automatically, "
         "except on a server that takes approvals from its operator: there a call that needs one is asked of the "
         "user through the client, or refused. "
         "Returns {ok: true, result, calls} or {ok: false, runtime_error, calls}; calls lists each call made with "
         "its resource, args, status and approval_needed.",
         {program, host, fixtures, inputs, runPolicy, strictFlows}},
        {"remit_run",
         "Run, pausing for approvals",
         "Run a program offline on fixtures like remit_run_fixtures, but a call that needs a human approval "
         "pauses the run and returns {status: \"approval_required\", run_token, pending: {resource, site, args, "
         "reasons, digest}}. Ask the user, then answer with remit_resume. Other results: {status: \"completed\", "
         "result, result_tags, spent_usd, calls}, {status: \"failed\", error, runtime_error, calls} and "
         "{status: \"rejected\", errors} when the program does not check or the fixtures or inputs are invalid.",
         {program, host, fixtures, inputs, runPolicy, strictFlows}},
        {"remit_resume",
         "Answer an approval",
         "Answer the approval a paused remit_run waits for. approve=true performs the pending call and continues "
         "the run, which may pause again at a later call; approve=false refuses the call and ends the run. Only "
         "approve what the user approved. Returns the same shapes as remit_run.",
         {{"run_token", T::String, true, "The run_token remit_run returned with status approval_required."},
          {"approve", T::Boolean, true, "true to allow the pending call, false to refuse it."}}},
    };
    return specs;
}

Json toolListEntry(const ToolSpec& spec) {
    Json properties = Json::object();
    Json required = Json::array();
    for (const ParamSpec& p : spec.params) {
        Json schema;
        if (p.type == ParamSpec::Type::Boolean) {
            schema["type"] = "boolean";
        } else if (p.type == ParamSpec::Type::JsonDocument) {
            schema["type"] = p.required || p.defaultValue ? Json::array({"object", "string"})
                                                          : Json::array({"object", "string", "null"});
        } else if (p.required || p.defaultValue) {
            schema["type"] = "string";
        } else {
            schema["type"] = Json::array({"string", "null"});
        }
        if (!p.oneOf.empty()) schema["enum"] = p.oneOf;
        if (p.defaultValue)
            schema["default"] = *p.defaultValue;
        else if (!p.required)
            schema["default"] = p.type == ParamSpec::Type::Boolean ? Json(false) : Json(nullptr);
        schema["description"] = p.description;
        properties[p.name] = std::move(schema);
        if (p.required) required.push_back(p.name);
    }
    Json entry;
    entry["name"] = spec.name;
    entry["title"] = spec.title;
    entry["description"] = spec.description;
    entry["inputSchema"] = {{"type", "object"},
                            {"properties", std::move(properties)},
                            {"required", std::move(required)},
                            {"additionalProperties", false}};
    // Every tool is offline: it reads only its arguments and the text bundled with the server, and
    // fixtures answer every call a run makes, so none reaches the world (openWorldHint false).
    // remit_run keeps a paused run on the server, and remit_resume answers its approval: neither
    // is read-only or idempotent, and remit_resume is marked destructive, because approving a
    // call is the decision a person must make. A client that runs read-only tools without asking
    // would otherwise let the agent approve its own calls (docs/mcp.md, "Tools").
    std::string_view name = spec.name;
    bool runs = name == "remit_run", answers = name == "remit_resume";
    entry["annotations"] = {{"title", spec.title},
                            {"readOnlyHint", !runs && !answers},
                            {"destructiveHint", answers},
                            {"idempotentHint", !runs && !answers},
                            {"openWorldHint", false}};
    return entry;
}

// ---------------------------------------------------------------- the tools

struct Tools::Impl {
    ToolsOptions options_;
    // Guards the four members below; held for bookkeeping only. A run is started, resumed and
    // ended outside the lock: its program may take as long as its limits allow.
    mutable std::mutex mutex;
    fs::path scratch;  // created on first use, removed at the end
    uint64_t runs = 0;
    std::map<std::string, std::unique_ptr<LiveRun>> paused;  // by run token
    std::deque<std::string> order;                           // paused tokens, oldest first

    // Tool calls in progress, by caller and request id, for cancel(): the run they execute now
    // (null while checking), and whether a cancellation arrived. Guarded by `mutex` too.
    struct InProgress {
        Run* run = nullptr;
        bool cancelled = false;
    };
    std::map<std::string, InProgress> inProgress;
    // Cancellations that came before their call was registered (a transport hands a request to
    // the tools a moment after reading it): the call is cancelled as it starts. Request ids are
    // unique within a session (MCP), so a stale entry cannot hit a later call; the last
    // kEarlyCancels are kept.
    static constexpr size_t kEarlyCancels = 64;
    std::deque<std::string> earlyCancels;

    // Requests sent to clients (elicitation/create) that wait for a response, by the id this
    // server gave them, with the caller that may answer. `answered` is notified when a response
    // arrives, a call is cancelled, or the waits are interrupted. Guarded by `mutex` too.
    struct Asked {
        std::string caller;
        std::optional<Json> response;
    };
    std::map<std::string, Asked> asked;
    std::condition_variable answered;
    bool waitsInterrupted = false;  // interruptWaits(): the server is ending

    bool cancelledLocked(const std::string& request) const {
        auto it = inProgress.find(request);
        return it != inProgress.end() && it->second.cancelled;
    }
    bool cancelled(const std::string& request) {
        std::lock_guard<std::mutex> lock(mutex);
        return cancelledLocked(request);
    }

    static std::string requestKey(std::string_view caller, const Json& requestId) {
        return requestId.is_null() ? std::string() : std::string(caller) + '\n' + requestId.dump();
    }
    // The run a call is about to execute; aborted at once if its cancellation came first.
    void executing(const std::string& key, Run* run) {
        if (key.empty()) return;
        std::lock_guard<std::mutex> lock(mutex);
        auto it = inProgress.find(key);
        if (it == inProgress.end()) return;
        it->second.run = run;
        if (run && it->second.cancelled) run->requestAbort();
    }

    ~Impl() {
        paused.clear();  // each paused run ends with its pending call unanswered
        std::error_code ec;
        if (!scratch.empty()) fs::remove_all(scratch, ec);
    }

    // A fresh scratch directory for one run; empty when none can be made.
    fs::path runDir() {
        std::lock_guard<std::mutex> lock(mutex);
        std::error_code ec;
        if (scratch.empty()) {
            std::string pattern = (fs::temp_directory_path(ec) / "remit-mcp-XXXXXX").string();
            if (ec || !::mkdtemp(pattern.data())) return {};
            scratch = pattern;
        }
        fs::path dir = scratch / std::to_string(++runs);
        fs::create_directories(dir, ec);
        return ec ? fs::path() : dir;
    }

    Json check(const Args& a) {
        TextCheck c;
        checkText(c, kProgramFile, *a.get("program"), *a.get("host"), a.get("policy"), a.flag("strict_flows"));
        return checkResult(c);
    }

    Json format(const Args& a) {
        FormatOutcome f = formatText(kProgramFile, *a.get("program"), false);
        if (f.diags.hasErrors() || f.formatted.empty()) {
            std::vector<std::string> errors;
            for (const Diagnostic& d : f.diags.items())
                if (d.isError()) errors.push_back(renderText(d, f.source.get()));
            return errorsResult(std::move(errors));
        }
        Json out;
        out["ok"] = true;
        out["program"] = f.formatted;
        return out;
    }

    Json authorityDiff(const Args& a) {
        // The host first (its errors are the same for both versions), then the new version, then the old.
        TextCheck after;
        checkText(after, "new.rmt", *a.get("new_program"), *a.get("host"), std::nullopt);
        if (!after.ok()) return errorsResult(after.rendered(true));
        TextCheck before;
        checkText(before, "old.rmt", *a.get("old_program"), *a.get("host"), std::nullopt);
        if (!before.ok()) return errorsResult({"the old program does not check; cannot compare"});
        AuthorityDiff diff = diffManifests(before.checked->manifest, after.checked->manifest);
        Json out;
        out["ok"] = true;
        Json lists = authorityDiffJson(diff);
        for (auto& [key, value] : lists.items()) out[key] = value;
        return out;
    }

    static std::map<std::string, std::map<std::string, std::string_view>> examples() {
        std::map<std::string, std::map<std::string, std::string_view>> out;
        for (const EmbeddedFile& f : embeddedFiles()) {
            if (!f.path.starts_with("examples/")) continue;
            std::string_view rest = f.path.substr(9);
            size_t slash = rest.find('/');
            if (slash == std::string_view::npos) continue;
            out[std::string(rest.substr(0, slash))][std::string(rest.substr(slash + 1))] = f.text;
        }
        return out;
    }

    Json examplesTool(const Args& a) {
        auto all = examples();
        Json names = Json::array();
        for (const auto& [name, files] : all) names.push_back(name);
        std::optional<std::string> name = a.get("name");
        if (!name || name->empty()) return Json{{"examples", names}};
        auto it = all.find(*name);
        if (it == all.end())
            return Json{{"error", fmt::format("unknown example '{}'", firstCodePoints(*name, 64))},
                        {"examples", names}};
        Json out = Json::object();
        for (const auto& [file, text] : it->second) out[file] = std::string(text);
        return out;
    }

    // Sends the client one question and waits for its response: at most the elicitation timeout,
    // less when this tool call is cancelled or the server ends. An unanswered question is
    // withdrawn (notifications/cancelled), so the client can stop showing it.
    UserAnswer ask(ClientChannel& client, Json params, std::string_view caller, const std::string& request) {
        std::string id = "remit-elicitation-" + randomHex(12);
        {
            std::lock_guard<std::mutex> lock(mutex);
            if (waitsInterrupted) return unanswered("interrupted", "the server is stopping");
            asked.emplace(id, Asked{std::string(caller), std::nullopt});
        }
        Json message = {{"jsonrpc", "2.0"}, {"id", id}, {"method", "elicitation/create"}, {"params", std::move(params)}};
        bool sent = client.send(message);
        std::optional<Json> response;
        UserAnswer why;
        {
            std::unique_lock<std::mutex> lock(mutex);
            Asked& slot = asked.at(id);  // map nodes stay put while others come and go
            bool ended = sent && answered.wait_for(lock, options_.elicitationTimeout, [&] {
                return slot.response.has_value() || waitsInterrupted || cancelledLocked(request);
            });
            response = std::move(slot.response);
            asked.erase(id);
            if (!sent)
                why = unanswered("unsent", "the question could not be sent to the client");
            else if (!ended)
                why = unanswered("timeout", fmt::format("the user did not answer within {} seconds",
                                                        options_.elicitationTimeout.count()));
            else if (!response && waitsInterrupted)
                why = unanswered("interrupted", "the server is stopping");
            else if (!response)
                why = unanswered("cancelled_call", "the tool call was cancelled");
        }
        if (response) return readAnswer(*response);
        if (sent)
            client.send(Json{{"jsonrpc", "2.0"},
                             {"method", "notifications/cancelled"},
                             {"params", {{"requestId", id}, {"reason", why.message}}}});
        return why;
    }

    // Operator mode, with a client that can ask its user: while the run waits for an approval the
    // operator's store did not settle, the user is asked. Approved: the call is performed and the
    // run goes on, and may ask again at a later call. Denied or declined: the run fails with R0302
    // naming the user. Otherwise the run stays paused, and what became of the question is returned
    // for the reply; nullopt when nobody was asked or the question was answered.
    std::optional<Json> askUser(LiveRun& run, ClientChannel* client, std::string_view caller,
                                const std::string& request) {
        if (!options_.operatorApprovals || !client) return std::nullopt;
        std::string by =
            caller.empty() ? std::string(kUserViaElicitation) : fmt::format("{} ({})", kUserViaElicitation, caller);
        while (run.paused()) {
            UserAnswer answer = ask(*client, approvalQuestion(run, *run.pending), caller, request);
            if (answer.kind == UserAnswer::Kind::Unanswered)
                return Json{{"outcome", answer.outcome}, {"message", answer.message}};
            run.answerByUser(answer.kind == UserAnswer::Kind::Approve, by, answer.reason);
        }
        return std::nullopt;
    }

    // Checks, compiles and prepares a run of `a` (program, host, fixtures, inputs, policy?). Returns
    // the run, or sets `rejected` to the result explaining why it cannot start.
    std::unique_ptr<LiveRun> prepareRun(const Args& a, bool autoApprove, Json& rejected) {
        TextCheck c;
        checkText(c, kProgramFile, *a.get("program"), *a.get("host"), a.get("policy"), a.flag("strict_flows"));
        if (!c.ok()) {
            rejected = checkResult(c);
            return nullptr;
        }
        std::string error, hint;
        std::optional<nlohmann::json> fixtureDoc = parseJsonText("fixtures", *a.get("fixtures"), error, kMaxJsonDepth);
        std::optional<nlohmann::json> inputsDoc;
        if (fixtureDoc) inputsDoc = parseJsonText("inputs", a.get("inputs").value_or("{}"), error, kMaxJsonDepth);
        if (!fixtureDoc || !inputsDoc) {
            rejected = errorsResult({error});
            return nullptr;
        }
        auto run = std::make_unique<LiveRun>();
        run->adapter = FixtureAdapter::fromJson(std::move(*fixtureDoc), "fixtures.json", error, hint);
        if (run->adapter && !run->adapter->checkAgainst(c.checked->host, error, hint)) run->adapter.reset();
        if (!run->adapter) {
            rejected = errorsResult({hint.empty() ? error : fmt::format("{} (hint: {})", error, hint)});
            return nullptr;
        }
        DiagnosticList buildDiags;
        run->program = buildProgram(*c.program, *c.checked, kProgramFile, buildDiags);
        if (!run->program) {
            const Diagnostic& d = buildDiags.items().front();
            rejected = errorsResult({fmt::format("{}: error[{}]: {}", kProgramFile, diagInfo(d.code).code, d.message)});
            return nullptr;
        }
        run->programText = *a.get("program");
        run->host = std::move(c.checked->host);
        run->policy = c.policy ? std::move(*c.policy) : Policy::allowAllPolicy();

        VmLimits limits = clampTo(overlay(VmLimits{}, run->policy.limits), kRunCeiling);
        run->run = std::make_unique<Run>(run->program, limits);
        std::string problem;
        run->args = mainArguments(*run->program, run->host, run->run->heap(), *inputsDoc, problem);
        if (!problem.empty()) {
            rejected = errorsResult({problem});
            return nullptr;
        }

        run->dir = runDir();
        run->trace.setSynced(false);  // fixtures, in a scratch directory removed with the run
        if (run->dir.empty() || !run->trace.open((run->dir / "trace.jsonl").string(), error)) {
            rejected = nullptr;  // host_error: the message would name a path
            return nullptr;
        }
        run->token = randomHex(16);
        const Module& module = run->program->module();
        BrokerOptions options = brokerOptionsFor(module, run->host, run->policy, "mcp-" + run->token.substr(0, 12),
                                                 c.checked->manifest.strictFlows);
        options.adapterKind = run->adapter->kind();
        options.trace = &run->trace;
        if (autoApprove) {
            options.approveAll = true;
        } else {
            // Operator mode: the store the operator approves in; else the run's own.
            fs::path store = approvalStorePath(options_.operatorApprovals ? fs::path(options_.stateDir) : run->dir);
            run->approvals = std::make_unique<ApprovalStore>(store.string());
            if (options_.operatorApprovals) {
                std::error_code ec;
                fs::create_directories(options_.stateDir, ec);
                std::string storeError;
                if (ec || !run->approvals->load(storeError)) return nullptr;  // host_error: it would name a path
            }
            options.approvals = run->approvals.get();
        }
        run->broker = std::make_unique<Broker>(options, *run->run);
        return run;
    }

    // Turns a remit_run that paused or ended into its result; a paused run is kept. `question`:
    // what became of asking the user about the call it waits for (askUser).
    ToolOutcome settle(std::unique_ptr<LiveRun> run, const std::optional<Json>& question = std::nullopt) {
        bool paused = run->paused(), crashed = run->crashed, denied = run->denied;
        RunStatus status = run->status;
        const std::optional<PendingApproval>& pending = paused ? run->pending : run->broker->pending();
        if (crashed || (!paused && !run->broker->ioError().empty())) return hostError();
        Json out;
        if (paused && pending) {
            out["status"] = "approval_required";
            out["run_token"] = run->token;
            out["pending"] = pendingJson(*pending);
            out["calls"] = run->calls();
            std::string digest = pending->digest.substr(0, 16);
            if (!options_.operatorApprovals)
                out["next"] =
                    "Show the pending call to the user. Then call remit_resume with this run_token and approve: true "
                    "to perform it, or approve: false to refuse it.";
            else if (question)
                out["next"] = fmt::format(
                    "The user was asked to approve this call through your MCP client and did not decide ({}). Call "
                    "remit_resume with this run_token and approve: true to ask them again, or approve: false to "
                    "refuse the call. The operator of this server can also approve it with `remitvm approve {}`.",
                    (*question)["message"].get<std::string>(), digest);
            else
                out["next"] = fmt::format(
                    "Only the operator of this server can approve this call: ask them to run `remitvm approve {}` "
                    "with the server's state directory. Then call remit_resume with this run_token and approve: true "
                    "to continue, or approve: false to refuse the call.",
                    digest);
            if (options_.operatorApprovals) out["approver"] = "operator";
            if (question) out["elicitation"] = *question;
            std::string token = run->token;
            std::vector<std::unique_ptr<LiveRun>> dropped;  // ended after the lock is released
            {
                std::lock_guard<std::mutex> lock(mutex);
                auto drop = [&](std::deque<std::string>::iterator at) {
                    auto it = this->paused.find(*at);
                    dropped.push_back(std::move(it->second));
                    this->paused.erase(it);
                    order.erase(at);
                };
                // The caller's own oldest paused runs end first; another caller's never, unless
                // every caller together is at the server's bound.
                size_t own = 0;
                for (const std::string& t : order) own += this->paused.at(t)->caller == run->caller;
                for (auto it = order.begin(); own >= kMaxPausedRuns && it != order.end();) {
                    if (this->paused.at(*it)->caller != run->caller) {
                        ++it;
                        continue;
                    }
                    drop(it);
                    it = order.begin();
                    --own;
                }
                while (order.size() >= kMaxPausedRunsInAll) drop(order.begin());
                order.push_back(token);
                this->paused.emplace(token, std::move(run));
            }
            return {dump(out), false};
        }
        if (status == RunStatus::Completed) {
            out["status"] = "completed";
            RunResult result = run->result();
            out["result"] = std::move(result.value);
            out["result_tags"] = std::move(result.tags);
            out["spent_usd"] = run->broker->spent();
            out["calls"] = run->calls();
            return {dump(out), false};
        }
        const RunFailure& f = run->run->failure();
        out["status"] = "failed";
        if (denied && f.error.code == DiagCode::R0302 && pending) {
            Json error = failureJson(f);
            error["message"] = fmt::format("the approval of '{}' at {} was refused; the run stopped before the call",
                                           pending->resource, pending->site);
            out["error"] = std::move(error);
            out["denied"] = pendingJson(*pending);
        } else {
            out["error"] = failureJson(f);
        }
        out["runtime_error"] = run->renderFailure(f);
        out["calls"] = run->calls();
        return {dump(out), false};
    }

    static ToolOutcome hostError() {
        return {dump(Json{{"ok", false}, {"error", "host_error"}, {"message", kHostErrorMessage}}), true};
    }

    // Operator mode takes the automatic approvals away from remit_run_fixtures too (else the agent
    // could have any call approved by running it here): a call that needs one is asked of the
    // user when the client can be asked, and otherwise refused (R0302), since this tool returns
    // one result and cannot leave a run paused.
    ToolOutcome runFixtures(const Args& a, std::string_view caller, const std::string& request,
                            ClientChannel* client) {
        Json rejected;
        std::unique_ptr<LiveRun> run = prepareRun(a, !options_.operatorApprovals, rejected);
        if (!run) return rejected.is_null() ? hostError() : ToolOutcome{dump(rejected), false};
        executing(request, run->run.get());
        run->start();
        askUser(*run, client, caller, request);
        bool refused = run->paused();
        if (refused) run->answer(false);
        executing(request, nullptr);
        bool crashed = run->crashed || run->paused();
        RunStatus status = run->status;
        if (crashed || !run->broker->ioError().empty()) return hostError();
        Json out;
        if (status == RunStatus::Completed) {
            out["ok"] = true;
            out["result"] = run->result().value;
            out["calls"] = run->calls();
        } else {
            out["ok"] = false;
            out["runtime_error"] = run->renderFailure(run->run->failure());
            out["calls"] = run->calls();
            if (refused)
                out["next"] =
                    "On this server approvals come from its operator or from the user, never automatically: "
                    "remit_run pauses at this call and waits for one.";
        }
        return {dump(out), false};
    }

    // A tool call cancelled while its run waited (for the user, or paused after it) keeps nothing:
    // no reply is due, so no one would know the run's token.
    static ToolOutcome withdrawn() { return {dump(Json{{"status", "cancelled"}}), false}; }

    ToolOutcome runTool(const Args& a, std::string_view caller, const std::string& request, ClientChannel* client) {
        Json rejected;
        std::unique_ptr<LiveRun> run = prepareRun(a, false, rejected);
        if (!run) {
            if (rejected.is_null()) return hostError();
            Json out;
            out["status"] = "rejected";
            for (auto& [key, value] : rejected.items())
                if (key != "ok") out[key] = value;
            return {dump(out), false};
        }
        run->caller = std::string(caller);
        executing(request, run->run.get());
        run->start();
        std::optional<Json> question = askUser(*run, client, caller, request);
        executing(request, nullptr);
        if (run->paused() && cancelled(request)) return withdrawn();
        return settle(std::move(run), question);
    }

    ToolOutcome resume(const Args& a, std::string_view caller, const std::string& request, ClientChannel* client) {
        std::string token = *a.get("run_token");
        std::unique_ptr<LiveRun> run;
        {
            std::lock_guard<std::mutex> lock(mutex);
            // Another caller's token is unknown to this one, exactly like a token never issued.
            if (auto it = paused.find(token); it != paused.end() && it->second->caller == caller) {
                run = std::move(it->second);
                paused.erase(it);
                order.erase(std::find(order.begin(), order.end(), token));
            }
        }
        if (!run) {
            Json out;
            out["status"] = "error";
            out["error"] = "unknown_run_token";
            out["message"] = fmt::format(
                "no paused run has this run_token: it completed, was refused, was never issued by this server, or "
                "was dropped because more than {} of your runs were paused at once; start it again with remit_run",
                kMaxPausedRuns);
            return {dump(out), true};
        }
        executing(request, run->run.get());
        std::optional<Json> question;
        if (options_.operatorApprovals && a.booleans.at("approve")) {
            // The client cannot approve: the operator's store decides, else the user is asked.
            run->answerFromStore();
            question = askUser(*run, client, caller, request);
        } else {
            run->answer(a.booleans.at("approve"));
        }
        executing(request, nullptr);
        if (run->paused() && cancelled(request)) return withdrawn();
        return settle(std::move(run), question);
    }
};

Tools::Tools(ToolsOptions options) : impl_(std::make_unique<Impl>()) { impl_->options_ = std::move(options); }
Tools::~Tools() = default;

size_t Tools::pausedRuns() const {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    return impl_->paused.size();
}

void Tools::cancel(std::string_view caller, const Json& requestId) {
    std::string key = Impl::requestKey(caller, requestId);
    if (key.empty()) return;
    std::lock_guard<std::mutex> lock(impl_->mutex);
    auto it = impl_->inProgress.find(key);
    if (it == impl_->inProgress.end()) {
        if (impl_->earlyCancels.size() >= Impl::kEarlyCancels) impl_->earlyCancels.pop_front();
        impl_->earlyCancels.push_back(std::move(key));
        return;
    }
    it->second.cancelled = true;
    if (it->second.run) it->second.run->requestAbort();
    impl_->answered.notify_all();  // a call waiting for its user stops waiting
}

bool Tools::deliver(std::string_view caller, const Json& response) {
    if (!response.is_object() || !response.contains("id") || !response["id"].is_string()) return false;
    std::lock_guard<std::mutex> lock(impl_->mutex);
    auto it = impl_->asked.find(response["id"].get<std::string>());
    if (it == impl_->asked.end() || it->second.caller != caller || it->second.response) return false;
    it->second.response = response;
    impl_->answered.notify_all();
    return true;
}

void Tools::interruptWaits() {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->waitsInterrupted = true;
    impl_->answered.notify_all();
}

bool clientCanElicit(const Json& initializeParams, std::string_view protocolVersion) {
    if (protocolVersion < std::string_view("2025-06-18")) return false;  // the dates compare as text
    if (!initializeParams.is_object() || !initializeParams.contains("capabilities")) return false;
    const Json& capabilities = initializeParams["capabilities"];
    if (!capabilities.is_object() || !capabilities.contains("elicitation")) return false;
    const Json& elicitation = capabilities["elicitation"];
    if (!elicitation.is_object()) return false;
    // `{}` is form mode (2025-06-18, and later revisions for compatibility); a client naming only
    // the url mode cannot show a form.
    return elicitation.contains("form") || !elicitation.contains("url");
}

std::optional<ToolOutcome> Tools::call(std::string_view name, const Json& arguments, BadParams& bad,
                                       std::string_view caller, const Json& requestId, ClientChannel* client) {
    // Registered for cancel() for as long as the call runs (a repeated id shares the entry).
    std::string key = Impl::requestKey(caller, requestId);
    bool registered = false;
    if (!key.empty()) {
        std::lock_guard<std::mutex> lock(impl_->mutex);
        registered = impl_->inProgress.emplace(key, Impl::InProgress{}).second;
        auto early = std::find(impl_->earlyCancels.begin(), impl_->earlyCancels.end(), key);
        if (registered && early != impl_->earlyCancels.end()) {
            impl_->inProgress[key].cancelled = true;
            impl_->earlyCancels.erase(early);
        }
    }
    struct Unregister {
        Impl& impl;
        const std::string& key;
        bool active;
        ~Unregister() {
            if (!active) return;
            std::lock_guard<std::mutex> lock(impl.mutex);
            impl.inProgress.erase(key);
        }
    } unregister{*impl_, key, registered};
    std::optional<ToolOutcome> outcome =
        callTool(name, arguments, bad, caller, registered ? key : std::string(), client);
    if (outcome && registered) {
        std::lock_guard<std::mutex> lock(impl_->mutex);
        outcome->cancelled = impl_->inProgress.at(key).cancelled;
    }
    return outcome;
}

std::optional<ToolOutcome> Tools::callTool(std::string_view name, const Json& arguments, BadParams& bad,
                                           std::string_view caller, const std::string& request,
                                           ClientChannel* client) {
    const ToolSpec* spec = nullptr;
    for (const ToolSpec& s : toolSpecs())
        if (name == s.name) spec = &s;
    if (!spec) {
        std::vector<std::string> names;
        for (const ToolSpec& s : toolSpecs()) names.push_back(s.name);
        bad.message =
            fmt::format("unknown tool '{}'; the tools are {}", firstCodePoints(name, 64), fmt::join(names, ", "));
        return std::nullopt;
    }
    if (!arguments.is_null() && !arguments.is_object()) {
        bad.message = fmt::format("the arguments of {} must be a JSON object", spec->name);
        return std::nullopt;
    }
    Args args;
    bool tooLong = false;
    if (arguments.is_object()) {
        for (const auto& item : arguments.items()) {
            // Not a structured binding: clang 14 cannot capture one in the lambda below.
            const std::string& key = item.key();
            const Json& value = item.value();
            auto p = std::find_if(spec->params.begin(), spec->params.end(),
                                  [&](const ParamSpec& x) { return key == x.name; });
            if (p == spec->params.end()) {
                std::vector<std::string> names;
                for (const ParamSpec& x : spec->params) names.push_back(x.name);
                bad.message = fmt::format(
                    "unknown argument '{}' for {} (it takes {})", firstCodePoints(key, 64), spec->name,
                    names.empty() ? std::string("no arguments") : fmt::format("{}", fmt::join(names, ", ")));
                return std::nullopt;
            }
            if (value.is_null() && !p->required) continue;
            if (p->type == ParamSpec::Type::Boolean) {
                if (!value.is_boolean()) {
                    bad.message = fmt::format("argument '{}' of {} must be true or false", p->name, spec->name);
                    return std::nullopt;
                }
                args.booleans[p->name] = value.get<bool>();
                continue;
            }
            std::string document;  // a JsonDocument given as JSON: its text
            if (p->type == ParamSpec::Type::JsonDocument && (value.is_object() || value.is_array())) {
                document = value.dump();
            } else if (!value.is_string()) {
                bad.message = fmt::format("argument '{}' of {} must be {}", p->name, spec->name,
                                          p->type == ParamSpec::Type::JsonDocument ? "a JSON object or its text"
                                                                                   : "a string");
                return std::nullopt;
            }
            const std::string& text = value.is_string() ? value.get_ref<const std::string&>() : document;
            if (text.size() > kMaxArgumentChars && codePointCount(text) > kMaxArgumentChars) tooLong = true;
            args.strings[p->name] = text;
        }
    }
    for (const ParamSpec& p : spec->params) {
        bool present =
            p.type == ParamSpec::Type::Boolean ? args.booleans.count(p.name) > 0 : args.strings.count(p.name) > 0;
        if (!present && p.required) {
            bad.message = fmt::format("missing required argument '{}' for {}", p.name, spec->name);
            return std::nullopt;
        }
        if (present && !p.oneOf.empty() && !tooLong &&
            std::none_of(p.oneOf.begin(), p.oneOf.end(), [&](const char* v) { return args.strings[p.name] == v; })) {
            bad.message =
                fmt::format("argument '{}' of {} must be one of: {}", p.name, spec->name, fmt::join(p.oneOf, ", "));
            return std::nullopt;
        }
    }
    std::string_view tool = spec->name;
    try {
        if (tooLong) {
            Json out = tooLarge();
            if (tool == "remit_run" || tool == "remit_resume")
                out = Json{{"status", "rejected"}, {"errors", out["errors"]}};
            return ToolOutcome{dump(out), false};
        }
        if (tool == "remit_guide") {
            bool wantSpec = args.get("section").value_or("guide") == "spec";
            std::optional<std::string_view> text = embeddedText(wantSpec ? kSpecPath : kGuidePath);
            if (!text) return Impl::hostError();
            return ToolOutcome{std::string(*text), false};
        }
        if (tool == "remit_check") return ToolOutcome{dump(impl_->check(args)), false};
        if (tool == "remit_format") return ToolOutcome{dump(impl_->format(args)), false};
        if (tool == "remit_authority_diff") return ToolOutcome{dump(impl_->authorityDiff(args)), false};
        if (tool == "remit_examples") return ToolOutcome{dump(impl_->examplesTool(args)), false};
        if (tool == "remit_run_fixtures") return impl_->runFixtures(args, caller, request, client);
        if (tool == "remit_run") return impl_->runTool(args, caller, request, client);
        if (tool == "remit_resume") return impl_->resume(args, caller, request, client);
    } catch (...) {
        // Nothing of the exception reaches the client: it could carry paths or addresses.
    }
    return Impl::hostError();
}

}  // namespace remit::mcp
