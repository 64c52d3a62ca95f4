// A deterministic fake world for the differential test: what every capability and model "answers".
// Both sides consume it — the VM through an Adapter the real broker calls, the reference evaluator
// directly — so an answer depends only on what the call is: the world seed, the resource, the
// canonical arguments and the attempt number. An answer is usually a value of the declared return
// type (capabilities) or of the requested type (models), and sometimes
//   - an operational failure (CapabilityFailed or Timeout), so `retry` and `else` run;
//   - for models, an answer that does not fit the requested type (R0502), so retries run;
//   - for capabilities, rarely, a result that does not fit the declared type (R0501);
//   - a reported cost other than the declared one (0, or an overrun), so the budget moves.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/types.h"

namespace remit::difftest {

struct WorldReply {
    bool ok = true;
    nlohmann::json result;      // ok: the raw answer (validated by whoever receives it)
    std::string errorCode;      // not ok: "CapabilityFailed" or "Timeout"
    std::string message;
    std::optional<double> costUsd;  // the cost the adapter reports; none: the declared one
};

// `args` is the call's arguments as plain JSON ({param: value}); `type` the declared return type of
// a capability or the requested type of a model call.
WorldReply worldAnswer(uint64_t seed, std::string_view resource, bool isModel, const nlohmann::json& args,
                       uint32_t attempt, TypeRef type, double declaredCost);

// Strings the world answers with and the generator writes as literals, so comparisons, matches
// and enum tests sometimes succeed: ASCII words, edge cases for the Unicode builtins (ß, final
// sigma, non-ASCII spaces and digits), numbers as text for int()/float(), separators for split.
const std::vector<std::string>& stringPool();

// A stable 64-bit hash (FNV-1a then a finaliser) for seeding from text.
uint64_t stableHash(std::string_view text, uint64_t seed = 0);

// splitmix64: a tiny, fast, well-mixed generator whose output never depends on the platform.
class Rng {
public:
    explicit Rng(uint64_t seed) : state_(seed) {}
    uint64_t next() {
        uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    // Uniform in [0, n) (n > 0); the tiny modulo bias does not matter here.
    uint64_t below(uint64_t n) { return next() % n; }
    int64_t range(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo + 1))); }
    // True with probability percent/100.
    bool chance(unsigned percent) { return below(100) < percent; }
    template <class T>
    const T& pick(const std::vector<T>& items) { return items[below(items.size())]; }

private:
    uint64_t state_;
};

}  // namespace remit::difftest
