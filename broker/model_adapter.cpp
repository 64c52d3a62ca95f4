// The built-in model adapters: see model_adapter.h and docs/models.md.
#include "broker/model_adapter.h"

#include <fmt/format.h>

#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <random>
#include <thread>

#include "broker/http_client.h"

namespace remit {

namespace {

using Clock = std::chrono::steady_clock;

// The one tool an Anthropic model is made to call, and the name of the OpenAI response format.
constexpr const char* kAnswerTool = "answer";
// Anthropic's API version header (docs.anthropic.com, "Versions").
constexpr const char* kAnthropicVersion = "2023-06-01";
constexpr size_t kMaxMessageChars = 300;

bool isAnthropic(const ModelConfig& config) { return config.provider == "anthropic"; }

// Words of a provider's text that are, or look like, an API key are replaced: the key itself,
// anything sharing 8 characters with it (a masked echo such as "sk-proj-****abcd"), and any word
// starting with "sk-".
std::string redactKeys(std::string text, std::string_view apiKey) {
    std::string out;
    size_t i = 0;
    while (i < text.size()) {
        size_t end = text.find_first_of(" \t\n\"'", i);
        if (end == std::string::npos) end = text.size();
        std::string_view word(text.data() + i, end - i);
        std::string_view bare = word;
        while (!bare.empty() && (bare.front() == '(' || bare.front() == '[' || bare.front() == '`')) bare.remove_prefix(1);
        bool secret = bare.starts_with("sk-") || (apiKey.size() >= 4 && word.find(apiKey) != std::string_view::npos);
        if (!secret && apiKey.size() >= 8)
            for (size_t k = 0; k + 8 <= word.size() && !secret; ++k)
                secret = apiKey.find(word.substr(k, 8)) != std::string_view::npos;
        out += secret ? std::string("[redacted]") : std::string(word);
        if (end < text.size()) out += text[end];
        i = end + 1;
    }
    return out;
}

// A short, printable-ASCII excerpt, keys redacted, for messages that end up in traces. Redacted
// before it is cut, so a key the cut would halve is still recognised whole.
std::string clean(std::string_view text, std::string_view apiKey, size_t max = kMaxMessageChars) {
    std::string printable;
    for (size_t i = 0; i < text.size() && i < 4 * max; ++i) {
        unsigned char c = static_cast<unsigned char>(text[i]);
        printable += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : ' ';
    }
    std::string out = redactKeys(std::move(printable), apiKey);
    if (out.size() > max || text.size() > 4 * max) {
        out.resize(std::min(out.size(), max));
        out += "...";
    }
    return out;
}

// OpenAI's strict structured outputs refuse some keywords (maxItems among them, depending on the
// model); the bound is kept for the model as a description, and the broker enforces it anyway.
Json strictSchema(const Json& schema) {
    if (schema.is_array()) {
        Json out = Json::array();
        for (const Json& item : schema) out.push_back(strictSchema(item));
        return out;
    }
    if (!schema.is_object()) return schema;
    Json out = Json::object();
    for (auto it = schema.begin(); it != schema.end(); ++it) {
        if (it.key() == "maxItems") continue;
        out[it.key()] = it.key() == "enum" ? it.value() : strictSchema(it.value());
    }
    if (auto max = schema.find("maxItems"); max != schema.end() && max->is_number_integer())
        out["description"] = fmt::format("at most {} items", max->get<int64_t>());
    return out;
}

std::string repairText(const AdapterRequest::Previous& previous) {
    return fmt::format("Your previous answer did not fit the requested type: {}\nAnswer again with the complete, "
                       "corrected answer.",
                       previous.error);
}

std::optional<int64_t> tokenCount(const Json& usage, const char* key) {
    auto it = usage.find(key);
    if (it == usage.end() || !it->is_number_integer() || it->get<int64_t>() < 0) return std::nullopt;
    return it->get<int64_t>();
}

ModelWireAnswer invalidAnswer(std::string message) {
    ModelWireAnswer a;
    a.reply = AdapterReply::failure("ModelOutputInvalid", std::move(message));
    return a;
}

ModelWireAnswer brokenResponse(std::string message) {
    ModelWireAnswer a;
    a.reply = AdapterReply::failure("CapabilityFailed", std::move(message));
    return a;
}

// The answer (the tool input, or the parsed message content), unwrapped when it was wrapped.
ModelWireAnswer unwrapAnswer(Json answer, bool wrapped) {
    if (wrapped) {
        if (!answer.is_object() || !answer.contains("value"))
            return invalidAnswer("the model's answer has no 'value' (the requested type was wrapped in an object)");
        answer = Json(answer["value"]);
    }
    ModelWireAnswer a;
    a.reply = AdapterReply::success(std::move(answer));
    return a;
}

// OpenAI's own API (and Azure's) refuses `max_tokens` for its reasoning models and takes
// `max_completion_tokens` for every model; the compatible servers (vLLM, llama.cpp, Ollama,
// gateways) read `max_tokens`. So the field follows the host the request goes to.
std::string_view maxTokensField(const ModelConfig& config) {
    if (isAnthropic(config)) return "max_tokens";
    const std::string host = urlHost(config.baseUrl);
    auto endsWith = [&](std::string_view suffix) {
        return host.size() >= suffix.size() && host.compare(host.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    bool openAiItself = host == "api.openai.com" || endsWith(".openai.azure.com");
    return openAiItself ? "max_completion_tokens" : "max_tokens";
}

}  // namespace

ModelWireRequest modelWireRequest(const ModelConfig& config, const AdapterRequest& request) {
    ModelWireRequest out;
    Json schema = request.schema.is_object() ? request.schema : Json::object();
    out.wrapped = schema.value("type", Json("")) != "object";
    if (out.wrapped)
        schema = Json{{"type", "object"},
                      {"properties", {{"value", schema}}},
                      {"required", Json::array({"value"})},
                      {"additionalProperties", false}};
    // The answer of the attempt being repaired, as the model wrote it (wrapped again if need be).
    std::optional<Json> previousAnswer;
    if (request.previous && !request.previous->answer.is_null())
        previousAnswer = out.wrapped ? Json{{"value", request.previous->answer}} : request.previous->answer;

    Json& body = out.body;
    body["model"] = config.model;
    body[maxTokensField(config)] = config.maxTokens;
    if (config.temperature) body["temperature"] = *config.temperature;
    std::string user = request.renderedPrompt;
    if (request.previous && !previousAnswer) user += "\n\n" + repairText(*request.previous);

    if (isAnthropic(config)) {
        out.url = config.baseUrl + "/messages";
        if (!request.system.empty()) body["system"] = request.system;
        Json messages = Json::array({{{"role", "user"}, {"content", user}}});
        if (previousAnswer && previousAnswer->is_object()) {
            messages.push_back({{"role", "assistant"},
                                {"content", Json::array({{{"type", "tool_use"},
                                                          {"id", "toolu_previous"},
                                                          {"name", kAnswerTool},
                                                          {"input", *previousAnswer}}})}});
            messages.push_back({{"role", "user"},
                                {"content", Json::array({{{"type", "tool_result"},
                                                          {"tool_use_id", "toolu_previous"},
                                                          {"is_error", true},
                                                          {"content", repairText(*request.previous)}}})}});
        } else if (previousAnswer) {
            messages.push_back({{"role", "assistant"}, {"content", previousAnswer->dump()}});
            messages.push_back({{"role", "user"}, {"content", repairText(*request.previous)}});
        }
        body["messages"] = std::move(messages);
        body["tools"] = Json::array({{{"name", kAnswerTool},
                                      {"description", "Give your answer as this tool's input."},
                                      {"input_schema", schema}}});
        body["tool_choice"] = {{"type", "tool"}, {"name", kAnswerTool}};
        return out;
    }
    out.url = config.baseUrl + "/chat/completions";
    Json messages = Json::array();
    if (!request.system.empty()) messages.push_back({{"role", "system"}, {"content", request.system}});
    messages.push_back({{"role", "user"}, {"content", user}});
    if (previousAnswer) {
        messages.push_back({{"role", "assistant"}, {"content", previousAnswer->dump()}});
        messages.push_back({{"role", "user"}, {"content", repairText(*request.previous)}});
    }
    body["messages"] = std::move(messages);
    body["response_format"] = {
        {"type", "json_schema"},
        {"json_schema", {{"name", kAnswerTool}, {"strict", true}, {"schema", strictSchema(schema)}}}};
    return out;
}

ModelWireAnswer readModelAnswer(const ModelConfig& config, std::string_view text, bool wrapped,
                                std::string_view apiKey) {
    std::string error;
    std::optional<Json> parsed = parseOrderedJsonText("the provider's response", text, error);
    if (!parsed) return brokenResponse(fmt::format("{}: {}", error, clean(text, apiKey, 80)));
    const Json& body = *parsed;
    if (!body.is_object()) return brokenResponse("the provider's response is not a JSON object");
    auto usageOf = [&](ModelWireAnswer answer) {
        auto usage = body.find("usage");
        if (usage == body.end() || !usage->is_object()) return answer;
        if (isAnthropic(config)) {
            std::optional<int64_t> input = tokenCount(*usage, "input_tokens");
            // Cache writes and reads are input too (charged here at the input price).
            for (const char* extra : {"cache_creation_input_tokens", "cache_read_input_tokens"})
                if (auto n = tokenCount(*usage, extra); n && input) *input += *n;
            answer.inputTokens = input;
            answer.outputTokens = tokenCount(*usage, "output_tokens");
        } else {
            answer.inputTokens = tokenCount(*usage, "prompt_tokens");
            answer.outputTokens = tokenCount(*usage, "completion_tokens");
        }
        return answer;
    };
    const std::string cutOff =
        fmt::format("the model's answer was cut off at max_tokens ({}); raise max_tokens in [models.\"{}\"]",
                    config.maxTokens, config.name);

    if (isAnthropic(config)) {
        auto content = body.find("content");
        if (content == body.end() || !content->is_array())
            return brokenResponse("the provider's response has no 'content' array");
        std::string stop = body.value("stop_reason", Json("")).is_string()
                               ? body.value("stop_reason", Json("")).get<std::string>()
                               : std::string();
        const Json* input = nullptr;
        std::string said;
        for (const Json& block : *content) {
            if (!block.is_object()) continue;
            Json type = block.value("type", Json(""));
            if (type == "tool_use" && block.value("name", Json("")) == kAnswerTool && block.contains("input"))
                input = &block["input"];
            else if (type == "text" && block.contains("text") && block["text"].is_string())
                said += block["text"].get<std::string>();
        }
        if (stop == "max_tokens") return usageOf(invalidAnswer(cutOff));
        if (stop == "refusal") return usageOf(invalidAnswer("the model refused: " + clean(said, apiKey)));
        if (!input)
            return usageOf(invalidAnswer("the model answered in text instead of calling the answer tool: " +
                                         clean(said, apiKey, 120)));
        return usageOf(unwrapAnswer(*input, wrapped));
    }

    auto choices = body.find("choices");
    if (choices == body.end() || !choices->is_array() || choices->empty() || !(*choices)[0].is_object())
        return brokenResponse("the provider's response has no 'choices'");
    const Json& choice = (*choices)[0];
    auto message = choice.find("message");
    if (message == choice.end() || !message->is_object())
        return brokenResponse("the provider's response has no 'choices[0].message'");
    if (auto refusal = message->find("refusal"); refusal != message->end() && refusal->is_string() &&
                                                 !refusal->get<std::string>().empty())
        return usageOf(invalidAnswer("the model refused: " + clean(refusal->get<std::string>(), apiKey)));
    if (choice.value("finish_reason", Json("")) == "length") return usageOf(invalidAnswer(cutOff));
    std::string content;
    auto contentIt = message->find("content");
    if (contentIt != message->end() && contentIt->is_string()) {
        content = contentIt->get<std::string>();
    } else if (contentIt != message->end() && contentIt->is_array()) {  // content parts
        for (const Json& part : *contentIt)
            if (part.is_object() && part.value("type", Json("")) == "text" && part.contains("text") &&
                part["text"].is_string())
                content += part["text"].get<std::string>();
    } else {
        return usageOf(invalidAnswer("the model's answer has no text content"));
    }
    std::optional<Json> answer = parseOrderedJsonText("the model's answer", content, error);
    if (!answer) return usageOf(invalidAnswer(fmt::format("the model's answer is not JSON: {}", clean(content, apiKey, 120))));
    return usageOf(unwrapAnswer(std::move(*answer), wrapped));
}

std::optional<double> modelCost(const ModelConfig& config, std::optional<int64_t> inputTokens,
                                std::optional<int64_t> outputTokens) {
    if (!inputTokens || !outputTokens || (!config.inputUsdPerMtok && !config.outputUsdPerMtok)) return std::nullopt;
    double cost = static_cast<double>(*inputTokens) * config.inputUsdPerMtok.value_or(0.0) / 1e6 +
                  static_cast<double>(*outputTokens) * config.outputUsdPerMtok.value_or(0.0) / 1e6;
    return std::isfinite(cost) ? std::optional<double>(cost) : std::nullopt;
}

std::string providerMessage(std::string_view text, std::string_view apiKey) {
    std::string error;
    if (std::optional<Json> body = parseOrderedJsonText("error", text, error, 64); body && body->is_object()) {
        const Json* message = nullptr;
        if (auto e = body->find("error"); e != body->end()) {
            if (e->is_object() && e->contains("message") && (*e)["message"].is_string()) message = &(*e)["message"];
            else if (e->is_string()) message = &*e;
        }
        if (!message)
            if (auto m = body->find("message"); m != body->end() && m->is_string()) message = &*m;
        if (message) return clean(message->get<std::string>(), apiKey);
    }
    return clean(text, apiKey, 120);
}

namespace {

class ModelAdapter final : public Adapter {
public:
    ModelAdapter(ModelConfig config, std::string apiKey, ModelAdapterOptions options)
        : config_(std::move(config)), apiKey_(std::move(apiKey)), options_(options),
          label_(fmt::format("model '{}' ({} {})", config_.name, config_.provider, config_.model)),
          random_(std::random_device{}()) {}

    const char* kind() const override { return "model"; }

    bool serves(AdapterRequest::Kind kind, const std::string& name) const override {
        return kind == AdapterRequest::Kind::Ask && name == config_.name;
    }

    AdapterReply perform(const AdapterRequest& request) override {
        if (request.kind != AdapterRequest::Kind::Ask)
            return AdapterReply::failure("CapabilityFailed",
                                         fmt::format("{} cannot perform capability '{}'", label_, request.resource));
        const uint64_t timeoutMs = request.timeoutMs ? request.timeoutMs : static_cast<uint64_t>(config_.timeoutMs);
        const auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
        ModelWireRequest wire = modelWireRequest(config_, request);

        HttpRequest http;
        http.method = "POST";
        http.url = wire.url;
        http.body = wire.body.dump(-1, ' ', false, Json::error_handler_t::replace);
        http.headers = {{"Content-Type", "application/json"}, {"Idempotency-Key", request.idempotencyKey}};
        if (isAnthropic(config_)) {
            http.headers.push_back({"anthropic-version", kAnthropicVersion});
            if (!apiKey_.empty()) http.headers.push_back({"x-api-key", apiKey_});
        } else if (!apiKey_.empty()) {
            http.headers.push_back({"Authorization", "Bearer " + apiKey_});
        }

        std::string lastProblem;
        for (int tries = 1;; ++tries) {
            auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
            if (remaining <= 0) return timedOut(timeoutMs, lastProblem);
            http.timeoutMs = static_cast<uint64_t>(remaining);
            HttpResult result = client_.perform(http);
            std::optional<uint64_t> retryAfter;
            if (!result.ok()) {
                const HttpError& e = result.error;
                if (e.kind == HttpError::Kind::Timeout) return timedOut(timeoutMs, lastProblem);
                if (e.kind != HttpError::Kind::Connect && e.kind != HttpError::Kind::Transfer)
                    return AdapterReply::failure("CapabilityFailed", fmt::format("{}: {}", label_, clean(e.message, apiKey_)));
                lastProblem = clean(e.message, apiKey_);
            } else if (result.response->status == 200) {
                return answered(*result.response, wire.wrapped, tries);
            } else {
                const long status = result.response->status;
                lastProblem = fmt::format("HTTP {} from {}: {}", status, redactedUrl(http.url),
                                          providerMessage(result.response->body, apiKey_));
                // 429 (rate limit), 408, 409 (a conflicting idempotent request in progress) and
                // 5xx (529: Anthropic's "overloaded") are worth another try; anything else — a bad
                // key, a bad request, an unknown model — is not.
                const bool retryable = status == 429 || status == 408 || status == 409 || status >= 500;
                if (!retryable) return AdapterReply::failure("CapabilityFailed", fmt::format("{}: {}", label_, lastProblem));
                if (const std::string* after = result.response->header("retry-after")) retryAfter = parseRetryAfter(*after);
            }
            if (tries >= options_.maxHttpAttempts)
                return AdapterReply::failure("CapabilityFailed",
                                             fmt::format("{}: {} (gave up after {} tries)", label_, lastProblem, tries));
            const uint64_t wait = retryAfter ? *retryAfter : backoff(tries);
            remaining = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
            if (remaining <= 0 || wait >= static_cast<uint64_t>(remaining))
                return AdapterReply::failure(
                    "CapabilityFailed",
                    fmt::format("{}: {} (after {} tr{}; {} would pass the call's deadline of {} ms)", label_,
                                lastProblem, tries, tries == 1 ? "y" : "ies",
                                retryAfter ? fmt::format("waiting the {} ms Retry-After asks for", wait)
                                           : "waiting longer",
                                timeoutMs));
            std::this_thread::sleep_for(std::chrono::milliseconds(wait));
        }
    }

private:
    ModelConfig config_;
    std::string apiKey_;
    ModelAdapterOptions options_;
    std::string label_;
    HttpClient client_;
    std::minstd_rand random_;

    uint64_t backoff(int tries) {
        uint64_t wait = options_.firstBackoffMs;
        for (int i = 1; i < tries && wait < options_.mostBackoffMs; ++i) wait *= 2;
        wait = std::min(wait, options_.mostBackoffMs);
        return wait - std::uniform_int_distribution<uint64_t>(0, wait / 4)(random_);
    }

    AdapterReply timedOut(uint64_t timeoutMs, const std::string& lastProblem) const {
        return AdapterReply::failure(
            "Timeout", fmt::format("{}: no answer within {} ms{}", label_, timeoutMs,
                                   lastProblem.empty() ? "" : " (last problem: " + lastProblem + ")"));
    }

    AdapterReply answered(const HttpResponse& response, bool wrapped, int tries) const {
        ModelWireAnswer answer = readModelAnswer(config_, response.body, wrapped, apiKey_);
        AdapterReply reply = std::move(answer.reply);
        if (!reply.ok) reply.message = fmt::format("{}: {}", label_, reply.message);
        reply.costUsd = modelCost(config_, answer.inputTokens, answer.outputTokens);
        Json meta = {{"provider", config_.provider}, {"model", config_.model}, {"http_attempts", tries}};
        meta["input_tokens"] = answer.inputTokens ? Json(*answer.inputTokens) : Json(nullptr);
        meta["output_tokens"] = answer.outputTokens ? Json(*answer.outputTokens) : Json(nullptr);
        for (const char* header : {"x-request-id", "request-id"})
            if (const std::string* id = response.header(header)) meta["request_id"] = clean(*id, apiKey_, 100);
        reply.meta = std::move(meta);
        return reply;
    }
};

}  // namespace

std::unique_ptr<Adapter> makeModelAdapter(const ModelConfig& config, std::string& error,
                                          const ModelAdapterOptions& options) {
    std::string apiKey;
    if (!config.apiKeyEnv.empty()) {
        const char* value = std::getenv(config.apiKeyEnv.c_str());
        if (!value || !*value) {
            error = fmt::format("model '{}': the environment variable {} is not set; export the API key in it (for a "
                                "server that needs no key, set api_key_env = \"\")",
                                config.name, config.apiKeyEnv);
            return nullptr;
        }
        apiKey = value;
    }
    std::string why;
    if (!httpClientAvailable(why)) {
        error = fmt::format("model '{}': {}", config.name, why);
        return nullptr;
    }
    return std::make_unique<ModelAdapter>(config, std::move(apiKey), options);
}

}  // namespace remit
