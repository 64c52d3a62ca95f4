// The per-run heap of the VM (docs/language.md, decision 46, "Memory"): it allocates and frees the
// heap objects behind Str, List and Record values, accounts their LIVE bytes against the run's
// memory budget (`max_memory`, R0701), and owns the run's tag-set and provenance tables. The VM
// creates one Heap per run; the broker, value⇄JSON (runtime/value_json.h) and the operations
// (runtime/ops.h) build values through it.
//
// Errors never throw on the hot path. A fallible call returns std::nullopt (or false) and leaves
// the reason in `error()`: R0701 when the budget or a table limit is exceeded, R0101 for the
// evaluation errors of runtime/ops.h. Only the first error is kept — a run stops at its first
// runtime error — and the caller turns it into the run's failure.
//
// Invariants:
// - liveBytes() == bytes charged for live objects + what the tag and provenance tables grew by
//   (they live as long as the run; their fixed part is not charged, so a fresh heap, or one whose
//   untagged values are all gone, has liveBytes() == 0) + charge() − credit(). A charge is checked against the budget
//   BEFORE the memory is allocated — for new objects and for the growth of strings and lists — so the budget bounds the
//   memory live at any moment. (Table entries are charged right after they are created, so the tables may overshoot the
//   budget by one entry, a few dozen bytes.)
// - Dropping the last reference frees an object and credits exactly the bytes charged for it;
//   freeing is iterative, so a deeply nested value is freed without deep recursion.
// - Every Value allocated here must be destroyed before the Heap (asserted in debug builds).
// - The budget is capped at kMaxMemoryBudget, which keeps reference counts within 32 bits.
// - What is charged is what the allocator holds: an object's size, its buffer's capacity, and
//   kAllocationOverhead for each block. A buffer that grows is charged in full before it is
//   allocated, while the old one is still charged, so growth never holds memory the budget does
//   not cover (docs/language.md, decision 46, states the bound).
// - Work: every operation whose cost grows with its data (copying, scanning, building text)
//   reports it to work(), which a running VM turns into steps and uses to read its clock, so no
//   operation on large values escapes the step and time limits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/diagnostics.h"
#include "runtime/provenance.h"
#include "runtime/tags.h"
#include "runtime/value.h"

namespace remit {

constexpr size_t kDefaultMemoryBudget = size_t(256) << 20;  // 256 MiB (docs/policy.md "[limits]")
constexpr size_t kMaxMemoryBudget = size_t(32) << 30;       // 32 GiB: see HeapObject::refCount
// What malloc adds to each block (its header and rounding on glibc, 64-bit): charged per block so
// that many small objects cannot hold much more memory than the budget says.
constexpr size_t kAllocationOverhead = 16;
// Work is reported in bytes moved or scanned (a Value copied or compared counts as sizeof(Value)
// bytes); this many bytes are one step.
constexpr uint64_t kWorkBytesPerStep = 16;
// Work is handed to the meter in batches of this many bytes: often enough to read the clock every
// few microseconds of copying, rarely enough to cost nothing.
constexpr uint64_t kWorkBatchBytes = uint64_t(64) << 10;

// Who pays for work(): the running VM (vm/vm.cpp), which charges the steps and checks its step,
// time and abort limits. Returns false after recording the reason with heap.fail().
class WorkMeter {
public:
    virtual bool spendSteps(uint64_t steps) = 0;

protected:
    ~WorkMeter() = default;
};

class Heap;

// Memory an operation holds outside heap objects while it works (a copy of a string, a side
// table), charged for as long as it lives: reserve() raises the charge, the destructor gives it
// back.
class ScratchCharge {
public:
    explicit ScratchCharge(Heap& heap) : heap_(heap) {}
    ~ScratchCharge();
    ScratchCharge(const ScratchCharge&) = delete;
    ScratchCharge& operator=(const ScratchCharge&) = delete;
    // False (R0701 in the heap) when `bytes` in all do not fit the budget.
    [[nodiscard]] bool reserve(size_t bytes);

private:
    Heap& heap_;
    size_t bytes_ = 0;
};

class Heap {
public:
    // `budgetBytes` is clamped to kMaxMemoryBudget. The table limits exist for tests; the VM uses
    // the defaults, which are what a Value can represent.
    explicit Heap(size_t budgetBytes = kDefaultMemoryBudget, uint32_t maxTagSets = kMaxTagSets,
                  uint64_t maxProvNodes = kMaxProvNodes);
    ~Heap();
    Heap(const Heap&) = delete;
    Heap& operator=(const Heap&) = delete;

    // ---- Building values. Each returns std::nullopt only when error() is set.

    std::optional<Value> makeStr(std::string_view bytes, TagSetId tags = kNoTags, ProvId prov = kNoProv);
    // An empty list with room for `capacity` items, to be filled with appendInPlace.
    std::optional<Value> newList(size_t capacity = 0, TagSetId tags = kNoTags, ProvId prov = kNoProv);
    std::optional<Value> makeList(std::span<const Value> items, TagSetId tags = kNoTags, ProvId prov = kNoProv);
    // The interned shape for these field names, in this order (they must be distinct). Never
    // fails, and is not charged: shapes come from the program's literals and types, a bounded set.
    const RecordShape* recordShape(std::span<const std::string> names);
    const RecordShape* recordShape(std::initializer_list<std::string_view> names);
    // A record of `shape` with values[i] in field i (values.size() == shape->names.size()).
    std::optional<Value> makeRecord(const RecordShape* shape, std::span<const Value> values, TagSetId tags = kNoTags,
                                    ProvId prov = kNoProv);

    // ---- Growing in place (`xs = xs + [x]` and `s = s + t` are amortised O(1)).
    // Each mutates the target's object when the target holds its only reference, and otherwise
    // replaces the target with a fresh copy, so other holders never see a change. Capacity at
    // least doubles when it must grow. On failure the target is unchanged.

    // list = list + [item]. The list keeps its own top-level labels ([item] has none).
    [[nodiscard]] bool appendInPlace(Value& list, const Value& item);
    // target = target + other, for Str + Str or List + List; top-level labels are united.
    [[nodiscard]] bool concatInPlace(Value& target, const Value& other);
    // str = str + text, where text is untagged (a literal, or already-converted output).
    [[nodiscard]] bool appendTextInPlace(Value& str, std::string_view text);

    // ---- Tags and provenance. nullopt means a table is full or the budget is exceeded (R0701).

    std::optional<TagSetId> uniteTags(TagSetId a, TagSetId b) {
        if (a == b || b == kNoTags) return a;
        if (a == kNoTags) return b;
        return uniteTagsSlow(a, b);
    }
    std::optional<ProvId> uniteProv(ProvId a, ProvId b) {
        if (a == b || b == kNoProv) return a;
        if (a == kNoProv) return b;
        return uniteProvSlow(a, b);
    }
    // A value's own labels united with its contents' (O(1): containers cache the latter).
    std::optional<TagSetId> deepTags(const Value& v) { return uniteTags(v.tags(), contentTags(v)); }
    std::optional<ProvId> deepProv(const Value& v) { return uniteProv(v.prov(), contentProv(v)); }
    std::optional<TagSetId> internTags(std::span<const std::string> names);
    std::optional<TagSetId> internTags(std::initializer_list<std::string_view> names);
    std::optional<TagSetId> subtractTags(TagSetId set, TagSetId removed);
    std::optional<ProvId> provLeaf(uint64_t seq);
    // Read-only queries (contains, intersects, names, flatten) go straight to the tables.
    const TagTable& tagTable() const { return tags_; }
    const ProvTable& provTable() const { return prov_; }

    // ---- Work (see the invariants above). False, with error() set, when the meter stopped the
    // run: the caller abandons the operation and fails. Without a meter (no VM running: inputs,
    // host results, tests of the runtime) work is free.

    [[nodiscard]] bool work(uint64_t bytes) {
        workBytes_ += bytes;
        return workBytes_ < kWorkBatchBytes || spendWork();
    }
    // Installs (or, with nullptr, removes) the meter work() reports to.
    void setWorkMeter(WorkMeter* meter) { meter_ = meter; }

    // ---- Accounting.

    // Charges `bytes` against the budget (R0701 when it does not fit), for memory the VM holds on
    // behalf of the program outside heap objects; credit() gives it back.
    [[nodiscard]] bool charge(size_t bytes);
    void credit(size_t bytes);
    size_t liveBytes() const { return live_; }
    size_t peakBytes() const { return peak_; }
    size_t budget() const { return budget_; }
    size_t available() const { return live_ >= budget_ ? 0 : budget_ - live_; }
    size_t liveObjects() const { return liveObjects_; }

    // ---- Errors.

    bool failed() const { return error_.has_value(); }
    const std::optional<RuntimeError>& error() const { return error_; }
    // Moves the error out and clears it.
    RuntimeError takeError();
    // Records `error` unless one is already recorded (the first error wins).
    void fail(RuntimeError error);
    // fail() with R0701 for the memory budget: `needed` more bytes did not fit.
    void failMemory(size_t needed);
    // fail() with R0701 when the system refused an allocation of `bytes` that the budget allowed
    // (details name "system_memory", not "max_memory").
    void failAllocation(size_t bytes);

private:
    friend void destroyHeapObject(HeapObject* object);

    size_t budget_;
    size_t live_ = 0;
    size_t peak_ = 0;
    size_t liveObjects_ = 0;
    size_t tableBytes_ = 0;  // the tables' bytesUsed() already charged
    std::optional<RuntimeError> error_;
    TagTable tags_;
    ProvTable prov_;
    std::deque<RecordShape> shapes_;
    std::unordered_map<std::string, const RecordShape*> shapeIds_;  // names joined by '\0'
    std::vector<HeapObject*> dying_;                                // objects whose count reached zero, not yet freed
    bool freeing_ = false;
    WorkMeter* meter_ = nullptr;
    uint64_t workBytes_ = 0;  // reported but not yet handed to the meter

    bool spendWork();

    std::optional<TagSetId> uniteTagsSlow(TagSetId a, TagSetId b);
    std::optional<ProvId> uniteProvSlow(ProvId a, ProvId b);
    bool chargeTables();
    void destroy(HeapObject* object);
    template <class Object>
    Object* allocate(ValueKind kind, size_t charged);
    bool growList(ListObject& list, size_t needed);
    bool growStr(StrObject& str, size_t needed);
    template <class Object, class Buffer, class Traits>
    bool growBuffer(Object& object, Buffer& buffer, size_t needed);
};

}  // namespace remit
