// See fixture_adapter.h. Every read of the document is type-checked at load time, so perform()
// only touches keys whose types are known.
#include "broker/fixture_adapter.h"

#include <fmt/format.h>

#include "runtime/canonical_json.h"
#include "runtime/host_model.h"
#include "runtime/json_text.h"
#include "runtime/source.h"
#include "runtime/suggest.h"

namespace remit {

namespace {

const char* kHint =
    "a fixture file is {\"capabilities\": {\"res\": [{\"args\": {...}, \"output\": ...}]}, "
    "\"model\": [{\"match\": \"...\", \"output\": ...}]} (see docs/broker.md)";

bool checkEntry(const nlohmann::json& e, bool model, const std::string& where, std::string& error) {
    if (!e.is_object()) {
        error = fmt::format("{} must be an object", where);
        return false;
    }
    auto wrong = [&](const char* key, const char* what) {
        error = fmt::format("{}.{} must be {}", where, key, what);
        return false;
    };
    if (e.contains("args") && !e["args"].is_object()) return wrong("args", "an object of argument values");
    if (e.contains("repeat") && !e["repeat"].is_boolean()) return wrong("repeat", "true or false");
    if (e.contains("cost_usd") && !(e["cost_usd"].is_number() && e["cost_usd"].get<double>() >= 0))
        return wrong("cost_usd", "a non-negative number");
    if (e.contains("error") && !e["error"].is_string()) return wrong("error", "a message string");
    if (e.contains("error_code")) {
        const auto& c = e["error_code"];
        if (!c.is_string() || (c != "CapabilityFailed" && c != "Timeout" && c != "ModelOutputInvalid"))
            return wrong("error_code", "\"CapabilityFailed\", \"Timeout\" or \"ModelOutputInvalid\"");
    }
    if (model) {
        if (e.contains("agent") && !(e["agent"].is_string() || e["agent"].is_null()))
            return wrong("agent", "an agent name");
        if (e.contains("match") && !(e["match"].is_string() || e["match"].is_null()))
            return wrong("match", "a string");
        if (!e.contains("output") && !e.contains("answer") && !e.contains("error")) {
            error = fmt::format("{} needs \"output\", \"answer\" or \"error\"", where);
            return false;
        }
    }
    return true;
}

bool checkList(const nlohmann::json& list, bool model, const std::string& where, std::string& error) {
    if (!list.is_array()) {
        error = fmt::format("{} must be a list of entries", where);
        return false;
    }
    for (size_t i = 0; i < list.size(); ++i)
        if (!checkEntry(list[i], model, fmt::format("{}[{}]", where, i), error)) return false;
    return true;
}

// Python's repr of a str, for the prototype's `no fixture output for … prompt='…'` message.
std::string pyRepr(const std::string& s) {
    char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
    std::string out(1, quote);
    for (char c : s) {
        if (c == '\\') out += "\\\\";
        else if (c == quote) out += std::string("\\") + c;
        else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
        else out += c;
    }
    return out + quote;
}


AdapterReply failure(const nlohmann::json& entry) {
    AdapterReply reply;
    reply.errorCode = entry.value("error_code", std::string("CapabilityFailed"));
    reply.message = entry["error"].get<std::string>();
    return reply;
}

}  // namespace

namespace {

// Python's `==` on two JSON values, each of either JSON type (a call's arguments are a Json, a
// fixture's `args` an nlohmann::json, and neither is converted to the other to compare them).
template <class A, class B>
bool pyEqual(const A& a, const B& b) {
    if (a.is_number() && b.is_number()) {
        if (a.is_number_float() || b.is_number_float()) return a.template get<double>() == b.template get<double>();
        // Integers: exact, across nlohmann's signed and unsigned storage (a negative never equals
        // an unsigned, whatever its bits).
        auto negative = [](const auto& x) {
            return x.is_number_integer() && !x.is_number_unsigned() && x.template get<int64_t>() < 0;
        };
        if (negative(a) || negative(b))
            return negative(a) && negative(b) && a.template get<int64_t>() == b.template get<int64_t>();
        return a.template get<uint64_t>() == b.template get<uint64_t>();
    }
    if (a.type() != b.type()) return false;
    switch (a.type()) {
        case nlohmann::json::value_t::array:
            if (a.size() != b.size()) return false;
            for (size_t i = 0; i < a.size(); ++i)
                if (!pyEqual(a[i], b[i])) return false;
            return true;
        case nlohmann::json::value_t::object:
            if (a.size() != b.size()) return false;
            for (auto it = a.begin(); it != a.end(); ++it) {
                auto other = b.find(it.key());
                if (other == b.end() || !pyEqual(it.value(), *other)) return false;
            }
            return true;
        case nlohmann::json::value_t::string:
            return a.template get_ref<const std::string&>() == b.template get_ref<const std::string&>();
        case nlohmann::json::value_t::boolean:
            return a.template get<bool>() == b.template get<bool>();
        case nlohmann::json::value_t::binary:
            return a.get_binary() == b.get_binary();
        default:  // null (a discarded value equals nothing, as nlohmann's == says)
            return a.is_null();
    }
}

}  // namespace

bool pyJsonEqual(const nlohmann::json& a, const nlohmann::json& b) { return pyEqual(a, b); }
bool pyJsonEqual(const Json& a, const nlohmann::json& b) { return pyEqual(a, b); }

Json shapeAnswer(const nlohmann::json& answer, const Json& schema) {
    const Json* s = &schema;
    for (const char* key : {"anyOf", "oneOf", "allOf"})
        if (s->is_object() && s->contains(key) && (*s)[key].is_array() && !(*s)[key].empty()) s = &(*s)[key][0];
    std::string type = s->is_object() && s->contains("type") && (*s)["type"].is_string() ? (*s)["type"].get<std::string>() : "";
    if (type == "object") {
        Json out = Json::object();
        if (s->contains("properties") && (*s)["properties"].is_object())
            for (auto it = (*s)["properties"].begin(); it != (*s)["properties"].end(); ++it)
                out[it.key()] = shapeAnswer(answer, it.value());
        return out;
    }
    if (type == "boolean") {
        std::string text = answer.is_string() ? answer.get<std::string>()
                           : answer.is_boolean() ? (answer.get<bool>() ? "true" : "false")
                                                 : "";
        for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return text == "business" || text == "yes" || text == "true";
    }
    if (type == "number" || type == "integer") return 0;
    if (type == "array") return Json::array();
    return Json(answer);
}

std::unique_ptr<FixtureAdapter> FixtureAdapter::load(const std::string& path, std::string& error, std::string& hint) {
    // A regular file of bounded size and nesting (runtime/json_text.h): a FIFO, /dev/zero or
    // JSON nested 200,000 deep is refused before anything is built from it.
    std::optional<nlohmann::json> doc = readJsonFile(path, kMaxFixtureBytes, "a fixtures file", error);
    if (!doc) {
        hint = kHint;
        return nullptr;
    }
    return fromJson(std::move(*doc), path, error, hint);
}

std::unique_ptr<FixtureAdapter> FixtureAdapter::fromJson(nlohmann::json doc, const std::string& file,
                                                         std::string& error, std::string& hint) {
    std::string problem;
    bool ok = true;
    if (!doc.is_object()) {
        problem = "the file must hold one JSON object";
        ok = false;
    }
    if (ok && doc.contains("approve_all") && !doc["approve_all"].is_boolean()) {
        problem = "approve_all must be true or false";
        ok = false;
    }
    if (ok && doc.contains("capabilities")) {
        if (!doc["capabilities"].is_object()) {
            problem = "capabilities must be an object of resource -> list of entries";
            ok = false;
        }
        for (auto it = doc["capabilities"].begin(); ok && it != doc["capabilities"].end(); ++it)
            ok = checkList(it.value(), false, fmt::format("capabilities.\"{}\"", it.key()), problem);
    }
    if (ok && doc.contains("models")) {
        if (!doc["models"].is_object()) {
            problem = "models must be an object of model -> list of entries";
            ok = false;
        }
        for (auto it = doc["models"].begin(); ok && it != doc["models"].end(); ++it)
            ok = checkList(it.value(), true, fmt::format("models.\"{}\"", it.key()), problem);
    }
    if (ok && doc.contains("model")) ok = checkList(doc["model"], true, "model", problem);
    if (!ok) {
        error = fmt::format("invalid fixtures {}: {}", file, problem);
        hint = kHint;
        return nullptr;
    }
    auto adapter = std::unique_ptr<FixtureAdapter>(new FixtureAdapter());
    adapter->doc_ = std::move(doc);
    adapter->file_ = file;
    adapter->index();
    return adapter;
}

void FixtureAdapter::index() {
    auto capabilities = doc_.find("capabilities");
    if (capabilities == doc_.end()) return;
    for (auto it = capabilities->begin(); it != capabilities->end(); ++it) {
        std::vector<CapabilityEntry>& entries = capabilities_[it.key()];
        for (const nlohmann::json& e : it.value()) {
            CapabilityEntry entry;
            entry.entry = &e;
            if (auto args = e.find("args"); args != e.end()) entry.args = &*args;
            entry.repeat = e.value("repeat", false);
            if (auto output = e.find("output"); output != e.end()) entry.output = Json(*output);
            if (auto cost = e.find("cost_usd"); cost != e.end()) entry.costUsd = cost->get<double>();
            entries.push_back(std::move(entry));
        }
    }
}

bool FixtureAdapter::checkAgainst(const HostModel& host, std::string& error, std::string& hint) const {
    auto capabilities = doc_.find("capabilities");
    if (capabilities == doc_.end()) return true;
    for (auto it = capabilities->begin(); it != capabilities->end(); ++it) {
        const Capability* cap = host.capability(it.key());
        if (!cap) continue;  // a fixture for another program's capability is never asked for
        for (size_t i = 0; i < it.value().size(); ++i) {
            auto args = it.value()[i].find("args");
            if (args == it.value()[i].end()) continue;
            for (auto arg = args->begin(); arg != args->end(); ++arg) {
                if (cap->param(arg.key())) continue;
                std::vector<std::string> params;
                for (const CapabilityParam& p : cap->params) params.push_back(p.name);
                error = fmt::format("invalid fixtures {}: capabilities.\"{}\"[{}].args names '{}', which '{}' does not "
                                    "take (its parameters: {})",
                                    file_, it.key(), i, arg.key(), it.key(),
                                    params.empty() ? std::string("none") : fmt::format("{}", fmt::join(params, ", ")));
                std::string why = "an entry matches a call by its arguments, so this one could never be used";
                std::optional<std::string> close = closestName(arg.key(), params);
                hint = close ? fmt::format("did you mean '{}'? {}", *close, why) : why;
                return false;
            }
        }
    }
    return true;
}

std::unique_ptr<FixtureAdapter> FixtureAdapter::empty() {
    auto adapter = std::unique_ptr<FixtureAdapter>(new FixtureAdapter());
    adapter->doc_ = nlohmann::json::object();
    return adapter;
}

AdapterReply FixtureAdapter::perform(const AdapterRequest& request) {
    return request.kind == AdapterRequest::Kind::Call ? call(request) : ask(request);
}

AdapterReply FixtureAdapter::call(const AdapterRequest& request) {
    // The entries were indexed when the file was loaded (index()): the request's arguments are
    // matched as they are, and the output is already a Json.
    auto found = capabilities_.find(request.resource);
    for (CapabilityEntry& e : found != capabilities_.end() ? found->second : noEntries_) {
        if (e.used && !e.repeat) continue;
        bool matches = true;
        if (e.args)
            for (auto it = e.args->begin(); matches && it != e.args->end(); ++it) {
                auto given = request.args.find(it.key());
                matches = given != request.args.end() && pyJsonEqual(*given, it.value());
            }
        if (!matches) continue;
        e.used = true;
        if (e.entry->contains("error")) return failure(*e.entry);
        AdapterReply reply;
        reply.ok = true;
        reply.result = e.output;
        reply.costUsd = e.costUsd;
        static const Json kMeta = {{"adapter", "fixture"}};  // a copy, not a tree built from a list each call
        reply.meta = kMeta;
        return reply;
    }
    AdapterReply reply;
    reply.errorCode = "CapabilityFailed";
    std::string shown = dumpJson(request.args, JsonTextStyle{});  // json.dumps(args): ", " ": ", ASCII
    reply.message = fmt::format("no fixture for {}({})", request.resource, shown.substr(0, 120));
    return reply;
}

AdapterReply FixtureAdapter::ask(const AdapterRequest& request) {
    static const nlohmann::json kNone = nlohmann::json::array();
    const nlohmann::json* entries = &kNone;
    if (doc_.contains("models") && doc_["models"].contains(request.model))
        entries = &doc_["models"][request.model];
    else if (doc_.contains("model"))
        entries = &doc_["model"];
    std::vector<bool>& used = used_["m:" + request.model];
    used.resize(entries->size(), false);
    for (size_t i = 0; i < entries->size(); ++i) {
        const nlohmann::json& e = (*entries)[i];
        if (used[i] && !e.value("repeat", false)) continue;
        if (e.contains("agent") && e["agent"].is_string() && e["agent"].get<std::string>() != request.agent) continue;
        if (e.contains("match") && e["match"].is_string() && !e["match"].get<std::string>().empty() &&
            request.renderedPrompt.find(e["match"].get<std::string>()) == std::string::npos)
            continue;
        used[i] = true;
        if (e.contains("error")) return failure(e);
        AdapterReply reply;
        reply.ok = true;
        reply.result =
            e.contains("answer") ? shapeAnswer(e["answer"], request.schema) : Json(e.value("output", nlohmann::json()));
        reply.costUsd = e.contains("cost_usd") ? e["cost_usd"].get<double>() : 0.0;
        reply.meta = {{"adapter", "fixture"}};
        return reply;
    }
    AdapterReply reply;
    reply.errorCode = "CapabilityFailed";
    reply.message = fmt::format("no fixture output for agent={} prompt={}",
                                request.agent.empty() ? std::string("None") : pyRepr(request.agent),
                                pyRepr(std::string(firstCodePoints(request.prompt, 60))));
    return reply;
}

}  // namespace remit
