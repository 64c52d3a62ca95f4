// The reference evaluator of the differential test: a small tree-walking interpreter over the
// checked syntax tree, written from docs/language.md (and the spec) rather than from the VM, and
// meant to be obviously right rather than fast.
//
// - Values are plain trees (RVal) whose every node carries a std::set of tags and a std::set of
//   provenance seqs; containers hold their elements by value. Nothing is shared, nothing interned.
// - Labels follow the table of "Labels, exactly" construct by construct; the pc is a set of tag
//   names passed down the walk; strict flows ("Strict flows") add a per-call set of guard tags.
// - Runtime errors carry the span of the innermost failing expression.
// - At every host call attempt the Oracle decides as the broker would, the World answers, and
//   the evaluator records the events the broker's trace must show (outcome.h).
//
// What it reuses, and only that: the parsed tree and the checker's per-node static types
// (CheckResult: the type of an `.ask`, of an annotation, of main's parameters, whether an if or
// match is Unit-typed), the host and policy as parsed by runtime/, and pure helpers tested against
// Python elsewhere (float repr, json.dumps, Unicode case/space tables, int()/float() parsing,
// decimal rounding). It never calls vm/, runtime/ops.cpp or the builtins themselves.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/ast.h"
#include "compiler/checker.h"
#include "runtime/host_model.h"
#include "runtime/policy.h"
#include "tests/difftest/outcome.h"

namespace remit::difftest {

struct RVal {
    enum class Kind { Unit, Bool, Int, Float, Str, List, Record };
    Kind kind = Kind::Unit;
    bool b = false;
    int64_t i = 0;
    double f = 0;
    std::string s;
    std::vector<RVal> items;                          // List
    std::vector<std::pair<std::string, RVal>> fields;  // Record, in order
    std::set<std::string> tags;
    std::set<uint64_t> prov;
};

struct ReferenceOptions {
    bool strict = false;
    uint64_t worldSeed = 0;
    // Evaluation steps (one per expression and statement evaluated) before the run counts as
    // having hit a limit; the VM has its own limits, and such runs are not compared.
    uint64_t fuel = 2'000'000;
};

// Runs `main` of a program that checked (`check` is its CheckResult) with `inputs` (a JSON object
// of main's parameters), against `host` (what the broker enforces: it may differ from the host the
// program was checked against, e.g. without its deny lists) and `policy`.
Outcome runReference(const ast::Program& program, const CheckResult& check, const HostModel& host,
                     const Policy& policy, const nlohmann::json& inputs, const ReferenceOptions& options);

}  // namespace remit::difftest
