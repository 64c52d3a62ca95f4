// A small HTTP/1.1 server for `remitvm mcp --http` (cli/mcp_http.h): a request parser that is
// pure (bytes in, request or status out, tested on hostile input in tests/unit/test_http.cpp) and
// a connection loop over POSIX sockets.
//
// Hostile input is expected, so everything is bounded: the request line and headers together
// (kMaxHeadBytes, else 431), the header count, the body (Content-Length only, at most
// Limits::maxBody, else 413; Transfer-Encoding is refused with 411), the time one request may take
// to arrive (Limits::headTimeoutMs for its head and for an idle connection, readTimeoutMs for the
// whole request, else 408 and the connection closes, so a client that trickles bytes cannot hold
// anything for long), the connections held open (Limits::maxOpenConnections, maxOpenPerClient from
// one address) and the requests answered at once (maxActiveRequests, maxActivePerClient).
//
// Threads go to requests, not to connections: one thread (run()'s) accepts every connection at
// once and watches all that are waiting — idle between requests, or with a request line and
// headers still arriving — and only a request whose head has arrived whole gets a thread of its
// own. So connections that send nothing, or one byte a second, cost a descriptor each and never
// a thread or the acceptor's time, and a client's new connection is never stuck behind them.
// Over the open-connection bounds a waiting connection is closed to make room (one that never
// completed a request first); a request finding every thread busy waits up to Limits::busyWaitMs
// for one, and only then is refused with 503 (docs/mcp.md, "Idle and slow connections"). A
// request whose framing cannot be trusted is answered and its connection closed.
//
// What the server answers is the Handler's business, in two steps: `screen` sees the request line
// and headers before the body is read (so a request refused by authentication or routing never
// makes the server buffer a body), `handle` the whole request — with one response, or with an
// EventStream of messages before it (Server-Sent Events, the MCP server asking its client).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remit::cli::http {

// Request line plus headers; a larger head is answered 431.
inline constexpr size_t kMaxHeadBytes = size_t(64) << 10;
inline constexpr size_t kMaxHeaders = 100;

struct Limits {
    size_t maxBody = size_t(16) << 20;
    uint64_t readTimeoutMs = 30'000;  // for one whole request, from the first wait to its last byte
    uint64_t headTimeoutMs = 10'000;  // for the request line and headers, and for an idle connection
    // Requests answered at once, a thread each (and a second one watching for the client's hang-up).
    size_t maxActiveRequests = 64;
    size_t maxActivePerClient = 32;  // of those, from one peer address
    // Connections held open, waiting or answered: a waiting one costs a descriptor and its unread
    // bytes (under kMaxHeadBytes), no thread. serveMcpHttp raises the descriptor limit to fit.
    size_t maxOpenConnections = 1024;
    size_t maxOpenPerClient = 256;  // of those, from one peer address
    uint64_t busyWaitMs = 2'000;    // how long a request whose head has arrived may wait for a thread
};

struct Request {
    std::string method;                                        // as sent: methods are case-sensitive
    std::string target;                                        // as sent
    std::string path;                                          // the target up to '?'
    int minorVersion = 1;                                      // HTTP/1.<minorVersion>
    std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, values trimmed
    std::optional<size_t> contentLength;
    bool keepAlive = true;
    bool expectContinue = false;
    std::string body;
    std::string peer;  // the client's address, without port

    // The first header named `name` (lower case), or nullopt.
    std::optional<std::string_view> header(std::string_view name) const;
};

struct Response {
    int status = 200;
    std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Length and Connection
    std::string body;
    bool close = false;  // close the connection after this response

    // A response with a body of `contentType`.
    static Response text(int status, std::string body, std::string contentType = "text/plain; charset=utf-8");
    // {"error": message}, as application/json.
    static Response error(int status, std::string_view message);
};

// ASCII lower case, for header names and the case-insensitive parts of values.
std::string lowerAscii(std::string_view s);
// `s` without leading and trailing spaces and tabs (a field value's optional whitespace).
std::string_view trimOws(std::string_view s);

// The token a request carries: `Authorization: Bearer TOKEN` (`bearer` in any case), else the
// `X-API-Key` header; nullopt when neither is there.
std::optional<std::string> bearerToken(const Request& request);

// The fields of an application/x-www-form-urlencoded body (or query string), in order: `+` is a
// space and %XX a byte; a malformed escape is kept as written. Bytes that are not UTF-8 stay as
// they are (the caller decides what to accept).
std::vector<std::pair<std::string, std::string>> formFields(std::string_view body);
// The first field named `name` of formFields(body), or nullopt.
std::optional<std::string> formField(std::string_view body, std::string_view name);
// The value of the cookie `name` in the request's Cookie headers, or nullopt.
std::optional<std::string> cookie(const Request& request, std::string_view name);

// The standard reason phrase of `status` ("OK", "Not Found", ...), or "Unknown".
std::string_view reasonPhrase(int status);
// The bytes of a response: status line, headers, Content-Length, Connection, body (none for HEAD).
std::string serializeResponse(const Response& response, bool keepAlive, bool headRequest);

// The end of the request head in `buffer` (the index just past the blank line ending it), or
// nullopt when it has not arrived yet. `from` is where the previous call stopped looking (0 at
// first), so feeding a head byte by byte stays linear.
std::optional<size_t> findHeadEnd(std::string_view buffer, size_t& from);

// Parses a request head (`head` ends with its blank line; CRLF or bare LF line ends). On success
// fills `out` (everything but body and peer) and returns 0; otherwise returns the status to answer
// (400, 411, 413, 431, 505) with `problem` saying why.
int parseRequestHead(std::string_view head, const Limits& limits, Request& out, std::string& problem);

// Whether the request's Accept header names `mediaType` (lower case, e.g. "text/event-stream").
bool accepts(const Request& request, std::string_view mediaType);

// The answer to a request sent as Server-Sent Events — 200, `text/event-stream`, in chunked
// transfer coding — for a handler with messages to send before its answer (the MCP server asking
// its client something while a tool call runs). handle() sends events with send(); the first one
// sends the head. The Response handle() then returns is not sent as such: its body, when not
// empty, becomes the last event, and the stream ends; the connection stays open for the next
// request as after any response.
class EventStream {
public:
    EventStream(int fd, bool available) : fd_(fd), available_(available) {}
    EventStream(const EventStream&) = delete;
    EventStream& operator=(const EventStream&) = delete;

    // Whether the request can be answered this way: HTTP/1.1 (chunked coding), not HEAD, and an
    // Accept header naming text/event-stream.
    bool available() const { return available_; }
    bool started() const { return started_; }
    // Sends one `message` event carrying `data` (each line of it a `data:` line); the first call
    // sends the head, with `headers` besides Content-Type, Cache-Control and Transfer-Encoding.
    // False when the stream is not available or the client cannot be written to any more.
    bool send(std::string_view data, const std::vector<std::pair<std::string, std::string>>& headers = {});
    // Ends a started stream: `last`, when not empty, as a final event, then the last chunk. False
    // when the client cannot be written to. For the server, after handle().
    bool finish(std::string_view last);

private:
    int fd_;
    bool available_;
    bool started_ = false;
    bool broken_ = false;
    bool writeChunk(std::string_view bytes);
};

class Handler {
public:
    virtual ~Handler() = default;
    // Sees a request before its body is read: a response ends it there, nullopt lets it through.
    virtual std::optional<Response> screen(const Request& head) = 0;
    // Answers a whole request, with one response or, through `stream`, with events before it. An
    // exception becomes a fixed 500 (or, once the stream has started, ends it).
    virtual Response handle(const Request& request, EventStream& stream) = 0;
    // Called at most once, from another thread, while handle(request) runs and the client has
    // closed the connection (or shut down its sending side): the answer will not be read, so work
    // done only for it can stop. The default does nothing.
    virtual void clientGone(const Request& request) { (void)request; }
};

class Server {
public:
    explicit Server(Limits limits = {});
    const Limits& limits() const { return limits_; }
    ~Server();  // stops and waits for every connection
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Binds and listens on host:port (port 0 picks a free one). On failure returns false with
    // `error` saying what failed (no exception text) and errno the socket error (0 when `host`
    // does not resolve).
    bool listen(const std::string& host, uint16_t port, std::string& error);
    // The port actually bound.
    uint16_t port() const { return port_; }

    // Accepts connections and serves them with `handler` until stop(); then closes the waiting
    // connections, lets every request being answered finish, and returns. SIGINT and SIGTERM are
    // blocked on the request threads, so their handlers run on the thread that called run().
    void run(Handler& handler);
    // Makes run() return. Async-signal-safe: it only writes to a pipe.
    void stop() noexcept;

private:
    struct Connection;

    Limits limits_;
    int listenFd_ = -1;
    int wakeFds_[2] = {-1, -1};  // stop() writes to [1]; run() polls [0]
    int doneFd_ = -1;            // an eventfd: a request thread has finished (see finished_)
    int yieldFd_ = -1;           // an eventfd, readable while requests wait for a thread
    std::atomic<bool> yielding_{false};  // the same, for a quick look
    uint16_t port_ = 0;

    // The rest is run()'s thread's own, except finished_.
    int epollFd_ = -1;
    std::list<std::unique_ptr<Connection>> connections_;  // every open connection
    std::list<Connection*> queue_;                        // heads complete, waiting for a thread, oldest first
    size_t active_ = 0;                                   // requests being answered
    std::map<std::string, size_t> openByPeer_, activeByPeer_;
    std::mutex finishedMutex_;
    std::vector<Connection*> finished_;  // guarded: connections whose request thread is done

    void acceptNewcomers();
    // Whether a new connection from `peer` may be held, closing a waiting one if a bound is reached.
    bool makeRoom(const std::string& peer);
    // Reads what a waiting connection has sent; queues it once its head is whole.
    void readWaiting(Connection& c);
    void queue(Connection& c);
    void dispatch(Handler& handler);
    void collectFinished();
    // 503 for requests that waited too long for a thread; with `sweepWaiting`, also 408 for heads
    // that did not arrive in time, and idle connections closed.
    void expire(bool sweepWaiting);
    void close(Connection& c);
    // On a request's thread: answers the request whose head `c` holds, and the next ones that
    // arrive while it lingers; true to keep the connection.
    bool serveConnection(Connection& c, Handler& handler);
    bool serveRequest(Connection& c, Handler& handler);
    // Waits a moment for the next request's head on a kept connection: true when it has arrived.
    bool awaitNextHead(Connection& c);
};

// Listens on host:port and serves `handler` until SIGINT or SIGTERM (then returns true, once every
// request being answered has finished), calling `listening(base)` once it listens, with the URL of
// the server's root without its slash (`http://127.0.0.1:8001`, an IPv6 host in brackets, the port
// actually bound). The process's soft descriptor limit is raised to fit the server's connections
// (never above the hard limit). False when it cannot listen, having printed `TOOL: error: …` on
// stderr (for a port in use, with a line `  hint: …` saying what to do): the commands that serve
// (`mcp --http`, `inbox`) then exit 1.
bool serveUntilSignalled(std::string_view tool, Server& server, const std::string& host, uint16_t port,
                         Handler& handler, const std::function<void(const std::string&)>& listening);

}  // namespace remit::cli::http
