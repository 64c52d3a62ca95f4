// VM micro-benchmarks: one small program per workload of the issue (dispatch, arithmetic, string
// building, list append in a loop, record field access, match, .rbc load + verify), compiled once
// through the embedding API and run once per iteration. bench/compare runs whole programs side by
// side with Lua 5.4 and CPython; these isolate one mechanism each.
#include <benchmark/benchmark.h>

#include <stdexcept>
#include <string>

#include "session/pipeline.h"
#include "vm/run.h"
#include "bytecode/rbc.h"

namespace {

std::shared_ptr<const remit::LoadedProgram> compile(const std::string& body) {
    std::string source = "program bench\n" + body;
    remit::CompileOutcome out = remit::compileProgram(source, "bench.rmt", "", "host.rmti");
    if (!out.program) throw std::runtime_error("benchmark program does not compile: " + body);
    return out.program;
}

void runProgram(benchmark::State& state, const std::string& body) {
    auto program = compile(body);
    remit::VmLimits limits;
    limits.maxSteps = UINT64_MAX / 2;
    for (auto _ : state) {
        remit::Run run(program, limits);
        if (run.start(program->entry(), {}) != remit::RunStatus::Completed)
            state.SkipWithError(run.failure().error.message.c_str());
        benchmark::DoNotOptimize(run.result().kind());
    }
}

// An empty-bodied counting loop: the cost of FORLOOP and dispatch alone.
void BM_Dispatch(benchmark::State& state) {
    runProgram(state, "fn main() -> Int {\n  var n = 0\n  for i in range(1000000) {\n    n = i\n  }\n  return n\n}\n");
}
BENCHMARK(BM_Dispatch)->Unit(benchmark::kMillisecond);

void BM_Arithmetic(benchmark::State& state) {
    runProgram(state,
               "fn main() -> Int {\n  var a = 1\n  var x = 0.5\n  for i in range(1000000) {\n"
               "    a = (a * 31 + i) % 1000003\n    x = x * 0.999 + 1.0\n  }\n  return a + int(x)\n}\n");
}
BENCHMARK(BM_Arithmetic)->Unit(benchmark::kMillisecond);

void BM_StringBuilding(benchmark::State& state) {
    runProgram(state,
               "fn main() -> Int {\n  var s = \"\"\n  for i in range(200000) {\n    s = s + \"{i},\"\n  }\n"
               "  return len(s)\n}\n");
}
BENCHMARK(BM_StringBuilding)->Unit(benchmark::kMillisecond);

void BM_ListAppend(benchmark::State& state) {
    runProgram(state,
               "fn main() -> Int {\n  var xs = []\n  for i in range(1000000) {\n    xs = xs + [i]\n  }\n"
               "  return len(xs)\n}\n");
}
BENCHMARK(BM_ListAppend)->Unit(benchmark::kMillisecond);

void BM_RecordField(benchmark::State& state) {
    runProgram(state,
               "type P = { x: Int, y: Int, z: Int }\nfn main() -> Int {\n  let p = { x: 1, y: 2, z: 3 }\n"
               "  var t = 0\n  for i in range(1000000) {\n    t = t + p.x + p.z\n  }\n  return t\n}\n");
}
BENCHMARK(BM_RecordField)->Unit(benchmark::kMillisecond);

void BM_Match(benchmark::State& state) {
    runProgram(state,
               "fn main() -> Int {\n  let names = [\"a\", \"bb\", \"ccc\", \"dddd\"]\n  var t = 0\n"
               "  for i in range(1000000) {\n    t = t + match names[i % 4] {\n      \"a\" => 1\n"
               "      \"bb\" => 2\n      \"ccc\" => 3\n      _ => 4\n    }\n  }\n  return t\n}\n");
}
BENCHMARK(BM_Match)->Unit(benchmark::kMillisecond);

// Loading and verifying an artifact of about 200 functions.
void BM_RbcLoadVerify(benchmark::State& state) {
    std::string body;
    for (int f = 0; f < 200; ++f)
        body += "fn f" + std::to_string(f) + "(x: Int) -> Int {\n  var t = x\n  for i in range(10) {\n    t = t + i * " +
                std::to_string(f) + "\n  }\n  return t\n}\n";
    body += "fn main() -> Int {\n  return f0(1)\n}\n";
    std::string bytes = remit::writeRbc(compile(body)->module());
    for (auto _ : state) {
        remit::LoadOutcome loaded = remit::loadProgram(bytes);
        if (!loaded.program) state.SkipWithError(loaded.error.c_str());
        benchmark::DoNotOptimize(loaded.program.get());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes.size()));
}
BENCHMARK(BM_RbcLoadVerify)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
