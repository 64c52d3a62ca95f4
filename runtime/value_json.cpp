// Value ⇄ JSON (see value_json.h).
#include "runtime/value_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <unordered_map>
#include <vector>

#include "runtime/canonical_json.h"
#include "runtime/json_text.h"
#include "runtime/numfmt.h"
#include "runtime/pytext.h"

namespace remit {

namespace {


size_t intTextSize(int64_t i) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, i);
    return static_cast<size_t>(end - buf);
}

// A scalar's JSON and the length of its compact text (strings without escapes).
Json scalarJson(const Value& v, size_t& size) {
    switch (v.kind()) {
        case ValueKind::Unit:
            size += 4;
            return nullptr;
        case ValueKind::Bool:
            size += v.asBool() ? 4 : 5;
            return v.asBool();
        case ValueKind::Int:
            size += intTextSize(v.asInt());
            return v.asInt();
        case ValueKind::Float:
            size += formatFloatRepr(v.asFloat()).size();
            return v.asFloat();
        case ValueKind::Str:
            size += v.asStr().size() + 2;
            return std::string(v.asStr());
        default:
            return nullptr;
    }
}

// ---- JSON → Value.

std::string_view jsonKindName(const nlohmann::json::value_t type) {
    using T = nlohmann::json::value_t;
    switch (type) {
        case T::null:
            return "null";
        case T::boolean:
            return "boolean";
        case T::number_integer:
        case T::number_unsigned:
        case T::number_float:
            return "number";
        case T::string:
            return "string";
        case T::array:
            return "array";
        case T::object:
            return "object";
        default:
            return "binary data";
    }
}

// A name or string value in a mismatch, quoted as the prototype (Python's repr) quotes it, and cut.
std::string quoteText(std::string_view text) { return pytext::repr(text, 64); }

// Names as Python prints a list of them: ['a', 'b'], the first ten of a longer list then "...".
std::string quoteList(const std::vector<std::string_view>& names) {
    constexpr size_t kShown = 10;
    std::string out = "[";
    for (size_t i = 0; i < names.size() && i < kShown; ++i) out += (i ? ", " : "") + quoteText(names[i]);
    if (names.size() > kShown) out += ", ...";
    return out + "]";
}

template <class Json>
class FromJson {
public:
    FromJson(Heap& heap, TagSetId tags, ProvId prov) : heap_(heap), tags_(tags), prov_(prov) {}

    ValueFromJson run(const Json& json, TypeRef type, std::string_view path) {
        path_.assign(path);
        ValueFromJson out;
        out.value = convert(json, type);
        if (!out.value) out.mismatch = std::move(mismatch_);
        return out;
    }

private:
    Heap& heap_;
    TagSetId tags_;
    ProvId prov_;
    std::string path_;  // of the node being converted; children extend it and restore it
    std::optional<JsonMismatch> mismatch_;
    std::unordered_map<TypeRef, const RecordShape*> shapes_;

    std::optional<Value> fail(std::string problem) {
        mismatch_ = JsonMismatch{path_, std::move(problem)};
        return std::nullopt;
    }
    std::optional<Value> expected(TypeRef type, const Json& json) {
        return fail(fmt::format("expected {}, found {}", showType(type), jsonKindName(json.type())));
    }

    // Recursion follows the type, which is finite and small; JSON nested deeper than its type
    // stops at the first mismatch.
    std::optional<Value> convert(const Json& json, TypeRef type) {
        switch (type->kind) {
            case TypeKind::Never:
                return fail(fmt::format("no value is allowed here, found {}", jsonKindName(json.type())));
            case TypeKind::Unit:
                if (!json.is_null()) return expected(type, json);
                return Value::unit(tags_, prov_);
            case TypeKind::Bool:
                if (!json.is_boolean()) return expected(type, json);
                return Value::boolean(json.template get<bool>(), tags_, prov_);
            case TypeKind::Int:
                return convertInt(json, type);
            case TypeKind::Float: {
                if (json.is_number_integer()) {
                    double d = json.is_number_unsigned() ? static_cast<double>(json.template get<uint64_t>())
                                                         : static_cast<double>(json.template get<int64_t>());
                    return Value::floating(d, tags_, prov_);
                }
                if (!json.is_number_float()) return expected(type, json);
                double d = json.template get<double>();
                if (!std::isfinite(d)) return fail("expected Float, found a number that is not finite");
                return Value::floating(d, tags_, prov_);
            }
            case TypeKind::Str:
                if (!json.is_string()) return expected(type, json);
                return heap_.makeStr(json.template get_ref<const std::string&>(), tags_, prov_);
            case TypeKind::Enum: {
                std::string options = quoteList({type->options.begin(), type->options.end()});
                if (!json.is_string())
                    return fail(fmt::format("expected one of {}, found {}", options, jsonKindName(json.type())));
                const std::string& text = json.template get_ref<const std::string&>();
                if (std::find(type->options.begin(), type->options.end(), text) == type->options.end())
                    return fail(fmt::format("expected one of {}, found {}", options, quoteText(text)));
                return heap_.makeStr(text, tags_, prov_);
            }
            case TypeKind::List:
                return convertList(json, type);
            case TypeKind::Record:
                return convertRecord(json, type);
        }
        return expected(type, json);
    }

    std::optional<Value> convertInt(const Json& json, TypeRef type) {
        if (json.is_number_unsigned()) {
            uint64_t u = json.template get<uint64_t>();
            if (u > static_cast<uint64_t>(INT64_MAX))
                return fail(fmt::format("expected Int, found {} which does not fit in 64 bits", u));
            return Value::integer(static_cast<int64_t>(u), tags_, prov_);
        }
        if (json.is_number_integer()) return Value::integer(json.template get<int64_t>(), tags_, prov_);
        if (!json.is_number_float()) return expected(type, json);
        // An integral float is coerced (models write 3.0 for 3).
        double d = json.template get<double>();
        if (!std::isfinite(d) || std::trunc(d) != d)
            return fail(fmt::format("expected Int, found non-integral number {}", formatFloatRepr(d)));
        if (d < -9223372036854775808.0 || d >= 9223372036854775808.0)
            return fail(fmt::format("expected Int, found {} which does not fit in 64 bits", formatFloatRepr(d)));
        return Value::integer(static_cast<int64_t>(d), tags_, prov_);
    }

    std::optional<Value> convertList(const Json& json, TypeRef type) {
        if (!json.is_array()) return expected(type, json);
        if (type->max && static_cast<int64_t>(json.size()) > *type->max)
            return fail(fmt::format("expected at most {} items, found {}", *type->max, json.size()));
        std::optional<Value> list = heap_.newList(json.size(), tags_, prov_);
        if (!list) return std::nullopt;
        size_t mark = path_.size();
        for (size_t i = 0; i < json.size(); ++i) {
            path_ += fmt::format("[{}]", i);
            std::optional<Value> item = convert(json[i], type->elem);
            path_.resize(mark);
            if (!item || !heap_.appendInPlace(*list, *item)) return std::nullopt;
        }
        return list;
    }

    std::optional<Value> convertRecord(const Json& json, TypeRef type) {
        if (!json.is_object()) return expected(type, json);
        // The prototype's order, which agents learned to repair from: every unexpected field at
        // once, then each declared field in declaration order — missing, or not of its type.
        std::vector<std::string_view> unexpected;
        for (auto it = json.begin(); it != json.end(); ++it)
            if (!type->field(it.key())) unexpected.push_back(it.key());
        if (!unexpected.empty()) return fail(fmt::format("unexpected field(s) {}", quoteList(unexpected)));
        const RecordShape*& shape = shapes_[type];
        if (!shape) {
            std::vector<std::string> names;
            for (const RecordFieldType& field : type->fields) names.push_back(field.name);
            shape = heap_.recordShape(names);
        }
        std::vector<Value> values;
        values.reserve(type->fields.size());
        size_t mark = path_.size();
        for (const RecordFieldType& field : type->fields) {
            auto found = json.find(field.name);
            if (found == json.end()) return fail(fmt::format("missing field {}", quoteText(field.name)));
            path_ += '.';
            path_ += field.name;
            std::optional<Value> v = convert(*found, field.type);
            path_.resize(mark);
            if (!v) return std::nullopt;
            values.push_back(std::move(*v));
        }
        return heap_.makeRecord(shape, values, tags_, prov_);
    }
};

}  // namespace

std::optional<Json> valueToJson(const Value& root, size_t maxBytes) {
    Json out;
    size_t size = 0;
    // A frame per open container; `target` points into its parent, whose storage was reserved
    // up front, so it stays valid while siblings are added.
    struct Frame {
        const Value* container;
        Json* target;
        size_t next;
    };
    std::vector<Frame> stack;
    auto open = [&](const Value& v, Json& target) {
        if (v.kind() == ValueKind::List) {
            target = Json::array();
            target.get_ref<Json::array_t&>().reserve(v.asList().items.size());
            size += 2;
            stack.push_back(Frame{&v, &target, 0});
        } else if (v.kind() == ValueKind::Record) {
            target = Json::object();
            target.get_ref<Json::object_t&>().reserve(v.asRecord().values.size());
            size += 2;
            stack.push_back(Frame{&v, &target, 0});
        } else {
            target = scalarJson(v, size);
        }
    };
    open(root, out);
    while (!stack.empty() && size <= maxBytes) {
        Frame& frame = stack.back();
        const Value& container = *frame.container;
        Json& target = *frame.target;
        size_t i = frame.next++;
        bool isList = container.kind() == ValueKind::List;
        size_t count = isList ? container.asList().items.size() : container.asRecord().values.size();
        if (i == count) {
            stack.pop_back();
            continue;
        }
        if (i > 0) size += 1;  // ","
        if (isList) {
            target.push_back(nullptr);
            open(container.asList().items[i], target.back());  // may push: `frame` is dead now
        } else {
            const RecordObject& record = container.asRecord();
            const std::string& name = record.shape->names[i];
            size += name.size() + 3;  // "name":
            auto [it, inserted] = target.get_ref<Json::object_t&>().emplace(name, nullptr);
            open(record.values[i], it->second);
        }
    }
    if (size > maxBytes) return std::nullopt;
    return out;
}

ValueFromJson valueFromJson(Heap& heap, const nlohmann::json& json, TypeRef type, std::string_view path, TagSetId tags,
                            ProvId prov) {
    return FromJson<nlohmann::json>(heap, tags, prov).run(json, type, path);
}

ValueFromJson valueFromJson(Heap& heap, const Json& json, TypeRef type, std::string_view path, TagSetId tags,
                            ProvId prov) {
    return FromJson<Json>(heap, tags, prov).run(json, type, path);
}

}  // namespace remit
