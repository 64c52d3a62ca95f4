// The one diagnostics engine every phase uses: the lexer, parser, host and policy loaders, the
// checker, the VM's runtime errors and the broker. Codes come from diagnostics.def; rendering is
// the prototype's text layout or JSON (docs/diagnostics.md). A Diagnostic never carries host
// paths other than the file name as the user gave it, nor exception text.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "runtime/json_text.h"
#include "runtime/source.h"

namespace remit {

enum class Severity : uint8_t { Error, Warning, Runtime };

enum class DiagCode : uint16_t {
#define REMIT_DIAG(code, severity, name, stage, operational, summary) code,
#include "runtime/diagnostics.def"
#undef REMIT_DIAG
};

struct DiagInfo {
    std::string_view code;  // "E0100"
    Severity severity;
    std::string_view name;   // "SyntaxError"
    std::string_view stage;  // "parse", "typecheck", "grant", "bounds", "flow"; "evaluate", "denied", "limit", "aborted"
    bool operational;        // a call's retry and else handle it (R0501–R0503)
    std::string_view summary;
};

// A runtime error as a value — the third tier, beside compile-time diagnostics and internal
// failures: what the VM, the builtins and the broker report, as `runtime error[CODE]` (the VM adds
// the span of the failing instruction) and under "error" in `run --json`.
struct RuntimeError {
    DiagCode code = DiagCode::R0101;
    std::string message;
    Json details;  // structured payload (e.g. R0701 names the limit); null if none
};

const DiagInfo& diagInfo(DiagCode code);
std::optional<DiagCode> parseDiagCode(std::string_view text);
// Every registered code, in table order (tests and docs walk it).
const std::vector<DiagCode>& allDiagCodes();

struct Diagnostic {
    DiagCode code{};
    std::string message;
    std::string file;          // as given on the command line, or a virtual name
    Span span;                 // may be invalid (no position)
    std::string hint;          // empty: no hint
    std::vector<std::string> notes;
    Json details;  // structured payload for repair tools; null when there is none

    Severity severity() const { return diagInfo(code).severity; }
    bool isError() const { return severity() != Severity::Warning; }
};

// A diagnostic in one expression (every phase builds them this way).
Diagnostic makeDiagnostic(DiagCode code, std::string message, std::string file, Span span = {}, std::string hint = {},
                          std::vector<std::string> notes = {});

// Collects diagnostics in the order they are found, drops exact repeats (same code, message and
// position, as the prototype does) and stops accepting errors after `maxErrors`.
class DiagnosticList {
public:
    explicit DiagnosticList(size_t maxErrors = 1000) : maxErrors_(maxErrors) {}

    // Returns false when the diagnostic was dropped (a repeat, or the error cap is reached).
    bool add(Diagnostic diagnostic);
    bool full() const { return errorCount_ >= maxErrors_; }
    size_t errorCount() const { return errorCount_; }
    size_t warningCount() const { return items_.size() - errorCount_; }
    bool hasErrors() const { return errorCount_ > 0; }
    const std::vector<Diagnostic>& items() const { return items_; }
    std::vector<Diagnostic>& items() { return items_; }
    // Stable sort by line, then column: the order users read a file in.
    void sortByPosition();

private:
    size_t maxErrors_;
    size_t errorCount_ = 0;
    std::vector<Diagnostic> items_;
    std::unordered_set<std::string> seen_;  // code, position and message of each item
};

// `file:line:col: error[E0100]: message`, the source line under a gutter, a caret under the span,
// then `  note: ...` lines and `  hint: ...`. `source` may be null (no excerpt is printed). With
// `color`, the same text with ANSI styles: the severity and caret in red (errors) or yellow
// (warnings), the location and message bold, `note:` cyan and `hint:` green.
std::string renderText(const Diagnostic& diagnostic, const SourceFile* source, bool color = false);

// The ANSI styles of coloured text, for renderText and the command line's few highlighted lines.
enum class TextStyle { Error, Warning, Ok, Note, Bold, Dim, Gutter };
// `text` wrapped in the style's SGR sequence and a reset.
std::string styledText(TextStyle style, std::string_view text);

// Finds the text of a diagnostic's file for its excerpt; null when there is none to show.
using SourceLookup = std::function<const SourceFile*(const std::string& file)>;

struct RenderOptions {
    static constexpr size_t kUnlimited = std::numeric_limits<size_t>::max();
    // The most diagnostics printed in full; the rest are counted in one closing line. 0 prints
    // only that line.
    size_t maxDiagnostics = kUnlimited;
    // ANSI colour for a terminal (the command line decides when: --color, NO_COLOR, a TTY). Never
    // for JSON, goldens or protocol replies; without it the text is byte-identical to before.
    bool color = false;
};

// The text a person or a model reads: each diagnostic as renderText prints it, one after the
// other in the order given (callers sort them: the checker by position, file by file), each ending
// with a newline. Byte-identical for the same input. When there are more than maxDiagnostics,
// errors are chosen before warnings (a reader must never see only warnings while errors are
// hidden), the chosen ones keep their order, and a final line counts the rest:
//   ... and 3 more diagnostics not shown (2 errors, 1 warning); fix the ones above first
std::string renderDiagnostics(const std::vector<Diagnostic>& diagnostics, const SourceLookup& sources,
                              const RenderOptions& options = {});

// {"code","severity","message","file","line","col","end_line","end_col","hint","notes"[,"details"]}
Json toJson(const Diagnostic& diagnostic);

}  // namespace remit
