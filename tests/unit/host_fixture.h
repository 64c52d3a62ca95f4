// A resolved host interface from its text, for unit tests that build a broker or a checker by hand.
// The text must be a valid host interface: a test whose host does not resolve fails here.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "compiler/checker.h"
#include "compiler/parser.h"
#include "runtime/diagnostics.h"
#include "runtime/source.h"

namespace remit::test {

inline HostModel hostFrom(const std::string& text) {
    DiagnosticList diags;
    SourceFile file("host.rmti", text);
    auto ast = parseHost(file, diags);
    REQUIRE(ast);
    HostModel host;
    resolveHost(*ast, "host.rmti", host, diags);
    REQUIRE_FALSE(diags.hasErrors());
    return host;
}

}  // namespace remit::test
