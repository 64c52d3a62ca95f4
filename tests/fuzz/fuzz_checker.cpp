// libFuzzer harness for the checker: any program text is parsed and, when it parses, checked
// against a fixed host interface with capabilities, models, agents' models, tags, deny/approve
// parameters, list bounds and costs — the code path `remitc check`, `serve` and MCP run on
// untrusted programs. Nothing may crash, hang, leak or overflow, whatever the program says;
// every diagnostic and the manifest are rendered too.
//
// Build: `scripts/fuzz checker SECONDS`. Replay: build/fuzz/tests/fuzz/fuzz_checker_replay FILE...
#include <cstddef>
#include <cstdint>
#include <string>

#include "compiler/checker.h"
#include "compiler/manifest.h"
#include "compiler/parser.h"
#include "runtime/diagnostics.h"
#include "runtime/source.h"

namespace {

using namespace remit;

constexpr const char* kHost =
    "type Hit = { url: Str, title: Str }\n"
    "capability web.search(query: Str deny private) -> List[Hit] max 10\n  tags untrusted\n  cost 0.005\n  idempotent\n"
    "capability web.fetch(url: Str deny private) -> Str\n  tags untrusted\n  cost 0.001\n  idempotent\n"
    "capability files.read(path: Str) -> Str\n  tags private\n  idempotent\n"
    "capability crm.find(email: Str) -> { id: Str, email: Str }\n  tags private\n  clears untrusted\n"
    "capability email.send(to: Str deny untrusted, body: Str approve untrusted)\n"
    "capability pay.refund(amount: Float approve untrusted)\n  approval always\n"
    "model llm cost 0.02\n"
    "input topic tags untrusted\n";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    SourceFile source("fuzz.rmt", std::string(reinterpret_cast<const char*>(data), size));
    SourceFile hostSource("host.rmti", kHost);
    DiagnosticList diags;
    auto program = parseProgram(source, diags);
    if (!program || diags.hasErrors()) return 0;
    auto hostAst = parseHost(hostSource, diags);
    HostModel host;
    resolveHost(*hostAst, "host.rmti", host, diags);
    CheckResult result = checkProgram(*program, std::move(host), diags, {"fuzz.rmt", "host.rmti"});
    for (const Diagnostic& d : diags.items()) (void)renderText(d, &source);
    if (result.ok) (void)manifestToJson(result.manifest).dump();
    return 0;
}
