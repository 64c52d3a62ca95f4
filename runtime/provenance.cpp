// ProvTable: the hash-consed provenance DAG (see provenance.h for the invariants).
#include "runtime/provenance.h"

#include <algorithm>
#include <cassert>
#include <unordered_set>

namespace remit {

namespace {

constexpr size_t kMapEntryBytes = 48;  // node, bucket and key of one hash-map entry, roughly

}  // namespace

ProvTable::ProvTable(uint64_t maxNodes) : maxNodes_(std::max<uint64_t>(maxNodes, 1)) {
    nodes_.emplace_back();  // id 0: the empty provenance
    bytesUsed_ = sizeof(*this) + sizeof(Node);
}

std::optional<ProvId> ProvTable::leaf(uint64_t seq) {
    if (auto it = leaves_.find(seq); it != leaves_.end()) return it->second;
    if (nodes_.size() >= maxNodes_) return std::nullopt;
    auto id = static_cast<ProvId>(nodes_.size());
    nodes_.push_back(Node{seq, kNoProv, kNoProv});
    leaves_.emplace(seq, id);
    bytesUsed_ += sizeof(Node) + kMapEntryBytes;
    return id;
}

// Is `inner` one of `outer`'s direct children? A one-level check that keeps the common pattern
// `acc = acc ∪ x` (repeated with the same x) from growing the DAG, at O(1) cost.
bool ProvTable::covers(ProvId outer, ProvId inner) const {
    const Node& n = nodes_[outer];
    return n.left != kNoProv && (n.left == inner || n.right == inner);
}

std::optional<ProvId> ProvTable::uniteSlow(ProvId a, ProvId b) {
    assert(a < nodes_.size() && b < nodes_.size());
    if (covers(a, b)) return a;
    if (covers(b, a)) return b;
    uint64_t key = a < b ? (uint64_t(a) << 32 | b) : (uint64_t(b) << 32 | a);
    if (auto it = unions_.find(key); it != unions_.end()) return it->second;
    if (nodes_.size() >= maxNodes_) return std::nullopt;
    auto id = static_cast<ProvId>(nodes_.size());
    nodes_.push_back(Node{0, std::min(a, b), std::max(a, b)});
    unions_.emplace(key, id);
    bytesUsed_ += sizeof(Node) + kMapEntryBytes;
    return id;
}

std::vector<uint64_t> ProvTable::flatten(ProvId id) const {
    assert(id < nodes_.size());
    std::vector<uint64_t> out;
    if (id == kNoProv) return out;
    // Iterative walk with a visited set: the DAG may be deep (a loop's history) and shared, and
    // must be walked in time linear in its size, not in the size of the tree it unfolds to.
    std::vector<ProvId> stack{id};
    std::unordered_set<ProvId> seen{id};
    while (!stack.empty()) {
        const Node& n = nodes_[stack.back()];
        stack.pop_back();
        if (n.left == kNoProv) {
            out.push_back(n.seq);
            continue;
        }
        for (ProvId child : {n.left, n.right})
            if (seen.insert(child).second) stack.push_back(child);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

}  // namespace remit
