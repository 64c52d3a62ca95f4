// Heap: allocation, accounting, iterative freeing and in-place growth (see heap.h).
#include "runtime/heap.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <new>
#include <type_traits>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace remit {

namespace {

// What a string's buffer costs beyond its object: nothing while it fits the small-string buffer
// inside std::string; else the block libstdc++ allocates (at least twice the small buffer when it
// leaves it), its terminating NUL and malloc's overhead.
constexpr size_t kSmallString = 15;  // std::string().capacity() in libstdc++
size_t strBufferBytes(size_t capacity) {
    return capacity <= kSmallString ? 0 : std::max(capacity, 2 * kSmallString) + 1 + kAllocationOverhead;
}

size_t listBufferBytes(size_t capacity) { return capacity == 0 ? 0 : capacity * sizeof(Value) + kAllocationOverhead; }

// What an object costs besides its buffer.
template <class Object>
constexpr size_t objectBytes() {
    return sizeof(Object) + kAllocationOverhead;
}

// count * size, or SIZE_MAX when that does not fit: what an impossible request needed, for messages.
size_t saturatingBytes(size_t count, size_t size) { return count > SIZE_MAX / size ? SIZE_MAX : count * size; }

// How the two kinds of growable buffer are charged, for growBuffer.
struct StrBuffer {
    static constexpr size_t kElementBytes = 1;
    static constexpr size_t kMaxElements = kMaxMemoryBudget;
    static size_t bytes(size_t capacity) { return strBufferBytes(capacity); }
    // The largest capacity whose buffer fits in `budget` bytes (0 when none beyond the small one).
    static size_t capacityWithin(size_t budget) {
        return budget > 2 * kSmallString + 1 + kAllocationOverhead ? budget - 1 - kAllocationOverhead : 0;
    }
};
struct ListBuffer {
    static constexpr size_t kElementBytes = sizeof(Value);
    static constexpr size_t kMaxElements = kMaxMemoryBudget / sizeof(Value);
    static size_t bytes(size_t capacity) { return listBufferBytes(capacity); }
    static size_t capacityWithin(size_t budget) {
        return budget > kAllocationOverhead ? (budget - kAllocationOverhead) / sizeof(Value) : 0;
    }
};

#if defined(__GLIBC__)
// glibc raises its mmap threshold each time a large block is freed (up to 32 MiB), after which
// large buffers come from the main heap and stay resident once freed: a string that grows by
// doubling then leaves every old copy in the process's memory (RSS reached 4x max_memory). A
// fixed threshold turns the dynamic adjustment off, so every block of 128 KiB or more is mapped
// on its own and returned to the system when it is freed.
void fixMallocThresholds() {
    static const bool fixed = [] {
        mallopt(M_MMAP_THRESHOLD, 128 * 1024);
        return true;
    }();
    (void)fixed;
}
#else
void fixMallocThresholds() {}
#endif

}  // namespace

Heap::Heap(size_t budgetBytes, uint32_t maxTagSets, uint64_t maxProvNodes)
    : budget_(std::min(budgetBytes, kMaxMemoryBudget)),
      tags_(std::min(maxTagSets, kMaxTagSets)),  // ids must fit a Value's 24 bits
      prov_(std::min(maxProvNodes, kMaxProvNodes)) {
    // Only the tables' growth is charged: their fixed part is the VM's, not the program's, so an
    // empty heap has liveBytes() == 0.
    tableBytes_ = tags_.bytesUsed() + prov_.bytesUsed();
    fixMallocThresholds();
}

ScratchCharge::~ScratchCharge() { heap_.credit(bytes_); }

bool ScratchCharge::reserve(size_t bytes) {
    if (bytes <= bytes_) return true;
    if (!heap_.charge(bytes - bytes_)) return false;
    bytes_ = bytes;
    return true;
}

bool Heap::spendWork() {
    uint64_t steps = workBytes_ / kWorkBytesPerStep;
    workBytes_ %= kWorkBytesPerStep;
    if (!meter_ || steps == 0) return true;
    return meter_->spendSteps(steps);
}

Heap::~Heap() { assert(liveObjects_ == 0 && "every Value must be destroyed before its Heap"); }

// ---- Accounting and errors.

bool Heap::charge(size_t bytes) {
    if (bytes > available()) {
        failMemory(bytes);
        return false;
    }
    live_ += bytes;
    peak_ = std::max(peak_, live_);
    return true;
}

void Heap::credit(size_t bytes) {
    assert(bytes <= live_);
    live_ -= bytes;
}

void Heap::fail(RuntimeError error) {
    if (!error_) error_ = std::move(error);
}

void Heap::failAllocation(size_t bytes) {
    // Not the run's budget: the process could not get the memory at all. Saying "max_memory"
    // here would send the user to raise a limit the run was within.
    fail(RuntimeError{DiagCode::R0701,
                      fmt::format("out of memory: the system could not allocate {} bytes (the run held {} bytes, "
                                  "within its max_memory of {} bytes)",
                                  bytes, live_, budget_),
                      Json{{"limit", "system_memory"}, {"value", bytes}}});
}

void Heap::failMemory(size_t needed) {
    fail(RuntimeError{DiagCode::R0701,
                      fmt::format("memory limit exceeded: {} bytes are live and {} more were needed, "
                                  "but max_memory is {} bytes",
                                  live_, needed, budget_),
                      Json{{"limit", "max_memory"}, {"value", budget_}}});
}

RuntimeError Heap::takeError() {
    assert(error_);
    RuntimeError out = std::move(*error_);
    error_.reset();
    return out;
}

// Charges whatever the tables grew by since the last call. Growth past the budget is reported,
// but the entry stays (it is already made, and the run is about to stop anyway).
bool Heap::chargeTables() {
    size_t now = tags_.bytesUsed() + prov_.bytesUsed();
    size_t grown = now - tableBytes_;
    tableBytes_ = now;
    if (grown == 0) return true;
    if (grown > available()) {
        live_ += grown;
        peak_ = std::max(peak_, live_);
        failMemory(grown);
        return false;
    }
    live_ += grown;
    peak_ = std::max(peak_, live_);
    return true;
}

// ---- Objects.

template <class Object>
Object* Heap::allocate(ValueKind kind, size_t charged) {
    if (!charge(charged)) return nullptr;
    try {
        auto* object = new Object(kind, this, charged);
        ++liveObjects_;
        return object;
    } catch (const std::bad_alloc&) {
        credit(charged);
        failAllocation(charged);
        return nullptr;
    }
}

void dropReference(HeapObject* object) {
    if (--object->refCount == 0) destroyHeapObject(object);
}

void destroyHeapObject(HeapObject* object) { object->heap->destroy(object); }

void Heap::destroy(HeapObject* object) {
    // Freeing a container drops its items, which may free more objects: they are queued here and
    // freed by the outermost call, so the C++ stack stays flat however deep the value is.
    dying_.push_back(object);
    if (freeing_) return;
    freeing_ = true;
    while (!dying_.empty()) {
        HeapObject* dead = dying_.back();
        dying_.pop_back();
        size_t bytes = dead->chargedBytes;
        switch (dead->kind) {
            case ValueKind::Str:
                delete static_cast<StrObject*>(dead);
                break;
            case ValueKind::List:
                delete static_cast<ListObject*>(dead);
                break;
            case ValueKind::Record:
                delete static_cast<RecordObject*>(dead);
                break;
            default:
                assert(false && "not a heap kind");
        }
        credit(bytes);
        --liveObjects_;
    }
    freeing_ = false;
}

std::optional<Value> Heap::makeStr(std::string_view bytes, TagSetId tags, ProvId prov) {
    auto* object = allocate<StrObject>(ValueKind::Str, objectBytes<StrObject>() + strBufferBytes(bytes.size()));
    if (!object) return std::nullopt;
    Value out = Value::adopt(object, tags, prov);
    if (!work(bytes.size())) return std::nullopt;
    try {
        object->bytes.assign(bytes);
    } catch (const std::bad_alloc&) {
        failAllocation(bytes.size());
        return std::nullopt;
    }
    return out;
}

std::optional<Value> Heap::newList(size_t capacity, TagSetId tags, ProvId prov) {
    if (capacity > kMaxMemoryBudget / sizeof(Value)) {
        failMemory(saturatingBytes(capacity, sizeof(Value)));
        return std::nullopt;
    }
    auto* object = allocate<ListObject>(ValueKind::List, objectBytes<ListObject>() + listBufferBytes(capacity));
    if (!object) return std::nullopt;
    Value out = Value::adopt(object, tags, prov);
    try {
        object->items.reserve(capacity);
    } catch (const std::bad_alloc&) {
        failAllocation(listBufferBytes(capacity));
        return std::nullopt;
    }
    return out;
}

std::optional<Value> Heap::makeList(std::span<const Value> items, TagSetId tags, ProvId prov) {
    TagSetId deepTags = kNoTags;
    ProvId deepProv = kNoProv;
    for (const Value& item : items) {
        std::optional<TagSetId> t = uniteTags(deepTags, item.tags());
        if (t) t = uniteTags(*t, contentTags(item));
        std::optional<ProvId> p = uniteProv(deepProv, item.prov());
        if (p) p = uniteProv(*p, contentProv(item));
        if (!t || !p) return std::nullopt;
        deepTags = *t;
        deepProv = *p;
    }
    std::optional<Value> out = newList(items.size(), tags, prov);
    if (!out || !work(items.size() * sizeof(Value))) return std::nullopt;
    auto& list = const_cast<ListObject&>(out->asList());
    list.items.assign(items.begin(), items.end());  // fits the reserved capacity: no allocation
    list.deepTags = deepTags;
    list.deepProv = deepProv;
    return out;
}

const RecordShape* Heap::recordShape(std::span<const std::string> names) {
    std::string key;
    for (const std::string& name : names) {
        key += name;
        key += '\0';
    }
    if (auto it = shapeIds_.find(key); it != shapeIds_.end()) return it->second;
    assert(std::all_of(names.begin(), names.end(),
                       [&](const std::string& n) { return std::count(names.begin(), names.end(), n) == 1; }) &&
           "record field names must be distinct");
    // Not charged: shapes come only from the program's record literals and types, so their number
    // is bounded by the program, not by the data it processes.
    shapes_.push_back(RecordShape{std::vector<std::string>(names.begin(), names.end())});
    const RecordShape* shape = &shapes_.back();
    shapeIds_.emplace(std::move(key), shape);
    return shape;
}

const RecordShape* Heap::recordShape(std::initializer_list<std::string_view> names) {
    std::vector<std::string> owned(names.begin(), names.end());
    return recordShape(std::span<const std::string>(owned));
}

std::optional<Value> Heap::makeRecord(const RecordShape* shape, std::span<const Value> values, TagSetId tags,
                                      ProvId prov) {
    assert(shape && values.size() == shape->names.size());
    TagSetId deepTags = kNoTags;
    ProvId deepProv = kNoProv;
    for (const Value& v : values) {
        std::optional<TagSetId> t = uniteTags(deepTags, v.tags());
        if (t) t = uniteTags(*t, contentTags(v));
        std::optional<ProvId> p = uniteProv(deepProv, v.prov());
        if (p) p = uniteProv(*p, contentProv(v));
        if (!t || !p) return std::nullopt;
        deepTags = *t;
        deepProv = *p;
    }
    auto* object =
        allocate<RecordObject>(ValueKind::Record, objectBytes<RecordObject>() + listBufferBytes(values.size()));
    if (!object) return std::nullopt;
    Value out = Value::adopt(object, tags, prov);
    if (!work(values.size() * sizeof(Value))) return std::nullopt;
    try {
        object->values.reserve(values.size());
        object->values.assign(values.begin(), values.end());
    } catch (const std::bad_alloc&) {
        failAllocation(listBufferBytes(values.size()));
        return std::nullopt;
    }
    object->shape = shape;
    object->deepTags = deepTags;
    object->deepProv = deepProv;
    return out;
}

// ---- Growth.

// Grows an object's buffer (a list's items or a string's bytes) to hold `needed` elements. The
// new buffer is charged in full before it is allocated, while the old one is still charged (both
// are alive during the copy), and the old one is credited once it is freed. Doubling keeps n
// appends O(n) in total; when doubling does not fit, growing by half, and when that does not fit
// either, to everything the budget has left, keeps it so near the limit too: each growth copies
// the buffer once, never once per append. Copying is work.
template <class Object, class Buffer, class Traits>
bool Heap::growBuffer(Object& object, Buffer& buffer, size_t needed) {
    size_t capacity = buffer.capacity();
    if (needed <= capacity) return true;
    if (needed > Traits::kMaxElements) {
        failMemory(saturatingBytes(needed, Traits::kElementBytes));
        return false;
    }
    size_t target = 0;
    for (size_t candidate : {std::max({needed, capacity * 2, size_t(4)}), std::max(needed, capacity + capacity / 2)}) {
        if (Traits::bytes(candidate) <= available()) {
            target = candidate;
            break;
        }
    }
    if (target == 0) target = std::min(Traits::capacityWithin(available()), Traits::kMaxElements);
    if (target < needed) {
        failMemory(Traits::bytes(needed));
        return false;
    }
    size_t oldBytes = Traits::bytes(capacity);
    size_t newBytes = Traits::bytes(target);
    if (!charge(newBytes)) return false;
    if (!work(buffer.size() * Traits::kElementBytes)) {
        credit(newBytes);
        return false;
    }
    try {
        // Into a fresh buffer: reserve() on a non-empty std::string rounds up to twice its old
        // capacity whatever is asked, which would leave the charge behind the memory held.
        Buffer fresh;
        fresh.reserve(target);
        if constexpr (std::is_same_v<Buffer, std::string>)
            fresh.append(buffer);  // insert() of iterators would build a temporary copy first
        else
            fresh.insert(fresh.end(), std::make_move_iterator(buffer.begin()), std::make_move_iterator(buffer.end()));
        buffer.swap(fresh);
    } catch (const std::bad_alloc&) {
        credit(newBytes);
        failAllocation(newBytes);
        return false;
    }
    credit(oldBytes);  // `fresh`, now the old buffer, is gone
    object.chargedBytes = object.chargedBytes - oldBytes + newBytes;
    return true;
}

bool Heap::growList(ListObject& list, size_t needed) { return growBuffer<ListObject, std::vector<Value>, ListBuffer>(list, list.items, needed); }

bool Heap::growStr(StrObject& str, size_t needed) { return growBuffer<StrObject, std::string, StrBuffer>(str, str.bytes, needed); }

bool Heap::appendInPlace(Value& list, const Value& itemRef) {
    assert(list.kind() == ValueKind::List);
    // A counted copy first: `itemRef` may live in the list's buffer (which growth moves) or be the
    // list itself — then the extra reference makes the list shared, so it is copied and never
    // made to contain itself.
    Value item(itemRef);
    const ListObject& current = list.asList();
    std::optional<TagSetId> t = uniteTags(current.deepTags, item.tags());
    if (t) t = uniteTags(*t, contentTags(item));
    std::optional<ProvId> p = uniteProv(current.deepProv, item.prov());
    if (p) p = uniteProv(*p, contentProv(item));
    if (!t || !p) return false;
    if (list.refCount() != 1) {
        // Shared: build the result beside it; the other holders keep the old list.
        std::optional<Value> copy = newList(current.items.size() + 1, list.tags(), list.prov());
        if (!copy || !work((current.items.size() + 1) * sizeof(Value))) return false;
        auto& fresh = const_cast<ListObject&>(copy->asList());
        fresh.items.assign(current.items.begin(), current.items.end());
        fresh.items.push_back(std::move(item));
        fresh.deepTags = *t;
        fresh.deepProv = *p;
        list = std::move(*copy);
        return true;
    }
    auto& unique = const_cast<ListObject&>(current);
    if (!growList(unique, unique.items.size() + 1) || !work(sizeof(Value))) return false;
    unique.items.push_back(std::move(item));
    unique.deepTags = *t;
    unique.deepProv = *p;
    return true;
}

bool Heap::concatInPlace(Value& target, const Value& otherRef) {
    assert(target.kind() == otherRef.kind());
    // As in appendInPlace: with the extra reference, `s = s + s` and `xs = xs + xs` see a shared
    // target and copy, so nothing reads a buffer while it grows.
    Value other(otherRef);
    std::optional<TagSetId> tags = uniteTags(target.tags(), other.tags());
    std::optional<ProvId> prov = uniteProv(target.prov(), other.prov());
    if (!tags || !prov) return false;
    if (target.kind() == ValueKind::Str) {
        std::string_view tail = other.asStr();
        if (target.refCount() != 1) {
            std::string_view head = target.asStr();
            auto* object =
                allocate<StrObject>(ValueKind::Str, objectBytes<StrObject>() + strBufferBytes(head.size() + tail.size()));
            if (!object) return false;
            Value fresh = Value::adopt(object, *tags, *prov);
            if (!work(head.size() + tail.size())) return false;
            try {
                object->bytes.reserve(head.size() + tail.size());
                object->bytes.append(head);
                object->bytes.append(tail);
            } catch (const std::bad_alloc&) {
                failAllocation(head.size() + tail.size());
                return false;
            }
            target = std::move(fresh);
            return true;
        }
        auto& unique = const_cast<StrObject&>(target.asStrObject());
        if (!growStr(unique, unique.bytes.size() + tail.size()) || !work(tail.size())) return false;
        unique.bytes.append(tail);
        target.setTags(*tags);
        target.setProv(*prov);
        return true;
    }
    assert(target.kind() == ValueKind::List);
    const ListObject& head = target.asList();
    const ListObject& tail = other.asList();
    std::optional<TagSetId> deepTags = uniteTags(head.deepTags, tail.deepTags);
    std::optional<ProvId> deepProv = uniteProv(head.deepProv, tail.deepProv);
    if (!deepTags || !deepProv) return false;
    if (target.refCount() != 1) {
        std::optional<Value> copy = newList(head.items.size() + tail.items.size(), *tags, *prov);
        if (!copy || !work((head.items.size() + tail.items.size()) * sizeof(Value))) return false;
        auto& fresh = const_cast<ListObject&>(copy->asList());
        fresh.items.assign(head.items.begin(), head.items.end());
        fresh.items.insert(fresh.items.end(), tail.items.begin(), tail.items.end());
        fresh.deepTags = *deepTags;
        fresh.deepProv = *deepProv;
        target = std::move(*copy);
        return true;
    }
    auto& unique = const_cast<ListObject&>(head);
    if (!growList(unique, unique.items.size() + tail.items.size()) || !work(tail.items.size() * sizeof(Value)))
        return false;
    unique.items.insert(unique.items.end(), tail.items.begin(), tail.items.end());
    unique.deepTags = *deepTags;
    unique.deepProv = *deepProv;
    target.setTags(*tags);
    target.setProv(*prov);
    return true;
}

bool Heap::appendTextInPlace(Value& str, std::string_view text) {
    assert(str.kind() == ValueKind::Str);
    if (str.refCount() != 1) {
        std::string_view head = str.asStr();
        auto* object =
            allocate<StrObject>(ValueKind::Str, objectBytes<StrObject>() + strBufferBytes(head.size() + text.size()));
        if (!object) return false;
        Value fresh = Value::adopt(object, str.tags(), str.prov());
        if (!work(head.size() + text.size())) return false;
        try {
            object->bytes.reserve(head.size() + text.size());
            object->bytes.append(head);
            object->bytes.append(text);
        } catch (const std::bad_alloc&) {
            failAllocation(head.size() + text.size());
            return false;
        }
        str = std::move(fresh);
        return true;
    }
    auto& unique = const_cast<StrObject&>(str.asStrObject());
    std::string aliased;
    ScratchCharge aliasedCharge(*this);
    if (text.data() >= unique.bytes.data() && text.data() < unique.bytes.data() + unique.bytes.size()) {
        // `text` is part of this string, whose buffer growth may move: copied first, and charged.
        if (!aliasedCharge.reserve(strBufferBytes(text.size())) || !work(text.size())) return false;
        aliased.assign(text);
        text = aliased;
    }
    if (!growStr(unique, unique.bytes.size() + text.size()) || !work(text.size())) return false;
    unique.bytes.append(text);
    return true;
}

// ---- Labels.

std::optional<TagSetId> Heap::uniteTagsSlow(TagSetId a, TagSetId b) {
    std::optional<TagSetId> out = tags_.unite(a, b);
    if (!out) {
        fail(RuntimeError{DiagCode::R0701,
                          fmt::format("too many distinct tag sets: a run may create at most {}", tags_.maxSets()),
                          Json{{"limit", "tag_sets"}, {"value", tags_.maxSets()}}});
        return std::nullopt;
    }
    if (!chargeTables()) return std::nullopt;
    return out;
}

std::optional<ProvId> Heap::uniteProvSlow(ProvId a, ProvId b) {
    std::optional<ProvId> out = prov_.unite(a, b);
    if (!out) {
        fail(RuntimeError{DiagCode::R0701, "too many provenance nodes in one run",
                          Json{{"limit", "provenance_nodes"}, {"value", prov_.nodeCount()}}});
        return std::nullopt;
    }
    if (!chargeTables()) return std::nullopt;
    return out;
}

std::optional<TagSetId> Heap::internTags(std::span<const std::string> names) {
    std::optional<TagSetId> out = tags_.intern(names);
    if (!out) {
        fail(RuntimeError{DiagCode::R0701,
                          fmt::format("too many distinct tag sets: a run may create at most {}", tags_.maxSets()),
                          Json{{"limit", "tag_sets"}, {"value", tags_.maxSets()}}});
        return std::nullopt;
    }
    if (!chargeTables()) return std::nullopt;
    return out;
}

std::optional<TagSetId> Heap::internTags(std::initializer_list<std::string_view> names) {
    std::vector<std::string> owned(names.begin(), names.end());
    return internTags(std::span<const std::string>(owned));
}

std::optional<TagSetId> Heap::subtractTags(TagSetId set, TagSetId removed) {
    std::optional<TagSetId> out = tags_.subtract(set, removed);
    if (!out) {
        fail(RuntimeError{DiagCode::R0701,
                          fmt::format("too many distinct tag sets: a run may create at most {}", tags_.maxSets()),
                          Json{{"limit", "tag_sets"}, {"value", tags_.maxSets()}}});
        return std::nullopt;
    }
    if (!chargeTables()) return std::nullopt;
    return out;
}

std::optional<ProvId> Heap::provLeaf(uint64_t seq) {
    std::optional<ProvId> out = prov_.leaf(seq);
    if (!out) {
        fail(RuntimeError{DiagCode::R0701, "too many provenance nodes in one run",
                          Json{{"limit", "provenance_nodes"}, {"value", prov_.nodeCount()}}});
        return std::nullopt;
    }
    if (!chargeTables()) return std::nullopt;
    return out;
}

}  // namespace remit
