// The lexer turns UTF-8 source into tokens and a separate list of comments (the formatter puts
// them back). Newlines are tokens except inside ( ) and [ ] — and inside braces nested in those,
// newlines count again, so a block inside a call still separates its statements.
//
// Errors are E0001 (lexical) and E0003 (limits). The lexer reports an error and keeps going where
// it can, so one pass shows several problems; limit errors and invalid UTF-8 stop it.
#pragma once

#include <string_view>
#include <vector>

#include "compiler/limits.h"
#include "compiler/token.h"
#include "runtime/diagnostics.h"

namespace remit {

struct LexResult {
    std::vector<Token> tokens;  // always ends with Newline, Eof
    std::vector<Comment> comments;
    std::vector<std::vector<StrPiece>> strings;  // the pieces of each Str token, by Token::strIndex
    bool fatal = false;         // a limit or encoding error stopped lexing early
};

// `text` must outlive the tokens (they point into it). `startLine`/`startCol` place a fragment
// (an interpolated expression) at its real position in the file.
LexResult lex(std::string_view text, std::string_view file, const FrontendLimits& limits, DiagnosticList& diags,
              uint32_t startLine = 1, uint32_t startCol = 1, bool isFragment = false);

}  // namespace remit
