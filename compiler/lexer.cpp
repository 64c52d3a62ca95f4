#include "compiler/lexer.h"

#include <array>
#include <charconv>
#include <cmath>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <fmt/format.h>

namespace remit {

namespace {

struct Spelling {
    Tok kind;
    std::string_view text;
};

constexpr Spelling kPunctuation[] = {
#define REMIT_X(name, text) {Tok::name, text},
    REMIT_PUNCTUATION(REMIT_X)
#undef REMIT_X
};

constexpr Spelling kKeywords[] = {
#define REMIT_X(name, text) {Tok::Kw##name, text},
    REMIT_KEYWORDS(REMIT_X)
#undef REMIT_X
};

constexpr bool punctuationIsShort() {
    for (const Spelling& p : kPunctuation)
        if (p.text.empty() || p.text.size() > 2) return false;
    return true;
}
static_assert(punctuationIsShort(), "punctuationAt compares spellings of one or two characters");

// The punctuation token starting `rest`, longest spelling first; null when there is none.
const Spelling* punctuationAt(std::string_view rest) {
    // Indexed by first character: most characters start no punctuation, so this is one load.
    static const std::array<std::vector<const Spelling*>, 128> byFirst = [] {
        std::array<std::vector<const Spelling*>, 128> table;
        for (const Spelling& p : kPunctuation) table[static_cast<unsigned char>(p.text[0])].push_back(&p);
        return table;
    }();
    unsigned char c = static_cast<unsigned char>(rest[0]);
    if (c >= 128) return nullptr;
    // Spellings are one or two characters: compared in place rather than through memcmp.
    for (const Spelling* p : byFirst[c])
        if (p->text.size() == 1 || (rest.size() >= 2 && rest[1] == p->text[1])) return p;
    return nullptr;
}

// The operators of other languages (habits.def, triggers Lexical and Operator) that the lexer
// reads as one Habit token, so the parser can name them where they stand instead of meeting a
// stray character or a pair of Remit tokens. The quote and comment habits are read by
// lexSingleQuoted, lexBacktick and the `//` check instead.
struct HabitOperator {
    std::string_view text;
    Habit habit;
};

const std::vector<HabitOperator>& habitOperators() {
    static const std::vector<HabitOperator> table = [] {
        std::vector<HabitOperator> out;
        for (const HabitInfo& h : allHabits()) {
            if (h.trigger != HabitTrigger::Lexical && h.trigger != HabitTrigger::Operator) continue;
            if (h.id == Habit::SingleQuote || h.id == Habit::Backtick || h.id == Habit::SlashComment) continue;
            for (size_t start = 0; start < h.spellings.size();) {
                size_t end = std::min(h.spellings.find(' ', start), h.spellings.size());
                out.push_back({h.spellings.substr(start, end - start), h.id});
                start = end + 1;
            }
        }
        return out;
    }();
    return table;
}

// The habit operator at the start of `rest` when it is longer than any Remit punctuation there
// (so `!=` stays Remit's and `!==` is the habit); null otherwise.
const HabitOperator* habitOperatorAt(std::string_view rest, const Spelling* punctuation) {
    // Most punctuation starts no habit operator: one load decides, not a comparison with each.
    static const std::array<bool, 256> startsOne = [] {
        std::array<bool, 256> table{};
        for (const HabitOperator& op : habitOperators())
            if (!op.text.empty()) table[static_cast<unsigned char>(op.text[0])] = true;
        return table;
    }();
    if (!startsOne[static_cast<unsigned char>(rest[0])]) return nullptr;
    const HabitOperator* best = nullptr;
    size_t bestLength = punctuation ? punctuation->text.size() : 0;
    for (const HabitOperator& op : habitOperators())
        if (op.text.size() > bestLength && rest.substr(0, op.text.size()) == op.text) {
            best = &op;
            bestLength = op.text.size();
        }
    return best;
}

constexpr bool keywordsStartLowercase() {
    for (const Spelling& k : kKeywords)
        if (k.text.empty() || k.text[0] < 'a' || k.text[0] > 'z') return false;
    return true;
}
static_assert(keywordsStartLowercase(), "keywordKind indexes keywords by their first letter, a to z");

// Keyword or identifier. Keywords are lowercase: indexed by first letter, a word is compared
// with at most a few of them (cheaper than hashing every word, which was a tenth of lexing).
Tok keywordKind(std::string_view word) {
    static const std::array<std::vector<Spelling>, 26> byFirst = [] {
        std::array<std::vector<Spelling>, 26> table;
        for (const Spelling& k : kKeywords) table[static_cast<size_t>(k.text[0] - 'a')].push_back(k);
        return table;
    }();
    if (word.empty() || word[0] < 'a' || word[0] > 'z') return Tok::Ident;
    for (const Spelling& k : byFirst[static_cast<size_t>(word[0] - 'a')])
        if (k.text == word) return k.kind;
    return Tok::Ident;
}

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isIdentChar(char c) { return isIdentStart(c) || isDigit(c); }

// A literal as a message quotes it: whole when short, else its start and end (a 400-digit literal
// would make the message unreadable).
std::string shortLiteral(std::string_view text) {
    if (text.size() <= 40) return std::string(text);
    return fmt::format("{}...{} ({} characters)", text.substr(0, 20), text.substr(text.size() - 10), text.size());
}

// A large program's tokens take megabytes (64 bytes each, about one per three bytes of source),
// written once from start to end: asking for transparent huge pages there halves the page faults
// of a `remitc check` of a 10 k-line program, which were a fifth of its time. Only the 2 MiB
// stretches inside the buffer are advised; where huge pages are off, the call changes nothing.
void adviseHugePages(void* start, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    constexpr uintptr_t kHuge = uintptr_t(2) << 20;
    if (bytes < 2 * kHuge) return;
    uintptr_t from = (reinterpret_cast<uintptr_t>(start) + kHuge - 1) & ~(kHuge - 1);
    uintptr_t to = (reinterpret_cast<uintptr_t>(start) + bytes) & ~(kHuge - 1);
    if (to > from) (void)madvise(reinterpret_cast<void*>(from), to - from, MADV_HUGEPAGE);
#else
    (void)start;
    (void)bytes;
#endif
}

class Lexer {
public:
    Lexer(std::string_view text, std::string_view file, const FrontendLimits& limits, DiagnosticList& diags,
          uint32_t line, uint32_t col, bool isFragment)
        : src_(text), file_(file), limits_(limits), diags_(diags), line_(line), col_(col), isFragment_(isFragment) {}

    LexResult run() {
        // At most one token per two bytes of source in practice (the generated 10 k-line benchmark
        // has one per 3.2): one allocation instead of a doubling series, whose copies and page
        // faults cost more than reserving address space the kernel maps only when it is written.
        out_.tokens.reserve(std::min(src_.size() / 2 + 8, limits_.maxTokens + 2));
        adviseHugePages(out_.tokens.data(), out_.tokens.capacity() * sizeof(Token));
        if (!isFragment_ && !checkWholeFile()) {
            finish();
            return std::move(out_);
        }
        while (pos_ < src_.size() && !out_.fatal) step();
        finish();
        return std::move(out_);
    }

private:
    std::string_view src_;
    std::string_view file_;
    const FrontendLimits& limits_;
    DiagnosticList& diags_;
    size_t pos_ = 0;
    uint32_t line_, col_;
    bool isFragment_;
    uint32_t lastCodeLine_ = 0;     // the line of the last non-newline token (for trailing comments)
    std::vector<char> brackets_;    // open ( [ { in order
    size_t errors_ = 0;
    LexResult out_;

    void error(DiagCode code, std::string message, Span span, std::string hint = {}, Json details = nullptr) {
        // Past the error cap nothing new would be shown: stop rather than scan a hostile file.
        if (++errors_ >= limits_.maxErrors) out_.fatal = true;
        Diagnostic d = makeDiagnostic(code, std::move(message), std::string(file_), span, std::move(hint));
        d.details = std::move(details);
        diags_.add(std::move(d));
    }
    void fatal(DiagCode code, std::string message, Span span, std::string hint = {}, Json details = nullptr) {
        error(code, std::move(message), span, std::move(hint), std::move(details));
        out_.fatal = true;
    }
    // The payload of an E0003: which front-end limit, and its value.
    static Json limitDetails(std::string_view limit, size_t value) { return {{"limit", limit}, {"value", value}}; }
    Span here(uint32_t width = 1) const { return Span{line_, col_, line_, col_ + width}; }

    // Encoding and per-line limits are checked once over the whole file, before any token.
    bool checkWholeFile() {
        if (src_.size() > limits_.maxSourceBytes) {
            fatal(DiagCode::E0003,
                  // The caller may have read only the first maxSourceBytes + 1 bytes of a huge file.
                  fmt::format("source is over the limit of {} bytes", limits_.maxSourceBytes), Span{1, 1, 1, 2},
                  "split the program, or move data into inputs and fixtures",
                  limitDetails("source_bytes", limits_.maxSourceBytes));
            return false;
        }
        uint32_t line = 1, col = 1;
        size_t lineStart = 0;
        bool overLong = false;
        for (size_t i = 0; i < src_.size();) {
            if (src_[i] == '\n') {
                if (i - lineStart > limits_.maxLineBytes) {
                    overLong = true;
                    break;
                }
                ++line;
                col = 1;
                lineStart = ++i;
                continue;
            }
            size_t len = static_cast<unsigned char>(src_[i]) < 0x80 ? 1 : utf8SequenceLength(src_, i);
            if (len == 0) {
                fatal(DiagCode::E0001, "source is not valid UTF-8", Span{line, col, line, col + 1},
                      "save the file as UTF-8");
                return false;
            }
            i += len;
            ++col;
        }
        // Report the first over-long line (if the loop stopped early, or the last line is long).
        if (!overLong && src_.size() - lineStart <= limits_.maxLineBytes) return true;
        line = 1;
        lineStart = 0;
        for (size_t i = 0; i <= src_.size(); ++i) {
            if (i == src_.size() || src_[i] == '\n') {
                if (i - lineStart > limits_.maxLineBytes) {
                    fatal(DiagCode::E0003,
                          fmt::format("line {} is {} bytes long, over the limit of {} bytes", line, i - lineStart,
                                      limits_.maxLineBytes),
                          Span{line, 1, line, 2}, "break the line, or move long text into inputs",
                          limitDetails("line_bytes", limits_.maxLineBytes));
                    return false;
                }
                ++line;
                lineStart = i + 1;
            }
        }
        return true;
    }

    void push(Token token) {
        if (out_.tokens.size() >= limits_.maxTokens) {
            fatal(DiagCode::E0003, fmt::format("more than {} tokens", limits_.maxTokens), token.span,
                  "split the program into smaller programs", limitDetails("tokens", limits_.maxTokens));
            return;
        }
        if (token.kind != Tok::Newline) lastCodeLine_ = token.span.endLine;
        out_.tokens.push_back(std::move(token));
    }

    Token make(Tok kind, size_t begin, Span span) const {
        Token t;
        t.kind = kind;
        t.span = span;
        t.text = src_.substr(begin, pos_ - begin);
        return t;
    }

    bool newlinesSignificant() const { return brackets_.empty() || brackets_.back() == '{'; }

    void finish() {
        Span end{line_, col_, line_, col_};
        if (out_.tokens.empty() || out_.tokens.back().kind != Tok::Newline) {
            Token nl;
            nl.kind = Tok::Newline;
            nl.span = end;
            out_.tokens.push_back(nl);
        }
        Token eof;
        eof.kind = Tok::Eof;
        eof.span = end;
        out_.tokens.push_back(eof);
    }

    // Advance over one code point on the current line.
    void advanceChar() {
        size_t len = utf8SequenceLength(src_, pos_);
        pos_ += len ? len : 1;
        ++col_;
    }

    void step() {
        char c = src_[pos_];
        if (c == '\n') {
            if (newlinesSignificant() && !out_.tokens.empty() && out_.tokens.back().kind != Tok::Newline) {
                Token nl;
                nl.kind = Tok::Newline;
                nl.span = here();
                nl.text = src_.substr(pos_, 1);
                out_.tokens.push_back(nl);
            }
            ++pos_;
            ++line_;
            col_ = 1;
            return;
        }
        if (c == ' ' || c == '\t' || c == '\r') {
            size_t start = pos_;
            while (pos_ < src_.size() && (src_[pos_] == ' ' || src_[pos_] == '\t' || src_[pos_] == '\r')) ++pos_;
            col_ += static_cast<uint32_t>(pos_ - start);
            return;
        }
        if (c == '#') return lexComment();
        if (isDigit(c)) return lexNumber();
        if (isIdentStart(c)) return lexWord();
        if (c == '"') return lexString();
        // `//` opening a line is a comment of another language (mid-line it is an operator).
        if (c == '/' && src_.substr(pos_, 2) == "//" && lastCodeLine_ != line_) return lexSlashComment();
        if ((c == '\'' || c == '`') && lexOtherQuotes(c)) return;
        const Spelling* p = punctuationAt(src_.substr(pos_));
        if (const HabitOperator* h = habitOperatorAt(src_.substr(pos_), p)) return lexHabitOperator(*h);
        if (p) return lexPunctuation(*p);
        Span span = here();
        std::string shown = c >= 0x20 && c < 0x7F ? fmt::format("'{}'", c)
                                                  : std::string(src_.substr(pos_, std::max<size_t>(1, utf8SequenceLength(src_, pos_))));
        if (static_cast<unsigned char>(c) < 0x20) shown = fmt::format("U+{:04X}", static_cast<int>(c));
        else if (static_cast<unsigned char>(c) >= 0x80) shown = fmt::format("'{}'", shown);
        advanceChar();
        error(DiagCode::E0001, fmt::format("unexpected character {}", shown), span,
              c == '\'' ? "strings use double quotes" : "");
    }

    void lexComment() {
        size_t begin = pos_;
        Span start = here();
        if (isFragment_) {
            fatal(DiagCode::E0001, "a comment cannot appear inside a string interpolation", start,
                  "bind the value with let first, then interpolate the name");
            return;
        }
        size_t end = src_.find('\n', pos_);
        if (end == std::string_view::npos) end = src_.size();
        std::string_view text = src_.substr(begin, end - begin);
        while (!text.empty() && text.back() == '\r') text.remove_suffix(1);
        uint32_t width = static_cast<uint32_t>(codePointCount(text));
        Comment comment;
        comment.text = std::string(text);
        comment.span = Span{line_, col_, line_, col_ + width};
        comment.trailing = lastCodeLine_ == line_;
        out_.comments.push_back(std::move(comment));
        col_ += static_cast<uint32_t>(codePointCount(src_.substr(begin, end - begin)));
        pos_ = end;
    }

    void lexHabitOperator(const HabitOperator& op) {
        size_t begin = pos_;
        Span span = here(static_cast<uint32_t>(op.text.size()));
        pos_ += op.text.size();
        col_ += static_cast<uint32_t>(op.text.size());
        Token t = make(Tok::Habit, begin, span);
        t.habit = op.habit;
        push(t);
    }

    // `// text` at the start of a line: reported once, and the line read as the comment it was
    // meant to be, so the parser does not see two slashes.
    void lexSlashComment() {
        Span span = here(2);
        size_t end = src_.find('\n', pos_);
        if (end == std::string_view::npos) end = src_.size();
        std::string_view text = src_.substr(pos_ + 2, end - pos_ - 2);
        HabitNames names;
        if (auto shown = habitSnippet(text)) names.emplace_back("text", *shown);
        HabitText h = renderHabit(Habit::SlashComment, "//", names);
        error(DiagCode::E0001, std::move(h.message), span, std::move(h.hint));
        col_ += static_cast<uint32_t>(codePointCount(src_.substr(pos_, end - pos_)));
        pos_ = end;
    }

    // 'text' and `text`: other languages' strings, closed on the same line. One E0001 names the
    // Remit spelling, and an empty string token stands in so the parser goes on without a
    // cascade. False (nothing consumed) when the quote is not closed on its line: a stray
    // character.
    bool lexOtherQuotes(char quote) {
        size_t lineEnd = src_.find('\n', pos_);
        if (lineEnd == std::string_view::npos) lineEnd = src_.size();
        size_t close = src_.find(quote, pos_ + 1);
        if (close == std::string_view::npos || close >= lineEnd) return false;
        size_t begin = pos_;
        Span start = here();
        std::string_view body = src_.substr(pos_ + 1, close - pos_ - 1);
        std::string text;
        for (size_t i = 0; i < body.size(); ++i) {
            if (quote == '`' && body[i] == '$' && i + 1 < body.size() && body[i + 1] == '{') continue;  // ${x} is {x}
            if (body[i] == '"' && (i == 0 || body[i - 1] != '\\')) text += '\\';
            text += body[i];
        }
        col_ += static_cast<uint32_t>(codePointCount(src_.substr(pos_, close + 1 - pos_)));
        pos_ = close + 1;
        Span span{start.line, start.col, line_, col_};
        HabitNames names;
        if (auto shown = habitSnippet(text)) names.emplace_back("text", *shown);
        HabitText h = renderHabit(quote == '`' ? Habit::Backtick : Habit::SingleQuote, std::string(1, quote), names);
        error(DiagCode::E0001, std::move(h.message), span, std::move(h.hint));
        pushPlaceholderString(begin, start);
        return true;
    }

    void lexPunctuation(const Spelling& p) {
        size_t begin = pos_;
        Span span = here(static_cast<uint32_t>(p.text.size()));
        pos_ += p.text.size();
        col_ += static_cast<uint32_t>(p.text.size());
        if (p.kind == Tok::LParen || p.kind == Tok::LBracket || p.kind == Tok::LBrace) {
            if (brackets_.size() >= limits_.maxNesting) {
                fatal(DiagCode::E0003, fmt::format("nesting deeper than {} levels", limits_.maxNesting), span,
                      "flatten the expression with let bindings or helper functions",
                      limitDetails("nesting", limits_.maxNesting));
                return;
            }
            brackets_.push_back(p.text[0]);
        } else if (p.kind == Tok::RParen || p.kind == Tok::RBracket || p.kind == Tok::RBrace) {
            if (!brackets_.empty()) brackets_.pop_back();
        }
        push(make(p.kind, begin, span));
    }

    void lexWord() {
        size_t begin = pos_;
        Span start = here();
        while (pos_ < src_.size() && isIdentChar(src_[pos_])) ++pos_;
        uint32_t width = static_cast<uint32_t>(pos_ - begin);
        col_ += width;
        Span span{start.line, start.col, start.line, start.col + width};
        std::string_view word = src_.substr(begin, pos_ - begin);
        if (word.size() > limits_.maxIdentifierLength) {
            error(DiagCode::E0003,
                  fmt::format("identifier is {} characters long, over the limit of {}", word.size(),
                              limits_.maxIdentifierLength),
                  span, "use a shorter name", limitDetails("identifier_length", limits_.maxIdentifierLength));
        }
        Tok kind = keywordKind(word);
        push(make(kind, begin, span));
    }

    void lexNumber() {
        size_t begin = pos_;
        Span start = here();
        auto scanDigits = [&] {
            while (pos_ < src_.size() && (isDigit(src_[pos_]) || src_[pos_] == '_')) ++pos_;
        };
        scanDigits();
        bool isFloat = false;
        if (pos_ + 1 < src_.size() && src_[pos_] == '.' && isDigit(src_[pos_ + 1])) {
            isFloat = true;
            ++pos_;
            scanDigits();
        }
        std::string_view body = src_.substr(begin, pos_ - begin);
        auto spanTo = [&](size_t end) {
            return Span{start.line, start.col, start.line, start.col + static_cast<uint32_t>(end - begin)};
        };
        auto followedByWordChar = [&](size_t at) { return at < src_.size() && isIdentChar(src_[at]); };
        // A duration: 500ms, 10s, 2m (only meaningful after `timeout`; the parser says so).
        double durationScale = 0;
        size_t suffix = 0;
        if (src_.substr(pos_, 2) == "ms" && !followedByWordChar(pos_ + 2)) { durationScale = 0.001; suffix = 2; }
        else if (pos_ < src_.size() && (src_[pos_] == 's' || src_[pos_] == 'm') && !followedByWordChar(pos_ + 1)) {
            durationScale = src_[pos_] == 's' ? 1.0 : 60.0;
            suffix = 1;
        }
        if (suffix == 0 && followedByWordChar(pos_)) {
            size_t end = pos_;
            while (end < src_.size() && isIdentChar(src_[end])) ++end;
            pos_ = end;
            col_ = start.col + static_cast<uint32_t>(end - begin);
            error(DiagCode::E0001, fmt::format("invalid number literal '{}'", src_.substr(begin, end - begin)),
                  spanTo(end), "separate the number from the name, or remove the letters");
            push(make(Tok::Int, begin, spanTo(end)));  // a placeholder, so the parser does not cascade
            return;
        }
        // Underscores only between digits: 1_000 yes, 1_ and 1__0 no.
        std::string digits;
        bool badUnderscore = false;
        for (size_t i = 0; i < body.size(); ++i) {
            if (body[i] == '_') {
                bool between = i > 0 && i + 1 < body.size() && isDigit(body[i - 1]) && isDigit(body[i + 1]);
                if (!between) badUnderscore = true;
                continue;
            }
            digits += body[i];
        }
        pos_ += suffix;
        col_ = start.col + static_cast<uint32_t>(pos_ - begin);
        Span span = spanTo(pos_);
        if (badUnderscore) {
            error(DiagCode::E0001, fmt::format("invalid number literal '{}'", src_.substr(begin, pos_ - begin)), span,
                  "underscores may only separate digits, as in 1_000");
            push(make(Tok::Int, begin, span));
            return;
        }
        Token t = make(Tok::Int, begin, span);
        if (isFloat || suffix) {
            double value = 0;
            // from_chars leaves `value` alone when the literal is out of range (it used to stay
            // 0.0, so 1e309 written out in digits was silently zero, and a host `cost` of it free).
            auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
            bool outOfRange = ec == std::errc::result_out_of_range;
            // Out of range with a non-zero digit before the point: too large; else it underflows.
            bool tooLarge = outOfRange && digits.find_first_not_of('0') < digits.find('.');
            if (suffix) {
                t.kind = Tok::Duration;
                value *= durationScale;
            } else {
                t.kind = Tok::Float;
            }
            std::string shown = shortLiteral(t.text);
            if (tooLarge || (!outOfRange && !std::isfinite(value))) {
                error(DiagCode::E0001, fmt::format("number literal '{}' is too large", shown), span,
                      "a Float is at most about 1.8 x 10^308, a number of 309 digits before the point");
                value = 0;
            } else if (outOfRange) {
                error(DiagCode::E0001, fmt::format("number literal '{}' is too small to be a Float", shown), span,
                      "the smallest Float above 0.0 is about 4.9 x 10^-324; write 0.0 if you mean zero");
                value = 0;
            }
            t.floatValue = value;
        } else {
            auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), t.intValue);
            if (ec != std::errc()) {
                error(DiagCode::E0001, fmt::format("integer literal '{}' does not fit in 64 bits", t.text), span,
                      "Int is a 64-bit signed integer");
                t.intValue = 0;
            }
        }
        push(std::move(t));
    }

    // After a broken string literal: an empty string token in its place, so the parser goes on
    // without a cascade of follow-on errors.
    void pushPlaceholderString(size_t begin, const Span& start) {
        Token t = make(Tok::Str, begin, Span{start.line, start.col, line_, col_});
        t.strIndex = static_cast<uint32_t>(out_.strings.size());
        out_.strings.emplace_back(1);
        push(t);
    }

    void lexString() {
        size_t begin = pos_;
        Span start = here();
        ++pos_;
        ++col_;
        std::vector<StrPiece> pieces;
        std::string buffer;
        auto flush = [&] {
            if (!buffer.empty()) {
                StrPiece piece;
                piece.text = std::move(buffer);
                pieces.push_back(std::move(piece));
                buffer.clear();
            }
        };
        // On an error inside the string, skip to its end (or the end of the line) and go on.
        auto abandon = [&] {
            while (pos_ < src_.size() && src_[pos_] != '\n') {
                if (src_[pos_] == '\\' && pos_ + 1 < src_.size() && src_[pos_ + 1] != '\n') {
                    pos_ += 2;
                    col_ += 2;
                    continue;
                }
                bool quote = src_[pos_] == '"';
                advanceChar();
                if (quote) break;
            }
        };
        while (true) {
            if (pos_ >= src_.size() || src_[pos_] == '\n') {
                error(DiagCode::E0001, "unterminated string literal", Span{start.line, start.col, start.line, start.col + 1},
                      "close the string with \" (strings cannot span lines; use \\n)");
                pushPlaceholderString(begin, start);
                return;
            }
            char c = src_[pos_];
            if (c == '"') {
                ++pos_;
                ++col_;
                break;
            }
            if (c == '\\') {
                Span escSpan = here(2);
                char e = pos_ + 1 < src_.size() ? src_[pos_ + 1] : '\0';
                char decoded = 0;
                switch (e) {
                    case 'n': decoded = '\n'; break;
                    case 't': decoded = '\t'; break;
                    case '"': decoded = '"'; break;
                    case '\\': decoded = '\\'; break;
                    case '{': decoded = '{'; break;
                    case '}': decoded = '}'; break;
                    default: break;
                }
                if (!decoded) {
                    std::string shown = e == '\n' || e == '\0' ? std::string("\\") : fmt::format("\\{}", e);
                    error(DiagCode::E0001, fmt::format("unknown escape '{}'", shown), escSpan,
                          "valid escapes: \\n \\t \\\" \\\\ \\{ \\}");
                    abandon();
                    pushPlaceholderString(begin, start);
                    return;
                }
                buffer += decoded;
                pos_ += 2;
                col_ += 2;
                continue;
            }
            if (c == '{') {
                Span open = here();
                size_t exprBegin = pos_ + 1;
                size_t k = exprBegin;
                int depth = 1;
                bool bad = false;
                while (k < src_.size() && depth > 0) {
                    char kc = src_[k];
                    if (kc == '{') ++depth;
                    else if (kc == '}') --depth;
                    else if (kc == '\n') { bad = true; break; }
                    else if (kc == '"') {
                        // The string's own closing quote (none follows on the line) means the
                        // brace was never closed; another quote means a nested string.
                        size_t lineEnd = src_.find('\n', k);
                        std::string_view rest = src_.substr(k + 1, lineEnd == std::string_view::npos ? std::string_view::npos : lineEnd - k - 1);
                        if (rest.find('"') == std::string_view::npos) depth = -1;
                        else bad = true;
                        break;
                    }
                    ++k;
                }
                if (bad) {
                    error(DiagCode::E0001,
                          "string interpolation must be a simple expression on one line without quotes", open,
                          "bind the value with let first, then interpolate the name");
                    // A quote inside braces usually means a nested string: the literal most
                    // likely ends at the last quote on this line.
                    size_t lineEnd = src_.find('\n', pos_);
                    if (lineEnd == std::string_view::npos) lineEnd = src_.size();
                    size_t lastQuote = src_.substr(0, lineEnd).rfind('"');
                    if (lastQuote != std::string_view::npos && lastQuote > k) {
                        col_ += static_cast<uint32_t>(codePointCount(src_.substr(pos_, lastQuote + 1 - pos_)));
                        pos_ = lastQuote + 1;
                    } else {
                        abandon();
                    }
                    pushPlaceholderString(begin, start);
                    return;
                }
                if (depth != 0) {
                    error(DiagCode::E0001, "unclosed '{' in string interpolation", open,
                          "close it with }, or write \\{ for a literal brace");
                    abandon();  // stops after the string's closing quote
                    pushPlaceholderString(begin, start);
                    return;
                }
                flush();
                StrPiece piece;
                piece.isExpr = true;
                piece.text = std::string(src_.substr(exprBegin, k - 1 - exprBegin));
                piece.line = open.line;
                piece.col = open.col + 1;
                pieces.push_back(std::move(piece));
                col_ += static_cast<uint32_t>(codePointCount(src_.substr(pos_, k - pos_)));
                pos_ = k;
                continue;
            }
            if (c == '}') {
                error(DiagCode::E0001, "unmatched '}' in string", here(), "write \\} for a literal brace");
                abandon();
                pushPlaceholderString(begin, start);
                return;
            }
            size_t len = utf8SequenceLength(src_, pos_);
            buffer.append(src_.substr(pos_, len ? len : 1));
            advanceChar();
        }
        if (!buffer.empty() || pieces.empty()) {
            StrPiece piece;
            piece.text = std::move(buffer);
            pieces.push_back(std::move(piece));
        }
        Token t = make(Tok::Str, begin, Span{start.line, start.col, line_, col_});
        t.strIndex = static_cast<uint32_t>(out_.strings.size());
        out_.strings.push_back(std::move(pieces));
        push(t);
    }
};

}  // namespace

bool isKeyword(Tok kind) { return kind >= Tok::KwProgram; }

std::string_view tokenSpelling(Tok kind) {
    for (const Spelling& p : kPunctuation)
        if (p.kind == kind) return p.text;
    for (const Spelling& k : kKeywords)
        if (k.kind == kind) return k.text;
    switch (kind) {
        case Tok::Eof: return "end of file";
        case Tok::Newline: return "end of line";
        case Tok::Ident: return "name";
        case Tok::Int: return "integer";
        case Tok::Float: return "number";
        case Tok::Str: return "string literal";
        case Tok::Duration: return "duration";
        default: return "token";
    }
}

std::string describeToken(const Token& token) {
    switch (token.kind) {
        case Tok::Eof: return "end of file";
        case Tok::Newline: return "end of line";
        case Tok::Str: return "string literal";
        default: return fmt::format("'{}'", token.text);
    }
}

LexResult lex(std::string_view text, std::string_view file, const FrontendLimits& limits, DiagnosticList& diags,
              uint32_t startLine, uint32_t startCol, bool isFragment) {
    return Lexer(text, file, limits, diags, startLine, startCol, isFragment).run();
}

}  // namespace remit
