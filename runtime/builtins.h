// The builtins of Remit on runtime values (the table is runtime/builtins.def). The VM's BUILTIN
// opcode calls `callBuiltin`; the semantics are the prototype's as changed by docs/language.md
// (decisions 24–26, 39–45), and the result labels follow docs/language.md "Labels, exactly":
//   most builtins     the union of the arguments' top-level tags and provenance
//   join, sum, contains on a list, min/max of a list   also the list's deep labels
//   take              xs ∪ N;  first: element ∪ list;  unique: the kept elements, the list deep(xs)
//   split             every piece (and the list) gets the arguments' labels;  range: untagged
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "runtime/heap.h"
#include "runtime/value.h"

namespace remit {

enum class BuiltinId : uint16_t {
#define BUILTIN(id, name, argc) id,
#include "runtime/builtins.def"
#undef BUILTIN
};

struct BuiltinInfo {
    std::string_view name;
    uint16_t argc;
};

constexpr BuiltinInfo kBuiltins[] = {
#define BUILTIN(id, name, argc) {name, argc},
#include "runtime/builtins.def"
#undef BUILTIN
};
constexpr uint16_t kBuiltinCount = sizeof(kBuiltins) / sizeof(kBuiltins[0]);

inline const BuiltinInfo& builtinInfo(BuiltinId id) { return kBuiltins[static_cast<uint16_t>(id)]; }

// The builtin `name` taking `argc` arguments, if there is one.
std::optional<BuiltinId> findBuiltin(std::string_view name, size_t argc);

// Runs builtin `id` on `args` (exactly builtinInfo(id).argc of them). Returns nullopt with the
// error in heap.error(): R0101 for evaluation errors (an empty list to first/min/max, a bad
// string to int/float, an empty separator to split, an argument of the wrong kind), R0701 when
// memory runs out.
std::optional<Value> callBuiltin(Heap& heap, BuiltinId id, std::span<const Value> args);

}  // namespace remit
