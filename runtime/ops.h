// The operations of Remit on runtime values, with the prototype's semantics as changed by the
// decisions of docs/language.md ("Decisions where the spec is silent"): 64-bit Int with overflow
// R0101, finite Float, `/` always Float, floored `%`, structural `==`, Python-style negative
// indexing, str() as Python's json.dumps for containers — and each result labelled with tags and
// provenance per docs/language.md "Labels, exactly". The VM's opcodes call these (its typed fast
// paths may inline the scalar helpers at the end); the broker and builtins reuse the comparisons
// and str().
//
// Every operation returns std::nullopt on failure, leaving the RuntimeError in heap.error():
// R0101 for evaluation errors, R0701 when memory or a label table runs out. Operand kinds are
// guaranteed by the checker and the bytecode verifier; a mismatch is still reported as R0101
// rather than trusted.
//
// Labels of results (tags and provenance alike: every operation unions both):
//   + - * / % unary-, not, < <= > >=, concatenation   top-level labels of the operands
//   == != in                                           deep labels of both operands
//   xs[i]                                              element ∪ list ∪ index (top-level)
//   r.f                                                field ∪ record (top-level)
//   str(x), interpolation                              deep labels of every part
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "runtime/heap.h"
#include "runtime/value.h"

namespace remit {

// ---- Arithmetic: Int ⊕ Int → Int (R0101 on 64-bit overflow); any Float operand → Float
// (R0101 if the result is not finite). `add` also concatenates Str + Str and List + List.
std::optional<Value> add(Heap& heap, const Value& a, const Value& b);
std::optional<Value> subtract(Heap& heap, const Value& a, const Value& b);
std::optional<Value> multiply(Heap& heap, const Value& a, const Value& b);
// Always Float, correctly rounded like Python's true division (7 / 2 == 3.5). R0101 on zero.
std::optional<Value> divide(Heap& heap, const Value& a, const Value& b);
// Floored: the result takes the divisor's sign (-7 % 3 == 2). Int when both are Int. R0101 on zero.
std::optional<Value> modulo(Heap& heap, const Value& a, const Value& b);
std::optional<Value> negate(Heap& heap, const Value& a);
std::optional<Value> logicalNot(Heap& heap, const Value& a);

// ---- Comparison. Results are Bool.
std::optional<Value> equals(Heap& heap, const Value& a, const Value& b);
std::optional<Value> notEquals(Heap& heap, const Value& a, const Value& b);
// Number/number or Str/Str (code-point order).
std::optional<Value> lessThan(Heap& heap, const Value& a, const Value& b);
std::optional<Value> lessEqual(Heap& heap, const Value& a, const Value& b);
std::optional<Value> greaterThan(Heap& heap, const Value& a, const Value& b);
std::optional<Value> greaterEqual(Heap& heap, const Value& a, const Value& b);
// `item in container`: structural list membership, or substring when the container is a Str.
std::optional<Value> memberOf(Heap& heap, const Value& item, const Value& container);

// ---- Access.
// xs[i], with negative i counting from the end; outside -len <= i < len is R0101
// "index i is out of range for a list of length n".
std::optional<Value> indexList(Heap& heap, const Value& list, const Value& index);
// r.name; a missing field (possible only through width subtyping) is R0101.
std::optional<Value> getField(Heap& heap, const Value& record, std::string_view name);
// r's field number `position` in its shape (the VM's cached fast path).
std::optional<Value> getFieldAt(Heap& heap, const Value& record, size_t position);

// ---- Text.
// str(x), as the prototype's: Str unchanged, Unit "", Bool true/false, Int decimal, Float as
// Python's repr, List/Record as JSON with ", " and ": ", non-ASCII unescaped, fields in order.
std::optional<Value> toStr(Heap& heap, const Value& v);
// The parts' str() texts concatenated (literal parts are untagged Str constants).
std::optional<Value> interpolate(Heap& heap, std::span<const Value> parts);
// str(v)'s text, without a heap (tests, messages, the broker's prompt rendering). Appends to
// `out`; returns false (having appended a prefix) once the text would pass `maxBytes` in total.
bool appendValueText(std::string& out, const Value& v, size_t maxBytes = SIZE_MAX);
std::string valueText(const Value& v);

// ---- Pure helpers, also the VM's typed fast paths.

// Structural equality: 1 == 1.0, lists element-wise, records as maps (same fields, equal values,
// any order). Exact for Int/Float mixes (2^53 + 1 != 2^53 as a Float, as in Python). Iterative,
// and memoised on object pairs, so deep or heavily shared values compare without deep recursion
// or exponential time.
bool valuesEqual(const Value& a, const Value& b);
// The same, reporting its work to heap.work() (a pair compared counts sizeof(Value) bytes, a
// string its length, a field looked up by name its record's size): nullopt when a run limit
// stopped it, with the reason in heap.error(). The memo it keeps is charged while it lives.
std::optional<bool> valuesEqual(Heap& heap, const Value& a, const Value& b);
// Where `needle` first occurs in `text` at or after `from` (npos if nowhere), in time linear in
// the bytes searched (glibc's memmem; std::string_view::find is quadratic in the worst case), with
// those bytes reported to heap.work(). nullopt when a run limit stopped it.
std::optional<size_t> findText(Heap& heap, std::string_view text, std::string_view needle, size_t from = 0);
// -1, 0 or 1 for number/number or Str/Str; nullopt for anything else.
std::optional<int> compareOrdered(const Value& a, const Value& b);
// Exact comparison of an Int with a finite Float: -1, 0 or 1.
int compareIntFloat(int64_t i, double f);
// a / b correctly rounded to the nearest double (b != 0), as Python's int / int.
double divideInts(int64_t a, int64_t b);
// Python's floored a % b (b != 0); never overflows (INT64_MIN % -1 == 0).
int64_t floorModInt(int64_t a, int64_t b);
// Python's float a % b (b != 0): the result has the divisor's sign, and a zero result is ±0.0
// with the divisor's sign.
double floorModFloat(double a, double b);

}  // namespace remit
