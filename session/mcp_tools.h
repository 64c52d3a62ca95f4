// The tools of `remitvm mcp` / `remit mcp` (docs/mcp.md): the prototype's
// six — remit_guide, remit_check, remit_format, remit_authority_diff, remit_examples,
// remit_run_fixtures — with its parameter names and result shapes, plus remit_run and remit_resume,
// a fixture run that pauses when a call needs a human approval and continues when the client
// answers. cli/mcp_command.cpp is only the JSON-RPC transport; this file turns tool arguments into
// results by calling the library (compiler/driver.h, compiler/manifest.h, session/pipeline.h, the broker
// with a FixtureAdapter). Nothing here performs a live effect: every capability and model call is
// answered by the caller's fixtures.
//
// Safety: every string argument is at most kMaxArgumentChars code points (`input too large`);
// results never carry C++ exception text, host paths or addresses. Programs are named
// `program.rmt` (old.rmt / new.rmt in a diff), the host `host.rmti`, the policy `policy.toml`.
//
// Threads: tool calls may run concurrently (the HTTP transport serves each connection on its own
// thread); the paused runs and the scratch directory are guarded by one mutex, held only for
// bookkeeping, never while a program runs. A remit_run goes as far as it can on the caller's thread
// and stops at a call that needs approval; the run, its broker and the pending request are kept in
// a table under a token, and no thread waits. remit_resume answers the pending request and runs on
// (or the server ends and refuses it). A run token is taken out of the table by the one
// remit_resume that answers it, so two resumes of the same token cannot both proceed. The one
// wait: in operator mode a call whose client can be asked (ClientChannel) waits on its own thread
// for the user's answer, which the transport's reading thread hands to deliver().
//
// This is the session layer's library remit_mcp, above remit_session: the transports (stdio,
// HTTP) are cli/mcp_command.cpp and cli/mcp_http.cpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/json_text.h"

namespace remit::mcp {

// The prototype's limit on each argument, in characters (code points).
inline constexpr size_t kMaxArgumentChars = 200'000;
// A message longer than this is refused unread, over stdio and HTTP alike: eight arguments of
// kMaxArgumentChars fit even when every character is written as a \uXXXX escape.
inline constexpr size_t kMaxMessageBytes = size_t(16) << 20;
// Runs paused for an approval that the server keeps for each caller (an API key, or a client
// address without one; the stdio client is one caller): pausing one more ends that caller's own
// oldest. All callers together keep at most kMaxPausedRunsInAll, the oldest of all ending first,
// which bounds the memory many anonymous addresses could take (docs/mcp.md "Runs and approvals").
inline constexpr size_t kMaxPausedRuns = 8;
inline constexpr size_t kMaxPausedRunsInAll = 256;

// A file embedded into the binary at build time (session/CMakeLists.txt): docs/ai-guide.md, the
// language spec, and the bundled examples, by their path in the source tree.
struct EmbeddedFile {
    std::string_view path;
    std::string_view text;
};
const std::vector<EmbeddedFile>& embeddedFiles();
// The embedded file at `path`, or nullopt.
std::optional<std::string_view> embeddedText(std::string_view path);

// One parameter of a tool: a string, a boolean, or a JSON document given as its text or as the
// JSON value itself (fixtures, inputs: clients and models send both); optional ones may also be
// null.
struct ParamSpec {
    const char* name;
    enum class Type { String, Boolean, JsonDocument } type;
    bool required;
    const char* description;
    std::optional<const char*> defaultValue = std::nullopt;  // strings only
    std::vector<const char*> oneOf = {};                     // allowed values (strings only)
};

struct ToolSpec {
    const char* name;
    const char* title;
    const char* description;
    std::vector<ParamSpec> params;
};

// Every tool, in the order tools/list shows them.
const std::vector<ToolSpec>& toolSpecs();
// The tools/list entry of a tool: name, title, description, inputSchema (JSON Schema), annotations.
Json toolListEntry(const ToolSpec& spec);

// What a tool call produced: `text` is the MCP text content (JSON for every tool but remit_guide);
// `isError` marks a tool-level failure the client should show (an unknown run token, an internal
// failure).
struct ToolOutcome {
    std::string text;
    bool isError = false;
    bool cancelled = false;  // notifications/cancelled arrived while it ran: no reply is due
};

// Invalid arguments (missing, unknown, wrong type, a value outside the allowed ones): a JSON-RPC
// -32602 error with this message.
struct BadParams {
    std::string message;
};

// How long a tool call waits for the user's answer to an elicitation/create before the run stays
// paused as if nobody had been asked (docs/mcp.md "Asking the user"): `--elicitation-timeout`.
inline constexpr std::chrono::seconds kDefaultElicitationTimeout{300};
inline constexpr std::chrono::seconds kMaxElicitationTimeout{3600};

// Who may approve a call a paused remit_run waits for (`--approvals`, docs/mcp.md "Runs and
// approvals").
struct ToolsOptions {
    // false (`--approvals client`, the default): remit_resume's `approve: true` approves it — the
    // client is trusted to ask its user. true (`--approvals operator`): the agent cannot approve
    // anything. The operator can, with `remitvm approve DIGEST --state-dir <stateDir>`, and so can
    // the user, asked through MCP elicitation when the client declared that capability (the
    // question goes to the person, never through the agent's tool arguments); otherwise the run
    // stays paused. Refusing is always the client's to do.
    bool operatorApprovals = false;
    std::string stateDir = ".remit";  // operator mode: where approvals.json is kept
    std::chrono::seconds elicitationTimeout = kDefaultElicitationTimeout;
};

// The way back to the client while one of its tool calls runs, so the server can ask the user
// (elicitation/create). The transport hands one to Tools::call only when the client can answer:
// it declared the `elicitation` capability at initialize, and over HTTP the POST carrying the call
// accepts an event stream. The client's response comes back through Tools::deliver.
class ClientChannel {
public:
    virtual ~ClientChannel() = default;
    // Sends one JSON-RPC message (a request or a notification) to the client; false when it
    // cannot be sent (the client is gone).
    virtual bool send(const Json& message) = 0;
};

// Whether a client that sent `initializeParams` and agreed on `protocolVersion` can be asked with
// elicitation/create in form mode: the protocol has it (2025-06-18 on) and the client declared the
// `elicitation` capability — `{}`, or `{"form": {}}` in later revisions; `{"url": {}}` alone is
// no form.
bool clientCanElicit(const Json& initializeParams, std::string_view protocolVersion);

class Tools {
public:
    explicit Tools(ToolsOptions options = {});
    ~Tools();  // refuses and ends every paused run, removes the scratch directory
    Tools(const Tools&) = delete;
    Tools& operator=(const Tools&) = delete;

    // Calls tool `name` with `arguments` (a JSON object, or null for none) for `caller` (the API
    // key's id, `anon:<address>`, or empty over stdio): a run it pauses counts against that
    // caller's quota, and only that caller can resume it. Returns nullopt with `bad` set when the
    // tool is unknown or the arguments do not fit its parameters. Never throws: an internal
    // failure becomes the fixed host_error result.
    // `requestId` is the JSON-RPC id of the tools/call, so that cancel() can find it.
    // `client`, when the client can be asked (ClientChannel), lets a run in operator mode ask the
    // user to approve the call it waits for, and wait for the answer (at most the options'
    // elicitationTimeout; a cancellation of this call ends the wait, and the run).
    std::optional<ToolOutcome> call(std::string_view name, const Json& arguments, BadParams& bad,
                                    std::string_view caller = {}, const Json& requestId = nullptr,
                                    ClientChannel* client = nullptr);

    // A response from `caller` (a JSON-RPC message with `result` or `error`) to a request this
    // server sent it: the waiting call gets it. False when no request of that caller with that id
    // waits (answered already, timed out, never sent, or another caller's), and nothing changes.
    // Thread-safe: it arrives while the call waits on another thread.
    bool deliver(std::string_view caller, const Json& response);

    // The server is ending: every wait for a client's answer ends now, and none starts again; the
    // runs stay paused (and are refused when the Tools end). Thread-safe.
    void interruptWaits();

    // notifications/cancelled from `caller` for its request `requestId`: when that tool call is
    // still running, its run is aborted (R0702, within the VM's bounded abort latency) and the
    // call's outcome says `cancelled`. One that has not started yet is cancelled as it starts (the
    // last 64 such cancellations are kept). A request that already ended, or another caller's, is
    // left alone. Thread-safe: it is meant to arrive while the call runs on another thread.
    void cancel(std::string_view caller, const Json& requestId);

    // Paused runs currently held (tests and docs/mcp.md).
    size_t pausedRuns() const;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;

    std::optional<ToolOutcome> callTool(std::string_view name, const Json& arguments, BadParams& bad,
                                        std::string_view caller, const std::string& requestKey,
                                        ClientChannel* client);
};

// The fixed message of an internal failure (no exception text, path or address).
inline constexpr const char* kHostErrorMessage = "internal error: the request could not be completed";

}  // namespace remit::mcp
