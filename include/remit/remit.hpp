// Remit's embedding API for C++ hosts (docs/embedding.md). Compile a program against a host
// interface, then run it: every capability or model call stops the run and is handed to you with
// everything the broker decided about it — its arguments and their tags, the pc, whether it needs
// a person's approval and why — after the same rules `remitvm run` applies (grants, deny tags,
// argument constraints, call limits, approvals, budget). You perform the call and hand back its
// result as JSON; Remit validates it against the declared type and labels it. You never build a
// Remit value or a tag yourself, so you cannot forget one.
//
//     auto compiled = remit::api::Program::compile(source, host);
//     if (!compiled.program) { print(compiled.rendered); return; }
//     auto created = remit::api::Run::create(*compiled.program, {.policyToml = policy});
//     remit::api::Run& run = *created.run;
//     for (auto s = run.start(R"({"ticket": "..."})"); !run.finished(); ) {
//         const remit::api::HostCallView& call = run.hostCall();
//         if (s == remit::api::Status::NeedsApproval) { s = askAPerson(call) ? run.approve("alice") : run.refuse(); continue; }
//         s = run.complete(perform(call.resource, call.argsJson));   // or run.fail("Timeout")
//     }
//
// Nothing here exposes an internal type: programs and runs are opaque handles, values cross as
// JSON text. Threads: a Program is immutable and may be shared; a Run is used by one thread at a
// time, except requestAbort. Misuse (complete() when no call is waiting, say) throws
// std::logic_error; everything the program or its inputs do wrong is a Status and a Failure.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#define REMIT_VERSION_MAJOR 0
#define REMIT_VERSION_MINOR 1
#define REMIT_VERSION_PATCH 0
#define REMIT_VERSION_STRING "0.1.0"

namespace remit::api {

// A diagnostic of the checker (or a policy problem), as `remitc check --json` shows it.
struct Diagnostic {
    std::string code;      // "E0301"
    std::string severity;  // "error" or "warning"
    std::string message;
    std::string file;      // the names given in CompileOptions
    uint32_t line = 0, col = 0, endLine = 0, endCol = 0;  // 1-based; 0 when it has no position
    std::string hint;
    std::vector<std::string> notes;
};

struct CompileOptions {
    std::string programName = "program.rmt";  // the file name diagnostics use
    std::string hostName = "host.rmti";
    // A policy to check the program against (E0501–E0505; its approvals appear in the manifest;
    // `[flows] strict` selects strict flows). Default: none, so the run's policy alone applies.
    std::string policyToml;
    // Strict flows (docs/language.md "Strict flows"). Default false (unless the policy says so).
    bool strictFlows = false;
};

struct CompileResult;

// A checked and compiled program. Cheap to copy (shared), immutable.
class Program {
public:
    [[nodiscard]] static CompileResult compile(std::string_view source, std::string_view host,
                                               const CompileOptions& options = {});
    const std::string& name() const;
    const std::string& programHash() const;  // binds approvals and traces
    const std::string& hostHash() const;
    const std::string& manifestJson() const;  // docs/manifest.md
    bool strictFlows() const;

    struct Impl;

private:
    std::shared_ptr<const Impl> impl_;
    friend class Run;
};

struct CompileResult {
    std::optional<Program> program;        // present when the program checked
    std::vector<Diagnostic> diagnostics;   // errors and warnings, in file order
    std::string rendered;                  // the diagnostics as `remitc check` prints them
    bool ok() const { return program.has_value(); }
};

struct RunOptions {
    // The deployment policy (docs/policy.md). Default "": nothing is granted, so a program that
    // calls anything is refused by create() (E0501) — unless allowAll.
    std::string policyToml;
    bool allowAll = false;  // every resource granted, no limits (development only). Default false.
    // Limits; each defaults to `remitvm run`'s (a policy's [limits] lowers them too).
    uint64_t maxSteps = 100'000'000;
    uint64_t maxMemoryBytes = uint64_t(256) << 20;
    uint64_t maxWallMs = 10'000;  // time in the VM; time you spend performing calls is excluded
    // A state directory as `remitvm run --state-dir` uses it: the run's trace goes to
    // `<stateDir>/runs/<run id>.jsonl` and approvals are looked up in (and consumed from)
    // `<stateDir>/approvals.json`, so `remitvm approve`, `trace` and `resume` work on the run.
    // Default "": no trace, no approval store (approvals come only from you, through approve()).
    std::string stateDir;
};

enum class Status : uint8_t {
    HostCall,       // a call waits for you to perform it: complete() or fail()
    NeedsApproval,  // a call waits for a person: approve() or refuse()
    Completed,      // resultJson()
    Failed,         // failure()
};

enum class CallKind : uint8_t { Capability, Model, Agent };

// The call the run waits at, and what the broker decided about it.
struct HostCallView {
    CallKind kind = CallKind::Capability;
    std::string site;      // "main#0": the call-site id of the manifest and the trace
    std::string resource;  // the capability, or the model (an agent's model)
    std::string agent;     // agent calls: the agent's name
    std::string system;    // agent calls: its system prompt
    uint32_t line = 0, col = 0, endLine = 0, endCol = 0;
    std::string argsJson;  // {"param": value}; models: {"prompt", "context"}
    std::vector<std::pair<std::string, std::vector<std::string>>> argTags;  // deep tags per argument
    std::vector<std::string> pcTags;  // the control tags at the call
    uint32_t attempt = 0;             // 0-based; a `retry` makes more
    std::string returns;              // the declared return type, or the asked type of a model
    std::string schemaJson;           // models: the JSON Schema of the asked type
    std::vector<std::string> approvalReasons;  // why it needs (or needed) approval, in the broker's words
    std::string approvalDigest;                // what an approval binds to (empty: none needed)
    std::string approvedBy;                    // after an approval
    std::string idempotencyKey;                // HostCall: pass it to the service you call
    std::vector<std::string> resultTags;       // HostCall: the tags the result will carry
};

// Why a run failed: a runtime error (docs/diagnostics.md, R0101–R0702) or a problem with the
// policy or the inputs (E0504, or "input" for inputs that do not fit main).
struct Failure {
    std::string code;  // "R0301"
    std::string name;  // "PolicyViolation"
    std::string message;
    uint32_t line = 0, col = 0;
    std::string detailsJson;  // "null" or an object
    std::string rendered;     // as `remitvm run` prints it
};

struct CreateResult;

class Run {
public:
    [[nodiscard]] static CreateResult create(const Program& program, const RunOptions& options = {});
    ~Run();
    Run(Run&&) noexcept;
    Run& operator=(Run&&) noexcept;
    Run(const Run&) = delete;
    Run& operator=(const Run&) = delete;

    // Runs main with `inputsJson` (an object, one entry per parameter, tagged per the host's
    // `input` lines) until it completes, fails or waits at a call.
    [[nodiscard]] Status start(std::string_view inputsJson = "{}");
    // NeedsApproval: `by` approves the call (recorded, single use); the run goes on to HostCall
    // (or fails, e.g. over budget). refuse(): the run stops at the call with R0302, as an
    // unapproved `remitvm run` does.
    [[nodiscard]] Status approve(std::string_view by);
    [[nodiscard]] Status refuse();
    // HostCall: the call was performed and returned `resultJson` (null for Unit), costing
    // `costUsd` (default: the declared cost). The result is validated (R0501/R0502, operational:
    // retry and else apply) and labelled.
    [[nodiscard]] Status complete(std::string_view resultJson, std::optional<double> costUsd = std::nullopt);
    // HostCall: the call was attempted and failed: `error` is "CapabilityFailed" or "Timeout".
    [[nodiscard]] Status fail(std::string_view error = "CapabilityFailed", std::string_view message = "");

    Status status() const;
    bool finished() const { return status() == Status::Completed || status() == Status::Failed; }
    const HostCallView& hostCall() const;          // HostCall or NeedsApproval
    std::string resultJson() const;                // Completed
    std::vector<std::string> resultTags() const;   // Completed: the result's deep tags
    const Failure& failure() const;                // Failed
    double spentUsd() const;
    const std::string& runId() const;
    std::string tracePath() const;  // "" without a state directory
    // Any thread: stops the run at its next back-edge or call with R0702.
    void requestAbort();

    struct Impl;

private:
    explicit Run(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

struct CreateResult {
    std::optional<Run> run;                // present when the options were valid
    std::vector<Diagnostic> diagnostics;   // a policy that does not parse or does not fit (E0504, E0505)
    std::string rendered;
};

}  // namespace remit::api
