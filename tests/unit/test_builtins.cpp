// Unit tests for the builtins (runtime/builtins.h): each builtin's behaviour, the Python edge cases
// it must reproduce, the labelling rules of docs/language.md "Labels, exactly", the errors (R0101
// for bad arguments and values, R0701 for memory) and large inputs that would expose quadratic
// work. Expected values were produced with CPython 3.11 (str.lower/upper/strip, int(), float(),
// round(), sum(), min()/max(), str.replace/split). Beyond these, the implementation was checked
// against Python over every code point and ~1.5 million generated strings and round() calls.
#include <doctest/doctest.h>

#include <bit>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "bytecode/module.h"
#include "runtime/builtins.h"
#include "runtime/heap.h"
#include "runtime/ops.h"
#include "session/pipeline.h"
#include "vm/run.h"
#include "runtime/value.h"

using namespace remit;

namespace {

Value str(Heap& heap, std::string_view text, TagSetId tags = kNoTags, ProvId prov = kNoProv) {
    std::optional<Value> v = heap.makeStr(text, tags, prov);
    REQUIRE(v);
    return *v;
}

Value list(Heap& heap, std::vector<Value> items, TagSetId tags = kNoTags, ProvId prov = kNoProv) {
    std::optional<Value> v = heap.makeList(items, tags, prov);
    REQUIRE(v);
    return *v;
}

Value record(Heap& heap, std::vector<std::pair<std::string, Value>> fields) {
    std::vector<std::string> names;
    std::vector<Value> values;
    for (auto& [name, value] : fields) {
        names.push_back(name);
        values.push_back(value);
    }
    std::optional<Value> v = heap.makeRecord(heap.recordShape(names), values);
    REQUIRE(v);
    return *v;
}

Value I(int64_t i, TagSetId tags = kNoTags, ProvId prov = kNoProv) { return Value::integer(i, tags, prov); }
Value F(double f, TagSetId tags = kNoTags, ProvId prov = kNoProv) { return Value::floating(f, tags, prov); }
Value B(bool b) { return Value::boolean(b); }

TagSetId tagSet(Heap& heap, std::initializer_list<std::string_view> names) {
    std::optional<TagSetId> id = heap.internTags(names);
    REQUIRE(id);
    return *id;
}

ProvId leaf(Heap& heap, uint64_t seq) {
    std::optional<ProvId> id = heap.provLeaf(seq);
    REQUIRE(id);
    return *id;
}

std::vector<std::string> tagNames(const Heap& heap, TagSetId id) { return heap.tagTable().names(id); }
std::vector<uint64_t> seqs(const Heap& heap, ProvId id) { return heap.provTable().flatten(id); }
using Names = std::vector<std::string>;
using Seqs = std::vector<uint64_t>;

std::optional<Value> call(Heap& heap, BuiltinId id, std::vector<Value> args) {
    REQUIRE(args.size() == builtinInfo(id).argc);
    return callBuiltin(heap, id, args);
}

Value ok(const std::optional<Value>& result) {
    REQUIRE(result);
    return *result;
}

// The builtin failed; returns the error and clears it.
RuntimeError failure(Heap& heap, const std::optional<Value>& result) {
    REQUIRE_FALSE(result);
    REQUIRE(heap.failed());
    return heap.takeError();
}

// Runs a one-argument Str → Str builtin and returns the text.
std::string text1(Heap& heap, BuiltinId id, std::string_view s) {
    return std::string(ok(call(heap, id, {str(heap, s)})).asStr());
}

std::vector<std::string> strings(const Value& xs) {
    std::vector<std::string> out;
    for (const Value& x : xs.asList().items) out.emplace_back(x.asStr());
    return out;
}

std::vector<int64_t> ints(const Value& xs) {
    std::vector<int64_t> out;
    for (const Value& x : xs.asList().items) out.push_back(x.asInt());
    return out;
}

// Exact double identity (distinguishes -0.0 from 0.0).
bool sameDouble(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }

}  // namespace

// ---------------------------------------------------------------- the table

TEST_CASE("builtins: the table and lookup by name and arity") {
    CHECK(kBuiltinCount == 25);
    // Ids are part of the .rbc format (builtins.def: append only).
    CHECK(static_cast<int>(BuiltinId::Len) == 0);
    CHECK(static_cast<int>(BuiltinId::MinList) == 16);
    CHECK(static_cast<int>(BuiltinId::Unique) == 24);
    CHECK(findBuiltin("len", 1) == BuiltinId::Len);
    CHECK(findBuiltin("min", 2) == BuiltinId::Min2);
    CHECK(findBuiltin("min", 1) == BuiltinId::MinList);
    CHECK(findBuiltin("max", 1) == BuiltinId::MaxList);
    CHECK(findBuiltin("round", 1) == BuiltinId::Round);
    CHECK(findBuiltin("round", 2) == BuiltinId::RoundTo);
    CHECK(findBuiltin("replace", 3) == BuiltinId::Replace);
    CHECK_FALSE(findBuiltin("len", 2));
    CHECK_FALSE(findBuiltin("print", 1));
    CHECK_FALSE(findBuiltin("", 0));
    for (uint16_t i = 0; i < kBuiltinCount; ++i) {
        const BuiltinInfo& info = kBuiltins[i];
        CHECK(findBuiltin(info.name, info.argc) == static_cast<BuiltinId>(i));
    }
}

// ---------------------------------------------------------------- each builtin

TEST_CASE("builtins: len counts list items and code points") {
    Heap heap;
    CHECK(ok(call(heap, BuiltinId::Len, {str(heap, "")})).asInt() == 0);
    CHECK(ok(call(heap, BuiltinId::Len, {str(heap, "héllo")})).asInt() == 5);
    CHECK(ok(call(heap, BuiltinId::Len, {str(heap, "😀中")})).asInt() == 2);
    CHECK(ok(call(heap, BuiltinId::Len, {list(heap, {I(1), str(heap, "ab"), list(heap, {})})})).asInt() == 3);
    CHECK(ok(call(heap, BuiltinId::Len, {list(heap, {})})).asInt() == 0);
}

TEST_CASE("builtins: take is xs[:N], and nothing for a negative N") {
    Heap heap;
    Value xs = list(heap, {I(1), I(2), I(3)});
    CHECK(ints(ok(call(heap, BuiltinId::Take, {xs, I(2)}))) == std::vector<int64_t>{1, 2});
    CHECK(ints(ok(call(heap, BuiltinId::Take, {xs, I(0)}))).empty());
    // Decision: Python's xs[:-1] would be [1, 2]; the static bound is max(0, N), so it is empty.
    CHECK(ints(ok(call(heap, BuiltinId::Take, {xs, I(-1)}))).empty());
    CHECK(ints(ok(call(heap, BuiltinId::Take, {xs, I(INT64_MIN)}))).empty());
    // Taking everything shares the list.
    Value all = ok(call(heap, BuiltinId::Take, {xs, I(INT64_MAX)}));
    CHECK(all.object() == xs.object());
    CHECK(ints(all) == std::vector<int64_t>{1, 2, 3});
}

TEST_CASE("builtins: range") {
    Heap heap;
    CHECK(ints(ok(call(heap, BuiltinId::Range, {I(4)}))) == std::vector<int64_t>{0, 1, 2, 3});
    CHECK(ints(ok(call(heap, BuiltinId::Range, {I(0)}))).empty());
    CHECK(ints(ok(call(heap, BuiltinId::Range, {I(-5)}))).empty());
    CHECK(ints(ok(call(heap, BuiltinId::Range, {I(INT64_MIN)}))).empty());
    // The list's memory is charged up front: a huge N is R0701, not an allocation failure.
    RuntimeError e = failure(heap, call(heap, BuiltinId::Range, {I(INT64_MAX)}));
    CHECK(e.code == DiagCode::R0701);
    Heap small(1 << 16);
    CHECK(failure(small, call(small, BuiltinId::Range, {I(100000)})).code == DiagCode::R0701);
    CHECK(small.liveBytes() == 0);
}

TEST_CASE("builtins: str is ops.h toStr") {
    Heap heap;
    auto text = [&](Value v) { return std::string(ok(call(heap, BuiltinId::Str, {v})).asStr()); };
    CHECK(text(F(1.0)) == "1.0");
    CHECK(text(F(1e16)) == "1e+16");
    CHECK(text(I(-3)) == "-3");
    CHECK(text(B(true)) == "true");
    CHECK(text(Value::unit()) == "");
    CHECK(text(str(heap, "as is")) == "as is");
    CHECK(text(list(heap, {I(1), str(heap, "x")})) == "[1, \"x\"]");
}

TEST_CASE("builtins: lower and upper follow Python's full Unicode case mapping") {
    Heap heap;
    CHECK(text1(heap, BuiltinId::Upper, "Hello, World 1") == "HELLO, WORLD 1");
    CHECK(text1(heap, BuiltinId::Lower, "Hello, World 1") == "hello, world 1");
    CHECK(text1(heap, BuiltinId::Upper, "") == "");
    CHECK(text1(heap, BuiltinId::Upper, "straße") == "STRASSE");
    CHECK(text1(heap, BuiltinId::Upper, "ﬃ") == "FFI");
    CHECK(text1(heap, BuiltinId::Upper, "ŉ") == "ʼN");
    CHECK(text1(heap, BuiltinId::Upper, "ΐ") == "\u0399\u0308\u0301");  // three code points
    CHECK(text1(heap, BuiltinId::Upper, "ǅ") == "Ǆ");
    CHECK(text1(heap, BuiltinId::Lower, "ǅ") == "ǆ");
    CHECK(text1(heap, BuiltinId::Lower, "İ") == "i\u0307");  // two code points
    CHECK(text1(heap, BuiltinId::Upper, "éàçœ ĳ ǆ") == "ÉÀÇŒ Ĳ Ǆ");
    CHECK(text1(heap, BuiltinId::Lower, "ÀÉÎÕÜ Ā Ő Ÿ") == "àéîõü ā ő ÿ");
    CHECK(text1(heap, BuiltinId::Upper, "привет") == "ПРИВЕТ");
    CHECK(text1(heap, BuiltinId::Lower, "ДОБРЫЙ") == "добрый");
    CHECK(text1(heap, BuiltinId::Upper, "𐐨") == "𐐀");  // Deseret, outside the BMP
    CHECK(text1(heap, BuiltinId::Upper, "中文 😀") == "中文 😀");
    // Greek capital sigma lowers to final ς after a cased letter that no cased letter follows,
    // skipping case-ignorable characters (' . and combining marks) both ways — as Python does.
    CHECK(text1(heap, BuiltinId::Lower, "ΟΔΟΣ") == "οδος");
    CHECK(text1(heap, BuiltinId::Lower, "ΣΑ") == "σα");
    CHECK(text1(heap, BuiltinId::Lower, "Σ") == "σ");
    CHECK(text1(heap, BuiltinId::Lower, "AΣ.") == "aς.");
    CHECK(text1(heap, BuiltinId::Lower, "AΣ'B") == "aσ'b");
    CHECK(text1(heap, BuiltinId::Lower, "ΑΣ ΒΣ") == "ας βς");
    CHECK(text1(heap, BuiltinId::Lower, "Σ.Σ") == "σ.ς");
    CHECK(text1(heap, BuiltinId::Lower, "ὈΔΥΣΣΕΎΣ") == "ὀδυσσεύς");
    CHECK(text1(heap, BuiltinId::Upper, "ὀδυσσεύς") == "ὈΔΥΣΣΕΎΣ");
    // Text that does not change shares its object.
    Value same = str(heap, "already lower 123");
    CHECK(ok(call(heap, BuiltinId::Lower, {same})).object() == same.object());
}

TEST_CASE("builtins: trim strips what Python's str.isspace calls whitespace") {
    Heap heap;
    CHECK(text1(heap, BuiltinId::Trim, "  a b \t\n") == "a b");
    CHECK(text1(heap, BuiltinId::Trim, "\u3000\u00a0\u2028 x\x1c\x1f\x85\u205f") == "x");
    CHECK(text1(heap, BuiltinId::Trim, "\u200b a") == "\u200b a");  // zero width space is not whitespace
    CHECK(text1(heap, BuiltinId::Trim, " \v\f\r ") == "");
    CHECK(text1(heap, BuiltinId::Trim, "") == "");
    CHECK(text1(heap, BuiltinId::Trim, "é") == "é");
    Value same = str(heap, "no spaces");
    CHECK(ok(call(heap, BuiltinId::Trim, {same})).object() == same.object());
}

TEST_CASE("builtins: contains, startswith, endswith") {
    Heap heap;
    auto yes = [&](BuiltinId id, Value a, Value b) { return ok(call(heap, id, {a, b})).asBool(); };
    CHECK(yes(BuiltinId::Contains, str(heap, "hello"), str(heap, "ell")));
    CHECK(yes(BuiltinId::Contains, str(heap, "hello"), str(heap, "")));
    CHECK_FALSE(yes(BuiltinId::Contains, str(heap, "hello"), str(heap, "Hell")));
    CHECK(yes(BuiltinId::Contains, list(heap, {I(1), I(2)}), F(2.0)));  // structural: 2 == 2.0
    CHECK(yes(BuiltinId::Contains, list(heap, {list(heap, {I(1)})}), list(heap, {F(1.0)})));
    CHECK(yes(BuiltinId::Contains, list(heap, {record(heap, {{"a", I(1)}, {"b", I(2)}})}),
              record(heap, {{"b", I(2)}, {"a", I(1)}})));
    CHECK_FALSE(yes(BuiltinId::Contains, list(heap, {I(1)}), str(heap, "1")));
    CHECK_FALSE(yes(BuiltinId::Contains, list(heap, {}), I(1)));
    CHECK(yes(BuiltinId::StartsWith, str(heap, "héllo"), str(heap, "hé")));
    CHECK(yes(BuiltinId::StartsWith, str(heap, "x"), str(heap, "")));
    CHECK_FALSE(yes(BuiltinId::StartsWith, str(heap, "x"), str(heap, "xy")));
    CHECK(yes(BuiltinId::EndsWith, str(heap, "report.pdf"), str(heap, ".pdf")));
    CHECK_FALSE(yes(BuiltinId::EndsWith, str(heap, "report.pdf"), str(heap, ".PDF")));
}

TEST_CASE("builtins: replace replaces every occurrence; an empty old inserts between code points") {
    Heap heap;
    auto replace = [&](std::string_view s, std::string_view o, std::string_view n) {
        return std::string(ok(call(heap, BuiltinId::Replace, {str(heap, s), str(heap, o), str(heap, n)})).asStr());
    };
    CHECK(replace("a-b-c", "-", "+") == "a+b+c");
    CHECK(replace("aaa", "aa", "b") == "ba");  // left to right, no overlaps
    CHECK(replace("abc", "x", "y") == "abc");
    CHECK(replace("abc", "abc", "") == "");
    CHECK(replace("ab", "", "-") == "-a-b-");
    CHECK(replace("héllo", "", "-") == "-h-é-l-l-o-");
    CHECK(replace("", "", "x") == "x");
    CHECK(replace("", "a", "x") == "");
    CHECK(replace("ÉtÉ", "É", "e") == "ete");
    Value same = str(heap, "unchanged");
    CHECK(ok(call(heap, BuiltinId::Replace, {same, str(heap, "x"), str(heap, "y")})).object() == same.object());
}

TEST_CASE("builtins: split is Python's str.split(sep)") {
    Heap heap;
    auto split = [&](std::string_view s, std::string_view sep) {
        return strings(ok(call(heap, BuiltinId::Split, {str(heap, s), str(heap, sep)})));
    };
    using V = std::vector<std::string>;
    CHECK(split("a,b,,c", ",") == V{"a", "b", "", "c"});
    CHECK(split("", ",") == V{""});
    CHECK(split(",", ",") == V{"", ""});
    CHECK(split("aXXb", "XX") == V{"a", "b"});
    CHECK(split("aaa", "aa") == V{"", "a"});
    CHECK(split("no separator", ";") == V{"no separator"});
    CHECK(split("α→β→γ", "→") == V{"α", "β", "γ"});
    RuntimeError e = failure(heap, call(heap, BuiltinId::Split, {str(heap, "abc"), str(heap, "")}));
    CHECK(e.code == DiagCode::R0101);
    CHECK(e.message == "empty separator");
    CHECK(e.details["builtin"] == "split");
}

TEST_CASE("builtins: join converts elements as str() does") {
    Heap heap;
    auto join = [&](Value xs, std::string_view sep) {
        return std::string(ok(call(heap, BuiltinId::Join, {xs, str(heap, sep)})).asStr());
    };
    CHECK(join(list(heap, {str(heap, "a"), str(heap, "b"), str(heap, "c")}), ", ") == "a, b, c");
    CHECK(join(list(heap, {}), ", ") == "");
    CHECK(join(list(heap, {str(heap, "only")}), "-") == "only");
    CHECK(join(list(heap, {I(1), str(heap, "a"), F(2.5), B(true), Value::unit(), F(1e16), list(heap, {I(1), str(heap, "x")}),
                           record(heap, {{"k", str(heap, "é")}})}),
               "|") == "1|a|2.5|true||1e+16|[1, \"x\"]|{\"k\": \"é\"}");
}

TEST_CASE("builtins: sum adds in order, Int until a Float appears") {
    Heap heap;
    auto sum = [&](std::vector<Value> items) { return ok(call(heap, BuiltinId::Sum, {list(heap, items)})); };
    Value zero = sum({});
    CHECK(zero.kind() == ValueKind::Int);
    CHECK(zero.asInt() == 0);
    CHECK(sum({I(1), I(2), I(3)}).asInt() == 6);
    Value mixed = sum({I(1), F(2.5), I(3)});
    CHECK(mixed.kind() == ValueKind::Float);
    CHECK(mixed.asFloat() == 6.5);
    // Plain IEEE addition in order (CPython 3.11; 3.12 compensates): 0.1 ten times.
    std::vector<Value> tenths(10, F(0.1));
    CHECK(sameDouble(sum(tenths).asFloat(), 0.9999999999999999));
    // sum([2**53, 1.0, 1]) and sum([1, 2**53, 1.0]) are both 9007199254740992.0 in Python.
    CHECK(sameDouble(sum({I(int64_t(1) << 53), F(1.0), I(1)}).asFloat(), 9007199254740992.0));
    CHECK(sameDouble(sum({I(1), I(int64_t(1) << 53), F(1.0)}).asFloat(), 9007199254740992.0));
    CHECK(sameDouble(sum({F(-0.0)}).asFloat(), 0.0));  // Python starts from the Int 0
    RuntimeError overflow = failure(heap, call(heap, BuiltinId::Sum, {list(heap, {I(INT64_MAX), I(1)})}));
    CHECK(overflow.code == DiagCode::R0101);
    CHECK(overflow.message.starts_with("integer overflow"));
    RuntimeError infinite = failure(heap, call(heap, BuiltinId::Sum, {list(heap, {F(1e308), F(1e308)})}));
    CHECK(infinite.code == DiagCode::R0101);
    CHECK(infinite.message == "float overflow: sum is not a finite number");
    RuntimeError notNumber = failure(heap, call(heap, BuiltinId::Sum, {list(heap, {I(1), str(heap, "2")})}));
    CHECK(notNumber.code == DiagCode::R0101);
    CHECK(notNumber.message == "'sum' expects a List of numbers, not one holding Str");
}

TEST_CASE("builtins: min and max return the original operand, the first on ties") {
    Heap heap;
    auto two = [&](BuiltinId id, Value a, Value b) { return ok(call(heap, id, {a, b})); };
    Value m = two(BuiltinId::Min2, I(1), F(2.5));
    CHECK(m.kind() == ValueKind::Int);
    CHECK(m.asInt() == 1);
    CHECK(two(BuiltinId::Min2, I(1), F(1.0)).kind() == ValueKind::Int);
    CHECK(two(BuiltinId::Min2, F(1.0), I(1)).kind() == ValueKind::Float);
    CHECK(two(BuiltinId::Max2, I(2), F(2.0)).kind() == ValueKind::Int);
    CHECK(two(BuiltinId::Max2, I(2), F(2.5)).asFloat() == 2.5);
    // Exact Int/Float comparison: 2^53 + 1 > 2^53 as a Float.
    CHECK(two(BuiltinId::Max2, F(9007199254740992.0), I(9007199254740993)).asInt() == 9007199254740993);
    CHECK(two(BuiltinId::Min2, I(-3), I(7)).asInt() == -3);

    auto ofList = [&](BuiltinId id, std::vector<Value> items) { return ok(call(heap, id, {list(heap, items)})); };
    Value low = ofList(BuiltinId::MinList, {I(3), I(1), F(1.0)});
    CHECK(low.kind() == ValueKind::Int);
    CHECK(low.asInt() == 1);
    Value high = ofList(BuiltinId::MaxList, {F(1.0), I(2), F(2.0)});
    CHECK(high.kind() == ValueKind::Int);
    CHECK(high.asInt() == 2);
    CHECK(ofList(BuiltinId::MaxList, {F(-1.5)}).asFloat() == -1.5);
    RuntimeError e = failure(heap, call(heap, BuiltinId::MinList, {list(heap, {})}));
    CHECK(e.code == DiagCode::R0101);
    CHECK(e.message == "min() arg is an empty sequence");
    CHECK(failure(heap, call(heap, BuiltinId::MaxList, {list(heap, {})})).message == "max() arg is an empty sequence");
    CHECK(failure(heap, call(heap, BuiltinId::MaxList, {list(heap, {I(1), B(true)})})).code == DiagCode::R0101);
}

TEST_CASE("builtins: abs keeps the type") {
    Heap heap;
    CHECK(ok(call(heap, BuiltinId::Abs, {I(-5)})).asInt() == 5);
    CHECK(ok(call(heap, BuiltinId::Abs, {I(INT64_MAX)})).asInt() == INT64_MAX);
    Value f = ok(call(heap, BuiltinId::Abs, {F(-2.5)}));
    CHECK(f.kind() == ValueKind::Float);
    CHECK(f.asFloat() == 2.5);
    CHECK(sameDouble(ok(call(heap, BuiltinId::Abs, {F(-0.0)})).asFloat(), 0.0));
    RuntimeError e = failure(heap, call(heap, BuiltinId::Abs, {I(INT64_MIN)}));
    CHECK(e.code == DiagCode::R0101);
    CHECK(e.message == "integer overflow: abs(-9223372036854775808) does not fit in 64 bits");
}

TEST_CASE("builtins: round(x) rounds half to even into an Int") {
    Heap heap;
    auto round1 = [&](Value x) { return ok(call(heap, BuiltinId::Round, {x})); };
    CHECK(round1(F(2.5)).asInt() == 2);
    CHECK(round1(F(3.5)).asInt() == 4);
    CHECK(round1(F(-0.5)).asInt() == 0);
    CHECK(round1(F(-1.5)).asInt() == -2);
    CHECK(round1(F(0.49999999999999994)).asInt() == 0);
    CHECK(round1(F(4503599627370497.0)).asInt() == 4503599627370497);
    CHECK(round1(F(9223372036854774784.0)).asInt() == 9223372036854774784);  // the largest double below 2^63
    CHECK(round1(I(7)).asInt() == 7);
    CHECK(failure(heap, call(heap, BuiltinId::Round, {F(9223372036854775808.0)})).code == DiagCode::R0101);
    RuntimeError e = failure(heap, call(heap, BuiltinId::Round, {F(1e300)}));
    CHECK(e.message == "integer overflow: round(1e+300) does not fit in 64 bits");
}

TEST_CASE("builtins: round(x, n) rounds the exact binary value, as CPython") {
    Heap heap;
    auto roundTo = [&](Value x, int64_t n) { return ok(call(heap, BuiltinId::RoundTo, {x, I(n)})); };
    auto roundF = [&](double x, int64_t n) {
        Value r = roundTo(F(x), n);
        REQUIRE(r.kind() == ValueKind::Float);
        return r.asFloat();
    };
    CHECK(sameDouble(roundF(2.675, 2), 2.67));  // 2.675 is 2.67499999... in binary
    CHECK(sameDouble(roundF(0.125, 2), 0.12));  // an exact tie: to even
    CHECK(sameDouble(roundF(0.375, 2), 0.38));
    CHECK(sameDouble(roundF(0.285, 2), 0.28));
    CHECK(sameDouble(roundF(2.5, 0), 2.0));
    CHECK(sameDouble(roundF(0.5, 0), 0.0));
    CHECK(sameDouble(roundF(1.5, 0), 2.0));
    CHECK(sameDouble(roundF(-0.4, 0), -0.0));
    CHECK(sameDouble(roundF(1234.5678, -2), 1200.0));
    CHECK(sameDouble(roundF(123.456, -1), 120.0));
    CHECK(sameDouble(roundF(-123.456, -3), -0.0));
    CHECK(sameDouble(roundF(1e16 + 2, -1), 1e16));
    CHECK(sameDouble(roundF(1.0000000000000002, 15), 1.0));
    CHECK(sameDouble(roundF(5e-324, 400), 5e-324));  // beyond 323 digits nothing changes
    CHECK(sameDouble(roundF(5e-324, 323), 0.0));  // 4.9e-324 is below half of 10^-323
    CHECK(sameDouble(roundF(1e300, -400), 0.0));
    CHECK(sameDouble(roundF(-1e300, INT64_MIN), -0.0));
    CHECK(sameDouble(roundF(0.1, INT64_MAX), 0.1));
    RuntimeError e = failure(heap, call(heap, BuiltinId::RoundTo, {F(1.7976931348623157e308), I(-308)}));
    CHECK(e.code == DiagCode::R0101);  // Python: "rounded value too large to represent"
    CHECK(e.message == "float overflow: round(1.7976931348623157e+308, -308) is not a finite number");

    // An Int stays an Int: unchanged for n >= 0, else half-even to a multiple of 10^-n.
    auto roundI = [&](int64_t x, int64_t n) {
        Value r = roundTo(I(x), n);
        REQUIRE(r.kind() == ValueKind::Int);
        return r.asInt();
    };
    CHECK(roundI(1250, -2) == 1200);
    CHECK(roundI(1350, -2) == 1400);
    CHECK(roundI(-1250, -2) == -1200);
    CHECK(roundI(15, -1) == 20);
    CHECK(roundI(5, -1) == 0);
    CHECK(roundI(25, -1) == 20);
    CHECK(roundI(-15, -1) == -20);
    CHECK(roundI(1251, -2) == 1300);
    CHECK(roundI(1234, 3) == 1234);
    CHECK(roundI(4999999999999999999, -19) == 0);
    CHECK(roundI(INT64_MIN, -20) == 0);
    CHECK(roundI(123, INT64_MIN) == 0);
    CHECK(roundI(9223372036854775804, -1) == 9223372036854775800);
    // Python gives 9223372036854775810 and 10**19: beyond 64 bits.
    CHECK(failure(heap, call(heap, BuiltinId::RoundTo, {I(INT64_MAX), I(-1)})).code == DiagCode::R0101);
    CHECK(failure(heap, call(heap, BuiltinId::RoundTo, {I(INT64_MAX), I(-19)})).code == DiagCode::R0101);
}

TEST_CASE("builtins: int() of numbers and of strings, as Python parses them") {
    Heap heap;
    auto toInt = [&](Value x) { return ok(call(heap, BuiltinId::Int, {x})).asInt(); };
    auto parse = [&](std::string_view s) { return toInt(str(heap, s)); };
    CHECK(toInt(I(-4)) == -4);
    CHECK(toInt(F(2.9)) == 2);
    CHECK(toInt(F(-2.9)) == -2);
    CHECK(toInt(F(-0.0)) == 0);
    CHECK(toInt(F(-9223372036854775808.0)) == INT64_MIN);
    CHECK(parse("42") == 42);
    CHECK(parse(" +1_000 ") == 1000);
    CHECK(parse("-0") == 0);
    CHECK(parse("007") == 7);
    CHECK(parse("\t\n-12\r\n") == -12);
    CHECK(parse("\u30005\u2003") == 5);  // Unicode whitespace around
    CHECK(parse("١٢٣") == 123);          // Arabic-Indic digits
    CHECK(parse("１２") == 12);          // fullwidth digits
    CHECK(parse("9223372036854775807") == INT64_MAX);
    CHECK(parse("-9223372036854775808") == INT64_MIN);
    for (std::string_view bad : {"", " ", "1__0", "_1", "1_", "+", "-_1", "1 2", "0x10", "1.0", "1e3", "²", "\x1c" "5",
                                 "5\x1c", "\x7f" "1", "++1", "1-"}) {
        CAPTURE(bad);
        RuntimeError e = failure(heap, call(heap, BuiltinId::Int, {str(heap, bad)}));
        CHECK(e.code == DiagCode::R0101);
        CHECK(e.message.starts_with("cannot convert "));
        CHECK(e.message.ends_with(" to Int"));
    }
    CHECK(failure(heap, call(heap, BuiltinId::Int, {str(heap, "1__0")})).message ==
          "cannot convert '1__0' to Int");
    CHECK(failure(heap, call(heap, BuiltinId::Int, {str(heap, "it's")})).message ==
          "cannot convert \"it's\" to Int");
    CHECK(failure(heap, call(heap, BuiltinId::Int, {str(heap, "a\tb\x01")})).message ==
          "cannot convert 'a\\tb\\x01' to Int");
    // Out of the Int range, and only for a valid literal.
    RuntimeError big = failure(heap, call(heap, BuiltinId::Int, {str(heap, "9223372036854775808")}));
    CHECK(big.code == DiagCode::R0101);
    CHECK(big.message == "integer overflow: int('9223372036854775808') does not fit in 64 bits");
    CHECK(failure(heap, call(heap, BuiltinId::Int, {str(heap, "99999999999999999999x")}))
              .message == "cannot convert '99999999999999999999x' to Int");
    CHECK(failure(heap, call(heap, BuiltinId::Int, {F(1e19)})).message ==
          "integer overflow: int(1e+19) does not fit in 64 bits");
    // The prototype's wording (`cannot convert '12x' to Int`); a long bad string is quoted only in part.
    CHECK(failure(heap, call(heap, BuiltinId::Int, {str(heap, "12x")})).message == "cannot convert '12x' to Int");
    std::string longBad(1000, 'z');
    RuntimeError cut = failure(heap, call(heap, BuiltinId::Int, {str(heap, longBad)}));
    CHECK(cut.message == "cannot convert '" + std::string(200, 'z') + "' to Int");
}

TEST_CASE("builtins: float() of numbers and of strings, finite only") {
    Heap heap;
    auto toFloat = [&](Value x) {
        Value r = ok(call(heap, BuiltinId::Float, {x}));
        REQUIRE(r.kind() == ValueKind::Float);
        return r.asFloat();
    };
    auto parse = [&](std::string_view s) { return toFloat(str(heap, s)); };
    CHECK(toFloat(I(3)) == 3.0);
    CHECK(sameDouble(toFloat(I(9007199254740993)), 9007199254740992.0));  // nearest, ties to even
    CHECK(toFloat(F(2.5)) == 2.5);
    CHECK(parse("1.5") == 1.5);
    CHECK(parse("  1.5\n") == 1.5);
    CHECK(parse("1_0.5") == 10.5);
    CHECK(parse("1_000.000_1") == 1000.0001);
    CHECK(parse("1e5") == 100000.0);
    CHECK(parse("1E+5") == 100000.0);
    CHECK(parse("1e1_0") == 1e10);
    CHECK(parse("1.") == 1.0);
    CHECK(parse(".5") == 0.5);
    CHECK(parse("+.5e-1") == 0.05);
    CHECK(sameDouble(parse("-0"), -0.0));
    CHECK(parse("0.1") == 0.1);
    CHECK(parse("٣.٥") == 3.5);
    CHECK(parse("\u3000 7 \u00a0") == 7.0);
    CHECK(sameDouble(parse("1e-400"), 0.0));  // underflow is zero, as in Python
    CHECK(sameDouble(parse("-1e-400"), -0.0));
    CHECK(parse("4.9406564584124654e-324") == 5e-324);
    CHECK(parse("1.7976931348623157e308") == 1.7976931348623157e308);
    CHECK(parse("0." + std::string(400, '0') + "1e401") == 1.0);
    for (std::string_view bad : {"", " ", ".", "1e", "e5", "1e_5", "1._5", "_1.5", "1.5_", "1__0", "0x1p3", "1d5",
                                 "in f", "infinit", "nan1", "1,5", "--1", "1.5.", "\x1c" "1"}) {
        CAPTURE(bad);
        RuntimeError e = failure(heap, call(heap, BuiltinId::Float, {str(heap, bad)}));
        CHECK(e.code == DiagCode::R0101);
        CHECK(e.message.starts_with("cannot convert "));
        CHECK(e.message.ends_with(" to Float"));
    }
    CHECK(failure(heap, call(heap, BuiltinId::Float, {str(heap, "abc")})).message ==
          "cannot convert 'abc' to Float");
    // Python accepts these; a Remit Float must be finite (docs/language.md, decision 41).
    for (std::string_view nonFinite : {"inf", "-Infinity", "nAn", "+nan", "INF", "1e309", "-1.8e308"}) {
        CAPTURE(nonFinite);
        RuntimeError e = failure(heap, call(heap, BuiltinId::Float, {str(heap, nonFinite)}));
        CHECK(e.code == DiagCode::R0101);
        CHECK(e.message.ends_with("is not a finite number"));
    }
    CHECK(failure(heap, call(heap, BuiltinId::Float, {str(heap, "inf")})).message ==
          "float('inf') is not a finite number");
}

TEST_CASE("builtins: first and unique") {
    Heap heap;
    CHECK(ok(call(heap, BuiltinId::First, {list(heap, {str(heap, "a"), I(2)})})).asStr() == "a");
    RuntimeError e = failure(heap, call(heap, BuiltinId::First, {list(heap, {})}));
    CHECK(e.code == DiagCode::R0101);
    CHECK(e.message == "first() of an empty list");

    // First occurrence wins, compared structurally: 1 and 1.0 are equal and the Int stays.
    Value xs = list(heap, {I(1), F(1.0), I(2), str(heap, "a"), str(heap, "a"), F(2.5), F(-0.0), I(0), B(true),
                           B(true), Value::unit(), Value::unit(), list(heap, {I(1)}), list(heap, {F(1.0)}),
                           record(heap, {{"a", I(1)}, {"b", str(heap, "x")}}),
                           record(heap, {{"b", str(heap, "x")}, {"a", F(1.0)}}), record(heap, {{"a", I(2)}})});
    Value u = ok(call(heap, BuiltinId::Unique, {xs}));
    const auto& items = u.asList().items;
    REQUIRE(items.size() == 10);
    CHECK(items[0].kind() == ValueKind::Int);
    CHECK(items[1].asInt() == 2);
    CHECK(items[2].asStr() == "a");
    CHECK(items[3].asFloat() == 2.5);
    CHECK(sameDouble(items[4].asFloat(), -0.0));  // -0.0 == 0: the first one stays
    CHECK(items[5].asBool());
    CHECK(items[6].kind() == ValueKind::Unit);
    CHECK(items[7].asList().items[0].kind() == ValueKind::Int);
    CHECK(items[8].asRecord().shape->names[0] == "a");  // the first of the two equal records
    CHECK(items[8].asRecord().values[0].kind() == ValueKind::Int);
    CHECK(items[9].asRecord().values[0].asInt() == 2);
    // Nothing repeated: the list itself.
    Value distinct = list(heap, {I(1), I(2)});
    CHECK(ok(call(heap, BuiltinId::Unique, {distinct})).object() == distinct.object());
    CHECK(ok(call(heap, BuiltinId::Unique, {list(heap, {})})).asList().items.empty());
}

// ---------------------------------------------------- labels (docs/language.md "Labels, exactly")

TEST_CASE("builtins: tags and provenance of results") {
    Heap heap;
    TagSetId u = tagSet(heap, {"untrusted"});
    TagSetId p = tagSet(heap, {"private"});
    TagSetId s = tagSet(heap, {"secret"});
    ProvId p1 = leaf(heap, 1);
    ProvId p2 = leaf(heap, 2);
    ProvId p3 = leaf(heap, 3);
    auto names = [&](const Value& v) { return tagNames(heap, v.tags()); };
    auto from = [&](const Value& v) { return seqs(heap, v.prov()); };

    // Most builtins: the union of the arguments' top-level labels.
    Value text = str(heap, "Hello World", u, p1);
    Value lowered = ok(call(heap, BuiltinId::Lower, {text}));
    CHECK(names(lowered) == Names{"untrusted"});
    CHECK(from(lowered) == Seqs{1});
    Value unchanged = ok(call(heap, BuiltinId::Trim, {text}));
    CHECK(names(unchanged) == Names{"untrusted"});
    Value replaced = ok(call(heap, BuiltinId::Replace, {text, str(heap, "o", p), str(heap, "0", s, p2)}));
    CHECK(names(replaced) == Names{"private", "secret", "untrusted"});
    CHECK(from(replaced) == Seqs{1, 2});
    Value starts = ok(call(heap, BuiltinId::StartsWith, {text, str(heap, "He", p)}));
    CHECK(names(starts) == Names{"private", "untrusted"});
    Value length = ok(call(heap, BuiltinId::Len, {text}));
    CHECK(names(length) == Names{"untrusted"});
    Value rounded = ok(call(heap, BuiltinId::RoundTo, {F(2.675, u, p1), I(2, p, p2)}));
    CHECK(names(rounded) == Names{"private", "untrusted"});
    CHECK(from(rounded) == Seqs{1, 2});
    Value parsed = ok(call(heap, BuiltinId::Int, {str(heap, "12", s, p3)}));
    CHECK(names(parsed) == Names{"secret"});
    CHECK(from(parsed) == Seqs{3});
    Value smaller = ok(call(heap, BuiltinId::Min2, {I(1, u, p1), I(2, p, p2)}));
    CHECK(smaller.asInt() == 1);
    CHECK(names(smaller) == Names{"private", "untrusted"});  // the loser's labels too
    CHECK(from(smaller) == Seqs{1, 2});

    // A list whose element is tagged, and which has its own top-level tag.
    Value xs = list(heap, {I(5, s, p3), I(7)}, u, p1);

    // sum, min/max of a list, join, contains on a list: also the list's deep labels.
    Value total = ok(call(heap, BuiltinId::Sum, {xs}));
    CHECK(names(total) == Names{"secret", "untrusted"});
    CHECK(from(total) == Seqs{1, 3});
    Value largest = ok(call(heap, BuiltinId::MaxList, {xs}));
    CHECK(largest.asInt() == 7);
    CHECK(names(largest) == Names{"secret", "untrusted"});  // the untagged 7 still depends on 5
    Value joined = ok(call(heap, BuiltinId::Join, {xs, str(heap, ",", p, p2)}));
    CHECK(joined.asStr() == "5,7");
    CHECK(names(joined) == Names{"private", "secret", "untrusted"});
    CHECK(from(joined) == Seqs{1, 2, 3});
    Value inList = ok(call(heap, BuiltinId::Contains, {xs, I(9, p)}));
    CHECK(names(inList) == Names{"private", "secret", "untrusted"});
    CHECK(from(inList) == Seqs{1, 3});
    // ... and the item's deep labels, as `x in xs`: a record whose field is tagged.
    Value probe = record(heap, {{"a", I(5, p, p2)}});
    Value recordInList = ok(call(heap, BuiltinId::Contains, {list(heap, {record(heap, {{"a", I(5)}})}), probe}));
    CHECK(recordInList.asBool());
    CHECK(names(recordInList) == Names{"private"});
    CHECK(from(recordInList) == Seqs{2});
    // contains on a Str: top-level of both only.
    Value inText = ok(call(heap, BuiltinId::Contains, {text, str(heap, "W", p)}));
    CHECK(names(inText) == Names{"private", "untrusted"});
    // An element's deep tags inside a nested list count for join.
    Value nested = list(heap, {list(heap, {str(heap, "x", s)})});
    CHECK(names(ok(call(heap, BuiltinId::Join, {nested, str(heap, "")}))) == Names{"secret"});

    // take: xs ∪ N at the top; the items keep their own.
    Value taken = ok(call(heap, BuiltinId::Take, {xs, I(1, p, p2)}));
    CHECK(names(taken) == Names{"private", "untrusted"});
    CHECK(from(taken) == Seqs{1, 2});
    CHECK(taken.asList().items[0].tags() == s);
    CHECK(taken.asList().deepTags == s);
    Value takenNone = ok(call(heap, BuiltinId::Take, {xs, I(0)}));
    CHECK(takenNone.asList().deepTags == kNoTags);  // the dropped item's labels are gone

    // first: element ∪ list.
    Value head = ok(call(heap, BuiltinId::First, {xs}));
    CHECK(names(head) == Names{"secret", "untrusted"});
    CHECK(from(head) == Seqs{1, 3});

    // unique: which items are kept depends on all of them, so the list carries the deep labels
    // (the dropped 5's too); the kept elements keep theirs.
    Value dup = list(heap, {I(5, s, p3), I(5), I(7, p)}, u, p1);
    Value uniq = ok(call(heap, BuiltinId::Unique, {dup}));
    CHECK(uniq.asList().items.size() == 2);
    CHECK(names(uniq) == Names{"private", "secret", "untrusted"});
    CHECK(from(uniq) == Seqs{1, 3});
    Value distinct = ok(call(heap, BuiltinId::Unique, {list(heap, {I(1, s), I(2)})}));
    CHECK(names(distinct) == Names{"secret"});  // nothing dropped: still depends on every item
    CHECK(uniq.asList().items[0].tags() == s);
    CHECK(tagNames(heap, uniq.asList().deepTags) == Names{"private", "secret"});

    // split: every piece and the list get the arguments' labels.
    Value pieces = ok(call(heap, BuiltinId::Split, {str(heap, "a,b", u, p1), str(heap, ",", p, p2)}));
    CHECK(names(pieces) == Names{"private", "untrusted"});
    CHECK(from(pieces) == Seqs{1, 2});
    for (const Value& piece : pieces.asList().items) {
        CHECK(names(piece) == Names{"private", "untrusted"});
        CHECK(from(piece) == Seqs{1, 2});
    }
    CHECK(tagNames(heap, pieces.asList().deepTags) == Names{"private", "untrusted"});

    // range: untagged, even from a tagged N.
    Value numbers = ok(call(heap, BuiltinId::Range, {I(3, u, p1)}));
    CHECK(numbers.tags() == kNoTags);
    CHECK(numbers.prov() == kNoProv);
    CHECK(numbers.asList().deepTags == kNoTags);

    // str: deep labels (ops.h toStr; docs/language.md, decision 45).
    CHECK(names(ok(call(heap, BuiltinId::Str, {xs}))) == Names{"secret", "untrusted"});
}

// ---------------------------------------------------------------- errors

TEST_CASE("builtins: arguments of the wrong kind are R0101, never a crash") {
    Heap heap;
    // Every builtin but str (which takes anything) rejects all-Unit arguments.
    for (uint16_t i = 0; i < kBuiltinCount; ++i) {
        auto id = static_cast<BuiltinId>(i);
        if (id == BuiltinId::Str) continue;
        CAPTURE(builtinInfo(id).name);
        std::vector<Value> args(builtinInfo(id).argc, Value::unit());
        RuntimeError e = failure(heap, callBuiltin(heap, id, args));
        CHECK(e.code == DiagCode::R0101);
        CHECK(e.message.starts_with("'" + std::string(builtinInfo(id).name) + "' expects"));
        CHECK(e.details["builtin"] == builtinInfo(id).name);
    }
    CHECK(failure(heap, call(heap, BuiltinId::Split, {str(heap, "a"), I(1)})).message ==
          "'split' expects (Str, Str), not (Str, Int)");
    CHECK(failure(heap, call(heap, BuiltinId::Lower, {I(1)})).message == "'lower' expects a Str, not Int");
    CHECK(failure(heap, call(heap, BuiltinId::Contains, {str(heap, "a"), I(1)})).code == DiagCode::R0101);
    CHECK(failure(heap, call(heap, BuiltinId::Take, {list(heap, {}), F(1.0)})).code == DiagCode::R0101);
    CHECK(failure(heap, call(heap, BuiltinId::RoundTo, {F(1.5), F(1.0)})).code == DiagCode::R0101);
    CHECK(failure(heap, call(heap, BuiltinId::Min2, {str(heap, "a"), str(heap, "b")})).code == DiagCode::R0101);
    CHECK(failure(heap, call(heap, BuiltinId::Int, {B(true)})).code == DiagCode::R0101);
    CHECK(failure(heap, call(heap, BuiltinId::Join, {list(heap, {}), list(heap, {})})).code == DiagCode::R0101);
    // A forged id or argument count.
    std::vector<Value> none;
    CHECK(failure(heap, callBuiltin(heap, static_cast<BuiltinId>(kBuiltinCount), none)).code == DiagCode::R0101);
    CHECK(failure(heap, callBuiltin(heap, BuiltinId::Len, none)).code == DiagCode::R0101);
}

TEST_CASE("builtins: results that outgrow the memory budget are R0701") {
    Heap heap(1 << 20);
    {
        Value big = str(heap, std::string(400000, 'a'));
        // A list's capacity is charged before it is filled.
        CHECK(failure(heap, call(heap, BuiltinId::Split, {big, str(heap, "a")})).code == DiagCode::R0701);
        // Text grows through the heap: large pieces are charged as they are appended.
        Value many = list(heap, std::vector<Value>(5, big));
        CHECK(failure(heap, call(heap, BuiltinId::Join, {many, str(heap, "")})).code == DiagCode::R0701);
        CHECK(heap.liveBytes() <= heap.budget());
    }
    CHECK(heap.liveObjects() == 0);
    CHECK(heap.liveBytes() == 0);
}

// Text built from many small pieces grows its heap string by doubling. Near the budget, Heap::growStr
// falls back to the exact size needed; it must really get that size (std::string::reserve on a
// non-empty string doubles whatever is asked), or the charge falls behind the memory held and the
// string outgrows the budget unchecked. A regression test for that.
TEST_CASE("builtins: text grown piece by piece past the memory budget is R0701") {
    Heap heap(1 << 20);
    {
        Value big = str(heap, std::string(100000, 'a'));
        CHECK(failure(heap, call(heap, BuiltinId::Replace, {big, str(heap, "a"), str(heap, std::string(20, 'b'))}))
                  .code == DiagCode::R0701);
        CHECK(failure(heap, call(heap, BuiltinId::Replace, {big, str(heap, ""), str(heap, "0123456789abcdef")}))
                  .code == DiagCode::R0701);
        Value big4 = str(heap, std::string(400000, 'a'));
        CHECK(failure(heap, call(heap, BuiltinId::Replace, {str(heap, "ab"), str(heap, ""), big4})).code ==
              DiagCode::R0701);
        CHECK(heap.liveBytes() <= heap.budget());
    }
    CHECK(heap.liveObjects() == 0);
    CHECK(heap.liveBytes() == 0);
}

// ---------------------------------------------------------------- large inputs

TEST_CASE("builtins: large lists and texts take linear time (unique, split, join, sum)") {
    Heap heap;
    constexpr int64_t kItems = 200000;
    {
        std::vector<Value> numbers;
        std::vector<Value> words;
        std::vector<Value> rows;
        for (int64_t i = 0; i < kItems; ++i) {
            numbers.push_back(i % 2 ? I(i % 1000) : F(static_cast<double>(i % 1000)));
            words.push_back(str(heap, "w" + std::to_string(i % 5000)));
        }
        for (int64_t i = 0; i < kItems / 4; ++i) rows.push_back(record(heap, {{"id", I(i % 700)}, {"k", str(heap, "r")}}));
        Value numberList = list(heap, numbers);
        Value wordList = list(heap, words);
        CHECK(ok(call(heap, BuiltinId::Unique, {numberList})).asList().items.size() == 1000);
        CHECK(ok(call(heap, BuiltinId::Unique, {wordList})).asList().items.size() == 5000);
        CHECK(ok(call(heap, BuiltinId::Unique, {list(heap, rows)})).asList().items.size() == 700);
        std::vector<Value> distinct;
        for (int64_t i = 0; i < kItems; ++i) distinct.push_back(I(i));
        CHECK(ok(call(heap, BuiltinId::Unique, {list(heap, distinct)})).asList().items.size() == kItems);

        Value joined = ok(call(heap, BuiltinId::Join, {wordList, str(heap, ",")}));
        Value pieces = ok(call(heap, BuiltinId::Split, {joined, str(heap, ",")}));
        REQUIRE(pieces.asList().items.size() == kItems);
        CHECK(pieces.asList().items[4999].asStr() == "w4999");
        CHECK(ok(call(heap, BuiltinId::Len, {joined})).asInt() == static_cast<int64_t>(joined.asStr().size()));

        Value total = ok(call(heap, BuiltinId::Sum, {list(heap, distinct)}));
        CHECK(total.asInt() == kItems * (kItems - 1) / 2);
        CHECK(ok(call(heap, BuiltinId::Sum, {numberList})).kind() == ValueKind::Float);
        CHECK(ok(call(heap, BuiltinId::MaxList, {numberList})).asNumber() == 999.0);

        std::string longText(kItems, 'A');
        CHECK(ok(call(heap, BuiltinId::Lower, {str(heap, longText)})).asStr() == std::string(kItems, 'a'));
        CHECK(ok(call(heap, BuiltinId::Replace, {str(heap, longText), str(heap, ""), str(heap, "-")}))
                  .asStr()
                  .size() == 2 * kItems + 1);
    }
    CHECK(heap.liveObjects() == 0);
    CHECK(heap.liveBytes() == 0);
}

// One table of builtins (runtime/builtins.def) drives the checker's names, the code generator's
// ids and the VM: every id type-checks through the checker and compiles to a BUILTIN with its id.
TEST_CASE("builtins: every id of builtins.def is typed by the checker and compiled to that id") {
    // A well-typed call of each (name, arity); a builtin added to the table without one fails here.
    const std::map<std::pair<std::string_view, uint16_t>, std::string> samples = {
        {{"len", 1}, "len([1, 2])"},
        {{"take", 2}, "take([1, 2], 1)"},
        {{"range", 1}, "range(3)"},
        {{"str", 1}, "str(1)"},
        {{"lower", 1}, "lower(\"A\")"},
        {{"upper", 1}, "upper(\"a\")"},
        {{"trim", 1}, "trim(\" a \")"},
        {{"contains", 2}, "contains(\"abc\", \"b\")"},
        {{"startswith", 2}, "startswith(\"abc\", \"a\")"},
        {{"endswith", 2}, "endswith(\"abc\", \"c\")"},
        {{"replace", 3}, "replace(\"abc\", \"b\", \"x\")"},
        {{"split", 2}, "split(\"a,b\", \",\")"},
        {{"join", 2}, "join([\"a\"], \",\")"},
        {{"sum", 1}, "sum([1, 2])"},
        {{"min", 2}, "min(1, 2)"},
        {{"max", 2}, "max(1, 2)"},
        {{"min", 1}, "min([1, 2])"},
        {{"max", 1}, "max([1, 2])"},
        {{"abs", 1}, "abs(-1)"},
        {{"round", 1}, "round(1.5)"},
        {{"round", 2}, "round(1.25, 1)"},
        {{"int", 1}, "int(\"1\")"},
        {{"float", 1}, "float(1)"},
        {{"first", 1}, "first([1])"},
        {{"unique", 1}, "unique([1, 1])"},
    };
    for (uint16_t id = 0; id < kBuiltinCount; ++id) {
        const BuiltinInfo& b = kBuiltins[id];
        auto sample = samples.find({b.name, b.argc});
        INFO("builtin " << b.name << "/" << b.argc);
        REQUIRE(sample != samples.end());
        std::string source = "program p\n\nfn main() -> Str {\n  let x = " + sample->second + "\n  return str(x)\n}\n";
        CompileOutcome out = compileProgram(source, "p.rmt", "", "host.rmti");
        std::string messages;
        for (const Diagnostic& d : out.diagnostics.items()) messages += d.message + "\n";
        INFO(messages);
        REQUIRE(out.program);
        bool found = false;
        for (const Instr& ins : out.program->module().functions[out.program->entry()].code)
            found = found || (ins.op == Op::BUILTIN && ins.c == id);
        CHECK(found);
    }
}
