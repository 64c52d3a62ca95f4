// YAML documents read as JSON, for the OpenAPI documents `remitc import openapi` and the `openapi`
// adapter read (broker/openapi.h takes this as its YamlReader). Over yaml-cpp, linked into the tools
// only (a library of its own, remit_yaml, so the embedding library does not carry it).
//
// Plain scalars become what YAML 1.2's core schema makes them — null (`~`, `null`, empty), booleans
// (`true`, `False`, …), integers (decimal, `0x`, `0o`) and floats — and everything else, quoted
// scalars included, a string; a float YAML allows but JSON does not (`.inf`, `.nan`) stays a string.
// Aliases are followed, within kMaxYamlNodes values in all, so a document of aliases to aliases
// cannot expand without bound; nesting is bounded as JSON's is; a key given twice is an error.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/json_text.h"

namespace remit {

inline constexpr size_t kMaxYamlNodes = 2'000'000;

// `text` as JSON. On failure nullopt with `error` naming `what` and, where known, the line and
// column; never an exception.
std::optional<Json> parseYamlAsJson(std::string_view what, std::string_view text, std::string& error);

}  // namespace remit
