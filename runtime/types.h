// Static types of Remit (spec §5), shared by the checker (which computes them), the host model
// (capability signatures), and the VM and broker (input checking, model output validation, JSON
// Schema). Types are immutable and owned by a TypeArena; a TypeRef is a plain pointer into it.
//
// Two refinements of the prototype's rules (docs/language.md, decisions 13 and 15):
// - A string literal has type Str carrying the set of literal values it may hold (`literals`).
//   Such a Str is accepted where an enum is expected when every literal is an option; elsewhere
//   it is just Str. So `let x = "a"` then `x == "b"` checks, and `[{id: "a"}, {id: "b"}]` is a
//   List[{id: Str}].
// - Never is the type of an expression that already failed to check (or of `return`/`break`);
//   it is assignable to everything, so one mistake reports one error.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace remit {

// The values are stored in .rbc type tables (docs/bytecode.md): append, never reorder.
enum class TypeKind : uint8_t { Never, Unit, Bool, Int, Float, Str, Enum, List, Record };

// Deepest nesting of lists and records a type may have. Aliases can nest types without nesting
// brackets in the source (`type A2 = List[A1]`), so this is checked on resolved types; it bounds
// every recursive walk over types (assignability, JSON schema, typed JSON parsing).
constexpr uint32_t kMaxTypeDepth = 128;

struct Type;
using TypeRef = const Type*;

struct RecordFieldType {
    std::string name;
    TypeRef type;
};

struct Type {
    TypeKind kind = TypeKind::Never;
    std::string name;                    // alias name shown in messages (records and enums), or empty
    std::vector<std::string> options;    // Enum: options in declared order; Str: literal values (sorted) or empty
    TypeRef elem = nullptr;              // List
    std::optional<int64_t> max;          // List: static bound
    std::vector<RecordFieldType> fields; // Record, in declared order
    uint32_t depth = 0;                  // nesting of lists and records (Int: 0, List[Int]: 1, ...)

    bool isNumber() const { return kind == TypeKind::Int || kind == TypeKind::Float; }
    bool isStringLike() const { return kind == TypeKind::Str || kind == TypeKind::Enum; }
    TypeRef field(std::string_view fieldName) const;
};

class TypeArena {
public:
    TypeArena();
    TypeArena(const TypeArena&) = delete;
    TypeArena& operator=(const TypeArena&) = delete;

    TypeRef never() const { return never_; }
    TypeRef unit() const { return unit_; }
    TypeRef boolean() const { return bool_; }
    TypeRef integer() const { return int_; }
    TypeRef floating() const { return float_; }
    TypeRef str() const { return str_; }

    TypeRef strLiterals(std::vector<std::string> values);  // Str holding one of `values`
    TypeRef enumOf(std::vector<std::string> options, std::string name = {});
    TypeRef list(TypeRef elem, std::optional<int64_t> max);
    TypeRef record(std::vector<RecordFieldType> fields, std::string name = {});
    TypeRef named(TypeRef type, std::string name);  // the same type shown under an alias

private:
    std::deque<Type> types_;
    TypeRef never_, unit_, bool_, int_, float_, str_;
    TypeRef add(Type t);
};

// How a type is written in messages: Int, List[Str] max 5, {a: Int}, "a" | "b", or its alias.
std::string showType(TypeRef type);
// The kind's name as the language writes it ("Int", "List", "Record"), for messages about a type's
// shape rather than the type itself.
const char* typeKindName(TypeKind kind);

bool sameType(TypeRef a, TypeRef b);
// Can a value of static type `src` be used where `dst` is expected? List bounds are not
// considered here (see boundViolation); Int is accepted as Float; records have width subtyping.
bool assignable(TypeRef src, TypeRef dst);
// When `src`'s static list bounds do not fit `dst`'s, a description ("list may have up to 10 items
// but at most 3 are allowed"); empty when they fit.
std::string boundViolation(TypeRef src, TypeRef dst);
// The least type of two branches, or nullptr when they are incompatible.
TypeRef joinTypes(TypeArena& arena, TypeRef a, TypeRef b);
// Drops literal sets (Str{"a"} -> Str) deep inside a type: what a `var` may later hold.
TypeRef widenLiterals(TypeArena& arena, TypeRef type);
// True when the type contains a List without a `max` bound (model outputs must not).
bool hasUnboundedList(TypeRef type);

}  // namespace remit
