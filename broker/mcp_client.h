// An MCP client (docs/adapters.md "MCP servers as capabilities"): what `remitvm` uses to call the
// tools of a Model Context Protocol server as capabilities (broker/mcp_adapter.h) and what
// `remitc import mcp` uses to list them (cli/import_command.cpp). It starts a server over stdio
// (a child process speaking one JSON-RPC message per line, broker/child_process.h) or reaches one
// over streamable HTTP (broker/http_client.h), initializes it, lists its tools and calls them, one
// request at a time.
//
// Everything a server sends is hostile input: a message that is not JSON, nests too deep, is
// larger than the limit or answers another request is a failure naming the problem, never a crash
// or a hang — every wait has a deadline. Lone surrogate escapes become U+FFFD (as the server side,
// cli/mcp_command.cpp, reads them). A late answer to a request that timed out is skipped. Requests
// the server sends (ping) are answered, notifications are read and ignored (a changed tool list is
// fetched again before the next call). A request that times out is cancelled
// (notifications/cancelled) and the connection kept; one that meets a broken stream or a dead
// server ends the connection, which the next call starts afresh.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "broker/child_process.h"
#include "runtime/json_text.h"

namespace remit {

// The protocol versions this client speaks, newest first; it asks for the first.
inline constexpr const char* kMcpClientProtocolVersions[] = {"2025-06-18", "2025-03-26", "2024-11-05"};

// One tool as tools/list describes it.
struct McpTool {
    std::string name;
    std::string title;        // empty when the server gives none
    std::string description;  // empty when the server gives none
    Json inputSchema;         // a JSON Schema object
    Json outputSchema;        // null when the tool declares none
    Json annotations;         // an object (readOnlyHint, idempotentHint, …) or null
};

// What initialize told us about the server.
struct McpServerInfo {
    std::string name, version, title;
    std::string protocolVersion;
};

// How messages travel. Stdio is a child process; streamable HTTP, a URL. A transport is connected
// or not; `send` queues one message, `next` gives the next one the server sent.
class McpTransport {
public:
    using Clock = std::chrono::steady_clock;
    virtual ~McpTransport() = default;

    struct Event {
        enum class Kind : uint8_t {
            Message,    // `text` is one message
            Timeout,    // the deadline passed first
            Closed,     // the server ended the connection (a process exited or closed a pipe)
            Oversized,  // a message over the limit (not kept)
            Failed,     // the transport failed: `detail` says how
        } kind = Kind::Message;
        std::string text;
        std::string detail;
    };

    // Starts the process (stdio); false with `error` saying why.
    virtual bool open(std::string& error) = 0;
    virtual bool isOpen() const = 0;
    // Ends the connection and returns how the server ended, when that is known ("exit status 1").
    virtual std::string close(bool gently) = 0;
    // `request`: the message is a request, whose answer the caller waits for until `deadline`
    // (a notification or an answer to the server may be sent a little after it).
    virtual void send(std::string message, bool request, Clock::time_point deadline) = 0;
    virtual Event next(Clock::time_point deadline, std::size_t maxBytes) = 0;
    // "[CMD ARGS]" or the URL: which server, for messages.
    virtual std::string describe() const = 0;
    // The last line the server wrote to its stderr log, when there is one (for messages on
    // failures to start): printable ASCII, at most 200 bytes.
    virtual std::string lastStderrLine() const { return {}; }
    // The protocol version initialize agreed on (HTTP sends it with every later message).
    virtual void agreed(const std::string& protocolVersion) { (void)protocolVersion; }
    // Whether each request is an exchange of its own (HTTP), so a request answered wrongly spoils
    // only itself; over stdio it leaves the stream out of step, and the connection is ended.
    virtual bool isolatesRequests() const { return false; }
};

// A server started from a command line (splitCommand), without a shell.
std::unique_ptr<McpTransport> makeStdioTransport(std::vector<std::string> argv, ChildProcessOptions options);

// A server at an http:// or https:// URL, over streamable HTTP: each message is POSTed, and the
// answer comes back as one JSON message or as a stream of server-sent events (read to its end);
// the session the server assigns (Mcp-Session-Id) is sent back and ended (DELETE) on close, and a
// session the server forgot (HTTP 404) is a closed connection, which the next call initializes
// again. `bearerToken`, when not empty, goes in every request's Authorization header and never
// into a message. A server-to-client stream (GET) is not opened: requests are answered on their
// own POST.
std::unique_ptr<McpTransport> makeHttpTransport(std::string url, std::string bearerToken);

// The data of each complete `message` event in a text/event-stream body, in order (multi-line
// data joined by newlines; comments, other events and an unfinished last event left out).
std::vector<std::string> serverSentEvents(std::string_view body);

// Whether `url` can name a streamable HTTP server: http:// or https://, a host, and no user
// information (a credential belongs in an environment variable, never in a URL that is recorded).
// False with `error` saying why.
bool checkMcpUrl(const std::string& url, std::string& error);

struct McpClientOptions {
    // The largest message accepted from the server.
    std::size_t maxMessageBytes = std::size_t{64} << 20;
    // clientInfo sent with initialize.
    std::string clientName = "remit";
    std::string clientVersion = "0";
};

class McpClient {
public:
    using Clock = std::chrono::steady_clock;
    McpClient(std::unique_ptr<McpTransport> transport, McpClientOptions options);
    ~McpClient();
    McpClient(const McpClient&) = delete;
    McpClient& operator=(const McpClient&) = delete;

    // Starts the server when it is not running (or has exited), initializes it and lists its tools
    // (all pages), all before `deadline`. True when connected (at once when it already was and its
    // tool list is current); false with `error` saying what went wrong, the connection closed.
    bool connect(Clock::time_point deadline, std::string& error);
    bool connected() const { return initialized_; }
    // Ends the connection (a server process is stopped).
    void disconnect();

    const McpServerInfo& server() const { return server_; }
    const std::vector<McpTool>& tools() const { return tools_; }
    // Problems with individual tool entries that were skipped (no name, an inputSchema that is not
    // an object, a duplicate name), for `remitc import mcp` to report.
    const std::vector<std::string>& skippedTools() const { return skipped_; }
    std::string describe() const { return transport_->describe(); }

    // The outcome of tools/call.
    struct CallOutcome {
        enum class Kind : uint8_t {
            Result,   // `result` is the CallToolResult object (its isError may be set)
            Error,    // a JSON-RPC error answer: `message` says which
            Timeout,  // no answer by the deadline: the request was cancelled
            Failed,   // the connection broke (the server exited, sent something unreadable): `message`
        } kind = Kind::Failed;
        Json result;
        std::string message;
    };
    // Calls `tool` with `arguments` (an object) and `meta` (the request's `_meta`, or null). Must be
    // connected.
    CallOutcome callTool(const std::string& tool, const Json& arguments, const Json& meta, Clock::time_point deadline);

private:
    // One request's answer: its result or error, or why there is none.
    struct Answer {
        enum class Kind : uint8_t { Result, Error, Timeout, Broken } kind = Kind::Broken;
        Json value;           // Result: the result; Error: the error object
        std::string message;  // Broken: what happened
    };
    Answer request(const std::string& method, Json params, Clock::time_point deadline);
    void notify(const std::string& method, Json params, Clock::time_point deadline);
    void answerServerRequest(const Json& message, Clock::time_point deadline);
    bool listTools(Clock::time_point deadline, std::string& error);
    // `what`, after ending the connection (unless `keep`) with how the server ended and its last
    // stderr line.
    std::string brokenMessage(const std::string& what, bool keep = false);

    std::unique_ptr<McpTransport> transport_;
    McpClientOptions options_;
    bool initialized_ = false;
    bool toolsStale_ = false;
    int64_t nextId_ = 1;
    McpServerInfo server_;
    std::vector<McpTool> tools_;
    std::vector<std::string> skipped_;
};

}  // namespace remit
