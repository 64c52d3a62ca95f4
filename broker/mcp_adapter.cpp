// MCP servers as capabilities: see mcp_adapter.h.
#include "broker/mcp_adapter.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <utility>
#include <vector>

#include "broker/http_client.h"
#include "runtime/imported_names.h"
#include "runtime/json_schema.h"
#include "runtime/source.h"

namespace remit {

namespace {

// The longest piece of a server's text a failure message quotes (code points).
constexpr std::size_t kMaxQuotedText = 1000;

// `ns.tool` → ("ns", "tool"), split at the last dot (a capability name always has one).
std::pair<std::string_view, std::string_view> splitCapability(std::string_view name) {
    std::size_t dot = name.rfind('.');
    if (dot == std::string_view::npos) return {std::string_view(), name};
    return {name.substr(0, dot), name.substr(dot + 1)};
}

// The text blocks of a CallToolResult's content, joined by newlines, and what else it held.
struct ContentText {
    std::string text;
    bool hasText = false;
    std::vector<std::string> otherKinds;  // "image", "resource", ...
};

ContentText contentText(const Json& result) {
    ContentText out;
    auto content = result.find("content");
    if (content == result.end() || !content->is_array()) return out;
    for (const Json& block : *content) {
        if (!block.is_object()) continue;
        auto type = block.find("type");
        std::string kind = type != block.end() && type->is_string() ? type->get<std::string>() : "?";
        auto text = block.find("text");
        if (kind == "text" && text != block.end() && text->is_string()) {
            if (out.hasText) out.text += '\n';
            out.text += text->get_ref<const std::string&>();
            out.hasText = true;
        } else {
            out.otherKinds.push_back(printableExcerpt(kind, 20));
        }
    }
    return out;
}

std::string joinKinds(const std::vector<std::string>& kinds) {
    std::string out;
    for (const std::string& k : kinds) out += (out.empty() ? "" : ", ") + k;
    return out.empty() ? "nothing" : out;
}

class McpAdapter final : public Adapter {
public:
    McpAdapter(std::unique_ptr<McpTransport> transport, McpAdapterOptions options)
        : options_(std::move(options)), client_(std::move(transport), options_.client) {}

    ~McpAdapter() override {
        std::lock_guard<std::mutex> lock(mutex_);
        client_.disconnect();
    }

    const char* kind() const override { return "mcp"; }

    bool serves(AdapterRequest::Kind kind, const std::string& name) const override {
        if (kind != AdapterRequest::Kind::Call) return false;
        if (!inScope(name)) return false;
        std::lock_guard<std::mutex> lock(mutex_);
        // A scoped server claims its whole namespace, so its failures (it did not start, it has
        // no such tool) are reported as its own rather than the call going elsewhere.
        if (!ensureConnected(startupDeadline())) return !options_.scope.empty();
        std::string error;
        return findTool(name, error) != nullptr || !options_.scope.empty();
    }

    std::string whyNotServed(AdapterRequest::Kind kind, const std::string& name) const override {
        if (kind != AdapterRequest::Kind::Call || !inScope(name)) return {};
        std::lock_guard<std::mutex> lock(mutex_);
        return client_.connected() ? std::string() : lastError_;
    }

    AdapterReply perform(const AdapterRequest& request) override {
        if (request.kind != AdapterRequest::Kind::Call)
            return AdapterReply::failure("CapabilityFailed",
                                         fmt::format("MCP server {} performs capability calls, not model calls",
                                                     client_.describe()));
        std::lock_guard<std::mutex> lock(mutex_);
        if (!ensureConnected(startupDeadline())) return AdapterReply::failure("CapabilityFailed", lastError_);
        std::string error;
        const McpTool* tool = findTool(request.resource, error);
        if (!tool) return AdapterReply::failure("CapabilityFailed", error);
        // The tool may go away when the server changes its list: keep what the call needs.
        const std::string toolName = tool->name;
        Json arguments = argumentsByImportedName(request.args, tool->inputSchema);
        Json meta = {{"remit/idempotency_key", request.idempotencyKey}};
        const uint64_t timeoutMs = request.timeoutMs ? request.timeoutMs : options_.defaultTimeoutMs;
        auto deadline = McpClient::Clock::now() + std::chrono::milliseconds(timeoutMs);
        McpClient::CallOutcome outcome = client_.callTool(toolName, arguments, meta, deadline);
        AdapterReply reply;
        switch (outcome.kind) {
            case McpClient::CallOutcome::Kind::Timeout: reply = AdapterReply::failure("Timeout", outcome.message); break;
            case McpClient::CallOutcome::Kind::Error:
            case McpClient::CallOutcome::Kind::Failed:
                reply = AdapterReply::failure("CapabilityFailed", outcome.message);
                break;
            case McpClient::CallOutcome::Kind::Result: reply = shape(request, toolName, outcome.result); break;
        }
        reply.meta = {{"mcp_server", client_.server().name}, {"mcp_tool", toolName}};
        return reply;
    }

private:
    McpAdapterOptions options_;
    mutable std::mutex mutex_;
    // serves() is const to the router but may start the server: the connection is state the
    // router cannot see.
    mutable McpClient client_;
    mutable std::string lastError_;

    bool inScope(std::string_view capability) const {
        return options_.scope.empty() || splitCapability(capability).first == options_.scope;
    }

    McpClient::Clock::time_point startupDeadline() const {
        return McpClient::Clock::now() + std::chrono::milliseconds(options_.startupTimeoutMs);
    }

    bool ensureConnected(McpClient::Clock::time_point deadline) const {
        std::string error;
        if (client_.connect(deadline, error)) {
            lastError_.clear();
            return true;
        }
        lastError_ = std::move(error);
        return false;
    }

    std::string toolNames() const {
        std::string out;
        std::size_t shown = 0;
        for (const McpTool& t : client_.tools()) {
            if (shown++ == 20) {
                out += ", ...";
                break;
            }
            out += (out.empty() ? "" : ", ") + printableExcerpt(t.name, 60);
        }
        return out.empty() ? "none" : out;
    }

    // The tool capability `name` maps to (with the lock held and connected), or null with `error`.
    const McpTool* findTool(std::string_view capability, std::string& error) const {
        const std::string who = fmt::format("MCP server {} ({})", client_.describe(), client_.server().name);
        const std::vector<McpTool>& tools = client_.tools();
        if (auto mapped = options_.toolMap.find(capability); mapped != options_.toolMap.end()) {
            for (const McpTool& t : tools)
                if (t.name == mapped->second) return &t;
            error = fmt::format("the policy maps '{}' to tool '{}', which {} does not list (its tools: {})", capability,
                                mapped->second, who, toolNames());
            return nullptr;
        }
        std::string_view wanted = splitCapability(capability).second;
        const McpTool* found = nullptr;
        std::vector<std::string_view> matches;
        for (const McpTool& t : tools) {
            if (t.name == wanted) return &t;
            if (matchesImportedName(t.name, wanted)) {
                found = &t;
                matches.push_back(t.name);
            }
        }
        if (matches.size() == 1) return found;
        if (matches.size() > 1) {
            error = fmt::format("capability '{}' could be any of the tools '{}' and '{}' of {}; name one in the "
                                "policy's [mcp.tools]",
                                capability, printableExcerpt(matches[0], 60), printableExcerpt(matches[1], 60), who);
            return nullptr;
        }
        error = fmt::format("{} has no tool for capability '{}' (its tools: {}); map it in the policy's [mcp.tools]",
                            who, capability, toolNames());
        return nullptr;
    }

    // A CallToolResult shaped into the capability's declared type (request.schema).
    AdapterReply shape(const AdapterRequest& request, const std::string& tool, const Json& result) const {
        const std::string who = fmt::format("tool '{}' of MCP server {}", printableExcerpt(tool, 60), client_.describe());
        ContentText content = contentText(result);
        auto isError = result.find("isError");
        if (isError != result.end() && isError->is_boolean() && isError->get<bool>())
            return AdapterReply::failure(
                "CapabilityFailed",
                fmt::format("{} reported an error: {}", who,
                            content.hasText ? std::string(firstCodePoints(content.text, kMaxQuotedText))
                                            : "(no text; it returned " + joinKinds(content.otherKinds) + ")"));
        auto structured = result.find("structuredContent");
        bool hasStructured = structured != result.end() && !structured->is_null();
        std::string type;
        if (auto t = request.schema.find("type"); request.schema.is_object() && t != request.schema.end() && t->is_string())
            type = t->get<std::string>();
        if (type == "null") return AdapterReply::success(nullptr);
        if (type == "string") {
            if (hasStructured && structured->is_string()) return AdapterReply::success(*structured);
            if (content.hasText) return AdapterReply::success(content.text);
            return AdapterReply::failure("CapabilityFailed",
                                         fmt::format("{} returned no text content (it returned {}), and '{}' returns {}",
                                                     who, joinKinds(content.otherKinds), request.resource,
                                                     request.typeName));
        }
        if (hasStructured) return AdapterReply::success(projectOntoSchema(*structured, request.schema));
        if (!content.hasText)
            return AdapterReply::failure(
                "CapabilityFailed", fmt::format("{} returned neither structured content nor text (it returned {})", who,
                                                joinKinds(content.otherKinds)));
        std::string error;
        std::optional<Json> parsed = parseOrderedJsonText("the text content", content.text, error, 512);
        if (!parsed)
            return AdapterReply::failure(
                "CapabilityFailed",
                fmt::format("{} returned text that is not JSON ({}), and '{}' returns {}: {}", who, error,
                            request.resource, request.typeName.empty() ? "structured data" : request.typeName,
                            firstCodePoints(content.text, 200)));
        return AdapterReply::success(projectOntoSchema(*parsed, request.schema));
    }
};

}  // namespace

std::unique_ptr<Adapter> makeMcpAdapter(std::unique_ptr<McpTransport> transport, McpAdapterOptions options) {
    return std::make_unique<McpAdapter>(std::move(transport), std::move(options));
}

std::unique_ptr<Adapter> makeMcpStdioAdapter(const std::string& command, const ChildProcessOptions& process,
                                             McpAdapterOptions options, std::string& error) {
    std::vector<std::string> argv;
    if (!splitCommand(command, argv, error)) return nullptr;
    if (!checkProgram(argv, process.workingDir, "MCP server", error)) return nullptr;
    return makeMcpAdapter(makeStdioTransport(std::move(argv), process), std::move(options));
}

std::unique_ptr<Adapter> makeMcpHttpAdapter(const std::string& url, const std::string& tokenEnv,
                                            McpAdapterOptions options, std::string& error) {
    if (!checkMcpUrl(url, error)) return nullptr;
    std::string token;
    if (!tokenEnv.empty()) {
        const char* value = std::getenv(tokenEnv.c_str());
        if (!value || !*value) {
            error = fmt::format("the environment variable {} (the bearer token for {}) is not set", tokenEnv,
                                redactedUrl(url));
            return nullptr;
        }
        token = value;
    }
    if (!httpClientAvailable(error)) return nullptr;
    return makeMcpAdapter(makeHttpTransport(url, std::move(token)), std::move(options));
}

}  // namespace remit
