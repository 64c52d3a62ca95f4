// `remitvm mcp` and `remit mcp`: a Model Context Protocol server (docs/mcp.md). This file holds
// the JSON-RPC 2.0 side — one function, Server::reply, turns a parsed message into its reply for
// both transports — with the protocol's own methods (initialize, ping, tools/list, resources/*),
// and the stdio transport: one message per line on stdin, one reply per line on stdout. The HTTP
// transport (`--http`) is cli/mcp_http.{h,cpp}; what a tool does is session/mcp_tools.{h,cpp}'s.
//
// Over stdio one worker answers the requests in order while the reading thread reads on, handling
// at once what cannot wait behind them: cancellations, and the client's responses to the questions
// a tool call asks its user (MCP elicitation, --approvals operator). A line that is not JSON is
// a -32700 error, a message that is not a request -32600, an unknown method -32601, bad parameters
// -32602; notifications (no `id`) are never answered. Nothing a message can do ends the server:
// an internal failure is the fixed host_error reply, without exception text, paths or addresses.
// End of input ends the server, refusing any run still paused for an approval.
#include <fmt/format.h>

#include <cstdlib>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/mcp_http.h"
#include "runtime/json_rpc.h"
#include "runtime/source.h"
#include "session/mcp_tools.h"

#ifndef REMIT_VERSION
#define REMIT_VERSION "0.1.0"
#endif

namespace remit::cli {

namespace {

using remit::Json;

using mcp::kMaxMessageBytes;  // the same over stdio and HTTP
constexpr size_t kMaxMessageDepth = 256;

// The protocol versions this server speaks, newest first; a client asking for another gets the newest.
constexpr const char* kProtocolVersions[] = {"2025-06-18", "2025-03-26", "2024-11-05"};

constexpr const char* kInstructions =
    "Remit is a small, checked language for programs that call a host's tools and models. Start with "
    "remit_guide. Write the program against the host interface (host.rmti) you were given, then call "
    "remit_check and fix every error before you finish. When you edit an existing program, call "
    "remit_authority_diff with the old and the new version and do not widen authority unless the user asked "
    "for it. remit_examples returns complete working programs; remit_run_fixtures and remit_run execute a "
    "program offline on fixtures.";

using jsonrpc::errorReply;
using jsonrpc::kInternalError;
using jsonrpc::kInvalidParams;
using jsonrpc::kInvalidRequest;
using jsonrpc::kMethodNotFound;
using jsonrpc::resultReply;
constexpr int kResourceNotFound = -32002;

struct Resource {
    const char* uri;
    const char* name;
    const char* title;
    const char* description;
    const char* path;  // the embedded file
};

constexpr Resource kResources[] = {
    {"remit://guide", "guide", "Remit guide for agents",
     "The workflow, a skeleton program, diagnostics and their fixes, a syntax cheat sheet, the fixture format and "
     "complete examples.",
     "docs/ai-guide.md"},
    {"remit://spec", "spec", "Remit language specification", "The full language specification (v0.1).",
     "docs/spec/remit-language-v0.1.md"},
};

// Writes one message per line, whole (the reader and the worker of the stdio transport both
// write). Never throws: a reply that cannot be printed becomes a fixed line.
std::mutex stdoutMutex;
void writeMessage(const Json& message) noexcept {
    std::string line;
    try {
        line = message.dump(-1, ' ', false, Json::error_handler_t::replace);
    } catch (...) {
        line = fmt::format(R"({{"jsonrpc":"2.0","id":null,"error":{{"code":{},"message":"host_error: {}"}}}})",
                           kInternalError, mcp::kHostErrorMessage);
    }
    line += '\n';
    std::lock_guard<std::mutex> lock(stdoutMutex);
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fflush(stdout);
}

class Server final : public McpEndpoint {
public:
    explicit Server(mcp::ToolsOptions options = {}) : tools_(std::move(options)) {}
    std::optional<Json> parse(std::string_view text, Json& error) const override;
    Json reply(const Json& message, std::string_view caller, mcp::ClientChannel* client) override;
    void abandon(const Json& requestId, std::string_view caller) override { tools_.cancel(caller, requestId); }
    bool speaks(std::string_view version) const override;

    // The reply to one parsed stdio message, or null for a notification or a client's response.
    // Over stdio the client is asked (elicitation) on stdout, once its initialize said it can be.
    Json handleStdio(const Json& message);
    // The server is ending: calls waiting for the user stop waiting (mcp::Tools::interruptWaits).
    void interrupt() { tools_.interruptWaits(); }

private:
    mcp::Tools tools_;

    // The stdio client, asked on stdout: its response comes back on stdin, where the reading
    // thread hands it to reply() at once (the worker is the one waiting for it).
    struct StdoutChannel final : mcp::ClientChannel {
        bool send(const Json& message) override;
    } stdout_;
    std::atomic<bool> stdioElicits_{false};  // the last initialize declared elicitation

    Json answer(const Json& message, std::string_view caller, mcp::ClientChannel* client);
    Json dispatch(const Json& id, const std::string& method, const Json& params, std::string_view caller,
                  mcp::ClientChannel* client);
    Json initialize(const Json& params);
    Json toolsCall(const Json& id, const Json& params, std::string_view caller, mcp::ClientChannel* client);
    Json resourcesRead(const Json& id, const Json& params);
};

std::optional<Json> Server::parse(std::string_view text, Json& error) const {
    return jsonrpc::parseMessage(text, kMaxMessageDepth, error);
}

bool Server::speaks(std::string_view version) const {
    for (const char* v : kProtocolVersions)
        if (version == v) return true;
    return false;
}

bool Server::StdoutChannel::send(const Json& message) {
    writeMessage(message);
    return true;  // a client that has gone is noticed at the end of stdin
}

Json Server::handleStdio(const Json& message) {
    // Batches were dropped from MCP in 2025-06-18; over stdio they were never needed.
    if (message.is_array())
        return errorReply(nullptr, kInvalidRequest,
                          "Invalid Request: batches are not supported; send one message per line");
    Json out = reply(message, {}, stdioElicits_ ? &stdout_ : nullptr);  // one client over stdio
    if (message.is_object() && message.value("method", Json()) == "initialize" && out.contains("result"))
        stdioElicits_ = mcp::clientCanElicit(message.value("params", Json()),
                                             out["result"].value("protocolVersion", std::string()));
    return out;
}

Json Server::reply(const Json& message, std::string_view caller, mcp::ClientChannel* client) {
    try {
        return answer(message, caller, client);
    } catch (...) {
        return errorReply(nullptr, kInternalError, fmt::format("host_error: {}", mcp::kHostErrorMessage),
                          Json{{"code", "host_error"}});
    }
}

Json Server::answer(const Json& message, std::string_view caller, mcp::ClientChannel* client) {
    if (!message.is_object())
        return errorReply(nullptr, kInvalidRequest, "Invalid Request: a message must be a JSON object");
    bool hasId = message.contains("id");
    Json id = hasId ? message["id"] : Json(nullptr);
    if (hasId && !id.is_string() && !id.is_number_integer() && !id.is_null())
        return errorReply(nullptr, kInvalidRequest, "Invalid Request: id must be a string or an integer");
    if (id.is_string() && id.get_ref<const std::string&>().size() > 256)
        return errorReply(nullptr, kInvalidRequest, "Invalid Request: id is longer than 256 bytes");
    if (!message.contains("method")) {
        // A client's response: to a question a tool call asked (elicitation/create), or to
        // nothing this server sent. Either way no reply is due.
        if (message.contains("result") || message.contains("error")) {
            tools_.deliver(caller, message);
            return nullptr;
        }
        return errorReply(id, kInvalidRequest, "Invalid Request: no method");
    }
    // MCP forbids a null id in a request: it has a string or an integer, a notification none at all.
    if (hasId && id.is_null())
        return errorReply(nullptr, kInvalidRequest,
                          "Invalid Request: id must not be null; a request needs a string or an integer id, a "
                          "notification has no id");
    if (!message["method"].is_string())
        return errorReply(id, kInvalidRequest, "Invalid Request: method must be a string");
    if (message.value("jsonrpc", Json(nullptr)) != "2.0")
        return hasId ? errorReply(id, kInvalidRequest, "Invalid Request: jsonrpc must be \"2.0\"") : Json(nullptr);
    const std::string& method = message["method"].get_ref<const std::string&>();
    Json params = message.contains("params") ? message["params"] : Json::object();
    if (params.is_null()) params = Json::object();
    if (!hasId) {
        // Notifications need no reply. A cancellation aborts the tool call it names, if it is
        // still running (on another connection, or the stdio worker).
        if (method == "notifications/cancelled" && params.is_object() && params.contains("requestId"))
            tools_.cancel(caller, params["requestId"]);
        return nullptr;
    }
    if (!params.is_object()) return errorReply(id, kInvalidParams, "Invalid params: params must be an object");
    try {
        return dispatch(id, method, params, caller, client);
    } catch (...) {
        return errorReply(id, kInternalError, fmt::format("host_error: {}", mcp::kHostErrorMessage),
                          Json{{"code", "host_error"}});
    }
}

Json Server::dispatch(const Json& id, const std::string& method, const Json& params, std::string_view caller,
                      mcp::ClientChannel* client) {
    if (method == "initialize") return resultReply(id, initialize(params));
    if (method == "ping") return resultReply(id, Json::object());
    if (method == "tools/list") {
        Json list = Json::array();
        for (const mcp::ToolSpec& spec : mcp::toolSpecs()) list.push_back(mcp::toolListEntry(spec));
        return resultReply(id, Json{{"tools", std::move(list)}});
    }
    if (method == "tools/call") return toolsCall(id, params, caller, client);
    if (method == "resources/list") {
        Json list = Json::array();
        for (const Resource& r : kResources)
            list.push_back({{"uri", r.uri},
                            {"name", r.name},
                            {"title", r.title},
                            {"description", r.description},
                            {"mimeType", "text/markdown"}});
        return resultReply(id, Json{{"resources", std::move(list)}});
    }
    if (method == "resources/templates/list") return resultReply(id, Json{{"resourceTemplates", Json::array()}});
    if (method == "resources/read") return resourcesRead(id, params);
    return errorReply(id, kMethodNotFound, fmt::format("Method not found: {}", firstCodePoints(method, 100)));
}

Json Server::initialize(const Json& params) {
    std::string version = kProtocolVersions[0];
    if (auto it = params.find("protocolVersion"); it != params.end() && it->is_string())
        for (const char* v : kProtocolVersions)
            if (it->get_ref<const std::string&>() == v) version = v;
    Json result;
    result["protocolVersion"] = version;
    result["capabilities"] = {{"tools", {{"listChanged", false}}},
                              {"resources", {{"subscribe", false}, {"listChanged", false}}}};
    result["serverInfo"] = {{"name", "remit"}, {"title", "Remit language tools"}, {"version", REMIT_VERSION}};
    result["instructions"] = kInstructions;
    return result;
}

Json Server::toolsCall(const Json& id, const Json& params, std::string_view caller, mcp::ClientChannel* client) {
    auto name = params.find("name");
    if (name == params.end() || !name->is_string())
        return errorReply(id, kInvalidParams, "Invalid params: tools/call needs the tool's name as a string");
    Json arguments = params.contains("arguments") ? params["arguments"] : Json(nullptr);
    mcp::BadParams bad;
    std::optional<mcp::ToolOutcome> outcome =
        tools_.call(name->get_ref<const std::string&>(), arguments, bad, caller, id, client);
    if (!outcome) return errorReply(id, kInvalidParams, "Invalid params: " + bad.message);
    if (outcome->cancelled) return nullptr;  // the client withdrew the request: no response (MCP)
    Json result;
    result["content"] = Json::array({Json{{"type", "text"}, {"text", std::move(outcome->text)}}});
    result["isError"] = outcome->isError;
    return resultReply(id, std::move(result));
}

Json Server::resourcesRead(const Json& id, const Json& params) {
    auto uri = params.find("uri");
    if (uri == params.end() || !uri->is_string())
        return errorReply(id, kInvalidParams, "Invalid params: resources/read needs the resource's uri as a string");
    const std::string& wanted = uri->get_ref<const std::string&>();
    for (const Resource& r : kResources) {
        if (wanted != r.uri) continue;
        std::optional<std::string_view> text = mcp::embeddedText(r.path);
        if (!text) break;
        return resultReply(
            id,
            Json{{"contents",
                  Json::array({Json{{"uri", r.uri}, {"mimeType", "text/markdown"}, {"text", std::string(*text)}}})}});
    }
    return errorReply(id, kResourceNotFound, "Resource not found",
                      Json{{"uri", std::string(firstCodePoints(wanted, 256))}});
}

// The options of `mcp --http`; nullopt, with a message printed, when one is not usable.
std::optional<McpHttpOptions> httpOptions(std::string_view tool, const Args& args) {
    McpHttpOptions options;
    if (const std::string* host = args.value("--host")) options.host = *host;
    if (options.host.empty()) {
        fmt::print(stderr, "{}: error: --host needs an address, e.g. 127.0.0.1 or 0.0.0.0\n", tool);
        return std::nullopt;
    }
    if (const std::string* port = args.value("--port")) {
        std::optional<uint64_t> n = parseCount(*port, 65535);
        if (!n) {
            fmt::print(stderr, "{}: error: --port must be a number from 0 to 65535 (0 picks a free port), not '{}'\n",
                       tool, *port);
            return std::nullopt;
        }
        options.port = static_cast<uint16_t>(*n);
    }
    if (const std::string* free = args.value("--free-monthly")) {
        std::optional<uint64_t> n = parseCount(*free, uint64_t(1) << 62);
        if (!n) {
            fmt::print(stderr, "{}: error: --free-monthly must be a whole number of requests, not '{}'\n", tool, *free);
            return std::nullopt;
        }
        options.freeMonthly = *n;
    }
    if (const std::string* keys = args.value("--keys")) options.keysPath = *keys;
    if (const std::string* usage = args.value("--usage")) options.usagePath = *usage;
    return options;
}

}  // namespace

int mcpCommand(std::string_view tool, Args& args) {
    // Who approves the calls paused runs wait for (docs/mcp.md, "Runs and approvals").
    mcp::ToolsOptions toolsOptions;
    if (const std::string* approvals = args.value("--approvals"))  // client|operator, checked by the parser
        toolsOptions.operatorApprovals = *approvals == "operator";
    // Operator approvals stay in a state directory (docs/fleet.md, "The MCP server"): the server's
    // paused runs live in its memory, their traces in its scratch files, so a fleet's store could
    // hold only half of them — no worker could continue them, and `approvals show --store` could
    // not read their provenance. Refused rather than half-served.
    if (args.value("--store")) {
        fmt::print(stderr,
                   "{}: error: the MCP server cannot keep its approvals in a PostgreSQL store: its paused runs live "
                   "in this server's memory and continue only through its remit_resume, so no worker of a fleet "
                   "could continue them\n  hint: use --approvals operator --state-dir D, and decide with `{} "
                   "approvals list|show|approve|deny --state-dir D` on this machine (docs/fleet.md)\n",
                   tool, tool);
        return kUsage;
    }
    if (const char* env = std::getenv("REMIT_STORE");
        env && *env && toolsOptions.operatorApprovals && !args.value("--state-dir")) {
        // The operator's `approvals` commands would look in $REMIT_STORE while the server waits in .remit.
        fmt::print(stderr,
                   "{}: error: $REMIT_STORE names a PostgreSQL store, but the MCP server keeps its operator approvals "
                   "in a state directory (its paused runs live in this server's memory)\n  hint: pass --state-dir D "
                   "and decide with `{} approvals list|show|approve|deny --state-dir D` (docs/fleet.md)\n",
                   tool, tool);
        return kUsage;
    }
    if (const std::string* dir = args.value("--state-dir")) {
        if (!toolsOptions.operatorApprovals) {
            fmt::print(stderr, "{}: error: --state-dir is where the operator approves calls; it needs --approvals "
                               "operator\n",
                       tool);
            return kUsage;
        }
        toolsOptions.stateDir = *dir;
    }
    if (const std::string* seconds = args.value("--elicitation-timeout")) {
        std::optional<uint64_t> n = parseCount(*seconds, mcp::kMaxElicitationTimeout.count());
        if (!toolsOptions.operatorApprovals) {
            fmt::print(stderr, "{}: error: --elicitation-timeout is how long the user is asked to approve a call; it "
                               "needs --approvals operator\n",
                       tool);
            return kUsage;
        }
        if (!n || *n == 0) {
            fmt::print(stderr, "{}: error: --elicitation-timeout must be a number of seconds from 1 to {}, not '{}'\n",
                       tool, mcp::kMaxElicitationTimeout.count(), firstCodePoints(*seconds, 40));
            return kUsage;
        }
        toolsOptions.elicitationTimeout = std::chrono::seconds(*n);
    }
    if (!args.positional.empty()) {
        fmt::print(stderr, "{}: error: mcp takes no arguments; it reads MCP messages on stdin (docs/mcp.md)\n", tool);
        return kUsage;
    }
    std::signal(SIGPIPE, SIG_IGN);  // a client that goes away must not kill the server mid-write
    if (args.has("--http")) {
        std::optional<McpHttpOptions> options = httpOptions(tool, args);
        if (!options) return kUsage;
        Server server(toolsOptions);
        return serveMcpHttp(tool, *options, server);
    }
    for (const char* flag : {"--host", "--port", "--keys", "--usage", "--free-monthly"}) {
        if (args.value(flag)) {
            fmt::print(stderr, "{}: error: {} applies to the HTTP transport only; add --http (docs/mcp.md)\n", tool,
                       flag);
            return kUsage;
        }
    }
    // Over stdio one worker answers the messages in order while this thread reads on, so that a
    // notifications/cancelled reaches a tool call that is still running. A cancellation is handled
    // here, at once: a request it names that is still queued is dropped unanswered, one that is
    // running is aborted (mcp::Tools::cancel). Everything else is queued for the worker.
    Server server(toolsOptions);
    struct Item {
        enum class Kind { Message, Reply, End } kind;
        Json json;  // the message to answer, or the reply to write (a parse error, an overlong line)
    };
    std::mutex queueMutex;
    std::condition_variable queueReady;
    std::deque<Item> queue;
    std::thread worker([&] {
        while (true) {
            Item item;
            {
                std::unique_lock<std::mutex> lock(queueMutex);
                queueReady.wait(lock, [&] { return !queue.empty(); });
                item = std::move(queue.front());
                queue.pop_front();
            }
            if (item.kind == Item::Kind::End) return;
            Json reply = std::move(item.json);
            if (item.kind == Item::Kind::Message) {
                try {
                    reply = server.handleStdio(reply);
                } catch (...) {
                    reply = errorReply(nullptr, kInternalError, fmt::format("host_error: {}", mcp::kHostErrorMessage),
                                       Json{{"code", "host_error"}});
                }
            }
            if (!reply.is_null()) writeMessage(reply);
        }
    });
    auto enqueue = [&](Item::Kind kind, Json json = nullptr) {
        std::lock_guard<std::mutex> lock(queueMutex);
        queue.push_back(Item{kind, std::move(json)});
        queueReady.notify_one();
    };
    auto isCancellation = [](const Json& m) {
        return m.is_object() && !m.contains("id") && m.value("method", Json()) == "notifications/cancelled" &&
               m.contains("params") && m["params"].is_object() && m["params"].contains("requestId");
    };
    auto isResponse = [](const Json& m) {
        return m.is_object() && !m.contains("method") && (m.contains("result") || m.contains("error"));
    };
    auto handle = [&](std::string_view line) {
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.find_first_not_of(" \t") == std::string_view::npos) return;  // blank lines are ignored
        Json error;
        std::optional<Json> message = server.parse(line, error);
        if (!message) return enqueue(Item::Kind::Reply, std::move(error));
        if (isResponse(*message)) {
            // The answer to a question a tool call on the worker waits for: handed over at once.
            server.reply(*message, {}, nullptr);
            return;
        }
        if (isCancellation(*message)) {
            const Json& requestId = (*message)["params"]["requestId"];
            {
                std::lock_guard<std::mutex> lock(queueMutex);
                std::erase_if(queue, [&](const Item& item) {
                    return item.kind == Item::Kind::Message && item.json.is_object() && item.json.contains("method") &&
                           item.json.value("id", Json()) == requestId;
                });
            }
            server.reply(*message, {}, nullptr);
            return;
        }
        enqueue(Item::Kind::Message, std::move(*message));
    };
    readLines(kMaxMessageBytes, handle, [&] {
        enqueue(Item::Kind::Reply,
                errorReply(nullptr, kInvalidRequest,
                           fmt::format("Invalid Request: the message is longer than {} bytes", kMaxMessageBytes)));
    });
    server.interrupt();  // a call waiting for the user's answer will not get it now
    enqueue(Item::Kind::End);
    worker.join();
    return kOk;
}

}  // namespace remit::cli
