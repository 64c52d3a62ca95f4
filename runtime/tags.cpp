// TagTable: interning and memoised union of tag sets (see tags.h for the invariants).
#include "runtime/tags.h"

#include <algorithm>
#include <cassert>

namespace remit {

namespace {

// Rough per-entry costs of the hash maps (node, bucket, key), charged so that a run creating
// millions of distinct sets or unions pays for them out of its memory budget.
constexpr size_t kMapEntryBytes = 48;

}  // namespace

size_t TagTable::VectorHash::operator()(const std::vector<uint32_t>& v) const noexcept {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ v.size();
    for (uint32_t x : v) {
        h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    }
    return static_cast<size_t>(h);
}

TagTable::TagTable(uint32_t maxSets) : maxSets_(std::max<uint32_t>(maxSets, 1)) {
    sets_.emplace_back();  // id 0: the empty set
    setIds_.emplace(std::vector<uint32_t>{}, kNoTags);
    bytesUsed_ = sizeof(*this) + kMapEntryBytes;
}

uint32_t TagTable::nameId(std::string_view name) {
    if (auto found = findNameId(name)) return *found;
    auto id = static_cast<uint32_t>(tagNames_.size());
    tagNames_.emplace_back(name);
    tagIds_.emplace(std::string(name), id);
    bytesUsed_ += 2 * (sizeof(std::string) + name.size()) + kMapEntryBytes;
    return id;
}

std::optional<uint32_t> TagTable::findNameId(std::string_view name) const {
    auto it = tagIds_.find(name);
    if (it == tagIds_.end()) return std::nullopt;
    return it->second;
}

std::optional<TagSetId> TagTable::internSorted(std::vector<uint32_t> members) {
    if (auto it = setIds_.find(members); it != setIds_.end()) return it->second;
    if (sets_.size() >= maxSets_) return std::nullopt;
    auto id = static_cast<TagSetId>(sets_.size());
    bytesUsed_ += 2 * (sizeof(std::vector<uint32_t>) + members.size() * sizeof(uint32_t)) + kMapEntryBytes;
    setIds_.emplace(members, id);
    sets_.push_back(std::move(members));
    return id;
}

std::optional<TagSetId> TagTable::intern(std::span<const std::string> names) {
    std::vector<uint32_t> members;
    members.reserve(names.size());
    for (const std::string& name : names) members.push_back(nameId(name));
    std::sort(members.begin(), members.end());
    members.erase(std::unique(members.begin(), members.end()), members.end());
    return internSorted(std::move(members));
}

std::optional<TagSetId> TagTable::intern(std::initializer_list<std::string_view> names) {
    std::vector<std::string> owned(names.begin(), names.end());
    return intern(std::span<const std::string>(owned));
}

std::optional<TagSetId> TagTable::uniteSlow(TagSetId a, TagSetId b) {
    assert(a < sets_.size() && b < sets_.size());
    uint64_t key = a < b ? (uint64_t(a) << 32 | b) : (uint64_t(b) << 32 | a);
    if (auto it = unions_.find(key); it != unions_.end()) return it->second;
    const std::vector<uint32_t>& x = sets_[a];
    const std::vector<uint32_t>& y = sets_[b];
    std::vector<uint32_t> merged;
    merged.reserve(x.size() + y.size());
    std::set_union(x.begin(), x.end(), y.begin(), y.end(), std::back_inserter(merged));
    std::optional<TagSetId> id = internSorted(std::move(merged));
    if (!id) return std::nullopt;
    unions_.emplace(key, *id);
    bytesUsed_ += kMapEntryBytes;
    return id;
}

std::optional<TagSetId> TagTable::subtract(TagSetId set, TagSetId removed) {
    assert(set < sets_.size() && removed < sets_.size());
    if (set == kNoTags || removed == kNoTags) return set;
    if (set == removed) return kNoTags;
    const std::vector<uint32_t>& x = sets_[set];
    const std::vector<uint32_t>& y = sets_[removed];
    std::vector<uint32_t> rest;
    std::set_difference(x.begin(), x.end(), y.begin(), y.end(), std::back_inserter(rest));
    if (rest.size() == x.size()) return set;
    return internSorted(std::move(rest));
}

bool TagTable::contains(TagSetId set, std::string_view name) const {
    assert(set < sets_.size());
    if (set == kNoTags) return false;
    std::optional<uint32_t> id = findNameId(name);
    if (!id) return false;
    const std::vector<uint32_t>& members = sets_[set];
    return std::binary_search(members.begin(), members.end(), *id);
}

bool TagTable::intersects(TagSetId a, TagSetId b) const {
    assert(a < sets_.size() && b < sets_.size());
    if (a == kNoTags || b == kNoTags) return false;
    if (a == b) return true;
    const std::vector<uint32_t>& x = sets_[a];
    const std::vector<uint32_t>& y = sets_[b];
    auto i = x.begin();
    auto j = y.begin();
    while (i != x.end() && j != y.end()) {
        if (*i == *j) return true;
        if (*i < *j)
            ++i;
        else
            ++j;
    }
    return false;
}

std::vector<std::string> TagTable::names(TagSetId set) const {
    assert(set < sets_.size());
    std::vector<std::string> out;
    out.reserve(sets_[set].size());
    for (uint32_t id : sets_[set]) out.push_back(tagNames_[id]);
    std::sort(out.begin(), out.end());  // std::string's order is byte order, i.e. code-point order
    return out;
}

}  // namespace remit
