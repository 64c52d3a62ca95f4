// OpenAPI services as capabilities (docs/adapters.md "OpenAPI services as capabilities"):
// `--adapter openapi:spec.yaml --base-url URL` (or `openapi.NS:…`) performs a run's capability
// calls as the HTTP operations of an OpenAPI 3 document (broker/openapi.h), over the HTTP client of
// broker/http_client.h.
//
// Which calls it performs (serves): capability `NS.OP` goes to the operation named OP — its
// operationId, or the name `remitc import openapi` wrote for it (runtime/imported_names.h:
// `get-pet` becomes `get_pet`). An adapter given a namespace serves only capabilities `NS.…`.
//
// A call: each argument goes where its parameter is — the path (percent-encoded), the query
// (`k=v`, a list as `k=a&k=b`, or `k=a,b` when the document says explode: false), a header — and
// the argument `body` (the request body, `request_body` when an operation also has a parameter
// named body) goes as JSON. A parameter's Remit name is its name made an identifier, so `X-Trace`
// is `X_Trace` and `limit` may be `limit_`. Unsafe methods carry the call's idempotency key as
// `Idempotency-Key`. The credentials of the security schemes the operator configured (`auth.SCHEME`
// naming an environment variable) go where the scheme says: an API key's header, query parameter
// or cookie, `Authorization: Bearer` (http bearer, oauth2, openIdConnect) or `Basic` (http basic,
// the variable holding `user:password`); the first of the operation's alternatives whose schemes
// are all configured is used. A 2xx answer is the result: JSON shaped into the declared return
// type (properties it does not declare dropped; the broker validates the rest, R0501 when it does
// not fit), the text of the body for a `Str` result, null for `Unit`. Any other status, a broken
// connection or an unreadable body is an operational failure (CapabilityFailed, or Timeout when the
// call's deadline passed), so `retry` and `else` apply; messages never hold a credential.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "broker/adapter.h"
#include "broker/http_client.h"
#include "broker/openapi.h"

namespace remit {

struct OpenApiAdapterOptions {
    std::string scope;    // serve only capabilities in this namespace; empty serves any whose operation exists
    std::string baseUrl;  // where the operations' paths go; empty: the document's absolute server URL
    // Security scheme → the environment variable that holds its credential (never the credential).
    std::map<std::string, std::string> authEnv;
    uint64_t defaultTimeoutMs = 30'000;  // when a request's timeoutMs is 0 (the broker normally fills it in)
};

// Reads the document (YAML through `yaml`), checks the base URL (http or https, without user
// information, query or fragment), and reads every configured credential from the environment.
// Null with `error` when the document does not read, there is no base URL, a scheme is not one the
// document declares, or a variable is not set.
std::unique_ptr<Adapter> makeOpenApiAdapter(const std::string& documentPath, OpenApiAdapterOptions options,
                                            YamlReader yaml, std::string& error);

// The parts of a call, pure so the unit tests can take them alone.

// The name a Remit parameter has for an operation's parameter: `body` for the request body
// (`request_body` when the operation also has a parameter named `body`).
std::string openApiBodyParameter(const OpenApiOperation& op);

// The HTTP request for `op` with `args` ({Remit parameter: JSON value}), or nullopt with `error`
// (an argument the operation has no parameter for, a value that cannot go where its parameter is).
// `credentials` maps each configured scheme to its secret; those of the first of the operation's
// security alternatives whose schemes are all configured are sent.
std::optional<HttpRequest> openApiHttpRequest(const OpenApiDocument& doc, const OpenApiOperation& op,
                                              const std::string& baseUrl, const Json& args,
                                              const std::map<std::string, std::string>& credentials,
                                              const std::string& idempotencyKey, std::string& error);

// The reply for a response: `schema` and `typeName` are the declared return type's
// (AdapterRequest::schema, typeName). `secrets` are kept out of every message.
AdapterReply openApiReply(const OpenApiOperation& op, const HttpResponse& response, const Json& schema,
                          const std::string& typeName, const std::vector<std::string>& secrets);

}  // namespace remit
