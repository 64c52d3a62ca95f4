// The broker's cost per host call (docs/performance.md "Broker overhead per CALLCAP"): a program
// makes 1,000 capability calls in a loop, and each one goes through the real broker
// (broker/broker.h decide, complete, settle) with the fixture adapter answering, as `remitvm run
// --fixtures` drives it. The counter `per_call` is the time of one call: the VM stopping and
// resuming, the broker's rules, the idempotency key and digests, the adapter, decoding the result,
// and (with a trace) the `dispatch` and `call` events, canonical JSON with their hash chain.
//
//   BM_CallCap/trace:0             no trace: the broker and the adapter alone
//   BM_CallCap/trace:1             the trace of `remitvm run --fixtures`: written without fsync,
//                                  since fixture calls have no effect (docs/broker.md "Durability")
//   BM_CallCap/trace:2             the trace as a run with live adapters keeps it: the `dispatch`
//                                  record fsynced before the call, the `call` record after it
//                                  (the fixture adapter still answers, so the figure is the
//                                  broker's and the kernel's, not a service's)
//   BM_CallCapLoopOnly             the same loop with a pure function instead of the call: what
//                                  the VM spends per iteration without the broker
//
// The trace goes to REMIT_BENCH_TRACE_DIR, else /dev/shm (memory, so the fsyncs of trace:2 cost
// next to nothing and the number is the broker's own CPU), else the temporary directory. On a disk
// each call of trace:2 also waits for two fsyncs, which is the storage's cost, not the broker's.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "broker/broker.h"
#include "broker/fixture_adapter.h"
#include "broker/trace.h"
#include "compiler/checker.h"
#include "compiler/parser.h"
#include "runtime/policy.h"
#include "session/pipeline.h"
#include "vm/run.h"

namespace {

using namespace remit;

constexpr const char* kHost = "capability kv.get(key: Str) -> Str\n  idempotent\n";
constexpr int kCalls = 1000;

std::shared_ptr<const LoadedProgram> compile(const std::string& source) {
    CompileOutcome out = compileProgram(source, "bench.rmt", kHost, "host.rmti");
    if (!out.program) throw std::runtime_error("the benchmark program does not compile");
    return out.program;
}

HostModel host() {
    DiagnosticList diags;
    SourceFile file("host.rmti", kHost);
    auto ast = parseHost(file, diags);
    HostModel model;
    if (ast) resolveHost(*ast, "host.rmti", model, diags);
    if (!ast || diags.hasErrors()) throw std::runtime_error("the benchmark host does not resolve");
    return model;
}

std::string traceDirectory() {
    if (const char* dir = std::getenv("REMIT_BENCH_TRACE_DIR")) return dir;
    if (std::filesystem::is_directory("/dev/shm")) return "/dev/shm";
    return std::filesystem::temp_directory_path().string();
}

enum TraceMode : int64_t { kNoTrace = 0, kFixtureTrace = 1, kSyncedTrace = 2 };

void BM_CallCap(benchmark::State& state) {
    bool traced = state.range(0) != kNoTrace;
    auto program = compile("program calls\nuses kv.get\n\nfn main() -> Int {\n  var n = 0\n  for i in range(1000) {\n"
                           "    n = n + len(kv.get(\"key {i}\"))\n  }\n  return n\n}\n");
    HostModel model = host();
    Policy policy = Policy::allowAllPolicy();
    std::string error, hint;
    auto fixtures = FixtureAdapter::fromJson(
        nlohmann::json::parse(R"({"capabilities": {"kv.get": [{"args": {}, "output": "value", "repeat": true}]}})"),
        "fixtures.json", error, hint);
    if (!fixtures) throw std::runtime_error(error);
    std::string path = traceDirectory() + "/remit-bench-broker-" + std::to_string(::getpid()) + ".jsonl";
    VmLimits limits;
    for (auto _ : state) {
        Run run(program, limits);
        TraceWriter trace;
        // As session/file_store.cpp opens it for the run: without fsync when only fixtures answer.
        trace.setSynced(state.range(0) == kSyncedTrace);
        if (traced && !trace.open(path, error)) {
            state.SkipWithError(error.c_str());
            break;
        }
        BrokerOptions options;
        options.runId = "20260101-000000-abcdef";
        options.idempotencyRoot = options.runId;
        options.programHash = program->module().programHash;
        options.host = &model;
        options.policy = &policy;
        options.adapterKind = fixtures->kind();
        options.trace = traced ? &trace : nullptr;
        Broker broker(options, run);
        run.start(program->entry(), {});
        if (driveWith(run, broker, fixtures.get()) != RunStatus::Completed || broker.calls() != kCalls) {
            state.SkipWithError("the run did not make its calls");
            break;
        }
        benchmark::DoNotOptimize(run.result().asInt());
    }
    std::filesystem::remove(path);
    state.counters["per_call"] =
        benchmark::Counter(kCalls, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_CallCap)->ArgName("trace")->Arg(kNoTrace)->Arg(kFixtureTrace)->Arg(kSyncedTrace)->Unit(benchmark::kMillisecond);

// The loop of BM_CallCap with the capability replaced by a function of the same type that is not
// inlined: the VM's part of an iteration.
void BM_CallCapLoopOnly(benchmark::State& state) {
    auto program = compile(
        "program calls\n\nfn get(key: Str) -> Str {\n  let a = len(key)\n  let b = trim(key)\n  return \"value\"\n}\n\n"
        "fn wrap(key: Str) -> Str {\n  return get(key)\n}\n\n"
        "fn main() -> Int {\n  var n = 0\n  for i in range(1000) {\n    n = n + len(wrap(\"key {i}\"))\n  }\n"
        "  return n\n}\n");
    VmLimits limits;
    for (auto _ : state) {
        Run run(program, limits);
        if (run.start(program->entry(), {}) != RunStatus::Completed) state.SkipWithError("the loop failed");
        benchmark::DoNotOptimize(run.result().asInt());
    }
    state.counters["per_call"] =
        benchmark::Counter(kCalls, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_CallCapLoopOnly)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
