// The HTTP client: see http_client.h. libcurl's easy interface, loaded with dlopen on first use;
// one easy handle per request in flight, kept in a pool between requests, since a handle keeps
// its connections, TLS sessions and DNS cache across curl_easy_reset.
#include "broker/http_client.h"

#include "runtime/shared_library.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <mutex>

// Only the types and constants: every function is called through the pointers loaded below.
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

namespace remit {

namespace {

// Caps on what a server can make us hold besides the body (below libcurl's own 100 KB per header,
// so a large head is always reported as too large).
constexpr std::size_t kMaxHeaderBytes = 64 * 1024;
constexpr std::size_t kMaxIdleHandles = 16;

// libcurl's functions, loaded once for the process and never unloaded.
struct CurlApi : SharedLibraryApi {
    CURLcode (*globalInit)(long) = nullptr;
    CURL* (*easyInit)() = nullptr;
    void (*easyCleanup)(CURL*) = nullptr;
    void (*easyReset)(CURL*) = nullptr;
    CURLcode (*easySetopt)(CURL*, CURLoption, ...) = nullptr;
    CURLcode (*easyPerform)(CURL*) = nullptr;
    CURLcode (*easyGetinfo)(CURL*, CURLINFO, ...) = nullptr;
    const char* (*easyStrerror)(CURLcode) = nullptr;
    curl_slist* (*slistAppend)(curl_slist*, const char*) = nullptr;
    void (*slistFreeAll)(curl_slist*) = nullptr;
};

bool bindCurl(const SharedLibrary& lib, CurlApi& api) {
    return lib.bind("curl_global_init", api.globalInit) && lib.bind("curl_easy_init", api.easyInit) &&
           lib.bind("curl_easy_cleanup", api.easyCleanup) && lib.bind("curl_easy_reset", api.easyReset) &&
           lib.bind("curl_easy_setopt", api.easySetopt) && lib.bind("curl_easy_perform", api.easyPerform) &&
           lib.bind("curl_easy_getinfo", api.easyGetinfo) && lib.bind("curl_easy_strerror", api.easyStrerror) &&
           lib.bind("curl_slist_append", api.slistAppend) && lib.bind("curl_slist_free_all", api.slistFreeAll);
}

const CurlApi& curl() {
    static const CurlApi api = [] {  // thread-safe, once
        CurlApi loaded = loadSharedLibraryApi<CurlApi>("libcurl", {"libcurl.so.4", "libcurl.so"}, "libcurl4", bindCurl);
        if (loaded.loaded() && loaded.globalInit(CURL_GLOBAL_DEFAULT) != CURLE_OK)
            loaded.error = "libcurl failed to initialise";
        return loaded;
    }();
    return api;
}

std::string lower(std::string_view text) {
    std::string out(text);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string trim(std::string_view text) {
    size_t begin = 0, end = text.size();
    while (begin < end && (text[begin] == ' ' || text[begin] == '\t')) ++begin;
    while (end > begin && (text[end - 1] == ' ' || text[end - 1] == '\t' || text[end - 1] == '\r' ||
                           text[end - 1] == '\n'))
        --end;
    return std::string(text.substr(begin, end - begin));
}

// An RFC 9110 token (methods, header names).
bool isToken(std::string_view text) {
    if (text.empty()) return false;
    return std::all_of(text.begin(), text.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("!#$%&'*+-.^_`|~").find(c) !=
                                                                   std::string_view::npos;
    });
}

struct UrlParts {
    std::string scheme, userinfo, hostAndPath, query, fragment;
    bool ok = false;
};

UrlParts splitUrl(std::string_view url) {
    UrlParts parts;
    size_t schemeEnd = url.find("://");
    if (schemeEnd == std::string_view::npos || schemeEnd == 0) return parts;
    parts.scheme = lower(url.substr(0, schemeEnd));
    std::string_view rest = url.substr(schemeEnd + 3);
    size_t fragmentAt = rest.find('#');
    if (fragmentAt != std::string_view::npos) {
        parts.fragment = std::string(rest.substr(fragmentAt + 1));
        rest = rest.substr(0, fragmentAt);
    }
    size_t queryAt = rest.find('?');
    if (queryAt != std::string_view::npos) {
        parts.query = std::string(rest.substr(queryAt + 1));
        rest = rest.substr(0, queryAt);
    }
    size_t authorityEnd = rest.find('/');
    std::string_view authority = rest.substr(0, authorityEnd);
    size_t at = authority.rfind('@');
    if (at != std::string_view::npos) {
        parts.userinfo = std::string(authority.substr(0, at));
        rest.remove_prefix(at + 1);
    }
    parts.hostAndPath = std::string(rest);
    parts.ok = !parts.hostAndPath.empty() && parts.hostAndPath.front() != '/';
    return parts;
}

// Replaces every occurrence of each secret in `text` (secrets shorter than 4 bytes would only
// garble the message; nothing that short is a credential).
std::string scrub(std::string text, const std::vector<std::string>& secrets) {
    for (const std::string& secret : secrets) {
        if (secret.size() < 4) continue;
        for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at + 10))
            text.replace(at, secret.size(), "[redacted]");
    }
    return text;
}

// What a request could leak into a message: each header's value (and its words, for
// "Bearer KEY"), the URL's user information, query and fragment, and the body.
std::vector<std::string> secretsOf(const HttpRequest& request) {
    std::vector<std::string> secrets;
    for (const HttpHeader& h : request.headers) {
        secrets.push_back(h.value);
        size_t start = 0;
        while (start < h.value.size()) {
            size_t end = h.value.find_first_of(" \t,;=", start);
            if (end == std::string::npos) end = h.value.size();
            if (end > start) secrets.push_back(h.value.substr(start, end - start));
            start = end + 1;
        }
    }
    UrlParts parts = splitUrl(request.url);
    for (std::string* s : {&parts.userinfo, &parts.query, &parts.fragment}) secrets.push_back(*s);
    if (!request.body.empty()) secrets.push_back(request.body);
    // Longest first, so a value is replaced whole before a word of it is looked for.
    std::sort(secrets.begin(), secrets.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    return secrets;
}

struct BodySink {
    std::string* body;
    std::size_t cap;
    bool tooLarge = false;
};

size_t onBody(char* data, size_t size, size_t count, void* user) {
    auto* sink = static_cast<BodySink*>(user);
    size_t n = size * count;
    if (sink->body->size() + n > sink->cap) {
        sink->tooLarge = true;
        return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
    }
    sink->body->append(data, n);
    return n;
}

struct HeaderSink {
    std::vector<HttpHeader>* headers;
    std::size_t bytes = 0;
    bool tooLarge = false;
};

size_t onHeader(char* data, size_t size, size_t count, void* user) {
    auto* sink = static_cast<HeaderSink*>(user);
    size_t n = size * count;
    sink->bytes += n;
    if (sink->bytes > kMaxHeaderBytes) {
        sink->tooLarge = true;
        return 0;
    }
    std::string_view line(data, n);
    if (line.starts_with("HTTP/")) {
        // A new response (after 100 Continue, or a redirect that is followed): only the final
        // one's headers are kept.
        sink->headers->clear();
        return n;
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) return n;  // the blank line that ends the head
    sink->headers->push_back(HttpHeader{lower(trim(line.substr(0, colon))), trim(line.substr(colon + 1))});
    return n;
}

HttpError::Kind kindOf(CURLcode code) {
    switch (code) {
        case CURLE_OPERATION_TIMEDOUT: return HttpError::Kind::Timeout;
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
        case CURLE_COULDNT_CONNECT:
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_CERTPROBLEM: return HttpError::Kind::Connect;
        case CURLE_FILESIZE_EXCEEDED: return HttpError::Kind::TooLarge;
        // (CURLE_UNSUPPORTED_PROTOCOL is a transfer error: the scheme was checked before sending,
        // so it means the server answered with something that is not HTTP/1.x, such as HTTP/0.9.)
        case CURLE_URL_MALFORMAT: return HttpError::Kind::Invalid;
        default: return HttpError::Kind::Transfer;
    }
}

}  // namespace

struct HttpClient::Pool {
    std::mutex mutex;
    std::vector<CURL*> idle;

    CURL* take() {
        {
            std::lock_guard<std::mutex> lock(mutex);
            if (!idle.empty()) {
                CURL* handle = idle.back();
                idle.pop_back();
                return handle;
            }
        }
        return curl().easyInit();
    }
    void give(CURL* handle) {
        {
            std::lock_guard<std::mutex> lock(mutex);
            if (idle.size() < kMaxIdleHandles) {
                idle.push_back(handle);
                return;
            }
        }
        curl().easyCleanup(handle);
    }
    ~Pool() {
        for (CURL* handle : idle) curl().easyCleanup(handle);
    }
};

HttpClient::HttpClient() : pool_(std::make_unique<Pool>()) {}
HttpClient::~HttpClient() = default;

const std::string* HttpResponse::header(std::string_view name) const {
    std::string wanted = lower(name);
    for (const HttpHeader& h : headers)
        if (h.name == wanted) return &h.value;
    return nullptr;
}

std::string redactedUrl(std::string_view url) {
    UrlParts parts = splitUrl(url);
    if (!parts.ok) return "<url>";
    return parts.scheme + "://" + parts.hostAndPath;
}

std::string urlHost(std::string_view url) {
    UrlParts parts = splitUrl(url);
    if (!parts.ok) return {};
    std::string_view authority = std::string_view(parts.hostAndPath).substr(0, parts.hostAndPath.find('/'));
    // A port follows the last colon, except inside an IPv6 literal's brackets.
    size_t colon = authority.rfind(':');
    if (colon != std::string_view::npos && authority.find(']', colon) == std::string_view::npos)
        authority = authority.substr(0, colon);
    return lower(authority);
}

std::optional<uint64_t> parseRetryAfter(std::string_view value) {
    std::string text = trim(value);
    if (text.empty()) return std::nullopt;
    if (std::isdigit(static_cast<unsigned char>(text[0]))) {
        char* end = nullptr;
        double seconds = std::strtod(text.c_str(), &end);
        if (end != text.c_str() + text.size() || !std::isfinite(seconds) || seconds < 0) return std::nullopt;
        return static_cast<uint64_t>(std::min(seconds, 86400.0 * 365) * 1000.0);
    }
    // An HTTP-date: "Wed, 21 Oct 2015 07:28:00 GMT".
    std::tm tm{};
    const char* end = ::strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (!end || *end != '\0') return std::nullopt;
    std::time_t when = ::timegm(&tm);
    std::time_t now = std::time(nullptr);
    return when > now ? static_cast<uint64_t>(when - now) * 1000 : 0;
}

bool httpClientAvailable(std::string& why) {
    why = curl().error;
    return curl().loaded();
}

HttpResult HttpClient::perform(const HttpRequest& request) {
    HttpResult result;
    const std::string shownUrl = redactedUrl(request.url);
    auto fail = [&](HttpError::Kind kind, std::string detail) {
        result.error.kind = kind;
        result.error.message = fmt::format("{} {}: {}", isToken(request.method) ? request.method : "request", shownUrl,
                                           scrub(std::move(detail), secretsOf(request)));
        return result;
    };

    UrlParts parts = splitUrl(request.url);
    if (!parts.ok || (parts.scheme != "http" && parts.scheme != "https"))
        return fail(HttpError::Kind::Invalid, "only http:// and https:// URLs can be requested");
    if (!isToken(request.method)) return fail(HttpError::Kind::Invalid, "the method is not an HTTP token");
    for (const HttpHeader& h : request.headers) {
        if (!isToken(h.name)) return fail(HttpError::Kind::Invalid, "a header name is not an HTTP token");
        if (h.value.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos)
            return fail(HttpError::Kind::Invalid, fmt::format("the value of header '{}' holds a line break", h.name));
    }
    const CurlApi& api = curl();
    if (!api.loaded()) return fail(HttpError::Kind::Unavailable, api.error);

    CURL* handle = pool_->take();
    if (!handle) return fail(HttpError::Kind::Unavailable, "libcurl could not make a handle (out of memory?)");
    api.easyReset(handle);

    // Headers: the caller's, then the ones we switch off unless the caller set them (curl adds a
    // form Content-Type to any body, and Expect: 100-continue to large ones).
    curl_slist* headerList = nullptr;
    bool hasContentType = false, hasExpect = false, hasUserAgent = false;
    for (const HttpHeader& h : request.headers) {
        std::string name = lower(h.name);
        hasContentType = hasContentType || name == "content-type";
        hasExpect = hasExpect || name == "expect";
        hasUserAgent = hasUserAgent || name == "user-agent";
        // "Name;" is curl's way to send a header with an empty value ("Name:" would remove it).
        std::string line = h.value.empty() ? h.name + ";" : h.name + ": " + h.value;
        headerList = api.slistAppend(headerList, line.c_str());
    }
    if (!hasContentType) headerList = api.slistAppend(headerList, "Content-Type:");
    if (!hasExpect) headerList = api.slistAppend(headerList, "Expect:");
    if (!hasUserAgent) headerList = api.slistAppend(headerList, "User-Agent: remit");

    HttpResponse response;
    BodySink bodySink{&response.body, request.maxResponseBytes};
    HeaderSink headerSink{&response.headers};
    char errorBuffer[CURL_ERROR_SIZE] = {0};
    const long timeoutMs = static_cast<long>(
        std::min<uint64_t>(request.timeoutMs ? request.timeoutMs : HttpRequest::kDefaultTimeoutMs, 86'400'000));

    auto set = api.easySetopt;
    set(handle, CURLOPT_URL, request.url.c_str());
    set(handle, CURLOPT_PROTOCOLS_STR, "http,https");
    set(handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    set(handle, CURLOPT_FOLLOWLOCATION, request.followRedirects ? 1L : 0L);
    set(handle, CURLOPT_MAXREDIRS, 5L);
    set(handle, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for DNS timeouts (the resolver is threaded)
    set(handle, CURLOPT_TIMEOUT_MS, timeoutMs);
    set(handle, CURLOPT_CONNECTTIMEOUT_MS, timeoutMs);
    set(handle, CURLOPT_TCP_KEEPALIVE, 1L);
    set(handle, CURLOPT_ACCEPT_ENCODING, "");  // every encoding this libcurl decodes
    set(handle, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(request.maxResponseBytes));
    set(handle, CURLOPT_HTTPHEADER, headerList);
    set(handle, CURLOPT_WRITEFUNCTION, &onBody);
    set(handle, CURLOPT_WRITEDATA, &bodySink);
    set(handle, CURLOPT_HEADERFUNCTION, &onHeader);
    set(handle, CURLOPT_HEADERDATA, &headerSink);
    set(handle, CURLOPT_ERRORBUFFER, errorBuffer);
    if (request.method == "GET" && request.body.empty()) {
        set(handle, CURLOPT_HTTPGET, 1L);
    } else if (request.method == "HEAD") {
        set(handle, CURLOPT_NOBODY, 1L);
    } else {
        set(handle, CURLOPT_CUSTOMREQUEST, request.method.c_str());
        if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
            request.method == "PATCH") {
            set(handle, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
            set(handle, CURLOPT_POSTFIELDS, request.body.data());
        }
    }

    CURLcode code = api.easyPerform(handle);
    api.easyGetinfo(handle, CURLINFO_RESPONSE_CODE, &response.status);
    api.easyGetinfo(handle, CURLINFO_NUM_CONNECTS, &response.newConnections);
    // The list is read by perform only; the handle keeps no pointer into our stack after a reset.
    api.easyReset(handle);
    api.slistFreeAll(headerList);
    pool_->give(handle);

    if (bodySink.tooLarge || code == CURLE_FILESIZE_EXCEEDED)
        return fail(HttpError::Kind::TooLarge,
                    fmt::format("the response body is larger than {} bytes", request.maxResponseBytes));
    if (headerSink.tooLarge)
        return fail(HttpError::Kind::TooLarge, fmt::format("the response headers exceed {} bytes", kMaxHeaderBytes));
    if (code != CURLE_OK) {
        std::string detail = errorBuffer[0] ? std::string(errorBuffer) : std::string(api.easyStrerror(code));
        if (code == CURLE_OPERATION_TIMEDOUT) detail = fmt::format("no complete response within {} ms", timeoutMs);
        return fail(kindOf(code), detail);
    }
    result.response = std::move(response);
    return result;
}

}  // namespace remit
