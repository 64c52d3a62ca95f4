// The `test` blocks of a program (docs/testing.md), with the prototype's semantics: each test is
// the compiled function module().tests names (compiler/codegen.cpp), run in a fresh Run with
// default limits and driven by a fresh Broker under an allow-all policy, with the program's
// `budget`, no trace, the test's fixtures file (relative to the program's directory) or none, and
// approvals granted only when the fixtures say `"approve_all": true` (otherwise R0302).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "bytecode/module.h"
#include "compiler/ast.h"
#include "runtime/host_model.h"
#include "vm/run.h"

namespace remit {

// The number of `test` blocks the parser found (a file that did not parse may have lost some).
size_t countTests(const ast::Program* program);

// Runs one test block of `program` (checked from `file` against `host`). Returns why it failed —
// the text after `  FAIL  NAME: ` — or nothing when it passed.
std::optional<std::string> runTestBlock(const std::shared_ptr<const LoadedProgram>& program, const TestCase& test,
                                        const std::string& file, const HostModel& host);

}  // namespace remit
