// An MCP client: see mcp_client.h and docs/adapters.md "MCP servers as capabilities".
#include "broker/mcp_client.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <utility>

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
    void send(std::string message, Clock::time_point) override {
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
                    event.detail = io.error;
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

}  // namespace

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

std::string McpClient::brokenMessage(const std::string& what) {
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
    transport_->send(dumpMessage(message), deadline);
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
    transport_->send(dumpMessage(reply), deadline);
}

McpClient::Answer McpClient::request(const std::string& method, Json params, Clock::time_point deadline) {
    const int64_t id = nextId_++;
    Json message = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
    transport_->send(dumpMessage(message), deadline);
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
            case McpTransport::Event::Kind::Failed: return broken("I/O failed: " + event.detail);
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
        case Answer::Kind::Broken:
            out.message = brokenMessage(fmt::format("{} {} during tools/call '{}'", who, answer.message,
                                                    printableExcerpt(tool)));
            out.message += "; it is started again on the next call";
            return out;
    }
    return out;
}

}  // namespace remit
