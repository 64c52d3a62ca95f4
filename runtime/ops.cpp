// Operations on runtime values (see ops.h for semantics and labelling rules).
#include "runtime/ops.h"

#include <fmt/format.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <unordered_set>
#include <vector>

#include "runtime/canonical_json.h"
#include "runtime/numfmt.h"

namespace remit {

namespace {

__extension__ typedef unsigned __int128 Uint128;  // GCC/Clang; __extension__ keeps -Wpedantic quiet

// ---- Labels.

// Top-level labels of both operands on `result`: arithmetic, ordering, concatenation.
std::optional<Value> labelTop(Heap& heap, Value result, const Value& a, const Value& b) {
    std::optional<TagSetId> tags = heap.uniteTags(a.tags(), b.tags());
    std::optional<ProvId> prov = heap.uniteProv(a.prov(), b.prov());
    if (!tags || !prov) return std::nullopt;
    result.setTags(*tags);
    result.setProv(*prov);
    return result;
}

// Deep labels of both operands: ==, !=, in.
std::optional<Value> labelDeep(Heap& heap, Value result, const Value& a, const Value& b) {
    std::optional<TagSetId> tags = heap.deepTags(a);
    if (tags) tags = heap.uniteTags(*tags, b.tags());
    if (tags) tags = heap.uniteTags(*tags, contentTags(b));
    std::optional<ProvId> prov = heap.deepProv(a);
    if (prov) prov = heap.uniteProv(*prov, b.prov());
    if (prov) prov = heap.uniteProv(*prov, contentProv(b));
    if (!tags || !prov) return std::nullopt;
    result.setTags(*tags);
    result.setProv(*prov);
    return result;
}

// ---- Errors.

std::optional<Value> evalError(Heap& heap, std::string message, Json details = nullptr) {
    heap.fail(RuntimeError{DiagCode::R0101, std::move(message), std::move(details)});
    return std::nullopt;
}

std::string numberText(const Value& v) {
    return v.kind() == ValueKind::Int ? std::to_string(v.asInt()) : formatFloatRepr(v.asFloat());
}

std::optional<Value> unsupported(Heap& heap, std::string_view op, const Value& a, const Value& b) {
    return evalError(
        heap, fmt::format("unsupported operand types for {}: {} and {}", op, kindName(a.kind()), kindName(b.kind())));
}

std::optional<Value> intOverflow(Heap& heap, std::string_view op, int64_t a, int64_t b) {
    return evalError(heap, fmt::format("integer overflow: {} {} {} does not fit in 64 bits", a, op, b),
                     Json{{"operator", op}, {"left", a}, {"right", b}});
}

std::optional<Value> divisionByZero(Heap& heap, std::string_view op) {
    return evalError(heap, "division by zero", Json{{"operator", op}});
}

// A Float result, or R0101 when the IEEE result is inf or nan (docs/language.md, decision 19).
std::optional<Value> floatResult(Heap& heap, double result, std::string_view op, const Value& a, const Value& b) {
    if (!std::isfinite(result)) {
        return evalError(
            heap, fmt::format("float overflow: {} {} {} is not a finite number", numberText(a), op, numberText(b)),
            Json{{"operator", op}});
    }
    return labelTop(heap, Value::floating(result), a, b);
}

bool bothInt(const Value& a, const Value& b) { return a.kind() == ValueKind::Int && b.kind() == ValueKind::Int; }
bool bothNumbers(const Value& a, const Value& b) { return a.isNumber() && b.isNumber(); }

std::optional<Value> concatenate(Heap& heap, const Value& a, const Value& b) {
    Value out = a;
    // concatInPlace copies because `out` shares a's object; it unites the top-level labels.
    if (!heap.concatInPlace(out, b)) return std::nullopt;
    return out;
}

// ---- str() text, written to a sink so that the same walk feeds a capped std::string and a
// budget-charged heap string.

struct StringSink {
    std::string& out;
    size_t maxBytes;
    bool frames(size_t) { return true; }
    bool put(std::string_view text) {
        if (text.size() > maxBytes - std::min(maxBytes, out.size())) {
            out.append(text.substr(0, maxBytes - std::min(maxBytes, out.size())));
            return false;
        }
        out.append(text);
        return true;
    }
};

// Buffers small pieces and appends them to a heap string in chunks, charging the budget as the
// string grows.
struct HeapStrSink {
    Heap& heap;
    Value& str;
    std::string buffer;
    ScratchCharge stack{heap};  // writeValueText's open containers, as deep as the value
    bool frames(size_t open) { return open % 1024 != 0 || stack.reserve((open + 1024) * 2 * sizeof(void*)); }
    bool put(std::string_view text) {
        buffer.append(text);
        return buffer.size() < 4096 || flush();
    }
    bool flush() {
        bool ok = heap.appendTextInPlace(str, buffer);
        buffer.clear();
        return ok;
    }
};

// A string literal inside a list or record, escaped as json.dumps(ensure_ascii=False) does. Long
// strings are escaped in slices so that no unaccounted copy of the whole text is made. (Slicing
// may split a UTF-8 sequence, which is harmless: only ASCII bytes are ever escaped.)
template <class Sink>
bool putQuoted(Sink& sink, std::string_view text) {
    constexpr size_t kSlice = 4096;
    std::string piece;
    if (text.size() <= kSlice) {
        appendJsonString(piece, text, false);
        return sink.put(piece);
    }
    if (!sink.put("\"")) return false;
    for (size_t at = 0; at < text.size(); at += kSlice) {
        piece.clear();
        appendJsonString(piece, text.substr(at, kSlice), false);
        if (!sink.put(std::string_view(piece).substr(1, piece.size() - 2))) return false;
    }
    return sink.put("\"");
}

template <class Sink>
bool putScalar(Sink& sink, const Value& v) {
    switch (v.kind()) {
        case ValueKind::Unit:
            return sink.put("null");
        case ValueKind::Bool:
            return sink.put(v.asBool() ? "true" : "false");
        case ValueKind::Int: {
            char buf[24];
            auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v.asInt());
            return sink.put(std::string_view(buf, static_cast<size_t>(end - buf)));
        }
        case ValueKind::Float:
            return sink.put(formatFloatRepr(v.asFloat()));
        case ValueKind::Str:
            return putQuoted(sink, v.asStr());
        default:
            return false;
    }
}

// str(v): a top-level Str is its own text and a top-level Unit is empty; inside containers every
// value is written as JSON. Iterative: a frame per open container.
template <class Sink>
bool writeValueText(Sink& sink, const Value& root) {
    if (root.kind() == ValueKind::Str) return sink.put(root.asStr());
    if (root.kind() == ValueKind::Unit) return true;
    struct Frame {
        const Value* container;
        size_t next;
    };
    std::vector<Frame> stack;
    auto open = [&](const Value& v) {
        if (v.kind() == ValueKind::List) {
            if (v.asList().items.empty()) return sink.put("[]");
            if (!sink.frames(stack.size())) return false;
            stack.push_back(Frame{&v, 0});
            return sink.put("[");
        }
        if (v.kind() == ValueKind::Record) {
            if (v.asRecord().values.empty()) return sink.put("{}");
            if (!sink.frames(stack.size())) return false;
            stack.push_back(Frame{&v, 0});
            return sink.put("{");
        }
        return putScalar(sink, v);
    };
    if (!open(root)) return false;
    while (!stack.empty()) {
        Frame& frame = stack.back();
        const Value& container = *frame.container;
        bool isList = container.kind() == ValueKind::List;
        size_t size = isList ? container.asList().items.size() : container.asRecord().values.size();
        if (frame.next == size) {
            stack.pop_back();
            if (!sink.put(isList ? "]" : "}")) return false;
            continue;
        }
        size_t i = frame.next++;
        if (i > 0 && !sink.put(", ")) return false;
        if (isList) {
            if (!open(container.asList().items[i])) return false;  // may push: `frame` is dead now
        } else {
            const RecordObject& record = container.asRecord();
            if (!putQuoted(sink, record.shape->names[i]) || !sink.put(": ")) return false;
            if (!open(record.values[i])) return false;
        }
    }
    return true;
}

// Appends str(v) to the heap string `str`, charging the budget as it grows.
bool appendStrOf(Heap& heap, Value& str, const Value& v) {
    if (v.kind() == ValueKind::Str) return heap.appendTextInPlace(str, v.asStr());
    HeapStrSink sink{heap, str, {}};
    bool ok = writeValueText(sink, v);
    return sink.flush() && ok;
}

std::optional<Value> orderingOp(Heap& heap, const Value& a, const Value& b, std::string_view op, bool (*accept)(int)) {
    // Strings compare byte by byte: work.
    if (a.kind() == ValueKind::Str && b.kind() == ValueKind::Str &&
        !heap.work(std::min(a.asStr().size(), b.asStr().size())))
        return std::nullopt;
    std::optional<int> order = compareOrdered(a, b);
    if (!order) return unsupported(heap, op, a, b);
    return labelTop(heap, Value::boolean(accept(*order)), a, b);
}

}  // namespace

// ---- Pure helpers.

int compareIntFloat(int64_t i, double f) {
    // Exact: no rounding of `i` to double. Floats at or beyond ±2^63 are outside the Int range.
    constexpr double kTwo63 = 9223372036854775808.0;
    if (f >= kTwo63) return -1;
    if (f < -kTwo63) return 1;
    double whole = std::trunc(f);
    auto w = static_cast<int64_t>(whole);  // exact: |whole| < 2^63 or whole == -2^63
    if (i != w) return i < w ? -1 : 1;
    double fraction = f - whole;
    return fraction > 0 ? -1 : fraction < 0 ? 1 : 0;
}

double divideInts(int64_t a, int64_t b) {
    constexpr int64_t kExact = int64_t(1) << 53;
    if (a >= -kExact && a <= kExact && b >= -kExact && b <= kExact) {
        // Both convert exactly, so IEEE division rounds once: correctly rounded.
        return static_cast<double>(a) / static_cast<double>(b);
    }
    // Otherwise take a quotient of 63-64 significant bits in 128-bit arithmetic, fold the
    // remainder into its lowest bit (a sticky bit, far below the 53 kept), and let the one
    // conversion to double round it: correctly rounded, as Python's int / int.
    bool negative = (a < 0) != (b < 0);
    uint64_t ua = a < 0 ? 0 - static_cast<uint64_t>(a) : static_cast<uint64_t>(a);
    uint64_t ub = b < 0 ? 0 - static_cast<uint64_t>(b) : static_cast<uint64_t>(b);
    if (ua == 0) return negative ? -0.0 : 0.0;
    int lengthA = 64 - std::countl_zero(ua);
    int lengthB = 64 - std::countl_zero(ub);
    int shift = 63 - lengthA + lengthB;  // >= 0; the quotient lies in (2^62, 2^64)
    Uint128 numerator = static_cast<Uint128>(ua) << shift;
    auto quotient = static_cast<uint64_t>(numerator / ub);
    if (numerator % ub != 0) quotient |= 1;
    double magnitude = std::ldexp(static_cast<double>(quotient), -shift);
    return negative ? -magnitude : magnitude;
}

int64_t floorModInt(int64_t a, int64_t b) {
    if (b == -1) return 0;  // also avoids INT64_MIN % -1, which traps in C++
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

double floorModFloat(double a, double b) {
    // CPython's float_rem.
    double mod = std::fmod(a, b);
    if (mod != 0.0) {
        if ((b < 0) != (mod < 0)) mod += b;
    } else {
        mod = std::copysign(0.0, b);
    }
    return mod;
}

std::optional<int> compareOrdered(const Value& a, const Value& b) {
    auto sign = [](auto x, auto y) { return x < y ? -1 : y < x ? 1 : 0; };
    ValueKind ka = a.kind();
    ValueKind kb = b.kind();
    if (ka == ValueKind::Int && kb == ValueKind::Int) return sign(a.asInt(), b.asInt());
    if (ka == ValueKind::Float && kb == ValueKind::Float) return sign(a.asFloat(), b.asFloat());
    if (ka == ValueKind::Int && kb == ValueKind::Float) return compareIntFloat(a.asInt(), b.asFloat());
    if (ka == ValueKind::Float && kb == ValueKind::Int) return -compareIntFloat(b.asInt(), a.asFloat());
    if (ka == ValueKind::Str && kb == ValueKind::Str) {
        // Byte order of UTF-8 is code-point order; string_view compares bytes as unsigned char.
        int c = a.asStr().compare(b.asStr());
        return c < 0 ? -1 : c > 0 ? 1 : 0;
    }
    return std::nullopt;
}

namespace {

// The walk of valuesEqual, with `meter(bytes)` told of its work (false stops it: nullopt) and
// `scratch(bytes)` asked before the work list or the memo grows to `bytes` in all (false stops it
// too).
template <class Meter, class Scratch>
std::optional<bool> equalWalk(const Value& a, const Value& b, Meter&& meter, Scratch&& scratch) {
    // A work list of pairs still to compare. Pairs of containers already entered are remembered
    // (once the walk is big enough for it to matter), so a DAG of shared sub-values is compared
    // once per distinct pair of objects, not once per path. Remembering a pair on entry is sound:
    // if it is unequal, the first visit finds the difference and the whole answer is false.
    constexpr size_t kMemoAfter = 256;
    std::vector<std::pair<const Value*, const Value*>> work{{&a, &b}};
    struct PairHash {
        size_t operator()(const std::pair<const HeapObject*, const HeapObject*>& p) const noexcept {
            return std::hash<const void*>{}(p.first) * 0x9e3779b97f4a7c15ull ^ std::hash<const void*>{}(p.second);
        }
    };
    std::unordered_set<std::pair<const HeapObject*, const HeapObject*>, PairHash> seen;
    size_t visited = 0;
    bool stopped = false;
    // What the work list and the memo hold, rounded up to the next 1024 entries of each, so the
    // scratch charge is asked about once per thousand.
    constexpr size_t kMemoEntryBytes = 64;  // the pair, its hash node and bucket
    size_t charged = 0;
    auto fits = [&](size_t pairs) {
        size_t bytes = ((pairs + seen.size()) / 1024 + 1) * 1024 * (sizeof(work[0]) + kMemoEntryBytes);
        if (bytes <= charged) return true;
        charged = bytes;
        return scratch(bytes);
    };
    auto seenBefore = [&](const HeapObject* x, const HeapObject* y) {
        if (++visited < kMemoAfter) return false;
        if (!fits(work.size() + 1)) {
            stopped = true;
            return true;
        }
        return !seen.emplace(x, y).second;
    };
    while (!work.empty()) {
        auto [x, y] = work.back();
        work.pop_back();
        if (!meter(sizeof(Value))) return std::nullopt;
        ValueKind kx = x->kind();
        ValueKind ky = y->kind();
        if (kx != ky) {
            if (kx == ValueKind::Int && ky == ValueKind::Float) {
                if (compareIntFloat(x->asInt(), y->asFloat()) != 0) return false;
                continue;
            }
            if (kx == ValueKind::Float && ky == ValueKind::Int) {
                if (compareIntFloat(y->asInt(), x->asFloat()) != 0) return false;
                continue;
            }
            return false;
        }
        switch (kx) {
            case ValueKind::Unit:
                break;
            case ValueKind::Bool:
                if (x->asBool() != y->asBool()) return false;
                break;
            case ValueKind::Int:
                if (x->asInt() != y->asInt()) return false;
                break;
            case ValueKind::Float:
                if (x->asFloat() != y->asFloat()) return false;
                break;
            case ValueKind::Str:
                if (x->object() == y->object()) break;
                if (x->asStr().size() != y->asStr().size()) return false;
                if (!meter(x->asStr().size())) return std::nullopt;
                if (x->asStr() != y->asStr()) return false;
                break;
            case ValueKind::List: {
                if (x->object() == y->object()) break;  // immutable, so equal to itself
                const auto& xs = x->asList().items;
                const auto& ys = y->asList().items;
                if (xs.size() != ys.size()) return false;
                if (seenBefore(x->object(), y->object())) {
                    if (stopped) return std::nullopt;
                    break;
                }
                if (!fits(work.size() + xs.size())) return std::nullopt;
                for (size_t i = xs.size(); i-- > 0;) work.emplace_back(&xs[i], &ys[i]);
                break;
            }
            case ValueKind::Record: {
                if (x->object() == y->object()) break;
                const RecordObject& rx = x->asRecord();
                const RecordObject& ry = y->asRecord();
                if (rx.values.size() != ry.values.size()) return false;
                if (seenBefore(x->object(), y->object())) {
                    if (stopped) return std::nullopt;
                    break;
                }
                if (!fits(work.size() + rx.values.size())) return std::nullopt;
                for (size_t i = rx.values.size(); i-- > 0;) {
                    size_t j = i;
                    if (rx.shape != ry.shape) {
                        // Records compare as maps: the same field names, in any order.
                        if (!meter(ry.values.size() * sizeof(Value))) return std::nullopt;
                        std::optional<size_t> found = ry.shape->indexOf(rx.shape->names[i]);
                        if (!found) return false;
                        j = *found;
                    }
                    work.emplace_back(&rx.values[i], &ry.values[j]);
                }
                break;
            }
        }
    }
    return true;
}

}  // namespace

bool valuesEqual(const Value& a, const Value& b) {
    return *equalWalk(a, b, [](uint64_t) { return true; }, [](size_t) { return true; });
}

std::optional<bool> valuesEqual(Heap& heap, const Value& a, const Value& b) {
    ScratchCharge scratch(heap);  // the work list and the memo, while they live
    return equalWalk(
        a, b, [&](uint64_t bytes) { return heap.work(bytes); }, [&](size_t bytes) { return scratch.reserve(bytes); });
}

std::optional<size_t> findText(Heap& heap, std::string_view text, std::string_view needle, size_t from) {
    if (from > text.size()) return std::string_view::npos;
    if (needle.empty()) return from;
    const void* hit = ::memmem(text.data() + from, text.size() - from, needle.data(), needle.size());
    size_t at = hit ? static_cast<size_t>(static_cast<const char*>(hit) - text.data()) : std::string_view::npos;
    // The bytes looked at: up to the end of the match, or the rest of the text.
    size_t scanned = hit ? at + needle.size() - from : text.size() - from;
    if (!heap.work(scanned)) return std::nullopt;
    return at;
}

bool appendValueText(std::string& out, const Value& v, size_t maxBytes) {
    StringSink sink{out, maxBytes};
    return writeValueText(sink, v);
}

std::string valueText(const Value& v) {
    std::string out;
    appendValueText(out, v);
    return out;
}

// ---- Arithmetic.

std::optional<Value> add(Heap& heap, const Value& a, const Value& b) {
    if (bothInt(a, b)) {
        int64_t r;
        if (__builtin_add_overflow(a.asInt(), b.asInt(), &r)) return intOverflow(heap, "+", a.asInt(), b.asInt());
        return labelTop(heap, Value::integer(r), a, b);
    }
    if (bothNumbers(a, b)) return floatResult(heap, a.asNumber() + b.asNumber(), "+", a, b);
    if (a.kind() == b.kind() && (a.kind() == ValueKind::Str || a.kind() == ValueKind::List))
        return concatenate(heap, a, b);
    return unsupported(heap, "+", a, b);
}

std::optional<Value> subtract(Heap& heap, const Value& a, const Value& b) {
    if (bothInt(a, b)) {
        int64_t r;
        if (__builtin_sub_overflow(a.asInt(), b.asInt(), &r)) return intOverflow(heap, "-", a.asInt(), b.asInt());
        return labelTop(heap, Value::integer(r), a, b);
    }
    if (bothNumbers(a, b)) return floatResult(heap, a.asNumber() - b.asNumber(), "-", a, b);
    return unsupported(heap, "-", a, b);
}

std::optional<Value> multiply(Heap& heap, const Value& a, const Value& b) {
    if (bothInt(a, b)) {
        int64_t r;
        if (__builtin_mul_overflow(a.asInt(), b.asInt(), &r)) return intOverflow(heap, "*", a.asInt(), b.asInt());
        return labelTop(heap, Value::integer(r), a, b);
    }
    if (bothNumbers(a, b)) return floatResult(heap, a.asNumber() * b.asNumber(), "*", a, b);
    return unsupported(heap, "*", a, b);
}

std::optional<Value> divide(Heap& heap, const Value& a, const Value& b) {
    if (!bothNumbers(a, b)) return unsupported(heap, "/", a, b);
    if (b.asNumber() == 0.0) return divisionByZero(heap, "/");
    if (bothInt(a, b)) return floatResult(heap, divideInts(a.asInt(), b.asInt()), "/", a, b);
    return floatResult(heap, a.asNumber() / b.asNumber(), "/", a, b);
}

std::optional<Value> modulo(Heap& heap, const Value& a, const Value& b) {
    if (!bothNumbers(a, b)) return unsupported(heap, "%", a, b);
    if (b.asNumber() == 0.0) return divisionByZero(heap, "%");
    if (bothInt(a, b)) return labelTop(heap, Value::integer(floorModInt(a.asInt(), b.asInt())), a, b);
    return floatResult(heap, floorModFloat(a.asNumber(), b.asNumber()), "%", a, b);
}

std::optional<Value> negate(Heap& heap, const Value& a) {
    Value result;
    if (a.kind() == ValueKind::Int) {
        if (a.asInt() == INT64_MIN) {
            return evalError(heap, fmt::format("integer overflow: -({}) does not fit in 64 bits", a.asInt()),
                             Json{{"operator", "-"}, {"operand", a.asInt()}});
        }
        result = Value::integer(-a.asInt());
    } else if (a.kind() == ValueKind::Float) {
        result = Value::floating(-a.asFloat());
    } else {
        return evalError(heap, fmt::format("unsupported operand type for unary -: {}", kindName(a.kind())));
    }
    return result.withLabels(a.tags(), a.prov());
}

std::optional<Value> logicalNot(Heap& heap, const Value& a) {
    if (a.kind() != ValueKind::Bool)
        return evalError(heap, fmt::format("unsupported operand type for not: {}", kindName(a.kind())));
    return Value::boolean(!a.asBool(), a.tags(), a.prov());
}

// ---- Comparison.

std::optional<Value> equals(Heap& heap, const Value& a, const Value& b) {
    std::optional<bool> equal = valuesEqual(heap, a, b);
    if (!equal) return std::nullopt;
    return labelDeep(heap, Value::boolean(*equal), a, b);
}

std::optional<Value> notEquals(Heap& heap, const Value& a, const Value& b) {
    std::optional<bool> equal = valuesEqual(heap, a, b);
    if (!equal) return std::nullopt;
    return labelDeep(heap, Value::boolean(!*equal), a, b);
}

std::optional<Value> lessThan(Heap& heap, const Value& a, const Value& b) {
    return orderingOp(heap, a, b, "<", [](int c) { return c < 0; });
}
std::optional<Value> lessEqual(Heap& heap, const Value& a, const Value& b) {
    return orderingOp(heap, a, b, "<=", [](int c) { return c <= 0; });
}
std::optional<Value> greaterThan(Heap& heap, const Value& a, const Value& b) {
    return orderingOp(heap, a, b, ">", [](int c) { return c > 0; });
}
std::optional<Value> greaterEqual(Heap& heap, const Value& a, const Value& b) {
    return orderingOp(heap, a, b, ">=", [](int c) { return c >= 0; });
}

std::optional<Value> memberOf(Heap& heap, const Value& item, const Value& container) {
    bool found = false;
    if (container.kind() == ValueKind::List) {
        for (const Value& element : container.asList().items) {
            std::optional<bool> equal = valuesEqual(heap, item, element);
            if (!equal) return std::nullopt;
            if (*equal) {
                found = true;
                break;
            }
        }
    } else if (container.kind() == ValueKind::Str && item.kind() == ValueKind::Str) {
        std::optional<size_t> at = findText(heap, container.asStr(), item.asStr());
        if (!at) return std::nullopt;
        found = *at != std::string_view::npos;
    } else {
        return unsupported(heap, "in", item, container);
    }
    return labelDeep(heap, Value::boolean(found), item, container);
}

// ---- Access.

std::optional<Value> indexList(Heap& heap, const Value& list, const Value& index) {
    if (list.kind() != ValueKind::List || index.kind() != ValueKind::Int) return unsupported(heap, "[]", list, index);
    const auto& items = list.asList().items;
    auto length = static_cast<int64_t>(items.size());
    int64_t i = index.asInt();
    int64_t at = i < 0 ? i + length : i;  // no overflow: i >= INT64_MIN and length >= 0
    if (at < 0 || at >= length) {
        return evalError(heap, fmt::format("index {} is out of range for a list of length {}", i, length),
                         Json{{"index", i}, {"length", length}});
    }
    const Value& element = items[static_cast<size_t>(at)];
    std::optional<TagSetId> tags = heap.uniteTags(element.tags(), list.tags());
    if (tags) tags = heap.uniteTags(*tags, index.tags());
    std::optional<ProvId> prov = heap.uniteProv(element.prov(), list.prov());
    if (prov) prov = heap.uniteProv(*prov, index.prov());
    if (!tags || !prov) return std::nullopt;
    return element.withLabels(*tags, *prov);
}

std::optional<Value> getFieldAt(Heap& heap, const Value& record, size_t position) {
    if (record.kind() != ValueKind::Record)
        return evalError(heap, fmt::format("field access on a {}", kindName(record.kind())));
    const RecordObject& object = record.asRecord();
    if (position >= object.values.size())
        return evalError(heap, fmt::format("record has no field number {}", position));
    const Value& field = object.values[position];
    std::optional<TagSetId> tags = heap.uniteTags(field.tags(), record.tags());
    std::optional<ProvId> prov = heap.uniteProv(field.prov(), record.prov());
    if (!tags || !prov) return std::nullopt;
    return field.withLabels(*tags, *prov);
}

std::optional<Value> getField(Heap& heap, const Value& record, std::string_view name) {
    if (record.kind() != ValueKind::Record)
        return evalError(heap, fmt::format("field access on a {}", kindName(record.kind())));
    // A lookup by name scans the shape's names: work (GETFIELD caches the position per shape).
    if (!heap.work(record.asRecord().values.size() * sizeof(Value))) return std::nullopt;
    std::optional<size_t> position = record.asRecord().shape->indexOf(name);
    if (!position) {
        return evalError(heap, fmt::format("record has no field '{}'", name), Json{{"field", name}});
    }
    return getFieldAt(heap, record, *position);
}

// ---- Text.

std::optional<Value> toStr(Heap& heap, const Value& v) {
    std::optional<TagSetId> tags = heap.deepTags(v);
    std::optional<ProvId> prov = heap.deepProv(v);
    if (!tags || !prov) return std::nullopt;
    if (v.kind() == ValueKind::Str) return v.withLabels(*tags, *prov);  // shares the text
    std::optional<Value> out = heap.makeStr({}, *tags, *prov);
    if (!out || !appendStrOf(heap, *out, v)) return std::nullopt;
    return out;
}

std::optional<Value> interpolate(Heap& heap, std::span<const Value> parts) {
    TagSetId tags = kNoTags;
    ProvId prov = kNoProv;
    for (const Value& part : parts) {
        std::optional<TagSetId> t = heap.uniteTags(tags, part.tags());
        if (t) t = heap.uniteTags(*t, contentTags(part));
        std::optional<ProvId> p = heap.uniteProv(prov, part.prov());
        if (p) p = heap.uniteProv(*p, contentProv(part));
        if (!t || !p) return std::nullopt;
        tags = *t;
        prov = *p;
    }
    std::optional<Value> out = heap.makeStr({}, tags, prov);
    if (!out) return std::nullopt;
    for (const Value& part : parts)
        if (!appendStrOf(heap, *out, part)) return std::nullopt;
    return out;
}

}  // namespace remit
