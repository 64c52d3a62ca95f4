// A run's adapter configuration (session/run_adapters.h) and several adapters behind one
// (broker/routing_adapter.h): which adapter performs each call, what the trace's `adapter` field
// says, how the record a run keeps reads back, and that a damaged record is refused.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "broker/routing_adapter.h"
#include "session/run_adapters.h"

using namespace remit;

namespace {

// Serves the names it is given (all when empty) and answers with its own label.
class LabelAdapter final : public Adapter {
public:
    LabelAdapter(std::string label, std::vector<std::string> names, int* replays = nullptr)
        : label_(std::move(label)), names_(std::move(names)), replays_(replays) {}
    AdapterReply perform(const AdapterRequest&) override {
        AdapterReply reply;
        reply.ok = true;
        reply.result = label_;
        return reply;
    }
    void replayed(const AdapterRequest&) override {
        if (replays_) ++*replays_;
    }
    bool serves(AdapterRequest::Kind, const std::string& name) const override {
        if (names_.empty()) return true;
        for (const std::string& n : names_)
            if (n == name) return true;
        return false;
    }
    const char* kind() const override { return label_.c_str(); }

private:
    std::string label_;
    std::vector<std::string> names_;
    int* replays_;
};

AdapterRequest call(const std::string& resource) {
    AdapterRequest r;
    r.kind = AdapterRequest::Kind::Call;
    r.resource = resource;
    return r;
}

AdapterRequest ask(const std::string& model) {
    AdapterRequest r;
    r.kind = AdapterRequest::Kind::Ask;
    r.model = model;
    return r;
}

}  // namespace

TEST_CASE("routing adapter: the first adapter that serves a call performs it, and the reply names it") {
    int replays = 0;
    std::vector<std::unique_ptr<Adapter>> adapters;
    adapters.push_back(std::make_unique<LabelAdapter>("model", std::vector<std::string>{"llm"}, &replays));
    adapters.push_back(std::make_unique<LabelAdapter>("fixture", std::vector<std::string>{}));
    RoutingAdapter routing(std::move(adapters));

    AdapterReply fromModel = routing.perform(ask("llm"));
    CHECK(fromModel.ok);
    CHECK(fromModel.result == "model");
    CHECK(fromModel.adapter == "model");
    AdapterReply fromFixtures = routing.perform(call("web.fetch"));
    CHECK(fromFixtures.result == "fixture");
    CHECK(fromFixtures.adapter == "fixture");
    // A model call to another model falls through to the adapter that serves everything.
    CHECK(routing.perform(ask("other")).adapter == "fixture");
    CHECK(std::string(routing.kind()) == "fixture");

    routing.replayed(ask("llm"));
    CHECK(replays == 1);
}

TEST_CASE("routing adapter: a call nobody serves fails operationally, naming the resource") {
    std::vector<std::unique_ptr<Adapter>> adapters;
    adapters.push_back(std::make_unique<LabelAdapter>("model", std::vector<std::string>{"llm"}));
    RoutingAdapter routing(std::move(adapters));
    CHECK_FALSE(routing.serves(AdapterRequest::Kind::Call, "email.send"));
    AdapterReply reply = routing.perform(call("email.send"));
    CHECK_FALSE(reply.ok);
    CHECK(reply.errorCode == "CapabilityFailed");
    CHECK(reply.message.find("'email.send'") != std::string::npos);
}

TEST_CASE("run adapters: the record a run keeps reads back to the same specs, and the mode follows the last") {
    std::vector<AdapterSpec> specs = {
        {AdapterSpec::Kind::Mcp, "", "node fs.js /data", "/srv/app", "files"},
        {AdapterSpec::Kind::Mcp, "", "node memory.js", "/srv", ""},
        {AdapterSpec::Kind::Mcp, "", "", "", "gh", "https://mcp.example.com/mcp", "GH_TOKEN"},
        {AdapterSpec::Kind::Process, "", "python3 ad.py", "/srv/app", ""},
        {AdapterSpec::Kind::Fixtures, "fixtures/run.json", "", "", ""},
    };
    Json record = adapterSpecsJson(specs);
    CHECK(record[0] == Json{{"kind", "mcp"}, {"command", "node fs.js /data"}, {"cwd", "/srv/app"}, {"namespace", "files"}});
    CHECK(record[1] == Json{{"kind", "mcp"}, {"command", "node memory.js"}, {"cwd", "/srv"}});
    CHECK(record[2] == Json{{"kind", "mcp"}, {"url", "https://mcp.example.com/mcp"}, {"token_env", "GH_TOKEN"},
                            {"namespace", "gh"}});
    std::string error;
    auto back = adapterSpecsFromJson(record, error);
    REQUIRE_MESSAGE(back, error);
    REQUIRE(back->size() == 5);
    CHECK(adapterSpecsJson(*back) == record);
    CHECK((*back)[0].scope == "files");
    CHECK((*back)[1].scope.empty());
    CHECK((*back)[2].url == "https://mcp.example.com/mcp");
    CHECK((*back)[2].tokenEnv == "GH_TOKEN");
    CHECK((*back)[3].command == "python3 ad.py");
    CHECK((*back)[3].workingDir == "/srv/app");
    CHECK(adapterMode(specs) == "fixtures:fixtures/run.json");
    CHECK(adapterMode({{AdapterSpec::Kind::Process, "", "x", "/", ""}}) == "adapter");
    CHECK(adapterMode({{AdapterSpec::Kind::Mcp, "", "x", "/", ""}}) == "mcp");
    CHECK(adapterMode({}) == "none");
}

TEST_CASE("run adapters: a damaged record is refused, never opened as something else") {
    std::string error;
    CHECK_FALSE(adapterSpecsFromJson(Json::object(), error));
    for (const char* text : {R"([{"kind": "shell", "command": "rm -rf /"}])", R"([{"kind": "process", "command": "x"}])",
                             R"([{"kind": "fixtures", "path": 7}])", R"([3])", R"([{"path": "x"}])",
                             R"([{"kind": "mcp", "command": "x"}])", R"([{"kind": "mcp", "cwd": "/"}])",
                             R"([{"kind": "mcp", "command": "x", "cwd": "/", "namespace": 1}])",
                             R"([{"kind": "mcp", "url": ""}])", R"([{"kind": "mcp", "url": "https://x", "token_env": 2}])",
                             R"([{"kind": "mcp", "url": "https://x", "command": "x", "cwd": "/"}])"}) {
        error.clear();
        CHECK_MESSAGE(!adapterSpecsFromJson(Json::parse(text), error), text);
        CHECK_MESSAGE(!error.empty(), text);
    }
}

TEST_CASE("run adapters: a spec that cannot be opened names itself, and nothing is opened") {
    AdapterOpenError error;
    std::vector<AdapterSpec> specs = {{AdapterSpec::Kind::None, "", "", "", ""},
                                      {AdapterSpec::Kind::Fixtures, "/nonexistent/fixtures.json", "", "", ""}};
    CHECK_FALSE(openAdapters(specs, {}, error));
    CHECK(error.index == 1);
    CHECK(error.message.find("/nonexistent/fixtures.json") != std::string::npos);
    // An MCP server whose program does not exist is refused when opened, before anything starts.
    error = {};
    CHECK_FALSE(openAdapters({{AdapterSpec::Kind::Mcp, "", "no-such-mcp-server-program", "/", ""}}, {}, error));
    CHECK(error.message == "MCP server program 'no-such-mcp-server-program' not found on PATH");
    error = {};
    auto none = openAdapters({{AdapterSpec::Kind::None, "", "", "", ""}}, {}, error);
    REQUIRE(none);
    CHECK(std::string(none->kind()) == "fixture");
}

namespace {

AdapterSpec modelSpec(std::string provider, std::string baseUrl, std::string apiKeyEnv) {
    AdapterSpec spec;
    spec.kind = AdapterSpec::Kind::Model;
    spec.model.name = "llm";
    spec.model.provider = std::move(provider);
    spec.model.model = "claude-haiku-4-5";
    spec.model.baseUrl = std::move(baseUrl);
    spec.model.apiKeyEnv = std::move(apiKeyEnv);
    return spec;
}

}  // namespace

TEST_CASE("run adapters: a model spec records its whole configuration, never a key, and reads back") {
    AdapterSpec model = modelSpec("anthropic", "https://api.anthropic.com/v1", "ANTHROPIC_API_KEY");
    model.model.maxTokens = 300;
    model.model.inputUsdPerMtok = 1.0;
    std::vector<AdapterSpec> specs = {model, {AdapterSpec::Kind::Fixtures, "fixtures/run.json", "", "", {}}};
    Json record = adapterSpecsJson(specs);
    CHECK(record[0] == Json{{"kind", "model"},
                            {"name", "llm"},
                            {"provider", "anthropic"},
                            {"model", "claude-haiku-4-5"},
                            {"base_url", "https://api.anthropic.com/v1"},
                            {"api_key_env", "ANTHROPIC_API_KEY"},
                            {"max_tokens", 300},
                            {"temperature", nullptr},
                            {"input_usd_per_mtok", 1.0},
                            {"output_usd_per_mtok", nullptr},
                            {"timeout_ms", 120000}});
    std::string error;
    auto back = adapterSpecsFromJson(record, error);
    REQUIRE_MESSAGE(back, error);
    CHECK(adapterSpecsJson(*back) == record);
    CHECK(adapterMode({model}) == "model");
    // A model, an MCP server and the catch-all, in the order the run routes them.
    std::vector<AdapterSpec> mixed = {model, {AdapterSpec::Kind::Mcp, "", "node fs.js", "/srv", "files"}, specs[1]};
    auto mixedBack = adapterSpecsFromJson(adapterSpecsJson(mixed), error);
    REQUIRE_MESSAGE(mixedBack, error);
    REQUIRE(mixedBack->size() == 3);
    CHECK((*mixedBack)[0].kind == AdapterSpec::Kind::Model);
    CHECK((*mixedBack)[1].kind == AdapterSpec::Kind::Mcp);
    CHECK((*mixedBack)[1].scope == "files");
    CHECK((*mixedBack)[2].kind == AdapterSpec::Kind::Fixtures);
    CHECK(adapterSpecsJson(*mixedBack) == adapterSpecsJson(mixed));
    for (const char* damage : {"provider", "name", "max_tokens", "temperature", "base_url"}) {
        Json broken = record;
        broken[0].erase(damage);
        error.clear();
        CHECK_MESSAGE(!adapterSpecsFromJson(broken, error), damage);
        CHECK(error.find(damage) != std::string::npos);
    }
    Json unknown = record;
    unknown[0]["provider"] = "gemini";
    CHECK_FALSE(adapterSpecsFromJson(unknown, error));
    Json negative = record;
    negative[0]["input_usd_per_mtok"] = -1;
    CHECK_FALSE(adapterSpecsFromJson(negative, error));
}

TEST_CASE("run adapters: a model whose key variable is unset cannot be opened, and says which variable") {
    AdapterSpec model = modelSpec("openai", "http://127.0.0.1:9/v1", "REMIT_TEST_UNSET_KEY_VARIABLE");
    AdapterOpenError error;
    CHECK_FALSE(openAdapters({model}, {}, error));
    CHECK(error.message.find("REMIT_TEST_UNSET_KEY_VARIABLE is not set") != std::string::npos);
    model.model.apiKeyEnv.clear();
    error = {};
    auto opened = openAdapters({model, {AdapterSpec::Kind::None, "", "", "", {}}}, {}, error);
    REQUIRE(opened);
    auto* routing = dynamic_cast<RoutingAdapter*>(opened.get());
    REQUIRE(routing);
    CHECK(std::string(routing->route(AdapterRequest::Kind::Ask, "llm")->kind()) == "model");
    CHECK(std::string(routing->route(AdapterRequest::Kind::Call, "llm")->kind()) == "fixture");
}

TEST_CASE("run adapters: an OpenAPI service records its document, namespace, base URL and credentials' variables") {
    AdapterSpec service;
    service.kind = AdapterSpec::Kind::OpenApi;
    service.path = "/srv/specs/petstore.yaml";
    service.scope = "pets";
    service.url = "http://127.0.0.1:8080/api/v3";
    service.authEnv = {{"api_key", "PET_KEY"}, {"petstore_auth", "PET_TOKEN"}};
    AdapterSpec bare;
    bare.kind = AdapterSpec::Kind::OpenApi;
    bare.path = "/srv/specs/other.json";
    Json record = adapterSpecsJson({service, bare});
    CHECK(record == Json::parse(R"([{"kind": "openapi", "document": "/srv/specs/petstore.yaml", "namespace": "pets",
        "base_url": "http://127.0.0.1:8080/api/v3", "auth": {"api_key": "PET_KEY", "petstore_auth": "PET_TOKEN"}},
        {"kind": "openapi", "document": "/srv/specs/other.json"}])"));
    std::string error;
    auto back = adapterSpecsFromJson(record, error);
    REQUIRE_MESSAGE(back, error);
    CHECK(adapterSpecsJson(*back) == record);
    CHECK(adapterMode({service}) == "openapi");
    for (const char* damage : {R"({"kind": "openapi"})", R"({"kind": "openapi", "document": 1})",
                               R"({"kind": "openapi", "document": "a.json", "auth": ["PET_KEY"]})",
                               R"({"kind": "openapi", "document": "a.json", "auth": {"key": 1}})",
                               R"({"kind": "openapi", "document": "a.json", "token": "s3cret"})"}) {
        error.clear();
        CHECK_MESSAGE(!adapterSpecsFromJson(Json::array({Json::parse(damage)}), error), damage);
        CHECK_FALSE(error.empty());
    }
    // A document that is not there is refused when opened, naming the file.
    AdapterOpenError openError;
    CHECK_FALSE(openAdapters({bare}, {}, openError));
    CHECK(openError.message.find("/srv/specs/other.json") != std::string::npos);
}
