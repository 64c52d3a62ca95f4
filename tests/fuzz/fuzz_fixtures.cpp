// libFuzzer harness for fixture files (broker/fixture_adapter.h): the canned answers `--fixtures
// FILE` and the tests of a program run on — files that travel with programs, so a stranger may
// well have written one. FixtureAdapter::load is readJsonFile (a bounded read, then parseJsonText)
// followed by fromJson; the harness runs parseJsonText and fromJson on the input's bytes, then asks
// the adapter what a run would ask: calls of every capability the file names and asks of every
// model, with schemas of a fixed set of types, and shapes every `answer` in the file to them.
// It traps when a promise breaks:
//   - a load gives exactly one of an adapter and an error naming the file, with a hint;
//   - a reply is ok with no error code, or a failure that is CapabilityFailed, Timeout or
//     ModelOutputInvalid with a message; a cost is finite and non-negative;
//   - each entry is used once (repeat: true aside): of n + 1 calls of a capability whose n entries
//     do not repeat, at least one finds no fixture; when none of them has `args`, call i gets entry
//     i, in file order (its output, or its error);
//   - shapeAnswer fits a type without strings (Bool, Int, Float, lists, records of them) whatever
//     the answer, so the broker's check (runtime/value_json.h) takes it.
//
// Build and run: `scripts/fuzz fixtures SECONDS`. Replay: build/fuzz/tests/fuzz/fuzz_fixtures_replay FILE...
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "broker/fixture_adapter.h"
#include "runtime/heap.h"
#include "runtime/json_schema.h"
#include "runtime/json_text.h"
#include "runtime/types.h"
#include "runtime/value_json.h"

namespace {

using namespace remit;

[[noreturn]] void broken(const std::string& what, std::string_view input) {
    std::fprintf(stderr, "\n*** fuzz_fixtures: %s\n--- input (%zu bytes)\n%.*s\n---\n", what.c_str(), input.size(),
                 static_cast<int>(input.size()), input.data());
    __builtin_trap();
}

// How many resources, entries and calls one input may make the harness try: enough for every
// selection rule, few enough to keep an execution short.
constexpr size_t kMaxResources = 8;
constexpr size_t kMaxEntries = 32;

struct Types {
    TypeArena arena;
    std::vector<TypeRef> stringless;  // shapeAnswer must fit these
    std::vector<TypeRef> withStrings;
    Types() {
        TypeArena& a = arena;
        TypeRef scores = a.record({{"ok", a.boolean()}, {"n", a.integer()}, {"x", a.floating()}}, "Scores");
        stringless = {a.boolean(),  a.integer(),
                      a.floating(), a.list(a.integer(), 3),
                      scores,       a.record({{"inner", scores}, {"flags", a.list(a.boolean(), std::nullopt)}})};
        withStrings = {a.str(), a.enumOf({"business", "personal"}, "Kind"),
                       a.record({{"kind", a.enumOf({"yes", "no"})}, {"why", a.str()}, {"spam", a.boolean()}})};
    }
};

const Types& types() {
    static const Types t;
    return t;
}

void checkReply(const AdapterReply& reply, std::string_view input) {
    if (reply.ok) {
        if (!reply.errorCode.empty()) broken("an ok reply with an error code", input);
    } else if ((reply.errorCode != "CapabilityFailed" && reply.errorCode != "Timeout" &&
                reply.errorCode != "ModelOutputInvalid")) {
        broken("a failure with an undocumented code '" + reply.errorCode + "'", input);
    }
    if (reply.costUsd && (!std::isfinite(*reply.costUsd) || *reply.costUsd < 0)) broken("a bad cost", input);
}

bool noFixture(const AdapterReply& reply) {
    return !reply.ok && reply.errorCode == "CapabilityFailed" && reply.message.rfind("no fixture for ", 0) == 0;
}

// Every `answer` of a model entry list, shaped to each type.
void shapeAnswers(const nlohmann::json& entries, std::string_view input) {
    if (!entries.is_array()) return;
    for (size_t i = 0; i < entries.size() && i < kMaxEntries; ++i) {
        if (!entries[i].is_object() || !entries[i].contains("answer")) continue;
        const nlohmann::json& answer = entries[i]["answer"];
        for (TypeRef type : types().stringless) {
            Json shaped = shapeAnswer(answer, jsonSchemaFor(type));
            Heap heap(size_t(16) << 20);
            ValueFromJson v = valueFromJson(heap, shaped, type, "$");
            if (!v.value && !heap.failed())
                broken("a shaped answer does not fit " + showType(type) + ": " + v.mismatch->text(), input);
        }
        for (TypeRef type : types().withStrings) (void)shapeAnswer(answer, jsonSchemaFor(type));
    }
}

void callEach(FixtureAdapter& adapter, const std::string& resource, const nlohmann::json& entries,
              std::string_view input) {
    if (!entries.is_array() || entries.size() > kMaxEntries) return;
    bool repeats = false, withArgs = false;
    for (const nlohmann::json& e : entries) {
        repeats = repeats || e.value("repeat", false);
        withArgs = withArgs || e.contains("args");
    }
    AdapterRequest request;
    request.kind = AdapterRequest::Kind::Call;
    request.resource = resource;
    request.args = Json::object();
    size_t found = 0;
    for (size_t i = 0; i <= entries.size(); ++i) {
        // The entry's own args (so it matches), or none; the last call has none.
        if (i < entries.size() && entries[i].contains("args"))
            request.args = Json(entries[i]["args"]);
        else
            request.args = Json::object();
        AdapterReply reply = adapter.perform(request);
        checkReply(reply, input);
        if (!noFixture(reply)) ++found;
        if (repeats || withArgs || i == entries.size()) continue;
        const nlohmann::json& e = entries[i];
        if (e.contains("error")) {
            if (reply.ok || reply.message != e["error"].get<std::string>())
                broken("call " + std::to_string(i) + " did not get entry " + std::to_string(i) + "'s error", input);
        } else if (!reply.ok || reply.result != (e.contains("output") ? Json(e["output"]) : Json(nullptr))) {
            broken("call " + std::to_string(i) + " did not get entry " + std::to_string(i) + "'s output", input);
        }
    }
    // An entry's error may itself read "no fixture for …", so only an upper bound holds.
    if (!repeats && found > entries.size()) broken("an entry was used twice", input);
}

void askEach(FixtureAdapter& adapter, const std::string& model, const nlohmann::json& entries, std::string_view input) {
    AdapterRequest request;
    request.kind = AdapterRequest::Kind::Ask;
    request.model = model;
    size_t n = entries.is_array() ? std::min(entries.size(), kMaxEntries) : 0;
    size_t t = 0;
    for (size_t i = 0; i <= n; ++i) {
        const nlohmann::json* e = i < n && entries[i].is_object() ? &entries[i] : nullptr;
        // The entry's own agent and match, so that it can be selected.
        request.agent = e && e->contains("agent") && (*e)["agent"].is_string() ? (*e)["agent"].get<std::string>() : "";
        std::string match =
            e && e->contains("match") && (*e)["match"].is_string() ? (*e)["match"].get<std::string>() : "";
        request.prompt = "Classify: " + match;
        request.renderedPrompt = request.prompt;
        const std::vector<TypeRef>& pool = i % 2 == 0 ? types().stringless : types().withStrings;
        TypeRef type = pool[t++ % pool.size()];
        request.schema = jsonSchemaFor(type);
        request.typeName = showType(type);
        // Every third ask is first replayed, as a resume answers it from the trace: that uses up
        // the entry it would have got.
        if (i % 3 == 2) adapter.replayed(request);
        AdapterReply reply = adapter.perform(request);
        checkReply(reply, input);
        if (reply.ok) {
            Heap heap(size_t(16) << 20);
            (void)valueFromJson(heap, reply.result, type, "$");  // what the broker does with it
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    const std::string file = "fixtures.json";
    std::string error, hint;
    std::optional<nlohmann::json> doc = parseJsonText(file, text, error);
    if (!doc) {
        if (error.empty()) broken("a parse failure without a message", text);
        return 0;
    }
    const nlohmann::json copy = *doc;  // fromJson takes the document
    std::unique_ptr<FixtureAdapter> adapter = FixtureAdapter::fromJson(std::move(*doc), file, error, hint);
    if (!adapter) {
        if (error.find(file) == std::string::npos || hint.empty())
            broken("a refusal that does not name the file, or has no hint", text);
        return 0;
    }
    if (!error.empty()) broken("an adapter together with an error", text);
    (void)adapter->approveAll();

    size_t resources = 0;
    if (copy.contains("capabilities"))
        for (auto it = copy["capabilities"].begin(); it != copy["capabilities"].end() && resources < kMaxResources;
             ++it, ++resources)
            callEach(*adapter, it.key(), it.value(), text);
    // A capability the file does not name: no fixture.
    AdapterRequest unknown;
    unknown.resource = "fuzz.unknown";
    unknown.args = Json{{"q", "x"}};
    if (!copy.contains("capabilities") || !copy["capabilities"].contains("fuzz.unknown"))
        if (!noFixture(adapter->perform(unknown))) broken("a call of an unnamed capability found a fixture", text);

    if (copy.contains("models"))
        for (auto it = copy["models"].begin(); it != copy["models"].end() && resources < 2 * kMaxResources;
             ++it, ++resources) {
            shapeAnswers(it.value(), text);
            askEach(*adapter, it.key(), it.value(), text);
        }
    if (copy.contains("model")) {
        shapeAnswers(copy["model"], text);
        askEach(*adapter, "llm", copy["model"], text);
    }
    return 0;
}
