// Running a verified module the way a hostile host cannot exploit and a deny-all broker would:
// every entry point (main and each test's function) runs under small limits with arguments that
// fit its parameter types, and every host call is refused — first as a non-operational denial
// (what the broker's R0303 is), then as an operational failure (which takes retries and `else`
// fallbacks). Shared by the rbc fuzz harness (tests/fuzz/fuzz_rbc.cpp) and the unit test that
// replays its regressions (tests/unit/test_rbc.cpp), so both run exactly the same thing.
//
// The VM's promise under test: a module the verifier accepts never makes it read or write out of
// bounds, loop without spending steps, or hold memory past its limit, whatever the module says.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vm/run.h"
#include "runtime/heap.h"
#include "runtime/types.h"
#include "runtime/value.h"

namespace remit::fuzz {

// Small, so that each input runs in microseconds: any loop is cut by the step limit.
inline VmLimits smallLimits() {
    VmLimits limits;
    limits.maxSteps = 20'000;
    limits.maxMemory = size_t(1) << 20;
    limits.maxWallMs = 5'000;  // steps stop runs long before; a slow sanitizer build must not flake
    limits.maxResultBytes = size_t(64) << 10;
    return limits;
}

// A value of `type` (or Unit for none): the first enum option, an empty list, a record of such.
// Recursion follows the type, whose depth the verifier bounds (kMaxTypeDepth).
inline std::optional<Value> exampleValue(Heap& heap, TypeRef type) {
    if (!type) return Value();
    switch (type->kind) {
        case TypeKind::Never:
        case TypeKind::Unit: return Value();
        case TypeKind::Bool: return Value::boolean(true);
        case TypeKind::Int: return Value::integer(7);
        case TypeKind::Float: return Value::floating(0.5);
        case TypeKind::Str: return heap.makeStr("fuzz");
        case TypeKind::Enum: return heap.makeStr(type->options.empty() ? std::string() : type->options[0]);
        case TypeKind::List: return heap.newList();
        case TypeKind::Record: {
            std::vector<std::string> names;
            std::vector<Value> values;
            for (const auto& field : type->fields) {
                std::optional<Value> v = exampleValue(heap, field.type);
                if (!v) return std::nullopt;
                names.push_back(field.name);
                values.push_back(std::move(*v));
            }
            return heap.makeRecord(heap.recordShape(std::span<const std::string>(names)), values);
        }
    }
    return Value();
}

// How host calls are refused.
enum class Refusal { Denied, Failing };

// Runs function `fn` to its end; returns its status.
inline RunStatus runOne(const std::shared_ptr<const LoadedProgram>& program, uint32_t fn, Refusal refusal) {
    const Module& module = program->module();
    Run run(program, smallLimits());
    std::vector<Value> args;
    const Function& f = module.functions[fn];
    for (uint32_t type : f.paramTypes) {
        std::optional<Value> v = exampleValue(run.heap(), program->type(type));
        if (!v) return RunStatus::Failed;  // the arguments did not fit the memory limit
        args.push_back(std::move(*v));
    }
    RunStatus status = run.start(fn, std::move(args));
    // A site may ask for 2^32 retries: cap the answers (each one is a stop at the same call).
    for (int answers = 0; status == RunStatus::HostCall && answers < 1000; ++answers) {
        const HostCall& call = run.hostCall();
        (void)call.site->id;  // the call's fields must be valid to read
        (void)call.args.size();
        if (refusal == Refusal::Denied)
            status = run.resumeWithError(RuntimeError{DiagCode::R0303, "denied by the fuzz harness", {}}, false);
        else
            status = run.resumeWithError(RuntimeError{DiagCode::R0501, "failing in the fuzz harness", {}}, true);
    }
    if (status == RunStatus::Completed) (void)run.result().kind();
    if (status == RunStatus::Failed) (void)run.failure().error.message.size();
    return status;
}

// Runs main and every test function, both ways of refusing; returns how many runs were made.
inline size_t runEveryEntry(const std::shared_ptr<const LoadedProgram>& program) {
    const Module& module = program->module();
    std::vector<uint32_t> entries;
    if (module.entry != kNoType) entries.push_back(module.entry);
    for (const TestCase& t : module.tests) entries.push_back(t.function);
    size_t runs = 0;
    for (uint32_t fn : entries) {
        for (Refusal refusal : {Refusal::Denied, Refusal::Failing}) {
            runOne(program, fn, refusal);
            ++runs;
        }
    }
    return runs;
}

}  // namespace remit::fuzz
