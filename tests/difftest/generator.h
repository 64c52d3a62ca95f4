// A seeded generator of well-typed Remit programs for the differential test, with the host
// interface, policy, inputs and world seed to run them with (harness.h's Case).
//
// It is type-directed: every expression is generated for a wanted type and comes back with the
// static type the checker will compute for it (list bounds included), so what it writes checks —
// except for what needs the checker's whole-program analyses (a denied flow E0301, the budget and
// agent bounds E0403/E0404, the policy's limits E0502/E0503), which the harness counts. Any other
// rejection is a disagreement between this generator's typing and the checker's, and a finding.
//
// Coverage: every construct and builtin; records (width subtyping included), nested lists, string
// enums; literals at their edges (Ints near overflow, floats, Unicode strings); nested loops with
// `limit`, filters and `break`; early returns; `var`s assigned under a pc; `and`/`or`/`not`;
// match on enums and strings; calls between functions (declared in any order, acyclic); agents;
// capability and model calls with tagged inputs, `retry`, `timeout` and `else`; hosts with `tags`,
// `clears`, `deny`, `approve`, `approval always`, `idempotent` and costs; policies with grants,
// call limits, argument constraints, approvals and budgets.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "tests/difftest/harness.h"

namespace remit::difftest {

struct GeneratorOptions {
    bool strict = false;
    // Features switched off by name (see generator.cpp `kSwitches`), e.g. to keep a ctest seed
    // range clear of a divergence that is open.
    std::set<std::string> disabled;
};

Case generateCase(uint64_t seed, const GeneratorOptions& options);

// The names generateCase accepts in `disabled`.
const std::set<std::string>& generatorSwitches();

}  // namespace remit::difftest
