// OpenAPI operations as capabilities: see openapi_adapter.h.
#include "broker/openapi_adapter.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

#include "broker/child_process.h"
#include "broker/model_adapter.h"
#include "runtime/imported_names.h"
#include "runtime/json_schema.h"
#include "runtime/source.h"

namespace remit {

namespace {

// RFC 3986's unreserved characters stay; every other byte is %XX.
std::string percentEncode(std::string_view text) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : text) {
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
            c == '_' || c == '~') {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += kHex[c >> 4];
            out += kHex[c & 15];
        }
    }
    return out;
}

std::string base64(std::string_view bytes) {
    static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
        uint32_t n = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
        for (int shift : {18, 12, 6, 0}) out += kAlphabet[(n >> shift) & 63];
    }
    if (i + 1 == bytes.size()) {
        uint32_t n = uint8_t(bytes[i]) << 16;
        out += kAlphabet[(n >> 18) & 63];
        out += kAlphabet[(n >> 12) & 63];
        out += "==";
    } else if (i + 2 == bytes.size()) {
        uint32_t n = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
        out += kAlphabet[(n >> 18) & 63];
        out += kAlphabet[(n >> 12) & 63];
        out += kAlphabet[(n >> 6) & 63];
        out += '=';
    }
    return out;
}

// A scalar argument as the text that goes in a path, query or header.
std::optional<std::string> scalarText(const Json& value) {
    if (value.is_string()) return value.get<std::string>();
    if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
    if (value.is_number()) return value.dump();
    return std::nullopt;
}

// An argument as the list of texts it stands for: a scalar is one, a list of scalars is each.
std::optional<std::vector<std::string>> texts(const Json& value) {
    std::vector<std::string> out;
    if (value.is_array()) {
        for (const Json& item : value) {
            std::optional<std::string> t = scalarText(item);
            if (!t) return std::nullopt;
            out.push_back(std::move(*t));
        }
        return out;
    }
    std::optional<std::string> t = scalarText(value);
    if (!t) return std::nullopt;
    out.push_back(std::move(*t));
    return out;
}

std::string joined(const std::vector<std::string>& parts, std::string_view separator) {
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) {
        if (i) out += separator;
        out += parts[i];
    }
    return out;
}

bool unsafeMethod(const std::string& method) {
    return method != "GET" && method != "HEAD" && method != "OPTIONS" && method != "TRACE";
}

// The declared return type, as the broker describes it (AdapterRequest::schema and typeName).
bool declaresUnit(const Json& schema, const std::string& typeName) {
    return typeName == "Unit" || (schema.is_object() && schema.value("type", Json()) == "null");
}
bool declaresStr(const Json& schema, const std::string& typeName) {
    return typeName == "Str" || (schema.is_object() && schema.size() == 1 && schema.value("type", Json()) == "string");
}

// `text` with each secret replaced, for messages.
std::string withoutSecrets(std::string text, const std::vector<std::string>& secrets) {
    for (const std::string& secret : secrets) {
        if (secret.empty()) continue;
        for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at))
            text.replace(at, secret.size(), "[redacted]");
    }
    return text;
}

// The credentials of the first security alternative of `op` whose schemes are all configured.
std::map<std::string, std::string> credentialsFor(const OpenApiOperation& op,
                                                  const std::map<std::string, std::string>& configured) {
    for (const std::vector<std::string>& alternative : op.security) {
        std::map<std::string, std::string> chosen;
        bool all = true;
        for (const std::string& scheme : alternative) {
            auto it = configured.find(scheme);
            if (it == configured.end()) {
                all = false;
                break;
            }
            chosen.insert(*it);
        }
        if (all) return chosen;
    }
    return {};
}

class OpenApiAdapter final : public Adapter {
public:
    OpenApiAdapter(OpenApiDocument doc, OpenApiAdapterOptions options, std::map<std::string, std::string> credentials,
                   std::string label)
        : doc_(std::move(doc)), options_(std::move(options)), credentials_(std::move(credentials)),
          label_(std::move(label)) {}

    const char* kind() const override { return "openapi"; }

    bool serves(AdapterRequest::Kind kind, const std::string& name) const override {
        return kind == AdapterRequest::Kind::Call && operationFor(name) != nullptr;
    }

    std::string whyNotServed(AdapterRequest::Kind kind, const std::string& name) const override {
        if (kind != AdapterRequest::Kind::Call) return {};
        size_t dot = name.find('.');
        if (dot == std::string::npos || (!options_.scope.empty() && name.substr(0, dot) != options_.scope)) return {};
        return fmt::format("{} has no operation named '{}'", label_, name.substr(dot + 1));
    }

    AdapterReply perform(const AdapterRequest& request) override {
        const OpenApiOperation* op = operationFor(request.resource);
        if (!op || request.kind != AdapterRequest::Kind::Call)
            return AdapterReply::failure("CapabilityFailed",
                                         fmt::format("{} has no operation for '{}'", label_, request.resource));
        const bool sentCredentials = !credentialsFor(*op, credentials_).empty();
        std::vector<std::string> secrets;
        for (const auto& [scheme, secret] : credentials_) secrets.push_back(secret);
        std::string error;
        std::optional<HttpRequest> http =
            openApiHttpRequest(doc_, *op, options_.baseUrl, request.args, credentials_, request.idempotencyKey, error);
        if (!http)
            return AdapterReply::failure("CapabilityFailed",
                                         fmt::format("{}: {}", label_, withoutSecrets(error, secrets)));
        const uint64_t timeoutMs = request.timeoutMs ? request.timeoutMs : options_.defaultTimeoutMs;
        http->timeoutMs = timeoutMs;
        const std::string where = fmt::format("{} {}", op->method, op->path);
        HttpResult result = client_.perform(*http);
        if (!result.ok()) {
            const bool late = result.error.kind == HttpError::Kind::Timeout;
            return AdapterReply::failure(
                late ? "Timeout" : "CapabilityFailed",
                late ? fmt::format("{}: {} got no answer within {} ms", label_, where, timeoutMs)
                     : fmt::format("{}: {}", label_, withoutSecrets(result.error.message, secrets)));
        }
        AdapterReply reply = openApiReply(*op, *result.response, request.schema, request.typeName, secrets);
        if (!reply.ok) {
            reply.message = fmt::format("{}: {}", label_, reply.message);
            // A refusal of credentials: say which scheme the operation wanted and how to give it.
            const long status = result.response->status;
            if ((status == 401 || status == 403) && !sentCredentials && !op->security.empty() &&
                !op->security.front().empty())
                reply.message += fmt::format(" (the operation wants credentials for '{}'; configure them with "
                                             "auth.{}=ENV_VAR on the adapter)",
                                             op->security.front().front(), op->security.front().front());
        }
        reply.meta = Json{{"operation", op->name}, {"method", op->method}, {"path", op->path},
                          {"status", result.response->status}};
        return reply;
    }

private:
    OpenApiDocument doc_;
    OpenApiAdapterOptions options_;
    std::map<std::string, std::string> credentials_;  // scheme → secret
    std::string label_;
    HttpClient client_;

    const OpenApiOperation* operationFor(const std::string& capability) const {
        size_t dot = capability.find('.');
        if (dot == std::string::npos) return nullptr;
        if (!options_.scope.empty() && capability.compare(0, dot, options_.scope) != 0) return nullptr;
        std::string_view name = std::string_view(capability).substr(dot + 1);
        // The operation of exactly that name first, else the one the importer's rule names so.
        for (const OpenApiOperation& op : doc_.operations)
            if (op.name == name) return &op;
        for (const OpenApiOperation& op : doc_.operations)
            if (matchesImportedName(op.name, name)) return &op;
        return nullptr;
    }
};

bool checkBaseUrl(const std::string& url, std::string& error) {
    if (!url.starts_with("http://") && !url.starts_with("https://")) {
        error = fmt::format("the base URL '{}' is not an http:// or https:// URL", redactedUrl(url));
        return false;
    }
    size_t authorityEnd = url.find('/', url.find("//") + 2);
    std::string_view authority = std::string_view(url).substr(0, authorityEnd);
    if (authority.find('@') != std::string_view::npos) {
        error = "the base URL has a user or password in it; give credentials with auth.SCHEME=ENV_VAR instead";
        return false;
    }
    if (url.find_first_of("?#") != std::string::npos) {
        error = fmt::format("the base URL '{}' has a query or fragment; give only scheme, host and path",
                            redactedUrl(url));
        return false;
    }
    return true;
}

}  // namespace

std::string openApiBodyParameter(const OpenApiOperation& op) {
    for (const OpenApiParameter& p : op.parameters)
        if (matchesImportedName(p.name, "body")) return "request_body";
    return "body";
}

std::optional<HttpRequest> openApiHttpRequest(const OpenApiDocument& doc, const OpenApiOperation& op,
                                              const std::string& baseUrl, const Json& args,
                                              const std::map<std::string, std::string>& credentials,
                                              const std::string& idempotencyKey, std::string& error) {
    const Json noArgs = Json::object();
    const Json& given = args.is_object() ? args : noArgs;
    const std::string bodyName = op.hasBody ? openApiBodyParameter(op) : std::string();
    // Every argument must be one of the operation's: a misnamed one is refused, never dropped.
    for (auto it = given.begin(); it != given.end(); ++it) {
        bool known = it.key() == bodyName;
        for (const OpenApiParameter& p : op.parameters) known = known || matchesImportedName(p.name, it.key());
        if (!known) {
            error = fmt::format("{} {} has no parameter for the argument '{}'", op.method, op.path, it.key());
            return std::nullopt;
        }
    }
    std::string path = op.path;
    std::vector<std::string> query;
    HttpRequest http;
    http.method = op.method;
    std::vector<std::string> cookies;
    for (const OpenApiParameter& p : op.parameters) {
        const Json* value = nullptr;
        for (auto it = given.begin(); it != given.end(); ++it)
            if (matchesImportedName(p.name, it.key())) value = &it.value();
        if (!value || value->is_null()) {
            if (p.in == OpenApiParameter::In::Path) {
                error = fmt::format("{} {} needs its path parameter '{}'", op.method, op.path, p.name);
                return std::nullopt;
            }
            continue;  // an optional parameter the capability does not declare, or a Unit value
        }
        std::optional<std::vector<std::string>> values = texts(*value);
        if (!values) {
            error = fmt::format("the {} parameter '{}' of {} {} must be a string, a number, a boolean or a list of "
                                "them, not {}",
                                parameterPlace(p.in), p.name, op.method, op.path,
                                value->is_object() ? "a record" : "a list of records or lists");
            return std::nullopt;
        }
        switch (p.in) {
            case OpenApiParameter::In::Path: {
                std::vector<std::string> encoded;
                for (const std::string& v : *values) encoded.push_back(percentEncode(v));
                std::string segment = joined(encoded, ",");
                // '.' and '..' are unreserved, so they pass percent-encoding, but as a path segment they
                // are dot segments that clients and servers resolve away: `/users/{id}/keys` with id
                // ".." would call `/keys`. An empty value drops its segment the same way. (Values side by
                // side, "/{a}{b}", cannot make a dot segment either: each would have to be "." or empty.)
                if (segment.empty() || segment == "." || segment == "..") {
                    error = fmt::format("the path parameter '{}' of {} {} is '{}', which would name another path; "
                                        "a path parameter cannot be empty, '.' or '..'",
                                        p.name, op.method, op.path, segment);
                    return std::nullopt;
                }
                std::string placeholder = "{" + p.name + "}";
                for (size_t at = path.find(placeholder); at != std::string::npos; at = path.find(placeholder, at))
                    path.replace(at, placeholder.size(), segment);
                break;
            }
            case OpenApiParameter::In::Query:
                if (p.explode) {
                    for (const std::string& v : *values) query.push_back(percentEncode(p.name) + "=" + percentEncode(v));
                } else {
                    std::vector<std::string> encoded;
                    for (const std::string& v : *values) encoded.push_back(percentEncode(v));
                    query.push_back(percentEncode(p.name) + "=" + joined(encoded, ","));
                }
                break;
            case OpenApiParameter::In::Header:
                http.headers.push_back({p.name, joined(*values, ",")});
                break;
            case OpenApiParameter::In::Cookie:
                cookies.push_back(p.name + "=" + percentEncode(joined(*values, ",")));
                break;
        }
    }
    if (op.hasBody) {
        auto body = given.find(bodyName);
        if (body != given.end() && !body->is_null()) {
            if (op.bodyMediaType.empty()) {
                error = fmt::format("{} {} takes its body as {}, not JSON", op.method, op.path,
                                    joined(op.bodyMediaTypes, " or "));
                return std::nullopt;
            }
            http.body = body->dump(-1, ' ', false, Json::error_handler_t::replace);
            http.headers.push_back({"Content-Type", op.bodyMediaType});
        } else if (op.bodyRequired) {
            error = fmt::format("{} {} needs a request body ('{}')", op.method, op.path, bodyName);
            return std::nullopt;
        }
    }
    for (const auto& [schemeName, secret] : credentialsFor(op, credentials)) {
        auto s = doc.securitySchemes.find(schemeName);
        if (s == doc.securitySchemes.end()) continue;
        const OpenApiSecurityScheme& scheme = s->second;
        if (scheme.type == "apiKey") {
            if (scheme.in == "header") http.headers.push_back({scheme.paramName, secret});
            else if (scheme.in == "query") query.push_back(percentEncode(scheme.paramName) + "=" + percentEncode(secret));
            else if (scheme.in == "cookie") cookies.push_back(scheme.paramName + "=" + percentEncode(secret));
        } else if (scheme.type == "http" && scheme.scheme == "basic") {
            http.headers.push_back({"Authorization", "Basic " + base64(secret)});
        } else if (scheme.type == "http" || scheme.type == "oauth2" || scheme.type == "openIdConnect") {
            http.headers.push_back({"Authorization", "Bearer " + secret});
        }
    }
    if (!cookies.empty()) http.headers.push_back({"Cookie", joined(cookies, "; ")});
    if (unsafeMethod(op.method) && !idempotencyKey.empty()) http.headers.push_back({"Idempotency-Key", idempotencyKey});
    http.headers.push_back({"Accept", op.result == OpenApiOperation::Result::Text ? "*/*" : "application/json"});
    std::string base = baseUrl;
    while (!base.empty() && base.back() == '/') base.pop_back();
    http.url = base + path + (query.empty() ? "" : "?" + joined(query, "&"));
    return http;
}

AdapterReply openApiReply(const OpenApiOperation& op, const HttpResponse& response, const Json& schema,
                          const std::string& typeName, const std::vector<std::string>& secrets) {
    const std::string where = fmt::format("{} {}", op.method, op.path);
    if (response.status >= 300 && response.status <= 399) {
        // Redirects are not followed: the request carries credentials meant for the base URL alone.
        const std::string* location = response.header("location");
        std::string to;
        if (location) {
            // Shown without user information, query or fragment, where a key could travel.
            std::string bare = location->find("://") != std::string::npos ? redactedUrl(*location)
                                                                         : location->substr(0, location->find_first_of("?#"));
            to = withoutSecrets(printableExcerpt(bare, 200), secrets);
        }
        return AdapterReply::failure(
            "CapabilityFailed",
            fmt::format("HTTP {} from {}: a redirect{}, which is not followed (a request carries its credentials to the "
                        "base URL only); if the service moved, give the URL it moved to as base_url",
                        response.status, where, to.empty() ? "" : " to " + to));
    }
    if (response.status < 200 || response.status > 299) {
        std::string message = providerMessage(response.body, secrets.empty() ? std::string_view() : secrets.front());
        message = withoutSecrets(std::move(message), secrets);
        return AdapterReply::failure("CapabilityFailed", fmt::format("HTTP {} from {}{}", response.status, where,
                                                                     message.empty() ? "" : ": " + message));
    }
    if (declaresUnit(schema, typeName)) return AdapterReply::success(nullptr);
    const std::string* contentType = response.header("content-type");
    const bool json = contentType ? isJsonMediaType(*contentType) : op.result == OpenApiOperation::Result::Json;
    std::string error;
    if (json) {
        std::optional<Json> value = parseOrderedJsonText("the answer of " + where, response.body, error);
        if (!value) return AdapterReply::failure("CapabilityFailed", error);
        // A Str result is the service's answer as it came: a JSON string's text, else the JSON itself.
        if (declaresStr(schema, typeName))
            return AdapterReply::success(value->is_string() ? *value : Json(response.body));
        return AdapterReply::success(schema.is_object() ? projectOntoSchema(*value, schema) : *value);
    }
    if (declaresStr(schema, typeName)) {
        // A Str is UTF-8 text (runtime/value.h: keeping it so is the producer's duty).
        for (size_t i = 0; i < response.body.size();) {
            size_t length = utf8SequenceLength(response.body, i);
            if (length == 0)
                return AdapterReply::failure(
                    "CapabilityFailed",
                    fmt::format("{} answered {} that is not UTF-8 text (a malformed byte at offset {}), for a result "
                                "of type Str; have the service answer in UTF-8",
                                where,
                                contentType ? withoutSecrets(printableExcerpt(*contentType, 60), secrets)
                                            : std::string("a body"),
                                i));
            i += length;
        }
        return AdapterReply::success(Json(response.body));
    }
    return AdapterReply::failure(
        "CapabilityFailed",
        fmt::format("{} answered {}, not JSON, for a result of type {}", where,
                    contentType ? withoutSecrets(*contentType, secrets) : std::string("a body without a content type"),
                    typeName.empty() ? "other than Str" : typeName));
}

std::unique_ptr<Adapter> makeOpenApiAdapter(const std::string& documentPath, OpenApiAdapterOptions options,
                                            YamlReader yaml, std::string& error) {
    std::optional<OpenApiDocument> doc = readOpenApiFile(documentPath, error, yaml);
    if (!doc) return nullptr;
    if (options.baseUrl.empty()) {
        std::optional<std::string> server = absoluteServerUrl(*doc);
        if (!server) {
            error = fmt::format("{} names no absolute server URL{}; give the service's base URL with --base-url URL",
                                documentPath,
                                doc->servers.empty() ? "" : fmt::format(" (its first is '{}')", doc->servers.front()));
            return nullptr;
        }
        options.baseUrl = *server;
    }
    if (!checkBaseUrl(options.baseUrl, error)) return nullptr;
    std::map<std::string, std::string> credentials;
    for (const auto& [scheme, variable] : options.authEnv) {
        if (!doc->securitySchemes.count(scheme)) {
            std::vector<std::string> known;
            for (const auto& [name, s] : doc->securitySchemes) known.push_back("'" + name + "'");
            error = fmt::format("{} has no security scheme '{}'{}", documentPath, scheme,
                                known.empty() ? "" : " (it has " + joined(known, ", ") + ")");
            return nullptr;
        }
        const char* value = std::getenv(variable.c_str());
        if (!value || !*value) {
            error = fmt::format("the environment variable {} (auth.{}) is not set", variable, scheme);
            return nullptr;
        }
        credentials[scheme] = value;
    }
    // The label is in every failure a program or a client sees: the document's file name, not its host path.
    std::string label = fmt::format("OpenAPI service '{}'", doc->title.empty()
                                                                ? std::filesystem::path(documentPath).filename().string()
                                                                : doc->title);
    return std::make_unique<OpenApiAdapter>(std::move(*doc), std::move(options), std::move(credentials),
                                            std::move(label));
}

}  // namespace remit
