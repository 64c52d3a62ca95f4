// The `remitvm serve` session operation in process (session/serve_session.h): one `run` request
// for a small program — parse the request line, parse and check the program against its host
// interface and grants, compile, verify, run, and build the reply — as a warm server does it per
// request, without the pipe and the thread hand-off. Also a run that pauses at one host call and
// is resumed. docs/serve.md quotes the numbers; the target is under 1 ms per small run.
#include <benchmark/benchmark.h>

#include <string>

#include "session/serve_session.h"

namespace {

using remit::Json;

constexpr const char* kHost =
    "capability web.fetch(url: Str deny private) -> Str\n  tags untrusted\n  idempotent\n"
    "input topic tags untrusted\n";

std::string runLine(const std::string& source, const Json& grants, const Json& inputs) {
    return Json{{"type", "run"}, {"id", 1},          {"session", "bench"}, {"program", source},
                {"host", kHost}, {"grants", grants}, {"inputs", inputs}}
        .dump();
}

// A small pure program: a loop, a record, string interpolation.
void BM_ServeRunSmallProgram(benchmark::State& state) {
    const std::string line = runLine(
        "program small\n\ntype Point = { x: Int, y: Int }\n\nfn norm1(p: Point) -> Int {\n  return p.x + p.y\n}\n\n"
        "fn main(n: Int) -> Str {\n  var total = 0\n  for i in range(10) {\n    total = total + norm1({ x: i, y: n "
        "})\n  }\n"
        "  return \"total {total}\"\n}\n",
        Json::array(), Json{{"n", 3}});
    for (auto _ : state) {
        Json error;
        std::optional<remit::serve::Request> request = remit::serve::parseRequest(line, error);
        remit::serve::Session session(std::move(request->run));
        Json reply = session.start();
        if (reply["status"] != "completed") state.SkipWithError("the benchmark program did not complete");
        benchmark::DoNotOptimize(reply.dump());
    }
}
BENCHMARK(BM_ServeRunSmallProgram)->Unit(benchmark::kMicrosecond);

// A program that pauses at one capability call and is resumed with its result.
void BM_ServeRunWithOneHostCall(benchmark::State& state) {
    const std::string line = runLine(
        "program fetch\nuses web.fetch\n\nfn main(topic: Str) -> Str {\n"
        "  let page = web.fetch(\"https://example.org/{topic}\")\n  return \"got {page}\"\n}\n",
        Json::array({Json{{"name", "web.fetch"}, {"mode", "allow"}}}), Json{{"topic", "tea"}});
    const std::string resume = R"({"type":"resume","id":2,"session":"bench","call":1,"perform":{"result":"a page"}})";
    for (auto _ : state) {
        Json error;
        std::optional<remit::serve::Request> request = remit::serve::parseRequest(line, error);
        remit::serve::Session session(std::move(request->run));
        Json paused = session.start();
        benchmark::DoNotOptimize(paused.dump());
        std::optional<remit::serve::Request> r = remit::serve::parseRequest(resume, error);
        Json reply = session.resume(r->resume);
        if (reply["status"] != "completed") state.SkipWithError("the benchmark program did not complete");
        benchmark::DoNotOptimize(reply.dump());
    }
}
BENCHMARK(BM_ServeRunWithOneHostCall)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
