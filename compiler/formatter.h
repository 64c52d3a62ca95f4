// The canonical formatter behind `remitc fmt`: prints a parsed program (.rmt) or host interface
// (.rmti) back as source in the one layout every Remit file shares — 2-space indent, one merged
// `uses` line, minimal parentheses — and puts back every comment the parser attached to the tree.
//
// Two properties are tested (tests/unit/test_formatter.cpp, tests/fuzz/fuzz_frontend.cpp) and
// relied on by `fmt --check`: re-parsing the output gives a tree that sameProgram/sameHost
// (ast_equal.h) call equal to the input's, and formatting the output again gives the same text.
// Comments may move to a canonical place (a comment inside a multi-line expression goes before
// its statement, as the parser attaches it there), but none is dropped. The tree must come from a
// parse without errors. The output stays within the parser's nesting limit (parentheses that are
// only for readability are left out of a file that would otherwise nest too deeply) and breaks
// long data lists one item per line, so it parses under the same limits as the input.
#pragma once

#include <string>

#include "compiler/ast.h"
#include "compiler/limits.h"

namespace remit {

// `limits` are those the tree was parsed with: the output is kept within their nesting depth.
std::string formatProgram(const ast::Program& program, const FrontendLimits& limits = {});
std::string formatHost(const ast::HostInterface& host, const FrontendLimits& limits = {});
// One expression on one line, as the formatter writes it (diagnostics quote source this way):
// blocks print as `{ a; b }` and match arms are comma-separated, as in an interpolation, and
// comments inside the expression are left out.
std::string formatExpression(const ast::Expr& expr);

// The spelling of a Float literal with exactly this value: Python's repr where that has no
// exponent, plain decimal digits otherwise (1e+16 -> "10000000000000000.0", 1e-05 -> "0.00001"),
// because the lexer only reads `digits.digits`.
std::string formatFloatLiteral(double value);
// The spelling of a `timeout` duration that the lexer reads back as exactly `seconds`: "500ms"
// below a second, "10s" on whole seconds, else milliseconds ("1500ms"); a decimal in seconds when
// nothing shorter round-trips.
std::string formatDuration(double seconds);

}  // namespace remit
