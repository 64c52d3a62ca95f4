// Bounded JSON parsing (json_text.h).
#include "runtime/json_text.h"

#include <fmt/format.h>

#include "runtime/files.h"

namespace remit {

namespace {

template <class Json>
std::optional<Json> parseBounded(std::string_view what, std::string_view text, std::string& error, size_t maxDepth) {
    if (jsonNestsDeeperThan(text, maxDepth)) {
        error = fmt::format("invalid JSON in {}: nested deeper than {} levels", what, maxDepth);
        return std::nullopt;
    }
    // JSON text never holds a raw NUL, and the parser would take one for the end of the input,
    // accepting whatever follows unread.
    if (text.find('\0') != std::string_view::npos) {
        error = fmt::format("invalid JSON in {}: it contains a NUL byte", what);
        return std::nullopt;
    }
    try {
        return Json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        size_t at = std::min<size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
        size_t line = 1, col = 1;
        for (size_t i = 0; i < at; ++i) {
            if (text[i] == '\n') {
                ++line;
                col = 1;
            } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
                ++col;
            }
        }
        error = fmt::format("invalid JSON in {} at line {}, column {}", what, line, col);
        return std::nullopt;
    } catch (const nlohmann::json::out_of_range&) {
        // The parser's one other exception: a number no double can hold (406, `1e999`). It is
        // valid JSON grammar, so no parse_error, but there is no value to build; without this
        // catch it escaped every reader (found by the model_reply and approvals fuzz harnesses).
        error = fmt::format("invalid JSON in {}: a number is too large for a 64-bit float", what);
        return std::nullopt;
    }
}

}  // namespace

namespace {

// The code unit of a `\uXXXX` escape starting at text[i] (the backslash), or -1.
int escapedCodeUnit(std::string_view text, size_t i) {
    if (i + 6 > text.size() || text[i] != '\\' || text[i + 1] != 'u') return -1;
    int unit = 0;
    for (size_t k = i + 2; k < i + 6; ++k) {
        char c = text[k];
        int digit = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
        if (digit < 0) return -1;
        unit = unit * 16 + digit;
    }
    return unit;
}

bool isHighSurrogate(int unit) { return unit >= 0xD800 && unit <= 0xDBFF; }
bool isLowSurrogate(int unit) { return unit >= 0xDC00 && unit <= 0xDFFF; }

}  // namespace

std::string replaceLoneSurrogates(std::string_view text, size_t* replaced) {
    std::string out;
    out.reserve(text.size());
    size_t count = 0;
    bool inString = false;
    for (size_t i = 0; i < text.size();) {
        char c = text[i];
        if (!inString) {
            if (c == '"') inString = true;
            out += c;
            ++i;
            continue;
        }
        if (c == '"') {
            inString = false;
            out += c;
            ++i;
            continue;
        }
        if (c != '\\' || i + 1 >= text.size()) {
            out += c;
            ++i;
            continue;
        }
        int unit = escapedCodeUnit(text, i);
        if (isHighSurrogate(unit) && isLowSurrogate(escapedCodeUnit(text, i + 6))) {
            out.append(text.substr(i, 12));  // a pair: kept
            i += 12;
        } else if (isHighSurrogate(unit) || isLowSurrogate(unit)) {
            out += "\\ufffd";
            ++count;
            i += 6;
        } else {
            out.append(text.substr(i, 2));  // any other escape, the backslash and its character
            i += 2;
        }
    }
    if (replaced) *replaced = count;
    return out;
}

Json recoverMessageId(std::string_view text) {
    // A small scanner over the top-level object: strings are skipped whole, nesting is counted,
    // and the first "id" key at depth 1 gives its value if that is a plain string or integer.
    size_t depth = 0;
    size_t i = 0;
    auto skipSpace = [&] {
        while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) ++i;
    };
    auto stringEnd = [&](size_t start) {  // the index after the closing quote, or npos
        for (size_t k = start + 1; k < text.size(); ++k) {
            if (text[k] == '\\') {
                ++k;
                continue;
            }
            if (text[k] == '"') return k + 1;
        }
        return std::string_view::npos;
    };
    bool expectKey = false;
    while (i < text.size()) {
        char c = text[i];
        if (c == '"') {
            size_t end = stringEnd(i);
            if (end == std::string_view::npos) return nullptr;
            bool isIdKey = depth == 1 && expectKey && text.substr(i, end - i) == "\"id\"";
            i = end;
            expectKey = false;
            if (!isIdKey) continue;
            skipSpace();
            if (i >= text.size() || text[i] != ':') return nullptr;
            ++i;
            skipSpace();
            size_t start = i;
            if (i < text.size() && text[i] == '"') {
                end = stringEnd(i);
                if (end == std::string_view::npos) return nullptr;
            } else {
                end = i;
                if (end < text.size() && text[end] == '-') ++end;
                while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
                // An integer ends at a delimiter (or where the text is cut): 1.5 or 1e3 is not one.
                if (end < text.size() && std::string_view(",} \t\r\n").find(text[end]) == std::string_view::npos)
                    return nullptr;
            }
            Json id = Json::parse(replaceLoneSurrogates(text.substr(start, end - start)), nullptr, false);
            return !id.is_discarded() && (id.is_string() || id.is_number_integer()) ? id : Json(nullptr);
        }
        if (c == '{' || c == '[') {
            ++depth;
            expectKey = c == '{' && depth == 1;
        } else if (c == '}' || c == ']') {
            if (depth == 0) return nullptr;
            --depth;
        } else if (c == ',' && depth == 1) {
            expectKey = true;
        }
        ++i;
    }
    return nullptr;
}

bool jsonNestsDeeperThan(std::string_view text, size_t maxDepth) {
    size_t depth = 0;
    bool inString = false, escaped = false;
    for (char c : text) {
        if (inString) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                inString = false;
            continue;
        }
        if (c == '"') {
            inString = true;
        } else if (c == '[' || c == '{') {
            if (++depth > maxDepth) return true;
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return false;
}

std::optional<nlohmann::json> parseJsonText(std::string_view what, std::string_view text, std::string& error,
                                            size_t maxDepth) {
    return parseBounded<nlohmann::json>(what, text, error, maxDepth);
}

std::optional<Json> parseOrderedJsonText(std::string_view what, std::string_view text, std::string& error,
                                         size_t maxDepth) {
    return parseBounded<Json>(what, text, error, maxDepth);
}

std::optional<nlohmann::json> readJsonFile(const std::string& path, size_t maxBytes, std::string_view what,
                                           std::string& error, bool* missing, size_t maxDepth) {
    if (missing) *missing = false;
    std::string text;
    if (std::optional<FileProblem> problem = readRegularFile(path, maxBytes, text)) {
        if (missing) *missing = problem->missing;
        error = problem->message;
        return std::nullopt;
    }
    if (text.size() > maxBytes) {
        error = tooLargeMessage(path, maxBytes, std::string(what));
        return std::nullopt;
    }
    return parseJsonText(path, text, error, maxDepth);
}

}  // namespace remit
