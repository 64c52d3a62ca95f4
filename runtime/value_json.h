// Value ⇄ JSON (docs/compatibility.md "JSON output"). Out: the VM's result for `run` (printed and
// in the `--json` envelope), capability and model arguments sent to adapters, trace payloads and,
// through runtime/canonical_json.h, approval digests and idempotency keys. In: program inputs
// (`-i`, `--inputs`), fixture and adapter results and model outputs, each checked against the
// static type it must have, by the rules for model output (docs/compatibility.md "Inputs").
//
// Out: Int → integer, Float → float (nlohmann keeps them apart, so 612.0 stays `612.0` and 1
// stays `1`), Str → string, Bool → bool, Unit → null, List → array, record → object with its
// fields in order. Tags and provenance are not part of the JSON.
//
// In, per type: Unit ← null; Bool ← true/false; Int ← an integer, or an integral float within the
// 64-bit range (coerced); Float ← any number (an integer is converted); Str ← a string; an enum
// ← one of its options; List ← an array of at most `max` items; Record ← an object with exactly
// the record's fields (none missing, none extra). The first mismatch is reported with its path,
// e.g. `input.ticket.body: expected Str, found number`. Every node of the value built — each
// element, field and container — carries the given tags and provenance.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/heap.h"
#include "runtime/json_text.h"
#include "runtime/types.h"
#include "runtime/value.h"

namespace remit {

// The JSON of `v`, or nullopt when its compact text would exceed `maxBytes` (not counting string
// escapes) — so a value made large by sharing (a list holding one big string many times) cannot
// blow up when unfolded into JSON. The VM's result-size limit (16 MiB) is checked through it.
// Iterative: deep values do not recurse.
std::optional<Json> valueToJson(const Value& v, size_t maxBytes = SIZE_MAX);

// Where and why JSON does not fit a type.
struct JsonMismatch {
    std::string path;     // "input.ticket.body", "result[2].id"
    std::string problem;  // "expected Str, found number"
    std::string text() const { return path + ": " + problem; }
};

// The outcome of valueFromJson: a value, or a mismatch; neither means the heap failed (R0701 in
// heap.error()).
struct ValueFromJson {
    std::optional<Value> value;
    std::optional<JsonMismatch> mismatch;
};

// `json` checked against `type` and converted; `path` names the root in messages ("input.ticket").
ValueFromJson valueFromJson(Heap& heap, const nlohmann::json& json, TypeRef type, std::string_view path,
                            TagSetId tags = kNoTags, ProvId prov = kNoProv);
ValueFromJson valueFromJson(Heap& heap, const Json& json, TypeRef type, std::string_view path, TagSetId tags = kNoTags,
                            ProvId prov = kNoProv);

}  // namespace remit
