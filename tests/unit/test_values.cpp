// Unit tests for the VM's value layer in runtime/: tag and provenance tables (tags.h,
// provenance.h), Value and its Heap (value.h, heap.h), the operations (ops.h), value⇄JSON
// (value_json.h) and Python-compatible canonical JSON (canonical_json.h). Expected texts for
// str(), division and JSON were produced with CPython 3 (json.dumps, repr, true division).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <climits>
#include <string>
#include <vector>

#include "runtime/builtins.h"
#include "runtime/canonical_json.h"
#include "runtime/heap.h"
#include "runtime/numfmt.h"
#include "runtime/ops.h"
#include "runtime/provenance.h"
#include "runtime/tags.h"
#include "runtime/types.h"
#include "runtime/value.h"
#include "runtime/value_json.h"

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

Value record(Heap& heap, std::vector<std::pair<std::string, Value>> fields, TagSetId tags = kNoTags,
             ProvId prov = kNoProv) {
    std::vector<std::string> names;
    std::vector<Value> values;
    for (auto& [name, value] : fields) {
        names.push_back(name);
        values.push_back(value);
    }
    const RecordShape* shape = heap.recordShape(names);
    REQUIRE(shape);
    std::optional<Value> v = heap.makeRecord(shape, values, tags, prov);
    REQUIRE(v);
    return *v;
}

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

// The operation failed; returns the error and clears it.
RuntimeError failure(Heap& heap, const std::optional<Value>& result) {
    REQUIRE_FALSE(result);
    REQUIRE(heap.failed());
    return heap.takeError();
}

Value ok(const std::optional<Value>& result) {
    REQUIRE(result);
    return *result;
}

}  // namespace

// ---------------------------------------------------------------- tags and provenance

TEST_CASE("values: a Value is 16 bytes") {
    CHECK(sizeof(Value) == 16);
    Value v = Value::integer(-5, 0xFFFFFF, 0xFFFFFFFF);
    CHECK(v.kind() == ValueKind::Int);
    CHECK(v.asInt() == -5);
    CHECK(v.tags() == 0xFFFFFF);
    CHECK(v.prov() == 0xFFFFFFFF);
    v.setTags(7);
    CHECK(v.kind() == ValueKind::Int);
    CHECK(v.tags() == 7);
    CHECK(Value().kind() == ValueKind::Unit);
}

TEST_CASE("tags: sets are interned, unions memoised") {
    TagTable table;
    TagSetId a = *table.intern({"untrusted"});
    TagSetId b = *table.intern({"private"});
    TagSetId ab = *table.intern({"untrusted", "private", "untrusted"});
    CHECK(a != kNoTags);
    CHECK(*table.intern({"private", "untrusted"}) == ab);
    CHECK(*table.unite(a, b) == ab);
    CHECK(*table.unite(b, a) == ab);
    CHECK(*table.unite(ab, a) == ab);
    CHECK(*table.unite(a, kNoTags) == a);
    CHECK(*table.unite(kNoTags, kNoTags) == kNoTags);
    size_t sets = table.setCount();
    for (int i = 0; i < 100; ++i) CHECK(*table.unite(a, b) == ab);
    CHECK(table.setCount() == sets);
    CHECK(table.contains(ab, "private"));
    CHECK_FALSE(table.contains(a, "private"));
    CHECK_FALSE(table.contains(ab, "unknown"));
    CHECK_FALSE(table.contains(kNoTags, "private"));
    CHECK(table.names(ab) == std::vector<std::string>{"private", "untrusted"});
    CHECK(table.names(kNoTags).empty());
    CHECK(*table.subtract(ab, a) == b);
    CHECK(*table.subtract(ab, ab) == kNoTags);
    CHECK(*table.subtract(a, b) == a);
    CHECK(table.intersects(ab, a));
    CHECK_FALSE(table.intersects(a, b));
    CHECK_FALSE(table.intersects(kNoTags, ab));
}

TEST_CASE("tags: any number of host tags; a full table fails instead of wrapping") {
    TagTable big;
    std::vector<std::string> many;
    for (int i = 0; i < 1000; ++i) many.push_back("tag" + std::to_string(i));
    TagSetId all = *big.intern(many);
    CHECK(big.names(all).size() == 1000);
    CHECK(big.contains(all, "tag999"));

    TagTable small(3);  // the empty set and two more
    TagSetId x = *small.single("x");
    TagSetId y = *small.single("y");
    CHECK_FALSE(small.unite(x, y));
    CHECK_FALSE(small.single("z"));
    CHECK(*small.unite(x, x) == x);  // existing sets still work

    Heap heap(kDefaultMemoryBudget, 3);
    TagSetId hx = tagSet(heap, {"x"});
    TagSetId hy = tagSet(heap, {"y"});
    CHECK_FALSE(heap.uniteTags(hx, hy));
    RuntimeError e = heap.takeError();
    CHECK(e.code == DiagCode::R0701);
    CHECK(e.details["limit"] == "tag_sets");
    // An operation needing the new set fails through the same path.
    RuntimeError opError = failure(heap, add(heap, Value::integer(1, hx), Value::integer(2, hy)));
    CHECK(opError.code == DiagCode::R0701);
}

TEST_CASE("provenance: hash-consed leaves and unions, flattened sorted") {
    ProvTable table;
    ProvId p1 = *table.leaf(1);
    ProvId p7 = *table.leaf(7);
    ProvId p3 = *table.leaf(3);
    CHECK(*table.leaf(7) == p7);
    ProvId u = *table.unite(p7, p1);
    CHECK(*table.unite(p1, p7) == u);
    CHECK(*table.unite(u, p1) == u);  // a child of u is already covered
    CHECK(*table.unite(kNoProv, u) == u);
    ProvId all = *table.unite(u, p3);
    CHECK(table.flatten(all) == std::vector<uint64_t>{1, 3, 7});
    CHECK(table.flatten(*table.unite(all, u)) == std::vector<uint64_t>{1, 3, 7});
    CHECK(table.flatten(kNoProv).empty());
    size_t nodes = table.nodeCount();
    for (int i = 0; i < 10; ++i) (void)table.unite(p1, p7);
    CHECK(table.nodeCount() == nodes);

    // A long chain (a loop accumulating one call per iteration) flattens without recursion.
    ProvId acc = kNoProv;
    for (uint64_t seq = 100; seq < 100100; ++seq) acc = *table.unite(acc, *table.leaf(seq));
    std::vector<uint64_t> flat = table.flatten(acc);
    CHECK(flat.size() == 100000);
    CHECK(flat.front() == 100);
    CHECK(flat.back() == 100099);

    ProvTable small(3);
    ProvId a = *small.leaf(1);
    ProvId b = *small.leaf(2);
    CHECK_FALSE(small.unite(a, b));
    CHECK_FALSE(small.leaf(3));
}

// ---------------------------------------------------------------- heap and reference counts

TEST_CASE("heap: reference counts and live bytes return to zero") {
    Heap heap;
    CHECK(heap.liveBytes() == 0);
    {
        Value s = str(heap, std::string(100, 'x'));
        CHECK(s.refCount() == 1);
        CHECK(heap.liveObjects() == 1);
        Value inner = list(heap, {Value::integer(1), s, s});
        CHECK(s.refCount() == 3);
        Value outer = record(heap, {{"items", inner}, {"name", s}, {"n", Value::floating(2.5)}});
        CHECK(s.refCount() == 4);
        CHECK(inner.refCount() == 2);
        {
            Value copy = outer;
            CHECK(outer.refCount() == 2);
            Value moved = std::move(copy);
            CHECK(outer.refCount() == 2);
            CHECK(copy.kind() == ValueKind::Unit);
        }
        CHECK(outer.refCount() == 1);
        CHECK(heap.liveObjects() == 3);
        CHECK(heap.liveBytes() > 100);
        // Assigning a value its own element (which lives in the object being released).
        Value holder = list(heap, {list(heap, {s})});
        holder = holder.asList().items[0];
        CHECK(holder.asList().items.size() == 1);
        holder = holder;  // self-assignment
        CHECK(holder.refCount() == 1);
    }
    CHECK(heap.liveObjects() == 0);
    CHECK(heap.liveBytes() == 0);
    CHECK(heap.peakBytes() > 100);
}

TEST_CASE("heap: a deeply nested value is freed, compared and printed without recursion") {
    Heap heap;
    constexpr int kDepth = 200000;
    {
        Value a = list(heap, {});
        Value b = list(heap, {});
        for (int i = 0; i < kDepth; ++i) {
            a = *heap.makeList(std::span<const Value>(&a, 1));
            b = *heap.makeList(std::span<const Value>(&b, 1));
        }
        CHECK(heap.liveObjects() == 2 * (kDepth + 1));
        CHECK(valuesEqual(a, b));
        std::string text = valueText(a);
        CHECK(text.size() == 2 * (kDepth + 1));
        CHECK(text.substr(0, 3) == "[[[");
        std::optional<Json> json = valueToJson(a);
        CHECK(json);
        CHECK(dumpJson(*json, JsonTextStyle{}).size() == 2 * (kDepth + 1));
    }
    CHECK(heap.liveObjects() == 0);
    CHECK(heap.liveBytes() == 0);
}

TEST_CASE("heap: in-place append when unique, copy when shared") {
    Heap heap;
    TagSetId t = tagSet(heap, {"untrusted"});
    ProvId p = leaf(heap, 4);
    {
        Value xs = *heap.newList();
        const HeapObject* object = xs.object();
        for (int i = 0; i < 1000; ++i) REQUIRE(heap.appendInPlace(xs, Value::integer(i)));
        CHECK(xs.object() == object);  // never copied: it was unique throughout
        CHECK(xs.asList().items.size() == 1000);
        CHECK(xs.asList().deepTags == kNoTags);
        REQUIRE(heap.appendInPlace(xs, Value::integer(1000, t, p)));
        CHECK(xs.object() == object);
        CHECK(xs.asList().deepTags == t);
        CHECK(xs.asList().deepProv == p);
        CHECK(xs.tags() == kNoTags);  // `xs + [x]`: the list's own tags do not change

        Value shared = xs;
        REQUIRE(heap.appendInPlace(xs, Value::integer(-1)));
        CHECK(xs.object() != object);
        CHECK(shared.object() == object);
        CHECK(shared.asList().items.size() == 1001);
        CHECK(xs.asList().items.size() == 1002);
        CHECK(xs.asList().deepTags == t);  // the copy keeps the cached deep tags
        CHECK(xs.asList().items.back().asInt() == -1);

        // Appending a list to itself copies, so it never contains itself.
        Value self = list(heap, {Value::integer(1)});
        REQUIRE(heap.appendInPlace(self, self));
        CHECK(self.asList().items.size() == 2);
        CHECK(self.asList().items[1].asList().items.size() == 1);

        // Strings: s = s + t in place, with labels united.
        Value s = str(heap, "ab");
        Value tail = str(heap, "cd", t, p);
        REQUIRE(heap.concatInPlace(s, tail));
        const HeapObject* sObject = s.object();
        for (int i = 0; i < 100; ++i) REQUIRE(heap.concatInPlace(s, tail));
        CHECK(s.object() == sObject);
        CHECK(s.asStr().size() == 2 + 101 * 2);
        CHECK(s.tags() == t);
        CHECK(s.prov() == p);
        Value sharedStr = s;
        REQUIRE(heap.appendTextInPlace(s, "!"));
        CHECK(s.object() != sObject);
        CHECK(sharedStr.asStr().back() == 'd');
        CHECK(s.asStr().back() == '!');
        CHECK(s.tags() == t);
        // s = s + s
        Value twice = str(heap, "xy");
        REQUIRE(heap.concatInPlace(twice, twice));
        CHECK(twice.asStr() == "xyxy");
        REQUIRE(heap.appendTextInPlace(twice, twice.asStr()));
        CHECK(twice.asStr() == "xyxyxyxy");

        // Lists: xs = xs + ys in place; tags united at the top, deep caches united.
        Value ys = list(heap, {Value::integer(1)}, t);
        Value zs = *heap.newList(0);
        const HeapObject* zObject = zs.object();
        REQUIRE(heap.concatInPlace(zs, ys));
        REQUIRE(heap.concatInPlace(zs, zs));
        CHECK(zs.asList().items.size() == 2);
        CHECK(zs.tags() == t);
        (void)zObject;
    }
    CHECK(heap.liveObjects() == 0);
}

TEST_CASE("heap: the memory budget is enforced cleanly") {
    Heap heap(4096);
    {
        Value small = str(heap, "ok");
        size_t before = heap.liveBytes();
        std::optional<Value> big = heap.makeStr(std::string(10000, 'x'));
        RuntimeError e = failure(heap, big);
        CHECK(e.code == DiagCode::R0701);
        CHECK(e.details["limit"] == "max_memory");
        CHECK(e.details["value"] == 4096);
        CHECK(heap.liveBytes() == before);  // nothing was charged for the failed allocation

        // Growth is checked too: appending until the budget runs out fails without corrupting.
        {
            Value xs = *heap.newList();
            bool okSoFar = true;
            size_t appended = 0;
            while (okSoFar && appended < 100000) {
                okSoFar = heap.appendInPlace(xs, Value::integer(1));
                if (okSoFar) ++appended;
            }
            CHECK_FALSE(okSoFar);
            CHECK(appended > 10);
            CHECK(appended < 4096 / sizeof(Value));
            CHECK(xs.asList().items.size() == appended);
            CHECK(heap.takeError().code == DiagCode::R0701);
            CHECK(heap.liveBytes() <= heap.budget());
        }

        // The first error is kept.
        heap.fail(RuntimeError{DiagCode::R0101, "first", nullptr});
        heap.failMemory(1);
        CHECK(heap.takeError().message == "first");

        // str() of a value made large by sharing stops at the budget.
        Value chunk = str(heap, std::string(500, 'y'));
        Value shared = list(heap, {chunk, chunk, chunk, chunk, chunk, chunk, chunk, chunk, chunk, chunk});
        CHECK(failure(heap, toStr(heap, shared)).code == DiagCode::R0701);
    }
    CHECK(heap.liveObjects() == 0);
    CHECK(heap.liveBytes() == 0);
}

namespace {

// A WorkMeter that counts what it is charged and stops the run once `limit` steps are spent.
struct CountingMeter final : WorkMeter {
    Heap& heap;
    uint64_t limit;
    uint64_t spent = 0;
    CountingMeter(Heap& h, uint64_t l) : heap(h), limit(l) { heap.setWorkMeter(this); }
    ~CountingMeter() { heap.setWorkMeter(nullptr); }
    bool spendSteps(uint64_t steps) override {
        spent += steps;
        if (spent <= limit) return true;
        heap.fail(RuntimeError{DiagCode::R0701, "steps", {{"limit", "steps"}}});
        return false;
    }
};

}  // namespace

TEST_CASE("heap: growth near the budget copies once per growth, and holds only what is charged") {
    const size_t budget = size_t(8) << 20;
    Heap heap(budget);
    {
        CountingMeter meter(heap, UINT64_MAX);
        Value s = str(heap, "x");
        size_t appended = 0, previousCapacity = 0, growths = 0;
        while (heap.appendTextInPlace(s, "0123456789")) {
            ++appended;
            size_t capacity = s.asStrObject().bytes.capacity();
            if (capacity != previousCapacity) ++growths, previousCapacity = capacity;
            // The old and the new buffer are both charged while the copy is made.
            CHECK(heap.peakBytes() <= budget);
        }
        CHECK(heap.takeError().details["limit"] == "max_memory");
        size_t length = s.asStr().size();
        CHECK(length > budget / 3);  // doubling, then by half, then what is left
        // Linear: every byte is copied a bounded number of times (the doubling sum, at most twice
        // its length, plus the appends), not once per append as when the exact need was allocated.
        CHECK(meter.spent * kWorkBytesPerStep <= 4 * length);
        CHECK(growths < 40);
        // A growth of the string from capacity c to 2c peaks at c + 2c charged, not 2c.
        Heap small(1 << 20);
        Value t = *small.makeStr(std::string(1000, 'a'));
        size_t before = small.liveBytes();
        REQUIRE(small.appendTextInPlace(t, std::string(500, 'b')));
        CHECK(small.peakBytes() >= before + 2000);
    }
    CHECK(heap.liveBytes() == 0);
}

TEST_CASE("heap: work is charged to the meter, and a meter that says stop stops the operation") {
    Heap heap(size_t(64) << 20);
    {
        Value big = str(heap, std::string(size_t(4) << 20, 'a'));
        {
            CountingMeter meter(heap, UINT64_MAX);
            Value args[] = {big, str(heap, "a"), str(heap, "bb")};
            std::optional<Value> out = callBuiltin(heap, BuiltinId::Replace, args);
            REQUIRE(out);
            // Scanning 4 MiB and writing 8 MiB: at least that much work.
            CHECK(meter.spent * kWorkBytesPerStep >= (size_t(12) << 20));
        }
        {
            // Stopped part of the way through: the builtin fails with the meter's error.
            CountingMeter meter(heap, 1000);
            Value args[] = {big, str(heap, "a"), str(heap, "bb")};
            CHECK(failure(heap, callBuiltin(heap, BuiltinId::Replace, args)).details["limit"] == "steps");
            CHECK(meter.spent < 10000);
        }
        Value copy = str(heap, std::string(size_t(4) << 20, 'a'));
        {
            // Equality and search are work too.
            CountingMeter meter(heap, 100);
            CHECK_FALSE(valuesEqual(heap, big, copy));
            CHECK(heap.takeError().details["limit"] == "steps");
        }
        {
            CountingMeter meter(heap, 100);
            CHECK_FALSE(findText(heap, big.asStr(), "b"));
            CHECK(heap.takeError().details["limit"] == "steps");
        }
        // Without a meter, work is free.
        CHECK(valuesEqual(heap, big, copy) == std::optional<bool>(true));
    }
    CHECK(heap.liveBytes() == 0);
}

// ---------------------------------------------------------------- arithmetic

TEST_CASE("ops: integer arithmetic is 64-bit with overflow R0101") {
    Heap heap;
    auto I = [](int64_t i) { return Value::integer(i); };
    CHECK(ok(add(heap, I(2), I(3))).asInt() == 5);
    CHECK(ok(subtract(heap, I(2), I(3))).asInt() == -1);
    CHECK(ok(multiply(heap, I(-4), I(3))).asInt() == -12);
    CHECK(ok(add(heap, I(INT64_MAX - 1), I(1))).asInt() == INT64_MAX);

    RuntimeError e = failure(heap, add(heap, I(INT64_MAX), I(1)));
    CHECK(e.code == DiagCode::R0101);
    CHECK(e.message == "integer overflow: 9223372036854775807 + 1 does not fit in 64 bits");
    CHECK(failure(heap, subtract(heap, I(INT64_MIN), I(1))).code == DiagCode::R0101);
    CHECK(failure(heap, multiply(heap, I(INT64_MIN), I(-1))).code == DiagCode::R0101);
    CHECK(failure(heap, multiply(heap, I(int64_t(1) << 32), I(int64_t(1) << 31))).code == DiagCode::R0101);
    CHECK(ok(multiply(heap, I(int64_t(1) << 32), I(int64_t(1) << 30))).asInt() == int64_t(1) << 62);
    CHECK(failure(heap, negate(heap, I(INT64_MIN))).message ==
          "integer overflow: -(-9223372036854775808) does not fit in 64 bits");
    CHECK(ok(negate(heap, I(INT64_MAX))).asInt() == -INT64_MAX);
}

TEST_CASE("ops: / is always Float, % is floored, zero divisors are R0101") {
    Heap heap;
    auto I = [](int64_t i) { return Value::integer(i); };
    auto F = [](double f) { return Value::floating(f); };
    Value half = ok(divide(heap, I(7), I(2)));
    CHECK(half.kind() == ValueKind::Float);
    CHECK(half.asFloat() == 3.5);
    CHECK(ok(divide(heap, I(6), I(2))).kind() == ValueKind::Float);
    CHECK(ok(divide(heap, I(INT64_MIN), I(-1))).asFloat() == 9223372036854775808.0);  // no overflow for /

    // Python's %: the result takes the divisor's sign; Int % Int is Int.
    CHECK(ok(modulo(heap, I(-7), I(3))).asInt() == 2);
    CHECK(ok(modulo(heap, I(7), I(-3))).asInt() == -2);
    CHECK(ok(modulo(heap, I(-7), I(-3))).asInt() == -1);
    CHECK(ok(modulo(heap, I(7), I(3))).asInt() == 1);
    CHECK(ok(modulo(heap, I(INT64_MIN), I(-1))).asInt() == 0);
    CHECK(ok(modulo(heap, I(INT64_MIN), I(INT64_MAX))).asInt() == INT64_MAX - 1);
    Value fm = ok(modulo(heap, F(-7.0), I(3)));
    CHECK(fm.kind() == ValueKind::Float);
    CHECK(fm.asFloat() == 2.0);
    CHECK(ok(modulo(heap, F(7.5), I(-2))).asFloat() == -0.5);
    CHECK(std::signbit(ok(modulo(heap, F(0.0), I(-3))).asFloat()));   // Python: 0.0 % -3 == -0.0
    CHECK(!std::signbit(ok(modulo(heap, F(-0.0), I(3))).asFloat()));  // Python: -0.0 % 3 == 0.0
    CHECK(std::signbit(ok(modulo(heap, I(3), F(-0.5))).asFloat()));   // Python: 3 % -0.5 == -0.0

    for (const Value& zero : {I(0), F(0.0), F(-0.0)}) {
        RuntimeError d = failure(heap, divide(heap, I(1), zero));
        CHECK(d.code == DiagCode::R0101);
        CHECK(d.message == "division by zero");
        CHECK(failure(heap, modulo(heap, F(1.5), zero)).message == "division by zero");
    }

    // Mixed Int/Float is Float; non-finite results are R0101.
    Value mixed = ok(add(heap, I(1), F(0.5)));
    CHECK(mixed.kind() == ValueKind::Float);
    CHECK(mixed.asFloat() == 1.5);
    RuntimeError inf = failure(heap, multiply(heap, F(1e308), I(10)));
    CHECK(inf.code == DiagCode::R0101);
    CHECK(inf.message == "float overflow: 1e+308 * 10 is not a finite number");
    CHECK(failure(heap, divide(heap, F(1e308), F(1e-10))).code == DiagCode::R0101);
    CHECK(failure(heap, add(heap, F(1.7976931348623157e308), F(1.7976931348623157e308))).code == DiagCode::R0101);
}

TEST_CASE("ops: Int / Int is correctly rounded, as Python's true division") {
    struct Case {
        int64_t a, b;
        double expected;
    };
    // From CPython; the last four differ from float(a) / float(b) (double rounding).
    const Case cases[] = {
        {4611686018427387905LL, 3LL, 1.5372286728091292e+18},
        {INT64_MIN, 3LL, -3.0744573456182584e+18},
        {9223372036854775807LL, 4611686018427387907LL, 2.0},
        {9007199254740993LL, 1LL, 9007199254740992.0},
        {9007199254740995LL, 2LL, 4503599627370498.0},
        {INT64_MIN, -1LL, 9.223372036854776e+18},
        {9223372036854775807LL, 7LL, 1.3176245766935393e+18},
        {123456789012345678LL, 1000LL, 123456789012345.67},
        {1LL, 9223372036854775807LL, 1.0842021724855044e-19},
        {-1152921504606859321LL, 1099511627783LL, -1048575.9999933355},
        {7LL, 2LL, 3.5},
        {-7LL, 2LL, -3.5},
        {5326005833764337302LL, -125LL, -4.2608046670114696e+16},
        {8618508352017306108LL, -2878940491LL, -2993638937.2965703},
        {-8677810281153918397LL, 5LL, -1.7355620562307837e+18},
        {5618315319235403330LL, 797079190098LL, 7048628.779964306},
    };
    for (const Case& c : cases) {
        CAPTURE(c.a);
        CAPTURE(c.b);
        CHECK(divideInts(c.a, c.b) == c.expected);
    }
    CHECK(std::signbit(divideInts(0, -5)));
}

// ---------------------------------------------------------------- comparison

TEST_CASE("ops: structural equality and ordering") {
    Heap heap;
    auto I = [](int64_t i) { return Value::integer(i); };
    auto F = [](double f) { return Value::floating(f); };
    CHECK(valuesEqual(I(1), F(1.0)));
    CHECK(valuesEqual(F(-0.0), I(0)));
    CHECK_FALSE(valuesEqual(I(1), F(1.5)));
    // Exact, as Python: 2^53 + 1 is not the float 2^53.
    CHECK_FALSE(valuesEqual(I(9007199254740993LL), F(9007199254740992.0)));
    CHECK(valuesEqual(I(9007199254740992LL), F(9007199254740992.0)));
    CHECK_FALSE(valuesEqual(I(INT64_MAX), F(9223372036854775808.0)));
    CHECK(valuesEqual(I(INT64_MIN), F(-9223372036854775808.0)));
    CHECK_FALSE(valuesEqual(I(1), Value::boolean(true)));
    CHECK(valuesEqual(Value::unit(), Value::unit()));
    CHECK(valuesEqual(str(heap, "é"), str(heap, "é")));
    CHECK_FALSE(valuesEqual(str(heap, "a"), str(heap, "b")));

    Value a = list(heap, {I(1), str(heap, "x"), list(heap, {F(2.0)})});
    Value b = list(heap, {F(1.0), str(heap, "x"), list(heap, {I(2)})});
    Value c = list(heap, {I(1), str(heap, "x"), list(heap, {I(3)})});
    CHECK(valuesEqual(a, b));
    CHECK_FALSE(valuesEqual(a, c));
    CHECK_FALSE(valuesEqual(a, list(heap, {I(1)})));
    // Records compare as maps: field order does not matter, names and values do.
    Value r1 = record(heap, {{"a", I(1)}, {"b", a}});
    Value r2 = record(heap, {{"b", b}, {"a", F(1.0)}});
    Value r3 = record(heap, {{"a", I(1)}, {"c", a}});
    CHECK(valuesEqual(r1, r2));
    CHECK_FALSE(valuesEqual(r1, r3));
    CHECK(ok(equals(heap, r1, r2)).asBool());
    CHECK_FALSE(ok(notEquals(heap, r1, r2)).asBool());

    // Ordering: numbers exactly, strings by code point.
    CHECK(ok(lessThan(heap, I(1), F(1.5))).asBool());
    CHECK(ok(lessEqual(heap, F(1.0), I(1))).asBool());
    CHECK_FALSE(ok(greaterThan(heap, F(9007199254740992.0), I(9007199254740993LL))).asBool());
    CHECK(ok(greaterEqual(heap, I(3), I(3))).asBool());
    CHECK(ok(lessThan(heap, str(heap, "Z"), str(heap, "a"))).asBool());
    CHECK(ok(lessThan(heap, str(heap, "z"), str(heap, "é"))).asBool());
    CHECK(ok(lessThan(heap, str(heap, "\xef\xbf\xbf"), str(heap, "\xf0\x9f\x98\x80"))).asBool());  // U+FFFF < U+1F600
    CHECK(ok(lessThan(heap, str(heap, "ab"), str(heap, "abc"))).asBool());
    CHECK(failure(heap, lessThan(heap, a, b)).code == DiagCode::R0101);

    // `in`: structural list membership and substring.
    CHECK(ok(memberOf(heap, F(2.0), list(heap, {I(1), I(2)}))).asBool());
    CHECK_FALSE(ok(memberOf(heap, I(5), list(heap, {I(1), I(2)}))).asBool());
    CHECK(ok(memberOf(heap, list(heap, {F(2.0)}), a)).asBool());
    CHECK(ok(memberOf(heap, str(heap, "ell"), str(heap, "hello"))).asBool());
    CHECK(ok(memberOf(heap, str(heap, ""), str(heap, "hello"))).asBool());
    CHECK_FALSE(ok(memberOf(heap, str(heap, "L"), str(heap, "hello"))).asBool());
}

TEST_CASE("ops: equality of heavily shared values takes polynomial time") {
    Heap heap;
    // x = [x, x] sixty times: a tree of 2^60 leaves as a DAG of 61 nodes, built twice apart.
    Value x = list(heap, {Value::integer(1)});
    Value y = list(heap, {Value::integer(1)});
    for (int i = 0; i < 60; ++i) {
        x = list(heap, {x, x});
        y = list(heap, {y, y});
    }
    auto start = std::chrono::steady_clock::now();
    CHECK(valuesEqual(x, y));
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
    Value z = list(heap, {Value::integer(2)});
    for (int i = 0; i < 60; ++i) z = list(heap, {z, z});
    CHECK_FALSE(valuesEqual(x, z));
    // Unfolding it into text or JSON stops at the cap instead.
    std::string text;
    CHECK_FALSE(appendValueText(text, x, 1000));
    CHECK(text.size() <= 1000);
    CHECK_FALSE(valueToJson(x, 1 << 14));
}

// ---------------------------------------------------------------- indexing and fields

TEST_CASE("ops: Python-style indexing and field reads") {
    Heap heap;
    Value xs = list(heap, {Value::integer(10), Value::integer(20), Value::integer(30)});
    CHECK(ok(indexList(heap, xs, Value::integer(0))).asInt() == 10);
    CHECK(ok(indexList(heap, xs, Value::integer(2))).asInt() == 30);
    CHECK(ok(indexList(heap, xs, Value::integer(-1))).asInt() == 30);
    CHECK(ok(indexList(heap, xs, Value::integer(-3))).asInt() == 10);
    RuntimeError e = failure(heap, indexList(heap, xs, Value::integer(3)));
    CHECK(e.code == DiagCode::R0101);
    CHECK(e.message == "index 3 is out of range for a list of length 3");
    CHECK(e.details["index"] == 3);
    CHECK(e.details["length"] == 3);
    CHECK(failure(heap, indexList(heap, xs, Value::integer(-4))).message ==
          "index -4 is out of range for a list of length 3");
    CHECK(failure(heap, indexList(heap, xs, Value::integer(INT64_MIN))).message ==
          "index -9223372036854775808 is out of range for a list of length 3");
    CHECK(failure(heap, indexList(heap, list(heap, {}), Value::integer(0))).message ==
          "index 0 is out of range for a list of length 0");

    Value r = record(heap, {{"id", Value::integer(1)}, {"name", str(heap, "n")}});
    CHECK(ok(getField(heap, r, "name")).asStr() == "n");
    CHECK(ok(getFieldAt(heap, r, 0)).asInt() == 1);
    RuntimeError missing = failure(heap, getField(heap, r, "email"));
    CHECK(missing.code == DiagCode::R0101);
    CHECK(missing.message == "record has no field 'email'");
    // Shapes are interned: same names, same order, same shape.
    CHECK(r.asRecord().shape == heap.recordShape({"id", "name"}));
    CHECK(r.asRecord().shape != heap.recordShape({"name", "id"}));
}

// ---------------------------------------------------------------- tags and provenance per operation

TEST_CASE("ops: tags and provenance per operation") {
    Heap heap;
    TagSetId u = tagSet(heap, {"untrusted"});
    TagSetId p = tagSet(heap, {"private"});
    TagSetId s = tagSet(heap, {"secret"});
    TagSetId up = *heap.uniteTags(u, p);
    ProvId p1 = leaf(heap, 1);
    ProvId p2 = leaf(heap, 2);
    ProvId p3 = leaf(heap, 3);

    Value a = Value::integer(2, u, p1);
    Value b = Value::integer(3, p, p2);
    // Arithmetic: top-level labels of both.
    Value sum = ok(add(heap, a, b));
    CHECK(sum.tags() == up);
    CHECK(seqs(heap, sum.prov()) == std::vector<uint64_t>{1, 2});
    CHECK(ok(negate(heap, a)).tags() == u);
    CHECK(ok(logicalNot(heap, Value::boolean(true, p))).tags() == p);
    CHECK(ok(lessThan(heap, a, Value::integer(1))).tags() == u);

    // A list literal has no own tags; its element does.
    Value xs = list(heap, {Value::integer(1, s, p3), Value::integer(2)});
    CHECK(xs.tags() == kNoTags);
    CHECK(xs.asList().deepTags == s);
    // Concatenation (+) is top-level only: the element keeps its own tags.
    Value ys = list(heap, {Value::integer(9)}, u);
    Value zs = ok(add(heap, xs, ys));
    CHECK(zs.tags() == u);
    CHECK(zs.asList().deepTags == s);
    CHECK(zs.asList().items[0].tags() == s);
    Value sa = str(heap, "a", u);
    Value sb = str(heap, "b", p, p2);
    Value sab = ok(add(heap, sa, sb));
    CHECK(sab.asStr() == "ab");
    CHECK(sab.tags() == up);
    CHECK(sab.prov() == p2);

    // ==, !=, in: deep labels of both.
    Value clean = list(heap, {Value::integer(1), Value::integer(2)});
    Value eq = ok(equals(heap, xs, clean));
    CHECK(eq.tags() == s);
    CHECK(seqs(heap, eq.prov()) == std::vector<uint64_t>{3});
    CHECK(ok(notEquals(heap, clean, xs)).tags() == s);
    Value in = ok(memberOf(heap, Value::integer(5, u), xs));
    CHECK(tagNames(heap, in.tags()) == std::vector<std::string>{"secret", "untrusted"});

    // Index: element ∪ list ∪ index.
    Value tagged = list(heap, {Value::integer(1, s, p3)}, u, p1);
    Value element = ok(indexList(heap, tagged, Value::integer(0, p, p2)));
    CHECK(tagNames(heap, element.tags()) == std::vector<std::string>{"private", "secret", "untrusted"});
    CHECK(seqs(heap, element.prov()) == std::vector<uint64_t>{1, 2, 3});

    // Field read: field ∪ record.
    Value r = record(heap, {{"body", str(heap, "hi", u, p1)}, {"n", Value::integer(1)}}, p, p2);
    Value body = ok(getField(heap, r, "body"));
    CHECK(body.tags() == up);
    CHECK(seqs(heap, body.prov()) == std::vector<uint64_t>{1, 2});
    Value n = ok(getField(heap, r, "n"));
    CHECK(n.tags() == p);
    CHECK(r.asRecord().deepTags == u);

    // str() and interpolation keep element tags (deep), unlike the prototype.
    Value text = ok(toStr(heap, xs));
    CHECK(text.asStr() == "[1, 2]");
    CHECK(text.tags() == s);
    CHECK(seqs(heap, text.prov()) == std::vector<uint64_t>{3});
    Value nested = list(heap, {r});
    CHECK(ok(toStr(heap, nested)).tags() == up);
    Value interp = ok(interpolate(heap, std::vector<Value>{str(heap, "x = "), xs, str(heap, " by "), sb}));
    CHECK(interp.asStr() == "x = [1, 2] by b");
    CHECK(tagNames(heap, interp.tags()) == std::vector<std::string>{"private", "secret"});
    CHECK(seqs(heap, interp.prov()) == std::vector<uint64_t>{2, 3});

    // The broker's helpers: deep labels in O(1), contains, subtract (clears).
    CHECK(*heap.deepTags(nested) == up);
    CHECK(heap.tagTable().contains(*heap.deepTags(r), "untrusted"));
    CHECK(*heap.subtractTags(up, u) == p);
}

// ---------------------------------------------------------------- str()

TEST_CASE("ops: str() converts as the prototype does") {
    Heap heap;
    auto text = [&](const Value& v) { return std::string(ok(toStr(heap, v)).asStr()); };
    auto F = [](double f) { return Value::floating(f); };
    CHECK(text(Value::unit()) == "");
    CHECK(text(Value::boolean(true)) == "true");
    CHECK(text(Value::boolean(false)) == "false");
    CHECK(text(Value::integer(-42)) == "-42");
    CHECK(text(Value::integer(INT64_MIN)) == "-9223372036854775808");
    CHECK(text(F(612.0)) == "612.0");
    CHECK(text(F(1e16)) == "1e+16");
    CHECK(text(F(1e15)) == "1000000000000000.0");
    CHECK(text(F(1e-05)) == "1e-05");
    CHECK(text(F(0.0001)) == "0.0001");
    CHECK(text(F(1.5e300)) == "1.5e+300");
    CHECK(text(F(-0.0)) == "-0.0");
    CHECK(text(F(0.1)) == "0.1");
    CHECK(text(F(2.5)) == "2.5");
    CHECK(text(str(heap, "as \"is\"\n")) == "as \"is\"\n");
    // Containers: json.dumps(v, ensure_ascii=False), from CPython:
    //   [1, 2.5, "é\"\n\\", true, null, {"a": [612.0, 1e+16], "b": {"c": "中"}}, [], {}, -0.0, 1e-05]
    Value inner = record(heap, {{"a", list(heap, {F(612.0), F(1e16)})}, {"b", record(heap, {{"c", str(heap, "中")}})}});
    const RecordShape* empty = heap.recordShape(std::vector<std::string>{});
    Value emptyRecord = ok(heap.makeRecord(empty, {}));
    Value v = list(heap, {Value::integer(1), F(2.5), str(heap, "é\"\n\\"), Value::boolean(true), Value::unit(), inner,
                          list(heap, {}), emptyRecord, F(-0.0), F(1e-05)});
    CHECK(text(v) ==
          "[1, 2.5, \"é\\\"\\n\\\\\", true, null, {\"a\": [612.0, 1e+16], \"b\": {\"c\": \"中\"}}, [], {}, "
          "-0.0, 1e-05]");
    CHECK(text(record(heap, {{"amount", F(612.0)}, {"currency", str(heap, "EUR")}})) ==
          "{\"amount\": 612.0, \"currency\": \"EUR\"}");
    // Control characters inside containers are escaped as json.dumps does.
    CHECK(text(list(heap, {str(heap, std::string("\x01\x1f\t\b\f\r\x7f", 7))})) ==
          "[\"\\u0001\\u001f\\t\\b\\f\\r\x7f\"]");
    // A long string inside a list is escaped slice by slice, with the same result.
    std::string longText(10000, 'q');
    longText[5000] = '"';
    std::string expected = "[\"" + longText.substr(0, 5000) + "\\\"" + longText.substr(5001) + "\"]";
    CHECK(text(list(heap, {str(heap, longText)})) == expected);
    CHECK(valueText(v) == text(v));
    // interpolation: "{inv.amount} {inv.currency}" becomes "612.0 EUR"
    Value inv = record(heap, {{"amount", F(612.0)}, {"currency", str(heap, "EUR")}});
    Value parts[] = {ok(getField(heap, inv, "amount")), str(heap, " "), ok(getField(heap, inv, "currency"))};
    CHECK(ok(interpolate(heap, parts)).asStr() == "612.0 EUR");
}

// ---------------------------------------------------------------- value ⇄ JSON

TEST_CASE("value_json: values to JSON keep Int and Float apart and fields in order") {
    Heap heap;
    Value v = record(heap, {{"z", Value::integer(1)},
                            {"amount", Value::floating(612.0)},
                            {"big", Value::floating(1e16)},
                            {"ok", Value::boolean(true)},
                            {"none", Value::unit()},
                            {"items", list(heap, {str(heap, "é"), list(heap, {})})}});
    std::optional<Json> j = valueToJson(v);
    REQUIRE(j);
    CHECK((*j)["z"].is_number_integer());
    CHECK((*j)["amount"].is_number_float());
    CHECK(j->dump() == R"({"z":1,"amount":612.0,"big":1e+16,"ok":true,"none":null,"items":["é",[]]})");
    CHECK(canonicalJson(*j) == R"({"amount":612.0,"big":1e+16,"items":["é",[]],"none":null,"ok":true,"z":1})");
    CHECK(valueToJson(Value::integer(7))->dump() == "7");
    CHECK(valueToJson(str(heap, "x"))->dump() == "\"x\"");
    CHECK(valueToJson(Value::unit())->is_null());
    // The size cap counts compact JSON text.
    CHECK(valueToJson(v, 10) == std::nullopt);
    CHECK(valueToJson(v, 200));
}

TEST_CASE("value_json: typed JSON round trips") {
    Heap heap;
    TypeArena types;
    TypeRef priority = types.enumOf({"low", "high"}, "Priority");
    TypeRef ticket = types.record({{"sender", types.str()},
                                   {"count", types.integer()},
                                   {"score", types.floating()},
                                   {"urgent", types.boolean()},
                                   {"priority", priority},
                                   {"tags", types.list(types.str(), 3)},
                                   {"nothing", types.unit()}},
                                  "Ticket");
    TagSetId untrusted = tagSet(heap, {"untrusted"});
    ProvId seq = leaf(heap, 9);
    nlohmann::json input = nlohmann::json::parse(
        R"({"sender": "a@b", "count": 3.0, "score": 2, "urgent": false, "priority": "high",
            "tags": ["x", "é"], "nothing": null})");
    ValueFromJson result = valueFromJson(heap, input, ticket, "input.ticket", untrusted, seq);
    REQUIRE(result.value);
    CHECK_FALSE(result.mismatch);
    const Value& v = *result.value;
    // Every node is labelled.
    CHECK(v.tags() == untrusted);
    CHECK(v.prov() == seq);
    CHECK(v.asRecord().deepTags == untrusted);
    Value tags = ok(getField(heap, v, "tags"));
    CHECK(tags.asList().items[1].tags() == untrusted);
    CHECK(tags.asList().items[1].prov() == seq);
    CHECK(tags.asList().deepTags == untrusted);
    // Coercions: an integral float to Int, an Int to Float.
    Value count = ok(getField(heap, v, "count"));
    CHECK(count.kind() == ValueKind::Int);
    CHECK(count.asInt() == 3);
    Value score = ok(getField(heap, v, "score"));
    CHECK(score.kind() == ValueKind::Float);
    CHECK(score.asFloat() == 2.0);
    // Fields come out in the type's declared order.
    std::optional<Json> back = valueToJson(v);
    REQUIRE(back);
    CHECK(back->dump() ==
          R"({"sender":"a@b","count":3,"score":2.0,"urgent":false,"priority":"high","tags":["x","é"],"nothing":null})");
    // And back again: equal values.
    ValueFromJson again = valueFromJson(heap, *back, ticket, "input.ticket");
    REQUIRE(again.value);
    CHECK(valuesEqual(*again.value, v));
    CHECK(again.value->tags() == kNoTags);
}

TEST_CASE("value_json: typed JSON mismatches name the path") {
    Heap heap;
    TypeArena types;
    TypeRef ticket = types.record({{"sender", types.str()}, {"body", types.str()}}, "Ticket");
    TypeRef items = types.list(types.record({{"id", types.integer()}, {"kind", types.enumOf({"a", "b"})}}), 2);
    auto mismatch = [&](const char* json, TypeRef type, const char* path) {
        ValueFromJson r = valueFromJson(heap, nlohmann::json::parse(json), type, path);
        REQUIRE_FALSE(r.value);
        REQUIRE(r.mismatch);
        CHECK_FALSE(heap.failed());
        return r.mismatch->text();
    };
    CHECK(mismatch(R"({"sender": "a", "body": 5})", ticket, "input.ticket") ==
          "input.ticket.body: expected Str, found number");
    CHECK(mismatch(R"({"sender": "a"})", ticket, "input.ticket") == "input.ticket: missing field 'body'");
    CHECK(mismatch(R"({"sender": "a", "body": "b", "cc": "c", "bcc": "d"})", ticket, "input.ticket") ==
          "input.ticket: unexpected field(s) ['bcc', 'cc']");
    // The prototype's order: unexpected fields first, then each field in declaration order, so a
    // field of the wrong type is reported before a later missing one.
    CHECK(mismatch(R"({"sender": 1, "cc": "c"})", ticket, "input.ticket") ==
          "input.ticket: unexpected field(s) ['cc']");
    CHECK(mismatch(R"({"sender": 1})", ticket, "input.ticket") == "input.ticket.sender: expected Str, found number");
    CHECK(mismatch(R"({"body": 1})", ticket, "input.ticket") == "input.ticket: missing field 'sender'");
    CHECK(mismatch(R"([1])", ticket, "input.ticket") == "input.ticket: expected Ticket, found array");
    CHECK(mismatch(R"([{"id": 1, "kind": "a"}, {"id": 2.5, "kind": "b"}])", items, "result") ==
          "result[1].id: expected Int, found non-integral number 2.5");
    CHECK(mismatch(R"([{"id": 1, "kind": "c"}])", items, "result") ==
          "result[0].kind: expected one of ['a', 'b'], found 'c'");
    CHECK(mismatch(R"([{"id": 1, "kind": 1}])", items, "result") ==
          "result[0].kind: expected one of ['a', 'b'], found number");
    CHECK(mismatch(R"([{"id": 1, "kind": "a"}, {"id": 1, "kind": "a"}, {"id": 1, "kind": "a"}])", items, "result") ==
          "result: expected at most 2 items, found 3");
    CHECK(mismatch("18446744073709551615", types.integer(), "input.n") ==
          "input.n: expected Int, found 18446744073709551615 which does not fit in 64 bits");
    CHECK(mismatch("1e30", types.integer(), "input.n") ==
          "input.n: expected Int, found 1e+30 which does not fit in 64 bits");
    CHECK(mismatch("true", types.integer(), "input.n") == "input.n: expected Int, found boolean");
    CHECK(mismatch("1", types.boolean(), "input.b") == "input.b: expected Bool, found number");
    CHECK(mismatch("\"1.5\"", types.floating(), "input.f") == "input.f: expected Float, found string");
    CHECK(mismatch("0", types.unit(), "input.u") == "input.u: expected Unit, found number");
    // Unbounded lists are fine for inputs; large integral floats in range are coerced exactly.
    ValueFromJson big = valueFromJson(heap, nlohmann::json::parse("[-9.223372036854775808e18, 4.0]"),
                                      types.list(types.integer(), std::nullopt), "input.xs");
    REQUIRE(big.value);
    CHECK(big.value->asList().items[0].asInt() == INT64_MIN);
    // Running out of memory is a heap failure, not a mismatch.
    Heap tiny(512);
    ValueFromJson oom = valueFromJson(tiny, nlohmann::json(std::string(2000, 'x')), types.str(), "input.s");
    CHECK_FALSE(oom.value);
    CHECK_FALSE(oom.mismatch);
    CHECK(tiny.takeError().code == DiagCode::R0701);
}

// ---------------------------------------------------------------- canonical JSON

TEST_CASE("canonical_json: matches Python's json.dumps(sort_keys=True, separators=(',', ':'), ensure_ascii=False)") {
    struct Case {
        const char* input;
        const char* expected;  // produced by CPython 3
    };
    const Case cases[] = {
        {R"json({"b": 1, "a": [1.0, 2, 612.0], "c": null})json", "{\"a\":[1.0,2,612.0],\"b\":1,\"c\":null}"},
        {R"json([1e16, 1e-5, 123456789.123, -0.0, 1.5e300, 0.1, 100.0, 1e15, 12345678901234567890, -9223372036854775808])json",
         "[1e+16,1e-05,123456789.123,-0.0,1.5e+300,0.1,100.0,1000000000000000.0,12345678901234567890,"
         "-9223372036854775808]"},
        {R"json("quote\" back\\ nl\n cr\r tab\t bs\b ff\f ctl\u0001 \u001f del\u007f \u00e9 \u4e2d \ud83d\ude00 \u2028")json",
         "\"quote\\\" back\\\\ nl\\n cr\\r tab\\t bs\\b ff\\f ctl\\u0001 \\u001f del\x7f \xc3\xa9 \xe4\xb8\xad "
         "\xf0\x9f\x98\x80 \xe2\x80\xa8\""},
        {R"json({"\u00e9": 1, "z": 2, "a": 3, "Z": 4, "\ud83d\ude00": 5, "\u00ff": 6, "": 7, "\uffff": 8})json",
         "{\"\":7,\"Z\":4,\"a\":3,\"z\":2,\"\xc3\xa9\":1,\"\xc3\xbf\":6,\"\xef\xbf\xbf\":8,\"\xf0\x9f\x98\x80\":5}"},
        {R"json({"args": {"to": "x@y", "amount": 612.0, "items": [{"q": 1}, {"p": [true, false, null]}]}, "program_hash": "abc", "resource": "mail.send", "site": "main#0"})json",
         "{\"args\":{\"amount\":612.0,\"items\":[{\"q\":1},{\"p\":[true,false,null]}],\"to\":\"x@y\"},"
         "\"program_hash\":\"abc\",\"resource\":\"mail.send\",\"site\":\"main#0\"}"},
        {R"json([[], {}, [[]], [{}], {"a": {}}])json", "[[],{},[[]],[{}],{\"a\":{}}]"},
        {R"json([1e22, 1e21, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1.2345678901234567e-7, 0.0001, 0.00001])json",
         "[1e+22,1e+21,5e-324,2.2250738585072014e-308,1.7976931348623157e+308,1.2345678901234566e-07,0.0001,1e-05]"},
        {R"json(["20240101-000000-abcdef", "main#0", 3])json", "[\"20240101-000000-abcdef\",\"main#0\",3]"},
        {R"json({"nested": {"z": [3, 2, 1], "y": {"b": 2.5, "a": -1.0}}, "list": [{"k": "v"}]})json",
         "{\"list\":[{\"k\":\"v\"}],\"nested\":{\"y\":{\"a\":-1.0,\"b\":2.5},\"z\":[3,2,1]}}"},
        {R"json([0, -1, 9007199254740993, 1.0e0, 2.5E+3, -1.5e-10])json",
         "[0,-1,9007199254740993,1.0,2500.0,-1.5e-10]"},
        {R"json("plain")json", "\"plain\""},
        {R"json(true)json", "true"},
        {R"json(null)json", "null"},
        {R"json(-12.75)json", "-12.75"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.input);
        CHECK(canonicalJson(nlohmann::json::parse(c.input)) == c.expected);
        CHECK(canonicalJson(Json::parse(c.input)) == c.expected);
    }
    // Non-finite floats as Python prints them (never produced by Remit values).
    nlohmann::json special =
        nlohmann::json::array({std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()});
    CHECK(canonicalJson(special) == "[Infinity,-Infinity]");
}

// The oracle of both CanonicalObject tests: its three texts (whole, without `chain`, with a
// `chain` put in) are canonicalJson of the same tree treated the same way.
static void checkBuiltMatchesTree(const CanonicalObject& built, const Json& tree) {
    CHECK(built.text() == canonicalJson(tree));
    Json without = tree;
    without.erase("chain");
    CHECK(built.text("chain") == canonicalJson(without));
    Json with = tree;
    with["chain"] = "0123abc";
    CHECK(built.textWith("chain", "0123abc") == canonicalJson(with));
    // The trace writer's paths (a view of the object's own buffer when it holds the text, a line
    // written into a reused buffer) give the same bytes; `out` starts with stale text to clear.
    std::string scratch, out = "stale";
    CHECK(built.textWithout("chain", scratch) == canonicalJson(without));
    CHECK(built.textWithout("", scratch) == canonicalJson(tree));
    built.textWithInto(out, "chain", "0123abc");
    CHECK(out == canonicalJson(with));
    for (const char* key : {"a", "zz", "\xc3\xa9x"}) {
        CAPTURE(key);
        Json other = tree;
        other[key] = "v";
        built.textWithInto(out, key, "v");
        CHECK(out == canonicalJson(other));
    }
}

TEST_CASE("canonical_json: an object built member by member is canonicalJson of the same object") {
    // The oracle is canonicalJson of the equivalent Json tree, on generated objects: keys in any
    // order (non-ASCII, empty, a prefix of another), values of every kind, a key set twice (the
    // last value wins), and the member added or skipped by text()/textWith() (the trace's `chain`).
    std::mt19937 rng(22);
    const std::vector<std::string> keys = {"event", "chain", "a", "ab", "", "Z", "\xc3\xa9", "k\"q", "result", "z"};
    const std::vector<Json> values = {
        Json(nullptr), Json(true), Json(-3), Json(uint64_t(18446744073709551615ull)), Json(612.0), Json(1e-05),
        Json("t\u00e9xt\n\"x\""), Json::array({1, "b", Json::object()}), Json::parse(R"({"y": [2.5, {"b": 1, "a": null}], "x": "é"})")};
    for (int round = 0; round < 500; ++round) {
        CAPTURE(round);
        CanonicalObject built;
        Json tree = Json::object();
        int members = static_cast<int>(rng() % 8);
        for (int m = 0; m < members; ++m) {
            const std::string& key = keys[rng() % keys.size()];
            const Json& value = values[rng() % values.size()];
            switch (rng() % 3) {
                case 0: built.add(key, value); break;
                case 1: built.addCanonical(key, canonicalJson(value)); break;
                default:
                    if (!value.is_string()) {
                        built.add(key, value);
                        break;
                    }
                    built.add(key, value.get<std::string>());
            }
            tree[key] = value;
        }
        checkBuiltMatchesTree(built, tree);
    }
}

TEST_CASE("canonical_json: an object built in key order is joined unsorted and is canonicalJson of the same object") {
    // The broker adds the fixed keys of its records in canonical order, and CanonicalObject then
    // joins them without sorting; the oracle is again canonicalJson of the same tree. Generated:
    // ordered subsets of the keys (byte order: non-ASCII after ASCII, a prefix before its
    // extensions), a key set again in place (the order holds), a late key out of order (the
    // object falls back to sorting), numbers of every C++ type the broker passes.
    std::mt19937 rng(2222);
    std::vector<std::string> keys = {"", "Z", "a", "ab", "approval", "args", "arg_tags", "chain", "event",
                                     "k\"q", "result", "result_tags", "z", "\xc3\xa9"};
    std::sort(keys.begin(), keys.end());
    for (int round = 0; round < 500; ++round) {
        CAPTURE(round);
        CanonicalObject built;
        Json tree = Json::object();
        for (const std::string& key : keys) {
            if (rng() % 2) continue;
            switch (rng() % 6) {
                case 0: built.add(key, int64_t(-7)), tree[key] = int64_t(-7); break;
                case 1: built.add(key, uint64_t(18446744073709551615ull)), tree[key] = uint64_t(18446744073709551615ull); break;
                case 2: built.add(key, 0.1), tree[key] = 0.1; break;
                case 3: built.add(key, 1e16), tree[key] = 1e16; break;
                case 4: built.add(key, "v\u00e9\t"), tree[key] = "v\u00e9\t"; break;
                default: built.add(key, 3), tree[key] = 3;
            }
            if (rng() % 8 == 0) built.add(key, Json::array({key})), tree[key] = Json::array({key});
        }
        CHECK(built.inKeyOrder());  // what the broker asserts of its records
        if (rng() % 4 == 0 && !tree.empty()) {
            const std::string& late = keys[rng() % keys.size()];
            // In place when it sorts after every key so far (the tree's last, as keys went in in
            // order), or replaces one (its place holds).
            bool inPlace = tree.contains(late) || late > tree.rbegin().key();
            built.add(late, false);
            tree[late] = false;
            CHECK(built.inKeyOrder() == inPlace);
        }
        checkBuiltMatchesTree(built, tree);
    }
}

TEST_CASE("canonical_json: a small flat container is written as the general writer writes it, on generated values") {
    // Containers of up to 8 members that are scalars or empty containers (call arguments, tags,
    // `meta`) are written without the writer's frames; inside another container they go through
    // the frames, so "[" + text(x) + "]" == text([x]) compares the two, in every style. Generated:
    // objects and arrays of 0-10 members (over the limit too), keys out of order, every scalar.
    std::mt19937 rng(2026);
    const std::vector<std::string> keys = {"b", "a", "", "\xc3\xa9", "k\"q", "Z", "ab", "z", "\x01", "m"};
    const std::vector<Json> members = {Json(nullptr), Json(false), Json(-3), Json(uint64_t(18446744073709551615ull)),
                                       Json(0.1), Json(1e16), Json("t\u00e9xt\n"), Json::array(), Json::object(),
                                       Json::array({1})};
    const std::vector<JsonTextStyle> styles = {JsonTextStyle{true, false, -1, ",", ":"}, JsonTextStyle{},
                                               JsonTextStyle{false, false, -1, ",", ": "}};
    for (int round = 0; round < 2000; ++round) {
        CAPTURE(round);
        Json x = rng() % 2 ? Json::object() : Json::array();
        size_t n = rng() % 11;
        for (size_t i = 0; i < n; ++i) {
            const Json& v = members[rng() % (rng() % 4 == 0 ? members.size() : members.size() - 1)];
            if (x.is_array()) x.push_back(v);
            else x[keys[rng() % keys.size()]] = v;
        }
        for (const JsonTextStyle& style : styles) {
            CAPTURE(style.sortKeys);
            CAPTURE(style.ensureAscii);
            CHECK("[" + dumpJson(x, style) + "]" == dumpJson(Json::array({x}), style));
            nlohmann::json plain = x;
            CHECK("[" + dumpJson(plain, style) + "]" == dumpJson(nlohmann::json::array({plain}), style));
        }
    }
}

TEST_CASE("canonical_json: an integral float prints as formatFloatRepr prints it, on generated values") {
    // Integral floats below 2^53 are written as the integer and ".0" without the shortest-digits
    // search; the oracle is that search (formatFloatRepr, Python's repr), on both sides of 2^53
    // and of 1e16 (where repr switches to an exponent), negative zero and powers of two.
    std::mt19937_64 rng(53);
    std::vector<double> values = {0.0, -0.0, 1.0, -1.0, 9007199254740991.0, 9007199254740992.0, 9007199254740994.0,
                                  -9007199254740991.0, 1e15, 1e16, 9999999999999998.0, 1e17, 0.5, -2.5};
    for (int shift = 0; shift < 64; ++shift) values.push_back(std::ldexp(1.0, shift)), values.push_back(-std::ldexp(1.0, shift));
    for (int i = 0; i < 3000; ++i) {
        double v = static_cast<double>(static_cast<int64_t>(rng() >> (rng() % 64)));
        values.push_back(i % 2 ? v : -v);
    }
    for (double v : values) {
        CAPTURE(v);
        CHECK(canonicalJson(Json(v)) == formatFloatRepr(v));
    }
}

TEST_CASE("canonical_json: strings escape as json.dumps does, on generated text") {
    // The oracle is json.dumps's rule applied to one code point at a time: `"` `\` and the control
    // characters escaped (\n \r \t \b \f, others \u00xx), with ensure_ascii also DEL and every
    // non-ASCII character (\uxxxx, a surrogate pair above U+FFFF); anything else as its UTF-8.
    // Runs of plain bytes are copied whole by appendJsonString, so the text mixes long runs,
    // escapes and multi-byte characters at every position. Without ensure_ascii, bytes that are
    // not UTF-8 pass through unchanged (nothing Remit makes holds them).
    auto unit = [](uint32_t u) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "\\u%04x", u & 0xffffu);
        return std::string(buf);
    };
    // A code point as \u escapes (a surrogate pair above U+FFFF).
    auto units = [&](uint32_t cp) {
        return cp < 0x10000 ? unit(cp) : unit(0xd800 | ((cp - 0x10000) >> 10)) + unit(0xdc00 | ((cp - 0x10000) & 0x3ff));
    };
    // Its UTF-8, by nlohmann's JSON parser (an encoder independent of Remit's).
    auto utf8 = [&](uint32_t cp) { return nlohmann::json::parse("\"" + units(cp) + "\"").get<std::string>(); };
    auto escaped = [&](uint32_t cp, bool ascii) -> std::string {
        switch (cp) {
            case '"': return "\\\"";
            case '\\': return "\\\\";
            case '\n': return "\\n";
            case '\r': return "\\r";
            case '\t': return "\\t";
            case '\b': return "\\b";
            case '\f': return "\\f";
            default: break;
        }
        if (cp < 0x20 || (ascii && cp == 0x7f)) return unit(cp);
        if (ascii && cp >= 0x80) return units(cp);
        return utf8(cp);
    };
    std::mt19937 rng(2222);
    for (int round = 0; round < 3000; ++round) {
        CAPTURE(round);
        std::string text, plain = "\"", ascii = "\"";
        bool strayBytes = false;
        int length = static_cast<int>(rng() % 40);
        for (int i = 0; i < length; ++i) {
            uint32_t cp;
            switch (rng() % 6) {
                case 0: cp = rng() % 0x20; break;                                 // control
                case 1: cp = "\"\\\x7f"[rng() % 3]; break;
                case 2: cp = 0x80 + rng() % 0x780; break;                         // two bytes
                case 3: cp = 0x800 + rng() % 0xd000; break;                       // three (below the surrogates)
                case 4: cp = 0x10000 + rng() % 0x100000; break;                   // four
                default: cp = 0x20 + rng() % 0x5f; break;                         // printable ASCII
            }
            if (round % 3 == 0 && rng() % 10 == 0) {  // a byte that is not UTF-8
                char stray = static_cast<char>(0x80 + rng() % 0x80);
                text += stray;
                plain += stray;
                strayBytes = true;
                continue;
            }
            text += utf8(cp);
            plain += escaped(cp, false);
            ascii += escaped(cp, true);
        }
        plain += '"';
        ascii += '"';
        std::string out;
        appendJsonString(out, text, false);
        CHECK(out == plain);
        CHECK(canonicalJson(Json(text)) == plain);
        if (!strayBytes) {
            out.clear();
            appendJsonString(out, text, true);
            CHECK(out == ascii);
        }
    }
}

TEST_CASE("canonical_json: other json.dumps styles match Python") {
    struct Case {
        const char* input;
        const char* expected;  // json.dumps(x) with Python's defaults, insertion order kept
    };
    const Case cases[] = {
        {R"json({"b": 1, "a": [1.0, 2, 612.0], "c": null})json", "{\"b\": 1, \"a\": [1.0, 2, 612.0], \"c\": null}"},
        {R"json("quote\" back\\ nl\n cr\r tab\t bs\b ff\f ctl\u0001 \u001f del\u007f \u00e9 \u4e2d \ud83d\ude00 \u2028")json",
         "\"quote\\\" back\\\\ nl\\n cr\\r tab\\t bs\\b ff\\f ctl\\u0001 \\u001f del\\u007f \\u00e9 \\u4e2d "
         "\\ud83d\\ude00 \\u2028\""},
        {R"json({"\u00e9": 1, "z": 2, "a": 3, "Z": 4, "\ud83d\ude00": 5, "\u00ff": 6, "": 7, "\uffff": 8})json",
         "{\"\\u00e9\": 1, \"z\": 2, \"a\": 3, \"Z\": 4, \"\\ud83d\\ude00\": 5, \"\\u00ff\": 6, \"\": 7, \"\\uffff\": "
         "8}"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.input);
        CHECK(dumpJson(Json::parse(c.input), JsonTextStyle{}) == c.expected);
    }
    // json.dumps(x, indent=2, ensure_ascii=False)
    JsonTextStyle indented;
    indented.indent = 2;
    indented.ensureAscii = false;
    indented.itemSeparator = ",";
    auto doc = Json::parse(
        R"({"args": {"to": "x@y", "amount": 612.0, "items": [{"q": 1}, {"p": [true, false, null]}]}, "program_hash": "abc", "resource": "mail.send", "site": "main#0"})");
    CHECK(
        dumpJson(doc, indented) ==
        "{\n  \"args\": {\n    \"to\": \"x@y\",\n    \"amount\": 612.0,\n    \"items\": [\n      {\n        \"q\": 1\n"
        "      },\n      {\n        \"p\": [\n          true,\n          false,\n          null\n        ]\n      }\n"
        "    ]\n  },\n  \"program_hash\": \"abc\",\n  \"resource\": \"mail.send\",\n  \"site\": \"main#0\"\n}");
    CHECK(dumpJson(Json::parse(R"([[], {}, [[]], [{}], {"a": {}}])"), indented) ==
          "[\n  [],\n  {},\n  [\n    []\n  ],\n  [\n    {}\n  ],\n  {\n    \"a\": {}\n  }\n]");
}
