// JSON Schema from Remit types (docs/adapters.md "Requests"): the schema the broker sends with
// every model and agent request, which adapters hand to the model and fixtures use to shape
// `answer`s. The shape is the prototype's byte for byte (same keys, same order), so a prototype
// adapter that inspects the schema sees what it always saw:
//   Int → {"type":"integer"} · Float → {"type":"number"} · Bool → {"type":"boolean"} ·
//   Str → {"type":"string"} · enum → {"type":"string","enum":[options]} ·
//   List → {"type":"array","items":S[,"maxItems":N]} ·
//   record → {"type":"object","properties":{...},"required":[every field],"additionalProperties":false}
// Unit has no schema in the prototype (a model cannot produce it); we give {"type":"null"} rather
// than fail, since the checker already refuses such asks. Depth is bounded by kMaxTypeDepth.
#pragma once

#include <nlohmann/json.hpp>

#include "runtime/json_text.h"
#include "runtime/types.h"

namespace remit {

Json jsonSchemaFor(TypeRef type);

// The part of `value` that `schema` (this file's form) declares: of an object only the declared
// properties (deeply, through lists), anything else unchanged. How an adapter shapes a service's
// structured answer (an MCP tool's structuredContent, an HTTP API's JSON body) into a capability's
// declared return type before the broker validates it: a service may always say more than the
// host interface asks for.
Json projectOntoSchema(const Json& value, const Json& schema);

}  // namespace remit
