// The MCP client and the MCP adapter (broker/mcp_client.h, broker/mcp_adapter.h) against a hostile
// server of our own over stdio (tests/e2e/adapters/hostile_mcp.py) and the scriptable HTTP server
// over streamable HTTP (tests/e2e/adapters/fake_http.py): answers shaped into declared types, names
// mapped back, the idempotency key in _meta, sessions and bearer tokens, routing among several
// servers, and every failure mode — bad JSON, oversized and deep messages, wrong ids, hangs, exits,
// failed starts, HTTP errors — as an operational failure that names the server, never a hang. The
// reference servers are driven end to end by tests/e2e/test_mcp_client.py.
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "broker/mcp_adapter.h"
#include "broker/routing_adapter.h"
#include "adapter_request.h"
#include "fake_http.h"
#include "runtime/imported_names.h"
#include "runtime/json_schema.h"
#include "temp_dir.h"

using namespace remit;

namespace {

const std::string kServer = std::string(REMIT_SOURCE_DIR) + "/tests/e2e/adapters/hostile_mcp.py";

using test::TempDir;

std::unique_ptr<Adapter> server(const std::string& flags = "", McpAdapterOptions options = {},
                                const std::string& stderrPath = "/dev/null") {
    ChildProcessOptions process;
    process.stderrPath = stderrPath;
    std::string error;
    auto adapter = makeMcpStdioAdapter("python3 " + kServer + (flags.empty() ? "" : " " + flags), process,
                                       std::move(options), error);
    REQUIRE_MESSAGE(adapter, error);
    return adapter;
}

AdapterRequest call(const std::string& capability, Json args = Json::object(), Json schema = Json{{"type", "string"}},
                    uint64_t timeoutMs = 10'000) {
    AdapterRequest r = test::callRequest(capability, std::move(args), timeoutMs);
    r.schema = std::move(schema);
    r.typeName = "T";
    return r;
}

Json record(std::initializer_list<std::pair<const char*, Json>> fields) {
    Json properties = Json::object(), required = Json::array();
    for (const auto& [name, type] : fields) {
        properties[name] = type;
        required.push_back(name);
    }
    return Json{{"type", "object"}, {"properties", properties}, {"required", required}, {"additionalProperties", false}};
}

const Json kStr = Json{{"type", "string"}};
const Json kFloat = Json{{"type", "number"}};

void requireFailure(const AdapterReply& reply, const std::string& code, const std::string& fragment) {
    CHECK_FALSE(reply.ok);
    CHECK(reply.errorCode == code);
    CHECK_MESSAGE(reply.message.find(fragment) != std::string::npos, reply.message);
}

}  // namespace

TEST_CASE("mcp adapter: structured answers are shaped into the declared type, text into Str") {
    auto adapter = server();
    CHECK(std::string(adapter->kind()) == "mcp");
    AdapterReply reply = adapter->perform(call("h.echo", {{"text", "hi"}}, record({{"text", kStr}})));
    REQUIRE_MESSAGE(reply.ok, reply.message);
    CHECK(reply.result == Json{{"text", "hi"}});  // the undeclared `ignored` is dropped
    CHECK(reply.meta == Json{{"mcp_server", "hostile-mcp-server"}, {"mcp_tool", "echo"}});

    // Declared Str: the text content, even when structured content exists.
    reply = adapter->perform(call("h.echo", {{"text", "hi"}}, kStr));
    REQUIRE(reply.ok);
    CHECK(reply.result == "{\"text\": \"hi\"}");
    // Text that is JSON, for a structured type; the undeclared field is dropped.
    reply = adapter->perform(call("h.text_json", {{"a", 1.5}}, record({{"a", kFloat}})));
    REQUIRE(reply.ok);
    CHECK(reply.result == Json{{"a", 1.5}});
    // Unit: null whatever the content.
    reply = adapter->perform(call("h.text_plain", Json::object(), Json{{"type", "null"}}));
    REQUIRE(reply.ok);
    CHECK(reply.result.is_null());
    reply = adapter->perform(call("h.text_plain"));
    REQUIRE(reply.ok);
    CHECK(reply.result == "this is not json");

    requireFailure(adapter->perform(call("h.text_plain", Json::object(), record({{"a", kFloat}}))),
                   "CapabilityFailed", "returned text that is not JSON");
    requireFailure(adapter->perform(call("h.image")), "CapabilityFailed", "returned no text content (it returned image)");
    requireFailure(adapter->perform(call("h.is_error")), "CapabilityFailed",
                   "tool 'is_error' of MCP server [python3 " + kServer + "] reported an error: the disk is on fire");
    requireFailure(adapter->perform(call("h.rpc_error")), "CapabilityFailed", "with error -32602: unknown argument 'z'");
    // Lone surrogates become U+FFFD instead of failing the message.
    reply = adapter->perform(call("h.surrogate"));
    REQUIRE_MESSAGE(reply.ok, reply.message);
    CHECK(reply.result == "cut \xEF\xBF\xBD here");
    // A server's request in the middle of a call (ping) is answered.
    reply = adapter->perform(call("h.ping_first"));
    REQUIRE_MESSAGE(reply.ok, reply.message);
    CHECK(reply.result == "pong received");
}

TEST_CASE("mcp adapter: imported names map back, the policy's map wins, the key travels in _meta") {
    McpAdapterOptions options;
    options.toolMap["math.plus"] = "get-sum";
    options.toolMap["math.missing"] = "no-such-tool";
    auto adapter = server("", options);
    // `get_sum` is how `remitc import mcp` writes `get-sum`.
    AdapterReply reply = adapter->perform(call("h.get_sum", {{"a", 1}, {"b", 2}}, Json{{"type", "integer"}}));
    REQUIRE_MESSAGE(reply.ok, reply.message);
    CHECK(reply.result == 3);
    reply = adapter->perform(call("math.plus", {{"a", 2}, {"b", 2}}, Json{{"type", "integer"}}));
    REQUIRE_MESSAGE(reply.ok, reply.message);
    CHECK(reply.result == 4);
    requireFailure(adapter->perform(call("math.missing")), "CapabilityFailed",
                   "the policy maps 'math.missing' to tool 'no-such-tool', which MCP server");
    requireFailure(adapter->perform(call("h.nothing")), "CapabilityFailed", "has no tool for capability 'h.nothing'");
    // Parameters written `limit_` and `type_` (keywords) go as `limit` and `type`.
    reply = adapter->perform(call("h.keywords", {{"limit_", 3}, {"type_", "x"}},
                                  record({{"limit", kFloat}, {"type", kStr}})));
    REQUIRE_MESSAGE(reply.ok, reply.message);
    CHECK(reply.result == Json{{"limit", 3}, {"type", "x"}});
    reply = adapter->perform(call("h.meta", {{"x", 1}}, record({{"meta", Json{{"type", "object"}}}, {"arguments", Json{{"type", "object"}}}})));
    REQUIRE_MESSAGE(reply.ok, reply.message);
    CHECK(reply.result["meta"] == Json{{"remit/idempotency_key", "0123456789abcdef0123456789abcdef"}});
    CHECK(reply.result["arguments"] == Json{{"x", 1}});
    // Model calls are not a server's to perform.
    AdapterRequest ask = call("llm");
    ask.kind = AdapterRequest::Kind::Ask;
    ask.model = "llm";
    CHECK_FALSE(adapter->serves(AdapterRequest::Kind::Ask, "llm"));
    requireFailure(adapter->perform(ask), "CapabilityFailed", "performs capability calls, not model calls");
}

TEST_CASE("mcp adapter: a broken stream fails the call and the next call starts the server afresh") {
    TempDir dir;
    auto adapter = server("", {}, dir.file("stderr.log"));
    requireFailure(adapter->perform(call("h.bad_json")), "CapabilityFailed", "sent invalid JSON in a message");
    AdapterReply reply = adapter->perform(call("h.echo", {{"text", "again"}}, record({{"text", kStr}})));
    REQUIRE_MESSAGE(reply.ok, reply.message);

    reply = adapter->perform(call("h.wrong_id"));
    requireFailure(reply, "CapabilityFailed", "answered request ");
    CHECK(reply.message.find("was waiting during tools/call 'wrong_id'") != std::string::npos);
    requireFailure(adapter->perform(call("h.deep")), "CapabilityFailed", "nested deeper than 512 levels");
    requireFailure(adapter->perform(call("h.huge")), "CapabilityFailed", "sent a message longer than 67108864 bytes");
    // A server that exits in the middle of a call: its status and its last stderr line.
    reply = adapter->perform(call("h.exit_now"));
    requireFailure(reply, "CapabilityFailed", "closed its stdout during tools/call 'exit_now' (exit status 3)");
    CHECK(reply.message.find("its last stderr line: hostile_mcp: exiting in the middle of a call") != std::string::npos);
    CHECK(reply.message.find("it is started again on the next call") != std::string::npos);
    reply = adapter->perform(call("h.echo", {{"text", "after"}}, record({{"text", kStr}})));
    REQUIRE_MESSAGE(reply.ok, reply.message);
    CHECK(reply.result == Json{{"text", "after"}});
}

TEST_CASE("mcp adapter: a call past its timeout is cancelled, the server kept, a late answer skipped") {
    auto adapter = server();
    auto start = std::chrono::steady_clock::now();
    AdapterReply reply = adapter->perform(call("h.hang", Json::object(), kStr, 300));
    requireFailure(reply, "Timeout", "did not answer tools/call 'hang' within 300 ms; the request was cancelled");
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
    // The answer to this one arrives after its deadline, while the next call waits: skipped.
    requireFailure(adapter->perform(call("h.slow", {{"ms", 400}}, kStr, 100)), "Timeout", "within 100 ms");
    reply = adapter->perform(call("h.slow", {{"ms", 600}}, kStr, 10'000));
    REQUIRE_MESSAGE(reply.ok, reply.message);
    CHECK(reply.result == "late");
}

TEST_CASE("mcp adapter: a server that does not start or initialize is an operational failure") {
    TempDir dir;
    // Long enough for Python to start on a busy machine; only --hang-init waits it out.
    McpAdapterOptions quick;
    quick.startupTimeoutMs = 3000;
    auto adapter = server("--exit-at-start", {}, dir.file("stderr.log"));
    AdapterReply reply = adapter->perform(call("h.echo"));
    requireFailure(reply, "CapabilityFailed", "before answering initialize (exit status 1)");
    CHECK(reply.message.find("its last stderr line: hostile_mcp: cannot open the database") != std::string::npos);

    auto start = std::chrono::steady_clock::now();
    requireFailure(server("--hang-init", quick)->perform(call("h.echo")), "CapabilityFailed",
                   "did not answer initialize within 3000 ms");
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
    requireFailure(server("--bad-version")->perform(call("h.echo")), "CapabilityFailed",
                   "speaks MCP protocol version '1999-01-01', which remit's client does not (2025-06-18, 2025-03-26, "
                   "2024-11-05)");
    requireFailure(server("--junk")->perform(call("h.echo")), "CapabilityFailed",
                   "sent invalid JSON in a message at line 1, column 1: Server starting... (not JSON) before answering "
                   "initialize");
    requireFailure(server("--no-tools")->perform(call("h.echo")), "CapabilityFailed",
                   "has no tool for capability 'h.echo' (its tools: none)");

    // A command that cannot run is refused before anything starts.
    std::string error;
    CHECK_FALSE(makeMcpStdioAdapter("no-such-mcp-server-here --stdio", {}, {}, error));
    CHECK(error == "MCP server program 'no-such-mcp-server-here' not found on PATH");
    CHECK_FALSE(makeMcpStdioAdapter("node server.js | tee log", {}, {}, error));
    CHECK(error.find("it is run without a shell") != std::string::npos);
}

TEST_CASE("mcp client: every page of the tool list is read") {
    ChildProcessOptions process;
    process.stderrPath = "/dev/null";
    McpClient client(makeStdioTransport({"python3", kServer, "--paged"}, process), {});
    std::string error;
    REQUIRE_MESSAGE(client.connect(McpClient::Clock::now() + std::chrono::seconds(20), error), error);
    CHECK(client.server().name == "hostile-mcp-server");
    CHECK(client.server().version == "1.0");
    CHECK(client.server().protocolVersion == "2025-06-18");
    REQUIRE(client.tools().size() == 18);
    CHECK(client.tools().front().name == "echo");
    CHECK(client.tools().front().annotations == Json{{"readOnlyHint", true}});
    CHECK(client.tools().front().outputSchema.is_object());
    CHECK(client.tools()[1].outputSchema.is_null());
    CHECK(client.tools().back().name == "image");
}

TEST_CASE("mcp adapter: several servers in one run, each serving the capabilities its tools match") {
    McpAdapterOptions scoped;
    scoped.scope = "kg";
    std::vector<std::unique_ptr<Adapter>> adapters;
    adapters.push_back(server("--no-tools"));  // serves nothing
    adapters.push_back(server("", scoped));    // kg.* only
    adapters.push_back(server());              // anything it has a tool for
    Adapter* empty = adapters[0].get();
    Adapter* kg = adapters[1].get();
    Adapter* any = adapters[2].get();
    RoutingAdapter routing(std::move(adapters));
    CHECK(routing.route(AdapterRequest::Kind::Call, "kg.echo") == kg);
    CHECK(routing.route(AdapterRequest::Kind::Call, "kg.not_a_tool") == kg);  // a scoped server claims its namespace
    CHECK(routing.route(AdapterRequest::Kind::Call, "other.echo") == any);
    CHECK(routing.route(AdapterRequest::Kind::Call, "other.not_a_tool") == nullptr);
    CHECK(empty->whyNotServed(AdapterRequest::Kind::Call, "other.echo").empty());
    AdapterReply reply = routing.perform(call("other.echo", {{"text", "routed"}}, record({{"text", kStr}})));
    REQUIRE_MESSAGE(reply.ok, reply.message);
    CHECK(reply.adapter == "mcp");
    requireFailure(routing.perform(call("kg.not_a_tool")), "CapabilityFailed", "has no tool for capability 'kg.not_a_tool'");
    requireFailure(routing.perform(call("other.not_a_tool")), "CapabilityFailed",
                   "no adapter of this run serves capability 'other.not_a_tool'");

    // A server that cannot start serves nothing, and says why when no other adapter serves a call.
    std::vector<std::unique_ptr<Adapter>> withBroken;
    withBroken.push_back(server("--exit-at-start"));
    withBroken.push_back(server("--no-tools"));
    RoutingAdapter broken(std::move(withBroken));
    requireFailure(broken.perform(call("x.echo")), "CapabilityFailed",
                   "no adapter of this run serves capability 'x.echo'; MCP server [python3 " + kServer +
                       " --exit-at-start] ");
}

TEST_CASE("mcp adapter: projecting a structured answer onto a schema keeps only what it declares") {
    Json schema = record({{"items", Json{{"type", "array"}, {"items", record({{"id", kStr}})}}}, {"n", kFloat}});
    Json value = {{"items", {{{"id", "a"}, {"x", 1}}, {{"id", "b"}}}}, {"n", 2}, {"extra", {1, 2}}};
    CHECK(projectOntoSchema(value, schema) == Json{{"items", {{{"id", "a"}}, {{"id", "b"}}}}, {"n", 2}});
    // What does not fit is left for the broker to refuse (R0501), not repaired.
    CHECK(projectOntoSchema(Json("text"), schema) == Json("text"));
    CHECK(projectOntoSchema(Json{{"n", 1}}, schema) == Json{{"n", 1}});
}

TEST_CASE("imported names: outside names as identifiers, and back") {
    CHECK(identifierFrom("get-sum") == "get_sum");
    CHECK(identifierFrom("read_file") == "read_file");
    CHECK(identifierFrom("2fa") == "_2fa");
    CHECK(identifierFrom("") == "_");
    CHECK(identifierFrom("a.b/c d") == "a_b_c_d");
    CHECK(matchesImportedName("get-sum", "get_sum"));
    CHECK(matchesImportedName("limit", "limit_"));
    CHECK(matchesImportedName("limit", "limit"));
    CHECK_FALSE(matchesImportedName("limit", "limit__"));
    CHECK_FALSE(matchesImportedName("get-sum", "getsum"));

    // A call's arguments under the names the service's input schema uses: its own name first, then
    // the one property the parameter stands for; no match, or two, keep the parameter's name.
    Json input = {{"type", "object"},
                  {"properties",
                   {{"limit", kFloat}, {"get-sum", kFloat}, {"type_", kStr}, {"type", kStr}, {"a-b", kStr}, {"a.b", kStr}}}};
    Json args = {{"limit_", 1.0}, {"get_sum", 2.0}, {"type_", "own"}, {"a_b", "two"}, {"other", true}};
    CHECK(argumentsByImportedName(args, input) ==
          Json{{"limit", 1.0}, {"get-sum", 2.0}, {"type_", "own"}, {"a_b", "two"}, {"other", true}});
    CHECK(argumentsByImportedName(args, Json("not a schema")) == args);
    CHECK(argumentsByImportedName(Json::array(), input) == Json::object());
}

// ---------------------------------------------------------------- streamable HTTP

namespace {

using testing::FakeHttp;

Json rpcResult(int id, Json result) { return Json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}}; }

Json initializeAnswer(int id) {
    return rpcResult(id, {{"protocolVersion", "2025-06-18"},
                          {"capabilities", {{"tools", Json::object()}}},
                          {"serverInfo", {{"name", "fake-http-server"}, {"version", "2"}}}});
}

const Json kEchoTool = {{"name", "echo"},
                        {"inputSchema", {{"type", "object"}, {"properties", {{"text", {{"type", "string"}}}}}}}};

// An SSE body: each message a `data:` event, a comment and a notification first.
std::string sse(const std::vector<Json>& messages) {
    std::string out = ": keep-alive\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
                      "\"params\":{\"level\":\"info\",\"data\":\"hi\"}}\n\n";
    for (const Json& m : messages) out += "data: " + m.dump() + "\r\n\r\n";
    return out;
}

// The start every HTTP test shares: initialize (assigning a session), initialized, tools/list.
Json startScript(const std::string& session = "s-1") {
    return Json::array({{{"json", initializeAnswer(1)}, {"headers", {{"Mcp-Session-Id", session}}}},
                        {{"status", 202}},
                        {{"body", sse({rpcResult(2, {{"tools", {kEchoTool}}})})}, {"content_type", "text/event-stream"}}});
}

std::unique_ptr<Adapter> httpServer(const FakeHttp& fake, const std::string& token = "") {
    return makeMcpAdapter(makeHttpTransport(fake.url("/mcp"), token), {});
}

}  // namespace

TEST_CASE("mcp over HTTP: the session, protocol version and bearer token travel in headers, answers in JSON or SSE") {
    FakeHttp fake;
    Json script = startScript();
    script.push_back({{"json", rpcResult(3, {{"content", {{{"type", "text"}, {"text", "one"}}}}})}});
    script.push_back({{"body", sse({rpcResult(4, {{"content", {{{"type", "text"}, {"text", "two"}}}}})})},
                      {"content_type", "text/event-stream; charset=utf-8"}});
    fake.script(script);
    {
        auto adapter = httpServer(fake, "tok-123");
        AdapterReply reply = adapter->perform(call("x.echo", {{"text", "a"}}));
        REQUIRE_MESSAGE(reply.ok, reply.message);
        CHECK(reply.result == "one");
        CHECK(reply.meta["mcp_server"] == "fake-http-server");
        reply = adapter->perform(call("x.echo", {{"text", "b"}}));
        REQUIRE_MESSAGE(reply.ok, reply.message);
        CHECK(reply.result == "two");
    }  // the adapter ends the session
    Json requests = fake.requests();
    REQUIRE(requests.size() == 6);
    for (size_t i = 0; i < 5; ++i) {
        const Json& headers = requests[i]["headers"];
        CHECK(requests[i]["method"] == "POST");
        CHECK(requests[i]["path"] == "/mcp");
        CHECK(headers["authorization"] == "Bearer tok-123");
        CHECK(headers["accept"] == "application/json, text/event-stream");
        CHECK(headers["content-type"] == "application/json");
        CHECK(headers.contains("mcp-session-id") == (i > 0));
        CHECK(headers.contains("mcp-protocol-version") == (i > 0));
        if (i > 0) CHECK(headers["mcp-session-id"] == "s-1");
        if (i > 0) CHECK(headers["mcp-protocol-version"] == "2025-06-18");
    }
    CHECK(Json::parse(requests[0]["body"].get<std::string>())["method"] == "initialize");
    CHECK(Json::parse(requests[1]["body"].get<std::string>())["method"] == "notifications/initialized");
    Json call = Json::parse(requests[3]["body"].get<std::string>());
    CHECK(call["params"]["arguments"] == Json{{"text", "a"}});
    CHECK(call["params"]["_meta"] == Json{{"remit/idempotency_key", "0123456789abcdef0123456789abcdef"}});
    CHECK(requests[5]["method"] == "DELETE");
    CHECK(requests[5]["headers"]["mcp-session-id"] == "s-1");
    // The token is in a header, never in a message.
    for (const Json& r : requests) CHECK(r["body"].get<std::string>().find("tok-123") == std::string::npos);
}

TEST_CASE("mcp over HTTP: failures are operational, and a forgotten session is started again") {
    FakeHttp fake;
    Json script = startScript();
    script.push_back({{"status", 500}, {"body", "upstream exploded"}});
    script.push_back({{"body", "<html>hi</html>"}, {"content_type", "text/html"}});
    script.push_back({{"body", "{not json"}, {"content_type", "application/json"}});
    script.push_back({{"status", 202}});                                  // no answer to a request
    script.push_back({{"status", 404}, {"body", "no such session"}});  // the server forgot the session
    Json restart = startScript("s-2");
    restart[0]["json"] = initializeAnswer(8);
    restart[2]["body"] = sse({rpcResult(9, {{"tools", {kEchoTool}}})});
    for (const Json& b : restart) script.push_back(b);
    script.push_back({{"json", rpcResult(10, {{"content", {{{"type", "text"}, {"text", "back"}}}}})}});
    script.push_back({{"delay_ms", 1500}, {"json", rpcResult(11, Json::object())}});  // past its timeout
    fake.script(script);
    auto adapter = httpServer(fake);
    requireFailure(adapter->perform(call("x.echo")), "CapabilityFailed",
                   "MCP server [" + fake.url("/mcp") + "] answered HTTP 500: upstream exploded during tools/call 'echo'");
    requireFailure(adapter->perform(call("x.echo")), "CapabilityFailed",
                   "answered with Content-Type 'text/html', neither JSON nor an event stream");
    requireFailure(adapter->perform(call("x.echo")), "CapabilityFailed", "sent invalid JSON in a message");
    requireFailure(adapter->perform(call("x.echo")), "CapabilityFailed", "answered without a response to the request");
    requireFailure(adapter->perform(call("x.echo")), "CapabilityFailed", "ended the session (HTTP 404)");
    AdapterReply reply = adapter->perform(call("x.echo"));
    REQUIRE_MESSAGE(reply.ok, reply.message);
    CHECK(reply.result == "back");
    requireFailure(adapter->perform(call("x.echo", Json::object(), kStr, 500)), "Timeout",
                   "did not answer tools/call 'echo' within 500 ms");
    Json requests = fake.requests();
    bool sawNewSession = false;
    for (const Json& r : requests) sawNewSession = sawNewSession || r["headers"].value("mcp-session-id", "") == "s-2";
    CHECK(sawNewSession);
}

TEST_CASE("mcp over HTTP: an error page that echoes the request keeps the bearer token out of the message") {
    FakeHttp fake;
    Json script = startScript();
    script.push_back({{"status", 502},
                      {"body", "bad gateway; the request was POST /mcp with Authorization: Bearer tok-s3cret-9876"}});
    fake.script(script);
    AdapterReply reply = httpServer(fake, "tok-s3cret-9876")->perform(call("x.echo"));
    REQUIRE_FALSE(reply.ok);
    CHECK(reply.message.find("answered HTTP 502: bad gateway") != std::string::npos);
    CHECK(reply.message.find("tok-s3cret") == std::string::npos);
    CHECK(reply.message.find("[redacted]") != std::string::npos);
}

TEST_CASE("mcp over HTTP: a server that wants a token, or is not there, says so") {
    FakeHttp fake;
    fake.script(Json::array({{{"status", 401}, {"body", "{}"}}}));
    requireFailure(httpServer(fake)->perform(call("x.echo")), "CapabilityFailed",
                   "refused the request with HTTP 401 (it wants a bearer token: name the environment variable that "
                   "holds it) before answering initialize");
    // Nobody listens on port 9 (discard) of this machine's loopback.
    auto nobody = makeMcpAdapter(makeHttpTransport("http://127.0.0.1:9/mcp", ""), {});
    requireFailure(nobody->perform(call("x.echo")), "CapabilityFailed", "MCP server [http://127.0.0.1:9/mcp] failed: ");

    std::string error;
    CHECK_FALSE(makeMcpHttpAdapter("ftp://example.com/mcp", "", {}, error));
    CHECK(error == "an MCP server's URL starts with http:// or https://");
    CHECK_FALSE(makeMcpHttpAdapter("https://user:pw@example.com/mcp", "", {}, error));
    CHECK(error.find("must not hold a user or password") != std::string::npos);
    // A query string or fragment would be recorded with the URL (and is where keys often go).
    for (const char* url : {"https://example.com/mcp?api_key=secret", "https://example.com?k=1", "http://h/mcp#key"}) {
        CHECK_FALSE(makeMcpHttpAdapter(url, "", {}, error));
        CHECK(error.find("must not hold a query string or fragment") != std::string::npos);
        CHECK(error.find("secret") == std::string::npos);
    }
    ::unsetenv("REMIT_TEST_NO_SUCH_TOKEN");
    CHECK_FALSE(makeMcpHttpAdapter("https://example.com/mcp", "REMIT_TEST_NO_SUCH_TOKEN", {}, error));
    CHECK(error == "the environment variable REMIT_TEST_NO_SUCH_TOKEN (the bearer token for https://example.com/mcp) is "
                   "not set");
}

TEST_CASE("mcp over HTTP: server-sent events are read as the standard says") {
    CHECK(serverSentEvents("data: a\n\ndata: b\ndata: c\n\n") == std::vector<std::string>{"a", "b\nc"});
    CHECK(serverSentEvents("event: message\r\ndata:x\r\n\r\n: comment\n\nevent: ping\ndata: skipped\n\n") ==
          std::vector<std::string>{"x"});
    CHECK(serverSentEvents("id: 1\nretry: 10\ndata: y\r\rdata: unfinished\n").size() == 1);
    CHECK(serverSentEvents("data: unfinished").empty());
    CHECK(serverSentEvents("").empty());
}
