// The VM's run interface (internal; embedders use include/remit/remit.hpp): a verified module,
// started with tagged arguments, steps until it completes, fails, or stops at a host call
// (CALLCAP / ASKMODEL). Whoever drives it — the broker's driveWith for `remitvm run`, replay and
// `test`, the serve session, the embedding API — decides the call (broker/broker.h) and resumes the
// run with a result or an error. This is the one seam between the VM and everything that acts in
// the world: the VM itself performs no effect and applies no policy. (session/pipeline.h turns
// source or .rbc bytes into a LoadedProgram.)
//
//     remit::Run run(program, {});
//     auto status = run.start(program->entry(), std::move(args));
//     while (status == remit::RunStatus::HostCall) {
//         const remit::HostCall& call = run.hostCall();      // site, resource, tagged args, pc tags
//         status = run.resumeWithResult(performTheCall(call));  // or resumeWithError(...)
//     }
//
// Threads: a Run is used by one thread at a time; `requestAbort` may be called from any thread.
// A LoadedProgram is immutable and may be shared by many runs on many threads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/diagnostics.h"
#include "runtime/heap.h"
#include "runtime/types.h"
#include "runtime/value.h"
#include "bytecode/module.h"

namespace remit {

// A verified module with its types resolved, ready to run.
class LoadedProgram {
public:
    explicit LoadedProgram(std::unique_ptr<Module> module);  // `module` must have passed verifyModule
    const Module& module() const { return *module_; }
    // The resolved type of module().types[index] (nullptr for kNoType).
    TypeRef type(uint32_t index) const { return index < types_.size() ? types_[index] : nullptr; }
    // The index of `main`, or kNoType.
    uint32_t entry() const { return module_->entry; }
    // The index of the function named `name`, or kNoType.
    uint32_t findFunction(std::string_view name) const;

private:
    std::unique_ptr<Module> module_;
    std::unique_ptr<TypeArena> arena_;
    std::vector<TypeRef> types_;
};

// The limits of one run (docs/compatibility.md "Limits"): every run has all of them.
struct VmLimits {
    uint64_t maxSteps = 100'000'000;  // instructions plus the work inside them (docs/language.md, decision 46)
    size_t maxMemory = kDefaultMemoryBudget;
    uint64_t maxWallMs = 10'000;       // time spent inside the VM; time the embedder spends on host calls is excluded
    size_t maxResultBytes = size_t(16) << 20;
};

enum class RunStatus : uint8_t { NotStarted, HostCall, Completed, Failed };

// The host call a run stopped at. The run keeps it until it is resumed.
struct HostCall {
    const Site* site = nullptr;   // id ("fn#k"), kind, resource, agent, argument names, retry, timeout, span
    const Agent* agent = nullptr; // for agent calls
    TypeRef askType = nullptr;    // for model and agent calls: the type the output must have
    std::vector<Value> args;      // one per site->argNames, with their tags and provenance
    TagSetId pcTags = kNoTags;    // the control tags in force at the call
    uint32_t attempt = 0;         // 0-based; retries stop here again with attempt + 1
};

// Why a run failed.
struct RunFailure {
    RuntimeError error;             // code, message, details
    Span span;                 // where, in the program's source
    std::string function;           // the function that was running
    bool expectationFailed = false; // a test's `expect` (error.message is its message)
};

class Run {
public:
    Run(std::shared_ptr<const LoadedProgram> program, VmLimits limits);
    ~Run();
    Run(const Run&) = delete;
    Run& operator=(const Run&) = delete;

    const LoadedProgram& program() const;
    // The run's heap: build arguments and host-call results with it; tags and provenance live here.
    Heap& heap();

    // Runs function `function` with `args` (one per parameter, built in heap()).
    RunStatus start(uint32_t function, std::vector<Value> args);
    // Resumes a run stopped at a host call with the call's result (built in heap()).
    RunStatus resumeWithResult(Value result);
    // Resumes with a failed attempt. An `operational` failure (R0501–R0503) is retried while the
    // site has attempts left (the run stops at the same call again, attempt + 1), then takes the
    // site's `else`; any other error fails the run at once.
    RunStatus resumeWithError(RuntimeError error, bool operational);

    RunStatus status() const;
    const HostCall& hostCall() const;   // status() == HostCall
    const Value& result() const;        // status() == Completed
    const RunFailure& failure() const;  // status() == Failed
    // Whether the call just failed for good will run its `else` (for the broker's `fallback` event).
    bool willFallBack(bool operational) const;

    // Stops the run with R0702 at its next check of the abort flag (every 16,384 steps and every batch
    // of work: docs/language.md, decision 46); safe from any thread.
    void requestAbort();

    uint64_t stepsUsed() const;
    std::chrono::nanoseconds vmTime() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace remit
