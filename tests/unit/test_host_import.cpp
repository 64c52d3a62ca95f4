// Drafting host interfaces from JSON Schema operations (compiler/host_import.h), as `remitc import
// mcp` does: the type mapping (records, enums, bounded and unbounded lists, $refs), what cannot be
// expressed (never a wrong type), names made into identifiers, and a draft that parses, resolves
// and is already formatted. The real servers' imports are tested by tests/e2e/test_mcp_client.py.
#include <doctest/doctest.h>

#include <string>

#include "compiler/checker.h"
#include "compiler/formatter.h"
#include "compiler/host_import.h"
#include "compiler/parser.h"
#include "runtime/host_model.h"

using namespace remit;

namespace {

Json object(Json properties, Json required) {
    return Json{{"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)}};
}

ImportedOperation op(std::string name, Json input, Json output = nullptr) {
    ImportedOperation o;
    o.name = std::move(name);
    o.input = std::move(input);
    o.output = std::move(output);
    return o;
}

// The draft must parse, resolve, and be what `remitc fmt` would write.
HostModel requireValid(const HostDraft& draft) {
    DiagnosticList diags;
    SourceFile source("host.rmti", draft.text);
    auto host = parseHost(source, diags);
    REQUIRE_MESSAGE(host, draft.text);
    REQUIRE_MESSAGE(!diags.hasErrors(), draft.text);
    CHECK(formatHost(*host) == draft.text);
    HostModel model;
    resolveHost(*host, "host.rmti", model, diags);
    for (const Diagnostic& d : diags.items()) MESSAGE(d.message);
    REQUIRE_MESSAGE(!diags.hasErrors(), draft.text);
    return model;
}

bool has(const std::string& text, const std::string& fragment) {
    return text.find(fragment) != std::string::npos;
}

const Json kStr = {{"type", "string"}};

}  // namespace

TEST_CASE("host import: schemas become parameters, records, enums and bounded lists") {
    Json entity = object({{"name", kStr}, {"tags", {{"type", "array"}, {"items", kStr}, {"maxItems", 5}}}, {"note", kStr}},
                         {"name", "tags"});
    Json input = object({{"path", kStr},
                         {"limit", {{"type", "integer"}}},
                         {"ratio", {{"type", "number"}}},
                         {"dry", {{"type", "boolean"}}},
                         {"mode", {{"type", "string"}, {"enum", {"fast", "safe {x}"}}}},
                         {"entities", {{"type", "array"}, {"items", entity}}},
                         {"tail", {{"type", "number"}, {"description", "optional"}}}},
                        {"path", "limit", "ratio", "dry", "mode", "entities"});
    Json output = object({{"entities", {{"type", "array"}, {"items", entity}, {"maxItems", 100}}}, {"count", {{"type", "integer"}}}},
                         {"entities", "count"});
    ImportedOperation first = op("create-entities", input, output);
    first.title = "Create entities";
    first.description = "Creates them.\nSecond paragraph, with a control \x01 character.";
    first.idempotent = true;
    first.remarks.push_back("read-only, says the server (readOnlyHint)");
    ImportedOperation second = op("search", object({{"query", kStr}}, {"query"}),
                                  object({{"hits", {{"type", "array"}, {"items", entity}}}}, {"hits"}));
    HostDraft draft = draftHostInterface("kg", {"drafted for a test"}, {first, second});
    HostModel model = requireValid(draft);
    CHECK(draft.capabilities == 2);
    CHECK(draft.notImported.empty());
    INFO(draft.text);
    CHECK(has(draft.text, "# drafted for a test\n"));
    CHECK(has(draft.text, "# TODO(operator): this is a draft."));
    CHECK(has(draft.text, "type Entity = { name: Str, tags: List[Str] max 5 }\n"));
    CHECK(has(draft.text, "type CreateEntitiesResult = { entities: List[Entity] max 100, count: Int }\n"));
    CHECK(has(draft.text,
              "capability kg.create_entities(path: Str, limit_: Int, ratio: Float, dry: Bool, mode: \"fast\" | \"safe \\{x\\}\", "
              "entities: List[Entity]) -> CreateEntitiesResult\n  idempotent\n"));
    CHECK(has(draft.text, "# Create entities\n# Creates them.\n# Second paragraph, with a control character.\n"));
    CHECK(has(draft.text, "# the service names it 'create-entities'\n"));
    CHECK(has(draft.text, "# read-only, says the server (readOnlyHint)\n"));
    CHECK(has(draft.text, "# optional, never sent (Remit parameters are all required): tail (number)\n"));
    CHECK(has(draft.text, "# optional record fields left out: entities[].note"));
    CHECK(has(draft.text, "# unbounded list (no maxItems; add `max N` where you can): entities\n"));
    // The second operation shares the record; its result has a name of its own.
    CHECK(has(draft.text, "type SearchResult = { hits: List[Entity] }\n"));
    CHECK(has(draft.text, "capability kg.search(query: Str) -> SearchResult\n"));
    const Capability* create = model.capability("kg.create_entities");
    REQUIRE(create);
    CHECK(create->idempotent);
    CHECK(create->params.size() == 6);
    CHECK_FALSE(model.capability("kg.search")->idempotent);
}

TEST_CASE("host import: what the language cannot express gets a note, never a wrong type") {
    auto notImported = [](Json propertySchema) {
        HostDraft draft = draftHostInterface("t", {}, {op("tool", object({{"p", propertySchema}}, {"p"}))});
        requireValid(draft);
        CHECK(draft.capabilities == 0);
        REQUIRE(draft.notImported.size() == 1);
        CHECK(has(draft.text, "# NOT IMPORTED: 'tool': parameter 'p' is "));
        return draft.notImported[0];
    };
    CHECK(notImported({{"type", "object"}, {"additionalProperties", kStr}}) ==
          "'tool': parameter 'p' is a map (an object with free-form keys)");
    CHECK(notImported({{"type", {"string", "null"}}}) == "'tool': parameter 'p' is a value that may be null");
    CHECK(notImported({{"anyOf", {{{"type", "string"}}, {{"type", "null"}}}}}) ==
          "'tool': parameter 'p' is a value that may be null");
    CHECK(notImported({{"anyOf", {{{"type", "string"}}, {{"type", "number"}}}}}) ==
          "'tool': parameter 'p' is a union (anyOf) of different types");
    CHECK(notImported({{"type", {"string", "number"}}}) == "'tool': parameter 'p' is a union of types (string or number)");
    CHECK(notImported({{"enum", {1, 2}}}) == "'tool': parameter 'p' is an enum of values that are not all plain strings");
    CHECK(notImported({{"type", "array"}, {"prefixItems", {kStr}}}) ==
          "'tool': parameter 'p' is a tuple (a list whose items have different types)");
    CHECK(notImported({{"type", "array"}}) == "'tool': parameter 'p' is a list whose items have no schema");
    CHECK(notImported(Json::object()) == "'tool': parameter 'p' is any JSON value (no schema)");
    CHECK(notImported({{"$ref", "https://example.com/s.json"}}) ==
          "'tool': parameter 'p' is a reference outside the schema ('https://example.com/s.json')");
    CHECK(notImported(object({{"Content-Type", kStr}}, {"Content-Type"})) ==
          "'tool': parameter 'p' is an object with the property 'Content-Type', which cannot be a Remit field name");
    CHECK(notImported(object({{"a", kStr}}, Json::array())) == "'tool': parameter 'p' is an object whose properties are all optional");

    // Recursion through $defs is refused; a plain $ref is followed.
    Json tree = Json::parse(R"({"type": "object", "properties": {"root": {"$ref": "#/$defs/Node"}}, "required": ["root"],
        "$defs": {"Node": {"type": "object", "required": ["name", "children"], "properties": {
            "name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}}})");
    HostDraft recursive = draftHostInterface("t", {}, {op("walk", tree)});
    requireValid(recursive);
    REQUIRE(recursive.notImported.size() == 1);
    CHECK(recursive.notImported[0] ==
          "'walk': parameter 'root': root.children is recursive (it refers to '#/$defs/Node' inside itself)");
    Json plain = Json::parse(R"({"type": "object", "properties": {"at": {"$ref": "#/definitions/Point"}}, "required": ["at"],
        "definitions": {"Point": {"type": "object", "required": ["x", "y"],
                                  "properties": {"x": {"type": "number"}, "y": {"type": "number"}}}}})");
    HostDraft followed = draftHostInterface("t", {}, {op("move", plain)});
    requireValid(followed);
    CHECK(has(followed.text, "type Point = { x: Float, y: Float }\n"));
    CHECK(has(followed.text, "capability t.move(at: Point) -> Str\n"));

    // A result the language cannot express is the tool's text (Str), with a note.
    HostDraft text = draftHostInterface("t", {}, {op("stats", object({}, Json::array()), {{"type", "object"}, {"additionalProperties", true}})});
    requireValid(text);
    CHECK(text.capabilities == 1);
    CHECK(has(text.text, "# its result is a map (an object with free-form keys); typed Str, the tool's text answer\n"));
    CHECK(has(text.text, "capability t.stats() -> Str\n"));
    REQUIRE(text.notes.size() == 1);
}

TEST_CASE("host import: records of operations left out do not leak, names stay unique") {
    Json shared = object({{"id", kStr}}, {"id"});
    HostDraft draft = draftHostInterface(
        "t", {},
        {op("first", object({{"item", shared}, {"bad", {{"type", "object"}}}}, {"item", "bad"})),
         op("second", object({{"item", shared}}, {"item"})), op("a-b", object({}, Json::array())),
         op("a_b", object({}, Json::array())), op("list", object({}, Json::array()), object({{"Str", kStr}}, {"Str"}))});
    requireValid(draft);
    INFO(draft.text);
    CHECK(draft.capabilities == 3);
    REQUIRE(draft.notImported.size() == 2);
    CHECK(draft.notImported[0] == "'first': parameter 'bad' is a map (an object with free-form keys)");
    CHECK(draft.notImported[1] == "'a_b': it would be t.a_b, as 'a-b' is");
    // `second` declares the record `first` would have shared.
    CHECK(has(draft.text, "capability t.second(item: Item2) -> Str\n"));
    CHECK(has(draft.text, "type Item2 = { id: Str }\n"));
    CHECK(has(draft.text, "type ListResult = { Str: Str }\n"));
}

TEST_CASE("host import: another importer's draft speaks of its own kind of service") {
    DraftWords words;
    words.description = "OpenAPI document";
    words.textResult = "the response body as text";
    words.noOutput = "it declares no JSON response schema";
    Json map = {{"type", "object"}, {"additionalProperties", true}};
    HostDraft draft = draftHostInterface("pets", {"from petstore.json"},
                                         {op("getInventory", object({}, Json::array()), map),
                                          op("deletePet", object({{"petId", {{"type", "integer"}}}}, {"petId"}))},
                                         words);
    requireValid(draft);
    INFO(draft.text);
    CHECK(has(draft.text, "# TODO(operator): this is a draft. For each capability decide what no OpenAPI document says:\n"));
    CHECK(has(draft.text, "# its result is a map (an object with free-form keys); typed Str, the response body as text\n"));
    CHECK(has(draft.text, "# result: the response body as text (it declares no JSON response schema)\n"));
    CHECK(has(draft.text, "capability pets.deletePet(petId: Int) -> Str\n"));
    CHECK_FALSE(has(draft.text, "tool"));
}

TEST_CASE("host import: names from outside") {
    CHECK(namespaceFrom("secure-filesystem-server") == "secure_filesystem");
    CHECK(namespaceFrom("memory-server") == "memory");
    CHECK(namespaceFrom("mcp-servers/everything") == "everything");
    CHECK(namespaceFrom("MCP Server") == "service");
    CHECK(namespaceFrom("GitHub") == "github");
    CHECK(namespaceFrom("42 things") == "_42_things");
    CHECK(namespaceFrom("match") == "match_");
    CHECK(upperCamelFrom("read_text_file") == "ReadTextFile");
    CHECK(upperCamelFrom("entityType") == "EntityType");
    CHECK(upperCamelFrom("get-sum") == "GetSum");
    CHECK(upperCamelFrom("3d") == "T3d");
    CHECK(remitIdentifierFrom("limit") == "limit_");
    CHECK(remitIdentifierFrom("in") == "in_");
    CHECK(remitIdentifierFrom("from") == "from");
    CHECK(remitIdentifierFrom("x-y") == "x_y");
    CHECK(isRemitKeyword("type"));
    CHECK_FALSE(isRemitKeyword("types"));
}
