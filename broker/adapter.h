// The adapter seam of the broker (docs/adapters.md): whatever performs a capability or model
// call for the broker — fixtures (broker/fixture_adapter.*), an adapter process speaking JSON lines
// (`--adapter CMD`, broker/process_adapter.*), a prototype-style adapters.py through our Python
// shim (`--live`, the same process protocol), an MCP server's tools (`--adapter mcp:CMD`,
// broker/mcp_adapter.*) or a configured model's API (broker/model_adapter.*). The broker has
// already applied every rule (grant, deny tags, constraints, limits, approval, budget) before it
// calls `perform`; an adapter only performs, and its reply is hostile input the broker validates.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "runtime/json_text.h"

namespace remit {

struct AdapterRequest {
    enum class Kind : uint8_t { Call, Ask } kind = Kind::Call;
    std::string runId;
    std::string site;              // "fn#k"
    std::string idempotencyKey;    // docs/broker.md "Idempotency keys"
    uint64_t timeoutMs = 0;        // the call's `timeout`, else the model's configured one, else the default
    uint32_t attempt = 0;          // 0 for the first attempt of this call, 1 for its first retry, …
    Json argTags;                  // {param: [tag, …]}: the deep tags of each argument
    Json pcTags;                   // [tag, …]: the tags of the control flow that reached the call
    // Call:
    std::string resource;          // capability name
    Json args;                     // {param: value}, plain JSON
    // Ask:
    std::string model;             // the model the call is granted under
    std::string agent;             // empty unless an agent call
    std::string system;            // the agent's system prompt, or empty
    std::string prompt;
    Json context;                  // null when no context was given
    std::string renderedPrompt;    // the prototype's rendering (docs/broker.md); fixtures `match` on it
    // Both kinds: the JSON Schema of the requested type (Ask) or of the capability's declared return
    // type (Call), and how that type is written, e.g. "Verdict" or "List[Str] max 5". The process
    // protocol sends them for asks only (docs/adapters.md "Requests"); an MCP server's answer is
    // shaped into the declared type with them (broker/mcp_adapter.h).
    Json schema;
    std::string typeName;
    // The repair turn: on a retry of a model call whose earlier attempt gave an answer that did not
    // fit its type (R0502), that answer (null when the adapter could not read one) and why.
    struct Previous {
        Json answer;
        std::string error;
    };
    std::optional<Previous> previous;
};

struct AdapterReply {
    bool ok = false;
    Json result;                       // ok: the raw result (validated by the broker)
    std::optional<double> costUsd;     // the actual cost, when the adapter reports one
    Json meta;                         // free-form, recorded in the trace
    // Not ok: "CapabilityFailed" (R0501), "Timeout" (R0503) or "ModelOutputInvalid" (R0502) — all
    // operational — and a message. A malformed, late or mismatched reply, or a dead adapter, is
    // reported by the adapter itself as CapabilityFailed with a message saying what happened.
    std::string errorCode;
    std::string message;
    // False only when the adapter knows the request reached nobody: its process could not be
    // started, or ended without reading a byte of it (docs/adapters.md, "Delivered or not"). The
    // broker then treats the attempt as never made: no call is recorded, an approval it consumed
    // goes back to the store, and the run stops so it can be resumed once the adapter is fixed.
    bool delivered = true;
    // The trace's `adapter` field for this call when it differs from the run's (BrokerOptions::
    // adapterKind): set by a RoutingAdapter to the kind() of the adapter that performed the call.
    std::string adapter;

    static AdapterReply success(Json result) {
        AdapterReply reply;
        reply.ok = true;
        reply.result = std::move(result);
        return reply;
    }
    static AdapterReply failure(std::string errorCode, std::string message) {
        AdapterReply reply;
        reply.errorCode = std::move(errorCode);
        reply.message = std::move(message);
        return reply;
    }
};

class Adapter {
public:
    virtual ~Adapter() = default;
    virtual AdapterReply perform(const AdapterRequest& request) = 0;
    // A call a resume answers from the trace instead of performing it. An adapter whose answers
    // depend on the calls before (fixtures: each entry is used once) moves past it as if it had
    // performed it; one with real effects does nothing (they happened in the earlier run).
    virtual void replayed(const AdapterRequest&) {}
    // Whether this adapter performs calls of `kind` to `name` (a capability, or the model a call is
    // granted under). A RoutingAdapter gives each call to the first adapter that serves it; an
    // adapter that performs whatever it is sent (fixtures, a process) serves everything.
    virtual bool serves(AdapterRequest::Kind kind, const std::string& name) const {
        (void)kind;
        (void)name;
        return true;
    }
    // Why this adapter does not serve `name` when that is worth telling the operator, or empty: an
    // MCP server that could not be started cannot say which tools it has. A RoutingAdapter that
    // finds no adapter for a call puts these reasons in its failure.
    virtual std::string whyNotServed(AdapterRequest::Kind kind, const std::string& name) const {
        (void)kind;
        (void)name;
        return {};
    }
    // "fixture", "process", "live", "mcp" or "model": the trace's `adapter` field.
    virtual const char* kind() const = 0;
};

}  // namespace remit
