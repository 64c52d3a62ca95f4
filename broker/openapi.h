// An OpenAPI 3 document read into the operations it describes (docs/import.md "OpenAPI"): the
// one reading of a service description that `remitc import openapi` drafts a host interface from
// (cli/import_command.cpp) and the `openapi` adapter performs calls with (broker/openapi_adapter.h),
// so the two agree on every operation, parameter, body and result.
//
// The document is JSON or YAML. YAML is read by the YamlReader the caller passes (the tools pass
// cli/yaml_json.h's, over yaml-cpp, which the embedding library does not carry). `$ref`s to components (parameters, request bodies,
// responses) are followed here; schemas keep theirs, resolved against `root` by whoever types them.
// What the document asks that cannot be honoured (a parameter in a cookie, a body only in XML) is
// kept, with a note, for the importer to report; nothing is guessed.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/json_text.h"

namespace remit {

// The largest document read.
inline constexpr size_t kMaxOpenApiBytes = size_t{16} << 20;

// Reads YAML text as JSON; on failure nullopt with `error` naming `what` and where.
using YamlReader = std::optional<Json> (*)(std::string_view what, std::string_view text, std::string& error);

struct OpenApiParameter {
    enum class In : uint8_t { Path, Query, Header, Cookie };
    std::string name;  // as the service names it
    In in = In::Query;
    bool required = false;
    Json schema;           // its JSON Schema ($refs into the document kept); {} when the document gives none
    bool explode = true;   // query lists: `k=a&k=b` (form, exploded: OpenAPI's default) or `k=a,b`
    std::string description;
};

const char* parameterPlace(OpenApiParameter::In in);  // "path", "query", "header", "cookie"

struct OpenApiOperation {
    std::string name;    // operationId, else `<method>_<path words>` (`get_pet_petId`)
    bool namedById = true;
    std::string method;  // "GET", "POST", …
    std::string path;    // the template, `/pet/{petId}`
    std::string summary, description;
    bool deprecated = false;
    std::vector<OpenApiParameter> parameters;  // the path item's and the operation's, the operation's winning

    // The request body: its JSON Schema when the operation takes JSON (`application/json` or a
    // `+json` type), else the media types it takes instead.
    bool hasBody = false;
    bool bodyRequired = false;
    std::string bodyMediaType;  // the JSON media type sent, empty when none is JSON
    Json bodySchema;
    std::vector<std::string> bodyMediaTypes;
    std::string bodyDescription;

    // The result: the first success response (200, 201, …, 2XX, then `default`). Json: a JSON
    // media type with its schema; Text: some other media type (the body as text); None: no content.
    enum class Result : uint8_t { Json, Text, None } result = Result::None;
    Json resultSchema;        // Result::Json
    std::string resultStatus;  // "200", "2XX", "default", or "" when the document lists no success
    std::string resultMediaType;

    // The security the operation needs: alternatives, each the names of the schemes that must all
    // be used together; an empty alternative means none is needed. Empty: no security at all.
    std::vector<std::vector<std::string>> security;
};

struct OpenApiSecurityScheme {
    std::string type;       // apiKey, http, oauth2, openIdConnect, mutualTLS
    std::string in;         // apiKey: header, query or cookie
    std::string paramName;  // apiKey: the header, query or cookie name
    std::string scheme;     // http: bearer, basic, …
};

struct OpenApiDocument {
    Json root;  // the whole document, for $refs in schemas
    std::string openapi;  // "3.0.4", "3.1.0"
    std::string title, version, description;
    std::vector<std::string> servers;  // servers[].url as written (variables left as they are)
    std::vector<OpenApiOperation> operations;  // in the document's order
    std::map<std::string, OpenApiSecurityScheme> securitySchemes;
    // Operations that could not be read at all, as "METHOD /path: why".
    std::vector<std::string> problems;

    const OpenApiOperation* find(std::string_view name) const;
};

// An OpenAPI 3 document from its text: JSON when it starts with `{`, else YAML through `yaml`
// (without one, YAML is refused with a message saying so).
std::optional<OpenApiDocument> parseOpenApi(std::string_view what, std::string_view text, std::string& error,
                                            YamlReader yaml = nullptr);
// From a file, at most kMaxOpenApiBytes; messages name the file.
std::optional<OpenApiDocument> readOpenApiFile(const std::string& path, std::string& error, YamlReader yaml = nullptr);

// Whether `mediaType` (parameters cut off) is JSON: application/json or any `+json` type.
bool isJsonMediaType(std::string_view mediaType);

// The base URL calls go to when none is given: the first server's URL, when it is absolute http(s).
std::optional<std::string> absoluteServerUrl(const OpenApiDocument& doc);

}  // namespace remit
