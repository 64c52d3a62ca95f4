// libFuzzer harness for what an MCP server answers a tool call (broker/mcp_client.h,
// broker/mcp_adapter.h): whatever a server `--adapter mcp:…` starts, or one reached by URL, prints
// is read as hostile JSON-RPC — skipped when it is a notification or a late answer, answered when it
// is a ping, refused when it is anything else than the call's answer — then the answer is shaped
// into the capability's declared type and the broker converts it (runtime/value_json.h). The server
// is a program nobody here wrote, so every byte is hostile.
//
// The input's first byte picks the declared type (Str, Unit, a record, a list of records) and the
// transport (stdio: a broken answer ends the connection; HTTP: it spoils only its request); the rest
// is the server's output after it answered initialize (id 1) and tools/list (id 2, one tool `t`),
// split into lines as the stdio transport reads them: the answer to the call is meant to have id 3,
// a second call's id 4 or more. Each input makes two calls. The harness traps when a promise breaks:
//   - a call always ends, with an ok reply (no error code) or a CapabilityFailed or Timeout with a
//     message that is valid UTF-8;
//   - an ok result is what the declared type asked for: null for Unit, a string for Str, and for
//     the others a value that converts to the type or gives a mismatch (never both or neither) and
//     holds no property the type does not declare;
//   - the same bytes read as a server-sent event stream give data that is valid UTF-8 whenever the
//     stream is.
//
// Build and run: `scripts/fuzz mcp_reply SECONDS`. Replay:
// build/fuzz/tests/fuzz/fuzz_mcp_reply_replay FILE...
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "broker/mcp_adapter.h"
#include "runtime/heap.h"
#include "runtime/json_schema.h"
#include "runtime/source.h"
#include "runtime/types.h"
#include "runtime/value_json.h"

namespace {

using namespace remit;

[[noreturn]] void broken(const char* what, std::string_view input, const AdapterReply& reply) {
    std::fprintf(stderr, "\n*** fuzz_mcp_reply: %s\n--- input (%zu bytes)\n%.*s\n--- reply: ok %d, %s: %s\n", what,
                 input.size(), static_cast<int>(input.size()), input.data(), reply.ok ? 1 : 0,
                 reply.errorCode.c_str(), reply.message.c_str());
    __builtin_trap();
}

bool validUtf8(std::string_view s) { return sanitizeUtf8(s) == s; }

// A server whose answers to initialize and tools/list are right, and whose every other line is
// the fuzzer's. Nothing waits: with nothing left to read, the deadline has passed.
class ScriptedServer final : public McpTransport {
public:
    ScriptedServer(std::vector<std::string> lines, bool http) : lines_(std::move(lines)), http_(http) {}

    bool open(std::string&) override {
        open_ = true;
        return true;
    }
    bool isOpen() const override { return open_; }
    std::string close(bool) override {
        open_ = false;
        queue_.clear();
        return "exit status 1";
    }
    bool isolatesRequests() const override { return http_; }
    void send(std::string message, bool request, Clock::time_point) override {
        if (!request) return;
        Json m = Json::parse(message);
        const std::string method = m["method"].get<std::string>();
        const std::string id = m["id"].dump();
        if (method == "initialize") {
            queue_.push_back(R"({"jsonrpc":"2.0","id":)" + id +
                             R"(,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},)"
                             R"("serverInfo":{"name":"fuzz","version":"1"}}})");
        } else if (method == "tools/list") {
            queue_.push_back(R"({"jsonrpc":"2.0","id":)" + id +
                             R"(,"result":{"tools":[{"name":"t","inputSchema":{"type":"object","properties":)"
                             R"({"limit":{"type":"number"}}}}]}})");
        } else {
            // The server's answer to a call: the fuzzer's lines, once.
            for (std::string& line : lines_) queue_.push_back(std::move(line));
            lines_.clear();
        }
    }
    Event next(Clock::time_point, std::size_t maxBytes) override {
        Event event;
        if (queue_.empty()) {
            event.kind = http_ ? Event::Kind::Failed : Event::Kind::Timeout;
            event.detail = "answered without a response to the request";
            return event;
        }
        event.text = std::move(queue_.front());
        queue_.pop_front();
        if (event.text.size() > maxBytes) event.kind = Event::Kind::Oversized;
        return event;
    }
    std::string describe() const override { return "[fuzz]"; }

private:
    std::vector<std::string> lines_;
    std::deque<std::string> queue_;
    bool http_;
    bool open_ = false;
};

// Whether `value` holds, at any depth, an object property `schema` does not declare.
bool undeclared(const Json& value, const Json& schema) {
    if (!schema.is_object() || !schema.contains("type")) return false;
    if (schema["type"] == "object" && value.is_object()) {
        const Json& properties = schema["properties"];
        for (const auto& [name, v] : value.items())
            if (!properties.contains(name) || undeclared(v, properties[name])) return true;
    }
    if (schema["type"] == "array" && value.is_array())
        for (const Json& v : value)
            if (undeclared(v, schema["items"])) return true;
    return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const uint8_t pick = data[0];
    std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
    std::vector<std::string> lines;
    for (size_t start = 0; start < input.size();) {
        size_t nl = input.find('\n', start);
        if (nl == std::string_view::npos) break;  // no newline: not a line yet
        std::string line(input.substr(start, nl - start));
        start = nl + 1;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") == std::string::npos) continue;
        lines.push_back(std::move(line));
    }

    TypeArena arena;
    TypeRef hit = arena.record({{"url", arena.str()}, {"rank", arena.integer()}}, "Hit");
    const TypeRef types[] = {arena.str(), arena.unit(), hit, arena.list(hit, 10)};
    TypeRef type = types[pick % 4];
    McpAdapterOptions options;
    auto adapter = makeMcpAdapter(std::make_unique<ScriptedServer>(std::move(lines), (pick & 4) != 0), options);
    for (int call = 0; call < 2; ++call) {
        AdapterRequest request;
        request.kind = AdapterRequest::Kind::Call;
        request.resource = "f.t";
        request.args = Json{{"limit", 3}};
        request.idempotencyKey = "0123456789abcdef0123456789abcdef";
        request.timeoutMs = 1;
        request.schema = jsonSchemaFor(type);
        request.typeName = showType(type);
        AdapterReply reply = adapter->perform(request);
        if (!reply.ok) {
            if (reply.errorCode != "CapabilityFailed" && reply.errorCode != "Timeout")
                broken("a failure with an undocumented code", input, reply);
            if (reply.message.empty() || !validUtf8(reply.message))
                broken("a failure without a valid UTF-8 message", input, reply);
            continue;
        }
        if (!reply.errorCode.empty()) broken("an ok reply with an error code", input, reply);
        if (type == arena.unit() && !reply.result.is_null()) broken("a Unit result that is not null", input, reply);
        if (type == arena.str() && !reply.result.is_string()) broken("a Str result that is not a string", input, reply);
        if (undeclared(reply.result, request.schema)) broken("a result with an undeclared property", input, reply);
        Heap heap(size_t(16) << 20);
        ValueFromJson v = valueFromJson(heap, reply.result, type, "result");
        if (v.value.has_value() == v.mismatch.has_value() && !heap.failed())
            broken("a result that neither converts nor mismatches (or both)", input, reply);
    }

    // The same bytes as an event stream (streamable HTTP).
    if (validUtf8(input))
        for (const std::string& event : serverSentEvents(input))
            if (!validUtf8(event)) broken("an event whose data is not valid UTF-8", input, AdapterReply{});
    return 0;
}
