// The checker: the whole static semantics of a program against its host interface (spec §5–§9).
// One walk per function and calling context computes, for every expression, its type, its tags
// (with their origins, for messages) and its worst-case resource use; the results are the
// diagnostics (E01xx–E04xx, W0101, W02xx) and the manifest.
//
// Functions are analysed in context (argument tags and pc) and the summary of each (function,
// context) is memoised, so programs with many functions calling each other stay linear.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/ast.h"
#include "compiler/manifest.h"
#include "runtime/diagnostics.h"
#include "runtime/policy.h"
#include "runtime/host_model.h"
#include "runtime/types.h"

namespace remit {

// What a call expression turned out to call.
enum class CallTarget : uint8_t { Unknown, Function, Builtin, Capability, Model, Agent };

struct ResolvedCall {
    CallTarget target = CallTarget::Unknown;
    std::string name;     // function, builtin, capability, model or agent name
    std::string model;    // Model/Agent: the model the call is counted and granted under
    std::string site;     // "fn#k" for capability and model calls; empty otherwise
    TypeRef askType = nullptr;  // Model/Agent: the requested output type
};

// Resource (a capability or model name, or "agent:NAME" for the calls an agent makes) -> the
// worst-case number of calls. Counts saturate at 2^53 instead of wrapping. "site:fn#k" counts the
// attempts of one call site too.
using CallCounts = std::map<std::string, uint64_t>;

// The worst-case cost in USD of `calls` under `host`'s prices, rounded to 6 decimals as the
// manifest's worst_case_cost_usd is (agent and site entries are counted under their resource already).
double worstCaseCostOf(const HostModel& host, const CallCounts& calls);

// What the walk learned about one expression, for tools (the language server's hover): recorded
// only when CheckerOptions::recordFacts is set. A function is analysed once per calling context,
// so the tags are the union over every context its expressions were analysed in, and the calls
// the most any one context makes.
struct ExprFacts {
    std::map<std::string, std::set<std::string>> tags;  // tag -> where it comes from ("input 'topic'")
    CallCounts calls;  // evaluating the expression once makes at most this many calls
};

// The same for each program function: one call of it makes at most `calls`.
struct FunctionFacts {
    CallCounts calls;
    double worstCaseCostUsd = 0;
};

struct CheckFacts {
    std::unordered_map<uint32_t, ExprFacts> exprs;         // by ast::NodeId of each expression walked
    std::map<std::string, FunctionFacts> functions;       // by function name
    std::unordered_map<uint32_t, Span> definitions;       // ast::NodeId of a variable's use -> its declaration's name
};

struct CheckResult {
    HostModel host;                 // owns the TypeArena every TypeRef here points into
    std::map<std::string, TypeRef> programTypes;  // the program's own `type` declarations
    Manifest manifest;
    std::vector<TypeRef> exprTypes;  // by ast::NodeId of expressions and written types; null elsewhere
    std::unordered_map<uint32_t, ResolvedCall> calls;     // by ast::NodeId of each call
    // What the flow analysis proved about tags, for the code generator (which leaves out the pc
    // instructions that could not change anything). Over every context an expression or function
    // was analysed in — main's, the tests', every caller's — so it holds for every run:
    // exprTagged[id] is kNotAnalysed, kNeverTagged (no tag can reach the value, top-level or deep)
    // or kMaybeTagged; and a function in pcFreeFns is only ever called with an empty pc.
    enum TagProof : uint8_t { kNotAnalysed = 0, kNeverTagged = 1, kMaybeTagged = 2 };
    std::vector<uint8_t> exprTagged;                 // by ast::NodeId of expressions
    std::set<std::string, std::less<>> pcFreeFns;
    CheckFacts facts;               // empty unless CheckerOptions::recordFacts
    bool ok = false;                // no errors
    bool interrupted = false;       // CheckerOptions::interrupted stopped the walk (an E0003 says so)
};

struct CheckerOptions {
    std::string programFile;  // names used in diagnostics
    std::string hostFile;
    // Longest chain of program functions calling each other (main -> f -> g ...). Analysis runs
    // callees in their calling context, so this bounds its depth; deeper is E0003.
    size_t maxCallDepth = 256;
    // Cooperative stop (a deadline or an abort, e.g. `remitvm serve`'s wall_ms): polled every few
    // hundred expressions and between phases. Once it returns true the walk winds down without
    // reporting more, an E0003 says checking was stopped, and CheckResult::interrupted is set.
    std::function<bool()> interrupted = {};
    // Strict flows (docs/language.md "Strict flows"): the pc reaches `deny` parameters, the right
    // side of and/or runs under the left side's tags, guarded exits (return, break) put the rest
    // of the function under their guards, and a for's list carries its filters and breaks. The
    // manifest records the mode, and the code generator instruments the bytecode to match.
    bool strictFlows = false;
    // The deployment policy the program is checked against, if any: its grants' `approval =
    // "always"` and `approve` tags make call sites need approval in the manifest, as they do at run
    // time. Must outlive checkProgram.
    const Policy* policy = nullptr;
    // Record CheckResult::facts (the language server asks; the command line does not pay for it).
    bool recordFacts = false;
};

// Resolves the host interface (E0105, E0112 in the host file) into `host`.
void resolveHost(const ast::HostInterface& ast, const std::string& file, HostModel& host, DiagnosticList& diags);

// Checks `program` against an already resolved host. Diagnostics are appended to `diags`.
CheckResult checkProgram(const ast::Program& program, HostModel host, DiagnosticList& diags,
                         const CheckerOptions& options);

}  // namespace remit
