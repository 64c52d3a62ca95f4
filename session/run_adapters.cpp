// A run's adapter configuration: see run_adapters.h.
#include "session/run_adapters.h"

#include <fmt/format.h>

#include <cmath>

#include "broker/fixture_adapter.h"
#include "broker/mcp_adapter.h"
#include "broker/model_adapter.h"
#include "broker/openapi_adapter.h"
#include "broker/process_adapter.h"
#include "broker/routing_adapter.h"

namespace remit {

namespace {

const char* kindName(AdapterSpec::Kind kind) {
    switch (kind) {
        case AdapterSpec::Kind::Fixtures: return "fixtures";
        case AdapterSpec::Kind::Process: return "process";
        case AdapterSpec::Kind::Live: return "live";
        case AdapterSpec::Kind::None: return "none";
        case AdapterSpec::Kind::Mcp: return "mcp";
        case AdapterSpec::Kind::Model: return "model";
        case AdapterSpec::Kind::OpenApi: return "openapi";
    }
    return "none";
}

// A model spec as run_start records it: every setting, the key's variable name and never a key.
Json modelJson(const ModelConfig& m) {
    auto optional = [](const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); };
    return {{"kind", "model"},
            {"name", m.name},
            {"provider", m.provider},
            {"model", m.model},
            {"base_url", m.baseUrl},
            {"api_key_env", m.apiKeyEnv},
            {"max_tokens", m.maxTokens},
            {"temperature", optional(m.temperature)},
            {"input_usd_per_mtok", optional(m.inputUsdPerMtok)},
            {"output_usd_per_mtok", optional(m.outputUsdPerMtok)},
            {"timeout_ms", m.timeoutMs}};
}

// And back, refusing anything that is not exactly that shape.
bool modelFromJson(const Json& entry, ModelConfig& m, std::string& error) {
    auto text = [&](const char* key, std::string& out, bool mayBeEmpty) {
        auto it = entry.find(key);
        if (it == entry.end() || !it->is_string() || (!mayBeEmpty && it->get<std::string>().empty())) {
            error = fmt::format("a model adapter entry has no string `{}`", key);
            return false;
        }
        out = it->get<std::string>();
        return true;
    };
    auto integer = [&](const char* key, int64_t& out) {
        auto it = entry.find(key);
        if (it == entry.end() || !it->is_number_integer() || it->get<int64_t>() <= 0) {
            error = fmt::format("a model adapter entry has no positive integer `{}`", key);
            return false;
        }
        out = it->get<int64_t>();
        return true;
    };
    auto number = [&](const char* key, std::optional<double>& out) {
        auto it = entry.find(key);
        if (it == entry.end()) {
            error = fmt::format("a model adapter entry has no `{}`", key);
            return false;
        }
        if (it->is_null()) return true;
        if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0) {
            error = fmt::format("a model adapter entry's `{}` is not a non-negative number", key);
            return false;
        }
        out = it->get<double>();
        return true;
    };
    if (!text("name", m.name, false) || !text("provider", m.provider, false) || !text("model", m.model, false) ||
        !text("base_url", m.baseUrl, false) || !text("api_key_env", m.apiKeyEnv, true) ||
        !integer("max_tokens", m.maxTokens) || !integer("timeout_ms", m.timeoutMs) ||
        !number("temperature", m.temperature) || !number("input_usd_per_mtok", m.inputUsdPerMtok) ||
        !number("output_usd_per_mtok", m.outputUsdPerMtok))
        return false;
    if (m.provider != "openai" && m.provider != "anthropic") {
        error = fmt::format("a model adapter entry has unknown provider '{}'", m.provider);
        return false;
    }
    return true;
}

std::unique_ptr<Adapter> openOne(const AdapterSpec& spec, const AdapterOpenOptions& options, std::string& error,
                                 std::string& hint) {
    switch (spec.kind) {
        case AdapterSpec::Kind::Fixtures: {
            std::unique_ptr<FixtureAdapter> fixtures = FixtureAdapter::load(spec.path, error, hint);
            if (fixtures && options.host && !fixtures->checkAgainst(*options.host, error, hint)) return nullptr;
            return fixtures;
        }
        case AdapterSpec::Kind::Process: {
            ProcessAdapterOptions processOptions;
            processOptions.workingDir = spec.workingDir;
            return makeProcessAdapter(spec.command, processOptions, error);
        }
        case AdapterSpec::Kind::Live: return makeLiveAdapter(options.liveShim, spec.path, error);
        case AdapterSpec::Kind::None: return FixtureAdapter::empty();
        case AdapterSpec::Kind::Mcp: {
            ChildProcessOptions process;
            process.workingDir = spec.workingDir;
            process.stderrPath = options.mcpStderrLog;
            McpAdapterOptions mcp;
            mcp.scope = spec.scope;
            if (options.mcp) {
                mcp.toolMap = options.mcp->tools;
                if (options.mcp->startupTimeoutMs)
                    mcp.startupTimeoutMs = static_cast<uint64_t>(*options.mcp->startupTimeoutMs);
            }
            mcp.client.clientName = "remitvm";
            mcp.client.clientVersion = options.clientVersion;
            if (!spec.url.empty()) return makeMcpHttpAdapter(spec.url, spec.tokenEnv, std::move(mcp), error);
            return makeMcpStdioAdapter(spec.command, process, std::move(mcp), error);
        }
        case AdapterSpec::Kind::Model:
            hint = "the key goes in the environment, never in a file; docs/models.md";
            return makeModelAdapter(spec.model, error);
        case AdapterSpec::Kind::OpenApi: {
            OpenApiAdapterOptions openApi;
            openApi.scope = spec.scope;
            openApi.baseUrl = spec.url;
            openApi.authEnv = spec.authEnv;
            return makeOpenApiAdapter(spec.path, std::move(openApi), options.yaml, error);
        }
    }
    error = "unknown adapter kind";
    return nullptr;
}

}  // namespace

std::string adapterMode(const std::vector<AdapterSpec>& specs) {
    if (specs.empty()) return "none";
    const AdapterSpec& last = specs.back();
    switch (last.kind) {
        case AdapterSpec::Kind::Fixtures: return "fixtures:" + last.path;
        case AdapterSpec::Kind::Process: return "adapter";
        case AdapterSpec::Kind::Live: return "live";
        case AdapterSpec::Kind::None: return "none";
        case AdapterSpec::Kind::Mcp: return "mcp";
        case AdapterSpec::Kind::Model: return "model";
        case AdapterSpec::Kind::OpenApi: return "openapi";
    }
    return "none";
}

Json adapterSpecsJson(const std::vector<AdapterSpec>& specs) {
    Json out = Json::array();
    for (const AdapterSpec& spec : specs) {
        if (spec.kind == AdapterSpec::Kind::Model) {
            out.push_back(modelJson(spec.model));
            continue;
        }
        Json entry = {{"kind", kindName(spec.kind)}};
        switch (spec.kind) {
            case AdapterSpec::Kind::Fixtures:
            case AdapterSpec::Kind::Live: entry["path"] = spec.path; break;
            case AdapterSpec::Kind::Process:
                entry["command"] = spec.command;
                entry["cwd"] = spec.workingDir;
                break;
            case AdapterSpec::Kind::Mcp:
                if (!spec.url.empty()) {
                    entry["url"] = spec.url;
                    if (!spec.tokenEnv.empty()) entry["token_env"] = spec.tokenEnv;
                } else {
                    entry["command"] = spec.command;
                    entry["cwd"] = spec.workingDir;
                }
                if (!spec.scope.empty()) entry["namespace"] = spec.scope;
                break;
            case AdapterSpec::Kind::OpenApi:
                entry["document"] = spec.path;
                if (!spec.scope.empty()) entry["namespace"] = spec.scope;
                if (!spec.url.empty()) entry["base_url"] = spec.url;
                if (!spec.authEnv.empty()) entry["auth"] = spec.authEnv;
                break;
            case AdapterSpec::Kind::None:
            case AdapterSpec::Kind::Model: break;
        }
        out.push_back(std::move(entry));
    }
    return out;
}

std::optional<std::vector<AdapterSpec>> adapterSpecsFromJson(const Json& value, std::string& error) {
    if (!value.is_array()) {
        error = "`adapters` is not an array";
        return std::nullopt;
    }
    std::vector<AdapterSpec> specs;
    for (const Json& entry : value) {
        auto text = [&](const char* key, std::string& out) {
            auto it = entry.find(key);
            if (it == entry.end() || !it->is_string()) {
                error = fmt::format("an adapter entry has no string `{}`", key);
                return false;
            }
            out = it->get<std::string>();
            return true;
        };
        std::string kind;
        if (!entry.is_object() || !text("kind", kind)) {
            if (error.empty()) error = "an adapter entry is not an object";
            return std::nullopt;
        }
        AdapterSpec spec;
        if (kind == "fixtures" || kind == "live") {
            spec.kind = kind == "live" ? AdapterSpec::Kind::Live : AdapterSpec::Kind::Fixtures;
            if (!text("path", spec.path)) return std::nullopt;
        } else if (kind == "process") {
            spec.kind = AdapterSpec::Kind::Process;
            if (!text("command", spec.command) || !text("cwd", spec.workingDir)) return std::nullopt;
        } else if (kind == "mcp") {
            spec.kind = AdapterSpec::Kind::Mcp;
            if (entry.contains("url") && (entry.contains("command") || entry.contains("cwd"))) {
                error = "an MCP server entry has both a `url` and a `command`: it is one or the other";
                return std::nullopt;
            }
            if (entry.contains("url")) {
                if (!text("url", spec.url)) return std::nullopt;
                if (spec.url.empty()) {
                    error = "an MCP server's `url` is empty";
                    return std::nullopt;
                }
                if (entry.contains("token_env") && !text("token_env", spec.tokenEnv)) return std::nullopt;
            } else if (!text("command", spec.command) || !text("cwd", spec.workingDir)) {
                return std::nullopt;
            }
            if (entry.contains("namespace") && !text("namespace", spec.scope)) return std::nullopt;
        } else if (kind == "openapi") {
            spec.kind = AdapterSpec::Kind::OpenApi;
            if (!text("document", spec.path)) return std::nullopt;
            if (entry.contains("namespace") && !text("namespace", spec.scope)) return std::nullopt;
            if (entry.contains("base_url") && !text("base_url", spec.url)) return std::nullopt;
            if (auto auth = entry.find("auth"); auth != entry.end()) {
                if (!auth->is_object()) {
                    error = "an OpenAPI adapter's `auth` is not an object of scheme: variable name";
                    return std::nullopt;
                }
                for (const auto& [scheme, variable] : auth->items()) {
                    if (!variable.is_string()) {
                        error = fmt::format("an OpenAPI adapter's `auth.{}` is not a variable name", scheme);
                        return std::nullopt;
                    }
                    spec.authEnv[scheme] = variable.get<std::string>();
                }
            }
            for (const auto& [key, v] : entry.items()) {
                if (key != "kind" && key != "document" && key != "namespace" && key != "base_url" && key != "auth") {
                    error = fmt::format("an OpenAPI adapter entry has an unknown field `{}`", key);
                    return std::nullopt;
                }
            }
        } else if (kind == "none") {
            spec.kind = AdapterSpec::Kind::None;
        } else if (kind == "model") {
            spec.kind = AdapterSpec::Kind::Model;
            if (!modelFromJson(entry, spec.model, error)) return std::nullopt;
        } else {
            error = fmt::format("unknown adapter kind '{}'", kind);
            return std::nullopt;
        }
        specs.push_back(std::move(spec));
    }
    return specs;
}

std::unique_ptr<Adapter> openAdapters(const std::vector<AdapterSpec>& specs, const AdapterOpenOptions& options,
                                      AdapterOpenError& error) {
    std::vector<std::unique_ptr<Adapter>> adapters;
    for (size_t i = 0; i < specs.size(); ++i) {
        std::unique_ptr<Adapter> adapter = openOne(specs[i], options, error.message, error.hint);
        if (!adapter) {
            error.index = i;
            return nullptr;
        }
        adapters.push_back(std::move(adapter));
    }
    if (adapters.empty()) return FixtureAdapter::empty();
    if (adapters.size() == 1) return std::move(adapters.front());
    return std::make_unique<RoutingAdapter>(std::move(adapters));
}

}  // namespace remit
