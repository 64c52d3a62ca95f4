// Interned tag sets for the VM's values (docs/architecture.md). Tags are host-defined names
// (`untrusted`, `private`, ... — any number of them); a value carries one small TagSetId naming
// the set of its tags. The VM unions tag sets on every operation, the broker asks `contains` for
// deny/approve tags and `subtract`s a capability's `clears`, and traces print `names`.
//
// Invariants:
// - Id 0 is the empty set; equal sets always have equal ids (sets are interned), so set equality
//   is id equality and `unite(a, a) == a`.
// - Ids are dense, below the table's `maxSets`. A Value packs the id into 24 bits, so the Heap's
//   table uses kMaxTagSets; an operation that would need one more set fails (std::nullopt) instead
//   of wrapping, and the Heap turns that into R0701.
// - Union results are memoised per unordered pair, so a hot loop combining the same two sets
//   costs one hash lookup.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace remit {

using TagSetId = uint32_t;
constexpr TagSetId kNoTags = 0;
// A Value stores its TagSetId in 24 bits (runtime/value.h): at most 2^24 distinct sets per run.
constexpr uint32_t kMaxTagSets = uint32_t(1) << 24;

class TagTable {
public:
    explicit TagTable(uint32_t maxSets = kMaxTagSets);
    TagTable(const TagTable&) = delete;
    TagTable& operator=(const TagTable&) = delete;

    // The set of `names` (any order; repeats ignored). nullopt when the table is full.
    std::optional<TagSetId> intern(std::span<const std::string> names);
    std::optional<TagSetId> intern(std::initializer_list<std::string_view> names);
    std::optional<TagSetId> single(std::string_view name) { return intern({name}); }

    // a ∪ b. nullopt only when a new set is needed and the table is full.
    std::optional<TagSetId> unite(TagSetId a, TagSetId b) {
        if (a == b || b == kNoTags) return a;
        if (a == kNoTags) return b;
        return uniteSlow(a, b);
    }
    // set − removed (the broker's `clears`). Not memoised: it runs once per capability result.
    std::optional<TagSetId> subtract(TagSetId set, TagSetId removed);

    bool contains(TagSetId set, std::string_view name) const;
    // Do the two sets share a tag? (deny and approve checks against a whole set at once)
    bool intersects(TagSetId a, TagSetId b) const;
    // The set's names in code-point order.
    std::vector<std::string> names(TagSetId set) const;

    size_t setCount() const { return sets_.size(); }  // including the empty set
    uint32_t maxSets() const { return maxSets_; }
    // An estimate of the memory the table holds, which the Heap charges to the run's budget.
    size_t bytesUsed() const { return bytesUsed_; }

private:
    struct VectorHash {
        size_t operator()(const std::vector<uint32_t>& v) const noexcept;
    };
    // Lets `contains` look a name up without building a std::string.
    struct NameHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
    };

    uint32_t maxSets_;
    size_t bytesUsed_ = 0;
    std::vector<std::string> tagNames_;                                            // name id -> name
    std::unordered_map<std::string, uint32_t, NameHash, std::equal_to<>> tagIds_;  // name -> name id
    std::vector<std::vector<uint32_t>> sets_;                                      // set id -> name ids, ascending
    std::unordered_map<std::vector<uint32_t>, TagSetId, VectorHash> setIds_;
    std::unordered_map<uint64_t, TagSetId> unions_;  // (min id << 32 | max id) -> union

    std::optional<TagSetId> uniteSlow(TagSetId a, TagSetId b);
    std::optional<TagSetId> internSorted(std::vector<uint32_t> members);
    uint32_t nameId(std::string_view name);
    std::optional<uint32_t> findNameId(std::string_view name) const;
};

}  // namespace remit
