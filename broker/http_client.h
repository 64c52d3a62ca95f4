// A small HTTP client over libcurl, for the adapters that talk to services over HTTP: the model
// adapters of broker/model_adapter.h (OpenAI- and Anthropic-format APIs) and any adapter that calls
// an HTTP API (docs/models.md "The HTTP client").
//
// What a caller gets, and what it can rely on:
// - one request at a time per call to perform(), with its method, URL, headers and body, and a
//   deadline for the whole exchange (connect, send, wait, receive) — nothing waits longer;
// - the final response's status, headers (names lower-cased, in order) and body, the body capped
//   at maxResponseBytes after decoding (a larger one is an error, not a truncated answer);
// - connection reuse: a client keeps its connections (and TLS sessions) between requests, so the
//   second request to a host costs no handshake; perform() is thread-safe, and concurrent requests
//   each get a connection of their own;
// - errors that are safe to show anywhere (traces, diagnostics, error envelopes): a message never
//   holds a request header's value, a body, or the URL's user information, query or fragment —
//   where an API key travels.
// Only http and https; redirects are not followed unless asked (they would carry a request's
// headers to wherever a server points).
//
// libcurl is loaded on the first request (dlopen of libcurl.so.4), not linked: the tools start in
// about a millisecond, and linking libcurl with its thirty shared libraries made every start of
// remitvm, HTTP or not, some 60 ms slower. Without libcurl on the machine a request fails with an
// error saying so (HttpError::Unavailable) and nothing else is affected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace remit {

struct HttpHeader {
    std::string name, value;
};

struct HttpRequest {
    std::string method = "GET";
    std::string url;  // http:// or https://
    std::vector<HttpHeader> headers;
    std::string body;  // sent when not empty (set Content-Type yourself: none is implied)
    // The deadline of the whole exchange; 0 means kDefaultTimeoutMs.
    uint64_t timeoutMs = 0;
    // The most body bytes (after content decoding) the response may have.
    std::size_t maxResponseBytes = std::size_t{16} << 20;
    bool followRedirects = false;

    static constexpr uint64_t kDefaultTimeoutMs = 30'000;
};

struct HttpResponse {
    long status = 0;
    std::vector<HttpHeader> headers;  // the final response's, names lower-cased
    std::string body;
    // How many new connections this exchange opened (0 when it reused one).
    long newConnections = 0;

    // The first header named `name` (any case), or null.
    const std::string* header(std::string_view name) const;
};

struct HttpError {
    enum class Kind : uint8_t {
        Timeout,      // the deadline passed
        Connect,      // no connection: the host does not resolve, refuses, or TLS failed
        TooLarge,     // the response body (or its headers) exceeded the cap
        Transfer,     // the connection broke or the server sent something that is not HTTP
        Invalid,      // the request itself: not http(s), an empty method, a header with a newline
        Unavailable,  // libcurl cannot be loaded on this machine
    } kind = Kind::Transfer;
    std::string message;  // "POST http://host/path: what happened" — never a secret
};

struct HttpResult {
    std::optional<HttpResponse> response;  // set when a response arrived whole (any status)
    HttpError error;                       // otherwise
    bool ok() const { return response.has_value(); }
};

class HttpClient {
public:
    HttpClient();
    ~HttpClient();
    HttpClient(const HttpClient&) = delete;
    HttpClient& operator=(const HttpClient&) = delete;

    HttpResult perform(const HttpRequest& request);

private:
    struct Pool;
    std::unique_ptr<Pool> pool_;
};

// `url` without user information, query or fragment ("https://api.example.com/v1/messages"), for
// messages; a URL that does not parse comes back as "<url>".
std::string redactedUrl(std::string_view url);

// The host `url` names, lower-cased, without user information or port ("api.example.com" for
// "https://u:p@API.example.com:8443/v1"; "[::1]" for "http://[::1]:8000/"); empty when the URL
// does not parse. For decisions that follow the host (a model API's own quirks).
std::string urlHost(std::string_view url);

// An HTTP Retry-After value in milliseconds: delay-seconds ("2", "0.5" as some servers send it) or
// an HTTP-date (relative to now, at least 0). Nothing for anything else.
std::optional<uint64_t> parseRetryAfter(std::string_view value);

// Whether libcurl can be loaded; when not, `why` says so.
bool httpClientAvailable(std::string& why);

}  // namespace remit
