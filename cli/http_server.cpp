// The HTTP/1.1 server of cli/http_server.h. The parser follows RFC 9112 strictly where leniency
// would let two parties disagree on where a request ends (line folding, whitespace before a
// header's colon, conflicting Content-Length, Transfer-Encoding), and leniently where it cannot
// (bare LF line ends, empty lines before a request).
#include "cli/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

namespace remit::cli::http {

namespace {

using Clock = std::chrono::steady_clock;

// After a keep-alive response the client's next request often follows at once (an agent's next
// call, the rest of a pipelined batch): the thread that answered waits for it this long before it
// hands the connection back to run()'s thread, which saves two hand-offs and a thread per
// request. It gives the connection back at once when a request is waiting for a thread.
constexpr auto kLinger = std::chrono::milliseconds(50);

bool isTokenChar(unsigned char c) { return std::isalnum(c) || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr; }
bool isToken(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c != '\0' && isTokenChar(c); });
}

// Whether the comma-separated list `value` holds `token` (case-insensitive), as in Connection.
bool listHas(std::string_view value, std::string_view token) {
    while (!value.empty()) {
        size_t comma = value.find(',');
        if (lowerAscii(trimOws(value.substr(0, comma))) == token) return true;
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
    }
    return false;
}

// Splits the head into lines without their line ends; the blank line ending it is not included.
std::vector<std::string_view> headLines(std::string_view head) {
    std::vector<std::string_view> lines;
    while (!head.empty()) {
        size_t nl = head.find('\n');
        std::string_view line = head.substr(0, nl);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty()) break;
        lines.push_back(line);
        if (nl == std::string_view::npos) break;
        head.remove_prefix(nl + 1);
    }
    return lines;
}

}  // namespace

std::string lowerAscii(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

std::string_view trimOws(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

std::optional<std::string_view> Request::header(std::string_view name) const {
    for (const auto& [key, value] : headers)
        if (key == name) return std::string_view(value);
    return std::nullopt;
}

Response Response::text(int status, std::string body, std::string contentType) {
    Response r;
    r.status = status;
    r.headers.emplace_back("Content-Type", std::move(contentType));
    r.body = std::move(body);
    return r;
}

Response Response::error(int status, std::string_view message) {
    return text(status,
                nlohmann::json{{"error", message}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                "application/json");
}

std::vector<std::pair<std::string, std::string>> formFields(std::string_view body) {
    auto decode = [](std::string_view s) {
        std::string out;
        out.reserve(s.size());
        auto hex = [](char c) -> int {
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            if (c >= 'A' && c <= 'F') return c - 'A' + 10;
            return -1;
        };
        for (size_t i = 0; i < s.size(); ++i) {
            if (s[i] == '+') {
                out += ' ';
            } else if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
                out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
                i += 2;
            } else {
                out += s[i];
            }
        }
        return out;
    };
    std::vector<std::pair<std::string, std::string>> out;
    while (!body.empty()) {
        size_t amp = body.find('&');
        std::string_view field = body.substr(0, amp);
        body = amp == std::string_view::npos ? std::string_view() : body.substr(amp + 1);
        if (field.empty()) continue;
        size_t eq = field.find('=');
        out.emplace_back(decode(field.substr(0, eq)),
                         eq == std::string_view::npos ? std::string() : decode(field.substr(eq + 1)));
    }
    return out;
}

std::optional<std::string> formField(std::string_view body, std::string_view name) {
    for (auto& [key, value] : formFields(body))
        if (key == name) return std::move(value);
    return std::nullopt;
}

std::optional<std::string> cookie(const Request& r, std::string_view name) {
    for (const auto& [header, value] : r.headers) {
        if (header != "cookie") continue;
        std::string_view rest = value;
        while (!rest.empty()) {
            size_t semi = rest.find(';');
            std::string_view pair = trimOws(rest.substr(0, semi));
            rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
            size_t eq = pair.find('=');
            if (eq != std::string_view::npos && trimOws(pair.substr(0, eq)) == name)
                return std::string(trimOws(pair.substr(eq + 1)));
        }
    }
    return std::nullopt;
}

std::optional<std::string> bearerToken(const Request& r) {
    if (std::optional<std::string_view> auth = r.header("authorization");
        auth && auth->size() > 7 && lowerAscii(auth->substr(0, 7)) == "bearer ") {
        std::string_view token = trimOws(auth->substr(7));
        if (!token.empty()) return std::string(token);
    }
    if (std::optional<std::string_view> key = r.header("x-api-key"); key && !key->empty()) return std::string(*key);
    return std::nullopt;
}

std::string_view reasonPhrase(int status) {
    static constexpr std::pair<int, std::string_view> kReasons[] = {
        {100, "Continue"},
        {200, "OK"},
        {202, "Accepted"},
        {204, "No Content"},
        {303, "See Other"},
        {400, "Bad Request"},
        {401, "Unauthorized"},
        {403, "Forbidden"},
        {404, "Not Found"},
        {405, "Method Not Allowed"},
        {408, "Request Timeout"},
        {409, "Conflict"},
        {411, "Length Required"},
        {413, "Content Too Large"},
        {415, "Unsupported Media Type"},
        {429, "Too Many Requests"},
        {431, "Request Header Fields Too Large"},
        {500, "Internal Server Error"},
        {501, "Not Implemented"},
        {503, "Service Unavailable"},
        {505, "HTTP Version Not Supported"},
    };
    for (const auto& [code, reason] : kReasons)
        if (code == status) return reason;
    return "Unknown";
}

std::string serializeResponse(const Response& response, bool keepAlive, bool headRequest) {
    std::string out = fmt::format("HTTP/1.1 {} {}\r\n", response.status, reasonPhrase(response.status));
    for (const auto& [name, value] : response.headers) {
        // Header text is ours, never the client's; still, a line break would split the response.
        if (name.find_first_of("\r\n") != std::string::npos || value.find_first_of("\r\n") != std::string::npos)
            continue;
        out += fmt::format("{}: {}\r\n", name, value);
    }
    // 1xx, 204 and 304 responses carry no body and no Content-Length (RFC 9110 8.6).
    bool bodiless = response.status < 200 || response.status == 204 || response.status == 304;
    if (!bodiless) out += fmt::format("Content-Length: {}\r\n", response.body.size());
    out += keepAlive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
    if (!headRequest && !bodiless) out += response.body;
    return out;
}

bool accepts(const Request& request, std::string_view mediaType) {
    std::optional<std::string_view> accept = request.header("accept");
    if (!accept) return false;
    // Media ranges separated by commas, each perhaps with parameters (`;q=0.9`).
    std::string_view rest = *accept;
    while (!rest.empty()) {
        size_t comma = rest.find(',');
        std::string_view range = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        if (lowerAscii(trimOws(range.substr(0, range.find(';')))) == mediaType) return true;
    }
    return false;
}

std::optional<size_t> findHeadEnd(std::string_view buffer, size_t& from) {
    for (size_t i = from; i < buffer.size(); ++i) {
        if (buffer[i] != '\n') continue;
        if (i + 1 < buffer.size() && buffer[i + 1] == '\n') return i + 2;
        if (i + 2 < buffer.size() && buffer[i + 1] == '\r' && buffer[i + 2] == '\n') return i + 3;
    }
    // The last two bytes may start a terminator that the next read completes.
    from = buffer.size() > 2 ? buffer.size() - 2 : 0;
    return std::nullopt;
}

int parseRequestHead(std::string_view head, const Limits& limits, Request& out, std::string& problem) {
    if (head.size() > kMaxHeadBytes) {
        problem = fmt::format("the request line and headers are longer than {} bytes", kMaxHeadBytes);
        return 431;
    }
    std::vector<std::string_view> lines = headLines(head);
    if (lines.empty()) {
        problem = "no request line";
        return 400;
    }
    // Request line: METHOD SP request-target SP HTTP-version, nothing else.
    std::string_view line = lines[0];
    size_t sp1 = line.find(' ');
    size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
        problem = "malformed request line";
        return 400;
    }
    std::string_view method = line.substr(0, sp1);
    std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string_view version = line.substr(sp2 + 1);
    if (!isToken(method) || method.size() > 32) {
        problem = "malformed method";
        return 400;
    }
    if (target.empty() || !std::all_of(target.begin(), target.end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
        problem = "malformed request target";
        return 400;
    }
    if (version.size() != 8 || !version.starts_with("HTTP/") || !std::isdigit(static_cast<unsigned char>(version[5])) ||
        version[6] != '.' || !std::isdigit(static_cast<unsigned char>(version[7]))) {
        problem = "malformed HTTP version";
        return 400;
    }
    if (version[5] != '1') {
        problem = "only HTTP/1.0 and HTTP/1.1 are supported";
        return 505;
    }
    out.method = std::string(method);
    out.target = std::string(target);
    out.minorVersion = version[7] - '0';
    // origin-form (/path?query) is what clients send; absolute-form (http://host/path) must be
    // accepted too (RFC 9112 3.2.2); asterisk-form only means something to OPTIONS.
    std::string_view path = target;
    if (lowerAscii(target.substr(0, 7)) == "http://" || lowerAscii(target.substr(0, 8)) == "https://") {
        size_t slash = target.find('/', target.find("//") + 2);
        path = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
    } else if (target != "*" && target.front() != '/') {
        problem = "malformed request target";
        return 400;
    }
    out.path = std::string(path.substr(0, path.find('?')));

    out.headers.clear();
    for (size_t i = 1; i < lines.size(); ++i) {
        std::string_view h = lines[i];
        if (h.front() == ' ' || h.front() == '\t') {
            problem = "obsolete header line folding";
            return 400;
        }
        size_t colon = h.find(':');
        if (colon == std::string_view::npos || !isToken(h.substr(0, colon))) {
            problem = "malformed header line";
            return 400;
        }
        std::string_view value = trimOws(h.substr(colon + 1));
        // Control characters (HTAB aside), including a bare CR, are never valid in a field value.
        if (std::any_of(value.begin(), value.end(), [](char c) {
                auto u = static_cast<unsigned char>(c);
                return (u < 0x20 && u != '\t') || u == 0x7f;
            })) {
            problem = "control character in a header value";
            return 400;
        }
        if (out.headers.size() >= kMaxHeaders) {
            problem = fmt::format("more than {} headers", kMaxHeaders);
            return 431;
        }
        out.headers.emplace_back(lowerAscii(h.substr(0, colon)), std::string(value));
    }

    out.contentLength.reset();
    size_t hosts = 0;
    bool close = false, keepAlive = false;
    out.expectContinue = false;
    for (const auto& [name, value] : out.headers) {
        if (name == "content-length") {
            if (value.empty() || value.size() > 19 ||
                !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
                problem = "malformed Content-Length";
                return 400;
            }
            size_t n = std::stoull(value);
            if (out.contentLength && *out.contentLength != n) {
                problem = "conflicting Content-Length headers";
                return 400;
            }
            out.contentLength = n;
        } else if (name == "transfer-encoding") {
            problem = "Transfer-Encoding (chunked bodies) is not supported; send the body with Content-Length";
            return 411;
        } else if (name == "host") {
            ++hosts;
        } else if (name == "connection") {
            close = close || listHas(value, "close");
            keepAlive = keepAlive || listHas(value, "keep-alive");
        } else if (name == "expect") {
            out.expectContinue = lowerAscii(value) == "100-continue";
        }
    }
    // RFC 9112 3.2: an HTTP/1.1 request carries exactly one Host.
    if (out.minorVersion >= 1 && hosts != 1) {
        problem = hosts == 0 ? "missing Host header" : "more than one Host header";
        return 400;
    }
    // A body's end is known only from its length: without one, a POST's body cannot be told from
    // the next request.
    if (!out.contentLength && (out.method == "POST" || out.method == "PUT" || out.method == "PATCH")) {
        problem = "a request with a body needs Content-Length";
        return 411;
    }
    if (out.contentLength && *out.contentLength > limits.maxBody) {
        problem = fmt::format("the body is larger than {} bytes", limits.maxBody);
        return 413;
    }
    out.keepAlive = out.minorVersion >= 1 ? !close : keepAlive && !close;
    return 0;
}

// ---------------------------------------------------------------- connections

struct Server::Connection {
    std::mutex mutex;  // guards fd against stop()'s interrupt while a request thread reads
    int fd = -1;       // -1 once closed
    std::string peer;
    std::string buffer;             // read and not yet used: a head arriving, a pipelined request
    size_t headScan = 0;            // where findHeadEnd stopped looking in buffer
    std::optional<size_t> headEnd;  // once the head is whole: where it ends in buffer

    // Waiting: idle, or its request line and headers still arriving, watched by run()'s thread
    // (only a waiting connection is ever closed to make room); Queued: its head has arrived and it
    // waits for a thread; Active: a request thread owns it, buffer included, until it is done.
    enum class State { Waiting, Queued, Active } state = State::Waiting;
    Clock::time_point waitingSince;  // when the server began waiting for its current request
    Clock::time_point queuedUntil;   // Queued: when its wait for a thread ends
    bool served = false;             // has answered a request: a real client, not a squatter
    bool watched = false;            // in the epoll set
    bool closed = false;             // closed, to be forgotten at the end of run()'s round
    std::thread thread;              // Active: the thread answering its request
    bool keep = false;               // set by that thread when it ends: wait for the next request

    // Shuts reading down so a blocked read of a body ends; a response being written still goes out.
    void interrupt() {
        std::lock_guard<std::mutex> lock(mutex);
        if (fd >= 0) ::shutdown(fd, SHUT_RD);
    }
};

namespace {

enum class ReadStatus { Data, End, Timeout };

// Appends what arrives on `fd` before `deadline` to `buffer`.
ReadStatus readSome(int fd, std::string& buffer, Clock::time_point deadline) {
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) return ReadStatus::Timeout;
        pollfd p{fd, POLLIN, 0};
        int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 60'000)));
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) return ReadStatus::End;
        if (ready == 0) continue;  // the loop re-checks the deadline
        char chunk[16384];
        ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) return ReadStatus::End;
        buffer.append(chunk, static_cast<size_t>(n));
        return ReadStatus::Data;
    }
}

// While a request is being handled, a thread waits for its client to hang up (the peer's FIN,
// seen as POLLRDHUP even when a pipelined request is still unread) and tells the handler, so a
// long tool call stops when nobody is left to read its answer. The handler's end wakes the
// thread through an eventfd, so watching adds no latency to a request.
class HangUpWatch {
public:
    HangUpWatch(int fd, Handler& handler, const Request& request) : wake_(::eventfd(0, EFD_CLOEXEC)) {
        if (wake_ < 0) return;  // no watching: the request is simply answered
        try {
            start(fd, handler, request);
        } catch (...) {  // no thread to spare: the same
            ::close(wake_);
            wake_ = -1;
        }
    }
    ~HangUpWatch() {
        if (wake_ < 0) return;
        uint64_t one = 1;
        ssize_t written = ::write(wake_, &one, sizeof one);
        (void)written;  // an eventfd write of 1 cannot fail short of overflow
        thread_.join();
        ::close(wake_);
    }
    HangUpWatch(const HangUpWatch&) = delete;
    HangUpWatch& operator=(const HangUpWatch&) = delete;

private:
    int wake_;
    std::thread thread_;

    void start(int fd, Handler& handler, const Request& request) {
        thread_ = std::thread([this, fd, &handler, &request] {
            pollfd fds[2] = {{fd, POLLRDHUP, 0}, {wake_, POLLIN, 0}};
            while (true) {
                int n = ::poll(fds, 2, -1);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0 || (fds[1].revents & POLLIN)) return;
                if (fds[0].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
                    try {
                        handler.clientGone(request);
                    } catch (...) {  // nothing to do: the request is answered as usual
                    }
                    return;
                }
            }
        });
    }
};

bool sendAll(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
        ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;  // includes the send timeout: a client that does not read
        bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
}

}  // namespace

bool EventStream::writeChunk(std::string_view bytes) {
    if (broken_) return false;
    if (!sendAll(fd_, fmt::format("{:x}\r\n{}\r\n", bytes.size(), bytes))) broken_ = true;
    return !broken_;
}

bool EventStream::send(std::string_view data, const std::vector<std::pair<std::string, std::string>>& headers) {
    if (!available_ || broken_) return false;
    if (!started_) {
        std::string head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n";
        for (const auto& [name, value] : headers)
            if (name.find_first_of("\r\n") == std::string::npos && value.find_first_of("\r\n") == std::string::npos)
                head += fmt::format("{}: {}\r\n", name, value);
        head += "Transfer-Encoding: chunked\r\n\r\n";
        started_ = true;
        if (!sendAll(fd_, head)) {
            broken_ = true;
            return false;
        }
    }
    // One event: its type, a `data:` line per line of the data, and the blank line ending it.
    std::string event = "event: message\n";
    for (size_t at = 0; at <= data.size();) {
        size_t end = data.find_first_of("\r\n", at);
        if (end == std::string_view::npos) end = data.size();
        event += fmt::format("data: {}\n", data.substr(at, end - at));
        at = end + (end < data.size() && data[end] == '\r' && end + 1 < data.size() && data[end + 1] == '\n' ? 2 : 1);
    }
    event += '\n';
    return writeChunk(event);
}

bool EventStream::finish(std::string_view last) {
    if (!started_) return false;
    if (!last.empty() && !send(last)) return false;
    if (broken_ || !sendAll(fd_, "0\r\n\r\n")) broken_ = true;
    return !broken_;
}

namespace {

// Closing a socket with unread input makes the kernel answer with a reset, which can destroy the
// response before the client reads it; so the write side is closed first and input is discarded
// until the client closes, briefly.
void lingeringClose(int fd) {
    ::shutdown(fd, SHUT_WR);
    std::string sink;
    auto deadline = Clock::now() + std::chrono::seconds(2);
    size_t drained = 0;
    while (drained < (size_t(4) << 20) && readSome(fd, sink, deadline) == ReadStatus::Data) {
        drained += sink.size();
        sink.clear();
    }
}

// Empty lines before a request are ignored (RFC 9112 2.2), e.g. a CRLF after a body. Then whether
// the request line and headers have arrived whole, or more bytes than a head may have without
// their end (which the request thread answers with 431).
bool headArrived(std::string& buffer, size_t& scan, std::optional<size_t>& end) {
    size_t blank = 0;
    while (blank < buffer.size() &&
           (buffer[blank] == '\n' || (buffer[blank] == '\r' && blank + 1 < buffer.size() && buffer[blank + 1] == '\n')))
        blank += buffer[blank] == '\r' ? 2 : 1;
    if (blank > 0) {
        buffer.erase(0, blank);
        scan = 0;
    }
    end = findHeadEnd(buffer, scan);
    return end || buffer.size() > kMaxHeadBytes;
}

// Answers `status` and leaves the connection for the caller to close, from run()'s thread, which
// must never block: what the client already sent is read first, so that the close does not reset
// the connection under the response.
void refuse(int fd, int status, std::string_view message) {
    char chunk[4096];
    while (::recv(fd, chunk, sizeof chunk, MSG_DONTWAIT) > 0) {
    }
    Response refusal = Response::error(status, message);
    if (status == 503) refusal.headers.emplace_back("Retry-After", "1");
    std::string bytes = serializeResponse(refusal, false, false);
    ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::shutdown(fd, SHUT_WR);
}

std::string peerAddress(const sockaddr_storage& addr) {
    char text[INET6_ADDRSTRLEN] = {};
    if (addr.ss_family == AF_INET) {
        ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, text, sizeof text);
    } else if (addr.ss_family == AF_INET6) {
        ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr, text, sizeof text);
    }
    std::string out = text;
    // An IPv4 client of a dual-stack socket is the same client as over IPv4.
    if (out.starts_with("::ffff:") && out.find('.') != std::string::npos) out.erase(0, 7);
    return out;
}

}  // namespace

Server::Server(Limits limits) : limits_(limits) {
    if (::pipe2(wakeFds_, O_CLOEXEC | O_NONBLOCK) != 0) wakeFds_[0] = wakeFds_[1] = -1;
    doneFd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    yieldFd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    epollFd_ = ::epoll_create1(EPOLL_CLOEXEC);
}

Server::~Server() {
    for (auto& c : connections_) {
        if (c->thread.joinable()) c->thread.join();
        if (c->fd >= 0) ::close(c->fd);
    }
    for (int fd : {listenFd_, wakeFds_[0], wakeFds_[1], doneFd_, yieldFd_, epollFd_})
        if (fd >= 0) ::close(fd);
}

bool Server::listen(const std::string& host, uint16_t port, std::string& error) {
    if (wakeFds_[0] < 0 || doneFd_ < 0 || yieldFd_ < 0 || epollFd_ < 0) {
        error = fmt::format("cannot create the server's event descriptors: {}", std::strerror(errno));
        return false;
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    std::string service = std::to_string(port);
    if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
        error = fmt::format("cannot resolve host '{}': {}", host, ::gai_strerror(rc));
        errno = 0;
        return false;
    }
    int lastErrno = 0;
    for (addrinfo* a = found; a && listenFd_ < 0; a = a->ai_next) {
        // Non-blocking: run() accepts until the backlog is empty, then goes back to its other work.
        int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) {
            lastErrno = errno;
            continue;
        }
        int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        // Connections wait in the backlog only for the moment run() takes to accept them. It is
        // long all the same (the kernel caps it at net.core.somaxconn, 4096 by default): a client's
        // handshake fails while it is full, so it must hold more than a flood of connections
        // reopened as fast as the server closes them can keep in it.
        if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 4096) != 0) {
            lastErrno = errno;
            ::close(fd);
            continue;
        }
        listenFd_ = fd;
    }
    ::freeaddrinfo(found);
    if (listenFd_ < 0) {
        error = fmt::format("cannot listen on {}:{}: {}", host, port, std::strerror(lastErrno));
        errno = lastErrno;
        return false;
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    ::getsockname(listenFd_, reinterpret_cast<sockaddr*>(&bound), &length);
    port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(bound).sin6_port
                                              : reinterpret_cast<sockaddr_in&>(bound).sin_port);
    return true;
}

void Server::stop() noexcept {
    char byte = 1;
    ssize_t ignored = ::write(wakeFds_[1], &byte, 1);
    (void)ignored;
}

void Server::close(Connection& c) {
    if (c.closed) return;
    if (c.watched) ::epoll_ctl(epollFd_, EPOLL_CTL_DEL, c.fd, nullptr);
    c.watched = false;
    if (c.state == Connection::State::Queued) queue_.remove(&c);
    {
        std::lock_guard<std::mutex> lock(c.mutex);
        ::close(c.fd);
        c.fd = -1;
    }
    c.closed = true;
    if (--openByPeer_[c.peer] == 0) openByPeer_.erase(c.peer);
}

bool Server::makeRoom(const std::string& peer) {
    // Over a bound, a waiting connection — idle, or its head still arriving — is closed to make
    // room, in this order: one that never completed a request and has waited a second or more (a
    // squatter, a slow head); then the one idle longest of those that did, if a second or more;
    // and when connections arrive faster than that (a flood: the bound is reached and none has
    // waited a second), the oldest that has not completed a request. A client sends its request
    // moments after connecting, and then its head has arrived and it is never closed for room; so
    // under a flood the squatters make room and real clients get in, where refusing newcomers would
    // refuse them along with the flood. A connection that answered a request less than a second
    // ago is a client between two calls, never closed for room either. When nothing can go, the
    // newcomer is refused.
    auto count = [&](const std::string& p) {
        auto it = openByPeer_.find(p);
        return it == openByPeer_.end() ? size_t(0) : it->second;
    };
    size_t open = 0;
    for (const auto& [p, n] : openByPeer_) open += n;
    bool peerFull = count(peer) >= limits_.maxOpenPerClient;
    if (open < limits_.maxOpenConnections && !peerFull) return true;
    const auto now = Clock::now();
    Connection* victim = nullptr;
    int victimRank = 0;
    for (const auto& c : connections_) {
        if (c->closed || c->state != Connection::State::Waiting || (peerFull && c->peer != peer)) continue;
        bool waitedLong = now - c->waitingSince >= std::chrono::seconds(1);
        if (c->served && !waitedLong) continue;
        int rank = waitedLong ? (c->served ? 1 : 0) : 2;
        if (!victim || rank < victimRank || (rank == victimRank && c->waitingSince < victim->waitingSince)) {
            victim = c.get();
            victimRank = rank;
        }
    }
    if (!victim) return false;
    close(*victim);
    return true;
}

void Server::acceptNewcomers() {
    // A bounded batch, so a flood of connections cannot keep run() from the connections it holds.
    for (int batch = 0; batch < 64; ++batch) {
        sockaddr_storage addr{};
        socklen_t length = sizeof addr;
        int fd = ::accept4(listenFd_, reinterpret_cast<sockaddr*>(&addr), &length, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            // Out of descriptors: back off instead of spinning on a connection we cannot take.
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
            return;  // EAGAIN: the backlog is empty
        }
        timeval timeout{static_cast<time_t>(limits_.readTimeoutMs / 1000),
                        static_cast<suseconds_t>(limits_.readTimeoutMs % 1000 * 1000)};
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
        std::string peer = peerAddress(addr);
        if (!makeRoom(peer)) {
            refuse(fd, 503, "too many connections; try again shortly");
            ::close(fd);
            continue;
        }
        auto c = std::make_unique<Connection>();
        c->fd = fd;
        c->peer = peer;
        c->waitingSince = Clock::now();
        epoll_event watch{};
        watch.events = EPOLLIN | EPOLLRDHUP;
        watch.data.ptr = c.get();
        if (::epoll_ctl(epollFd_, EPOLL_CTL_ADD, fd, &watch) != 0) {
            ::close(fd);
            continue;
        }
        c->watched = true;
        ++openByPeer_[peer];
        connections_.push_back(std::move(c));
    }
}

void Server::queue(Connection& c) {
    if (c.watched) ::epoll_ctl(epollFd_, EPOLL_CTL_DEL, c.fd, nullptr);
    c.watched = false;
    c.state = Connection::State::Queued;
    c.queuedUntil = Clock::now() + std::chrono::milliseconds(limits_.busyWaitMs);
    queue_.push_back(&c);
}

void Server::readWaiting(Connection& c) {
    if (c.closed || c.state != Connection::State::Waiting) return;
    char chunk[16384];
    for (;;) {
        ssize_t n = ::recv(c.fd, chunk, sizeof chunk, MSG_DONTWAIT);
        if (n > 0) {
            c.buffer.append(chunk, static_cast<size_t>(n));
            if (headArrived(c.buffer, c.headScan, c.headEnd)) {
                queue(c);
                return;
            }
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        break;  // the client closed or reset the connection before its head was whole
    }
    close(c);
}

void Server::dispatch(Handler& handler) {
    for (auto it = queue_.begin(); it != queue_.end() && active_ < limits_.maxActiveRequests;) {
        Connection& c = **it;
        if (activeByPeer_[c.peer] >= limits_.maxActivePerClient) {
            ++it;  // this client's own requests fill its share: the next client's request goes first
            continue;
        }
        it = queue_.erase(it);
        c.state = Connection::State::Active;
        ++active_;
        ++activeByPeer_[c.peer];
        // Request threads (and the threads they start) block SIGINT and SIGTERM, so a stop signal
        // runs its handler on run()'s thread, never on one that outlives the server.
        sigset_t stopSignals, previous;
        sigemptyset(&stopSignals);
        sigaddset(&stopSignals, SIGINT);
        sigaddset(&stopSignals, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &stopSignals, &previous);
        try {
            c.thread = std::thread([this, &c, &handler] {
                c.keep = serveConnection(c, handler);
                {
                    std::lock_guard<std::mutex> lock(finishedMutex_);
                    finished_.push_back(&c);
                }
                uint64_t one = 1;
                ssize_t written = ::write(doneFd_, &one, sizeof one);
                (void)written;  // an eventfd write of 1 cannot fail short of overflow
            });
        } catch (...) {  // no thread to be had: drop this connection, keep serving the others
            --active_;
            if (--activeByPeer_[c.peer] == 0) activeByPeer_.erase(c.peer);
            c.state = Connection::State::Waiting;
            close(c);
        }
        pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    }
}

void Server::collectFinished() {
    uint64_t count;
    ssize_t drained = ::read(doneFd_, &count, sizeof count);
    (void)drained;  // nonblocking: nothing to read is fine
    std::vector<Connection*> done;
    {
        std::lock_guard<std::mutex> lock(finishedMutex_);
        done.swap(finished_);
    }
    for (Connection* c : done) {
        c->thread.join();
        --active_;
        if (--activeByPeer_[c->peer] == 0) activeByPeer_.erase(c->peer);
        c->state = Connection::State::Waiting;
        if (!c->keep) {
            close(*c);
            continue;
        }
        // A pipelined request already read goes straight to the queue.
        if (headArrived(c->buffer, c->headScan, c->headEnd)) {
            queue(*c);
            continue;
        }
        epoll_event watch{};
        watch.events = EPOLLIN | EPOLLRDHUP;
        watch.data.ptr = c;
        if (::epoll_ctl(epollFd_, EPOLL_CTL_ADD, c->fd, &watch) != 0) {
            close(*c);
            continue;
        }
        c->watched = true;
    }
}

void Server::expire(bool sweepWaiting) {
    const auto now = Clock::now();
    // The queue is in arrival order, so its front waits longest.
    while (!queue_.empty() && now >= queue_.front()->queuedUntil) {
        Connection& c = *queue_.front();
        refuse(c.fd, 503, "every connection is busy; try again shortly");
        close(c);  // takes it off the queue
    }
    if (!sweepWaiting) return;
    for (auto& c : connections_) {
        if (c->closed || c->state != Connection::State::Waiting ||
            now - c->waitingSince < std::chrono::milliseconds(limits_.headTimeoutMs))
            continue;
        // An idle keep-alive connection just ends; a head that did not arrive in time is told so.
        if (!c->buffer.empty()) refuse(c->fd, 408, "the request did not arrive in time");
        close(*c);
    }
}

void Server::run(Handler& handler) {
    auto watch = [&](int fd, void* tag) {
        epoll_event e{};
        e.events = EPOLLIN;
        e.data.ptr = tag;
        ::epoll_ctl(epollFd_, EPOLL_CTL_ADD, fd, &e);
    };
    watch(listenFd_, &listenFd_);
    watch(wakeFds_[0], &wakeFds_[0]);
    watch(doneFd_, &doneFd_);
    auto nextSweep = Clock::now();
    for (bool stopping = false; !stopping;) {
        // Wakes for the next refusal of a request that has waited for a thread, else at least
        // ten times a second for the timeouts of waiting connections.
        auto wait = std::chrono::milliseconds(100);
        if (!queue_.empty())
            wait = std::clamp(std::chrono::ceil<std::chrono::milliseconds>(queue_.front()->queuedUntil - Clock::now()),
                              std::chrono::milliseconds(0), wait);
        epoll_event events[256];
        int ready = ::epoll_wait(epollFd_, events, 256, static_cast<int>(wait.count()));
        if (ready < 0 && errno != EINTR) break;
        for (int i = 0; i < ready; ++i) {
            void* tag = events[i].data.ptr;
            if (tag == &wakeFds_[0]) {
                stopping = true;
            } else if (tag == &listenFd_) {
                acceptNewcomers();
            } else if (tag != &doneFd_) {
                readWaiting(*static_cast<Connection*>(tag));
            }
        }
        collectFinished();
        // The waiting connections' timeouts are looked at ten times a second, not every round.
        bool sweep = Clock::now() >= nextSweep;
        if (sweep) nextSweep = Clock::now() + std::chrono::milliseconds(100);
        expire(sweep);
        if (!stopping) dispatch(handler);
        // Requests wait for a thread: threads lingering on their connections give them up.
        if (queue_.empty() == yielding_) {
            yielding_ = !queue_.empty();
            uint64_t one = 1;
            ssize_t done = yielding_ ? ::write(yieldFd_, &one, sizeof one) : ::read(yieldFd_, &one, sizeof one);
            (void)done;  // an eventfd of 0 or 1: neither can fail
        }
        connections_.remove_if([](const std::unique_ptr<Connection>& c) { return c->closed; });
    }
    // Stopping: no new connection, no new request; the requests being answered finish, and those
    // still waiting for a thread are told to come back.
    for (auto& c : connections_) {
        if (c->closed) continue;
        if (c->state == Connection::State::Active) {
            c->interrupt();
            continue;
        }
        if (c->state == Connection::State::Queued) refuse(c->fd, 503, "the server is stopping");
        close(*c);
    }
    for (auto& c : connections_)
        if (c->thread.joinable()) c->thread.join();
    for (auto& c : connections_)
        if (!c->closed) close(*c);
    connections_.clear();
    queue_.clear();
    finished_.clear();
    active_ = 0;
    activeByPeer_.clear();
}

bool Server::serveConnection(Connection& c, Handler& handler) {
    while (serveRequest(c, handler)) {
        c.served = true;
        c.waitingSince = Clock::now();
        c.headScan = 0;
        if (!awaitNextHead(c)) return true;
    }
    return false;
}

bool Server::awaitNextHead(Connection& c) {
    auto until = Clock::now() + kLinger;
    for (;;) {
        if (yielding_) return false;
        if (headArrived(c.buffer, c.headScan, c.headEnd)) return true;
        auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
        if (left <= 0) return false;
        pollfd fds[2] = {{c.fd, POLLIN, 0}, {yieldFd_, POLLIN, 0}};
        int ready = ::poll(fds, 2, static_cast<int>(left));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0 || fds[1].revents) return false;
        char chunk[16384];
        ssize_t n = ::recv(c.fd, chunk, sizeof chunk, MSG_DONTWAIT);
        if (n > 0) {
            c.buffer.append(chunk, static_cast<size_t>(n));
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            return false;  // run()'s thread sees the end too, and closes the connection
        }
    }
}

bool Server::serveRequest(Connection& c, Handler& handler) {
    const int fd = c.fd;
    auto respond = [&](const Response& r, bool keepAlive, bool headRequest) {
        if (!sendAll(fd, serializeResponse(r, keepAlive, headRequest))) return false;
        if (!keepAlive) lingeringClose(fd);
        return keepAlive;
    };
    auto failure = [&](int status, std::string_view message) {
        respond(Response::error(status, message), false, false);
        return false;
    };

    Request request;
    std::string problem;
    int status =
        c.headEnd ? parseRequestHead(std::string_view(c.buffer).substr(0, *c.headEnd), limits_, request, problem) : 431;
    if (!c.headEnd) problem = fmt::format("the request line and headers are longer than {} bytes", kMaxHeadBytes);
    if (status != 0) return failure(status, problem);
    c.buffer.erase(0, *c.headEnd);
    c.headEnd.reset();
    auto deadline = c.waitingSince + std::chrono::milliseconds(limits_.readTimeoutMs);
    request.peer = c.peer;
    bool headRequest = request.method == "HEAD";
    size_t length = request.contentLength.value_or(0);

    std::optional<Response> early;
    try {
        early = handler.screen(request);
    } catch (...) {
        early = Response::error(500, "internal error");
    }
    if (early) {
        // The unread body would be taken for the next request: keep the connection only when the
        // body has already arrived whole and can be skipped.
        bool bodyHere = c.buffer.size() >= length;
        if (bodyHere) c.buffer.erase(0, length);
        return respond(*early, request.keepAlive && bodyHere && !early->close, headRequest);
    }

    if (request.expectContinue && c.buffer.size() < length && !sendAll(fd, "HTTP/1.1 100 Continue\r\n\r\n"))
        return false;
    while (c.buffer.size() < length) {
        ReadStatus s = readSome(fd, c.buffer, deadline);
        if (s == ReadStatus::End) return false;
        if (s == ReadStatus::Timeout) return failure(408, "the request body did not arrive in time");
    }
    request.body = c.buffer.substr(0, length);
    c.buffer.erase(0, length);
    Response response;
    EventStream stream(fd, request.minorVersion >= 1 && !headRequest && accepts(request, "text/event-stream"));
    {
        HangUpWatch watch(fd, handler, request);
        try {
            response = handler.handle(request, stream);
        } catch (...) {
            // Once the stream has started a status can no longer be sent: it just ends.
            response = stream.started() ? Response{} : Response::error(500, "internal error");
        }
    }
    if (stream.started()) {
        // The head went out with the first event: the answer is the stream's last event.
        bool keepAlive = stream.finish(response.body) && request.keepAlive && !response.close;
        if (!keepAlive) lingeringClose(fd);
        return keepAlive;
    }
    return respond(response, request.keepAlive && !response.close, headRequest);
}

namespace {

std::atomic<Server*> gSignalled{nullptr};

void stopOnSignal(int) {
    if (Server* server = gSignalled.load()) server->stop();
}

}  // namespace

bool serveUntilSignalled(std::string_view tool, Server& server, const std::string& host, uint16_t port,
                         Handler& handler, const std::function<void(const std::string&)>& listening) {
    // The server holds up to maxOpenConnections connections, and the work behind it takes
    // descriptors besides; a soft limit of 1024, common for services, would refuse connections
    // long before that. The hard limit is the operator's: it is never exceeded.
    if (rlimit files{}; ::getrlimit(RLIMIT_NOFILE, &files) == 0) {
        rlim_t wanted = server.limits().maxOpenConnections + 1024;
        if (files.rlim_cur != RLIM_INFINITY && files.rlim_cur < wanted) {
            files.rlim_cur = files.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, files.rlim_max);
            ::setrlimit(RLIMIT_NOFILE, &files);
        }
    }
    // Installed before listening, so a signal during start-up ends the server cleanly too.
    gSignalled = &server;
    struct sigaction action {};
    action.sa_handler = stopOnSignal;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, nullptr);
    ::sigaction(SIGTERM, &action, nullptr);
    if (std::string error; !server.listen(host, port, error)) {
        bool inUse = errno == EADDRINUSE;
        fmt::print(stderr, "{}: error: {}\n", tool, error);
        if (inUse)
            fmt::print(stderr,
                       "  hint: another server holds port {}; pick another --port, or --port 0 for a free one\n", port);
        gSignalled = nullptr;
        return false;
    }
    bool v6 = host.find(':') != std::string::npos;
    listening(fmt::format("http://{}{}{}:{}", v6 ? "[" : "", host, v6 ? "]" : "", server.port()));
    server.run(handler);
    gSignalled = nullptr;
    return true;
}

}  // namespace remit::cli::http
