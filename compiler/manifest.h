// The manifest: what a checked program may do, computed before it runs (spec §1, §9;
// docs/manifest.md). The checker fills it; `remitc check` prints its summary, `remitc manifest`
// prints its JSON, `.rbc` files embed it, `remitc diff` compares two of them, and the policy check
// (E0501–E0503) reads it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/diagnostics.h"
#include "runtime/json_text.h"

namespace remit {

struct Policy;

struct ResourceUse {
    std::string name;              // "web.fetch" or a model name
    bool isModel = false;
    uint64_t maxCalls = 0;         // worst case over every path (0 for an unused `uses` entry)
    double costPerCall = 0;
    double worstCaseCost = 0;      // maxCalls × costPerCall
    // Capabilities only:
    bool idempotent = false;
    bool approvalAlways = false;
    std::vector<std::string> outputTags;  // sorted
    std::vector<std::string> clears;      // sorted

    bool operator==(const ResourceUse&) const = default;
};

struct AgentUse {
    std::string name;
    std::string model;
    std::optional<int64_t> maxCallsDeclared;
    uint64_t maxCallsWorstCase = 0;

    bool operator==(const AgentUse&) const = default;
};

enum class Approval : uint8_t { None, Possible, Always };

struct CallSiteInfo {
    std::string site;       // "fn#k", the id used at run time
    uint32_t line = 0, col = 0;
    std::string resource;   // capability or model name (agent calls count under their model)
    std::optional<std::string> agent;
    std::optional<std::string> outputType;  // model calls: the requested type as written (`remitc schema`)
    Approval approval = Approval::None;
    std::vector<std::string> reasons;  // in the order found
    int64_t retry = 0;
    std::optional<double> timeoutSeconds;
    bool fallback = false;
    // Worst-case calls made from this site over every path: times reached × (retry + 1). 0 in a
    // manifest written before it was recorded.
    uint64_t maxCalls = 0;

    bool operator==(const CallSiteInfo&) const = default;
};

struct FlowSite {
    std::string site;
    std::string via;  // "data" or "control"

    bool operator==(const FlowSite&) const = default;
};

struct Flow {
    std::string sink;                // "email.send.body"
    std::vector<std::string> tags;   // sorted
    std::string verdict;             // "allowed", "denied" or "requires approval"
    std::vector<FlowSite> sites;     // sorted by site, then via

    bool operator==(const Flow&) const = default;
};

struct Manifest {
    std::string program;
    std::string programHash;
    std::string hostHash;
    std::vector<std::string> uses;            // as written
    std::vector<ResourceUse> resources;       // sorted by name
    std::vector<AgentUse> agents;             // in declaration order
    double worstCaseCostUsd = 0;              // rounded to 6 decimals
    std::optional<double> budgetUsd;
    std::vector<CallSiteInfo> callSites;      // sorted by (line, col)
    std::vector<Flow> flows;                  // sorted by sink; only sinks some tag reaches
    std::vector<std::pair<std::string, std::vector<std::string>>> inputs;  // main's parameters and their tags
    bool strictFlows = false;  // checked (and compiled) in strict-flows mode

    const ResourceUse* resource(std::string_view name) const;
    bool operator==(const Manifest&) const = default;
};

const char* approvalText(Approval approval);  // "none", "possible", "always"

// The JSON of docs/manifest.md (the prototype's shape plus program_hash, host_hash, fn#k site
// ids and flow sites), with keys in a fixed order.
Json manifestToJson(const Manifest& manifest);
// Reads what manifestToJson wrote (for .rbc files and `remitc diff`); nullopt on a malformed document.
// Never throws on bad input: .rbc files are untrusted. Extra keys are ignored; approval_sites is
// derived from call_sites, so it is only checked to be a list.
std::optional<Manifest> manifestFromJson(const nlohmann::json& json);
// The same for a document parsed as ordered_json. Prefer it: nlohmann::json sorts object keys, which
// loses the declaration order of `agents` and `inputs`; this overload keeps it, so a round trip
// through manifestToJson is exact.
std::optional<Manifest> manifestFromJson(const Json& json);

// The readable summary `remitc check` prints on success (docs/manifest.md "The summary"), one line
// per item, ending with a newline.
std::string manifestSummary(const Manifest& manifest);

// E0501 (a resource the policy does not grant, including unused `uses` entries), E0502 (more calls
// than the grant's max_calls), E0503 (worst case over max_usd). Positions: the program header, but
// for E0502 the call site that makes the most calls, with a note per site breaking its count down
// (`30 = 10 iterations × (retry 2 + 1)`).
void checkManifestAgainstPolicy(const Manifest& manifest, const Policy& policy, const std::string& programFile,
                                const Span& programSpan, DiagnosticList& diags);

// Did the edit from `before` to `after` widen authority? One line per change.
// `changes` lists widenings and narrowings in a fixed order (resources, uses, cost, budget, flows,
// approval sites); `widening[i]` says whether changes[i] widens, so a front end can mark the lines.
// `widened` is true when any change widens (docs/manifest.md).
struct AuthorityDiff {
    bool widened = false;
    std::vector<std::string> changes;
    std::vector<bool> widening;  // parallel to `changes`
};
AuthorityDiff diffManifests(const Manifest& before, const Manifest& after);
// `diff --json` and the MCP tool's answer: {"widened", "changes": the widenings only (the
// prototype's contract), "narrowed": the narrowings}, each list in the order of `changes`.
Json authorityDiffJson(const AuthorityDiff& diff);

}  // namespace remit
