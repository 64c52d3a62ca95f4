// The recursive-descent parser for programs (.rmt) and host interfaces (.rmti).
//
// Errors are E0100 (syntax), plus the lexer's E0001 and E0003. The parser recovers at statement
// and declaration boundaries, so one pass reports several independent errors (at most
// FrontendLimits::maxErrors). Recursion is bounded by FrontendLimits::maxNesting, so no input can
// overflow the stack. A tree is returned even when there were errors (the formatter and checker
// must not use it then).
#pragma once

#include <memory>

#include "compiler/ast.h"
#include "compiler/limits.h"
#include "runtime/diagnostics.h"
#include "runtime/source.h"

namespace remit {

std::unique_ptr<ast::Program> parseProgram(const SourceFile& source, DiagnosticList& diags,
                                           const FrontendLimits& limits = {});
std::unique_ptr<ast::HostInterface> parseHost(const SourceFile& source, DiagnosticList& diags,
                                              const FrontendLimits& limits = {});

}  // namespace remit
