// Front-end and checker throughput on generated programs of many functions calling each other.
// The target: checking a 10,000-line program takes under 50 ms in a Release build
// (BM_CheckProgram/1000 generates about 10,000 lines), and issue #22's: `remitc check` of it at
// 500,000 lines a second or more. `make bench` runs it.
#include <benchmark/benchmark.h>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "compiler/checker.h"
#include "compiler/lexer.h"
#include "compiler/parser.h"

namespace {

constexpr const char* kHost =
    "type Hit = { url: Str, title: Str }\n"
    "capability web.search(query: Str deny private) -> List[Hit] max 10\n"
    "  tags untrusted\n  cost 0.005\n  idempotent\n"
    "capability web.fetch(url: Str deny private) -> Str\n  tags untrusted\n  cost 0.001\n  idempotent\n"
    "capability email.send(to: Str deny untrusted, body: Str approve untrusted)\n"
    "model llm cost 0.02\n"
    "input topic tags untrusted\n";

// Functions come in layers of eight; each calls two of the layer below, so a naive analysis (one
// per call path) would be exponential while the call chain stays ~N/8 deep. Every function loops,
// matches and builds strings: about ten lines each.
std::string generateProgram(int functions) {
    std::string src = "program bench\nuses web.search, web.fetch, email.send, llm\n\n";
    for (int i = 0; i < functions; ++i) {
        std::string calls = i >= 8 ? fmt::format("step{}(x, name) + step{}(x + 1, name)", i - 8, i - 7) : "x";
        src += fmt::format(
            "fn step{0}(x: Int, name: Str) -> Int {{\n"
            "  let doubled = x * 2 + {0}\n"
            "  var total = 0\n"
            "  for i in range(3) if i % 2 == 0 {{\n"
            "    total = total + i\n"
            "  }}\n"
            "  let label = \"step {{name}}: {{doubled}}\"\n"
            "  let kind = match name {{ \"a\" => total, _ => doubled }}\n"
            "  return kind + {1}\n"
            "}}\n\n",
            i, calls);
    }
    src += fmt::format(
        "fn main(topic: Str) -> Int {{\n"
        "  let hits = web.search(topic) retry 1\n"
        "  let pages = for h in take(hits, 3) {{\n"
        "    web.fetch(h.url) retry 2 else \"\"\n"
        "  }}\n"
        "  let summary = llm.ask(Str, \"Summarise\", context: pages)\n"
        "  email.send(to: \"team@example.org\", body: summary)\n"
        "  var total = 0\n"
        "{}"
        "  return total\n"
        "}}\n",
        [&] {
            std::string calls;
            for (int i = std::max(0, functions - 8); i < functions; ++i)
                calls += fmt::format("  total = total + step{}(1, topic)\n", i);
            return calls;
        }());
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

// Parse and check, as `remitc check` does (minus file I/O and printing).
void BM_CheckProgram(benchmark::State& state) {
    remit::SourceFile source("bench.rmt", generateProgram(static_cast<int>(state.range(0))));
    remit::SourceFile hostSource("host.rmti", kHost);
    for (auto _ : state) {
        remit::DiagnosticList diags;
        auto program = remit::parseProgram(source, diags);
        auto hostAst = remit::parseHost(hostSource, diags);
        remit::HostModel host;
        remit::resolveHost(*hostAst, "host.rmti", host, diags);
        remit::CheckResult result = remit::checkProgram(*program, std::move(host), diags, {"bench.rmt", "host.rmti"});
        if (!result.ok) state.SkipWithError("the generated program does not check");
        benchmark::DoNotOptimize(result);
    }
    state.counters["lines"] = static_cast<double>(source.lineCount());
    state.counters["lines_per_s"] =
        benchmark::Counter(static_cast<double>(source.lineCount()), benchmark::Counter::kIsIterationInvariantRate);
}
// The checker runs a large program on a thread of its own (runtime/large_stack.h): CPU time is the
// whole process's, or the checker's own time would not count.
BENCHMARK(BM_CheckProgram)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();

}  // namespace

// `remit_bench_frontend --write-program N DIR` writes the program of N functions and its host
// interface to DIR/bench.rmt and DIR/host.rmti (for timing `remitc check` on it, docs/performance.md);
// any other arguments run the benchmarks.
int main(int argc, char** argv) {
    if (argc == 4 && std::string_view(argv[1]) == "--write-program") {
        std::string dir = argv[3];
        std::FILE* program = std::fopen((dir + "/bench.rmt").c_str(), "w");
        std::FILE* host = std::fopen((dir + "/host.rmti").c_str(), "w");
        if (!program || !host) {
            std::fprintf(stderr, "cannot write to %s\n", dir.c_str());
            return 2;
        }
        std::string text = generateProgram(std::atoi(argv[2]));
        std::fputs(text.c_str(), program);
        std::fputs(kHost, host);
        bool ok = std::fclose(program) == 0;
        ok = std::fclose(host) == 0 && ok;
        return ok ? 0 : 2;
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
