// What the language server (`remitc lsp`, docs/editors.md) knows about one version of one open
// document, and the answers it gives from it: diagnostics, hover, go to definition, document
// symbols, completion, code lenses and formatting, each as the LSP 3.17 JSON of its result.
//
// Nothing here re-derives the language: a program is checked by compiler/driver.h's checkSources
// exactly as `remitc check` checks it (the host interface found by the same walk up, the policy
// next to the program), with CheckerOptions::recordFacts on, so hover shows the types, tags and
// call bounds the checker computed (CheckResult::exprTypes, CheckResult::facts) and code lenses its
// per-function worst case; formatting is compiler/driver.h's formatText. A host interface (.rmti)
// is parsed and resolved as a check resolves it. The JSON-RPC side is session/lsp_server.cpp.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "compiler/driver.h"
#include "runtime/host_model.h"
#include "runtime/json_text.h"
#include "session/lsp_text.h"

namespace remit::lsp {

enum class DocumentKind : uint8_t { Program, Host };

// A `.rmti` path or URI is a host interface; anything else is read as a program.
DocumentKind documentKindOf(std::string_view pathOrUri);

// The text of a document open in the editor, by absolute path (null: not open). A check reads a
// host interface from the editor's buffer when it is open there, so an unsaved edit of host.rmti
// is seen by the programs that use it.
using OpenText = std::function<const std::string*(const std::string& absolutePath)>;

// One analysis of one version of a document.
struct Analysis {
    DocumentKind kind = DocumentKind::Program;
    std::string file;      // the name the compiler was given: the absolute path, or the URI of an unsaved buffer
    CheckOutcome outcome;  // a program: checkSources' outcome; a host: its source, tree and diagnostics
    std::optional<HostModel> hostModel;  // a host that resolved
    bool interrupted = false;            // stopped by a newer edit; nothing of it may be shown

    // The host interface for completion and definitions: the check's, or, when the program did
    // not parse far enough for the check to read one, the same file parsed on its own.
    const ast::HostInterface* host() const;
    const SourceFile* hostSource() const;

    std::unique_ptr<SourceFile> separateHostSource;
    std::unique_ptr<ast::HostInterface> separateHost;
};

// Checks a program (or parses and resolves a host interface). `path` is the document's absolute
// file path (nullopt for a buffer that is not a file: such a program has no host interface, E0002).
// `interrupted` is polled by the checker; once it returns true the analysis is abandoned.
std::unique_ptr<Analysis> analyse(std::string file, const std::optional<std::string>& path, std::string text,
                                  const OpenText& openText, std::function<bool()> interrupted = {});

// What every answer needs: the analysis, the document's current text (the analysis is of this
// text), the negotiated encoding, and the URI of a file the analysis names (the document itself,
// its host interface, its policy).
struct Query {
    const Analysis& analysis;
    const DocumentText& text;
    PositionEncoding encoding;
    std::string selfUri;
    std::function<std::string(const std::string& file)> uriOf;
};

// The diagnostics of the analysis as LSP Diagnostic objects, by the URI of the file each is in:
// always an entry for the document itself. A problem in another file (the host interface, the
// policy) is listed under that file's URI and, for a program, under its own too, at its header
// with the problem's place as related information: a program that cannot be checked because its
// host interface is broken does not look clean.
std::map<std::string, Json> diagnosticsByUri(const Query& query);

// One LSP Diagnostic: the code, the message followed by its notes and hint as `remitc check`
// prints them, severity, the checker's details under `data`.
Json diagnosticJson(const Diagnostic& diagnostic, const Range& range);

Json hover(const Query& query, Position position);           // Hover or null
Json definition(const Query& query, Position position);      // Location or null
Json documentSymbols(const Query& query);                    // DocumentSymbol[]
Json completion(const Query& query, Position position);      // CompletionList
Json codeLenses(const Query& query);                         // CodeLens[]

// The edits that format the document (TextEdit[], empty when it is formatted already), or
// nullopt with `error` saying why it cannot be formatted (it does not parse).
std::optional<Json> formatting(const Query& query, std::string& error);

}  // namespace remit::lsp
