// OpenAPI documents (broker/openapi.h) and YAML read as JSON (cli/yaml_json.h): what the importer
// and the adapter both see in a document.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <string>

#include "broker/openapi.h"
#include "cli/yaml_json.h"

using namespace remit;

namespace {

Json yaml(const std::string& text) {
    std::string error;
    std::optional<Json> j = parseYamlAsJson("doc.yaml", text, error);
    INFO(error);
    REQUIRE(j);
    return *j;
}

std::string yamlError(const std::string& text) {
    std::string error;
    CHECK_FALSE(parseYamlAsJson("doc.yaml", text, error));
    return error;
}

OpenApiDocument document(const std::string& text) {
    std::string error;
    std::optional<OpenApiDocument> doc = parseOpenApi("api.yaml", text, error, parseYamlAsJson);
    INFO(error);
    REQUIRE(doc);
    return std::move(*doc);
}

std::string documentError(const std::string& text) {
    std::string error;
    CHECK_FALSE(parseOpenApi("api.yaml", text, error, parseYamlAsJson));
    return error;
}

}  // namespace

TEST_CASE("yaml: plain scalars are typed by YAML's core schema, quoted ones are strings") {
    Json j = yaml(
        "a: 1\nb: -7\nc: 0x1F\nd: 0o17\ne: 1.5\nf: -2e3\ng: true\nh: False\ni: ~\nj: null\nk:\nl: '12'\n"
        "m: \"true\"\nn: 3.0.4\no: .inf\np: 99999999999999999999\nq: hello world\nr: !!str 5\n");
    CHECK(j["a"] == 1);
    CHECK(j["b"] == -7);
    CHECK(j["c"] == 31);
    CHECK(j["d"] == 15);
    CHECK(j["e"] == 1.5);
    CHECK(j["f"] == -2000.0);
    CHECK(j["g"] == true);
    CHECK(j["h"] == false);
    CHECK(j["i"].is_null());
    CHECK(j["j"].is_null());
    CHECK(j["k"].is_null());
    CHECK(j["l"] == "12");
    CHECK(j["m"] == "true");
    CHECK(j["n"] == "3.0.4");
    CHECK(j["o"] == ".inf");  // JSON has no infinity
    CHECK(j["p"] == "99999999999999999999");
    CHECK(j["q"] == "hello world");
    CHECK(j["r"] == "5");
    // Keys keep the document's order; block scalars are strings.
    Json k = yaml("z: 1\ny: |\n  two\n  lines\nx: [1, {a: b}]\n");
    CHECK(k.begin().key() == "z");
    CHECK(k["y"] == "two\nlines\n");
    CHECK(k["x"] == Json::parse(R"([1, {"a": "b"}])"));
}

TEST_CASE("yaml: errors say where, and hostile documents are refused") {
    CHECK(yamlError("a: [1, 2\nb: 3\n").find("invalid YAML in doc.yaml at line") == 0);
    CHECK(yamlError("a: 1\na: 2\n") == "invalid YAML in doc.yaml at line 2, column 1: the key 'a' appears twice");
    CHECK(yamlError("? [1, 2]\n: x\n").find("a key that is not a plain value") != std::string::npos);
    CHECK(yamlError(std::string("a: 1\0b", 7)) == "invalid YAML in doc.yaml: it contains a NUL byte");
    // Aliases that double at every level: 2^30 values if followed without a bound.
    std::string laughs = "a0: &a0 [x, x]\n";
    for (int i = 1; i <= 30; ++i) laughs += fmt::format("a{}: &a{} [*a{}, *a{}]\n", i, i, i - 1, i - 1);
    CHECK(yamlError(laughs).find("expands to more than") != std::string::npos);
    // Deep nesting is refused, by yaml-cpp's own guard or ours, never by the stack.
    CHECK(yamlError(std::string(5000, '[')).find("invalid YAML in doc.yaml") == 0);
    CHECK(yamlError(std::string(300, '[') + std::string(300, ']')).find("nested deeper than 256") != std::string::npos);
}

TEST_CASE("openapi: operations, parameters, bodies, results and security") {
    OpenApiDocument doc = document(R"(
openapi: 3.1.0
info: {title: Shop, version: '2'}
servers: [{url: 'https://shop.example.com/v2'}]
security: [{key: []}]
components:
  securitySchemes:
    key: {type: apiKey, in: header, name: X-Key}
    basic: {type: http, scheme: Basic}
  parameters:
    Limit: {name: limit, in: query, schema: {type: integer, maximum: 50}}
  requestBodies:
    Item: {required: true, content: {'application/json': {schema: {$ref: '#/components/schemas/Item'}}}}
  schemas:
    Item: {type: object, required: [name], properties: {name: {type: string}}}
paths:
  /items/{id}:
    parameters:
      - {name: id, in: path, schema: {type: string}}
      - {name: trace, in: header, schema: {type: string}}
    get:
      operationId: getItem
      parameters:
        - {name: trace, in: header, required: true, schema: {type: string}}
        - $ref: '#/components/parameters/Limit'
      responses:
        '404': {description: no}
        '200': {content: {'application/json': {schema: {$ref: '#/components/schemas/Item'}}}}
    delete:
      security: [{basic: []}, {}]
      responses: {'204': {description: gone}}
  /items:
    post:
      operationId: addItem
      requestBody: {$ref: '#/components/requestBodies/Item'}
      responses:
        '201': {content: {'text/plain': {schema: {type: string}}}}
    put:
      operationId: putItems
      requestBody: {content: {'application/xml': {}}}
      responses: {default: {content: {'application/problem+json': {}}}}
)");
    CHECK(doc.openapi == "3.1.0");
    CHECK(doc.title == "Shop");
    CHECK(absoluteServerUrl(doc) == "https://shop.example.com/v2");
    REQUIRE(doc.operations.size() == 4);
    CHECK(doc.problems.empty());

    const OpenApiOperation& get = *doc.find("getItem");
    CHECK(get.method == "GET");
    CHECK(get.path == "/items/{id}");
    REQUIRE(get.parameters.size() == 3);  // the path item's id and trace, trace overridden, then limit
    CHECK(get.parameters[0].name == "id");
    CHECK(get.parameters[0].in == OpenApiParameter::In::Path);
    CHECK(get.parameters[0].required);  // path parameters always are
    CHECK(get.parameters[1].name == "trace");
    CHECK(get.parameters[1].required);  // the operation's wins
    CHECK(get.parameters[2].name == "limit");
    CHECK(get.parameters[2].explode);  // a query parameter is form, exploded, by default
    CHECK(get.parameters[2].schema == Json::parse(R"({"type": "integer", "maximum": 50})"));
    CHECK(get.result == OpenApiOperation::Result::Json);
    CHECK(get.resultStatus == "200");
    CHECK(get.resultSchema == Json::parse(R"({"$ref": "#/components/schemas/Item"})"));  // schemas keep their $ref
    CHECK(get.security == std::vector<std::vector<std::string>>{{"key"}});  // the document's

    const OpenApiOperation& del = *doc.find("delete_items_id");  // no operationId: a derived name
    CHECK_FALSE(del.namedById);
    CHECK(del.result == OpenApiOperation::Result::None);
    CHECK(del.security == std::vector<std::vector<std::string>>{{"basic"}, {}});
    CHECK(doc.securitySchemes.at("basic").scheme == "basic");
    CHECK(doc.securitySchemes.at("key").paramName == "X-Key");

    const OpenApiOperation& add = *doc.find("addItem");
    CHECK(add.hasBody);
    CHECK(add.bodyRequired);
    CHECK(add.bodyMediaType == "application/json");
    CHECK(add.result == OpenApiOperation::Result::Text);
    CHECK(add.resultStatus == "201");

    const OpenApiOperation& put = *doc.find("putItems");
    CHECK(put.bodyMediaType.empty());
    CHECK(put.bodyMediaTypes == std::vector<std::string>{"application/xml"});
    CHECK(put.result == OpenApiOperation::Result::Json);  // application/problem+json, under default
    CHECK(put.resultStatus == "default");
}

TEST_CASE("openapi: what cannot be read is said, per operation or for the document") {
    CHECK(documentError("swagger: '2.0'\n") == "api.yaml is a Swagger 2.0 document; only OpenAPI 3 is read");
    CHECK(documentError("openapi: 2.0\n") == "api.yaml is not an OpenAPI 3 document: it has no field `openapi: 3.x`");
    CHECK(documentError("- a\n") == "api.yaml is not an OpenAPI document: it is not an object of fields");
    CHECK(documentError("openapi: 3.0.0\n") == "api.yaml has no `paths`: it describes no operations");
    std::string error;
    CHECK_FALSE(parseOpenApi("api.yaml", "openapi: 3.0.0\n", error));  // no YAML reader given
    CHECK(error == "api.yaml is not JSON, and this program reads OpenAPI documents in JSON only");

    OpenApiDocument doc = document(R"(
openapi: 3.0.0
paths:
  /a:
    get:
      operationId: one
      parameters: [{$ref: '#/components/parameters/Missing'}]
  /b:
    get:
      operationId: two
      parameters: [{name: q, in: query, style: deepObject}]
  /c:
    get: {operationId: three}
    post: {operationId: three}
)");
    REQUIRE(doc.operations.size() == 1);
    CHECK(doc.operations[0].name == "three");
    REQUIRE(doc.problems.size() == 3);
    CHECK(doc.problems[0] == "GET /a: the $ref '#/components/parameters/Missing' does not point into this document");
    CHECK(doc.problems[1] == "GET /b: parameter 'q' has style 'deepObject'; only form and simple are supported");
    CHECK(doc.problems[2] == "POST /c: another operation is also named 'three'");
}

TEST_CASE("openapi: the Petstore document reads the same from YAML and JSON") {
    std::string error;
    std::optional<OpenApiDocument> fromYaml =
        readOpenApiFile(REMIT_SOURCE_DIR "/tests/e2e/openapi/petstore.yaml", error, parseYamlAsJson);
    INFO(error);
    REQUIRE(fromYaml);
    std::optional<OpenApiDocument> fromJson = readOpenApiFile(REMIT_SOURCE_DIR "/tests/e2e/openapi/petstore.json", error);
    REQUIRE(fromJson);
    CHECK(fromYaml->root == fromJson->root);
    CHECK(fromYaml->operations.size() == 19);
    CHECK(fromYaml->problems.empty());
    const OpenApiOperation& find = *fromYaml->find("findPetsByStatus");
    CHECK(find.parameters.at(0).schema["enum"] == Json::parse(R"(["available", "pending", "sold"])"));
    const OpenApiOperation& upload = *fromYaml->find("uploadFile");
    CHECK(upload.bodyMediaType.empty());
    CHECK(upload.bodyMediaTypes == std::vector<std::string>{"application/octet-stream"});
    CHECK(fromYaml->find("deletePet")->result == OpenApiOperation::Result::None);
    CHECK(fromYaml->find("loginUser")->result == OpenApiOperation::Result::Json);
    CHECK(fromYaml->find("getPetById")->security == std::vector<std::vector<std::string>>{{"api_key"}, {"petstore_auth"}});
    CHECK_FALSE(absoluteServerUrl(*fromYaml));  // "/api/v3": a base URL must be given
}
