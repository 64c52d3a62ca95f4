// JSON text exactly as Python's json.dumps writes it. The canonical form — json.dumps(x,
// sort_keys=True, separators=(",", ":"), ensure_ascii=False) — is what approval digests and
// idempotency keys hash (docs/compatibility.md "Hashes and canonical JSON"), so it must match the
// prototype's bytes: the broker hashes it, replay compares arguments with it. The same writer, with
// other options, prints results like the prototype (`run` output) and backs str() of lists and
// records (runtime/ops.h).
//
// Python's choices, kept here: integers print as decimal and floats as repr (`612.0`, `1e+16`,
// `1e-05`), so nlohmann's integer/float distinction is preserved — 1 and 1.0 print differently;
// non-finite floats print as NaN, Infinity, -Infinity (allow_nan); keys sort by code point (the
// byte order of UTF-8); strings escape `"` `\` and control characters (\n \r \t \b \f, others
// \u00XX in lowercase hex), and with ensureAscii also every non-ASCII character (\uXXXX, with
// surrogate pairs) and DEL. The writers are iterative: nesting depth costs heap, not stack.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "runtime/json_text.h"

namespace remit {

// json.dumps's parameters. The defaults are Python's, except that the separators must be given
// explicitly when indenting (Python then defaults item_separator to ",").
struct JsonTextStyle {
    bool sortKeys = false;
    bool ensureAscii = true;
    int indent = -1;  // < 0: one line; otherwise newline and `indent` spaces per level
    std::string_view itemSeparator = ", ";
    std::string_view keySeparator = ": ";
};

std::string dumpJson(const nlohmann::json& value, const JsonTextStyle& style);
std::string dumpJson(const Json& value, const JsonTextStyle& style);

// json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).
std::string canonicalJson(const nlohmann::json& value);
std::string canonicalJson(const Json& value);

// Appends `text` as a quoted JSON string literal, escaped as json.dumps does.
void appendJsonString(std::string& out, std::string_view text, bool ensureAscii);

}  // namespace remit
