// The policy model: what a host operator's policy.toml grants a program (docs/policy.md). The CLI
// loads the file with parsePolicy; the checker compares a program's manifest with it (E0501-E0503)
// and the host interface (E0505); the broker enforces grants, argument constraints, call limits and
// the budget at run time, and the VM takes its run limits from [limits]. Unlike the prototype,
// which silently ignores what it does not know, every unknown key and wrong type is an E0504 with
// its file, line and column: a typo such as `max_call = 1` must not quietly lift a limit.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/diagnostics.h"
#include "runtime/source.h"

namespace remit {

// One [grant."resource"] table. A resource is a capability (`inbox.list`) or a model (`llm`);
// agent calls count against their model's grant.
struct Grant {
    std::string resource;
    Span span;  // the [grant."res"] table header (the key, for a grant written as an inline table)
    std::optional<int64_t> maxCalls;                                 // none: no limit
    std::map<std::string, std::vector<std::string>> argPrefix;       // param -> allowed string prefixes
    std::map<std::string, std::vector<nlohmann::json>> argOneOf;    // param -> allowed values (exact equality)
    std::map<std::string, double> argMax;                            // param -> largest allowed number (extension)
    std::map<std::string, std::vector<std::string>> approve;         // param -> tags that need approval (extension)
    bool approvalAlways = false;                                     // approval = "always"
};

// [limits]: run-time limits (R0701). Unset means the VM's default (docs/policy.md "[limits]");
// command-line flags override both.
struct RunLimits {
    std::optional<int64_t> maxSteps;
    std::optional<int64_t> maxMemory;  // bytes of live memory
    std::optional<int64_t> maxWallMs;  // milliseconds of VM time, adapter time excluded
};

// [mcp] (extension): how MCP servers serve capabilities (docs/adapters.md "MCP servers as
// capabilities").
struct McpSettings {
    // [mcp.tools]: capability → the tool that performs it, instead of the tool named like it.
    std::map<std::string, std::string, std::less<>> tools;
    std::map<std::string, Span> toolSpans;  // where each capability is written (E0505)
    // How long a server may take to start, answer initialize and list its tools (default 30 s).
    std::optional<int64_t> startupTimeoutMs;
};

// One [models."NAME"] table (extension): how the host performs the model calls granted under
// NAME — which provider's API, which model, at what price (docs/models.md). Written by the host
// operator, never by the program. The API key is never here, only the name of the environment
// variable that holds it. parsePolicy fills in every default, so a config is complete.
struct ModelConfig {
    std::string name;  // the model resource the host declares (`llm`)
    Span span;         // the table header
    std::string provider;  // "openai" (Chat Completions and compatible servers) | "anthropic" (Messages)
    std::string model;     // the provider's model id
    std::string baseUrl;   // default https://api.openai.com/v1 | https://api.anthropic.com/v1
    std::string apiKeyEnv;  // default OPENAI_API_KEY | ANTHROPIC_API_KEY; "" sends no key (a local server)
    int64_t maxTokens = 4096;
    std::optional<double> temperature;
    // Dollars per million tokens. With neither, a call is charged its declared cost.
    std::optional<double> inputUsdPerMtok, outputUsdPerMtok;
    // The deadline of a call without a `timeout` of its own (retries of 429 and 5xx included).
    int64_t timeoutMs = 120'000;

    static constexpr std::string_view kProviders[] = {"openai", "anthropic"};
    // The provider's defaults, for a config given by flags rather than a table.
    static std::string defaultBaseUrl(std::string_view provider);
    static std::string defaultApiKeyEnv(std::string_view provider);
};

struct Policy {
    std::string file;                     // the path as given (reported in diagnostics and check --json)
    std::optional<double> maxUsd;         // [budget] max_usd; none: only the program's budget applies
    std::map<std::string, Grant> grants;  // by resource name
    RunLimits limits;
    // [flows] strict = true: check and run in strict-flows mode (docs/language.md "Strict flows").
    bool strictFlows = false;
    // [artifacts] trust: .rbc files run under this policy must be signed by a key in this
    // directory (resolved against the policy file's directory; docs/policy.md "[artifacts]").
    std::optional<std::string> trustDir;
    McpSettings mcp;
    // [models."NAME"]: the models the host performs itself, by model resource name.
    std::map<std::string, ModelConfig> models;
    bool allowAll = false;  // --allow-all: every resource granted, no limits, no max_usd
    std::string sha256;     // policy_hash: hex SHA-256 of the file's bytes; empty for allow-all

    // The grant for `resource`, or null when the policy does not grant it. Under allow-all every
    // resource gets one shared unlimited grant (its `resource` is empty).
    const Grant* grantFor(std::string_view resource) const;
    static Policy allowAllPolicy();
};

// A model configured by `--model NAME=PROVIDER:MODEL[@BASE_URL]` (docs/models.md): the provider's
// defaults for everything else, no prices; with a BASE_URL, the provider's key variable is used
// only when it is set. Nothing, with `error`, when the text is not of that form.
std::optional<ModelConfig> modelConfigFromFlag(std::string_view text, std::string& error);

// Parses and validates policy text read from `file`. Every problem is an E0504 with a position:
// TOML syntax errors, unknown tables and keys (at the key, with a hint listing the valid keys and
// a close match), and values of the wrong type or range (at the value). With `hostResources` (and
// `hostModels`), also the E0505s checkPolicyAgainstHost reports, for the grants and [models] tables
// that parsed, so one pass shows every problem. Returns nullopt when any error was reported;
// problems are reported all at once, in file order.
std::optional<Policy> parsePolicy(const std::string& file, std::string_view text, DiagnosticList& diags,
                                  const std::vector<std::string>* hostResources = nullptr,
                                  const std::vector<std::string>* hostModels = nullptr);

// E0505 for each grant of a resource (capability or model name) that the host does not declare,
// at the grant's table header, and for each [mcp.tools] entry mapping an undeclared capability, with
// a hint naming a close declared resource; with `hostModels`, also for each [models."NAME"] table
// whose NAME is not a model the host declares. Nothing for allow-all.
void checkPolicyAgainstHost(const Policy& policy, const std::vector<std::string>& hostResources,
                            DiagnosticList& diags, const std::vector<std::string>* hostModels = nullptr);

}  // namespace remit
