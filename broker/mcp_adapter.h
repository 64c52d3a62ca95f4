// MCP servers as capabilities (docs/adapters.md "MCP servers as capabilities"): `--adapter
// mcp:CMD` (a server over stdio) or `--adapter mcp+https://URL` (streamable HTTP) makes the tools of
// a Model Context Protocol server perform a run's capability calls, through the MCP client of
// broker/mcp_client.h.
//
// Which calls it performs (serves): capability `NS.TOOL` goes to the server's tool `TOOL` — the
// same name, or the name `remitc import mcp` wrote for it (runtime/imported_names.h: `get-sum`
// becomes `get_sum`) — unless the policy's [mcp.tools] maps the capability to a tool by name. An
// adapter given a namespace (`mcp.NS:CMD`) serves only capabilities `NS.…`. The server is started
// and its tools listed when a call first needs them, so several servers can serve one run
// (broker/routing_adapter.h), each the capabilities its tools match.
//
// A call: the arguments go as the tool's input (a parameter written `limit_` for a keyword goes as
// `limit`), the idempotency key as `_meta["remit/idempotency_key"]`; the answer's
// `structuredContent` (or its text content parsed as JSON) is shaped into the declared return
// type — properties the type does not declare are dropped, the broker validates the rest (R0501
// when it does not fit) — a `Str` result is the text content, a `Unit` one null. `isError`, a
// JSON-RPC error, a timeout (Timeout, R0503), a server that does not start, exits, or sends
// something malformed or oversized are operational failures naming the server, so `retry` and
// `else` apply. A stdio server's stderr goes to a log file, never to the program.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "broker/adapter.h"
#include "broker/mcp_client.h"

namespace remit {

struct McpAdapterOptions {
    // Serve only capabilities in this namespace (`mcp.NS:CMD`); empty serves any whose tool it lists.
    std::string scope;
    // The policy's [mcp.tools]: capability → tool name.
    std::map<std::string, std::string, std::less<>> toolMap;
    // How long the server may take to start, answer initialize and list its tools.
    uint64_t startupTimeoutMs = 30'000;
    // Used when a request's timeoutMs is 0 (the broker normally fills it in).
    uint64_t defaultTimeoutMs = 300'000;
    McpClientOptions client;
};

// An adapter over a transport (stdio or streamable HTTP, broker/mcp_client.h). kind() is "mcp".
std::unique_ptr<Adapter> makeMcpAdapter(std::unique_ptr<McpTransport> transport, McpAdapterOptions options);

// `--adapter mcp:CMD`: CMD split without a shell (splitCommand) and checked to be on PATH; the
// server starts in `process.workingDir` with its stderr appended to `process.stderrPath`. Null with
// `error` when the command does not split or its program is not found.
std::unique_ptr<Adapter> makeMcpStdioAdapter(const std::string& command, const ChildProcessOptions& process,
                                             McpAdapterOptions options, std::string& error);

// `--adapter mcp+https://…`: a server over streamable HTTP. `tokenEnv`, when not empty, names the
// environment variable that holds its bearer token, read now. Null with `error` when the URL is not
// one (checkMcpUrl), the variable is not set, or libcurl cannot be loaded.
std::unique_ptr<Adapter> makeMcpHttpAdapter(const std::string& url, const std::string& tokenEnv,
                                            McpAdapterOptions options, std::string& error);

}  // namespace remit
