#include "session/lsp_text.h"

#include <algorithm>

namespace remit::lsp {

namespace {

bool isContinuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// The length of the UTF-8 sequence whose lead byte is `c` (1 for a stray continuation byte or
// anything malformed: such a byte is one code point of its own, as U+FFFD would be).
size_t sequenceLength(std::string_view text, size_t i) {
    size_t len = utf8SequenceLength(text, i);
    return len == 0 ? 1 : len;
}

// How many units of `encoding` the code point of `length` UTF-8 bytes takes.
uint32_t unitsOf(size_t length, PositionEncoding encoding) {
    switch (encoding) {
        case PositionEncoding::Utf8: return static_cast<uint32_t>(length);
        case PositionEncoding::Utf32: return 1;
        case PositionEncoding::Utf16: return length == 4 ? 2 : 1;
    }
    return 1;
}

}  // namespace

std::string_view encodingName(PositionEncoding encoding) {
    switch (encoding) {
        case PositionEncoding::Utf8: return "utf-8";
        case PositionEncoding::Utf32: return "utf-32";
        case PositionEncoding::Utf16: return "utf-16";
    }
    return "utf-16";
}

DocumentText::DocumentText(std::string text) : text_(std::move(text)) { index(); }

void DocumentText::assign(std::string text) {
    text_ = std::move(text);
    index();
}

void DocumentText::replace(size_t begin, size_t end, std::string_view replacement) {
    begin = std::min(begin, text_.size());
    end = std::min(std::max(begin, end), text_.size());
    text_.replace(begin, end - begin, replacement);
    index();
}

void DocumentText::index() {
    lspLineStarts_.assign(1, 0);
    spanLineStarts_.assign(1, 0);
    for (size_t i = 0; i < text_.size(); ++i) {
        char c = text_[i];
        if (c == '\n') {
            lspLineStarts_.push_back(i + 1);
            spanLineStarts_.push_back(i + 1);
        } else if (c == '\r' && (i + 1 == text_.size() || text_[i + 1] != '\n')) {
            lspLineStarts_.push_back(i + 1);
        }
    }
}

size_t DocumentText::lspLineEnd(size_t line) const {
    if (line + 1 >= lspLineStarts_.size()) return text_.size();
    size_t end = lspLineStarts_[line + 1] - 1;  // the '\n' or lone '\r'
    if (text_[end] == '\n' && end > lspLineStarts_[line] && text_[end - 1] == '\r') --end;
    return end;
}

size_t DocumentText::offsetOf(Position position, PositionEncoding encoding) const {
    if (position.line >= lspLineStarts_.size()) return text_.size();
    size_t i = lspLineStarts_[position.line];
    size_t end = lspLineEnd(position.line);
    uint32_t units = 0;
    while (i < end) {
        size_t len = sequenceLength(text_, i);
        uint32_t width = unitsOf(len, encoding);
        // A position inside this code point (the middle of a surrogate pair or of its bytes)
        // rounds down to its start.
        if (units + width > position.character) break;
        units += width;
        i += len;
    }
    return std::min(i, end);
}

Position DocumentText::positionOf(size_t offset, PositionEncoding encoding) const {
    offset = std::min(offset, text_.size());
    while (offset > 0 && offset < text_.size() && isContinuation(text_[offset])) --offset;
    auto after = std::upper_bound(lspLineStarts_.begin(), lspLineStarts_.end(), offset);
    size_t line = static_cast<size_t>(after - lspLineStarts_.begin()) - 1;
    size_t i = lspLineStarts_[line];
    // An offset between '\r' and '\n' is the end of the line's content.
    offset = std::min(offset, lspLineEnd(line));
    uint32_t units = 0;
    while (i < offset) {
        size_t len = sequenceLength(text_, i);
        units += unitsOf(len, encoding);
        i += len;
    }
    return Position{static_cast<uint32_t>(line), units};
}

size_t DocumentText::offsetOfSpanPoint(uint32_t line, uint32_t col) const {
    if (line == 0) return 0;
    if (line > spanLineStarts_.size()) return text_.size();
    size_t i = spanLineStarts_[line - 1];
    size_t end = line < spanLineStarts_.size() ? spanLineStarts_[line] - 1 : text_.size();
    for (uint32_t c = 1; c < col && i < end; ++c) i += sequenceLength(text_, i);
    return std::min(i, end);
}

Range DocumentText::rangeOf(const Span& span, PositionEncoding encoding) const {
    if (!span.valid()) return Range{};
    Position start = positionOf(offsetOfSpanPoint(span.line, span.col), encoding);
    uint32_t endLine = span.endLine ? span.endLine : span.line;
    uint32_t endCol = span.endLine ? span.endCol : span.col;
    Position end = positionOf(offsetOfSpanPoint(endLine, endCol), encoding);
    if (end.line < start.line || (end.line == start.line && end.character < start.character)) end = start;
    return Range{start, end};
}

void DocumentText::spanPointOf(Position position, PositionEncoding encoding, uint32_t& line, uint32_t& col) const {
    size_t offset = offsetOf(position, encoding);
    auto after = std::upper_bound(spanLineStarts_.begin(), spanLineStarts_.end(), offset);
    size_t index = static_cast<size_t>(after - spanLineStarts_.begin()) - 1;
    line = static_cast<uint32_t>(index + 1);
    col = 1;
    for (size_t i = spanLineStarts_[index]; i < offset; i += sequenceLength(text_, i)) ++col;
}

}  // namespace remit::lsp
