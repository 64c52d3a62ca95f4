#include "runtime/types.h"

#include <algorithm>

#include <fmt/format.h>

namespace remit {

TypeRef Type::field(std::string_view fieldName) const {
    for (const RecordFieldType& f : fields)
        if (f.name == fieldName) return f.type;
    return nullptr;
}

TypeArena::TypeArena() {
    auto prim = [&](TypeKind kind) {
        Type t;
        t.kind = kind;
        return add(std::move(t));
    };
    never_ = prim(TypeKind::Never);
    unit_ = prim(TypeKind::Unit);
    bool_ = prim(TypeKind::Bool);
    int_ = prim(TypeKind::Int);
    float_ = prim(TypeKind::Float);
    str_ = prim(TypeKind::Str);
}

TypeRef TypeArena::add(Type t) {
    types_.push_back(std::move(t));
    return &types_.back();
}

TypeRef TypeArena::strLiterals(std::vector<std::string> values) {
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    Type t;
    t.kind = TypeKind::Str;
    t.options = std::move(values);
    return add(std::move(t));
}

TypeRef TypeArena::enumOf(std::vector<std::string> options, std::string name) {
    Type t;
    t.kind = TypeKind::Enum;
    t.options = std::move(options);
    t.name = std::move(name);
    return add(std::move(t));
}

TypeRef TypeArena::list(TypeRef elem, std::optional<int64_t> max) {
    Type t;
    t.kind = TypeKind::List;
    t.elem = elem;
    t.max = max;
    t.depth = elem->depth + 1;
    return add(std::move(t));
}

TypeRef TypeArena::record(std::vector<RecordFieldType> fields, std::string name) {
    Type t;
    t.kind = TypeKind::Record;
    t.fields = std::move(fields);
    t.name = std::move(name);
    for (const RecordFieldType& f : t.fields) t.depth = std::max(t.depth, f.type->depth + 1);
    if (t.fields.empty()) t.depth = 1;
    return add(std::move(t));
}

TypeRef TypeArena::named(TypeRef type, std::string name) {
    if (type->kind != TypeKind::Record && type->kind != TypeKind::Enum) return type;
    Type t = *type;
    t.name = std::move(name);
    return add(std::move(t));
}

const char* typeKindName(TypeKind kind) {
    switch (kind) {
        case TypeKind::Never: return "Never";
        case TypeKind::Unit: return "Unit";
        case TypeKind::Bool: return "Bool";
        case TypeKind::Int: return "Int";
        case TypeKind::Float: return "Float";
        case TypeKind::Str: return "Str";
        case TypeKind::Enum:
            return "Enum";
        case TypeKind::List:
            return "List";
        case TypeKind::Record:
            return "Record";
    }
    return "?";
}

std::string showType(TypeRef t) {
    if (!t) return "?";
    if (!t->name.empty()) return t->name;
    switch (t->kind) {
        case TypeKind::Never:
        case TypeKind::Unit:
        case TypeKind::Bool:
        case TypeKind::Int:
        case TypeKind::Float:
        case TypeKind::Str:
            return typeKindName(t->kind);
        case TypeKind::Enum: {
            std::string out;
            for (const std::string& o : t->options) out += (out.empty() ? "\"" : " | \"") + o + "\"";
            return out;
        }
        case TypeKind::List:
            return t->max ? fmt::format("List[{}] max {}", showType(t->elem), *t->max)
                          : fmt::format("List[{}]", showType(t->elem));
        case TypeKind::Record: {
            std::string out = "{";
            for (size_t i = 0; i < t->fields.size(); ++i)
                out += fmt::format("{}{}: {}", i ? ", " : "", t->fields[i].name, showType(t->fields[i].type));
            return out + "}";
        }
    }
    return "?";
}

bool sameType(TypeRef a, TypeRef b) {
    if (a == b) return true;
    if (a->kind != b->kind) return false;
    switch (a->kind) {
        case TypeKind::Enum: {
            std::vector<std::string> x = a->options, y = b->options;
            std::sort(x.begin(), x.end());
            std::sort(y.begin(), y.end());
            return x == y;
        }
        case TypeKind::Str: return true;
        case TypeKind::List: return a->max == b->max && sameType(a->elem, b->elem);
        case TypeKind::Record:
            if (a->fields.size() != b->fields.size()) return false;
            for (size_t i = 0; i < a->fields.size(); ++i)
                if (a->fields[i].name != b->fields[i].name || !sameType(a->fields[i].type, b->fields[i].type))
                    return false;
            return true;
        default: return true;
    }
}

static bool subset(const std::vector<std::string>& small, const std::vector<std::string>& big) {
    for (const std::string& s : small)
        if (std::find(big.begin(), big.end(), s) == big.end()) return false;
    return true;
}

bool assignable(TypeRef src, TypeRef dst) {
    if (src->kind == TypeKind::Never || dst->kind == TypeKind::Never) return true;
    switch (dst->kind) {
        case TypeKind::Float: return src->kind == TypeKind::Float || src->kind == TypeKind::Int;
        case TypeKind::Str: return src->isStringLike();
        case TypeKind::Enum:
            if (src->kind == TypeKind::Enum) return subset(src->options, dst->options);
            // A string literal (or a choice of literals) fits an enum that has all its values.
            return src->kind == TypeKind::Str && !src->options.empty() && subset(src->options, dst->options);
        case TypeKind::List: return src->kind == TypeKind::List && assignable(src->elem, dst->elem);
        case TypeKind::Record:
            if (src->kind != TypeKind::Record) return false;
            for (const RecordFieldType& f : dst->fields) {
                TypeRef have = src->field(f.name);
                if (!have || !assignable(have, f.type)) return false;
            }
            return true;
        default: return src->kind == dst->kind;
    }
}

std::string boundViolation(TypeRef src, TypeRef dst) {
    if (src->kind == TypeKind::List && dst->kind == TypeKind::List) {
        if (dst->max && (!src->max || *src->max > *dst->max)) {
            std::string have = src->max ? fmt::format("up to {}", *src->max) : "unbounded";
            return fmt::format("list may have {} items but at most {} are allowed", have, *dst->max);
        }
        return boundViolation(src->elem, dst->elem);
    }
    if (src->kind == TypeKind::Record && dst->kind == TypeKind::Record) {
        for (const RecordFieldType& f : dst->fields) {
            if (TypeRef have = src->field(f.name)) {
                std::string inner = boundViolation(have, f.type);
                if (!inner.empty()) return fmt::format("field '{}': {}", f.name, inner);
            }
        }
    }
    return {};
}

TypeRef joinTypes(TypeArena& arena, TypeRef a, TypeRef b) {
    if (a->kind == TypeKind::Never) return b;
    if (b->kind == TypeKind::Never) return a;
    if (a->kind == TypeKind::Str && b->kind == TypeKind::Str) {
        if (a->options.empty() || b->options.empty()) return arena.str();
        std::vector<std::string> all = a->options;
        all.insert(all.end(), b->options.begin(), b->options.end());
        return arena.strLiterals(std::move(all));
    }
    if (a->isStringLike() && b->isStringLike()) {
        if (a->kind == TypeKind::Enum && b->kind == TypeKind::Enum) {
            if (subset(b->options, a->options)) return a;
            if (subset(a->options, b->options)) return b;
            std::vector<std::string> all = a->options;
            for (const std::string& o : b->options)
                if (std::find(all.begin(), all.end(), o) == all.end()) all.push_back(o);
            return arena.enumOf(std::move(all));
        }
        // An enum and literals: stay the enum when the literals are members.
        TypeRef e = a->kind == TypeKind::Enum ? a : b;
        TypeRef s = a->kind == TypeKind::Enum ? b : a;
        if (!s->options.empty() && subset(s->options, e->options)) return e;
        return arena.str();
    }
    if (sameType(a, b)) return a;
    if (a->isNumber() && b->isNumber()) return arena.floating();
    if (a->kind == TypeKind::List && b->kind == TypeKind::List) {
        TypeRef elem = joinTypes(arena, a->elem, b->elem);
        if (!elem) return nullptr;
        std::optional<int64_t> max;
        if (a->max && b->max) max = std::max(*a->max, *b->max);
        return arena.list(elem, max);
    }
    if (a->kind == TypeKind::Record && b->kind == TypeKind::Record) {
        if (a->fields.size() == b->fields.size()) {
            // Same field names in the same order: join field by field ({id: "a"} and {id: "b"}).
            std::vector<RecordFieldType> fields;
            bool ok = true;
            for (size_t i = 0; i < a->fields.size() && ok; ++i) {
                if (a->fields[i].name != b->fields[i].name) ok = false;
                else if (TypeRef j = joinTypes(arena, a->fields[i].type, b->fields[i].type))
                    fields.push_back({a->fields[i].name, j});
                else ok = false;
            }
            if (ok) return arena.record(std::move(fields), a->name == b->name ? a->name : std::string());
        }
        if (assignable(a, b)) return b;
        if (assignable(b, a)) return a;
    }
    return nullptr;
}

TypeRef widenLiterals(TypeArena& arena, TypeRef t) {
    switch (t->kind) {
        case TypeKind::Str: return t->options.empty() ? t : arena.str();
        case TypeKind::Enum: return t->name.empty() ? arena.str() : t;
        case TypeKind::List: {
            TypeRef elem = widenLiterals(arena, t->elem);
            return elem == t->elem ? t : arena.list(elem, t->max);
        }
        case TypeKind::Record: {
            std::vector<RecordFieldType> fields;
            bool changed = false;
            for (const RecordFieldType& f : t->fields) {
                TypeRef w = widenLiterals(arena, f.type);
                changed |= w != f.type;
                fields.push_back({f.name, w});
            }
            return changed ? arena.record(std::move(fields), t->name) : t;
        }
        default: return t;
    }
}

bool hasUnboundedList(TypeRef t) {
    if (t->kind == TypeKind::List) return !t->max || hasUnboundedList(t->elem);
    if (t->kind == TypeKind::Record)
        for (const RecordFieldType& f : t->fields)
            if (hasUnboundedList(f.type)) return true;
    return false;
}

}  // namespace remit
