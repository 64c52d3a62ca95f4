#include "runtime/diagnostics.h"

#include <algorithm>

#include <fmt/format.h>

namespace remit {

namespace {

constexpr DiagInfo kDiagTable[] = {
#define REMIT_DIAG(code, severity, name, stage, operational, summary) \
    {#code, Severity::severity, name, stage, operational, summary},
#include "runtime/diagnostics.def"
#undef REMIT_DIAG
};

std::string_view severityWord(Severity severity) {
    switch (severity) {
        case Severity::Error: return "error";
        case Severity::Warning: return "warning";
        case Severity::Runtime: return "runtime error";
    }
    return "error";
}

// The blank space before a caret under the first `columns` code points of `line`: a tab stays a
// tab, so the caret lines up under the excerpt whatever width the reader's terminal gives tabs.
// Every other code point, wide ones included, is one space (columns count code points).
std::string caretIndent(std::string_view line, size_t columns) {
    std::string out;
    for (size_t i = 0; i < line.size() && out.size() < columns;) {
        out += line[i] == '\t' ? '\t' : ' ';
        i += std::max<size_t>(1, utf8SequenceLength(line, i));  // a malformed byte counts as one, as U+FFFD
    }
    out.append(columns - out.size(), ' ');
    return out;
}

// "2 errors, 1 warning": the kinds that occur, in that order.
std::string countKinds(size_t errors, size_t warnings) {
    std::string out;
    if (errors) out = fmt::format("{} error{}", errors, errors == 1 ? "" : "s");
    if (warnings) out += fmt::format("{}{} warning{}", out.empty() ? "" : ", ", warnings, warnings == 1 ? "" : "s");
    return out;
}

}  // namespace

const DiagInfo& diagInfo(DiagCode code) { return kDiagTable[static_cast<size_t>(code)]; }

std::optional<DiagCode> parseDiagCode(std::string_view text) {
    for (size_t i = 0; i < std::size(kDiagTable); ++i)
        if (kDiagTable[i].code == text) return static_cast<DiagCode>(i);
    return std::nullopt;
}

const std::vector<DiagCode>& allDiagCodes() {
    static const std::vector<DiagCode> codes = [] {
        std::vector<DiagCode> out;
        for (size_t i = 0; i < std::size(kDiagTable); ++i) out.push_back(static_cast<DiagCode>(i));
        return out;
    }();
    return codes;
}

Diagnostic makeDiagnostic(DiagCode code, std::string message, std::string file, Span span, std::string hint,
                          std::vector<std::string> notes) {
    Diagnostic d;
    d.code = code;
    d.message = std::move(message);
    d.file = std::move(file);
    d.span = span;
    d.hint = std::move(hint);
    d.notes = std::move(notes);
    return d;
}

bool DiagnosticList::add(Diagnostic diagnostic) {
    bool isError = diagnostic.isError();
    if (isError && full()) return false;
    std::string key = fmt::format("{}:{}:{}:{}", static_cast<int>(diagnostic.code), diagnostic.span.line,
                                  diagnostic.span.col, diagnostic.message);
    if (!seen_.insert(std::move(key)).second) return false;
    items_.push_back(std::move(diagnostic));
    if (isError) ++errorCount_;
    return true;
}

void DiagnosticList::sortByPosition() {
    std::stable_sort(items_.begin(), items_.end(), [](const Diagnostic& a, const Diagnostic& b) {
        return std::pair(a.span.line, a.span.col) < std::pair(b.span.line, b.span.col);
    });
}

std::string styledText(TextStyle style, std::string_view text) {
    std::string_view code;
    switch (style) {
        case TextStyle::Error: code = "1;31"; break;
        case TextStyle::Warning: code = "1;33"; break;
        case TextStyle::Ok: code = "1;32"; break;
        case TextStyle::Note: code = "1;36"; break;
        case TextStyle::Bold: code = "1"; break;
        case TextStyle::Dim: code = "2"; break;
        case TextStyle::Gutter: code = "34"; break;
    }
    return fmt::format("\x1b[{}m{}\x1b[0m", code, text);
}

namespace {

// `text` in `style` when colouring, else as it is.
std::string styled(bool color, TextStyle style, std::string_view text) {
    return color ? styledText(style, text) : std::string(text);
}

}  // namespace

std::string renderText(const Diagnostic& d, const SourceFile* source, bool color) {
    const DiagInfo& info = diagInfo(d.code);
    TextStyle accent = info.severity == Severity::Warning ? TextStyle::Warning : TextStyle::Error;
    std::string where = d.span.valid() ? fmt::format("{}:{}:{}:", d.file, d.span.line, d.span.col)
                                       : fmt::format("{}:", d.file.empty() ? "<unknown>" : d.file);
    std::string out = fmt::format("{} {}: {}", styled(color, TextStyle::Bold, where),
                                  styled(color, accent, fmt::format("{}[{}]", severityWord(info.severity), info.code)),
                                  styled(color, TextStyle::Bold, d.message));
    if (d.span.valid() && source && d.span.line <= source->lineCount()) {
        std::string_view text = source->lineText(d.span.line);
        // Keep a pathological line (a 16 KiB line, a 50 MB file without newlines) readable.
        constexpr size_t kMaxExcerpt = 400;
        std::string gutter = fmt::format("{:>4} | ", d.span.line);
        size_t width = 1;
        if (d.span.endLine == d.span.line && d.span.endCol > d.span.col) width = d.span.endCol - d.span.col;
        size_t indent = d.span.col - 1;
        if (text.size() <= kMaxExcerpt && indent <= kMaxExcerpt) {
            out += fmt::format("\n{}{}\n{}{}{}", styled(color, TextStyle::Gutter, gutter), sanitizeUtf8(text),
                               std::string(gutter.size(), ' '), caretIndent(text, indent),
                               styled(color, accent, std::string(std::min<size_t>(width, kMaxExcerpt), '^')));
        }
    }
    for (const std::string& note : d.notes) out += fmt::format("\n  {} {}", styled(color, TextStyle::Note, "note:"), note);
    if (!d.hint.empty()) out += fmt::format("\n  {} {}", styled(color, TextStyle::Ok, "hint:"), d.hint);
    return out;
}

std::string renderDiagnostics(const std::vector<Diagnostic>& diagnostics, const SourceLookup& sources,
                              const RenderOptions& options) {
    // Which to show: every error before any warning, each kind in the order given.
    std::vector<bool> shown(diagnostics.size(), false);
    size_t room = options.maxDiagnostics;
    for (bool errors : {true, false})
        for (size_t i = 0; i < diagnostics.size() && room > 0; ++i)
            if (diagnostics[i].isError() == errors) {
                shown[i] = true;
                --room;
            }
    std::string out;
    size_t printed = 0, hiddenErrors = 0, hiddenWarnings = 0;
    for (size_t i = 0; i < diagnostics.size(); ++i) {
        const Diagnostic& d = diagnostics[i];
        if (!shown[i]) {
            ++(d.isError() ? hiddenErrors : hiddenWarnings);
            continue;
        }
        out += renderText(d, sources ? sources(d.file) : nullptr, options.color);
        out += '\n';
        ++printed;
    }
    size_t hidden = hiddenErrors + hiddenWarnings;
    if (hidden == 0) return out;
    std::string what =
        fmt::format("diagnostic{} not shown ({})", hidden == 1 ? "" : "s", countKinds(hiddenErrors, hiddenWarnings));
    if (printed == 0) return out + fmt::format("{} {}\n", hidden, what);
    return out + fmt::format("... and {} more {}; fix the ones above first\n", hidden, what);
}

Json toJson(const Diagnostic& d) {
    const DiagInfo& info = diagInfo(d.code);
    Json j = Json::object();
    j["code"] = info.code;
    j["severity"] = info.severity == Severity::Warning ? "warning" : "error";
    j["message"] = d.message;
    j["file"] = d.file;
    if (d.span.valid()) {
        j["line"] = d.span.line;
        j["col"] = d.span.col;
        j["end_line"] = d.span.endLine;
        j["end_col"] = d.span.endCol;
    } else {
        for (const char* key : {"line", "col", "end_line", "end_col"}) j[key] = nullptr;
    }
    j["hint"] = d.hint.empty() ? Json(nullptr) : Json(d.hint);
    j["notes"] = d.notes;
    if (!d.details.is_null()) j["details"] = d.details;
    return j;
}

}  // namespace remit
