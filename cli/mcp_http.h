// The streamable HTTP transport of `remitvm mcp --http` / `remit mcp --http` (docs/mcp.md, "HTTP
// transport"): MCP over HTTP POST at /mcp (spec 2025-06-18, and the batches of 2025-03-26; a POST
// whose tool call asks the user is answered with an event stream carrying the server's
// elicitation/create first), health checks, and the prototype's hosted mode in front of them — API
// keys from keys.json looked up by the SHA-256 of the token, monthly metering per key (or per
// client IP for anonymous use) in the prototype's usage.sqlite, 401 without a key, 429 over the
// limit. The JSON-RPC side is the same McpEndpoint the stdio transport uses (cli/mcp_command.cpp);
// the HTTP side is cli/http_server.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "session/mcp_tools.h"

namespace remit::cli {

// The JSON-RPC 2.0 side of the server, implemented in cli/mcp_command.cpp and shared by both
// transports, so a message means the same over stdio and HTTP.
class McpEndpoint {
public:
    virtual ~McpEndpoint() = default;
    // Parses the text of one message or batch. When it is not JSON (or nests too deeply to be
    // parsed safely) returns nullopt with `error` set to the -32700 reply.
    virtual std::optional<Json> parse(std::string_view text, Json& error) const = 0;
    // The reply to one message (an object; a batch is the transport's business), or null when
    // none is due (a notification, a client's response). `caller` is who sent it, for the tools'
    // per-caller quotas (mcp::Tools::call): the API key's id or `anon:<address>` over HTTP, empty
    // over stdio. `client`, when the transport can carry a request to the client while this
    // message is answered and the client declared it can be asked (mcp::ClientChannel), lets a
    // tool call ask the user; a client's response to such a request is handed to the call waiting
    // for it. Thread-safe; never throws.
    virtual Json reply(const Json& message, std::string_view caller, mcp::ClientChannel* client) = 0;
    // The client that sent `requestId` as `caller` is gone: its tool call, if running, is aborted
    // and gets no reply (as for notifications/cancelled). Thread-safe; never throws.
    virtual void abandon(const Json& requestId, std::string_view caller) = 0;
    // Whether the server speaks protocol `version` (the MCP-Protocol-Version header).
    virtual bool speaks(std::string_view version) const = 0;
};

struct McpHttpOptions {
    std::string host = "127.0.0.1";
    uint16_t port = 8000;      // 0 picks a free port; the start-up line names the one bound
    std::string keysPath;      // empty: no keys, every client is anonymous
    std::string usagePath;     // empty: nothing is metered or limited
    uint64_t freeMonthly = 0;  // requests a month per anonymous client IP; 0 = none with keys, unlimited without
};

// Serves `endpoint` over HTTP until SIGINT or SIGTERM. Prints `TOOL mcp: listening on
// http://HOST:PORT/mcp` on stderr once listening. Returns the exit code: 0 after a signal, 1 when
// it cannot listen, 2 when the keys or usage file cannot be used (the message names the file).
int serveMcpHttp(std::string_view tool, const McpHttpOptions& options, McpEndpoint& endpoint);

}  // namespace remit::cli
