// JSON text that comes from outside — inputs, fixtures, approval stores, trace lines, adapter
// replies, serve and MCP requests, API keys — parsed with its nesting bounded first. nlohmann's
// parser is iterative, but copying, comparing and printing a tree recurse once per level, so
// text nested 200,000 deep would overflow the stack long after it parsed. Every reader goes
// through here: text that nests deeper than its limit is refused before a tree exists.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace remit {

// The JSON type of the code base: nlohmann's, keeping keys in insertion order (the order
// documents, traces and replies are written in). Documents that are only read, or whose objects
// are meant to be kept with sorted keys (fixtures, the approval store, the events a trace reader
// renders), are plain nlohmann::json, as parseJsonText returns them.
using Json = nlohmann::ordered_json;

// The default limit. A Remit value nests at most kMaxTypeDepth (128) levels, and the documents
// that carry values (a trace event, an approval store entry, a fixture, a request) add a handful;
// nothing legitimate comes near 256, and 256 levels of recursion are harmless on any stack.
constexpr size_t kMaxJsonNesting = 256;

// Whether JSON text opens more than `maxDepth` arrays and objects at once (brackets inside
// strings do not count). Linear, no allocation; meaningful for any text, valid JSON or not.
bool jsonNestsDeeperThan(std::string_view text, size_t maxDepth);

// `text` with every lone UTF-16 surrogate escape (`\ud83c` not followed by its low half, or a
// low half on its own) replaced by `\ufffd`, U+FFFD REPLACEMENT CHARACTER; everything else is
// kept byte for byte. JavaScript writes such escapes for a string cut inside an emoji, and Node and
// Python accept them, while the JSON parser refuses them (docs/mcp.md, "Errors and limits").
// `replaced` is set to the number of escapes replaced.
std::string replaceLoneSurrogates(std::string_view text, size_t* replaced = nullptr);

// The `id` member of a JSON-RPC message that may not parse as a whole: the value of the top-level
// object's "id" key when it is a string or an integer written plainly, else null. Lets a reply to
// a broken request still name it.
Json recoverMessageId(std::string_view text);

// Parses `text`. On failure returns nullopt with `error` saying "invalid JSON in WHAT at line L,
// column C", "invalid JSON in WHAT: nested deeper than N levels", "…: it contains a NUL byte" or
// "…: a number is too large for a 64-bit float" (`1e999`) — never the parser's exception text,
// and never an exception.
std::optional<nlohmann::json> parseJsonText(std::string_view what, std::string_view text, std::string& error,
                                            size_t maxDepth = kMaxJsonNesting);
std::optional<Json> parseOrderedJsonText(std::string_view what, std::string_view text, std::string& error,
                                         size_t maxDepth = kMaxJsonNesting);

// Reads the regular file at `path` (runtime/files.h: at most `maxBytes`) and parses it as above,
// naming the file in every message. `missing` is set when the file does not exist (some callers
// treat that as "empty").
std::optional<nlohmann::json> readJsonFile(const std::string& path, size_t maxBytes, std::string_view what,
                                           std::string& error, bool* missing = nullptr,
                                           size_t maxDepth = kMaxJsonNesting);

}  // namespace remit
