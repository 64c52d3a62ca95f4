// See json_schema.h. Recursion depth is bounded by the type's nesting (kMaxTypeDepth).
#include "runtime/json_schema.h"

#include "runtime/json_text.h"

namespace remit {

Json jsonSchemaFor(TypeRef type) {
    if (!type) return Json{{"type", "null"}};
    switch (type->kind) {
        case TypeKind::Int: return Json{{"type", "integer"}};
        case TypeKind::Float: return Json{{"type", "number"}};
        case TypeKind::Bool: return Json{{"type", "boolean"}};
        case TypeKind::Str: return Json{{"type", "string"}};
        case TypeKind::Enum: {
            Json options = Json::array();
            for (const std::string& o : type->options) options.push_back(o);
            return Json{{"type", "string"}, {"enum", options}};
        }
        case TypeKind::List: {
            Json schema = Json{{"type", "array"}, {"items", jsonSchemaFor(type->elem)}};
            if (type->max) schema["maxItems"] = *type->max;
            return schema;
        }
        case TypeKind::Record: {
            Json properties = Json::object();
            Json required = Json::array();
            for (const RecordFieldType& f : type->fields) {
                properties[f.name] = jsonSchemaFor(f.type);
                required.push_back(f.name);
            }
            return Json{{"type", "object"},
                     {"properties", properties},
                     {"required", required},
                     {"additionalProperties", false}};
        }
        case TypeKind::Never:
        case TypeKind::Unit: break;
    }
    return Json{{"type", "null"}};
}

Json projectOntoSchema(const Json& value, const Json& schema) {
    if (!schema.is_object()) return value;
    auto type = schema.find("type");
    if (type == schema.end() || !type->is_string()) return value;
    if (*type == "object" && value.is_object()) {
        auto properties = schema.find("properties");
        if (properties == schema.end() || !properties->is_object()) return value;
        Json out = Json::object();
        for (const auto& [name, propertySchema] : properties->items())
            if (auto it = value.find(name); it != value.end()) out[name] = projectOntoSchema(*it, propertySchema);
        return out;
    }
    if (*type == "array" && value.is_array()) {
        auto items = schema.find("items");
        if (items == schema.end()) return value;
        Json out = Json::array();
        for (const Json& element : value) out.push_back(projectOntoSchema(element, *items));
        return out;
    }
    return value;
}

}  // namespace remit
