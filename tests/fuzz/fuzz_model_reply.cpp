// libFuzzer harness for a model's answer as it reaches the runtime: JSON text (what a model
// provider returns through its adapter) converted to a value of the type the program asked for
// (runtime/value_json.h, valueFromJson) — the check whose failure is R0502 "model output does not
// match the declared type". The model is the least trusted party there is, so any text must be
// either a value of the type or a mismatch with its path.
//
// The input is parsed as the adapter's reader parses it (runtime/json_text.h) and converted to
// each of a fixed set of types: scalars, an enum, records with every scalar,
// lists with and without `max`, nested records and lists. The harness traps when a promise breaks:
//   - a conversion gives exactly one of a value and a mismatch (neither only when the heap ran out);
//   - it follows the documented rules exactly, checked by an independent reading of them (fits()
//     below): a value exactly when the JSON fits the type, a mismatch whose path starts at the root
//     otherwise;
//   - a value converts back to JSON of the type's exact shape (Int an integer, Float a float,
//     fields in declared order) holding the same data as the answer, and that JSON converts again
//     to an equal value with the same JSON, byte for byte.
//
// Build and run: `scripts/fuzz model_reply SECONDS`. Replay:
// build/fuzz/tests/fuzz/fuzz_model_reply_replay FILE...
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/canonical_json.h"
#include "runtime/heap.h"
#include "runtime/json_text.h"
#include "runtime/ops.h"
#include "runtime/types.h"
#include "runtime/value_json.h"

namespace {

using namespace remit;

[[noreturn]] void broken(const std::string& what, TypeRef type, const Json& answer) {
    std::string shown = answer.dump(-1, ' ', false, Json::error_handler_t::replace);
    std::fprintf(stderr, "\n*** fuzz_model_reply: %s\n--- type %s\n--- answer (%zu bytes)\n%s\n---\n", what.c_str(),
                 showType(type).c_str(), shown.size(), shown.c_str());
    __builtin_trap();
}

// The documented rules (value_json.h, "In, per type"), read independently of the code under test.
bool fits(const Json& j, TypeRef t) {
    switch (t->kind) {
        case TypeKind::Never:
            return false;
        case TypeKind::Unit:
            return j.is_null();
        case TypeKind::Bool:
            return j.is_boolean();
        case TypeKind::Int:
            if (j.is_number_unsigned()) return j.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX);
            if (j.is_number_integer()) return true;
            if (j.is_number_float()) {
                double d = j.get<double>();
                return std::isfinite(d) && std::trunc(d) == d && d >= -9223372036854775808.0 &&
                       d < 9223372036854775808.0;
            }
            return false;
        case TypeKind::Float:
            return j.is_number() && (!j.is_number_float() || std::isfinite(j.get<double>()));
        case TypeKind::Str:
            return j.is_string();
        case TypeKind::Enum:
            if (!j.is_string()) return false;
            for (const std::string& o : t->options)
                if (o == j.get_ref<const std::string&>()) return true;
            return false;
        case TypeKind::List:
            if (!j.is_array() || (t->max && static_cast<int64_t>(j.size()) > *t->max)) return false;
            for (const Json& item : j)
                if (!fits(item, t->elem)) return false;
            return true;
        case TypeKind::Record:
            if (!j.is_object() || j.size() != t->fields.size()) return false;
            for (const RecordFieldType& f : t->fields) {
                auto it = j.find(f.name);
                if (it == j.end() || !fits(*it, f.type)) return false;
            }
            return true;
    }
    return false;
}

double numberOf(const Json& j) {
    if (j.is_number_unsigned()) return static_cast<double>(j.get<uint64_t>());
    if (j.is_number_integer()) return static_cast<double>(j.get<int64_t>());
    return j.get<double>();
}

// `out` (valueToJson of the converted value) has the type's exact shape and the answer's data.
bool sameData(const Json& answer, const Json& out, TypeRef t) {
    switch (t->kind) {
        case TypeKind::Never:
            return false;
        case TypeKind::Unit:
            return out.is_null();
        case TypeKind::Bool:
            return out.is_boolean() && out == answer;
        case TypeKind::Int: {
            if (!out.is_number_integer()) return false;
            if (answer.is_number_float()) return numberOf(out) == answer.get<double>();
            // Both within the 64-bit range here (fits() held); nlohmann may store either as unsigned.
            auto asInt = [](const Json& j) {
                return j.is_number_unsigned() ? static_cast<int64_t>(j.get<uint64_t>()) : j.get<int64_t>();
            };
            return asInt(out) == asInt(answer);
        }
        case TypeKind::Float:
            return out.is_number_float() && out.get<double>() == numberOf(answer);
        case TypeKind::Str:
        case TypeKind::Enum:
            return out.is_string() && out == answer;
        case TypeKind::List:
            if (!out.is_array() || out.size() != answer.size()) return false;
            for (size_t i = 0; i < out.size(); ++i)
                if (!sameData(answer[i], out[i], t->elem)) return false;
            return true;
        case TypeKind::Record: {
            if (!out.is_object() || out.size() != t->fields.size()) return false;
            size_t i = 0;
            for (auto it = out.begin(); it != out.end(); ++it, ++i) {
                const RecordFieldType& f = t->fields[i];
                if (it.key() != f.name || !sameData(answer.at(f.name), it.value(), f.type)) return false;
            }
            return true;
        }
    }
    return false;
}

struct Types {
    TypeArena arena;
    std::vector<TypeRef> all;
    Types() {
        TypeArena& a = arena;
        TypeRef verdict = a.enumOf({"approve", "reject", "escalate"}, "Verdict");
        TypeRef ticket = a.record({{"id", a.integer()},
                                   {"title", a.str()},
                                   {"score", a.floating()},
                                   {"urgent", a.boolean()},
                                   {"labels", a.list(a.str(), 3)}},
                                  "Ticket");
        TypeRef named = a.record({{"name", a.str()}, {"n", a.integer()}});
        TypeRef nested = a.record({{"a", a.record({{"b", a.list(a.list(a.integer(), 2), 2)}, {"c", verdict}})},
                                   {"d", a.floating()},
                                   {"e", a.list(ticket, 2)}});
        all = {a.integer(),
               a.floating(),
               a.str(),
               a.boolean(),
               a.unit(),
               verdict,
               ticket,
               a.list(named, 5),
               a.list(a.floating(), std::nullopt),
               a.list(a.integer(), 0),
               nested};
    }
};

const Types& types() {
    static const Types t;
    return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    std::string error;
    std::optional<Json> answer = parseOrderedJsonText("the model output", text, error);
    if (!answer) return 0;
    for (TypeRef type : types().all) {
        Heap heap(size_t(16) << 20);
        ValueFromJson v = valueFromJson(heap, *answer, type, "$");
        if (heap.failed()) continue;  // R0701: the answer is larger than the run's memory
        if (v.value.has_value() == v.mismatch.has_value())
            broken("not exactly one of a value and a mismatch", type, *answer);
        bool expected = fits(*answer, type);
        if (v.mismatch) {
            if (expected) broken("an answer that fits was refused: " + v.mismatch->text(), type, *answer);
            if (v.mismatch->path.rfind("$", 0) != 0 || v.mismatch->problem.empty())
                broken("a mismatch without its path or problem", type, *answer);
            continue;
        }
        if (!expected) broken("an answer that does not fit was accepted", type, *answer);
        std::optional<Json> out = valueToJson(*v.value);
        if (!out) broken("a converted value has no JSON", type, *answer);
        if (!sameData(*answer, *out, type))
            broken("the value's JSON is not the answer's data in the type's shape", type, *answer);
        ValueFromJson again = valueFromJson(heap, *out, type, "$");
        if (heap.failed()) continue;
        if (!again.value) broken("the value's own JSON does not convert back", type, *out);
        if (!valuesEqual(*v.value, *again.value)) broken("converting the value's JSON gives another value", type, *out);
        std::optional<Json> outAgain = valueToJson(*again.value);
        if (!outAgain || canonicalJson(*outAgain) != canonicalJson(*out))
            broken("the JSON of the value converted back differs", type, *out);
    }
    return 0;
}
