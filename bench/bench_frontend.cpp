// Front-end throughput: lexing and parsing a generated program of many functions. The checker's
// 10,000-line target (under 50 ms) builds on this number.
#include <benchmark/benchmark.h>

#include <fmt/format.h>

#include "compiler/lexer.h"
#include "compiler/parser.h"

namespace {

std::string generateProgram(int functions) {
    std::string src = "program bench\nuses web.fetch\n\n";
    for (int i = 0; i < functions; ++i) {
        src += fmt::format(
            "fn step{0}(x: Int, name: Str) -> Int {{\n"
            "  let doubled = x * 2 + {0}\n"
            "  var total = 0\n"
            "  for i in range(10) if i % 2 == 0 {{\n"
            "    total = total + i\n"
            "  }}\n"
            "  let label = \"step {{name}}: {{doubled}}\"\n"
            "  return match name {{ \"a\" => total, _ => doubled }}\n"
            "}}\n\n",
            i);
    }
    src += "fn main() -> Int {\n  return step0(1, \"a\")\n}\n";
    return src;
}

void BM_ParseProgram(benchmark::State& state) {
    remit::SourceFile source("bench.rmt", generateProgram(static_cast<int>(state.range(0))));
    for (auto _ : state) {
        remit::DiagnosticList diags;
        auto program = remit::parseProgram(source, diags);
        benchmark::DoNotOptimize(program);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * source.text().size()));
    state.counters["lines"] = static_cast<double>(source.lineCount());
}
BENCHMARK(BM_ParseProgram)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
