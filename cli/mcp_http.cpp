// The HTTP transport of the MCP server (cli/mcp_http.h, docs/mcp.md "HTTP transport"). A request
// passes, in order: the health routes (never gated, never metered), the Origin check (DNS
// rebinding protection, which the MCP spec requires of local servers), the prototype's gate (key,
// then metering), then the /mcp routes. Everything up to the routes runs before the body is read,
// so a client without a key cannot make the server buffer a body.
//
// The gate is the prototype's middleware, to the letter, because hosted deployments and their
// usage.sqlite files carry over: the client is the first X-Forwarded-For entry or the peer; the
// key id `anon:<client>` and the limit --free-monthly unless a valid key names another; with keys
// configured, no valid key and no free tier is 401; with a usage store, every POST counts for
// (key id, UTC month) before it is answered, and a count over a non-zero limit is 429 — so the
// rejected request is counted too.
#include "cli/mcp_http.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cli/commands.h"
#include "cli/http_server.h"
#include "runtime/files.h"
#include "runtime/hash.h"
#include "session/api_keys.h"

namespace remit::cli {

namespace {

using http::Request;
using http::Response;

// Sessions remembered at once; past this the oldest is forgotten (its client gets 404 and, as the
// spec says, initializes again).
constexpr size_t kMaxSessions = 4096;
// An X-Forwarded-For entry longer than any address is cut: it becomes a key id and a usage row.
constexpr size_t kMaxClientBytes = 64;

// The prototype's usage.sqlite: one row per (key id, month), counted by an upsert. One connection
// serialised by a mutex; the busy timeout lets another process read the file meanwhile.
//
// Durability (docs/mcp.md, "Usage"): the file is put in WAL mode with synchronous = NORMAL, so a
// count is one append to the write-ahead log and the disk is synced only when the log is
// checkpointed (every 1000 pages), not about four times per request. A crash of the server loses
// no count (each is committed before the request is answered); a power failure or an operating
// system crash may lose the counts since the last checkpoint, which can only let a client
// a little over its limit, never refuse one wrongly. Where WAL is not available (some network
// file systems) the file keeps its journal mode, fully synced.
class UsageStore {
public:
    ~UsageStore() {
        if (upsert_) sqlite3_finalize(upsert_);
        if (db_) sqlite3_close(db_);
    }

    bool open(const std::string& path, std::string& problem) {
        int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
        if (rc == SQLITE_OK) rc = sqlite3_busy_timeout(db_, 5000);
        // synchronous = normal is safe in WAL mode only: the pragma answers with the mode it set.
        std::string mode;
        auto readMode = [](void* out, int columns, char** values, char**) {
            if (columns > 0 && values[0]) *static_cast<std::string*>(out) = values[0];
            return 0;
        };
        if (rc == SQLITE_OK && sqlite3_exec(db_, "pragma journal_mode = wal", readMode, &mode, nullptr) == SQLITE_OK &&
            mode == "wal")
            rc = sqlite3_exec(db_, "pragma synchronous = normal", nullptr, nullptr, nullptr);
        if (rc == SQLITE_OK)
            rc = sqlite3_exec(db_,
                              "create table if not exists usage (key_id text, month text, requests integer, "
                              "primary key (key_id, month))",
                              nullptr, nullptr, nullptr);
        if (rc == SQLITE_OK)
            rc = sqlite3_prepare_v2(db_,
                                    "insert into usage (key_id, month, requests) values (?1, ?2, 1) "
                                    "on conflict(key_id, month) do update set requests = requests + 1 "
                                    "returning requests",
                                    -1, &upsert_, nullptr);
        if (rc != SQLITE_OK) {
            problem = fmt::format("cannot use usage file '{}': {}", path, db_ ? sqlite3_errmsg(db_) : "out of memory");
            return false;
        }
        return true;
    }

    // Counts one request of `keyId` in `month` and returns the month's count so far, or nullopt
    // with `problem` set when the store cannot be written.
    std::optional<uint64_t> count(const std::string& keyId, const std::string& month, std::string& problem) {
        std::lock_guard<std::mutex> lock(mutex_);
        sqlite3_bind_text(upsert_, 1, keyId.data(), static_cast<int>(keyId.size()), SQLITE_STATIC);
        sqlite3_bind_text(upsert_, 2, month.data(), static_cast<int>(month.size()), SQLITE_STATIC);
        std::optional<uint64_t> requests;
        int rc = sqlite3_step(upsert_);
        if (rc == SQLITE_ROW) {
            requests = static_cast<uint64_t>(sqlite3_column_int64(upsert_, 0));
            rc = sqlite3_step(upsert_);
        }
        if (rc != SQLITE_DONE) {
            requests.reset();
            problem = sqlite3_errmsg(db_);
        }
        sqlite3_reset(upsert_);
        sqlite3_clear_bindings(upsert_);
        return requests;
    }

private:
    std::mutex mutex_;
    sqlite3* db_ = nullptr;
    sqlite3_stmt* upsert_ = nullptr;
};

// The current month in UTC, "YYYY-MM", the usage table's `month`.
std::string utcMonth() {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    return fmt::format("{:04}-{:02}", tm.tm_year + 1900, tm.tm_mon + 1);
}

// Whether an Origin header names this machine (http or https; localhost, 127.0.0.1 or [::1]; any
// port): a page elsewhere must not reach a local server through a rebound DNS name.
bool localOrigin(std::string_view origin) {
    std::string o = http::lowerAscii(origin);
    std::string_view rest = o;
    if (rest.starts_with("http://"))
        rest.remove_prefix(7);
    else if (rest.starts_with("https://"))
        rest.remove_prefix(8);
    else
        return false;
    for (std::string_view host : {"localhost", "127.0.0.1", "[::1]"}) {
        if (!rest.starts_with(host)) continue;
        std::string_view port = rest.substr(host.size());
        if (port.empty()) return true;
        return port.size() > 1 && port.size() <= 6 && port[0] == ':' &&
               port.find_first_not_of("0123456789", 1) == std::string_view::npos;
    }
    return false;
}

std::string clientOf(const Request& r) {
    if (std::optional<std::string_view> forwarded = r.header("x-forwarded-for")) {
        std::string_view first = http::trimOws(forwarded->substr(0, forwarded->find(',')));
        if (!first.empty()) return std::string(first.substr(0, kMaxClientBytes));
    }
    return r.peer;
}

Response jsonResponse(int status, const Json& body) {
    return Response::text(status, body.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json");
}

// A JSON-RPC error with no id, for the transport's refusals of a message as a whole.
Response rpcError(int status, int code, std::string_view message) {
    return jsonResponse(status,
                        Json{{"jsonrpc", "2.0"}, {"id", nullptr}, {"error", {{"code", code}, {"message", message}}}});
}

Response methodNotAllowed(const char* allow) {
    Response r = Response::error(405, fmt::format("method not allowed; this path accepts {}", allow));
    r.headers.emplace_back("Allow", allow);
    return r;
}

// CORS (docs/mcp.md, "Browsers"): a page on this machine (the only origins the check above
// admits) may call the server. A preflight is answered before the gate, since browsers send it
// without credentials; every response to a request with an allowed Origin names that origin and
// exposes the session header, so the page can read replies and refusals alike.
constexpr const char* kCorsMethods = "POST, DELETE, OPTIONS";
constexpr const char* kCorsHeaders =
    "Content-Type, Authorization, X-API-Key, MCP-Protocol-Version, Mcp-Session-Id, Last-Event-ID";

std::vector<std::pair<std::string, std::string>> corsHeaders(const Request& r) {
    std::optional<std::string_view> origin = r.header("origin");
    if (!origin || !localOrigin(*origin)) return {};
    return {{"Access-Control-Allow-Origin", std::string(*origin)},
            {"Access-Control-Expose-Headers", "Mcp-Session-Id"},
            {"Vary", "Origin"}};
}

Response withCors(const Request& r, Response response) {
    for (auto& header : corsHeaders(r)) response.headers.push_back(std::move(header));
    return response;
}

// A tool call's way to its client over HTTP (docs/mcp.md "Asking the user"): the POST that
// carries the call is answered with an event stream, each request to the client is an event on
// it, and the reply to the call its last event. The client answers with a new POST.
class StreamChannel final : public mcp::ClientChannel {
public:
    StreamChannel(http::EventStream& stream, std::vector<std::pair<std::string, std::string>> headers)
        : stream_(stream), headers_(std::move(headers)) {}
    bool send(const Json& message) override {
        return stream_.send(message.dump(-1, ' ', false, Json::error_handler_t::replace), headers_);
    }

private:
    http::EventStream& stream_;
    std::vector<std::pair<std::string, std::string>> headers_;
};

Response preflight() {
    Response r{204, {}, {}, false};
    r.headers.emplace_back("Access-Control-Allow-Methods", kCorsMethods);
    r.headers.emplace_back("Access-Control-Allow-Headers", kCorsHeaders);
    r.headers.emplace_back("Access-Control-Max-Age", "600");
    return r;
}

class McpHttp final : public http::Handler {
public:
    McpHttp(std::string_view tool, const McpHttpOptions& options, std::optional<ApiKeys> keys,
            std::unique_ptr<UsageStore> usage, McpEndpoint& endpoint)
        : tool_(tool), options_(options), keys_(std::move(keys)), usage_(std::move(usage)), endpoint_(endpoint) {}

    std::optional<Response> screen(const Request& r) override {
        std::optional<Response> response = screenRequest(r);
        if (response) return withCors(r, std::move(*response));
        return response;
    }

    Response handle(const Request& r, http::EventStream& stream) override {
        return withCors(r, handleMessage(r, stream));
    }

    // The client hung up while its POST ran: every request in it is abandoned, so a long run
    // stops instead of burning CPU for nobody (docs/mcp.md, "Connections").
    void clientGone(const Request& r) override {
        Json error;
        std::optional<Json> message = endpoint_.parse(r.body, error);
        if (!message) return;
        std::string caller = toolsCaller(r);
        auto abandon = [&](const Json& m) {
            if (m.is_object() && m.contains("id") && m.contains("method")) endpoint_.abandon(m["id"], caller);
        };
        if (message->is_array())
            for (const Json& m : *message) abandon(m);
        else
            abandon(*message);
    }

private:
    std::optional<Response> screenRequest(const Request& r) {
        if (r.path == "/health" || r.path == "/healthz") {
            if (r.method == "GET" || r.method == "HEAD") return Response::text(200, "ok");
            return methodNotAllowed("GET, HEAD");
        }
        if (std::optional<std::string_view> origin = r.header("origin"); origin && !localOrigin(*origin))
            return Response::error(403, "origin not allowed: only pages on localhost may call this server");
        bool mcpPath = r.path == "/mcp" || r.path == "/mcp/";
        if (mcpPath && r.method == "OPTIONS" && r.header("origin")) return preflight();
        if (std::optional<Response> refused = gate(r)) return refused;
        if (!mcpPath) return Response::error(404, "not found; the MCP endpoint is /mcp");
        if (r.method == "DELETE") return endSession(r);
        if (r.method != "POST") return methodNotAllowed("POST, DELETE");  // no GET: requests to the client go on the POST's own stream
        std::string_view contentType = r.header("content-type").value_or("");
        std::string type = http::lowerAscii(http::trimOws(contentType.substr(0, contentType.find(';'))));
        if (type != "application/json")
            return rpcError(415, -32600, "Unsupported Media Type: send the message as Content-Type: application/json");
        if (std::optional<std::string_view> version = r.header("mcp-protocol-version");
            version && !endpoint_.speaks(*version))
            return rpcError(400, -32600, "Bad Request: unsupported MCP-Protocol-Version");
        if (std::optional<std::string_view> session = r.header("mcp-session-id"); session && !knownSession(*session))
            return rpcError(404, -32600, "Session not found: initialize again");
        return std::nullopt;
    }

    // Only a POST to /mcp gets here: one message or a batch.
    Response handleMessage(const Request& r, http::EventStream& stream) {
        Json error;
        std::optional<Json> message = endpoint_.parse(r.body, error);
        if (!message) return jsonResponse(400, error);
        std::optional<bool> initialized;  // set by a successful initialize: whether its client can be asked
        std::string caller = toolsCaller(r);
        // A request of a session whose client can be asked (elicitation), in a POST that accepts an
        // event stream, may ask its user; batches never (2025-06-18 has none, and elicitation).
        std::optional<StreamChannel> channel;
        if (message->is_object() && stream.available() && sessionElicits(r)) channel.emplace(stream, corsHeaders(r));
        auto answer = [&](const Json& m) {
            Json reply = endpoint_.reply(m, caller, channel ? &*channel : nullptr);
            if (m.is_object() && m.value("method", Json()) == "initialize" && reply.is_object() &&
                reply.contains("result"))
                initialized = mcp::clientCanElicit(m.value("params", Json()),
                                                   reply["result"].value("protocolVersion", std::string()));
            return reply;
        };
        Json out;
        if (message->is_array() && !message->empty()) {
            out = Json::array();
            for (const Json& m : *message)
                if (Json reply = answer(m); !reply.is_null()) out.push_back(std::move(reply));
            if (out.empty()) out = nullptr;
        } else {
            out = answer(*message);  // an empty batch is answered as an invalid message
        }
        // Once the stream has started, the reply is its last event (none: the call was cancelled).
        if (stream.started())
            return Response{200, {}, out.is_null() ? "" : out.dump(-1, ' ', false, Json::error_handler_t::replace), false};
        if (out.is_null()) return Response{202, {}, {}, false};  // notifications and responses only
        Response response = jsonResponse(200, out);
        if (initialized) response.headers.emplace_back("Mcp-Session-Id", newSession(*initialized));
        return response;
    }

    std::string tool_;
    McpHttpOptions options_;
    std::optional<ApiKeys> keys_;
    std::unique_ptr<UsageStore> usage_;
    McpEndpoint& endpoint_;

    std::mutex sessionsMutex_;
    std::unordered_map<std::string, bool> sessions_;  // guarded: whether the session's client can be asked
    std::deque<std::string> sessionOrder_;            // guarded: oldest first

    // The tools' caller (mcp::Tools::call): the key, kept apart from an address a key id could spell.
    std::string toolsCaller(const Request& r) const {
        const ApiKey* key = nullptr;
        std::string id = callerOf(r, &key);
        return key ? "key:" + id : id;
    }

    // Who sent a request: its valid key, or `anon:<client>`; `key` says which.
    std::string callerOf(const Request& r, const ApiKey** key = nullptr) const {
        if (key) *key = nullptr;
        if (keys_) {
            std::optional<std::string> token = http::bearerToken(r);
            if (const ApiKey* found = token ? keys_->find(*token) : nullptr) {
                if (key) *key = found;
                return found->id;
            }
        }
        return "anon:" + clientOf(r);
    }

    std::optional<Response> gate(const Request& r) {
        const ApiKey* key = nullptr;
        std::string keyId = callerOf(r, &key);
        uint64_t limit = options_.freeMonthly;
        if (keys_) {
            if (key) {
                limit = key->monthlyLimit;
            } else if (options_.freeMonthly == 0) {
                Response refused = Response::error(401, "missing or invalid API key");
                refused.headers.emplace_back("WWW-Authenticate", "Bearer");
                return refused;
            }
        }
        if (!usage_ || r.method != "POST") return std::nullopt;
        std::string problem;
        std::optional<uint64_t> count = usage_->count(keyId, utcMonth(), problem);
        if (!count) {
            // Refusing is the safe side of a limit that cannot be checked.
            fmt::print(stderr, "{} mcp: error: cannot record usage: {}\n", tool_, problem);
            return Response::error(503, "usage metering is unavailable; try again later");
        }
        if (limit && *count > limit)
            return Response::error(429, fmt::format("monthly limit of {} requests reached for {}", limit, keyId));
        return std::nullopt;
    }

    std::string newSession(bool elicits) {
        std::string id = randomHex(16);
        std::lock_guard<std::mutex> lock(sessionsMutex_);
        while (sessionOrder_.size() >= kMaxSessions) {
            sessions_.erase(sessionOrder_.front());
            sessionOrder_.pop_front();
        }
        sessions_.emplace(id, elicits);
        sessionOrder_.push_back(id);
        return id;
    }

    bool knownSession(std::string_view id) {
        std::lock_guard<std::mutex> lock(sessionsMutex_);
        return sessions_.count(std::string(id)) > 0;
    }

    // Whether the request belongs to a session whose client declared it can be asked.
    bool sessionElicits(const Request& r) {
        std::optional<std::string_view> id = r.header("mcp-session-id");
        if (!id) return false;
        std::lock_guard<std::mutex> lock(sessionsMutex_);
        auto it = sessions_.find(std::string(*id));
        return it != sessions_.end() && it->second;
    }

    Response endSession(const Request& r) {
        std::optional<std::string_view> id = r.header("mcp-session-id");
        if (!id) return rpcError(400, -32600, "Bad Request: DELETE needs the Mcp-Session-Id header");
        std::lock_guard<std::mutex> lock(sessionsMutex_);
        if (sessions_.erase(std::string(*id)) == 0) return rpcError(404, -32600, "Session not found");
        sessionOrder_.erase(std::find(sessionOrder_.begin(), sessionOrder_.end(), *id));
        return Response{204, {}, {}, false};
    }
};

}  // namespace

int serveMcpHttp(std::string_view tool, const McpHttpOptions& options, McpEndpoint& endpoint) {
    static constexpr const char* kSee = "docs/mcp.md, \"HTTP transport\"";
    std::optional<ApiKeys> keys;
    std::string problem;
    if (!options.keysPath.empty()) {
        keys = ApiKeys::load(options.keysPath, problem);
        if (!keys) {
            fmt::print(stderr, "{}: error: {}\n  hint: the format is {} ({})\n", tool, problem, kKeysFormat, kSee);
            return kUsage;
        }
    }
    std::unique_ptr<UsageStore> usage;
    if (!options.usagePath.empty()) {
        usage = std::make_unique<UsageStore>();
        if (!usage->open(options.usagePath, problem)) {
            fmt::print(stderr, "{}: error: {}\n  hint: --usage names an SQLite file, created when missing ({})\n", tool,
                       problem, kSee);
            return kUsage;
        }
    }
    bool limited = options.freeMonthly > 0;
    if (keys)
        for (const auto& [hash, key] : keys->byHash()) limited = limited || key.monthlyLimit > 0;
    if (limited && !usage)
        fmt::print(stderr, "{}: warning: monthly limits are not enforced without --usage FILE, which counts requests\n",
                   tool);

    http::Limits limits;
    limits.maxBody = mcp::kMaxMessageBytes;
    http::Server server(limits);
    McpHttp handler(tool, options, std::move(keys), std::move(usage), endpoint);
    bool served =
        http::serveUntilSignalled(tool, server, options.host, options.port, handler, [&](const std::string& base) {
            fmt::print(stderr, "{} mcp: listening on {}/mcp\n", tool, base);
            std::fflush(stderr);
        });
    return served ? kOk : kFailure;
}

}  // namespace remit::cli
