// OpenAPI documents (broker/openapi.h) and YAML read as JSON (cli/yaml_json.h): what the importer
// and the adapter both see in a document.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <fstream>
#include <string>

#include "broker/openapi.h"
#include "broker/openapi_adapter.h"
#include "cli/yaml_json.h"
#include "temp_dir.h"

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

// ---------------------------------------------------------------- the adapter's requests and replies

namespace {

const char* kShop = R"(
openapi: 3.0.3
info: {title: Shop, version: '1'}
components:
  securitySchemes:
    key: {type: apiKey, in: header, name: X-Key}
    qkey: {type: apiKey, in: query, name: key}
    basic: {type: http, scheme: basic}
    bearer: {type: http, scheme: bearer}
paths:
  /items/{id}/{kind}:
    get:
      operationId: getItem
      security: [{qkey: []}, {key: [], basic: []}]
      parameters:
        - {name: id, in: path, schema: {type: string}}
        - {name: kind, in: path, schema: {type: array, items: {type: string}}}
        - {name: tag, in: query, schema: {type: array, items: {type: string}}}
        - {name: sizes, in: query, explode: false, schema: {type: array, items: {type: integer}}}
        - {name: X-Trace, in: header, schema: {type: string}}
        - {name: limit, in: query, schema: {type: integer}}
        - {name: session, in: cookie, schema: {type: string}}
      responses: {'200': {content: {application/json: {schema: {type: object}}}}}
  /items:
    post:
      operationId: addItem
      security: [{bearer: []}]
      parameters: [{name: body, in: query, schema: {type: string}}]
      requestBody: {required: true, content: {application/merge-patch+json: {schema: {type: object}}}}
      responses: {'201': {content: {text/plain: {}}}}
)";

HttpRequest request(const std::string& op, const Json& args, const std::map<std::string, std::string>& credentials = {}) {
    OpenApiDocument doc = document(kShop);
    std::string error;
    std::optional<HttpRequest> r =
        openApiHttpRequest(doc, *doc.find(op), "https://shop.example.com/v1/", args, credentials, "key-1", error);
    INFO(error);
    REQUIRE(r);
    return *r;
}

std::string requestError(const std::string& op, const Json& args) {
    OpenApiDocument doc = document(kShop);
    std::string error;
    CHECK_FALSE(openApiHttpRequest(doc, *doc.find(op), "https://shop.example.com", args, {}, "", error));
    return error;
}

std::string header(const HttpRequest& r, const std::string& name) {
    for (const HttpHeader& h : r.headers)
        if (h.name == name) return h.value;
    return "<none>";
}

}  // namespace

TEST_CASE("openapi adapter: arguments go to the path, the query, headers and the body") {
    HttpRequest r = request("getItem", Json::parse(R"({"id": "a b/c", "kind": ["x", "y"], "tag": ["t1", "t&2"],
        "sizes": [1, 2], "X_Trace": "abc", "limit_": 5, "session": "s1"})"));
    CHECK(r.method == "GET");
    CHECK(r.url == "https://shop.example.com/v1/items/a%20b%2Fc/x,y?tag=t1&tag=t%262&sizes=1,2&limit=5");
    CHECK(header(r, "X-Trace") == "abc");  // X_Trace stands for X-Trace
    CHECK(header(r, "Cookie") == "session=s1");
    CHECK(header(r, "Accept") == "application/json");
    CHECK(header(r, "Idempotency-Key") == "<none>");  // a GET
    CHECK(r.body.empty());
    // Optional parameters the capability does not declare are not sent.
    CHECK(request("getItem", Json::parse(R"({"id": "1", "kind": "k"})")).url == "https://shop.example.com/v1/items/1/k");

    HttpRequest post = request("addItem", Json::parse(R"({"request_body": {"a": [1, "é"]}, "body": "q"})"));
    CHECK(post.url == "https://shop.example.com/v1/items?body=q");  // the query parameter named body
    CHECK(post.body == R"({"a":[1,"é"]})");
    CHECK(header(post, "Content-Type") == "application/merge-patch+json");
    CHECK(header(post, "Idempotency-Key") == "key-1");
    CHECK(header(post, "Accept") == "*/*");  // a text result
}

TEST_CASE("openapi adapter: credentials go where their scheme says") {
    Json args = Json::parse(R"({"id": "1", "kind": "k"})");
    // The first alternative whose schemes are all configured: the query key…
    HttpRequest q = request("getItem", args, {{"qkey", "s3cret"}, {"key", "k"}, {"basic", "u:p"}});
    CHECK(q.url == "https://shop.example.com/v1/items/1/k?key=s3cret");
    CHECK(header(q, "X-Key") == "<none>");
    // …else both schemes of the second.
    HttpRequest both = request("getItem", args, {{"key", "k"}, {"basic", "user:pass"}});
    CHECK(header(both, "X-Key") == "k");
    CHECK(header(both, "Authorization") == "Basic dXNlcjpwYXNz");
    // Half an alternative is not used.
    HttpRequest none = request("getItem", args, {{"key", "k"}});
    CHECK(header(none, "X-Key") == "<none>");
    CHECK(header(request("addItem", Json::parse(R"({"request_body": {}})"), {{"bearer", "t"}}), "Authorization") ==
          "Bearer t");
}

TEST_CASE("openapi adapter: arguments that cannot be sent fail the call, never vanish") {
    CHECK(requestError("getItem", Json::parse(R"({"id": "1", "kind": "k", "colour": "red"})")) ==
          "GET /items/{id}/{kind} has no parameter for the argument 'colour'");
    CHECK(requestError("getItem", Json::parse(R"({"kind": "k"})")) == "GET /items/{id}/{kind} needs its path parameter 'id'");
    CHECK(requestError("getItem", Json::parse(R"({"id": {"a": 1}, "kind": "k"})")) ==
          "the path parameter 'id' of GET /items/{id}/{kind} must be a string, a number, a boolean or a list of them, "
          "not a record");
    CHECK(requestError("addItem", Json::object()) == "POST /items needs a request body ('request_body')");
}

TEST_CASE("openapi adapter: a path parameter cannot climb out of its path") {
    // '.' and '..' pass percent-encoding (they are unreserved) but are dot segments, which the client
    // and the server resolve: /items/../admin/k would be a call to /admin/k.
    for (const char* id : {"..", ".", ""}) {
        std::string error = requestError("getItem", Json{{"id", id}, {"kind", "k"}});
        CHECK(error == fmt::format("the path parameter 'id' of GET /items/{{id}}/{{kind}} is '{}', which would name "
                                   "another path; a path parameter cannot be empty, '.' or '..'",
                                   id));
    }
    CHECK(requestError("getItem", Json{{"id", "1"}, {"kind", Json::array()}}).find("cannot be empty") != std::string::npos);
    // Slashes, dots inside a value and percent signs are data.
    CHECK(request("getItem", Json{{"id", "../.."}, {"kind", "..."}}).url ==
          "https://shop.example.com/v1/items/..%2F../...");
    CHECK(request("getItem", Json{{"id", "%2e%2e"}, {"kind", "a.b"}}).url ==
          "https://shop.example.com/v1/items/%252e%252e/a.b");
    // A header value cannot end its header: a line break in it is refused before anything is sent.
    HttpClient client;
    HttpRequest split = request("getItem", Json{{"id", "1"}, {"kind", "k"}, {"X_Trace", "a\r\nX-Admin: 1"}});
    HttpResult sent = client.perform(split);
    REQUIRE_FALSE(sent.ok());
    CHECK(sent.error.kind == HttpError::Kind::Invalid);
    CHECK(sent.error.message.find("X-Admin") == std::string::npos);
}

TEST_CASE("openapi adapter: answers become results by the declared type") {
    OpenApiDocument doc = document(kShop);
    const OpenApiOperation& get = *doc.find("getItem");
    auto response = [](long status, std::string body, std::string type = "application/json") {
        HttpResponse r;
        r.status = status;
        r.body = std::move(body);
        if (!type.empty()) r.headers.push_back({"content-type", type});
        return r;
    };
    Json record = Json::parse(R"({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
                                  "additionalProperties": false})");
    AdapterReply ok = openApiReply(get, response(200, R"({"name": "x", "extra": 1})"), record, "Item", {});
    CHECK(ok.ok);
    CHECK(ok.result == Json::parse(R"({"name": "x"})"));  // what the type does not declare is dropped
    Json str = Json::parse(R"({"type": "string"})");
    CHECK(openApiReply(get, response(200, R"({"a":1})"), str, "Str", {}).result == R"({"a":1})");
    CHECK(openApiReply(get, response(200, R"("hello")"), str, "Str", {}).result == "hello");
    CHECK(openApiReply(get, response(200, "plain words", "text/plain"), str, "Str", {}).result == "plain words");
    // A Str stays UTF-8 text: a body that is not is refused, never carried into the program.
    AdapterReply latin1 = openApiReply(get, response(200, "caf\xe9 au lait", "text/plain; charset=iso-8859-1"), str, "Str", {});
    CHECK_FALSE(latin1.ok);
    CHECK(latin1.message == "GET /items/{id}/{kind} answered text/plain; charset=iso-8859-1 that is not UTF-8 text (a "
                            "malformed byte at offset 3), for a result of type Str; have the service answer in UTF-8");
    CHECK(openApiReply(get, response(200, "caf\xc3\xa9", "text/plain"), str, "Str", {}).result == "caf\xc3\xa9");
    CHECK(openApiReply(get, response(204, ""), Json{{"type", "null"}}, "Unit", {}).result.is_null());

    AdapterReply notFound =
        openApiReply(get, response(404, R"({"code": 404, "message": "no item with key s3cret"})"), record, "Item", {"s3cret"});
    CHECK_FALSE(notFound.ok);
    CHECK(notFound.errorCode == "CapabilityFailed");
    CHECK(notFound.message == "HTTP 404 from GET /items/{id}/{kind}: no item with key [redacted]");
    AdapterReply notJson = openApiReply(get, response(200, "<xml/>", "application/xml"), record, "Item", {});
    CHECK(notJson.message == "GET /items/{id}/{kind} answered application/xml, not JSON, for a result of type Item");
    AdapterReply broken = openApiReply(get, response(200, "{"), record, "Item", {});
    CHECK_FALSE(broken.ok);

    // A redirect is not followed (the credentials are for the base URL); the message says where it
    // pointed, without the query where a key could travel, and what to do.
    HttpResponse moved = response(301, "");
    moved.headers.push_back({"location", "https://u:p@elsewhere.example/v2/items?key=s3cret"});
    AdapterReply redirected = openApiReply(get, moved, record, "Item", {"s3cret"});
    CHECK_FALSE(redirected.ok);
    CHECK(redirected.message == "HTTP 301 from GET /items/{id}/{kind}: a redirect to https://elsewhere.example/v2/items, "
                                "which is not followed (a request carries its credentials to the base URL only); if "
                                "the service moved, give the URL it moved to as base_url");
    HttpResponse relative = response(307, "");
    relative.headers.push_back({"location", "/v2/items/1?token=abc"});
    CHECK(openApiReply(get, relative, record, "Item", {}).message.find("a redirect to /v2/items/1, which") !=
          std::string::npos);
}

TEST_CASE("openapi: fields of the wrong type are problems, never exceptions") {
    OpenApiDocument doc = document(R"(
openapi: 3.0.3
paths:
  /a:
    get: {operationId: a, deprecated: 'yes'}
  /b:
    get:
      operationId: b
      parameters: [{in: query}]
  /c:
    get:
      operationId: c
      parameters: [{name: 7, in: query}]
)");
    REQUIRE(doc.operations.size() == 1);
    CHECK(doc.operations[0].name == "a");
    CHECK_FALSE(doc.operations[0].deprecated);
    REQUIRE(doc.problems.size() == 2);
    CHECK(doc.problems[0] == "GET /b: a parameter without a name or a place (`in`)");
    CHECK(doc.problems[1] == "GET /c: a parameter without a name or a place (`in`)");
}

TEST_CASE("openapi adapter: failures name the document by its file name, never its host path") {
    test::TempDir dir;
    const std::string path = dir.path + "/untitled.json";
    {
        std::ofstream out(path);
        out << R"({"openapi": "3.0.3", "paths": {"/a": {"get": {"operationId": "a"}}}})";
    }
    OpenApiAdapterOptions options;
    options.baseUrl = "http://127.0.0.1:9";  // nobody listens on the discard port
    options.defaultTimeoutMs = 2000;
    std::string error;
    std::unique_ptr<Adapter> adapter = makeOpenApiAdapter(path, options, nullptr, error);
    REQUIRE_MESSAGE(adapter, error);
    AdapterRequest call;
    call.kind = AdapterRequest::Kind::Call;
    call.resource = "svc.a";
    call.args = Json::object();
    AdapterReply reply = adapter->perform(call);
    REQUIRE_FALSE(reply.ok);
    CHECK(reply.message.starts_with("OpenAPI service 'untitled.json': "));
    CHECK(reply.message.find(dir.path) == std::string::npos);
}
