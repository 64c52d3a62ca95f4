// Names from outside a host interface — MCP tools and their parameters today, the operations of
// other kinds of services later — as Remit identifiers, and back. `remitc import` writes each
// outside name through identifierFrom (compiler/host_import.h, which also adds a trailing `_` to a
// word the language keeps as a keyword), and an adapter finds the outside name a Remit name stands
// for with matchesImportedName and sends a call's arguments under their outside names with
// argumentsByImportedName (broker/mcp_adapter.h). One rule on both sides, so an imported
// host interface needs no table of renamings.
#pragma once

#include <string>
#include <string_view>

#include "runtime/json_text.h"

namespace remit {

// `name` as a Remit identifier: every character outside [A-Za-z0-9_] becomes `_`, and a name that
// starts with a digit (or is empty) gets a leading `_`. `get-sum` → `get_sum`, `2fa` → `_2fa`.
std::string identifierFrom(std::string_view name);

// Whether the Remit name `remitName` stands for the outside name `external`: they are equal, or
// `remitName` is identifierFrom(external), possibly with one `_` added (a keyword, `limit` →
// `limit_`). An adapter prefers an exact match and refuses an ambiguous one.
bool matchesImportedName(std::string_view external, std::string_view remitName);

// A capability call's arguments ({param: value}) as the input the service expects: each parameter
// under the property of `inputSchema` (a JSON Schema object, as the importer read it) it stands
// for — its own name when the schema has it, else the one property it matches (`limit_` → `limit`,
// `get_sum` → `get-sum`); a parameter that matches none, or several, keeps its name.
Json argumentsByImportedName(const Json& args, const Json& inputSchema);

}  // namespace remit
