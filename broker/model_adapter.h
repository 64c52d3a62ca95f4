// The built-in model adapters (docs/models.md): a model the host operator configured in
// policy.toml (`[models."NAME"]`, runtime/policy.h ModelConfig) or with `--model`, called over
// HTTP (broker/http_client.h) in one of two wire formats:
// - "openai": Chat Completions (POST {base_url}/chat/completions) — OpenAI, and the servers that
//   speak it (vLLM, llama.cpp's server, Ollama, gateways); the requested type goes out as
//   `response_format: {type: json_schema, json_schema: {strict: true, …}}`;
// - "anthropic": Messages (POST {base_url}/messages); the requested type goes out as the input
//   schema of one tool the model is made to call (`tool_choice`).
// Both want an object at the root, so another type is wrapped as {"value": T} and unwrapped from
// the answer. An agent's `system` prompt goes in the provider's system slot; the user turn is the
// rendered prompt (the prompt, then the context fenced as data). A retry after R0502 is a repair
// turn: the previous answer and why it did not fit go back to the model (AdapterRequest::previous).
//
// One call is one adapter attempt with one deadline (AdapterRequest::timeoutMs); inside it, 429s
// and 5xx answers and broken connections are retried with backoff (honouring Retry-After) while
// the deadline allows. Other failures become CapabilityFailed (R0501) or Timeout (R0503) with the
// provider's message sanitised; an answer that cannot be read as the requested JSON is
// ModelOutputInvalid (R0502). The cost is the reported token usage at the configured prices; the
// broker charges the declared cost when there is no usage or no price.
//
// The API key is read from the environment variable the config names, at each call, and goes only
// into the request's header: never into a reply, a message or `meta`.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "broker/adapter.h"
#include "runtime/json_text.h"
#include "runtime/policy.h"

namespace remit {

// What one HTTP exchange with a provider should carry, and how its answer reads. Pure, so unit
// tests and the fuzz harness can take them alone.
struct ModelWireRequest {
    std::string url;
    Json body;
    bool wrapped = false;  // the requested type was wrapped as {"value": T}
};
ModelWireRequest modelWireRequest(const ModelConfig& config, const AdapterRequest& request);

struct ModelWireAnswer {
    AdapterReply reply;  // ok with the (unwrapped) answer, or ModelOutputInvalid / CapabilityFailed
    std::optional<int64_t> inputTokens, outputTokens;
};
// Reads a 200 response's body. `apiKey` is kept out of every message.
ModelWireAnswer readModelAnswer(const ModelConfig& config, std::string_view body, bool wrapped,
                                std::string_view apiKey = {});

// The cost of a call from its token usage, or nothing when the usage or both prices are missing.
std::optional<double> modelCost(const ModelConfig& config, std::optional<int64_t> inputTokens,
                                std::optional<int64_t> outputTokens);

// A provider's error body ({"error": {"message": …}}, either provider's shape) as one short,
// printable line without the key; the start of the body when it has no message.
std::string providerMessage(std::string_view body, std::string_view apiKey);

struct ModelAdapterOptions {
    // Backoff between retries of 429, 5xx and broken connections when the server gives no
    // Retry-After: first, doubling up to most, each with up to 25 % taken off at random.
    uint64_t firstBackoffMs = 500;
    uint64_t mostBackoffMs = 8'000;
    int maxHttpAttempts = 6;
};

// The adapter of one configured model: serves(Ask, config.name) and nothing else; kind() "model".
// Null with `error` when the config cannot be used: its key's environment variable is unset or
// empty (a config with api_key_env = "" sends no key).
std::unique_ptr<Adapter> makeModelAdapter(const ModelConfig& config, std::string& error,
                                          const ModelAdapterOptions& options = {});

}  // namespace remit
