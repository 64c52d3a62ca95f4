// libFuzzer harness for the front end: lexer, parser (programs and host interfaces), the
// diagnostic renderer and the formatter.
//
// The input is source text. It is always parsed as a program (.rmt); when its first byte is odd
// it is parsed as a host interface (.rmti) too, so one corpus serves both grammars (host seeds
// start with '#', 'capability', 'model' or 'input', all odd). Every diagnostic is rendered with
// its source excerpt. When a parse has no errors, the formatter's two promises
// (compiler/formatter.h) are checked and any break traps:
//   - the formatted text parses without errors, to a tree sameProgram/sameHost calls equal;
//   - formatting the formatted text gives the same text (idempotency).
// Sanitizers catch the rest (out-of-bounds reads, overflow, unbounded recursion, leaks).
//
// Build: `scripts/fuzz frontend SECONDS`, or `make fuzz`. Replay without libFuzzer:
// build/fuzz/tests/fuzz/fuzz_frontend_replay FILE...
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "compiler/ast_equal.h"
#include "compiler/formatter.h"
#include "compiler/limits.h"
#include "compiler/parser.h"
#include "runtime/diagnostics.h"
#include "runtime/source.h"

namespace {

using namespace remit;

// Report why the harness is about to trap, so a crash log says which promise broke.
[[noreturn]] void broken(const char* what, const std::string& original, const std::string& formatted) {
    std::fprintf(stderr, "\n*** fuzz_frontend: %s\n--- input (%zu bytes)\n%s\n--- formatted (%zu bytes)\n%s\n---\n",
                 what, original.size(), original.c_str(), formatted.size(), formatted.c_str());
    __builtin_trap();
}

// Renders every diagnostic against its source and returns true when there was an error.
bool renderAll(DiagnosticList& diags, const SourceFile& source) {
    size_t total = 0;
    for (const Diagnostic& d : diags.items()) total += renderText(d, &source).size();
    // Keep the renders observable so they cannot be optimised away.
    volatile size_t sink = total;
    (void)sink;
    return diags.hasErrors();
}

// Checks the formatter on one grammar. `Parse` parses a SourceFile, `Format` formats the tree,
// `Same` compares two trees.
template <class Parse, class Format, class Same>
void roundTrip(const std::string& text, const char* name, Parse parse, Format format, Same same) {
    const FrontendLimits limits;
    SourceFile source(name, text);
    DiagnosticList diags(limits.maxErrors);
    auto tree = parse(source, diags, limits);
    if (renderAll(diags, source) || !tree) return;

    std::string formatted = format(*tree);
    SourceFile again(name, formatted);
    DiagnosticList diagsAgain(limits.maxErrors);
    auto treeAgain = parse(again, diagsAgain, limits);
    if (renderAll(diagsAgain, again) || !treeAgain) {
        std::string why = "formatted text does not parse:";
        for (const Diagnostic& d : diagsAgain.items()) why += "\n" + renderText(d, &again);
        broken(why.c_str(), text, formatted);
    }
    if (!same(*tree, *treeAgain)) broken("formatting changed the syntax tree", text, formatted);
    std::string formattedAgain = format(*treeAgain);
    if (formattedAgain != formatted) {
        std::fprintf(stderr, "\n--- formatted twice (%zu bytes)\n%s\n", formattedAgain.size(), formattedAgain.c_str());
        broken("formatting is not idempotent", text, formatted);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    roundTrip(
        text, "fuzz.rmt",
        [](const SourceFile& s, DiagnosticList& d, const FrontendLimits& l) { return parseProgram(s, d, l); },
        [](const ast::Program& p) { return formatProgram(p); },
        [](const ast::Program& a, const ast::Program& b) { return sameProgram(a, b); });
    if (size > 0 && (data[0] & 1) != 0) {
        roundTrip(
            text, "fuzz.rmti",
            [](const SourceFile& s, DiagnosticList& d, const FrontendLimits& l) { return parseHost(s, d, l); },
            [](const ast::HostInterface& h) { return formatHost(h); },
            [](const ast::HostInterface& a, const ast::HostInterface& b) { return sameHost(a, b); });
    }
    return 0;
}
