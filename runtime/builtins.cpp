// The builtins of Remit (runtime/builtins.h has the table, the semantics and the labelling rules).
// One function per builtin, `builtin<Id>`, reached through a switch generated from builtins.def.
//
// Behaviour is Python 3.11's, as the prototype's interpreter calls it, with the changes
// docs/language.md lists (decisions 18–26, 39–45) — 64-bit Int, finite Float, min/max of a list,
// R0101 for split's empty separator — and these decisions of ours, each marked where it is made:
//   - take(xs, N) with a negative N is empty (Python's xs[:N] drops |N| items from the end);
//   - error messages quote strings as Python's repr does for the common cases, cut at 200 code
//     points (Python cuts only int()'s);
//   - str(x) follows ops.h toStr (deep labels, decision 45), not the prototype's top-level ones.
// Python's Unicode behaviour (case mappings, whitespace, digits) comes from tables generated out
// of Python itself (runtime/unicode_tables.inc, scripts/gen-unicode-tables).
//
// Every builtin checks its arguments' kinds — the checker guarantees them for compiled programs,
// but bytecode may be forged — and fails with R0101 "'name' expects ..." instead of trusting them.
// Texts are built through the Heap in chunks, so the memory budget bounds every result (R0701).
#include "runtime/builtins.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/numfmt.h"
#include "runtime/ops.h"
#include "runtime/pytext.h"

namespace remit {

namespace {

__extension__ typedef __int128 Int128;  // GCC/Clang; __extension__ keeps -Wpedantic quiet

// ---- Unicode data, generated from Python (the row types are the .inc file's contract).

struct CaseRun {
    char32_t first;
    char32_t last;
    uint8_t stride;  // 1, or 2 for alternating upper/lower pairs
    int32_t delta;   // first + k*stride maps to itself + delta
};
struct SpecialCase {
    char32_t codePoint;
    char32_t mapped[3];  // 0-padded
};
struct CodeRange {
    char32_t first;
    char32_t last;
};
struct DigitRun {
    char32_t first;
    char32_t last;
    int value;  // of `first`; the run counts up from it
};

#include "runtime/unicode_tables.inc"

// The row of a table sorted by `first` whose range holds c, if any.
template <class Row>
const Row* findRun(std::span<const Row> table, char32_t c) {
    auto after = std::upper_bound(table.begin(), table.end(), c, [](char32_t x, const Row& row) { return x < row.first; });
    if (after == table.begin()) return nullptr;
    const Row& row = *(after - 1);
    return c <= row.last ? &row : nullptr;
}

bool inRanges(std::span<const CodeRange> table, char32_t c) { return findRun(table, c) != nullptr; }

// One direction of case mapping: the one-code-point runs and the longer special mappings.
struct CaseMapping {
    std::span<const CaseRun> runs;
    std::span<const SpecialCase> specials;

    // Python's full mapping of c, appended to `out` as code points.
    template <class Put>
    bool map(char32_t c, Put&& put) const {
        auto special = std::lower_bound(specials.begin(), specials.end(), c,
                                        [](const SpecialCase& row, char32_t x) { return row.codePoint < x; });
        if (special != specials.end() && special->codePoint == c) {
            for (char32_t m : special->mapped)
                if (m != 0 && !put(m)) return false;
            return true;
        }
        const CaseRun* run = findRun(runs, c);
        if (run && (c - run->first) % run->stride == 0) c = static_cast<char32_t>(static_cast<int32_t>(c) + run->delta);
        return put(c);
    }
};

constexpr CaseMapping kLowerMapping{kLowerRuns, kLowerSpecial};
constexpr CaseMapping kUpperMapping{kUpperRuns, kUpperSpecial};

// str.isspace: what str.strip() removes.
bool isSpace(char32_t c) {
    if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
    return inRanges(kSpace, c);
}

// The whitespace of C's isspace in the C locale, which Python's number parsers skip once the
// other Unicode spaces have become ' ' (so "\x1c5" is not an int, though "\x1c".isspace()).
bool isAsciiSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

bool isDigit(char c) { return c >= '0' && c <= '9'; }

// ---- UTF-8. Strings are valid UTF-8 (value.h); a malformed byte still decodes, as the code point
// of the same number, so that a bug elsewhere can garble text but never read out of bounds.

char32_t decodeUtf8(std::string_view text, size_t& at) {
    auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
    unsigned char lead = byte(at);
    size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
    if (length == 0 || at + length > text.size()) {
        ++at;
        return lead;
    }
    char32_t c = length == 1 ? lead : lead & (0x7F >> length);
    for (size_t i = 1; i < length; ++i) {
        if ((byte(at + i) & 0xC0) != 0x80) {
            ++at;
            return lead;
        }
        c = (c << 6) | (byte(at + i) & 0x3F);
    }
    at += length;
    return c;
}

// The code point that ends just before `end`, moving `end` to its start.
char32_t decodeUtf8Before(std::string_view text, size_t& end) {
    size_t start = end - 1;
    while (start > 0 && end - start < 4 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    size_t at = start;
    char32_t c = decodeUtf8(text, at);
    if (at != end) {  // malformed: step back one byte only
        start = end - 1;
        c = static_cast<unsigned char>(text[start]);
    }
    end = start;
    return c;
}

void appendUtf8(std::string& out, char32_t c) {
    if (c < 0x80) {
        out += static_cast<char>(c);
    } else if (c < 0x800) {
        out += static_cast<char>(0xC0 | (c >> 6));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += static_cast<char>(0xE0 | (c >> 12));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (c >> 18));
        out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    }
}

// len(s): code points, i.e. the bytes that do not continue a sequence.
size_t codePointCount(std::string_view text) {
    size_t count = 0;
    for (char b : text) count += (static_cast<unsigned char>(b) & 0xC0) != 0x80;
    return count;
}

// ---- Labels.

struct Labels {
    TagSetId tags = kNoTags;
    ProvId prov = kNoProv;
};

// Adds v's top-level labels. False when a label table is full (the heap holds the R0701).
bool addTop(Heap& heap, Labels& labels, const Value& v) {
    std::optional<TagSetId> tags = heap.uniteTags(labels.tags, v.tags());
    std::optional<ProvId> prov = heap.uniteProv(labels.prov, v.prov());
    if (!tags || !prov) return false;
    labels = Labels{*tags, *prov};
    return true;
}

// Adds the labels of v's contents (a container's cached deep labels; nothing for a scalar).
bool addContent(Heap& heap, Labels& labels, const Value& v) {
    std::optional<TagSetId> tags = heap.uniteTags(labels.tags, contentTags(v));
    std::optional<ProvId> prov = heap.uniteProv(labels.prov, contentProv(v));
    if (!tags || !prov) return false;
    labels = Labels{*tags, *prov};
    return true;
}

// The union of the arguments' top-level labels: what most builtins give their result.
std::optional<Labels> topLabels(Heap& heap, std::span<const Value> args) {
    Labels labels;
    for (const Value& arg : args)
        if (!addTop(heap, labels, arg)) return std::nullopt;
    return labels;
}

// The arguments' top-level labels plus the contents of `list`: join, sum, contains on a list,
// min/max of a list.
std::optional<Labels> topAndContentLabels(Heap& heap, std::span<const Value> args, const Value& list) {
    std::optional<Labels> labels = topLabels(heap, args);
    if (!labels || !addContent(heap, *labels, list)) return std::nullopt;
    return labels;
}

Value labelled(Value v, Labels labels) {
    v.setTags(labels.tags);
    v.setProv(labels.prov);
    return v;
}

// `result` with the arguments' top-level labels.
std::optional<Value> withTopLabels(Heap& heap, Value result, std::span<const Value> args) {
    std::optional<Labels> labels = topLabels(heap, args);
    if (!labels) return std::nullopt;
    return labelled(std::move(result), *labels);
}

// ---- Errors.

std::string_view nameOf(BuiltinId id) { return builtinInfo(id).name; }

std::optional<Value> evalError(Heap& heap, BuiltinId id, std::string message, Json details = Json::object()) {
    Json payload{{"builtin", nameOf(id)}};
    payload.update(details);
    heap.fail(RuntimeError{DiagCode::R0101, std::move(message), std::move(payload)});
    return std::nullopt;
}

// An argument of the wrong kind (possible only in forged bytecode): "'split' expects (Str, Str),
// not (Str, Int)".
std::optional<Value> wrongArgs(Heap& heap, BuiltinId id, std::string_view expected, std::span<const Value> args) {
    std::string got;
    for (const Value& arg : args) got += fmt::format("{}{}", got.empty() ? "" : ", ", kindName(arg.kind()));
    if (args.size() != 1) got = "(" + got + ")";
    return evalError(heap, id, fmt::format("'{}' expects {}, not {}", nameOf(id), expected, got));
}

std::string numberText(const Value& v) {
    return v.kind() == ValueKind::Int ? std::to_string(v.asInt()) : formatFloatRepr(v.asFloat());
}

// A string as Python's repr() quotes it in its error messages, for the common cases: single
// quotes unless the text holds ' and no ", backslash escapes for controls, and the non-ASCII
// whitespace and C1 controls escaped (Python escapes every non-printable character; other
// non-printable ones are rare enough in real input that we print them as they are). Cut after
// `maxCodePoints`, as Python's int() cuts its message at 200.
std::string pythonRepr(std::string_view text, size_t maxCodePoints = 200) {
    bool hasSingle = text.find('\'') != std::string_view::npos;
    char quote = hasSingle && text.find('"') == std::string_view::npos ? '"' : '\'';
    std::string out(1, quote);
    size_t count = 0;
    for (size_t at = 0; at < text.size() && count < maxCodePoints; ++count) {
        char32_t c = decodeUtf8(text, at);
        if (c == static_cast<char32_t>(quote) || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c < 0x20 || (c >= 0x7F && c < 0xA0) || (c >= 0x80 && isSpace(c))) {
            out += c < 0x100 ? fmt::format("\\x{:02x}", static_cast<uint32_t>(c))
                             : fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
        } else {
            appendUtf8(out, c);
        }
    }
    out += quote;
    return out;
}

// ---- Building text through the heap.

// Builds a heap string piecewise. Small pieces gather in a local buffer and move to the heap
// string in chunks; large pieces go straight there. The heap charges the budget as the string
// grows, so no big unaccounted copy is ever made.
class TextBuilder {
public:
    static constexpr size_t kChunk = 4096;

    TextBuilder(Heap& heap, Value str) : heap_(heap), str_(std::move(str)) {}

    bool put(std::string_view text) {
        if (text.size() >= kChunk) return flush() && heap_.appendTextInPlace(str_, text);
        pending_.append(text);
        return pending_.size() < kChunk || flush();
    }
    bool putCodePoint(char32_t c) {
        appendUtf8(pending_, c);
        return pending_.size() < kChunk || flush();
    }
    std::optional<Value> finish() {
        if (!flush()) return std::nullopt;
        return std::move(str_);
    }

private:
    Heap& heap_;
    Value str_;
    std::string pending_;

    bool flush() {
        bool ok = pending_.empty() || heap_.appendTextInPlace(str_, pending_);
        pending_.clear();
        return ok;
    }
};

std::optional<TextBuilder> startText(Heap& heap, Labels labels) {
    std::optional<Value> str = heap.makeStr({}, labels.tags, labels.prov);
    if (!str) return std::nullopt;
    return TextBuilder(heap, std::move(*str));
}

// ---- Numbers.

constexpr double kTwo63 = 9223372036854775808.0;

// An integral double as an Int, if it is in range.
std::optional<int64_t> integralToInt(double integral) {
    if (!(integral >= -kTwo63 && integral < kTwo63)) return std::nullopt;
    return static_cast<int64_t>(integral);
}

// Python's round(x) for a Float: to the nearest integer, ties to even — computed as CPython
// does (round half away, then fix exact halves), so it does not depend on the FPU's mode.
double roundHalfEven(double x) {
    double rounded = std::round(x);
    if (std::fabs(x - rounded) == 0.5) rounded = 2.0 * std::round(x / 2.0);
    return rounded;
}

// The double nearest to a decimal "[-]D*[.D*][e[+-]D+]" (at least one digit), locale-independent
// and correctly rounded, overflowing to ±inf and underflowing to ±0.0 as strtod does. (from_chars
// reports both as out of range; the number is at least 1 exactly when it overflowed.)
double decimalToDouble(std::string_view text) {
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc::result_out_of_range) return value;
    bool negative = !text.empty() && text.front() == '-';
    std::string_view mantissa = text.substr(negative ? 1 : 0);
    int64_t exponent = 0;
    if (size_t e = mantissa.find_first_of("eE"); e != std::string_view::npos) {
        std::string_view digits = mantissa.substr(e + 1);
        bool negativeExponent = !digits.empty() && digits.front() == '-';
        if (!digits.empty() && (digits.front() == '-' || digits.front() == '+')) digits.remove_prefix(1);
        for (char d : digits) exponent = std::min<int64_t>(exponent * 10 + (d - '0'), int64_t(1) << 40);
        if (negativeExponent) exponent = -exponent;
        mantissa = mantissa.substr(0, e);
    }
    size_t point = std::min(mantissa.find('.'), mantissa.size());
    std::string_view whole = mantissa.substr(0, point);
    std::string_view fraction = mantissa.substr(std::min(point + 1, mantissa.size()));
    int64_t leading;  // the decimal exponent of the leading non-zero digit
    if (size_t i = whole.find_first_not_of('0'); i != std::string_view::npos) {
        leading = static_cast<int64_t>(whole.size() - 1 - i);
    } else {
        size_t j = fraction.find_first_not_of('0');
        leading = -static_cast<int64_t>(j == std::string_view::npos ? fraction.size() : j) - 1;
    }
    double magnitude = leading + exponent >= 0 ? std::numeric_limits<double>::infinity() : 0.0;
    return negative ? -magnitude : magnitude;
}

// Python's round(x, ndigits) for a finite Float: the exact binary value of x rounded half-even at
// the ndigits-th decimal place, then converted back to the nearest double — what CPython computes
// with its correctly rounded dtoa. Non-finite (too large) results are the caller's to reject.
double roundFloatTo(double x, int64_t ndigits) {
    // CPython's cut-offs: beyond 323 digits rounding cannot change a double, and below -308 every
    // double rounds to zero (keeping its sign).
    if (ndigits > 323) return x;
    if (ndigits < -308) return std::copysign(0.0, x);
    char buffer[800];  // sign, 309 integer digits, point, 323 decimals
    if (ndigits >= 0) {
        // to_chars with a precision rounds the exact binary value, ties to even, like %.*f.
        auto [end, ec] =
            std::to_chars(buffer, buffer + sizeof buffer, x, std::chars_format::fixed, static_cast<int>(ndigits));
        return decimalToDouble(std::string_view(buffer, static_cast<size_t>(end - buffer)));
    }
    // A negative ndigits keeps the integer digits above 10^k (k = -ndigits). They are exact: the
    // integer part of a double prints exactly at precision 0, and the fraction only decides
    // whether an apparent tie (the dropped digits are exactly 5000...) is one.
    size_t k = static_cast<size_t>(-ndigits);
    double magnitude = std::fabs(x);
    double whole = std::trunc(magnitude);
    bool hasFraction = magnitude != whole;
    auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, whole, std::chars_format::fixed, 0);
    std::string digits(buffer, end);
    if (digits.size() <= k) digits.insert(0, k + 1 - digits.size(), '0');
    std::string kept = digits.substr(0, digits.size() - k);
    std::string_view dropped = std::string_view(digits).substr(digits.size() - k);
    std::string half = "5" + std::string(k - 1, '0');
    int order = dropped.compare(half);
    bool up = order > 0 || (order == 0 && (hasFraction || (kept.back() - '0') % 2 == 1));
    if (up) {
        size_t i = kept.size();
        while (i > 0 && kept[i - 1] == '9') kept[--i] = '0';
        if (i == 0) kept.insert(0, "1");
        else ++kept[i - 1];
    }
    std::string text = (std::signbit(x) ? "-" : "") + kept + "e" + std::to_string(k);
    return decimalToDouble(text);
}

// Python's round(i, ndigits) for an Int and a negative ndigits: the nearest multiple of 10^k
// (k = -ndigits), ties to even. nullopt when it leaves the Int range.
std::optional<int64_t> roundIntTo(int64_t value, int64_t ndigits) {
    if (ndigits >= 0) return value;
    // |value| < 2^63 < 5 * 10^19, so from 10^20 on everything rounds to 0.
    if (ndigits < -19) return 0;
    Int128 power = 1;
    for (int64_t i = 0; i < -ndigits; ++i) power *= 10;
    Int128 v = value;
    Int128 quotient = v / power;  // floored below, so the remainder is in [0, power)
    Int128 remainder = v % power;
    if (remainder < 0) {
        remainder += power;
        quotient -= 1;
    }
    if (2 * remainder > power || (2 * remainder == power && quotient % 2 != 0)) quotient += 1;
    Int128 rounded = quotient * power;
    if (rounded < std::numeric_limits<int64_t>::min() || rounded > std::numeric_limits<int64_t>::max())
        return std::nullopt;
    return static_cast<int64_t>(rounded);
}

// The first step of Python's int(str) and float(str) (CPython's
// _PyUnicode_TransformDecimalAndSpaceToASCII): ASCII stays, other whitespace becomes ' ', other
// decimal digits (Arabic-Indic, fullwidth, ...) become ASCII digits, and the first character that
// is none of these ends the text with '?', which no parser accepts.
std::string asciiForNumber(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t at = 0; at < text.size();) {
        char32_t c = decodeUtf8(text, at);
        if (c < 0x7F) {
            out += static_cast<char>(c);
        } else if (isSpace(c)) {
            out += ' ';
        } else if (const DigitRun* run = findRun<DigitRun>(kDecimalDigits, c)) {
            out += static_cast<char>('0' + run->value + static_cast<int>(c - run->first));
        } else {
            out += '?';
            break;
        }
    }
    return out;
}

std::string_view trimAsciiSpace(std::string_view s) {
    while (!s.empty() && isAsciiSpace(s.front())) s.remove_prefix(1);
    while (!s.empty() && isAsciiSpace(s.back())) s.remove_suffix(1);
    return s;
}

enum class ParseStatus { Ok, Invalid, OutOfRange };
// pytext::parseInt/parseFloat pass the status on as it is.
static_assert(int(ParseStatus::Invalid) == int(pytext::NumberParse::Invalid) &&
              int(ParseStatus::OutOfRange) == int(pytext::NumberParse::OutOfRange));

// Python's int(str) in base 10, on the output of asciiForNumber: whitespace around, an optional
// sign, decimal digits with single underscores between them.
ParseStatus parseIntLiteral(std::string_view ascii, int64_t& out) {
    std::string_view s = trimAsciiSpace(ascii);
    bool negative = false;
    if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
        negative = s.front() == '-';
        s.remove_prefix(1);
    }
    if (s.empty() || !isDigit(s.front())) return ParseStatus::Invalid;
    // The whole literal is validated before an overflow is reported: Python calls
    // "99999999999999999999x" invalid, and only a valid literal can be too large for us.
    uint64_t magnitude = 0;
    bool overflow = false;
    const uint64_t limit = negative ? uint64_t(1) << 63 : (uint64_t(1) << 63) - 1;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '_') {
            if (i + 1 == s.size() || !isDigit(s[i + 1])) return ParseStatus::Invalid;
            continue;
        }
        if (!isDigit(s[i])) return ParseStatus::Invalid;
        auto digit = static_cast<uint64_t>(s[i] - '0');
        if (magnitude > (limit - digit) / 10) overflow = true;
        else magnitude = magnitude * 10 + digit;
    }
    if (overflow) return ParseStatus::OutOfRange;
    out = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
    return ParseStatus::Ok;
}

bool equalsIgnoringCase(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return (x >= 'A' && x <= 'Z' ? x + 32 : x) == y;
           });
}

// Python's float(str), on the output of asciiForNumber: whitespace around; underscores only
// between two digits; an optional sign; then "inf", "infinity" or "nan" in any case (OutOfRange:
// not finite), or digits with an optional point and exponent. The digits are validated here and
// only then converted, since the C converters accept more (hex floats, locale decimal points).
ParseStatus parseFloatLiteral(std::string_view ascii, double& out) {
    std::string text;
    if (ascii.find('_') != std::string_view::npos) {
        char previous = '\0';
        for (char c : ascii) {
            if (c == '_' ? !isDigit(previous) : previous == '_' && !isDigit(c)) return ParseStatus::Invalid;
            if (c != '_') text += c;
            previous = c;
        }
        if (previous == '_') return ParseStatus::Invalid;
        ascii = text;
    }
    std::string_view s = trimAsciiSpace(ascii);
    std::string_view body = s;
    if (!body.empty() && (body.front() == '+' || body.front() == '-')) body.remove_prefix(1);
    if (equalsIgnoringCase(body, "inf") || equalsIgnoringCase(body, "infinity") || equalsIgnoringCase(body, "nan"))
        return ParseStatus::OutOfRange;
    auto digitsFrom = [&](size_t from) {
        size_t j = from;
        while (j < body.size() && isDigit(body[j])) ++j;
        return j;
    };
    size_t afterWhole = digitsFrom(0);
    size_t mantissaDigits = afterWhole;
    size_t i = afterWhole;
    if (i < body.size() && body[i] == '.') {
        size_t afterFraction = digitsFrom(i + 1);
        mantissaDigits += afterFraction - (i + 1);
        i = afterFraction;
    }
    if (mantissaDigits == 0) return ParseStatus::Invalid;
    if (i < body.size() && (body[i] == 'e' || body[i] == 'E')) {
        size_t j = i + 1;
        if (j < body.size() && (body[j] == '+' || body[j] == '-')) ++j;
        size_t afterExponent = digitsFrom(j);
        if (afterExponent == j) return ParseStatus::Invalid;
        i = afterExponent;
    }
    if (i != body.size()) return ParseStatus::Invalid;
    bool negative = s.front() == '-';
    double magnitude = decimalToDouble(body);  // body has no sign: from_chars takes no '+'
    out = negative ? -magnitude : magnitude;
    return std::isfinite(out) ? ParseStatus::Ok : ParseStatus::OutOfRange;
}

// ---- Hashing for unique: consistent with valuesEqual, so equal values (1 and 1.0 included)
// always share a bucket; the buckets are then settled with valuesEqual itself.

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// A scalar's own hash; a container contributes only its kind and size.
uint64_t shallowHash(const Value& v) {
    switch (v.kind()) {
        case ValueKind::Unit:
            return mix(1);
        case ValueKind::Bool:
            return mix(2 + static_cast<uint64_t>(v.asBool()));
        case ValueKind::Int:
            return mix(static_cast<uint64_t>(v.asInt()) ^ 0x5555);
        case ValueKind::Float: {
            // An integral Float hashes as the Int it equals (and -0.0 as 0).
            double f = v.asFloat();
            if (std::trunc(f) == f) {
                if (std::optional<int64_t> i = integralToInt(f)) return mix(static_cast<uint64_t>(*i) ^ 0x5555);
            }
            return mix(std::bit_cast<uint64_t>(f) ^ 0xAAAA);
        }
        case ValueKind::Str:
            return std::hash<std::string_view>{}(v.asStr());
        case ValueKind::List:
            return mix(v.asList().items.size() ^ 0x1111);
        case ValueKind::Record:
            return mix(v.asRecord().values.size() ^ 0x2222);
    }
    return 0;
}

// The bytes shallowHash reads.
size_t shallowHashWork(const Value& v) { return v.kind() == ValueKind::Str ? v.asStr().size() : sizeof(Value); }

// The bytes equalityHash reads, for the work it is charged: its strings in full.
size_t equalityHashWork(const Value& v) {
    size_t bytes = shallowHashWork(v);
    if (v.kind() == ValueKind::List) {
        const auto& items = v.asList().items;
        for (size_t i = 0; i < std::min<size_t>(items.size(), 16); ++i) bytes += shallowHashWork(items[i]);
    } else if (v.kind() == ValueKind::Record) {
        const RecordObject& record = v.asRecord();
        for (size_t i = 0; i < record.values.size(); ++i)
            bytes += record.shape->names[i].size() + shallowHashWork(record.values[i]);
    }
    return bytes;
}

// One level into containers: a list's first few items in order, a record's fields as a set of
// (name, value) pairs (records compare as maps). Cheap, and enough to spread lists of records or
// of small lists; deeper structure is left to valuesEqual.
uint64_t equalityHash(const Value& v) {
    uint64_t h = shallowHash(v);
    if (v.kind() == ValueKind::List) {
        const auto& items = v.asList().items;
        for (size_t i = 0; i < std::min<size_t>(items.size(), 16); ++i) h = mix(h * 31 + shallowHash(items[i]));
    } else if (v.kind() == ValueKind::Record) {
        const RecordObject& record = v.asRecord();
        uint64_t fields = 0;
        for (size_t i = 0; i < record.values.size(); ++i)
            fields += mix(std::hash<std::string_view>{}(record.shape->names[i]) ^ shallowHash(record.values[i]));
        h = mix(h ^ fields);
    }
    return h;
}

// ---- The builtins, in builtins.def order.

std::optional<Value> builtinLen(Heap& heap, std::span<const Value> args) {
    const Value& x = args[0];
    size_t length;
    if (x.kind() == ValueKind::Str) {
        if (!heap.work(x.asStr().size())) return std::nullopt;  // code points are counted
        length = codePointCount(x.asStr());
    } else if (x.kind() == ValueKind::List) {
        length = x.asList().items.size();
    } else {
        return wrongArgs(heap, BuiltinId::Len, "a List or Str", args);
    }
    return withTopLabels(heap, Value::integer(static_cast<int64_t>(length)), args);
}

std::optional<Value> builtinTake(Heap& heap, std::span<const Value> args) {
    const Value& xs = args[0];
    const Value& n = args[1];
    if (xs.kind() != ValueKind::List || n.kind() != ValueKind::Int)
        return wrongArgs(heap, BuiltinId::Take, "(List, Int)", args);
    std::optional<Labels> labels = topLabels(heap, args);
    if (!labels) return std::nullopt;
    const auto& items = xs.asList().items;
    // Decision: a negative N takes nothing. Python's xs[:N] would drop |N| items from the end,
    // but the checker bounds take's result by max(0, N), and only the empty list fits that.
    size_t count = n.asInt() <= 0 ? 0 : static_cast<size_t>(std::min<uint64_t>(n.asInt(), items.size()));
    if (count == items.size()) return labelled(xs, *labels);  // shares the (immutable) items
    return heap.makeList(std::span<const Value>(items.data(), count), labels->tags, labels->prov);
}

std::optional<Value> builtinRange(Heap& heap, std::span<const Value> args) {
    if (args[0].kind() != ValueKind::Int) return wrongArgs(heap, BuiltinId::Range, "an Int", args);
    int64_t n = std::max<int64_t>(args[0].asInt(), 0);
    // Untagged, as in the prototype. The capacity is charged up front, so a huge N is R0701 before
    // anything is allocated.
    std::optional<Value> out = heap.newList(static_cast<size_t>(n));
    if (!out) return std::nullopt;
    for (int64_t i = 0; i < n; ++i)
        if (!heap.appendInPlace(*out, Value::integer(i))) return std::nullopt;
    return out;
}

std::optional<Value> builtinStr(Heap& heap, std::span<const Value> args) { return toStr(heap, args[0]); }

// Python's full case mapping of `text` (str.lower or str.upper), code point by code point, each
// one handed to `put` (false from `put` stops the walk and is returned).
template <class Put>
bool mapCase(std::string_view text, bool upper, Put&& put) {
    for (size_t at = 0; at < text.size();) {
        size_t start = at;
        char32_t c = decodeUtf8(text, at);
        bool ok;
        if (c < 0x80) {
            if (upper && c >= 'a' && c <= 'z') c -= 32;
            if (!upper && c >= 'A' && c <= 'Z') c += 32;
            ok = put(c);
        } else if (!upper && c == 0x3A3) {
            // Capital sigma lowers to final ς after a cased letter that no cased letter follows
            // (case-ignorable characters skipped both ways), else to σ — CPython's Final_Sigma.
            bool final = false;
            size_t back = start;
            char32_t before = 0;
            while (back > 0) {
                before = decodeUtf8Before(text, back);
                if (!inRanges(kCaseIgnorable, before)) {
                    final = inRanges(kCased, before);
                    break;
                }
            }
            for (size_t ahead = at; final && ahead < text.size();) {
                char32_t after = decodeUtf8(text, ahead);
                if (!inRanges(kCaseIgnorable, after)) {
                    final = !inRanges(kCased, after);
                    break;
                }
            }
            ok = put(final ? char32_t(0x3C2) : char32_t(0x3C3));
        } else {
            ok = (upper ? kUpperMapping : kLowerMapping).map(c, put);
        }
        if (!ok) return false;
    }
    return true;
}

// str.strip(): `text` without the Unicode whitespace (str.isspace) at both ends.
std::string_view stripSpace(std::string_view text) {
    size_t begin = 0;
    while (begin < text.size()) {
        size_t next = begin;
        if (!isSpace(decodeUtf8(text, next))) break;
        begin = next;
    }
    size_t end = text.size();
    while (end > begin) {
        size_t previous = end;
        if (!isSpace(decodeUtf8Before(text, previous))) break;
        end = previous;
    }
    return text.substr(begin, end - begin);
}

// lower/upper: Python's full case mappings, code point by code point.
std::optional<Value> changeCase(Heap& heap, BuiltinId id, std::span<const Value> args) {
    const Value& s = args[0];
    if (s.kind() != ValueKind::Str) return wrongArgs(heap, id, "a Str", args);
    bool upper = id == BuiltinId::Upper;
    std::optional<Labels> labels = topLabels(heap, args);
    if (!labels) return std::nullopt;
    std::string_view text = s.asStr();
    if (!heap.work(text.size())) return std::nullopt;  // the scan below; the output is charged as it is built
    // Unchanged ASCII text (the common case for identifiers and codes) shares the object.
    bool changes = false;
    for (char b : text) {
        if (static_cast<unsigned char>(b) >= 0x80 || (upper ? (b >= 'a' && b <= 'z') : (b >= 'A' && b <= 'Z'))) {
            changes = true;
            break;
        }
    }
    if (!changes) return labelled(s, *labels);
    std::optional<TextBuilder> out = startText(heap, *labels);
    if (!out) return std::nullopt;
    if (!mapCase(text, upper, [&](char32_t m) { return out->putCodePoint(m); })) return std::nullopt;
    return out->finish();
}

std::optional<Value> builtinLower(Heap& heap, std::span<const Value> args) {
    return changeCase(heap, BuiltinId::Lower, args);
}

std::optional<Value> builtinUpper(Heap& heap, std::span<const Value> args) {
    return changeCase(heap, BuiltinId::Upper, args);
}

std::optional<Value> builtinTrim(Heap& heap, std::span<const Value> args) {
    const Value& s = args[0];
    if (s.kind() != ValueKind::Str) return wrongArgs(heap, BuiltinId::Trim, "a Str", args);
    std::optional<Labels> labels = topLabels(heap, args);
    if (!labels) return std::nullopt;
    std::string_view text = s.asStr();
    std::string_view stripped = stripSpace(text);
    if (!heap.work(text.size() - stripped.size())) return std::nullopt;  // the whitespace scanned
    if (stripped.size() == text.size()) return labelled(s, *labels);
    return heap.makeStr(stripped, labels->tags, labels->prov);
}

std::optional<Value> builtinContains(Heap& heap, std::span<const Value> args) {
    const Value& container = args[0];
    const Value& item = args[1];
    if (container.kind() == ValueKind::Str && item.kind() == ValueKind::Str) {
        std::optional<size_t> at = findText(heap, container.asStr(), item.asStr());
        if (!at) return std::nullopt;
        return withTopLabels(heap, Value::boolean(*at != std::string_view::npos), args);
    }
    if (container.kind() != ValueKind::List)
        return wrongArgs(heap, BuiltinId::Contains, "(List, any value) or (Str, Str)", args);
    bool found = false;
    for (const Value& x : container.asList().items) {
        std::optional<bool> equal = valuesEqual(heap, x, item);
        if (!equal) return std::nullopt;
        if ((found = *equal)) break;
    }
    // As `item in container`: the answer depends on every element and on all of the item.
    std::optional<Labels> labels = topAndContentLabels(heap, args, container);
    if (!labels || !addContent(heap, *labels, item)) return std::nullopt;
    return labelled(Value::boolean(found), *labels);
}

std::optional<Value> affix(Heap& heap, BuiltinId id, std::span<const Value> args) {
    if (args[0].kind() != ValueKind::Str || args[1].kind() != ValueKind::Str)
        return wrongArgs(heap, id, "(Str, Str)", args);
    std::string_view s = args[0].asStr();
    std::string_view part = args[1].asStr();
    if (!heap.work(std::min(s.size(), part.size()))) return std::nullopt;
    bool result = id == BuiltinId::StartsWith ? s.starts_with(part) : s.ends_with(part);
    return withTopLabels(heap, Value::boolean(result), args);
}

std::optional<Value> builtinStartsWith(Heap& heap, std::span<const Value> args) {
    return affix(heap, BuiltinId::StartsWith, args);
}

std::optional<Value> builtinEndsWith(Heap& heap, std::span<const Value> args) {
    return affix(heap, BuiltinId::EndsWith, args);
}

std::optional<Value> builtinReplace(Heap& heap, std::span<const Value> args) {
    if (args[0].kind() != ValueKind::Str || args[1].kind() != ValueKind::Str || args[2].kind() != ValueKind::Str)
        return wrongArgs(heap, BuiltinId::Replace, "(Str, Str, Str)", args);
    std::optional<Labels> labels = topLabels(heap, args);
    if (!labels) return std::nullopt;
    std::string_view text = args[0].asStr();
    std::string_view old = args[1].asStr();
    std::string_view replacement = args[2].asStr();
    std::optional<size_t> first = findText(heap, text, old);
    if (!first) return std::nullopt;
    if (!old.empty() && *first == std::string_view::npos) return labelled(args[0], *labels);
    std::optional<TextBuilder> out = startText(heap, *labels);
    if (!out) return std::nullopt;
    if (old.empty()) {
        // Python: the replacement goes before every code point and once at the end
        // ("ab".replace("", "-") == "-a-b-").
        for (size_t at = 0; at < text.size();) {
            size_t start = at;
            decodeUtf8(text, at);
            if (!out->put(replacement) || !out->put(text.substr(start, at - start))) return std::nullopt;
        }
        if (!out->put(replacement)) return std::nullopt;
        return out->finish();
    }
    // Linear search (findText), and every piece written is charged, so one big replace is stopped
    // by the step and time limits as it goes.
    size_t from = 0;
    for (size_t hit = *first; hit != std::string_view::npos;) {
        if (!out->put(text.substr(from, hit - from)) || !out->put(replacement)) return std::nullopt;
        from = hit + old.size();
        std::optional<size_t> next = findText(heap, text, old, from);
        if (!next) return std::nullopt;
        hit = *next;
    }
    if (!out->put(text.substr(from))) return std::nullopt;
    return out->finish();
}

std::optional<Value> builtinSplit(Heap& heap, std::span<const Value> args) {
    if (args[0].kind() != ValueKind::Str || args[1].kind() != ValueKind::Str)
        return wrongArgs(heap, BuiltinId::Split, "(Str, Str)", args);
    std::string_view text = args[0].asStr();
    std::string_view separator = args[1].asStr();
    // docs/language.md, decision 25: R0101 where Python raises ValueError("empty separator").
    if (separator.empty()) return evalError(heap, BuiltinId::Split, "empty separator");
    std::optional<Labels> labels = topLabels(heap, args);
    if (!labels) return std::nullopt;
    // The pieces are counted first, so the list is allocated (and charged) once; both passes
    // search in linear time and are charged (findText).
    size_t pieces = 1;
    for (size_t from = 0;; ++pieces) {
        std::optional<size_t> hit = findText(heap, text, separator, from);
        if (!hit) return std::nullopt;
        if (*hit == std::string_view::npos) break;
        from = *hit + separator.size();
    }
    std::optional<Value> out = heap.newList(pieces, labels->tags, labels->prov);
    if (!out) return std::nullopt;
    // Every piece carries the arguments' labels, as the list does.
    size_t from = 0;
    for (size_t i = 0; i < pieces; ++i) {
        size_t hit = text.size();
        if (i + 1 < pieces) {
            std::optional<size_t> found = findText(heap, text, separator, from);
            if (!found) return std::nullopt;
            hit = *found;
        }
        std::optional<Value> piece = heap.makeStr(text.substr(from, hit - from), labels->tags, labels->prov);
        if (!piece || !heap.appendInPlace(*out, *piece)) return std::nullopt;
        from = hit + separator.size();
    }
    return out;
}

std::optional<Value> builtinJoin(Heap& heap, std::span<const Value> args) {
    const Value& xs = args[0];
    if (xs.kind() != ValueKind::List || args[1].kind() != ValueKind::Str)
        return wrongArgs(heap, BuiltinId::Join, "(List, Str)", args);
    std::string_view separator = args[1].asStr();
    std::optional<Labels> labels = topAndContentLabels(heap, args, xs);
    if (!labels) return std::nullopt;
    std::optional<TextBuilder> out = startText(heap, *labels);
    if (!out) return std::nullopt;
    std::string scalar;
    bool first = true;
    for (const Value& item : xs.asList().items) {
        if (!heap.work(sizeof(Value))) return std::nullopt;  // the text is charged as it is built
        if (!first && !out->put(separator)) return std::nullopt;
        first = false;
        bool ok;
        if (item.kind() == ValueKind::Str) {
            ok = out->put(item.asStr());
        } else if (item.isHeap()) {
            // A container's text can be large: toStr builds it through the heap, charged.
            std::optional<Value> text = toStr(heap, item);
            ok = text && out->put(text->asStr());
        } else {
            scalar.clear();
            appendValueText(scalar, item);
            ok = out->put(scalar);
        }
        if (!ok) return std::nullopt;
    }
    return out->finish();
}

std::optional<Value> builtinSum(Heap& heap, std::span<const Value> args) {
    const Value& xs = args[0];
    if (xs.kind() != ValueKind::List) return wrongArgs(heap, BuiltinId::Sum, "a List of numbers", args);
    // As CPython 3.11 sums: in Int while every item is an Int (here with 64-bit overflow R0101),
    // then in Float from the first Float on, adding each item converted to double, in order.
    int64_t intSum = 0;
    double floatSum = 0;
    bool isFloat = false;
    if (!heap.work(xs.asList().items.size() * sizeof(Value))) return std::nullopt;
    for (const Value& item : xs.asList().items) {
        if (item.kind() == ValueKind::Int && !isFloat) {
            if (__builtin_add_overflow(intSum, item.asInt(), &intSum)) {
                return evalError(heap, BuiltinId::Sum,
                                 fmt::format("integer overflow: sum does not fit in 64 bits (adding {})", item.asInt()));
            }
            continue;
        }
        if (!item.isNumber()) {
            return evalError(heap, BuiltinId::Sum,
                             fmt::format("'sum' expects a List of numbers, not one holding {}", kindName(item.kind())));
        }
        if (!isFloat) floatSum = static_cast<double>(intSum);
        isFloat = true;
        floatSum += item.asNumber();
        if (!std::isfinite(floatSum))
            return evalError(heap, BuiltinId::Sum, "float overflow: sum is not a finite number");
    }
    std::optional<Labels> labels = topAndContentLabels(heap, args, xs);
    if (!labels) return std::nullopt;
    return labelled(isFloat ? Value::floating(floatSum) : Value::integer(intSum), *labels);
}

// min/max of two numbers: the original operand (min(1, 2.5) is the Int 1), the first on a tie.
std::optional<Value> pickOfTwo(Heap& heap, BuiltinId id, std::span<const Value> args) {
    if (!args[0].isNumber() || !args[1].isNumber()) return wrongArgs(heap, id, "two numbers", args);
    int order = *compareOrdered(args[1], args[0]);
    bool second = id == BuiltinId::Min2 ? order < 0 : order > 0;
    return withTopLabels(heap, args[second ? 1 : 0], args);
}

std::optional<Value> builtinMin2(Heap& heap, std::span<const Value> args) { return pickOfTwo(heap, BuiltinId::Min2, args); }

std::optional<Value> builtinMax2(Heap& heap, std::span<const Value> args) { return pickOfTwo(heap, BuiltinId::Max2, args); }

// min/max of one list (docs/language.md, decision 24): the first extreme element, as Python's
// min/max return it.
std::optional<Value> pickOfList(Heap& heap, BuiltinId id, std::span<const Value> args) {
    const Value& xs = args[0];
    if (xs.kind() != ValueKind::List) return wrongArgs(heap, id, "a List of numbers", args);
    const auto& items = xs.asList().items;
    if (items.empty()) return evalError(heap, id, fmt::format("{}() arg is an empty sequence", nameOf(id)));
    if (!heap.work(items.size() * sizeof(Value))) return std::nullopt;
    const Value* best = nullptr;
    for (const Value& item : items) {
        if (!item.isNumber()) {
            return evalError(heap, id,
                             fmt::format("'{}' expects a List of numbers, not one holding {}", nameOf(id),
                                         kindName(item.kind())));
        }
        int order = best ? *compareOrdered(item, *best) : 0;
        if (!best || (id == BuiltinId::MinList ? order < 0 : order > 0)) best = &item;
    }
    std::optional<Labels> labels = topAndContentLabels(heap, args, xs);
    if (!labels) return std::nullopt;
    return labelled(*best, *labels);
}

std::optional<Value> builtinMinList(Heap& heap, std::span<const Value> args) {
    return pickOfList(heap, BuiltinId::MinList, args);
}

std::optional<Value> builtinMaxList(Heap& heap, std::span<const Value> args) {
    return pickOfList(heap, BuiltinId::MaxList, args);
}

std::optional<Value> builtinAbs(Heap& heap, std::span<const Value> args) {
    const Value& x = args[0];
    if (x.kind() == ValueKind::Int) {
        if (x.asInt() == std::numeric_limits<int64_t>::min()) {
            return evalError(heap, BuiltinId::Abs,
                             fmt::format("integer overflow: abs({}) does not fit in 64 bits", x.asInt()));
        }
        return withTopLabels(heap, Value::integer(x.asInt() < 0 ? -x.asInt() : x.asInt()), args);
    }
    if (x.kind() == ValueKind::Float) return withTopLabels(heap, Value::floating(std::fabs(x.asFloat())), args);
    return wrongArgs(heap, BuiltinId::Abs, "a number", args);
}

std::optional<Value> builtinRound(Heap& heap, std::span<const Value> args) {
    const Value& x = args[0];
    if (x.kind() == ValueKind::Int) return withTopLabels(heap, x, args);
    if (x.kind() != ValueKind::Float) return wrongArgs(heap, BuiltinId::Round, "a number", args);
    std::optional<int64_t> rounded = integralToInt(roundHalfEven(x.asFloat()));
    if (!rounded) {
        return evalError(heap, BuiltinId::Round,
                         fmt::format("integer overflow: round({}) does not fit in 64 bits", numberText(x)));
    }
    return withTopLabels(heap, Value::integer(*rounded), args);
}

std::optional<Value> builtinRoundTo(Heap& heap, std::span<const Value> args) {
    const Value& x = args[0];
    const Value& n = args[1];
    if (!x.isNumber() || n.kind() != ValueKind::Int) return wrongArgs(heap, BuiltinId::RoundTo, "(number, Int)", args);
    if (x.kind() == ValueKind::Int) {
        // Python keeps an Int an Int: unchanged for n >= 0, else the nearest multiple of 10^-n.
        std::optional<int64_t> rounded = roundIntTo(x.asInt(), n.asInt());
        if (!rounded) {
            return evalError(heap, BuiltinId::RoundTo,
                             fmt::format("integer overflow: round({}, {}) does not fit in 64 bits", x.asInt(),
                                         n.asInt()));
        }
        return withTopLabels(heap, Value::integer(*rounded), args);
    }
    double rounded = roundFloatTo(x.asFloat(), n.asInt());
    if (!std::isfinite(rounded)) {
        return evalError(heap, BuiltinId::RoundTo,
                         fmt::format("float overflow: round({}, {}) is not a finite number", numberText(x), n.asInt()));
    }
    return withTopLabels(heap, Value::floating(rounded), args);
}

std::optional<Value> builtinInt(Heap& heap, std::span<const Value> args) {
    const Value& x = args[0];
    switch (x.kind()) {
        case ValueKind::Int:
            return withTopLabels(heap, x, args);
        case ValueKind::Float: {
            std::optional<int64_t> truncated = integralToInt(std::trunc(x.asFloat()));
            if (!truncated) {
                return evalError(heap, BuiltinId::Int,
                                 fmt::format("integer overflow: int({}) does not fit in 64 bits", numberText(x)));
            }
            return withTopLabels(heap, Value::integer(*truncated), args);
        }
        case ValueKind::Str: {
            // The text is copied (and, for underscores, copied again) while it is parsed.
            ScratchCharge copies(heap);
            if (!copies.reserve(2 * x.asStr().size()) || !heap.work(2 * x.asStr().size())) return std::nullopt;
            int64_t value = 0;
            switch (parseIntLiteral(asciiForNumber(x.asStr()), value)) {
                case ParseStatus::Ok:
                    return withTopLabels(heap, Value::integer(value), args);
                case ParseStatus::Invalid:
                    return evalError(heap, BuiltinId::Int,
                                     fmt::format("cannot convert {} to Int", pythonRepr(x.asStr())));
                case ParseStatus::OutOfRange:
                    return evalError(heap, BuiltinId::Int,
                                     fmt::format("integer overflow: int({}) does not fit in 64 bits",
                                                 pythonRepr(x.asStr())));
            }
            break;
        }
        default:
            break;
    }
    return wrongArgs(heap, BuiltinId::Int, "a number or Str", args);
}

std::optional<Value> builtinFloat(Heap& heap, std::span<const Value> args) {
    const Value& x = args[0];
    switch (x.kind()) {
        case ValueKind::Int:
            // Nearest double, ties to even, as Python's float(int); always finite.
            return withTopLabels(heap, Value::floating(static_cast<double>(x.asInt())), args);
        case ValueKind::Float:
            return withTopLabels(heap, x, args);
        case ValueKind::Str: {
            // The text is copied (and, for underscores, copied again) while it is parsed.
            ScratchCharge copies(heap);
            if (!copies.reserve(2 * x.asStr().size()) || !heap.work(2 * x.asStr().size())) return std::nullopt;
            double value = 0;
            switch (parseFloatLiteral(asciiForNumber(x.asStr()), value)) {
                case ParseStatus::Ok:
                    return withTopLabels(heap, Value::floating(value), args);
                case ParseStatus::Invalid:
                    return evalError(heap, BuiltinId::Float,
                                     fmt::format("cannot convert {} to Float", pythonRepr(x.asStr())));
                case ParseStatus::OutOfRange:
                    // A Float is finite (docs/language.md, decision 41): "inf", "nan", "1e999" are errors.
                    return evalError(heap, BuiltinId::Float,
                                     fmt::format("float({}) is not a finite number", pythonRepr(x.asStr())));
            }
            break;
        }
        default:
            break;
    }
    return wrongArgs(heap, BuiltinId::Float, "a number or Str", args);
}

std::optional<Value> builtinFirst(Heap& heap, std::span<const Value> args) {
    const Value& xs = args[0];
    if (xs.kind() != ValueKind::List) return wrongArgs(heap, BuiltinId::First, "a List", args);
    const auto& items = xs.asList().items;
    if (items.empty()) return evalError(heap, BuiltinId::First, "first() of an empty list");
    Labels labels{items[0].tags(), items[0].prov()};
    if (!addTop(heap, labels, xs)) return std::nullopt;
    return labelled(items[0], labels);
}

std::optional<Value> builtinUnique(Heap& heap, std::span<const Value> args) {
    const Value& xs = args[0];
    if (xs.kind() != ValueKind::List) return wrongArgs(heap, BuiltinId::Unique, "a List", args);
    const auto& items = xs.asList().items;
    // Hash chains over the kept items: `latest` maps a hash to the last kept item with it,
    // `previous[k]` links kept item k to the one before it with the same hash. Linear for lists
    // of scalars and strings; only values whose hashes collide are compared pairwise.
    constexpr size_t kNone = SIZE_MAX;
    // The side tables are charged while they live: about this much per item.
    constexpr size_t kTableBytesPerItem = 2 * sizeof(size_t) + 48;
    ScratchCharge tables(heap);
    if (!tables.reserve(items.size() * kTableBytesPerItem)) return std::nullopt;
    std::vector<size_t> kept;  // indexes into items
    std::vector<size_t> previous;
    std::unordered_map<uint64_t, size_t> latest;
    latest.reserve(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
        if (!heap.work(equalityHashWork(items[i]))) return std::nullopt;
        uint64_t h = equalityHash(items[i]);
        auto [slot, inserted] = latest.try_emplace(h, kNone);
        bool seen = false;
        // Items whose hashes collide are compared pairwise: charged, so that many colliding
        // items are stopped by the run's limits rather than taking quadratic time unchecked.
        for (size_t k = slot->second; k != kNone && !seen; k = previous[k]) {
            std::optional<bool> equal = valuesEqual(heap, items[kept[k]], items[i]);
            if (!equal) return std::nullopt;
            seen = *equal;
        }
        if (seen) continue;
        previous.push_back(slot->second);
        slot->second = kept.size();
        kept.push_back(i);
    }
    // Which elements are kept depends on comparing all of them, so the list itself carries the
    // deep labels of `xs`; each kept element keeps its own.
    Labels labels{xs.tags(), xs.prov()};
    if (!addContent(heap, labels, xs)) return std::nullopt;
    if (kept.size() == items.size()) return labelled(xs, labels);  // nothing repeats: share the items
    std::optional<Value> out = heap.newList(kept.size(), labels.tags, labels.prov);
    if (!out) return std::nullopt;
    for (size_t i : kept)
        if (!heap.appendInPlace(*out, items[i])) return std::nullopt;
    return out;
}

}  // namespace

std::optional<BuiltinId> findBuiltin(std::string_view name, size_t argc) {
    for (uint16_t i = 0; i < kBuiltinCount; ++i)
        if (kBuiltins[i].name == name && kBuiltins[i].argc == argc) return static_cast<BuiltinId>(i);
    return std::nullopt;
}

std::optional<Value> callBuiltin(Heap& heap, BuiltinId id, std::span<const Value> args) {
    auto index = static_cast<uint16_t>(id);
    if (index >= kBuiltinCount || args.size() != kBuiltins[index].argc) {
        // The VM's verifier rules both out; a forged call still fails cleanly.
        heap.fail(RuntimeError{DiagCode::R0101,
                               fmt::format("no builtin number {} taking {} arguments", index, args.size()),
                               Json{{"builtin", index}}});
        return std::nullopt;
    }
    switch (id) {
#define BUILTIN(id, name, argc) \
    case BuiltinId::id:         \
        return builtin##id(heap, args);
#include "runtime/builtins.def"
#undef BUILTIN
    }
    return std::nullopt;  // unreachable: every id has a case
}

// ---- runtime/pytext.h: the same Python helpers for code that computes these semantics without a heap.

namespace pytext {

std::string lower(std::string_view text) {
    std::string out;
    mapCase(text, false, [&](char32_t c) { appendUtf8(out, c); return true; });
    return out;
}

std::string upper(std::string_view text) {
    std::string out;
    mapCase(text, true, [&](char32_t c) { appendUtf8(out, c); return true; });
    return out;
}

std::string_view strip(std::string_view text) { return stripSpace(text); }

NumberParse parseInt(std::string_view text, int64_t& out) {
    return static_cast<NumberParse>(parseIntLiteral(asciiForNumber(text), out));
}

NumberParse parseFloat(std::string_view text, double& out) {
    return static_cast<NumberParse>(parseFloatLiteral(asciiForNumber(text), out));
}

double roundHalfEven(double x) { return remit::roundHalfEven(x); }
double roundFloatTo(double x, int64_t ndigits) { return remit::roundFloatTo(x, ndigits); }
std::optional<int64_t> roundIntTo(int64_t value, int64_t ndigits) { return remit::roundIntTo(value, ndigits); }

std::string repr(std::string_view text, size_t maxCodePoints) { return pythonRepr(text, maxCodePoints); }

}  // namespace pytext

}  // namespace remit
