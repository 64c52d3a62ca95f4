// The semantic hashes of a program and a host interface, and the call-site ids used at run time.
//
// `program_hash` identifies what a program means, not how it is written (docs/language.md "The
// program hash"): SHA-256 over a canonical serialisation of every semantic field of the tree,
// without spans, node ids, comments, the file path or layout choices (a braced match arm).
// `remitc fmt` and comment edits therefore keep it; any change in meaning — a literal, a name, a
// loop limit, `let` vs `var` — changes it. This is on purpose unlike the prototype, whose hash
// covers the file path and header comments. `host_hash` does the same for host.rmti, so `resume`
// can refuse to continue a run against a host that changed its capabilities, costs or tags.
//
// Call-site ids are `<function>#<k>` (docs/language.md "Call-site ids"): k is 0-based per function,
// in the prototype's walk order, so traces, approvals and idempotency keys name the same call the
// prototype would. The checker decides which calls count (capabilities, model and agent `.ask`).
//
// The compiler writes both hashes into the manifest, and host_hash into the .rbc, which `resume`
// compares with the trace's. Runs, traces and approval digests are bound to the compiled module's
// own hash instead (bytecode/rbc.h programHashOf; docs/bytecode.md "The program hash"). The canonical
// text is versioned: any change to it changes every hash, so bump the version tag when it changes.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/ast.h"

namespace remit {

// The canonical text hashed for a program (starts "remit-hash-v1\n"). Deterministic; exposed so
// tests and `--debug` output can show exactly what was hashed.
std::string canonicalProgram(const ast::Program& program);
// The canonical text hashed for a host interface (starts "remit-host-hash-v1\n").
std::string canonicalHost(const ast::HostInterface& host);

// Bare lowercase hex SHA-256 of canonicalProgram / canonicalHost.
std::string programHash(const ast::Program& program);
std::string hostHash(const ast::HostInterface& host);

// One effectful call in a function body, with its run-time id.
struct CallSite {
    std::string id;  // "fn#k"
    const ast::CallExpr* call = nullptr;
    std::string function;
};

// Numbers the effectful calls of every `fn` in declaration order. The walk is pre-order in the
// prototype's AST field order (docs/language.md "Call-site ids"): a call before the calls in its
// arguments, arguments before the `else` fallback; `if` as cond, then, else; `for` as iter, body,
// then filter; `match` as subject, then arms. Test blocks are never numbered and agents have no
// bodies. Ids are unique when function names are, which the checker enforces.
std::vector<CallSite> numberCallSites(const ast::Program& program,
                                      const std::function<bool(const ast::CallExpr&)>& isEffectful);

// The same sites keyed by call node, for the code generator and the manifest.
std::unordered_map<const ast::CallExpr*, std::string> siteIdsByCall(const std::vector<CallSite>& sites);

}  // namespace remit
