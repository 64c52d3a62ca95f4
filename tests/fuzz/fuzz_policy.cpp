// libFuzzer harness for policy.toml (runtime/policy.h): the file an operator writes, or copies from
// a stranger, that decides what a program may do. parsePolicy reads it with toml++ and then checks
// every table, key and value; checkPolicyAgainstHost compares its grants with a fixed host's
// resources. Every diagnostic is rendered with its source excerpt. The harness traps when one of
// the parser's promises breaks:
//   - a parse gives exactly one of a policy and at least one error, and every diagnostic it reports
//     is an E0504 naming the file;
//   - a policy holds only what its checks allow: max_usd finite and non-negative, [limits] positive,
//     max_calls non-negative, arg_max finite, its sha256 that of the text;
//   - the host check reports only E0505, one per grant of a resource the host does not declare.
// Sanitizers catch the rest (toml++ on hostile text, deep nesting, huge numbers).
//
// Build and run: `scripts/fuzz policy SECONDS`. Replay: build/fuzz/tests/fuzz/fuzz_policy_replay FILE...
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/diagnostics.h"
#include "runtime/hash.h"
#include "runtime/policy.h"
#include "runtime/source.h"

namespace {

using namespace remit;

[[noreturn]] void broken(const char* what, std::string_view input) {
    std::fprintf(stderr, "\n*** fuzz_policy: %s\n--- input (%zu bytes)\n%.*s\n---\n", what, input.size(),
                 static_cast<int>(input.size()), input.data());
    __builtin_trap();
}

// The resources of the host the policy is checked against (those of tests/fuzz/fuzz_checker.cpp's
// host, and the examples' names, so seeds from the repository mostly pass).
const std::vector<std::string> kHostResources = {"web.search", "web.fetch", "files.read", "crm.find",    "email.send",
                                                 "pay.refund", "llm",       "inbox.list", "calendar.add"};

void renderAll(const DiagnosticList& diags, const SourceFile& source) {
    size_t total = 0;
    for (const Diagnostic& d : diags.items()) total += renderText(d, &source).size();
    volatile size_t sink = total;  // keep the renders observable
    (void)sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    SourceFile source("policy.toml", text);
    DiagnosticList diags;
    std::optional<Policy> policy = parsePolicy("policy.toml", text, diags);
    renderAll(diags, source);
    if (policy.has_value() == diags.hasErrors()) broken("not exactly one of a policy and an error", text);
    for (const Diagnostic& d : diags.items())
        if (d.code != DiagCode::E0504 || d.file != "policy.toml") broken("a parse diagnostic other than E0504", text);
    if (!policy) return 0;

    if (policy->sha256 != sha256Hex(text)) broken("the policy hash is not the text's", text);
    if (policy->maxUsd && (!std::isfinite(*policy->maxUsd) || *policy->maxUsd < 0)) broken("a bad max_usd", text);
    for (const std::optional<int64_t>* limit :
         {&policy->limits.maxSteps, &policy->limits.maxMemory, &policy->limits.maxWallMs})
        if (*limit && **limit <= 0) broken("a limit that is not positive", text);
    for (const auto& [name, grant] : policy->grants) {
        if (grant.resource != name) broken("a grant filed under another name", text);
        if (grant.maxCalls && *grant.maxCalls < 0) broken("a negative max_calls", text);
        for (const auto& [param, max] : grant.argMax)
            if (!std::isfinite(max)) broken("an arg_max that is not finite", text);
    }

    DiagnosticList hostDiags;
    checkPolicyAgainstHost(*policy, kHostResources, hostDiags);
    renderAll(hostDiags, source);
    size_t undeclared = 0;
    for (const auto& [name, grant] : policy->grants)
        if (std::find(kHostResources.begin(), kHostResources.end(), name) == kHostResources.end()) ++undeclared;
    // A DiagnosticList keeps at most 1,000 errors.
    if (hostDiags.items().size() != std::min<size_t>(undeclared, 1000))
        broken("not one E0505 per undeclared grant", text);
    for (const Diagnostic& d : hostDiags.items())
        if (d.code != DiagCode::E0505) broken("a host-check diagnostic other than E0505", text);
    return 0;
}
