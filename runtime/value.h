// The VM's runtime value (docs/architecture.md "Values and labels"): a 16-byte handle carrying the
// value, its tags and its provenance. The VM's registers, the broker's arguments and results,
// value⇄JSON and the serve protocol all traffic in `Value`; heap objects are created only through a
// `Heap` (runtime/heap.h), which accounts their memory, and operations live in runtime/ops.h.
//
// Layout (static_assert'ed): 8-byte payload (int64, double, bool, or HeapObject*), then one
// 64-bit label word holding the kind (bits 0-7), the TagSetId (bits 8-31) and the ProvId (bits
// 32-63), so "this kind, without tags or provenance" is one comparison of that word. So a run has at most 2^24 distinct tag sets (kMaxTagSets) and 2^32 provenance nodes;
// the tables fail cleanly (R0701 through the Heap) before either would wrap.
//
// Invariants:
// - Str, List and Record values point to a live heap object and hold one reference to it; copying
//   a Value adds a reference, destroying it drops one, and the object is freed exactly when the
//   last reference goes. Values never form cycles (containers are immutable once shared), so
//   reference counting frees everything — no tracing collector.
// - A heap object may be mutated only while its reference count is 1 (the Heap's in-place
//   append helpers check this); a shared object is immutable.
// - Tags and provenance belong to the Value, not to the object: one list can be referenced by
//   values with different top-level tags. A container object caches the union of its elements'
//   deep tags and deep provenance (`deepTags`/`deepProv`), computed when elements are added, so
//   deep checks cost O(1).
// - Every Float is finite: operations that would produce inf or nan fail with R0101 instead.
// - Every Value must be destroyed before the Heap that allocated its object.
#pragma once

#include <cassert>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/provenance.h"
#include "runtime/tags.h"

// Forces inlining where the compiler's size heuristics give up: the VM's dispatch loop is one big
// function, and GCC stops inlining Value's assignments into it, which cost a quarter of the time.
#if defined(__GNUC__)
#define REMIT_ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define REMIT_ALWAYS_INLINE inline
#endif

namespace remit {

class Heap;

enum class ValueKind : uint8_t { Unit, Bool, Int, Float, Str, List, Record };

// "Unit", "Bool", ... — for messages.
std::string_view kindName(ValueKind kind);

constexpr bool isHeapKind(ValueKind kind) { return kind >= ValueKind::Str; }

// The header shared by every heap object. Objects are created and freed only by their Heap.
struct HeapObject {
    // Live references. 32 bits suffice: every reference is a 16-byte Value held in a charged
    // container or a register, and the Heap caps its budget at kMaxMemoryBudget (32 GiB), so
    // 2^32 references cannot be alive at once.
    uint32_t refCount = 1;
    ValueKind kind;
    // A string of the run's constant pool, which the VM interned: no other interned string has
    // the same bytes, so two interned strings are equal exactly when they are the same object. A
    // constant is always also held by the pool, so it is never unique and never grown in place.
    bool interned = false;
    Heap* heap;           // frees the object and credits its bytes back
    size_t chargedBytes;  // what the Heap charged for it, credited back exactly on free

    HeapObject(ValueKind k, Heap* h, size_t charged) : kind(k), heap(h), chargedBytes(charged) {}
};

struct StrObject;
struct ListObject;
struct RecordObject;

// Frees an object whose count reached zero (defined in heap.cpp; iterative, so dropping a deeply
// nested value cannot overflow the stack).
void destroyHeapObject(HeapObject* object);
// Drops one reference and destroys the object when it was the last.
void dropReference(HeapObject* object);

class Value {
public:
    // Unit, untagged.
    Value() noexcept : bits_(0), meta_(0) {}

    static Value unit(TagSetId tags = kNoTags, ProvId prov = kNoProv) { return Value(ValueKind::Unit, 0, tags, prov); }
    static Value boolean(bool b, TagSetId tags = kNoTags, ProvId prov = kNoProv) {
        return Value(ValueKind::Bool, b ? 1 : 0, tags, prov);
    }
    static Value integer(int64_t i, TagSetId tags = kNoTags, ProvId prov = kNoProv) {
        return Value(ValueKind::Int, static_cast<uint64_t>(i), tags, prov);
    }
    // `f` must be finite (the invariant above); operations check before they build one.
    static Value floating(double f, TagSetId tags = kNoTags, ProvId prov = kNoProv) {
        assert(std::isfinite(f));
        Value v(ValueKind::Float, 0, tags, prov);
        v.f_ = f;
        return v;
    }

    Value(const Value& other) noexcept : bits_(other.bits_), meta_(other.meta_) {
        if (isHeap()) ++obj_->refCount;
    }
    Value(Value&& other) noexcept : bits_(other.bits_), meta_(other.meta_) {
        other.meta_ = 0;  // the moved-from value is an untagged Unit
        other.bits_ = 0;
    }
    // Both assignments read `other` completely before releasing the old value: `other` may live
    // inside the object this value is about to free (`v = v.asList().items[0]`). Written out
    // rather than copy-and-swap: the VM's register moves are the hottest code there is.
    REMIT_ALWAYS_INLINE Value& operator=(const Value& other) noexcept {
        if (other.isHeap()) ++other.obj_->refCount;
        HeapObject* old = isHeap() ? obj_ : nullptr;
        bits_ = other.bits_;
        meta_ = other.meta_;
        if (old) dropReference(old);
        return *this;
    }
    REMIT_ALWAYS_INLINE Value& operator=(Value&& other) noexcept {
        if (this == &other) return *this;
        HeapObject* old = isHeap() ? obj_ : nullptr;
        bits_ = other.bits_;
        meta_ = other.meta_;
        other.bits_ = 0;
        other.meta_ = 0;
        if (old) dropReference(old);
        return *this;
    }
    void swap(Value& other) noexcept {
        std::swap(bits_, other.bits_);
        std::swap(meta_, other.meta_);
    }
    ~Value() { release(); }

    ValueKind kind() const { return static_cast<ValueKind>(meta_ & 0xff); }
    bool isHeap() const { return isHeapKind(kind()); }
    bool isNumber() const { return kind() == ValueKind::Int || kind() == ValueKind::Float; }

    bool asBool() const {
        assert(kind() == ValueKind::Bool);
        return i_ != 0;
    }
    int64_t asInt() const {
        assert(kind() == ValueKind::Int);
        return i_;
    }
    double asFloat() const {
        assert(kind() == ValueKind::Float);
        return f_;
    }
    // Int or Float as a double (Int converted with rounding to nearest, as Python's float(int)).
    double asNumber() const { return kind() == ValueKind::Int ? static_cast<double>(i_) : f_; }
    const StrObject& asStrObject() const;
    std::string_view asStr() const;
    const ListObject& asList() const;
    const RecordObject& asRecord() const;
    HeapObject* object() const {
        assert(isHeap());
        return obj_;
    }
    // The object's reference count (0 for scalars): 1 means this Value is its only owner.
    uint32_t refCount() const { return isHeap() ? obj_->refCount : 0; }

    // The kind, tags and provenance in one word: equal to `unlabelled(kind)` exactly when the value
    // has that kind, no tags and no provenance (the VM's fast paths test all three with one
    // comparison, and both operands of an operation with one branch).
    uint64_t labelWord() const { return meta_; }
    static constexpr uint64_t unlabelled(ValueKind kind) { return static_cast<uint64_t>(kind); }

    // Top-level tags and provenance.
    TagSetId tags() const { return static_cast<TagSetId>((meta_ >> 8) & 0xffffff); }
    ProvId prov() const { return static_cast<ProvId>(meta_ >> 32); }
    void setTags(TagSetId tags) {
        assert(tags < kMaxTagSets);
        meta_ = (meta_ & ~uint64_t(0xffffff00)) | (uint64_t(tags) << 8);
    }
    void setProv(ProvId prov) { meta_ = (meta_ & 0xffffffffu) | (uint64_t(prov) << 32); }
    // The same value with other top-level tags and provenance (shares the heap object).
    Value withLabels(TagSetId tags, ProvId prov) const {
        Value v(*this);
        v.setTags(tags);
        v.setProv(prov);
        return v;
    }

    // Takes ownership of one reference to `object` (used by the Heap after allocation).
    static Value adopt(HeapObject* object, TagSetId tags, ProvId prov) {
        Value v(object->kind, 0, tags, prov);
        v.obj_ = object;
        return v;
    }

private:
    union {
        uint64_t bits_;
        int64_t i_;  // Int; Bool as 0/1
        double f_;
        HeapObject* obj_;
    };
    uint64_t meta_;  // kind in bits 0-7, TagSetId in bits 8-31, ProvId in bits 32-63

    Value(ValueKind kind, uint64_t bits, TagSetId tags, ProvId prov)
        : bits_(bits), meta_(static_cast<uint64_t>(kind) | (uint64_t(tags) << 8) | (uint64_t(prov) << 32)) {
        assert(tags < kMaxTagSets);
    }
    void release() {
        // Out of line on purpose: inlined through the payload union, GCC 12 at -O2 warns
        // (-Warray-bounds) on integer values whose bits it mistakes for a pointer.
        if (isHeap()) dropReference(obj_);
    }
};

static_assert(sizeof(Value) == 16, "Value must stay 16 bytes: payload, kind+tags, provenance");

// UTF-8 text (validity is the producer's duty: the lexer, JSON and the builtins keep it).
struct StrObject : HeapObject {
    std::string bytes;
    using HeapObject::HeapObject;
};

struct ListObject : HeapObject {
    std::vector<Value> items;
    TagSetId deepTags = kNoTags;  // ∪ over items of (item's tags ∪ item's own deepTags)
    ProvId deepProv = kNoProv;    // likewise for provenance
    using HeapObject::HeapObject;
};

// The field names of one record shape, interned per Heap (runtime/heap.h `recordShape`): records
// built with the same names in the same order share one shape, so shapes compare by pointer and
// the VM can cache field positions per shape.
struct RecordShape {
    std::vector<std::string> names;  // in insertion (literal or declared) order, distinct

    std::optional<size_t> indexOf(std::string_view name) const {
        for (size_t i = 0; i < names.size(); ++i)
            if (names[i] == name) return i;
        return std::nullopt;
    }
};

struct RecordObject : HeapObject {
    const RecordShape* shape = nullptr;
    std::vector<Value> values;    // values[i] is the field shape->names[i]
    TagSetId deepTags = kNoTags;  // as for ListObject
    ProvId deepProv = kNoProv;
    using HeapObject::HeapObject;
};

inline const StrObject& Value::asStrObject() const {
    assert(kind() == ValueKind::Str);
    return *static_cast<const StrObject*>(obj_);
}
inline std::string_view Value::asStr() const { return asStrObject().bytes; }
inline const ListObject& Value::asList() const {
    assert(kind() == ValueKind::List);
    return *static_cast<const ListObject*>(obj_);
}
inline const RecordObject& Value::asRecord() const {
    assert(kind() == ValueKind::Record);
    return *static_cast<const RecordObject*>(obj_);
}

// The cached deep labels of a container's contents (kNoTags/kNoProv for scalars and strings).
inline TagSetId contentTags(const Value& v) {
    switch (v.kind()) {
        case ValueKind::List:
            return v.asList().deepTags;
        case ValueKind::Record:
            return v.asRecord().deepTags;
        default:
            return kNoTags;
    }
}
inline ProvId contentProv(const Value& v) {
    switch (v.kind()) {
        case ValueKind::List:
            return v.asList().deepProv;
        case ValueKind::Record:
            return v.asRecord().deepProv;
        default:
            return kNoProv;
    }
}

}  // namespace remit
