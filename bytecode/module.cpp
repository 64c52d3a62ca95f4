// Turning a module's serialisable type table (Module::types, bytecode/module.h) back into the checker's
// types (runtime/types.h), for the VM and broker: input checking, model output validation and JSON
// Schema work on TypeRefs. Runs only on verified modules (bytecode/verifier.h), whose entries refer to
// earlier entries only and nest at most kMaxTypeDepth deep.
#include <cassert>

#include "bytecode/rbc.h"

namespace remit {

std::vector<TypeRef> materializeTypes(const Module& module, TypeArena& arena) {
    std::vector<TypeRef> refs;
    refs.reserve(module.types.size());
    for (const TypeEntry& entry : module.types) {
        auto earlier = [&](uint32_t index) {
            assert(index < refs.size() && "unverified module: a type refers to a later entry");
            return refs[index];
        };
        switch (entry.kind) {
            case TypeKind::Never: refs.push_back(arena.never()); break;
            case TypeKind::Unit: refs.push_back(arena.unit()); break;
            case TypeKind::Bool: refs.push_back(arena.boolean()); break;
            case TypeKind::Int: refs.push_back(arena.integer()); break;
            case TypeKind::Float: refs.push_back(arena.floating()); break;
            case TypeKind::Str:
                // A Str entry with options is a literal type (runtime/types.h); without, plain Str.
                refs.push_back(entry.options.empty() ? arena.str() : arena.strLiterals(entry.options));
                break;
            case TypeKind::Enum: refs.push_back(arena.enumOf(entry.options, entry.name)); break;
            case TypeKind::List: refs.push_back(arena.list(earlier(entry.elem), entry.max)); break;
            case TypeKind::Record: {
                std::vector<RecordFieldType> fields;
                fields.reserve(entry.fields.size());
                for (const auto& [name, type] : entry.fields) fields.push_back({name, earlier(type)});
                refs.push_back(arena.record(std::move(fields), entry.name));
                break;
            }
        }
    }
    return refs;
}

}  // namespace remit
