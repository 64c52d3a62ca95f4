// YAML documents read as JSON: see yaml_json.h.
#include "cli/yaml_json.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace remit {

namespace {

// YAML 1.2's core schema for a plain (unquoted, untagged) scalar: null, a boolean, an integer or a
// float when it is written as one, else a string.
Json plainScalar(const std::string& s) {
    if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
    auto allOf = [](std::string_view t, auto pred) {
        return !t.empty() && std::all_of(t.begin(), t.end(), [&](char c) { return pred(static_cast<unsigned char>(c)); });
    };
    std::string_view body = s;
    bool negative = false;
    if (body[0] == '-' || body[0] == '+') {
        negative = body[0] == '-';
        body.remove_prefix(1);
    }
    auto integer = [&](std::string_view digits, int base) -> Json {
        uint64_t magnitude = 0;
        auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude, base);
        if (ec != std::errc() || end != digits.data() + digits.size()) return Json(s);
        if (!negative && magnitude <= uint64_t(INT64_MAX)) return Json(int64_t(magnitude));
        if (negative && magnitude <= uint64_t(INT64_MAX) + 1) return Json(int64_t(0 - magnitude));
        return Json(s);  // beyond 64 bits: kept as written
    };
    if (allOf(body, ::isdigit)) return integer(body, 10);
    if (body.size() > 2 && body[0] == '0' && body[1] == 'x' && allOf(body.substr(2), ::isxdigit) && s[0] != '-' &&
        s[0] != '+')
        return integer(body.substr(2), 16);
    if (body.size() > 2 && body[0] == '0' && body[1] == 'o' && s[0] != '-' && s[0] != '+' &&
        allOf(body.substr(2), [](int c) { return c >= '0' && c <= '7'; }))
        return integer(body.substr(2), 8);
    // [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?
    size_t i = 0, digits = 0;
    while (i < body.size() && std::isdigit(static_cast<unsigned char>(body[i]))) ++i, ++digits;
    if (i < body.size() && body[i] == '.') {
        ++i;
        while (i < body.size() && std::isdigit(static_cast<unsigned char>(body[i]))) ++i, ++digits;
    }
    if (digits == 0) return Json(s);  // .inf and .nan have no JSON form: kept as strings
    if (i < body.size() && (body[i] == 'e' || body[i] == 'E')) {
        ++i;
        if (i < body.size() && (body[i] == '-' || body[i] == '+')) ++i;
        size_t start = i;
        while (i < body.size() && std::isdigit(static_cast<unsigned char>(body[i]))) ++i;
        if (i == start) return Json(s);
    }
    if (i != body.size()) return Json(s);
    double value = std::strtod(s.c_str(), nullptr);
    if (!std::isfinite(value)) return Json(s);
    return Json(value);
}

struct YamlReader {
    std::string_view what;
    std::string& error;
    size_t nodes = 0;

    bool fail(const YAML::Node& node, std::string message) {
        const YAML::Mark mark = node.Mark();
        error = mark.is_null() ? fmt::format("invalid YAML in {}: {}", what, message)
                               : fmt::format("invalid YAML in {} at line {}, column {}: {}", what, mark.line + 1,
                                             mark.column + 1, message);
        return false;
    }

    bool convert(const YAML::Node& node, Json& out, size_t depth) {
        if (++nodes > kMaxYamlNodes)
            return fail(node, fmt::format("it expands to more than {} values (aliases repeating a large part?)",
                                          kMaxYamlNodes));
        if (depth > kMaxJsonNesting) return fail(node, fmt::format("nested deeper than {} levels", kMaxJsonNesting));
        switch (node.Type()) {
            case YAML::NodeType::Undefined:
            case YAML::NodeType::Null:
                out = nullptr;
                return true;
            case YAML::NodeType::Scalar: {
                const std::string& tag = node.Tag();
                // "!" marks a quoted (or block) scalar, which is always a string; "?" a plain one.
                if (tag == "!" || tag == "tag:yaml.org,2002:str")
                    out = node.Scalar();
                else
                    out = plainScalar(node.Scalar());
                return true;
            }
            case YAML::NodeType::Sequence: {
                out = Json::array();
                for (const YAML::Node& item : node) {
                    Json value;
                    if (!convert(item, value, depth + 1)) return false;
                    out.push_back(std::move(value));
                }
                return true;
            }
            case YAML::NodeType::Map: {
                out = Json::object();
                for (auto it = node.begin(); it != node.end(); ++it) {
                    if (!it->first.IsScalar()) return fail(it->first, "a key that is not a plain value");
                    const std::string& key = it->first.Scalar();
                    if (out.contains(key)) return fail(it->first, fmt::format("the key '{}' appears twice", key));
                    Json value;
                    if (!convert(it->second, value, depth + 1)) return false;
                    out[key] = std::move(value);
                }
                return true;
            }
        }
        out = nullptr;
        return true;
    }
};

}  // namespace

std::optional<Json> parseYamlAsJson(std::string_view what, std::string_view text, std::string& error) {
    if (text.find('\0') != std::string_view::npos) {
        error = fmt::format("invalid YAML in {}: it contains a NUL byte", what);
        return std::nullopt;
    }
    YAML::Node node;
    try {
        node = YAML::Load(std::string(text));
    } catch (const YAML::Exception& e) {
        // yaml-cpp's message is the parser's description of the problem ("illegal map value"),
        // never a path or the text itself.
        error = e.mark.is_null() ? fmt::format("invalid YAML in {}: {}", what, e.msg)
                                 : fmt::format("invalid YAML in {} at line {}, column {}: {}", what, e.mark.line + 1,
                                               e.mark.column + 1, e.msg);
        return std::nullopt;
    } catch (...) {
        error = fmt::format("invalid YAML in {}", what);
        return std::nullopt;
    }
    Json out;
    YamlReader reader{what, error};
    try {
        if (!reader.convert(node, out, 0)) return std::nullopt;
    } catch (...) {
        error = fmt::format("invalid YAML in {}", what);
        return std::nullopt;
    }
    return out;
}

}  // namespace remit
