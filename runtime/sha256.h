// SHA-256 (FIPS 180-4), our own, so the tools need no cryptography library for the hashes they
// compute on every run (runtime/hash.h says who). Two implementations of the compression
// function, chosen once per process: the x86-64 SHA extensions (SHA-NI) where the CPU has them,
// else portable C++ (compiled a second time for BMI2, used where the CPU has that). All give the
// same bytes; tests/unit/test_sha256.cpp checks each against
// FIPS 180-4's examples and against OpenSSL.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace remit {

class Sha256 {
public:
    static constexpr size_t kDigestBytes = 32;
    using Digest = std::array<unsigned char, kDigestBytes>;

    // Which compression function: `best` is SHA-NI when the CPU has it (checked once, with
    // cpuid), else the portable code built for BMI2 when the CPU has that, else the portable code
    // as is. Tests and benchmarks force the others; one the CPU lacks falls back to the next in
    // that order (see shaNiAvailable, bmi2Available).
    enum class Engine { best, portable, portableBmi2, shaNi };

    explicit Sha256(Engine engine = Engine::best);
    void update(std::string_view bytes);
    // The digest of everything updated so far. The object is spent afterwards.
    Digest finish();

    // True when this CPU (as cpuid reports it; valgrind's does not) has SHA-NI, SSSE3 and SSE4.1.
    static bool shaNiAvailable();
    // True when this CPU has BMI2 (for the portableBmi2 engine).
    static bool bmi2Available();

private:
    using Blocks = void (*)(uint32_t (&state)[8], const unsigned char* data, size_t blocks);

    Blocks blocks_;
    uint32_t state_[8];
    uint64_t length_ = 0;  // bytes updated so far
    unsigned char buffer_[64];
    size_t buffered_ = 0;
};

// SHA-256 of `first` followed by `second` (no copy of the two made).
Sha256::Digest sha256(std::string_view first, std::string_view second = {});

}  // namespace remit
