// Structural equality of syntax trees: the same program, whatever its layout. Spans, node ids,
// comments and purely syntactic choices (a match arm written with or without braces, the file
// name) are ignored; every semantic field is compared, numbers with == (and NaN equal to NaN).
//
// The formatter's tests use it to prove that `remitc fmt` never changes what a file means:
// sameProgram(parse(x), parse(format(parse(x)))) must hold for every x that parses.
#pragma once

#include "compiler/ast.h"

namespace remit {

bool sameProgram(const ast::Program& a, const ast::Program& b);
bool sameHost(const ast::HostInterface& a, const ast::HostInterface& b);
bool sameExpr(const ast::Expr& a, const ast::Expr& b);
bool sameType(const ast::TypeExpr& a, const ast::TypeExpr& b);

}  // namespace remit
