// The text of a document open in the language server (`remitc lsp`, docs/editors.md), and the
// mapping between the three ways of naming a place in it:
//
//   - a byte offset into the UTF-8 text (how the server edits it);
//   - a compiler Span (runtime/source.h): 1-based lines split at '\n' only, 1-based columns in
//     code points, as every diagnostic and syntax-tree node carries;
//   - an LSP Position: 0-based lines split at '\n', "\r\n" or a lone '\r' (LSP 3.17, "Text
//     Documents"), and a 0-based character offset counted in the negotiated position encoding —
//     UTF-16 code units by default, or UTF-8 bytes or UTF-32 code points when client and server
//     agree on them at initialize.
//
// Positions from a client are clamped, never trusted: a line past the end is the end of the
// document, a character past the end of its line is the line's end (as the specification asks),
// and a character inside a UTF-16 surrogate pair or a UTF-8 sequence rounds down to the code
// point's start. Used by session/lsp_server.cpp and its analyses; tested by tests/unit/test_lsp.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/source.h"

namespace remit::lsp {

enum class PositionEncoding : uint8_t { Utf16, Utf8, Utf32 };

// "utf-16", "utf-8", "utf-32" (the PositionEncodingKind values).
std::string_view encodingName(PositionEncoding encoding);

struct Position {
    uint32_t line = 0;
    uint32_t character = 0;
    bool operator==(const Position&) const = default;
};

struct Range {
    Position start, end;
    bool operator==(const Range&) const = default;
};

class DocumentText {
public:
    explicit DocumentText(std::string text = {});

    const std::string& text() const { return text_; }
    // Replaces [begin, end) (byte offsets, clamped, in order) with `replacement`.
    void replace(size_t begin, size_t end, std::string_view replacement);
    void assign(std::string text);

    // The byte offset of an LSP position, clamped as described above.
    size_t offsetOf(Position position, PositionEncoding encoding) const;
    // The LSP position of a byte offset (rounded down to a code point's start).
    Position positionOf(size_t offset, PositionEncoding encoding) const;

    // The byte offset of a compiler position (1-based line, 1-based code-point column; a column
    // past the line's end is the line's end). Line 0 (no position) is offset 0.
    size_t offsetOfSpanPoint(uint32_t line, uint32_t col) const;
    // The LSP range of a span: from its start to its end column on its end line.
    Range rangeOf(const Span& span, PositionEncoding encoding) const;
    // The compiler position (line, code-point column) of an LSP position.
    void spanPointOf(Position position, PositionEncoding encoding, uint32_t& line, uint32_t& col) const;

    size_t lspLineCount() const { return lspLineStarts_.size(); }

private:
    std::string text_;
    std::vector<size_t> lspLineStarts_;    // after '\n', "\r\n" and a lone '\r'
    std::vector<size_t> spanLineStarts_;   // after '\n' only (the lexer's lines)

    void index();
    // The end of LSP line `line`'s content (before its line break).
    size_t lspLineEnd(size_t line) const;
};

}  // namespace remit::lsp
