// Source files and positions shared by every phase. A SourceFile owns the text of one .rmt/.rmti
// file (or an in-memory buffer) and answers "what is line N" for diagnostics; a Span is a 1-based
// line/column range whose columns count Unicode code points, as the prototype's do.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace remit {

struct Span {
    uint32_t line = 0;     // 1-based; 0 means "no position"
    uint32_t col = 0;      // 1-based, in code points
    uint32_t endLine = 0;  // inclusive line of the last character
    uint32_t endCol = 0;   // exclusive column after the last character

    bool valid() const { return line != 0; }
    static Span cover(const Span& first, const Span& last) {
        return Span{first.line, first.col, last.endLine, last.endCol};
    }
};

class SourceFile {
public:
    SourceFile(std::string name, std::string text);

    const std::string& name() const { return name_; }
    const std::string& text() const { return text_; }
    size_t lineCount() const { return lineStarts_.size(); }
    // The text of 1-based line `line` without its newline (and without a trailing '\r').
    std::string_view lineText(uint32_t line) const;

private:
    std::string name_;
    std::string text_;
    std::vector<size_t> lineStarts_;
};

// Number of code points in a UTF-8 string (continuation bytes are not counted).
size_t codePointCount(std::string_view utf8);
// The first `n` code points of UTF-8 text (Python slices strings by code point).
std::string_view firstCodePoints(std::string_view utf8, size_t n);
// Length of the valid UTF-8 sequence starting at `text[i]`, or 0 when it is malformed (overlong
// forms, surrogates and code points above U+10FFFF count as malformed).
size_t utf8SequenceLength(std::string_view text, size_t i);
// `text` with each malformed byte replaced by U+FFFD, so output stays valid UTF-8.
std::string sanitizeUtf8(std::string_view text);

}  // namespace remit
