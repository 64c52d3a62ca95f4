// The built-in model adapters (broker/model_adapter.h): the exact requests each provider's wire
// format gets (schema as structured output, wrapping, the system slot, the repair turn, headers),
// how answers are read (refusals, cut-off answers, text instead of a tool call, malformed bodies,
// usage of the wrong type), costs from usage, and — against the local server of fake_http.py —
// retries of 429 (Retry-After) and 5xx within the deadline, timeouts, broken bodies, and a key that
// never reaches a message.
#include <doctest/doctest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "broker/model_adapter.h"
#include "fake_http.h"

using namespace remit;
using remit::testing::FakeHttp;

namespace {

constexpr const char* kKeyEnv = "REMIT_TEST_MODEL_KEY";
constexpr const char* kKey = "sk-test-0123456789abcdefXYZ";

ModelConfig config(const std::string& provider, const std::string& baseUrl = "http://127.0.0.1:9/v1") {
    ModelConfig c;
    c.name = "llm";
    c.provider = provider;
    c.model = provider == "anthropic" ? "claude-test" : "gpt-test";
    c.baseUrl = baseUrl;
    c.apiKeyEnv = kKeyEnv;
    c.maxTokens = 256;
    c.inputUsdPerMtok = 0.15;
    c.outputUsdPerMtok = 0.60;
    return c;
}

const Json kMoodSchema = {{"type", "object"},
                          {"properties",
                           {{"mood", {{"type", "string"}, {"enum", {"upbeat", "grim"}}}},
                            {"tags", {{"type", "array"}, {"items", {{"type", "string"}}}, {"maxItems", 3}}}}},
                          {"required", {"mood", "tags"}},
                          {"additionalProperties", false}};

AdapterRequest ask(Json schema = kMoodSchema, const std::string& system = "") {
    AdapterRequest r;
    r.kind = AdapterRequest::Kind::Ask;
    r.runId = "run-1";
    r.site = "main#0";
    r.idempotencyKey = "00112233445566778899aabbccddeeff";
    r.timeoutMs = 5000;
    r.model = "llm";
    r.system = system;
    r.prompt = "How is it?";
    r.renderedPrompt = "How is it?";
    r.schema = std::move(schema);
    r.typeName = "Summary";
    return r;
}

struct KeyInEnv {
    KeyInEnv() { ::setenv(kKeyEnv, kKey, 1); }
    ~KeyInEnv() { ::unsetenv(kKeyEnv); }
};

std::unique_ptr<Adapter> adapter(const ModelConfig& c) {
    std::string error;
    ModelAdapterOptions fast;
    fast.firstBackoffMs = 20;
    fast.mostBackoffMs = 100;
    auto a = makeModelAdapter(c, error, fast);
    REQUIRE_MESSAGE(a, error);
    return a;
}

}  // namespace

TEST_CASE("model adapter: an OpenAI request carries the schema as strict structured output") {
    ModelConfig c = config("openai");
    c.temperature = 0.2;
    ModelWireRequest wire = modelWireRequest(c, ask(kMoodSchema, "You are terse."));
    CHECK(wire.url == "http://127.0.0.1:9/v1/chat/completions");
    CHECK_FALSE(wire.wrapped);
    const Json& body = wire.body;
    CHECK(body["model"] == "gpt-test");
    CHECK(body["max_tokens"] == 256);
    CHECK(body["temperature"] == 0.2);
    REQUIRE(body["messages"].size() == 2);
    CHECK(body["messages"][0] == Json{{"role", "system"}, {"content", "You are terse."}});
    CHECK(body["messages"][1] == Json{{"role", "user"}, {"content", "How is it?"}});
    const Json& format = body["response_format"];
    CHECK(format["type"] == "json_schema");
    CHECK(format["json_schema"]["name"] == "answer");
    CHECK(format["json_schema"]["strict"] == true);
    // maxItems is not accepted in strict mode: it becomes a description (the broker enforces it).
    const Json& tags = format["json_schema"]["schema"]["properties"]["tags"];
    CHECK_FALSE(tags.contains("maxItems"));
    CHECK(tags["description"] == "at most 3 items");
    CHECK(format["json_schema"]["schema"]["properties"]["mood"]["enum"] == Json{"upbeat", "grim"});
}

TEST_CASE("model adapter: OpenAI's own API gets max_completion_tokens, compatible servers max_tokens") {
    auto field = [](std::string provider, std::string baseUrl) {
        ModelConfig c = config(provider);
        c.baseUrl = std::move(baseUrl);
        Json body = modelWireRequest(c, ask(kMoodSchema, "")).body;
        CHECK(body.contains("max_tokens") != body.contains("max_completion_tokens"));
        return body.contains("max_tokens") ? "max_tokens" : "max_completion_tokens";
    };
    CHECK(std::string(field("openai", "https://api.openai.com/v1")) == "max_completion_tokens");
    CHECK(std::string(field("openai", "https://API.OpenAI.com:443/v1")) == "max_completion_tokens");
    CHECK(std::string(field("openai", "https://myres.openai.azure.com/openai/v1")) == "max_completion_tokens");
    // User information and a port are not part of the host.
    CHECK(std::string(field("openai", "https://user:pw@api.openai.com:443/v1")) == "max_completion_tokens");
    CHECK(std::string(field("openai", "https://api.openai.com@gateway.example:8443/v1")) == "max_tokens");
    CHECK(std::string(field("openai", "https://api.openai.com:pw@gateway.example/v1")) == "max_tokens");
    CHECK(std::string(field("openai", "http://127.0.0.1:8000/v1")) == "max_tokens");
    CHECK(std::string(field("openai", "https://api.openai.com.example.net/v1")) == "max_tokens");
    CHECK(std::string(field("openai", "http://localhost:11434/v1")) == "max_tokens");
    CHECK(std::string(field("anthropic", "https://api.anthropic.com/v1")) == "max_tokens");
}

TEST_CASE("model adapter: an Anthropic request forces one tool whose input schema is the type") {
    ModelWireRequest wire = modelWireRequest(config("anthropic"), ask(kMoodSchema, "You are terse."));
    CHECK(wire.url == "http://127.0.0.1:9/v1/messages");
    const Json& body = wire.body;
    CHECK(body["system"] == "You are terse.");
    CHECK(body["max_tokens"] == 256);
    CHECK_FALSE(body.contains("temperature"));
    CHECK(body["messages"] == Json::array({{{"role", "user"}, {"content", "How is it?"}}}));
    REQUIRE(body["tools"].size() == 1);
    CHECK(body["tools"][0]["name"] == "answer");
    CHECK(body["tools"][0]["input_schema"] == kMoodSchema);
    CHECK(body["tool_choice"] == Json{{"type", "tool"}, {"name", "answer"}});
    // No system prompt, no system slot.
    CHECK_FALSE(modelWireRequest(config("anthropic"), ask()).body.contains("system"));
    CHECK(modelWireRequest(config("openai"), ask()).body["messages"].size() == 1);
}

TEST_CASE("model adapter: a type that is not an object is wrapped as {value: T} and unwrapped") {
    Json listSchema = {{"type", "array"}, {"items", {{"type", "integer"}}}, {"maxItems", 5}};
    for (const char* provider : {"openai", "anthropic"}) {
        ModelWireRequest wire = modelWireRequest(config(provider), ask(listSchema));
        CHECK(wire.wrapped);
        const Json& schema = std::string(provider) == "openai"
                                 ? wire.body["response_format"]["json_schema"]["schema"]
                                 : wire.body["tools"][0]["input_schema"];
        CHECK(schema["type"] == "object");
        CHECK(schema["required"] == Json{"value"});
        CHECK(schema["additionalProperties"] == false);
        CHECK(schema["properties"]["value"]["type"] == "array");
    }
    ModelWireAnswer a = readModelAnswer(
        config("openai"), R"({"choices":[{"message":{"role":"assistant","content":"{\"value\": [1, 2]}"},"finish_reason":"stop"}]})",
        true);
    REQUIRE(a.reply.ok);
    CHECK(a.reply.result == Json{1, 2});
    ModelWireAnswer b = readModelAnswer(
        config("anthropic"),
        R"({"content":[{"type":"tool_use","id":"t","name":"answer","input":{"value":"hi"}}],"stop_reason":"tool_use"})", true);
    REQUIRE(b.reply.ok);
    CHECK(b.reply.result == "hi");
    ModelWireAnswer c = readModelAnswer(
        config("anthropic"), R"({"content":[{"type":"tool_use","id":"t","name":"answer","input":{"val":"hi"}}]})", true);
    CHECK_FALSE(c.reply.ok);
    CHECK(c.reply.errorCode == "ModelOutputInvalid");
}

TEST_CASE("model adapter: the repair turn sends the previous answer and why it did not fit") {
    AdapterRequest retry = ask();
    retry.attempt = 1;
    retry.previous = AdapterRequest::Previous{Json{{"mood", "happy"}, {"tags", Json::array()}},
                                              "model output does not match the declared type at $.mood: expected one of "
                                              "['upbeat', 'grim'], got 'happy'"};
    Json openai = modelWireRequest(config("openai"), retry).body["messages"];
    REQUIRE(openai.size() == 3);
    CHECK(openai[1] == Json{{"role", "assistant"}, {"content", R"({"mood":"happy","tags":[]})"}});
    CHECK(openai[2]["role"] == "user");
    CHECK(openai[2]["content"].get<std::string>().find("got 'happy'") != std::string::npos);
    CHECK(openai[2]["content"].get<std::string>().starts_with("Your previous answer did not fit the requested type: "));

    Json anthropic = modelWireRequest(config("anthropic"), retry).body["messages"];
    REQUIRE(anthropic.size() == 3);
    CHECK(anthropic[1]["role"] == "assistant");
    CHECK(anthropic[1]["content"][0]["type"] == "tool_use");
    CHECK(anthropic[1]["content"][0]["input"] == retry.previous->answer);
    CHECK(anthropic[2]["content"][0]["type"] == "tool_result");
    CHECK(anthropic[2]["content"][0]["tool_use_id"] == anthropic[1]["content"][0]["id"]);
    CHECK(anthropic[2]["content"][0]["is_error"] == true);

    // No answer could be read last time: the error goes with the prompt.
    retry.previous->answer = nullptr;
    Json plain = modelWireRequest(config("openai"), retry).body["messages"];
    REQUIRE(plain.size() == 1);
    CHECK(plain[0]["content"].get<std::string>().starts_with("How is it?\n\nYour previous answer did not fit"));
}

TEST_CASE("model adapter: refusals, cut-off answers, text instead of a tool and broken bodies") {
    auto read = [](const char* provider, const char* body) {
        return readModelAnswer(config(provider), body, false, kKey).reply;
    };
    AdapterReply refused = read("openai", R"({"choices":[{"message":{"content":null,"refusal":"I can't help."}}]})");
    CHECK(refused.errorCode == "ModelOutputInvalid");
    CHECK(refused.message == "the model refused: I can't help.");
    AdapterReply cut = read("openai", R"({"choices":[{"message":{"content":"{\"mo"},"finish_reason":"length"}]})");
    CHECK(cut.errorCode == "ModelOutputInvalid");
    CHECK(cut.message.find("cut off at max_tokens (256)") != std::string::npos);
    AdapterReply prose = read("openai", R"({"choices":[{"message":{"content":"It is fine."}}]})");
    CHECK(prose.errorCode == "ModelOutputInvalid");
    CHECK(prose.message.starts_with("the model's answer is not JSON: It is fine."));
    AdapterReply text = read("anthropic", R"({"content":[{"type":"text","text":"Sure!"}],"stop_reason":"end_turn"})");
    CHECK(text.errorCode == "ModelOutputInvalid");
    CHECK(text.message == "the model answered in text instead of calling the answer tool: Sure!");
    AdapterReply anthropicCut =
        read("anthropic", R"({"content":[{"type":"tool_use","name":"answer","input":{}}],"stop_reason":"max_tokens"})");
    CHECK(anthropicCut.errorCode == "ModelOutputInvalid");
    for (const char* body : {"{\"choices\": [", "[]", "{\"choices\": []}", "{\"choices\": [{\"message\": 3}]}", "",
                             "<html>502 Bad Gateway</html>"}) {
        AdapterReply broken = read("openai", body);
        CHECK_FALSE(broken.ok);
        CHECK_MESSAGE(broken.errorCode == "CapabilityFailed", body);
    }
    CHECK(read("anthropic", R"({"content": "not a list"})").errorCode == "CapabilityFailed");
}

TEST_CASE("model adapter: costs from usage at the configured prices; none without usage or prices") {
    ModelConfig c = config("openai");
    ModelWireAnswer a = readModelAnswer(
        c, R"({"choices":[{"message":{"content":"{}"}}],"usage":{"prompt_tokens":120,"completion_tokens":30}})", false);
    CHECK(a.inputTokens == 120);
    CHECK(a.outputTokens == 30);
    std::optional<double> cost = modelCost(c, a.inputTokens, a.outputTokens);
    REQUIRE(cost);
    CHECK(*cost == doctest::Approx(0.000036));  // 120 × 0.15 / 1e6 + 30 × 0.60 / 1e6
    // Usage of the wrong type counts as none: the broker then charges the declared cost.
    ModelWireAnswer wrong = readModelAnswer(
        c, R"({"choices":[{"message":{"content":"{}"}}],"usage":{"prompt_tokens":"120","completion_tokens":-1}})", false);
    CHECK_FALSE(modelCost(c, wrong.inputTokens, wrong.outputTokens));
    ModelConfig unpriced = c;
    unpriced.inputUsdPerMtok.reset();
    unpriced.outputUsdPerMtok.reset();
    CHECK_FALSE(modelCost(unpriced, 120, 30));
    ModelWireAnswer cached = readModelAnswer(
        config("anthropic"),
        R"({"content":[{"type":"tool_use","name":"answer","input":{}}],"usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":2}})",
        false);
    CHECK(cached.inputTokens == 15);
    CHECK(cached.outputTokens == 2);
}

TEST_CASE("model adapter: provider error messages are short, printable and keyless") {
    CHECK(providerMessage(R"({"error":{"message":"Incorrect API key provided: sk-test-0123***XYZ.","type":"invalid_request_error"}})",
                          kKey) == "Incorrect API key provided: [redacted]");
    CHECK(providerMessage(R"({"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}})",
                          kKey) == "invalid x-api-key");
    CHECK(providerMessage("upstream said key=sk-test-0123456789abcdefXYZ", kKey) == "upstream said [redacted]");
    CHECK(providerMessage("prefix 0123456789abcdef leaked", kKey) == "prefix [redacted] leaked");
    CHECK(providerMessage(std::string(1000, 'x'), kKey).size() <= 130);
}

TEST_CASE("model adapter: no generated provider message keeps any eight characters of the key") {
    // The oracle is independent of the redaction: a brute-force search of the output for every
    // 8-character window of the key, over keys and messages generated at random, with the key
    // whole, masked the way providers echo it, quoted, glued to punctuation, or cut at the limit.
    std::mt19937 random(20261203);
    const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const std::vector<std::string> words = {"the", "request", "failed", "because", "your", "key", "is", "invalid",
                                            "Incorrect", "API", "provided:", "see", "docs"};
    auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(random); };
    for (int round = 0; round < 2000; ++round) {
        std::string key = pick(2) ? "sk-" : "";
        for (size_t i = 0, n = 20 + pick(40); i < n; ++i) key += alphabet[pick(alphabet.size())];
        std::string shown = key;
        switch (pick(5)) {
            case 0: shown = key.substr(0, 8) + "****" + key.substr(key.size() - 4); break;
            case 1: shown = """ + key + """; break;
            case 2: shown = "key=" + key + ","; break;
            case 3: shown = "(" + key + ")."; break;
            default: break;
        }
        std::string message;
        for (size_t i = 0, n = pick(120); i < n; ++i) message += words[pick(words.size())] + " ";
        message += shown;
        for (size_t i = 0, n = pick(20); i < n; ++i) message += " " + words[pick(words.size())];
        std::string body = pick(2) ? message : Json{{"error", {{"message", message}}}}.dump();
        std::string out = providerMessage(body, key);
        for (size_t at = 0; at + 8 <= key.size(); ++at)
            REQUIRE_MESSAGE(out.find(key.substr(at, 8)) == std::string::npos, "key " << key << " in: " << out);
        CHECK(out.size() <= 303);
    }
}

TEST_CASE("model adapter: a configured key must be in the environment; none is sent when none is configured") {
    ::unsetenv(kKeyEnv);
    std::string error;
    CHECK_FALSE(makeModelAdapter(config("openai"), error));
    CHECK(error.find("the environment variable REMIT_TEST_MODEL_KEY is not set") != std::string::npos);
    ModelConfig keyless = config("openai");
    keyless.apiKeyEnv.clear();
    error.clear();
    CHECK(makeModelAdapter(keyless, error));
}

TEST_CASE("model adapter: OpenAI format against a local server, with headers, usage and cost") {
    KeyInEnv key;
    FakeHttp server;
    auto a = adapter(config("openai", server.url("/v1")));
    CHECK(a->serves(AdapterRequest::Kind::Ask, "llm"));
    CHECK_FALSE(a->serves(AdapterRequest::Kind::Ask, "other"));
    CHECK_FALSE(a->serves(AdapterRequest::Kind::Call, "llm"));
    server.script(Json::array({{{"openai", {{"answer", {{"mood", "upbeat"}, {"tags", {"a"}}}},
                                            {"usage", {{"input", 120}, {"output", 30}}}}},
                                {"headers", {{"x-request-id", "req_123"}}}}}));
    AdapterReply reply = a->perform(ask(kMoodSchema, "Be brief."));
    REQUIRE_MESSAGE(reply.ok, reply.message);
    CHECK(reply.result == Json{{"mood", "upbeat"}, {"tags", {"a"}}});
    REQUIRE(reply.costUsd);
    CHECK(*reply.costUsd == doctest::Approx(0.000036));
    CHECK(reply.meta["input_tokens"] == 120);
    CHECK(reply.meta["output_tokens"] == 30);
    CHECK(reply.meta["request_id"] == "req_123");
    CHECK(reply.meta["http_attempts"] == 1);
    Json seen = server.requests();
    REQUIRE(seen.size() == 1);
    CHECK(seen[0]["method"] == "POST");
    CHECK(seen[0]["path"] == "/v1/chat/completions");
    CHECK(seen[0]["headers"]["authorization"] == std::string("Bearer ") + kKey);
    CHECK(seen[0]["headers"]["content-type"] == "application/json");
    CHECK(seen[0]["headers"]["idempotency-key"] == "00112233445566778899aabbccddeeff");
    CHECK(Json::parse(seen[0]["body"].get<std::string>()) == modelWireRequest(config("openai"), ask(kMoodSchema, "Be brief.")).body);
}

TEST_CASE("model adapter: Anthropic format against a local server") {
    KeyInEnv key;
    FakeHttp server;
    auto a = adapter(config("anthropic", server.url("/v1")));
    server.script(Json::array({{{"anthropic", {{"answer", {{"mood", "grim"}, {"tags", Json::array()}}},
                                               {"usage", {{"input", 1000}, {"output", 100}}}}}}}));
    AdapterReply reply = a->perform(ask(kMoodSchema, "Be brief."));
    REQUIRE_MESSAGE(reply.ok, reply.message);
    CHECK(reply.result == Json{{"mood", "grim"}, {"tags", Json::array()}});
    CHECK(*reply.costUsd == doctest::Approx(0.00021));
    Json seen = server.requests();
    REQUIRE(seen.size() == 1);
    CHECK(seen[0]["path"] == "/v1/messages");
    CHECK(seen[0]["headers"]["x-api-key"] == kKey);
    CHECK(seen[0]["headers"]["anthropic-version"] == "2023-06-01");
    CHECK_FALSE(seen[0]["headers"].contains("authorization"));
    CHECK(Json::parse(seen[0]["body"].get<std::string>())["system"] == "Be brief.");
}

TEST_CASE("model adapter: 429 with Retry-After, 5xx and broken connections are retried within the deadline") {
    KeyInEnv key;
    FakeHttp server;
    auto a = adapter(config("openai", server.url("/v1")));
    server.script(Json::array({{{"status", 429}, {"headers", {{"Retry-After", "0"}}}, {"json", {{"error", {{"message", "slow down"}}}}}},
                               {{"status", 503}, {"body", "overloaded"}},
                               {{"truncate", true}, {"body", "{\"choices\""}},
                               {{"openai", {{"answer", {{"mood", "upbeat"}, {"tags", Json::array()}}}}}}}));
    AdapterReply reply = a->perform(ask());
    REQUIRE_MESSAGE(reply.ok, reply.message);
    CHECK(reply.meta["http_attempts"] == 4);
    CHECK_FALSE(reply.costUsd);  // no usage reported: the broker charges the declared cost
    Json seen = server.requests();
    REQUIRE(seen.size() == 4);
    // Every try of one attempt is the same request, with the same idempotency key.
    for (const Json& r : seen) {
        CHECK(r["body"] == seen[0]["body"]);
        CHECK(r["headers"]["idempotency-key"] == "00112233445566778899aabbccddeeff");
    }
}

TEST_CASE("model adapter: a Retry-After past the deadline, a timeout, and errors that are not retried") {
    KeyInEnv key;
    FakeHttp server;
    auto a = adapter(config("anthropic", server.url("/v1")));
    server.script(Json::array({{{"status", 429}, {"headers", {{"Retry-After", "60"}}}, {"body", "{}"}}}));
    AdapterReply waited = a->perform(ask());
    CHECK(waited.errorCode == "CapabilityFailed");
    CHECK(waited.message.find("HTTP 429") != std::string::npos);
    CHECK(waited.message.find("Retry-After") != std::string::npos);
    CHECK(server.requests().size() == 1);

    server.script(Json::array({{{"delay_ms", 3000}}}));
    AdapterRequest quick = ask();
    quick.timeoutMs = 300;
    AdapterReply late = a->perform(quick);
    CHECK(late.errorCode == "Timeout");
    CHECK(late.message == "model 'llm' (anthropic claude-test): no answer within 300 ms");

    // The server echoes the key in its error: the message keeps it out.
    Json echoed = {{"type", "error"},
                   {"error", {{"type", "authentication_error"}, {"message", std::string("invalid x-api-key ") + kKey}}}};
    Json unauthorized = {{"status", 401}, {"json", echoed}};
    server.script(Json::array({unauthorized}));
    server.requests();
    AdapterReply denied = a->perform(ask());
    CHECK(denied.errorCode == "CapabilityFailed");
    CHECK(denied.message.find("HTTP 401") != std::string::npos);
    CHECK(denied.message.find("invalid x-api-key") != std::string::npos);
    CHECK(denied.message.find(kKey) == std::string::npos);
    CHECK(denied.message.find("0123456789abcdef") == std::string::npos);
    CHECK(server.requests().size() == 1);  // not retried

    server.script(Json::array({{{"body", "{\"content\": [ oops"}}}));
    AdapterReply malformed = a->perform(ask());
    CHECK(malformed.errorCode == "CapabilityFailed");
    CHECK(malformed.message.find("invalid JSON") != std::string::npos);

    server.script(Json::array({{{"anthropic", {{"answer", "not an object"}}}}}));
    AdapterReply wrongType = a->perform(ask());
    // A tool input that is not the object asked for is still an answer: the broker validates it
    // against the type (R0502) and the repair turn shows it to the model.
    REQUIRE(wrongType.ok);
    CHECK(wrongType.result == "not an object");
}
