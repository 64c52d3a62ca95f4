// Drafting a host interface from the operations a service describes with JSON Schema: the tools of
// an MCP server today (`remitc import mcp`, cli/import_command.cpp; docs/import.md), the operations
// of an OpenAPI document or any other service that describes its operations with JSON Schema. The
// importer of each kind of service lists its operations as ImportedOperation; draftHostInterface
// writes them as a formatted host.rmti (through the formatter, so `remitc fmt --check` accepts it),
// and SchemaTyper is the one mapping from JSON Schema to Remit types every importer shares. Its
// adapter maps names back with runtime/imported_names.h and shapes answers into the declared types
// with projectOntoSchema (runtime/json_schema.h); docs/import.md "For other importers".
//
// What the draft says and what it leaves to the operator: each operation becomes `capability
// NS.NAME(params) -> T`, its required input properties the parameters (Remit parameters are all
// required; the optional ones are listed in a comment and never sent), `idempotent` when the
// service says so, its title and description as comments, and one TODO at the top for what no
// service can say — result tags, `deny`/`approve` tags, approvals and costs. A schema the language
// cannot express (a map, a union of non-strings, a nullable value, recursion, a tuple) is never
// given a wrong type: a parameter that needs one leaves its operation out with a note saying why,
// a result that needs one becomes `Str` (the service's text answer) with a note.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ast.h"
#include "runtime/json_text.h"

namespace remit {

// Whether `word` is one of the language's keywords (compiler/token.h).
bool isRemitKeyword(std::string_view word);
// An outside name as a Remit identifier: runtime/imported_names.h's identifierFrom, plus a `_`
// after a keyword (`limit` → `limit_`), which adapters also accept (matchesImportedName).
std::string remitIdentifierFrom(std::string_view name);
// Whether `name` can be the namespace of capabilities (`NS.tool`): an identifier, not a keyword.
bool isCapabilityNamespace(std::string_view name);
// A type name from words: `read_text_file` → `ReadTextFile`, `entityType` → `EntityType`.
std::string upperCamelFrom(std::string_view name);
// A capability namespace from a service's name: its last `/` part, lower-cased, in words joined by
// `_`, without the words "mcp", "server" and "servers": `secure-filesystem-server` →
// `secure_filesystem`, `mcp-servers/everything` → `everything`; `service` when nothing is left.
std::string namespaceFrom(std::string_view serviceName);

// JSON Schema → Remit types, shared by every importer. Record types become named `type`
// declarations (identical records share one name); enums of strings are written inline; every
// other shape is a builtin type. Supports `type` (one, or a list of one), `enum` and `const` of
// strings, `anyOf`/`oneOf` of string constants, `properties`/`required`, `items`, `maxItems`, and
// local `$ref`s (`#/$defs/…`, `#/definitions/…`).
class SchemaTyper {
public:
    struct Typed {
        ast::TypePtr type;  // null when the schema cannot be expressed
        std::string why;    // then: what the schema is ("a map (an object with free-form keys)")
        std::string where;  // and the path of the part that is, when deeper than the top
    };

    // The type `schema` describes, within the document `root` (for `$ref`s). `nameHint` names a
    // record type (made unique); `path` names the place in notes ("entities[]", "result.content").
    // With `ownRecord`, a record at the top gets a declaration of its own, never shared.
    Typed typeFor(const Json& schema, const Json& root, const std::string& nameHint, const std::string& path,
                  bool ownRecord = false);

    // Lists without `maxItems`, and optional record properties left out, met so far (by path):
    // the draft flags them in comments.
    std::vector<std::string> takeUnbounded();
    std::vector<std::string> takeOmitted();

    // The record types named so far, in the order they were first needed, as declarations.
    std::vector<ast::DeclPtr> takeDeclarations();
    // Forgets the record types named since the last takeDeclarations (an operation left out).
    void discardDeclarations();

private:
    struct Named {
        std::string name;
        std::string key;  // the structure, for sharing
        ast::TypePtr type;
    };
    std::vector<Named> named_;
    std::vector<std::string> taken_;
    std::vector<std::string> refStack_;
    std::vector<std::string> unbounded_;
    std::vector<std::string> omitted_;
    int depth_ = 0;

    Typed fail(std::string why);
    // `wanted` (or `Record`), made unique among the names given out so far and kept from builtins.
    std::string reserveName(const std::string& wanted);
};

// One operation of a service, as an importer found it.
struct ImportedOperation {
    std::string name;         // the service's name for it (an MCP tool's name)
    std::string title;        // optional
    std::string description;  // optional
    Json input;               // JSON Schema of its input object: each property a parameter
    Json output;              // JSON Schema of its result, or null: its result is text (Str)
    bool idempotent = false;  // the service says calling it twice is harmless
    std::vector<std::string> remarks;  // more to say in its comment ("read-only", "destructive")
};

struct HostDraft {
    std::string text;  // the host interface, formatted
    size_t capabilities = 0;
    std::vector<std::string> notImported;  // "tool 'x': why", also written as comments in `text`
    std::vector<std::string> notes;        // results typed Str for lack of a type, and the like
};

// How a draft's comments speak of the service, so each importer's draft reads in its own terms.
// The defaults are an MCP server's; an OpenAPI importer would say "OpenAPI document", "the
// response body as text" and "it declares no JSON response schema".
struct DraftWords {
    std::string description = "tool list";                  // the TODO: "decide what no <description> says"
    std::string textResult = "the tool's text answer";      // what a result typed Str holds
    std::string noOutput = "it declares no output schema";  // why a result is Str (ImportedOperation::output null)
};

// Drafts a host interface whose capabilities are `ns.<name>` (`ns` must be an identifier that is
// not a keyword). `header` lines are written as comments at the top (without '#').
HostDraft draftHostInterface(const std::string& ns, const std::vector<std::string>& header,
                             const std::vector<ImportedOperation>& operations, const DraftWords& words = {});

}  // namespace remit
