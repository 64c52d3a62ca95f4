// JSON-RPC 2.0 as the MCP server (cli/mcp_command.cpp) and the language server
// (session/lsp_server.cpp) speak it: the standard error codes, the two reply envelopes, and the
// safe parse of one message's text (runtime/json_text.h's bounded nesting, lone-surrogate repair
// and id recovery).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/json_text.h"

namespace remit::jsonrpc {

constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kInternalError = -32603;

// {"jsonrpc": "2.0", "id": id, "error": {"code", "message"[, "data"]}} (no data when it is null).
Json errorReply(const Json& id, int code, std::string message, Json data = nullptr);
// {"jsonrpc": "2.0", "id": id, "result": result}.
Json resultReply(const Json& id, Json result);
// One message: nesting over `maxDepth` and text that is not JSON are refused with the -32700
// reply (naming the message's id when recoverMessageId can read it); lone surrogate escapes become
// U+FFFD (replaceLoneSurrogates) and a raw NUL is never JSON, though the parser would stop at it.
std::optional<Json> parseMessage(std::string_view text, size_t maxDepth, Json& errorReply);

}  // namespace remit::jsonrpc
