// See json_schema.h. Recursion depth is bounded by the type's nesting (kMaxTypeDepth).
#include "runtime/json_schema.h"

namespace remit {

nlohmann::ordered_json jsonSchemaFor(TypeRef type) {
    using J = nlohmann::ordered_json;
    if (!type) return J{{"type", "null"}};
    switch (type->kind) {
        case TypeKind::Int: return J{{"type", "integer"}};
        case TypeKind::Float: return J{{"type", "number"}};
        case TypeKind::Bool: return J{{"type", "boolean"}};
        case TypeKind::Str: return J{{"type", "string"}};
        case TypeKind::Enum: {
            J options = J::array();
            for (const std::string& o : type->options) options.push_back(o);
            return J{{"type", "string"}, {"enum", options}};
        }
        case TypeKind::List: {
            J schema = J{{"type", "array"}, {"items", jsonSchemaFor(type->elem)}};
            if (type->max) schema["maxItems"] = *type->max;
            return schema;
        }
        case TypeKind::Record: {
            J properties = J::object();
            J required = J::array();
            for (const RecordFieldType& f : type->fields) {
                properties[f.name] = jsonSchemaFor(f.type);
                required.push_back(f.name);
            }
            return J{{"type", "object"},
                     {"properties", properties},
                     {"required", required},
                     {"additionalProperties", false}};
        }
        case TypeKind::Never:
        case TypeKind::Unit: break;
    }
    return J{{"type", "null"}};
}

}  // namespace remit
