// Loading and validating policy.toml (see policy.h). toml++ does the TOML; this file checks the
// structure the prototype reads plus our extensions (docs/policy.md) and turns every deviation into
// an E0504 that points at the offending key or value.
#include "runtime/policy.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <span>

#include "runtime/hash.h"
#include "runtime/heap.h"
#include "runtime/suggest.h"

namespace remit {

namespace {

constexpr std::string_view kTopLevelTables[] = {"budget", "grant", "limits", "flows", "artifacts", "mcp", "models"};
constexpr std::string_view kBudgetKeys[] = {"max_usd", "scope", "period"};
constexpr std::string_view kApprovalKeys[] = {"always", "quorum", "expires"};
constexpr std::string_view kGrantKeys[] = {"max_calls", "arg_prefix", "arg_one_of", "arg_max", "approve", "approval"};
constexpr std::string_view kLimitsKeys[] = {"max_steps", "max_memory", "max_wall_ms"};
constexpr std::string_view kFlowsKeys[] = {"strict"};
constexpr std::string_view kArtifactsKeys[] = {"trust"};
constexpr std::string_view kMcpKeys[] = {"tools", "startup_timeout_ms"};
// The longest [mcp] startup_timeout_ms: ten minutes is already more than any server should need.
constexpr int64_t kMaxMcpStartupTimeoutMs = 600'000;
// MCP tool names are at most 128 characters (the specification's advice); a little slack.
constexpr size_t kMaxMcpToolName = 256;
constexpr std::string_view kModelKeys[] = {"provider",    "model",       "base_url",           "api_key_env",
                                           "max_tokens",  "temperature", "input_usd_per_mtok", "output_usd_per_mtok",
                                           "timeout_ms"};

// Long or odd strings are summarised rather than echoed: a diagnostic line should stay one line.
constexpr size_t kMaxQuotedValue = 40;

// A key as it must be written in TOML: bare when it can be, else a basic quoted string.
std::string tomlKey(std::string_view key) {
    bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    });
    if (bare) return std::string(key);
    std::string out = "\"";
    for (char c : key) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
            out += fmt::format("\\u{:04X}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
            out += c;
        }
    }
    return out + "\"";
}

std::string grantHeader(std::string_view resource) { return fmt::format("[grant.{}]", tomlKey(resource)); }

std::string joinNames(std::span<const std::string_view> names) {
    std::string out;
    for (std::string_view name : names) {
        if (!out.empty()) out += ", ";
        out += name;
    }
    return out;
}

// The deepest nesting a policy can ask toml++ to build. Each dotted-key part, header part, array
// and inline table is one more level, and toml++ frees its tables recursively, so a key of 150,000
// parts (300 KB) overflowed the stack of `check`, `run` and a whole `mcp --http` server. A real
// policy needs four levels ([grant."r".arg_prefix] path = [...]).
constexpr size_t kMaxTomlNesting = 32;

struct TomlTooDeep {
    uint32_t line, col;
};

// Finds where `text` first nests deeper than kMaxTomlNesting, without parsing it: a linear scan
// that knows TOML's strings, comments, headers, keys and values well enough to count levels
// (dots between key parts, never inside strings or values such as 0.75). Keys, headers and
// inline tables are one line each in TOML 1.0; multi-line strings and arrays are followed across
// lines. For text that is not valid TOML the count is still an upper bound of what a parser that
// accepted it would build.
std::optional<TomlTooDeep> tomlTooDeep(std::string_view text) {
    enum class Mode { Key, Header, Value, Rest };
    struct Frame {
        bool inlineTable;
        size_t depth;  // the level of what this array or inline table contains
    };
    std::vector<Frame> frames;
    Mode mode = Mode::Key;
    size_t headerDepth = 0;  // levels of the last [header]
    size_t parts = 0;        // key or header parts so far (0: nothing seen yet)
    size_t valueDepth = 0;   // the level a value at this point would be built at
    uint32_t line = 1;
    size_t lineStart = 0;
    auto base = [&] { return frames.empty() ? headerDepth : frames.back().depth; };
    auto at = [&](size_t i) {
        return TomlTooDeep{line, static_cast<uint32_t>(codePointCount(text.substr(lineStart, i - lineStart)) + 1)};
    };
    for (size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (c == '\n') {
            ++line;
            lineStart = i + 1;
            if (frames.empty()) mode = Mode::Key, parts = 0;  // the next expression
            continue;
        }
        if (c == '#') {  // a comment runs to the end of the line
            while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
            continue;
        }
        if (c == '"' || c == '\'') {
            // A string, as a quoted key part or a value: skip to its end (a one-line string also
            // ends at the newline, which is then seen above).
            std::string_view quote = text.substr(i, 3) == std::string(3, c) ? text.substr(i, 3) : text.substr(i, 1);
            size_t j = i + quote.size();
            while (j < text.size() && text.substr(j, quote.size()) != quote) {
                if (text[j] == '\n') {
                    if (quote.size() == 1) break;
                    ++line;
                    lineStart = j + 1;
                }
                j += c == '"' && text[j] == '\\' ? 2 : 1;
            }
            i = j < text.size() && text[j] == '\n' ? j - 1 : std::min(text.size(), j + quote.size()) - 1;
            if (mode == Mode::Key || mode == Mode::Header) parts = std::max<size_t>(parts, 1);
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r') continue;
        switch (mode) {
            case Mode::Key:
                if (c == '[' && frames.empty() && parts == 0) {
                    mode = Mode::Header;
                    if (i + 1 < text.size() && text[i + 1] == '[') ++i;  // [[array of tables]]
                } else if (c == '.') {
                    if (base() + ++parts > kMaxTomlNesting) return at(i);
                } else if (c == '=') {
                    valueDepth = base() + std::max<size_t>(parts, 1);
                    if (valueDepth > kMaxTomlNesting) return at(i);
                    mode = Mode::Value;
                } else if (c == '}' && !frames.empty() && frames.back().inlineTable) {
                    frames.pop_back();  // an empty inline table, or one after a trailing comma
                    mode = Mode::Value;
                    valueDepth = base();
                } else {
                    parts = std::max<size_t>(parts, 1);
                }
                break;
            case Mode::Header:
                if (c == '.') {
                    if (++parts > kMaxTomlNesting) return at(i);
                } else if (c == ']') {
                    headerDepth = std::max<size_t>(parts, 1);
                    mode = Mode::Rest;
                } else {
                    parts = std::max<size_t>(parts, 1);
                }
                break;
            case Mode::Value:
                if (c == '[' || c == '{') {
                    if (valueDepth + 1 > kMaxTomlNesting) return at(i);
                    frames.push_back(Frame{c == '{', ++valueDepth});
                    if (c == '{') mode = Mode::Key, parts = 0;
                } else if ((c == ']' || c == '}') && !frames.empty()) {
                    frames.pop_back();
                    valueDepth = base();
                } else if (c == ',' && !frames.empty()) {
                    if (frames.back().inlineTable) mode = Mode::Key, parts = 0;
                    valueDepth = base();
                }
                break;
            case Mode::Rest:
                break;  // after a header only a comment may follow
        }
    }
    return std::nullopt;
}

Span spanOf(const toml::source_region& region) {
    if (region.begin.line == 0) return {};
    Span span{region.begin.line, region.begin.column, region.end.line, region.end.column};
    // toml++ reports parse errors (and some implicit tables) as a single point; a caret of one
    // character is what the renderer expects then.
    if (span.endLine < span.line || (span.endLine == span.line && span.endCol <= span.col)) {
        span.endLine = span.line;
        span.endCol = span.col + 1;
    }
    return span;
}

// "a string", "an integer", or the value itself when that is short and says more ("-1", "\"sometimes\"").
// "90s", "30m", "24h", "7d": a positive whole number of seconds, minutes, hours or days, at most
// a year; nullopt for anything else.
std::optional<int64_t> parseDuration(std::string_view text) {
    if (text.size() < 2 || text.size() > 12) return std::nullopt;
    int64_t unit = 0;
    switch (text.back()) {
        case 's': unit = 1; break;
        case 'm': unit = 60; break;
        case 'h': unit = 3600; break;
        case 'd': unit = 86400; break;
        default: return std::nullopt;
    }
    int64_t n = 0;
    for (char c : text.substr(0, text.size() - 1)) {
        if (c < '0' || c > '9') return std::nullopt;
        n = n * 10 + (c - '0');
        if (n > 366 * 86400) return std::nullopt;
    }
    if (n == 0 || n * unit > 366 * 86400) return std::nullopt;
    return n * unit;
}

std::string describe(const toml::node& node) {
    switch (node.type()) {
        case toml::node_type::string: {
            const std::string& text = node.as_string()->get();
            bool printable = std::all_of(text.begin(), text.end(), [](char c) {
                return static_cast<unsigned char>(c) >= 0x20 && c != 0x7F && c != '"' && c != '\\';
            });
            if (printable && codePointCount(text) <= kMaxQuotedValue) return fmt::format("\"{}\"", text);
            return "a string";
        }
        case toml::node_type::integer: return fmt::format("{}", node.as_integer()->get());
        case toml::node_type::floating_point: {
            double value = node.as_floating_point()->get();
            if (std::isfinite(value)) return fmt::format("{}", value);
            return std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");
        }
        case toml::node_type::boolean: return node.as_boolean()->get() ? "true" : "false";
        case toml::node_type::array: return "an array";
        case toml::node_type::table: return "a table";
        case toml::node_type::date: return "a date";
        case toml::node_type::time: return "a time";
        case toml::node_type::date_time: return "a date-time";
        case toml::node_type::none: break;
    }
    return "nothing";
}

// Which table a key belongs in, for a key written in the wrong one (`max_usd` under a grant).
std::optional<std::string_view> homeTableOf(std::string_view key) {
    for (std::string_view k : kBudgetKeys)
        if (k == key) return "[budget]";
    for (std::string_view k : kLimitsKeys)
        if (k == key) return "[limits]";
    for (std::string_view k : kFlowsKeys)
        if (k == key) return "[flows]";
    for (std::string_view k : kArtifactsKeys)
        if (k == key) return "[artifacts]";
    for (std::string_view k : kMcpKeys)
        if (k == key) return "[mcp]";
    for (std::string_view k : kGrantKeys)
        if (k == key) return "[grant.\"<resource>\"]";
    for (std::string_view k : kModelKeys)
        if (k == key) return "[models.\"<model>\"]";
    return std::nullopt;
}

class PolicyParser {
public:
    PolicyParser(const std::string& file, std::vector<Diagnostic>& found) : file_(file), found_(found) {}

    void parse(const toml::table& root, Policy& policy) {
        for (auto&& [key, node] : root) {
            std::string_view name = key.str();
            if (name == "budget") {
                parseBudget(key, node, policy);
            } else if (name == "grant") {
                parseGrants(key, node, policy);
            } else if (name == "limits") {
                parseLimits(key, node, policy.limits);
            } else if (name == "flows") {
                parseFlows(key, node, policy);
            } else if (name == "artifacts") {
                parseArtifacts(key, node, policy);
            } else if (name == "mcp") {
                parseMcp(key, node, policy.mcp);
            } else if (name == "models") {
                parseModels(key, node, policy);
            } else {
                unknownTopLevel(key, node);
            }
        }
    }

    void error(Span span, std::string message, std::string hint = {}) {
        Diagnostic d;
        d.code = DiagCode::E0504;
        d.message = std::move(message);
        d.file = file_;
        d.span = span;
        d.hint = std::move(hint);
        found_.push_back(std::move(d));
    }

private:
    const std::string& file_;
    std::vector<Diagnostic>& found_;

    void unknownTopLevel(const toml::key& key, const toml::node& node) {
        std::string_view name = key.str();
        std::string valid = "valid tables: [budget], [grant.\"<resource>\"], [limits], [flows], [artifacts], [mcp], "
                            "[models.\"<model>\"]";
        std::string hint = valid;
        if (auto home = homeTableOf(name)) {
            hint = fmt::format("'{}' belongs in {}; {}", name, *home, valid);
        } else if (auto close = closestName(name, kTopLevelTables)) {
            hint = fmt::format("did you mean [{}]? {}", *close, valid);
        }
        std::string message = node.is_table() ? fmt::format("unknown table [{}] in the policy", tomlKey(name))
                                              : fmt::format("unknown top-level key '{}' in the policy", name);
        error(spanOf(key.source()), std::move(message), std::move(hint));
    }

    void unknownKey(const toml::key& key, std::string_view table, std::span<const std::string_view> validKeys) {
        std::string_view name = key.str();
        std::string valid = fmt::format("valid keys: {}", joinNames(validKeys));
        std::string hint = valid;
        // A known key is never unknown in its own table, so a home is always somewhere else.
        if (auto home = homeTableOf(name)) {
            hint = fmt::format("'{}' belongs in {}; {}", name, *home, valid);
        } else if (auto close = closestName(name, validKeys)) {
            hint = fmt::format("did you mean '{}'? {}", *close, valid);
        }
        error(spanOf(key.source()), fmt::format("unknown key '{}' in {}", name, table), std::move(hint));
    }

    // A section given as something other than a table (`budget = 1`, `[[limits]]`).
    const toml::table* requireTable(const toml::key& key, const toml::node& node, std::string_view hint) {
        if (const toml::table* table = node.as_table()) return table;
        error(spanOf(node.source()), fmt::format("'{}' must be a table, got {}", key.str(), describe(node)),
              std::string(hint));
        return nullptr;
    }

    void parseBudget(const toml::key& key, const toml::node& node, Policy& policy) {
        const toml::table* table = requireTable(key, node, "write a [budget] table with max_usd = 0.75 under it");
        if (!table) return;
        for (auto&& [k, v] : *table) {
            if (k.str() == "scope" || k.str() == "period") {
                const auto* text = v.as_string();
                bool isScope = k.str() == "scope";
                bool ok = text && (isScope ? !text->get().empty() && text->get().size() <= 200
                                           : text->get() == "day" || text->get() == "month");
                if (!ok) {
                    error(spanOf(v.source()),
                          isScope ? fmt::format("scope in [budget] must be a non-empty name, got {}", describe(v))
                                  : fmt::format("period in [budget] must be \"day\" or \"month\", got {}", describe(v)),
                          isScope ? "e.g. scope = \"team-a\": every run under a policy naming it shares one budget"
                                  : "period = \"day\" or period = \"month\" (UTC): how long max_usd lasts for the scope");
                    continue;
                }
                (isScope ? policy.budgetScope.emplace() : policy.budgetPeriod) = text->get();
                continue;
            }
            if (k.str() != "max_usd") {
                unknownKey(k, "[budget]", kBudgetKeys);
                continue;
            }
            std::optional<double> value;
            if (const auto* i = v.as_integer()) value = static_cast<double>(i->get());
            if (const auto* f = v.as_floating_point()) value = f->get();
            if (!value || !std::isfinite(*value) || *value < 0) {
                error(spanOf(v.source()),
                      fmt::format("max_usd in [budget] must be a non-negative number, got {}", describe(v)),
                      "e.g. max_usd = 0.75 (dollars; no quotes)");
                continue;
            }
            policy.maxUsd = *value;
        }
        // A shared scope is spent per period: it needs both what it may spend and for how long.
        if (policy.budgetScope && (!policy.maxUsd || policy.budgetPeriod.empty()))
            error(spanOf(key.source()),
                  fmt::format("[budget] scope = \"{}\" needs {}", *policy.budgetScope,
                              !policy.maxUsd ? (policy.budgetPeriod.empty() ? "max_usd and period" : "max_usd")
                                             : "period"),
                  "e.g. scope = \"team-a\", max_usd = 50, period = \"day\": the scope's runs spend at most $50 a day");
        if (!policy.budgetScope && !policy.budgetPeriod.empty())
            error(spanOf(key.source()), "[budget] period applies to a shared scope, and there is none",
                  "add scope = \"NAME\" to share this budget between runs, or remove period");
    }

    void parseFlows(const toml::key& key, const toml::node& node, Policy& policy) {
        const toml::table* table = requireTable(key, node, "write a [flows] table with strict = true under it");
        if (!table) return;
        for (auto&& [k, v] : *table) {
            if (k.str() != "strict") {
                unknownKey(k, "[flows]", kFlowsKeys);
                continue;
            }
            const auto* flag = v.as_boolean();
            if (!flag) {
                error(spanOf(v.source()), fmt::format("strict in [flows] must be true or false, got {}", describe(v)),
                      "e.g. strict = true (no quotes)");
                continue;
            }
            policy.strictFlows = flag->get();
        }
    }

    // [artifacts] trust = "DIR": the .rbc files this policy runs must be signed by a key in DIR,
    // a path relative to the policy file's directory (docs/policy.md "[artifacts]").
    void parseArtifacts(const toml::key& key, const toml::node& node, Policy& policy) {
        const toml::table* table = requireTable(key, node, "write an [artifacts] table with trust = \"keys\" under it");
        if (!table) return;
        for (auto&& [k, v] : *table) {
            if (k.str() != "trust") {
                unknownKey(k, "[artifacts]", kArtifactsKeys);
                continue;
            }
            const auto* dir = v.as_string();
            if (!dir || dir->get().empty()) {
                error(spanOf(v.source()),
                      fmt::format("trust in [artifacts] must be a directory path, got {}", describe(v)),
                      "e.g. trust = \"trusted-keys\" (a directory of Ed25519 public keys, relative to this file)");
                continue;
            }
            std::filesystem::path path(dir->get());
            if (path.is_relative()) path = std::filesystem::path(file_).parent_path() / path;
            policy.trustDir = path.lexically_normal().string();
        }
    }

    // [mcp]: how MCP servers serve capabilities (docs/adapters.md "MCP servers as capabilities"):
    // tools = { "ns.cap" = "tool_name" } and startup_timeout_ms.
    void parseMcp(const toml::key& key, const toml::node& node, McpSettings& mcp) {
        const toml::table* table =
            requireTable(key, node, "write an [mcp] table with startup_timeout_ms, and [mcp.tools] under it");
        if (!table) return;
        for (auto&& [k, v] : *table) {
            std::string_view name = k.str();
            if (name == "startup_timeout_ms") {
                const auto* integer = v.as_integer();
                if (!integer || integer->get() <= 0 || integer->get() > kMaxMcpStartupTimeoutMs) {
                    error(spanOf(v.source()),
                          fmt::format("startup_timeout_ms in [mcp] must be a positive integer of at most {} "
                                      "(milliseconds), got {}",
                                      kMaxMcpStartupTimeoutMs, describe(v)),
                          "e.g. startup_timeout_ms = 30000; leave it out for the default (30 s)");
                    continue;
                }
                mcp.startupTimeoutMs = integer->get();
            } else if (name == "tools") {
                const toml::table* tools = v.as_table();
                if (!tools) {
                    error(spanOf(v.source()),
                          fmt::format("tools in [mcp] must be a table mapping capabilities to tool names, got {}",
                                      describe(v)),
                          "e.g. [mcp.tools] with \"files.read\" = \"read_text_file\" under it");
                    continue;
                }
                for (auto&& [capability, tool] : *tools) {
                    std::string capabilityName(capability.str());
                    const auto* text = tool.as_string();
                    if (capabilityName.find('.') == std::string::npos || capabilityName.front() == '.' ||
                        capabilityName.back() == '.') {
                        error(spanOf(capability.source()),
                              fmt::format("[mcp.tools] maps capabilities, and '{}' is not a capability name",
                                          capabilityName),
                              "capability names are namespaced and quoted, e.g. \"files.read\" = \"read_text_file\"");
                        continue;
                    }
                    if (!text || text->get().empty() || text->get().size() > kMaxMcpToolName) {
                        error(spanOf(tool.source()),
                              fmt::format("{} in [mcp.tools] must be a tool name (a non-empty string of at most {} "
                                          "bytes), got {}",
                                          tomlKey(capabilityName), kMaxMcpToolName, describe(tool)),
                              fmt::format("e.g. {} = \"read_text_file\"", tomlKey(capabilityName)));
                        continue;
                    }
                    mcp.tools[capabilityName] = text->get();
                    mcp.toolSpans[capabilityName] = spanOf(capability.source());
                }
            } else {
                unknownKey(k, "[mcp]", kMcpKeys);
            }
        }
    }

    void parseLimits(const toml::key& key, const toml::node& node, RunLimits& limits) {
        const toml::table* table =
            requireTable(key, node, "write a [limits] table with max_steps, max_memory or max_wall_ms under it");
        if (!table) return;
        for (auto&& [k, v] : *table) {
            std::string_view name = k.str();
            std::optional<int64_t>* target = name == "max_steps"    ? &limits.maxSteps
                                             : name == "max_memory" ? &limits.maxMemory
                                             : name == "max_wall_ms" ? &limits.maxWallMs
                                                                     : nullptr;
            if (!target) {
                unknownKey(k, "[limits]", kLimitsKeys);
                continue;
            }
            const auto* integer = v.as_integer();
            if (!integer || integer->get() <= 0) {
                std::string_view example = name == "max_steps"    ? "max_steps = 100000000"
                                           : name == "max_memory" ? "max_memory = 268435456 (bytes)"
                                                                  : "max_wall_ms = 10000";
                error(spanOf(v.source()),
                      fmt::format("{} in [limits] must be a positive integer, got {}", name, describe(v)),
                      fmt::format("e.g. {}; leave it out for the default", example));
                continue;
            }
            if (name == "max_memory" && static_cast<uint64_t>(integer->get()) > kMaxMemoryBudget) {
                // The heap cannot account more; clamping quietly would report the wrong limit.
                error(spanOf(v.source()),
                      fmt::format("max_memory in [limits] is {} bytes, more than the {} bytes (32 GiB) a run can have",
                                  integer->get(), kMaxMemoryBudget),
                      "lower it to at most 34359738368");
                continue;
            }
            *target = integer->get();
        }
    }

    void parseGrants(const toml::key& key, const toml::node& node, Policy& policy) {
        const toml::table* table = requireTable(key, node, "write one [grant.\"<resource>\"] table per resource");
        if (!table) return;
        for (auto&& [resourceKey, grantNode] : *table) {
            std::string resource(resourceKey.str());
            std::string header = grantHeader(resource);
            const toml::table* settings = grantNode.as_table();
            if (!settings) {
                error(spanOf(grantNode.source()),
                      fmt::format("grant '{}' must be a table of settings, got {}", resource, describe(grantNode)),
                      fmt::format("write {} on its own line, with settings such as max_calls = 5 under it", header));
                continue;
            }
            Grant grant;
            grant.resource = resource;
            // An inline table's source is its braces, which is not where a reader looks for the grant.
            grant.span = spanOf(settings->is_inline() ? resourceKey.source() : settings->source());
            for (auto&& [k, v] : *settings) parseGrantKey(k, v, header, grant);
            policy.grants.emplace(resource, std::move(grant));
        }
    }

    // [models."NAME"]: one table per model the host performs itself (docs/models.md).
    void parseModels(const toml::key& key, const toml::node& node, Policy& policy) {
        const toml::table* table = requireTable(key, node, "write one [models.\"<model>\"] table per model");
        if (!table) return;
        for (auto&& [nameKey, modelNode] : *table) {
            std::string name(nameKey.str());
            std::string header = fmt::format("[models.{}]", tomlKey(name));
            const toml::table* settings = modelNode.as_table();
            if (!settings) {
                error(spanOf(modelNode.source()),
                      fmt::format("model '{}' must be a table of settings, got {}", name, describe(modelNode)),
                      fmt::format("write {} on its own line, with provider = \"openai\" and model = \"…\" under it",
                                  header));
                continue;
            }
            ModelConfig config;
            config.name = name;
            config.span = spanOf(settings->is_inline() ? nameKey.source() : settings->source());
            bool hasProvider = false, hasModel = false, hasBaseUrl = false, hasKeyEnv = false;
            const size_t errorsBefore = found_.size();
            for (auto&& [k, v] : *settings) {
                std::string_view setting = k.str();
                hasProvider = hasProvider || setting == "provider";
                hasModel = hasModel || setting == "model";
                if (setting == "provider") {
                    const auto* text = v.as_string();
                    if (!text || std::find(std::begin(ModelConfig::kProviders), std::end(ModelConfig::kProviders),
                                           text->get()) == std::end(ModelConfig::kProviders)) {
                        error(spanOf(v.source()),
                              fmt::format("provider in {} must be \"openai\" or \"anthropic\", got {}", header,
                                          describe(v)),
                              "\"openai\" speaks Chat Completions (OpenAI, vLLM, llama.cpp, Ollama, gateways); "
                              "\"anthropic\" speaks Messages");
                        continue;
                    }
                    config.provider = text->get();
                } else if (setting == "model") {
                    if (const auto* text = stringSetting(v, header, "model", "e.g. model = \"gpt-4o-mini\""))
                        config.model = *text;
                } else if (setting == "base_url") {
                    const std::string* text =
                        stringSetting(v, header, "base_url", "e.g. base_url = \"http://127.0.0.1:8000/v1\"");
                    if (!text) continue;
                    if (!text->starts_with("http://") && !text->starts_with("https://")) {
                        error(spanOf(v.source()),
                              fmt::format("base_url in {} must start with http:// or https://, got {}", header,
                                          describe(v)),
                              "e.g. base_url = \"http://127.0.0.1:8000/v1\"");
                        continue;
                    }
                    config.baseUrl = *text;
                    while (config.baseUrl.ends_with('/')) config.baseUrl.pop_back();
                    hasBaseUrl = true;
                } else if (setting == "api_key_env") {
                    const auto* text = v.as_string();
                    const bool valid = text && std::all_of(text->get().begin(), text->get().end(), [](char c) {
                        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
                    }) && !(text->get().size() && text->get()[0] >= '0' && text->get()[0] <= '9');
                    if (!valid) {
                        // Never echo the value: an operator may have pasted the key itself here.
                        error(spanOf(v.source()),
                              fmt::format("api_key_env in {} must name an environment variable (letters, digits "
                                          "and _), not hold a key",
                                          header),
                              "e.g. api_key_env = \"OPENAI_API_KEY\"; put the key in that variable, never in this "
                              "file; \"\" sends no key");
                        continue;
                    }
                    config.apiKeyEnv = text->get();
                    hasKeyEnv = true;
                } else if (setting == "max_tokens" || setting == "timeout_ms") {
                    const auto* integer = v.as_integer();
                    const int64_t most = setting == "max_tokens" ? 1'000'000 : 86'400'000;
                    if (!integer || integer->get() <= 0 || integer->get() > most) {
                        error(spanOf(v.source()),
                              fmt::format("{} in {} must be a positive integer of at most {}, got {}", setting, header,
                                          most, describe(v)),
                              setting == "max_tokens" ? "e.g. max_tokens = 1024" : "e.g. timeout_ms = 60000");
                        continue;
                    }
                    (setting == "max_tokens" ? config.maxTokens : config.timeoutMs) = integer->get();
                } else if (setting == "temperature" || setting == "input_usd_per_mtok" ||
                           setting == "output_usd_per_mtok") {
                    std::optional<double> number;
                    if (const auto* i = v.as_integer()) number = static_cast<double>(i->get());
                    if (const auto* f = v.as_floating_point()) number = f->get();
                    const double most = setting == "temperature" ? 2.0 : 1e6;
                    if (!number || !std::isfinite(*number) || *number < 0 || *number > most) {
                        error(spanOf(v.source()),
                              fmt::format("{} in {} must be a number from 0 to {}, got {}", setting, header, most,
                                          describe(v)),
                              setting == "temperature" ? "e.g. temperature = 0.2"
                                                       : "dollars per million tokens, e.g. input_usd_per_mtok = 0.15");
                        continue;
                    }
                    (setting == "temperature"          ? config.temperature
                     : setting == "input_usd_per_mtok" ? config.inputUsdPerMtok
                                                       : config.outputUsdPerMtok) = *number;
                } else {
                    unknownKey(k, header, kModelKeys);
                }
            }
            if (!hasProvider || !hasModel) {
                error(config.span,
                      fmt::format("{} needs {}", header,
                                  !hasProvider && !hasModel ? "provider and model"
                                  : !hasProvider            ? "provider"
                                                            : "model"),
                      "e.g. provider = \"openai\" and model = \"gpt-4o-mini\" (docs/models.md)");
                continue;
            }
            if (found_.size() != errorsBefore) continue;  // reported above
            if (!hasBaseUrl) config.baseUrl = ModelConfig::defaultBaseUrl(config.provider);
            if (!hasKeyEnv) config.apiKeyEnv = ModelConfig::defaultApiKeyEnv(config.provider);
            policy.models.emplace(name, std::move(config));
        }
    }

    const std::string* stringSetting(const toml::node& value, const std::string& header, std::string_view setting,
                                     std::string_view hint) {
        const auto* text = value.as_string();
        if (text && !text->get().empty()) return &text->get();
        error(spanOf(value.source()),
              fmt::format("{} in {} must be a non-empty string, got {}", setting, header, describe(value)),
              std::string(hint));
        return nullptr;
    }

    void parseGrantKey(const toml::key& key, const toml::node& value, const std::string& header, Grant& grant) {
        std::string_view name = key.str();
        if (name == "max_calls") {
            const auto* integer = value.as_integer();
            if (!integer || integer->get() < 0) {
                error(spanOf(value.source()),
                      fmt::format("max_calls in {} must be a non-negative integer, got {}", header, describe(value)),
                      "e.g. max_calls = 5; leave it out for no limit");
                return;
            }
            grant.maxCalls = integer->get();
        } else if (name == "arg_prefix") {
            parseArrays(value, header, "arg_prefix", "arg_prefix = { path = [\"src/\"] }", "the allowed prefixes",
                        [&](const std::string& param, const toml::array& items) {
                            std::vector<std::string> prefixes;
                            bool ok = true;
                            for (size_t i = 0; i < items.size(); ++i) {
                                if (const auto* s = items[i].as_string()) {
                                    prefixes.push_back(s->get());
                                } else {
                                    elementError(items[i], header, "arg_prefix", param, i, "a string",
                                                 "arg_prefix = { path = [\"src/\"] }");
                                    ok = false;
                                }
                            }
                            if (ok) grant.argPrefix[param] = std::move(prefixes);
                        });
        } else if (name == "arg_one_of") {
            parseArrays(value, header, "arg_one_of", "arg_one_of = { folder = [\"inbox\"] }", "the allowed values",
                        [&](const std::string& param, const toml::array& items) {
                            std::vector<nlohmann::json> allowed;
                            bool ok = true;
                            for (size_t i = 0; i < items.size(); ++i) {
                                std::string path = fmt::format("arg_one_of.{}[{}]", tomlKey(param), i);
                                if (auto json = toJsonValue(items[i], header, path)) {
                                    allowed.push_back(std::move(*json));
                                } else {
                                    ok = false;
                                }
                            }
                            if (ok) grant.argOneOf[param] = std::move(allowed);
                        });
        } else if (name == "arg_max") {
            parseArgMax(value, header, grant);
        } else if (name == "approve") {
            parseArrays(value, header, "approve", "approve = { to = [\"external\"] }", "the tags that need approval",
                        [&](const std::string& param, const toml::array& items) {
                            std::vector<std::string> tags;
                            bool ok = true;
                            for (size_t i = 0; i < items.size(); ++i) {
                                const auto* s = items[i].as_string();
                                if (s && !s->get().empty()) {
                                    tags.push_back(s->get());
                                } else {
                                    elementError(items[i], header, "approve", param, i, "a non-empty tag name",
                                                 "approve = { to = [\"external\"] }");
                                    ok = false;
                                }
                            }
                            if (ok) grant.approve[param] = std::move(tags);
                        });
        } else if (name == "approval") {
            parseApproval(value, header, grant);
        } else {
            unknownKey(key, header, kGrantKeys);
        }
    }

    // `approval = "always"`, or a table: `{ quorum = 2, expires = "24h", always = true }` — how many
    // distinct approvers a request needs and how long it may wait for them; `always` (default
    // true) makes every call need approval, false leaves that to the approve tags and the host.
    void parseApproval(const toml::node& value, const std::string& header, Grant& grant) {
        const toml::table* table = value.as_table();
        if (!table) {
            const auto* text = value.as_string();
            if (!text || text->get() != "always") {
                error(spanOf(value.source()),
                      fmt::format("approval in {} must be \"always\", got {}", header, describe(value)),
                      "approval = \"always\", or a table such as approval = { quorum = 2, expires = \"24h\" }; "
                      "leave it out to follow the host's declaration");
                return;
            }
            grant.approvalAlways = true;
            return;
        }
        grant.approvalAlways = true;
        for (auto&& [k, v] : *table) {
            std::string_view name = k.str();
            if (name == "always") {
                if (const auto* b = v.as_boolean()) grant.approvalAlways = b->get();
                else error(spanOf(v.source()), fmt::format("approval.always in {} must be true or false, got {}", header, describe(v)),
                           "always = false applies quorum and expires only to the calls the approve tags send for approval");
            } else if (name == "quorum") {
                const auto* i = v.as_integer();
                if (!i || i->get() < 1 || i->get() > 100) {
                    error(spanOf(v.source()),
                          fmt::format("approval.quorum in {} must be an integer from 1 to 100, got {}", header, describe(v)),
                          "quorum = 2: two different approvers must approve each call");
                    continue;
                }
                grant.approvalQuorum = static_cast<int>(i->get());
            } else if (name == "expires") {
                std::optional<int64_t> seconds;
                if (const auto* text = v.as_string()) seconds = parseDuration(text->get());
                if (!seconds) {
                    error(spanOf(v.source()),
                          fmt::format("approval.expires in {} must be a duration such as \"30m\", \"24h\" or \"7d\", got {}",
                                      header, describe(v)),
                          "a whole number followed by s, m, h or d: a request not approved in that time cannot be approved");
                    continue;
                }
                grant.approvalExpiresS = *seconds;
            } else {
                unknownKey(k, header + " approval", kApprovalKeys);
            }
        }
    }

    // The shared shape of arg_prefix, arg_one_of and approve: a table mapping each parameter name
    // to an array. `onParam` checks and stores the elements of one array.
    template <typename OnParam>
    void parseArrays(const toml::node& value, const std::string& header, std::string_view setting,
                     std::string_view example, std::string_view elements, OnParam onParam) {
        const toml::table* table = value.as_table();
        if (!table) {
            error(spanOf(value.source()),
                  fmt::format("{} in {} must be a table mapping parameter names to arrays, got {}", setting, header,
                              describe(value)),
                  fmt::format("e.g. {}", example));
            return;
        }
        for (auto&& [param, list] : *table) {
            std::string paramName(param.str());
            const toml::array* items = list.as_array();
            if (!items) {
                error(spanOf(list.source()),
                      fmt::format("{}.{} in {} must be an array, got {}", setting, tomlKey(paramName), header,
                                  describe(list)),
                      fmt::format("list {} in brackets, e.g. {}", elements, example));
                continue;
            }
            onParam(paramName, *items);
        }
    }

    void elementError(const toml::node& item, const std::string& header, std::string_view setting,
                      const std::string& param, size_t index, std::string_view expected, std::string_view example) {
        error(spanOf(item.source()),
              fmt::format("{}.{}[{}] in {} must be {}, got {}", setting, tomlKey(param), index, header, expected,
                          describe(item)),
              fmt::format("e.g. {}", example));
    }

    void parseArgMax(const toml::node& value, const std::string& header, Grant& grant) {
        const toml::table* table = value.as_table();
        if (!table) {
            error(spanOf(value.source()),
                  fmt::format("arg_max in {} must be a table mapping parameter names to numbers, got {}", header,
                              describe(value)),
                  "e.g. arg_max = { amount = 100 }");
            return;
        }
        for (auto&& [param, limit] : *table) {
            std::optional<double> number;
            if (const auto* i = limit.as_integer()) number = static_cast<double>(i->get());
            if (const auto* f = limit.as_floating_point()) number = f->get();
            if (!number || !std::isfinite(*number)) {
                error(spanOf(limit.source()),
                      fmt::format("arg_max.{} in {} must be a finite number, got {}", tomlKey(param.str()), header,
                                  describe(limit)),
                      "e.g. arg_max = { amount = 100 }");
                continue;
            }
            grant.argMax[std::string(param.str())] = *number;
        }
    }

    // arg_one_of values are compared with program values as JSON, so only what JSON can hold is
    // allowed: no dates or times, no inf or nan.
    std::optional<nlohmann::json> toJsonValue(const toml::node& node, const std::string& header,
                                              const std::string& path) {
        switch (node.type()) {
            case toml::node_type::string: return nlohmann::json(node.as_string()->get());
            case toml::node_type::integer: return nlohmann::json(node.as_integer()->get());
            case toml::node_type::boolean: return nlohmann::json(node.as_boolean()->get());
            case toml::node_type::floating_point: {
                double number = node.as_floating_point()->get();
                if (std::isfinite(number)) return nlohmann::json(number);
                break;
            }
            case toml::node_type::array: {
                nlohmann::json out = nlohmann::json::array();
                const toml::array& items = *node.as_array();
                bool ok = true;
                for (size_t i = 0; i < items.size(); ++i) {
                    auto item = toJsonValue(items[i], header, fmt::format("{}[{}]", path, i));
                    if (item) {
                        out.push_back(std::move(*item));
                    } else {
                        ok = false;
                    }
                }
                if (!ok) return std::nullopt;
                return out;
            }
            case toml::node_type::table: {
                nlohmann::json out = nlohmann::json::object();
                bool ok = true;
                for (auto&& [k, v] : *node.as_table()) {
                    auto item = toJsonValue(v, header, fmt::format("{}.{}", path, tomlKey(k.str())));
                    if (item) {
                        out[std::string(k.str())] = std::move(*item);
                    } else {
                        ok = false;
                    }
                }
                if (!ok) return std::nullopt;
                return out;
            }
            default: break;
        }
        error(spanOf(node.source()),
              fmt::format("{} in {} must be a string, number, boolean, array or table, got {}", path, header,
                          describe(node)),
              "allowed values are compared with the program's values, which cannot be dates, times, inf or nan");
        return std::nullopt;
    }
};

// Positions first, so a file's problems read top to bottom whatever order toml++ iterates in.
void addSorted(std::vector<Diagnostic> found, DiagnosticList& diags) {
    std::stable_sort(found.begin(), found.end(), [](const Diagnostic& a, const Diagnostic& b) {
        return std::pair(a.span.line, a.span.col) < std::pair(b.span.line, b.span.col);
    });
    for (Diagnostic& d : found) diags.add(std::move(d));
}

// E0505 for each grant of a resource the host does not declare, for each [mcp.tools] entry mapping
// a capability it does not declare and, with `hostModels`, for each [models."NAME"] table whose
// NAME is not a model the host declares, into `found`.
void undeclaredGrants(const Policy& policy, const std::vector<std::string>& hostResources,
                      const std::vector<std::string>* hostModels, std::vector<Diagnostic>& found) {
    if (policy.allowAll) return;
    std::set<std::string_view> declared(hostResources.begin(), hostResources.end());
    for (const auto& [resource, grant] : policy.grants) {
        if (declared.count(resource)) continue;
        Diagnostic d;
        d.code = DiagCode::E0505;
        d.message = fmt::format("policy grants '{}', which the host does not declare", resource);
        d.file = policy.file;
        d.span = grant.span;
        d.details = {{"grant", resource}};  // as serve's E0505 names it
        if (auto close = closestName(resource, hostResources))
            d.hint = fmt::format("did you mean '{}'?", *close);
        else
            d.hint = "grant only capabilities and models declared in the host interface, or remove this grant";
        found.push_back(std::move(d));
    }
    for (const auto& [capability, tool] : policy.mcp.tools) {
        if (declared.count(capability)) continue;
        Diagnostic d;
        d.code = DiagCode::E0505;
        d.message = fmt::format("policy maps '{}' to MCP tool '{}', but the host does not declare '{}'", capability,
                                tool, capability);
        d.file = policy.file;
        auto span = policy.mcp.toolSpans.find(capability);
        if (span != policy.mcp.toolSpans.end()) d.span = span->second;
        d.details = {{"mcp_tool", capability}};
        if (auto close = closestName(capability, hostResources))
            d.hint = fmt::format("did you mean '{}'?", *close);
        else
            d.hint = "map only capabilities declared in the host interface, or remove this line";
        found.push_back(std::move(d));
    }
    if (!hostModels) return;
    std::set<std::string_view> models(hostModels->begin(), hostModels->end());
    for (const auto& [name, config] : policy.models) {
        if (models.count(name)) continue;
        Diagnostic d;
        d.code = DiagCode::E0505;
        d.message = declared.count(name)
                        ? fmt::format("policy configures model '{}', which the host declares as a capability", name)
                        : fmt::format("policy configures model '{}', which the host does not declare", name);
        d.file = policy.file;
        d.span = config.span;
        d.details = {{"model", name}};
        if (auto close = closestName(name, *hostModels))
            d.hint = fmt::format("did you mean '{}'?", *close);
        else
            d.hint = "configure only models declared in the host interface (`model NAME cost …`)";
        found.push_back(std::move(d));
    }
}

}  // namespace

std::string ModelConfig::defaultBaseUrl(std::string_view provider) {
    return provider == "anthropic" ? "https://api.anthropic.com/v1" : "https://api.openai.com/v1";
}

std::string ModelConfig::defaultApiKeyEnv(std::string_view provider) {
    return provider == "anthropic" ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY";
}

std::optional<ModelConfig> modelConfigFromFlag(std::string_view text, std::string& error) {
    size_t equals = text.find('=');
    size_t colon = equals == std::string_view::npos ? std::string_view::npos : text.find(':', equals + 1);
    if (equals == 0 || equals == std::string_view::npos || colon == std::string_view::npos) {
        error = "expected NAME=PROVIDER:MODEL";
        return std::nullopt;
    }
    ModelConfig config;
    config.name = std::string(text.substr(0, equals));
    config.provider = std::string(text.substr(equals + 1, colon - equals - 1));
    std::string_view rest = text.substr(colon + 1);
    size_t at = rest.find("@http://");
    if (at == std::string_view::npos) at = rest.find("@https://");
    config.model = std::string(rest.substr(0, at));
    if (std::find(std::begin(ModelConfig::kProviders), std::end(ModelConfig::kProviders), config.provider) ==
        std::end(ModelConfig::kProviders)) {
        error = fmt::format("unknown provider '{}' (openai or anthropic)", config.provider);
        return std::nullopt;
    }
    if (config.model.empty()) {
        error = "no model id after the provider";
        return std::nullopt;
    }
    config.baseUrl = at == std::string_view::npos ? ModelConfig::defaultBaseUrl(config.provider)
                                                  : std::string(rest.substr(at + 1));
    while (config.baseUrl.ends_with('/')) config.baseUrl.pop_back();
    config.apiKeyEnv = ModelConfig::defaultApiKeyEnv(config.provider);
    // A server of your own (vLLM, llama.cpp, Ollama) usually wants no key: send the provider's
    // variable only when it is set. The provider's own API always gets it (and refuses without).
    const char* key = std::getenv(config.apiKeyEnv.c_str());
    if (at != std::string_view::npos && (!key || !*key)) config.apiKeyEnv.clear();
    return config;
}

const Grant* Policy::grantFor(std::string_view resource) const {
    if (allowAll) {
        static const Grant kUnlimited;
        return &kUnlimited;
    }
    auto it = grants.find(std::string(resource));
    return it == grants.end() ? nullptr : &it->second;
}

Policy Policy::allowAllPolicy() {
    Policy policy;
    policy.allowAll = true;
    return policy;
}

std::optional<Policy> parsePolicy(const std::string& file, std::string_view text, DiagnosticList& diags,
                                  const std::vector<std::string>* hostResources,
                                  const std::vector<std::string>* hostModels) {
    std::vector<Diagnostic> found;
    PolicyParser parser(file, found);
    if (std::optional<TomlTooDeep> deep = tomlTooDeep(text)) {
        // Before toml++ sees it: it would build (and recursively free) one table per level.
        parser.error(Span{deep->line, deep->col, deep->line, deep->col + 1},
                     fmt::format("policy nests keys, tables or arrays more than {} levels deep", kMaxTomlNesting),
                     "a policy needs at most four levels, as in [grant.\"repo.edit\".arg_prefix]");
        addSorted(std::move(found), diags);
        return std::nullopt;
    }
    toml::table root;
    try {
        root = toml::parse(text);
    } catch (const toml::parse_error& e) {
        // toml++'s descriptions are parser messages ("Error while parsing table header: expected
        // ']', saw '\n'"), free of paths; lower-case the first letter to read as one sentence.
        std::string description(e.description());
        if (!description.empty() && description[0] >= 'A' && description[0] <= 'Z')
            description[0] = static_cast<char>(description[0] - 'A' + 'a');
        parser.error(spanOf(e.source()), fmt::format("policy is not valid TOML: {}", description));
        addSorted(std::move(found), diags);
        return std::nullopt;
    }
    Policy policy;
    policy.file = file;
    policy.sha256 = sha256Hex(text);
    parser.parse(root, policy);
    // The grants that parsed are compared with the host too, so one pass reports every problem.
    if (hostResources) undeclaredGrants(policy, *hostResources, hostModels, found);
    if (!found.empty()) {
        addSorted(std::move(found), diags);
        return std::nullopt;
    }
    return policy;
}

void checkPolicyAgainstHost(const Policy& policy, const std::vector<std::string>& hostResources,
                            DiagnosticList& diags, const std::vector<std::string>* hostModels) {
    std::vector<Diagnostic> found;
    undeclaredGrants(policy, hostResources, hostModels, found);
    addSorted(std::move(found), diags);
}

}  // namespace remit
