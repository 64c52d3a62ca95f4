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
    }
}

}  // namespace

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
