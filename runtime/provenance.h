// Provenance of the VM's values (spec §7: a result's provenance is its arguments' provenance plus
// the trace event that produced it). A value carries one ProvId naming a node of a hash-consed
// DAG: a leaf is one trace sequence number (`seq` of a call event), an inner node the union of two
// nodes. The VM unions ids on every operation; the broker `flatten`s the arguments' ids into the
// `derived_from` list of a trace event, and `remitvm trace --why` walks those back.
//
// Why a DAG and not sets: a union costs O(1) (one memoised node) however many calls a value
// derives from, and values that share history share nodes. Flattening is paid only when the
// broker records a call.
//
// Invariants:
// - Id 0 is the empty provenance; `unite(0, x) == x`, `unite(x, x) == x`.
// - Equal leaves and equal unions of the same unordered pair are one node (hash-consing), so
//   ids are stable and a loop uniting the same two ids creates nothing.
// - Node ids are dense and below `maxNodes` (a Value stores the id in 32 bits); an operation that
//   would exceed it fails (std::nullopt) rather than wrap, and the Heap turns that into R0701.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace remit {

using ProvId = uint32_t;
constexpr ProvId kNoProv = 0;
constexpr uint64_t kMaxProvNodes = uint64_t(1) << 32;

class ProvTable {
public:
    explicit ProvTable(uint64_t maxNodes = kMaxProvNodes);
    ProvTable(const ProvTable&) = delete;
    ProvTable& operator=(const ProvTable&) = delete;

    // The provenance {seq}. nullopt when the table is full.
    std::optional<ProvId> leaf(uint64_t seq);
    // a ∪ b. nullopt only when a new node is needed and the table is full.
    std::optional<ProvId> unite(ProvId a, ProvId b) {
        if (a == b || b == kNoProv) return a;
        if (a == kNoProv) return b;
        return uniteSlow(a, b);
    }
    // Every sequence number under `id`, ascending, without repeats.
    std::vector<uint64_t> flatten(ProvId id) const;

    size_t nodeCount() const { return nodes_.size(); }  // including the empty node
    // An estimate of the memory the table holds, which the Heap charges to the run's budget.
    size_t bytesUsed() const { return bytesUsed_; }

private:
    // A leaf has left == kNoProv and holds `seq`; a union has two non-empty children.
    struct Node {
        uint64_t seq = 0;
        ProvId left = kNoProv;
        ProvId right = kNoProv;
    };

    uint64_t maxNodes_;
    size_t bytesUsed_ = 0;
    std::vector<Node> nodes_;
    std::unordered_map<uint64_t, ProvId> leaves_;  // seq -> leaf
    std::unordered_map<uint64_t, ProvId> unions_;  // (min id << 32 | max id) -> union

    std::optional<ProvId> uniteSlow(ProvId a, ProvId b);
    bool covers(ProvId outer, ProvId inner) const;
};

}  // namespace remit
