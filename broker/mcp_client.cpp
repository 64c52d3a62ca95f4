// An MCP client: see mcp_client.h and docs/adapters.md "MCP servers as capabilities".
#include "broker/mcp_client.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <set>
#include <utility>

#include "broker/http_client.h"
#include "broker/model_adapter.h"
#include "runtime/files.h"
#include "runtime/source.h"

namespace remit {

namespace {

// Messages nested deeper than this are refused before parsing (the trace writer and the broker
// recurse over results), as for adapter processes.
constexpr std::size_t kMaxMessageDepth = 512;
// tools/list pages and tools: more is a server gone wrong.
constexpr int kMaxToolPages = 1000;
constexpr std::size_t kMaxTools = 10'000;

constexpr int kMethodNotFound = -32601;

std::string dumpMessage(const Json& message) {
    // Compact output never contains a raw newline; invalid UTF-8 is replaced, not thrown.
    return message.dump(-1, ' ', false, Json::error_handler_t::replace);
}

int64_t millisUntil(McpTransport::Clock::time_point deadline, McpTransport::Clock::time_point from) {
    // Rounded up: the deadline was set a moment before `from`, from a whole number of milliseconds.
    return std::max<int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(deadline - from).count());
}

class StdioTransport final : public McpTransport {
public:
    StdioTransport(std::vector<std::string> argv, ChildProcessOptions options)
        : child_(std::move(argv), options), stderrPath_(options.stderrPath) {}

    bool open(std::string& error) override {
        if (child_.running()) child_.stop(false);
        if (!stderrPath_.empty()) {
            // The log's directory (the state directory's logs/) is made when a server first starts.
            std::error_code ec;
            std::filesystem::path dir = std::filesystem::path(stderrPath_).parent_path();
            if (!dir.empty()) std::filesystem::create_directories(dir, ec);
        }
        // Where this start's stderr begins in the log, so a failure can quote its last line.
        struct stat st {};
        stderrFrom_ = !stderrPath_.empty() && ::stat(stderrPath_.c_str(), &st) == 0 ? static_cast<size_t>(st.st_size) : 0;
        return child_.start(error);
    }
    bool isOpen() const override { return child_.running() && !child_.hasExited(); }
    std::string close(bool gently) override { return child_.stop(gently); }
    void send(std::string message, bool, Clock::time_point) override {
        message += '\n';
        child_.send(message);
    }
    Event next(Clock::time_point deadline, std::size_t maxBytes) override {
        using Io = ChildProcess::Io;
        for (;;) {
            Io io = child_.next(deadline, maxBytes);
            Event event;
            switch (io.kind) {
                case Io::Kind::Line:
                    if (io.line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines
                    event.text = std::move(io.line);
                    return event;
                case Io::Kind::Timeout: event.kind = Event::Kind::Timeout; return event;
                case Io::Kind::StdoutClosed:
                    event.kind = Event::Kind::Closed;
                    event.detail = "closed its stdout";
                    return event;
                case Io::Kind::StdinClosed:
                    event.kind = Event::Kind::Closed;
                    event.detail = "stopped reading its stdin";
                    return event;
                case Io::Kind::Oversized: event.kind = Event::Kind::Oversized; return event;
                case Io::Kind::Failed:
                    event.kind = Event::Kind::Failed;
                    event.detail = "I/O failed: " + io.error;
                    return event;
            }
        }
    }
    std::string describe() const override { return "[" + child_.display() + "]"; }
    std::string lastStderrLine() const override {
        if (stderrPath_.empty()) return {};
        std::string text;
        if (readRegularFile(stderrPath_, std::size_t{16} << 20, text)) return {};
        if (text.size() <= stderrFrom_) return {};
        text.erase(0, stderrFrom_);
        while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
        std::size_t start = text.rfind('\n');
        return printableExcerpt(start == std::string::npos ? text : text.substr(start + 1), 200);
    }

private:
    ChildProcess child_;
    std::string stderrPath_;
    std::size_t stderrFrom_ = 0;
};

// Streamable HTTP: every message is a POST; what comes back is queued for next().
class HttpTransport final : public McpTransport {
public:
    HttpTransport(std::string url, std::string token) : url_(std::move(url)), token_(std::move(token)) {}

    bool open(std::string& error) override {
        if (!checkMcpUrl(url_, error)) return false;
        if (!httpClientAvailable(error)) return false;
        session_.clear();
        version_.clear();
        inbox_.clear();
        open_ = true;
        return true;
    }
    bool isOpen() const override { return open_; }
    std::string close(bool) override {
        if (open_ && !session_.empty()) {
            // Ending the session is a courtesy to the server: a short wait, and no matter the answer.
            HttpRequest request = base("DELETE");
            request.timeoutMs = kCloseTimeoutMs;
            client_.perform(request);
        }
        open_ = false;
        session_.clear();
        inbox_.clear();
        return {};
    }
    void agreed(const std::string& protocolVersion) override { version_ = protocolVersion; }
    bool isolatesRequests() const override { return true; }

    void send(std::string message, bool isRequest, Clock::time_point deadline) override {
        // What is left of an earlier exchange (events after its answer) is not this request's.
        if (isRequest) inbox_.clear();
        HttpRequest request = base("POST");
        request.headers.push_back({"Content-Type", "application/json"});
        request.headers.push_back({"Accept", "application/json, text/event-stream"});
        request.body = std::move(message);
        // A notification or an answer to the server may outlive the call's deadline by a second
        // (a cancellation is sent after it passed); a request gets what is left of it.
        int64_t left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
        request.timeoutMs = static_cast<uint64_t>(std::max<int64_t>(left, isRequest ? 1 : kCloseTimeoutMs));
        request.maxResponseBytes = maxBytes_;
        HttpResult result = client_.perform(request);
        if (!isRequest) {
            // A notification or an answer to the server: 202 Accepted, nothing to read. Only a
            // forgotten session matters (the next request finds out too).
            if (result.ok() && result.response->status == 404 && !session_.empty()) forgetSession();
            return;
        }
        if (!result.ok()) {
            Event event;
            switch (result.error.kind) {
                case HttpError::Kind::Timeout: event.kind = Event::Kind::Timeout; break;
                case HttpError::Kind::TooLarge: event.kind = Event::Kind::Oversized; break;
                default: event.kind = Event::Kind::Failed; break;
            }
            event.detail = result.error.kind == HttpError::Kind::Timeout ? "" : "failed: " + result.error.message;
            inbox_.push_back(std::move(event));
            return;
        }
        const HttpResponse& response = *result.response;
        if (const std::string* session = response.header("mcp-session-id"); session && session_.empty())
            session_ = *session;
        if (response.status == 202 || response.status == 204) return;  // a notification or answer accepted
        if (response.status == 404 && !session_.empty()) {
            forgetSession();
            inbox_.push_back(event(Event::Kind::Closed, "ended the session (HTTP 404)"));
            return;
        }
        if (response.status == 401 || response.status == 403) {
            inbox_.push_back(event(Event::Kind::Failed,
                                   fmt::format("refused the request with HTTP {} ({})", response.status,
                                               token_.empty() ? "it wants a bearer token: name the environment "
                                                                "variable that holds it"
                                                              : "check the bearer token")));
            return;
        }
        if (response.status < 200 || response.status > 299) {
            // The error's message without the bearer token: a gateway or proxy may echo the request.
            inbox_.push_back(event(Event::Kind::Failed, fmt::format("answered HTTP {}: {}", response.status,
                                                                     providerMessage(response.body, token_))));
            return;
        }
        const std::string* type = response.header("content-type");
        std::string contentType = type ? *type : "";
        std::transform(contentType.begin(), contentType.end(), contentType.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        if (contentType.starts_with("text/event-stream")) {
            for (std::string& data : serverSentEvents(response.body)) inbox_.push_back(event(Event::Kind::Message, "", std::move(data)));
        } else if (contentType.starts_with("application/json")) {
            inbox_.push_back(event(Event::Kind::Message, "", response.body));
        } else {
            inbox_.push_back(event(Event::Kind::Failed, fmt::format("answered with Content-Type '{}', neither JSON "
                                                                    "nor an event stream",
                                                                    printableExcerpt(contentType, 60))));
        }
    }

    Event next(Clock::time_point deadline, std::size_t maxBytes) override {
        maxBytes_ = maxBytes;
        if (!inbox_.empty()) {
            Event out = std::move(inbox_.front());
            inbox_.pop_front();
            if (out.kind == Event::Kind::Message && out.text.size() > maxBytes) return event(Event::Kind::Oversized, "");
            return out;
        }
        if (Clock::now() >= deadline) return event(Event::Kind::Timeout, "");
        // Every answer to a POST has been read: what was asked will not be answered.
        return event(Event::Kind::Failed, "answered without a response to the request");
    }

    std::string describe() const override { return "[" + redactedUrl(url_) + "]"; }

private:
    static constexpr int64_t kCloseTimeoutMs = 1000;

    std::string url_, token_;
    HttpClient client_;
    bool open_ = false;
    std::string session_, version_;
    std::deque<Event> inbox_;
    std::size_t maxBytes_ = std::size_t{64} << 20;

    // The server forgot the session: the next call initializes a new one.
    void forgetSession() {
        open_ = false;
        session_.clear();
    }

    static Event event(Event::Kind kind, std::string detail, std::string text = {}) {
        Event e;
        e.kind = kind;
        e.detail = std::move(detail);
        e.text = std::move(text);
        return e;
    }

    HttpRequest base(const char* method) const {
        HttpRequest request;
        request.method = method;
        request.url = url_;
        if (!session_.empty()) request.headers.push_back({"Mcp-Session-Id", session_});
        if (!version_.empty()) request.headers.push_back({"MCP-Protocol-Version", version_});
        if (!token_.empty()) request.headers.push_back({"Authorization", "Bearer " + token_});
        return request;
    }
};

}  // namespace

std::vector<std::string> serverSentEvents(std::string_view body) {
    std::vector<std::string> out;
    std::string data, type;
    bool hasData = false;
    std::size_t pos = 0;
    while (pos < body.size()) {
        std::size_t end = body.find_first_of("\r\n", pos);
        if (end == std::string_view::npos) break;  // a last line without its end: the event is incomplete
        std::string_view line = body.substr(pos, end - pos);
        pos = end + (body[end] == '\r' && end + 1 < body.size() && body[end + 1] == '\n' ? 2 : 1);
        if (line.empty()) {  // the end of an event
            if (hasData && (type.empty() || type == "message")) out.push_back(std::move(data));
            data.clear();
            type.clear();
            hasData = false;
            continue;
        }
        if (line.front() == ':') continue;  // a comment
        std::size_t colon = line.find(':');
        std::string_view field = line.substr(0, colon);
        std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
        if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
        if (field == "data") {
            if (hasData) data += '\n';
            data.append(value);
            hasData = true;
        } else if (field == "event") {
            type = value;
        }
    }
    return out;
}

bool checkMcpUrl(const std::string& url, std::string& error) {
    std::string_view rest = url;
    if (rest.starts_with("http://")) rest.remove_prefix(7);
    else if (rest.starts_with("https://")) rest.remove_prefix(8);
    else {
        error = "an MCP server's URL starts with http:// or https://";
        return false;
    }
    std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
    if (authority.find('@') != std::string_view::npos) {
        error = "an MCP server's URL must not hold a user or password (it is recorded in the run's trace); put a "
                "bearer token in an environment variable and name it with token_env=NAME";
        return false;
    }
    if (authority.empty() || authority.front() == ':') {
        error = "an MCP server's URL needs a host";
        return false;
    }
    // The URL is recorded in the run's trace so a resume reaches the same server, and a query string
    // is where many servers take an API key: refuse it rather than record a secret.
    if (rest.find_first_of("?#") != std::string_view::npos) {
        error = "an MCP server's URL must not hold a query string or fragment (it is recorded in the run's trace, "
                "and a key there would be too); put a bearer token in an environment variable and name it with "
                "token_env=NAME";
        return false;
    }
    return true;
}

std::unique_ptr<McpTransport> makeHttpTransport(std::string url, std::string bearerToken) {
    return std::make_unique<HttpTransport>(std::move(url), std::move(bearerToken));
}

std::unique_ptr<McpTransport> makeStdioTransport(std::vector<std::string> argv, ChildProcessOptions options) {
    return std::make_unique<StdioTransport>(std::move(argv), std::move(options));
}

McpClient::McpClient(std::unique_ptr<McpTransport> transport, McpClientOptions options)
    : transport_(std::move(transport)), options_(std::move(options)) {}

McpClient::~McpClient() { disconnect(); }

void McpClient::disconnect() {
    if (transport_->isOpen() || initialized_) transport_->close(true);
    initialized_ = false;
}

std::string McpClient::brokenMessage(const std::string& what, bool keep) {
    if (keep) return what;
    // The connection is over: stop the server (its state is unknown) and say how it ended.
    std::string how = transport_->close(false);
    initialized_ = false;
    std::string out = what;
    if (!how.empty()) out += " (" + how + ")";
    if (std::string line = transport_->lastStderrLine(); !line.empty()) out += "; its last stderr line: " + line;
    return out;
}

void McpClient::notify(const std::string& method, Json params, Clock::time_point deadline) {
    Json message = {{"jsonrpc", "2.0"}, {"method", method}};
    if (!params.is_null()) message["params"] = std::move(params);
    transport_->send(dumpMessage(message), false, deadline);
}

void McpClient::answerServerRequest(const Json& message, Clock::time_point deadline) {
    const Json& id = message["id"];
    if (!id.is_string() && !id.is_number_integer()) return;  // nothing to answer to
    const std::string& method = message["method"].get_ref<const std::string&>();
    Json reply = {{"jsonrpc", "2.0"}, {"id", id}};
    if (method == "ping") {
        reply["result"] = Json::object();
    } else {
        // The client declares no capabilities (no sampling, roots or elicitation), so a server
        // has nothing else to ask.
        reply["error"] = {{"code", kMethodNotFound},
                          {"message", fmt::format("remit's MCP client does not support '{}'",
                                                  printableExcerpt(method, 80))}};
    }
    transport_->send(dumpMessage(reply), false, deadline);
}

McpClient::Answer McpClient::request(const std::string& method, Json params, Clock::time_point deadline) {
    const int64_t id = nextId_++;
    Json message = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
    transport_->send(dumpMessage(message), true, deadline);
    auto broken = [](std::string why) {
        Answer a;
        a.kind = Answer::Kind::Broken;
        a.message = std::move(why);
        return a;
    };
    for (;;) {
        McpTransport::Event event = transport_->next(deadline, options_.maxMessageBytes);
        switch (event.kind) {
            case McpTransport::Event::Kind::Message: break;
            case McpTransport::Event::Kind::Timeout: {
                Answer a;
                a.kind = Answer::Kind::Timeout;
                return a;
            }
            case McpTransport::Event::Kind::Closed: return broken(event.detail.empty() ? "closed the connection" : event.detail);
            case McpTransport::Event::Kind::Oversized:
                return broken(fmt::format("sent a message longer than {} bytes", options_.maxMessageBytes));
            case McpTransport::Event::Kind::Failed: return broken(event.detail);
        }
        if (jsonNestsDeeperThan(event.text, kMaxMessageDepth))
            return broken(fmt::format("sent a message nested deeper than {} levels", kMaxMessageDepth));
        std::string error;
        std::optional<Json> parsed =
            parseOrderedJsonText("a message", replaceLoneSurrogates(event.text), error, kMaxMessageDepth);
        if (!parsed) return broken("sent " + error + ": " + printableExcerpt(event.text));
        Json& m = *parsed;
        if (!m.is_object())
            return broken(fmt::format("sent {} instead of a JSON-RPC message object",
                                      m.is_array() ? "a batch (an array)" : std::string("a JSON ") + m.type_name()));
        auto methodIt = m.find("method");
        if (methodIt != m.end()) {
            if (!methodIt->is_string()) return broken("sent a message whose method is not a string");
            if (m.contains("id")) {
                answerServerRequest(m, deadline);
            } else if (methodIt->get_ref<const std::string&>() == "notifications/tools/list_changed") {
                toolsStale_ = true;
            }
            continue;  // other notifications (logging, progress) are read and ignored
        }
        auto idIt = m.find("id");
        if (idIt == m.end()) return broken("sent a message that is neither a request, a notification nor a response");
        if (idIt->is_number_integer() && idIt->get<int64_t>() == id) {
            Answer a;
            if (auto errorIt = m.find("error"); errorIt != m.end()) {
                a.kind = Answer::Kind::Error;
                a.value = std::move(*errorIt);
            } else if (auto resultIt = m.find("result"); resultIt != m.end()) {
                a.kind = Answer::Kind::Result;
                a.value = std::move(*resultIt);
            } else {
                return broken("answered without a result or an error");
            }
            return a;
        }
        // A late answer to an earlier request (one that timed out) is skipped.
        if (idIt->is_number_integer() && idIt->get<int64_t>() >= 1 && idIt->get<int64_t>() < id) continue;
        return broken(fmt::format("answered request {} while request {} was waiting",
                                  printableExcerpt(idIt->dump(), 40), id));
    }
}

bool McpClient::connect(Clock::time_point deadline, std::string& error) {
    const auto started = Clock::now();
    const std::string who = "MCP server " + transport_->describe();
    if (initialized_ && transport_->isOpen()) {
        if (!toolsStale_) return true;
        return listTools(deadline, error);
    }
    if (initialized_ || transport_->isOpen()) transport_->close(true);  // it exited since: start it again
    initialized_ = false;
    toolsStale_ = false;
    tools_.clear();
    skipped_.clear();
    std::string why;
    if (!transport_->open(why)) {
        error = fmt::format("cannot start {}: {}", who, why);
        return false;
    }
    Json params = {{"protocolVersion", kMcpClientProtocolVersions[0]},
                   {"capabilities", Json::object()},
                   {"clientInfo", {{"name", options_.clientName}, {"version", options_.clientVersion}}}};
    Answer answer = request("initialize", std::move(params), deadline);
    switch (answer.kind) {
        case Answer::Kind::Timeout:
            error = brokenMessage(fmt::format("{} did not answer initialize within {} ms", who,
                                              millisUntil(deadline, started)));
            return false;
        case Answer::Kind::Broken:
            error = brokenMessage(fmt::format("{} {} before answering initialize", who, answer.message));
            return false;
        case Answer::Kind::Error:
            error = brokenMessage(fmt::format("{} refused initialize: {}", who,
                                              printableExcerpt(answer.value.dump(), 300)));
            return false;
        case Answer::Kind::Result: break;
    }
    const Json& result = answer.value;
    if (!result.is_object()) {
        error = brokenMessage(fmt::format("{} answered initialize with a JSON {}, not an object", who, result.type_name()));
        return false;
    }
    auto version = result.find("protocolVersion");
    std::string versionText = version != result.end() && version->is_string() ? version->get<std::string>() : "";
    if (std::find(std::begin(kMcpClientProtocolVersions), std::end(kMcpClientProtocolVersions), versionText) ==
        std::end(kMcpClientProtocolVersions)) {
        std::string spoken;
        for (const char* v : kMcpClientProtocolVersions) spoken += std::string(spoken.empty() ? "" : ", ") + v;
        error = brokenMessage(fmt::format("{} speaks MCP protocol version '{}', which remit's client does not ({})", who,
                                          printableExcerpt(versionText, 40), spoken));
        return false;
    }
    server_ = McpServerInfo{};
    server_.protocolVersion = versionText;
    if (auto info = result.find("serverInfo"); info != result.end() && info->is_object()) {
        auto text = [&](const char* key) {
            auto it = info->find(key);
            return it != info->end() && it->is_string() ? it->get<std::string>() : std::string();
        };
        server_.name = text("name");
        server_.version = text("version");
        server_.title = text("title");
    }
    transport_->agreed(versionText);
    notify("notifications/initialized", nullptr, deadline);
    initialized_ = true;
    return listTools(deadline, error);
}

bool McpClient::listTools(Clock::time_point deadline, std::string& error) {
    const std::string who = "MCP server " + transport_->describe();
    const auto started = Clock::now();
    std::vector<McpTool> tools;
    std::vector<std::string> skipped;
    std::set<std::string> seen;
    toolsStale_ = false;
    Json cursor;
    for (int page = 0;; ++page) {
        if (page >= kMaxToolPages) {
            error = brokenMessage(fmt::format("{} listed more than {} pages of tools", who, kMaxToolPages));
            return false;
        }
        Json params = Json::object();
        if (!cursor.is_null()) params["cursor"] = cursor;
        Answer answer = request("tools/list", std::move(params), deadline);
        switch (answer.kind) {
            case Answer::Kind::Timeout:
                error = brokenMessage(
                    fmt::format("{} did not list its tools within {} ms", who, millisUntil(deadline, started)));
                return false;
            case Answer::Kind::Broken:
                error = brokenMessage(fmt::format("{} {} before listing its tools", who, answer.message));
                return false;
            case Answer::Kind::Error:
                error = brokenMessage(
                    fmt::format("{} refused tools/list: {}", who, printableExcerpt(answer.value.dump(), 300)));
                return false;
            case Answer::Kind::Result: break;
        }
        Json& result = answer.value;
        auto list = result.is_object() ? result.find("tools") : result.end();
        if (!result.is_object() || list == result.end() || !list->is_array()) {
            error = brokenMessage(fmt::format("{} answered tools/list without a `tools` array", who));
            return false;
        }
        for (Json& entry : *list) {
            auto text = [&](const char* key) {
                auto it = entry.find(key);
                return it != entry.end() && it->is_string() ? it->get<std::string>() : std::string();
            };
            if (!entry.is_object() || text("name").empty()) {
                skipped.push_back("a tool entry without a name");
                continue;
            }
            McpTool tool;
            tool.name = text("name");
            if (!seen.insert(tool.name).second) {
                skipped.push_back(fmt::format("a second tool named '{}'", printableExcerpt(tool.name)));
                continue;
            }
            auto input = entry.find("inputSchema");
            if (input == entry.end() || !input->is_object()) {
                skipped.push_back(fmt::format("tool '{}': its inputSchema is not an object", printableExcerpt(tool.name)));
                continue;
            }
            tool.title = text("title");
            tool.description = text("description");
            tool.inputSchema = std::move(*input);
            if (auto output = entry.find("outputSchema"); output != entry.end() && output->is_object())
                tool.outputSchema = std::move(*output);
            if (auto annotations = entry.find("annotations"); annotations != entry.end() && annotations->is_object())
                tool.annotations = std::move(*annotations);
            if (tools.size() >= kMaxTools) {
                error = brokenMessage(fmt::format("{} listed more than {} tools", who, kMaxTools));
                return false;
            }
            tools.push_back(std::move(tool));
        }
        auto next = result.find("nextCursor");
        if (next == result.end() || next->is_null()) break;
        if (!next->is_string()) {
            error = brokenMessage(fmt::format("{} gave a nextCursor that is not a string", who));
            return false;
        }
        cursor = *next;
    }
    tools_ = std::move(tools);
    skipped_ = std::move(skipped);
    return true;
}

McpClient::CallOutcome McpClient::callTool(const std::string& tool, const Json& arguments, const Json& meta,
                                           Clock::time_point deadline) {
    const std::string who = "MCP server " + transport_->describe();
    CallOutcome out;
    if (!initialized_) {
        out.message = who + " is not connected";
        return out;
    }
    Json params = {{"name", tool}, {"arguments", arguments.is_null() ? Json::object() : arguments}};
    if (!meta.is_null()) params["_meta"] = meta;
    const auto started = Clock::now();
    const int64_t id = nextId_;
    Answer answer = request("tools/call", std::move(params), deadline);
    switch (answer.kind) {
        case Answer::Kind::Result:
            if (!answer.value.is_object()) {
                out.message = fmt::format("{} answered tools/call '{}' with a JSON {}, not a result object", who,
                                          printableExcerpt(tool), answer.value.type_name());
                return out;
            }
            out.kind = CallOutcome::Kind::Result;
            out.result = std::move(answer.value);
            return out;
        case Answer::Kind::Error: {
            out.kind = CallOutcome::Kind::Error;
            const Json& e = answer.value;
            std::string code = e.is_object() && e.contains("code") ? printableExcerpt(e["code"].dump(), 20) : "?";
            std::string message = e.is_object() && e.contains("message") && e["message"].is_string()
                                      ? std::string(firstCodePoints(e["message"].get_ref<const std::string&>(), 1000))
                                      : printableExcerpt(e.dump(), 300);
            out.message = fmt::format("{} answered tools/call '{}' with error {}: {}", who, printableExcerpt(tool), code,
                                      message);
            return out;
        }
        case Answer::Kind::Timeout:
            // Stop waiting and tell the server (the MCP way); its late answer, if any, is skipped.
            notify("notifications/cancelled",
                   {{"requestId", id}, {"reason", fmt::format("timed out after {} ms", millisUntil(deadline, started))}},
                   deadline);
            out.kind = CallOutcome::Kind::Timeout;
            out.message = fmt::format("{} did not answer tools/call '{}' within {} ms; the request was cancelled", who,
                                      printableExcerpt(tool), millisUntil(deadline, started));
            return out;
        case Answer::Kind::Broken: {
            bool keep = transport_->isolatesRequests() && transport_->isOpen();
            out.message = brokenMessage(
                fmt::format("{} {} during tools/call '{}'", who, answer.message, printableExcerpt(tool)), keep);
            if (!keep) out.message += "; it is started again on the next call";
            return out;
        }
    }
    return out;
}

}  // namespace remit
