// The session engine of `remitvm serve` (docs/serve.md): one
// checked run of source the host did not write. A `run` request is parsed and checked against the
// host interface it carries, checked again against its grants (an ungranted capability is a
// rejection before anything runs), compiled, and run under its limits; every capability or model
// call pauses the run and is reported to the host with its span, arguments and tags, and the host
// resumes it with a result, a denial or a failure. The engine performs no effect itself.
//
// cli/serve_command.cpp owns the protocol's transport (lines on stdin/stdout, one thread per
// session, dispatch); everything a reply says is decided here. Replies are JSON objects ready to
// print; a request the engine cannot serve gets a fixed error reply, never exception text.
//
// Threads: a Session is used by one thread at a time, except requestAbort, which any thread may
// call at any time (it stops checking at the next poll and the VM within 16,384 step charges).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/policy.h"
#include "runtime/json_text.h"

namespace remit::serve {


// The limits of one run (docs/serve.md "Limits"). Every run has all of them.
struct Limits {
    uint64_t steps = 10'000'000;           // VM step charges (docs/language.md, decision 46)
    uint64_t wallMs = 5'000;               // checking, compiling and running together; time paused at calls excluded
    uint64_t hostCalls = 100;              // calls reported to the host, retries included
    uint64_t resultBytes = 1u << 20;       // the result as JSON; also each host call's arguments
    uint64_t memory = uint64_t(64) << 20;  // live bytes of the run's heap
};

// The most a request may ask for; more is a bad_request (a server protects its other sessions).
inline constexpr Limits kMaxLimits{1'000'000'000'000, 3'600'000, 100'000, uint64_t(64) << 20, uint64_t(1) << 30};

// How many diagnostics a reply's `rendered` text shows in full (docs/serve.md): the default fits a
// model's prompt; the maximum is as many errors as one DiagnosticList keeps.
inline constexpr uint64_t kDefaultMaxDiagnostics = 20;
inline constexpr uint64_t kMaxMaxDiagnostics = 1000;

// Transport limits the engine's parser enforces: a longer line or deeper JSON is a bad_request.
inline constexpr size_t kMaxRequestBytes = size_t(8) << 20;
inline constexpr size_t kMaxJsonDepth = 256;

// One grant of a run: a resource with every field a policy.toml grant has (docs/policy.md), plus
// the serve-only mode. The grants of a request are the run's policy, enforced by the broker.
struct GrantSpec {
    std::string name;  // a capability or model the host declares
    bool ask = true;   // mode "ask" (a person decides each call) or "allow" (the host performs it)
    Grant grant;       // max_calls, arg_prefix, arg_one_of, arg_max, approve, approval = "always"
};

struct RunRequest {
    Json id;  // echoed; null when the request had none
    std::string session;
    std::string program;  // the program text ("program", or its older name "source")
    std::string host;
    std::vector<GrantSpec> grants;
    nlohmann::json inputs = nlohmann::json::object();
    Limits limits;
    std::optional<std::string> expectedType;
    uint64_t maxDiagnostics = kDefaultMaxDiagnostics;  // for `rendered`; the `diagnostics` list is always whole
    bool strictFlows = false;  // check, compile and enforce in strict-flows mode (docs/language.md)
    std::optional<double> budgetUsd;  // the run's budget, as a policy's [budget] max_usd
};

enum class ResumeKind : uint8_t { Perform, Deny, Fail };

struct ResumeRequest {
    Json id;
    std::string session;
    uint64_t call = 0;
    ResumeKind kind = ResumeKind::Perform;
    nlohmann::json result;  // Perform
    std::optional<double> costUsd;  // Perform: what the call cost, reconciled against its reservation
    std::string reason;     // Deny: optional reason; Fail: message
    std::string error;      // Fail: "CapabilityFailed" or "Timeout"
};

struct AbortRequest {
    Json id;
    std::string session;
};

struct Request {
    enum class Type : uint8_t { Run, Resume, Abort } type = Type::Run;
    RunRequest run;
    ResumeRequest resume;
    AbortRequest abort;
};

// Parses one request line. On a malformed line returns nullopt and sets `reply` to a bad_request
// error reply naming what is wrong (with the request's id and session when they could be read).
std::optional<Request> parseRequest(std::string_view line, Json& reply);

// {"status": "error", "id"?, "session"?, "error": {"code", "message"}}.
Json errorReply(const Json& id, std::string_view session, std::string_view code, std::string_view message);
// The fixed reply for an internal failure (an exception, a broken invariant): code host_error and
// a message that never carries exception text, paths or addresses.
Json internalErrorReply(const Json& id, std::string_view session);

class Session {
public:
    explicit Session(RunRequest request);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Checks, compiles and starts the run: `rejected`, `host-call`, `completed` or `failed`.
    // `rejected` and `failed` replies carry `rendered`: renderDiagnostics of their diagnostics
    // against the request's texts, under the request's max_diagnostics.
    Json start();
    // Resumes the call the run is paused at: `host-call`, `completed` or `failed`; an error reply
    // (the session stays paused) when the request names another call or the session is not paused.
    Json resume(const ResumeRequest& request);
    // Ends a run paused at a host call after requestAbort: `failed` with stage `aborted`.
    Json abortPaused(const Json& id);
    // Any thread: stops checking or running as soon as the engine next looks.
    void requestAbort();

    bool paused() const;
    bool finished() const;  // rejected, completed or failed: nothing more will happen
    const std::string& id() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace remit::serve
