// SHA-256 as FIPS 180-4 specifies it (section numbers below are the standard's). See sha256.h.
#include "runtime/sha256.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define REMIT_SHA256_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace remit {

namespace {

// §4.2.2: the first 32 bits of the fractional parts of the cube roots of the first 64 primes.
alignas(64) constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

// §5.3.3: the initial hash value, the fractional parts of the square roots of the first 8 primes.
constexpr uint32_t kInitial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

inline uint32_t loadBigEndian(const unsigned char* p) {
    return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

// §6.2.2 for each 64-byte block, in plain C++. The message schedule is kept as a ring of its last
// 16 words (W[t] needs only W[t-2], W[t-7], W[t-15] and W[t-16]), and the eight working variables
// rotate by renaming them in the round macro rather than by moving values, so GCC keeps all of
// them in registers. Compiled twice (below): as is, and for BMI2, whose three-operand rotate
// (RORX) saves a copy per rotation — 19 % fewer instructions a block.
[[gnu::always_inline]] inline void compressPortable(uint32_t (&state)[8], const unsigned char* data, size_t blocks) {
    for (; blocks > 0; --blocks, data += 64) {
        uint32_t w[16];
        for (int i = 0; i < 16; ++i) w[i] = loadBigEndian(data + 4 * i);
        uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
        uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
        // One round t (§6.2.2 step 3) with the variables named as they stand at round t; `x`
        // is W[t]. Ch(e,f,g) = g ^ (e & (f ^ g)) and Maj(a,b,c) = (a & b) | (c & (a | b)) are
        // §4.1.2's functions with fewer operations.
#define REMIT_SHA256_ROUND(a, b, c, d, e, f, g, h, t, x)                                               \
    do {                                                                                                \
        uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + (g ^ (e & (f ^ g))) + kRound[t] + \
                      (x);                                                                              \
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) | (c & (a | b)));            \
        d += t1;                                                                                        \
        h = t1 + t2;                                                                                    \
    } while (0)
        // §6.2.2 step 1 for t >= 16, in place in the ring: W[t] = σ1(W[t-2]) + W[t-7] + σ0(W[t-15]) + W[t-16].
#define REMIT_SHA256_SCHEDULE(t)                                                                       \
    (w[(t) & 15] += (rotr(w[((t) - 2) & 15], 17) ^ rotr(w[((t) - 2) & 15], 19) ^ (w[((t) - 2) & 15] >> 10)) + \
                    w[((t) - 7) & 15] +                                                                  \
                    (rotr(w[((t) - 15) & 15], 7) ^ rotr(w[((t) - 15) & 15], 18) ^ (w[((t) - 15) & 15] >> 3)))
#define REMIT_SHA256_EIGHT(t, W)                          \
    REMIT_SHA256_ROUND(a, b, c, d, e, f, g, h, (t) + 0, W((t) + 0)); \
    REMIT_SHA256_ROUND(h, a, b, c, d, e, f, g, (t) + 1, W((t) + 1)); \
    REMIT_SHA256_ROUND(g, h, a, b, c, d, e, f, (t) + 2, W((t) + 2)); \
    REMIT_SHA256_ROUND(f, g, h, a, b, c, d, e, (t) + 3, W((t) + 3)); \
    REMIT_SHA256_ROUND(e, f, g, h, a, b, c, d, (t) + 4, W((t) + 4)); \
    REMIT_SHA256_ROUND(d, e, f, g, h, a, b, c, (t) + 5, W((t) + 5)); \
    REMIT_SHA256_ROUND(c, d, e, f, g, h, a, b, (t) + 6, W((t) + 6)); \
    REMIT_SHA256_ROUND(b, c, d, e, f, g, h, a, (t) + 7, W((t) + 7))
#define REMIT_SHA256_LOADED(t) w[(t)]
        REMIT_SHA256_EIGHT(0, REMIT_SHA256_LOADED);
        REMIT_SHA256_EIGHT(8, REMIT_SHA256_LOADED);
        REMIT_SHA256_EIGHT(16, REMIT_SHA256_SCHEDULE);
        REMIT_SHA256_EIGHT(24, REMIT_SHA256_SCHEDULE);
        REMIT_SHA256_EIGHT(32, REMIT_SHA256_SCHEDULE);
        REMIT_SHA256_EIGHT(40, REMIT_SHA256_SCHEDULE);
        REMIT_SHA256_EIGHT(48, REMIT_SHA256_SCHEDULE);
        REMIT_SHA256_EIGHT(56, REMIT_SHA256_SCHEDULE);
#undef REMIT_SHA256_LOADED
#undef REMIT_SHA256_EIGHT
#undef REMIT_SHA256_SCHEDULE
#undef REMIT_SHA256_ROUND
        state[0] += a;
        state[1] += b;
        state[2] += c;
        state[3] += d;
        state[4] += e;
        state[5] += f;
        state[6] += g;
        state[7] += h;
    }
}

void blocksPortable(uint32_t (&state)[8], const unsigned char* data, size_t blocks) {
    compressPortable(state, data, blocks);
}

#ifdef REMIT_SHA256_X86
__attribute__((target("bmi2"))) void blocksPortableBmi2(uint32_t (&state)[8], const unsigned char* data,
                                                         size_t blocks) {
    compressPortable(state, data, blocks);
}
#endif

#ifdef REMIT_SHA256_X86
// The same compression with the SHA extensions (Intel SDM: SHA256RNDS2, SHA256MSG1, SHA256MSG2).
// SHA256RNDS2 does two rounds on the working variables split as {A,B,E,F} and {C,D,G,H} (A in
// the highest dword), with W[t]+K[t] for the two rounds in the low two dwords of its third
// operand; two rounds later the old {A,B,E,F} is the new {C,D,G,H}, so the two registers swap
// roles every call. SHA256MSG1 and SHA256MSG2 compute four schedule words at a time: MSG1 gives
// W[t-16] + σ0(W[t-15]) for four t, the caller adds W[t-7], and MSG2 adds σ1(W[t-2]).
__attribute__((target("sha,sse4.1,ssse3"))) void blocksShaNi(uint32_t (&state)[8], const unsigned char* data,
                                                              size_t blocks) {
    // Reverses the bytes of each dword: the message words are big-endian (§3.1).
    const __m128i byteSwap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
    // state[] is a..h; from {a,b,c,d} and {e,f,g,h} (dword 0 first) make {f,e,b,a} and {h,g,d,c}.
    __m128i abcd = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&state[0]));
    __m128i efgh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&state[4]));
    __m128i badc = _mm_shuffle_epi32(abcd, 0xB1);
    __m128i hgfe = _mm_shuffle_epi32(efgh, 0x1B);
    __m128i abef = _mm_alignr_epi8(badc, hgfe, 8);  // dwords f, e, b, a
    __m128i cdgh = _mm_blend_epi16(hgfe, badc, 0xF0);  // dwords h, g, d, c
    for (; blocks > 0; --blocks, data += 64) {
        const __m128i abefSaved = abef, cdghSaved = cdgh;
        __m128i w[4];  // the schedule's last 16 words, four to a register, w[q & 3] = W[4q..4q+3]
#pragma GCC unroll 16
        for (int q = 0; q < 16; ++q) {
            __m128i& words = w[q & 3];
            if (q < 4) {
                words = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 16 * q)), byteSwap);
            } else {
                // W[4q..4q+3] from W[4q-16..4q-13] (words, about to be overwritten), W[4q-12..],
                // W[4q-7..4q-4] (the last three of w[q-2] and the first of w[q-1]) and W[4q-4..].
                __m128i partial = _mm_sha256msg1_epu32(words, w[(q + 1) & 3]);
                partial = _mm_add_epi32(partial, _mm_alignr_epi8(w[(q + 3) & 3], w[(q + 2) & 3], 4));
                words = _mm_sha256msg2_epu32(partial, w[(q + 3) & 3]);
            }
            __m128i wk = _mm_add_epi32(words, _mm_load_si128(reinterpret_cast<const __m128i*>(&kRound[4 * q])));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);          // rounds 4q, 4q+1: cdgh is now A..F
            wk = _mm_shuffle_epi32(wk, 0x0E);                      // the upper two W+K down
            abef = _mm_sha256rnds2_epu32(abef, cdgh, wk);          // rounds 4q+2, 4q+3
        }
        abef = _mm_add_epi32(abef, abefSaved);
        cdgh = _mm_add_epi32(cdgh, cdghSaved);
    }
    // Back to {a,b,c,d} and {e,f,g,h}.
    __m128i abfe = _mm_shuffle_epi32(abef, 0x1B);  // dwords a, b, e, f
    __m128i ghcd = _mm_shuffle_epi32(cdgh, 0xB1);  // dwords g, h, c, d
    _mm_storeu_si128(reinterpret_cast<__m128i*>(&state[0]), _mm_blend_epi16(abfe, ghcd, 0xF0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(&state[4]), _mm_alignr_epi8(ghcd, abfe, 8));
}
#endif

}  // namespace

#ifdef REMIT_SHA256_X86
namespace {

// The CPU's feature bits from cpuid (Intel SDM vol. 2, CPUID): leaf 1 ECX and leaf 7 subleaf 0 EBX.
// Read directly rather than with __builtin_cpu_supports, whose "sha" clang 14 does not know.
struct CpuFeatures {
    bool ssse3 = false, sse41 = false, sha = false, bmi2 = false;
};

CpuFeatures cpuFeatures() {
    static const CpuFeatures features = [] {
        CpuFeatures f;
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
            f.ssse3 = ecx & (1u << 9);
            f.sse41 = ecx & (1u << 19);
        }
        if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
            f.bmi2 = ebx & (1u << 8);
            f.sha = ebx & (1u << 29);
        }
        return f;
    }();
    return features;
}

}  // namespace
#endif

bool Sha256::bmi2Available() {
#ifdef REMIT_SHA256_X86
    return cpuFeatures().bmi2;
#else
    return false;
#endif
}

bool Sha256::shaNiAvailable() {
#ifdef REMIT_SHA256_X86
    CpuFeatures f = cpuFeatures();
    return f.sha && f.sse41 && f.ssse3;
#else
    return false;
#endif
}

Sha256::Sha256(Engine engine) : blocks_(blocksPortable) {
#ifdef REMIT_SHA256_X86
    if ((engine == Engine::best || engine == Engine::shaNi) && shaNiAvailable())
        blocks_ = blocksShaNi;
    else if (engine != Engine::portable && bmi2Available())
        blocks_ = blocksPortableBmi2;
#else
    (void)engine;
#endif
    std::memcpy(state_, kInitial, sizeof state_);
}

void Sha256::update(std::string_view bytes) {
    // An empty view may have a null data(), which memcpy must not be given even with a size of 0.
    if (bytes.empty()) return;
    auto data = reinterpret_cast<const unsigned char*>(bytes.data());
    size_t size = bytes.size();
    length_ += size;
    if (buffered_ > 0) {
        size_t take = std::min(size, sizeof buffer_ - buffered_);
        std::memcpy(buffer_ + buffered_, data, take);
        buffered_ += take;
        data += take;
        size -= take;
        if (buffered_ < sizeof buffer_) return;
        blocks_(state_, buffer_, 1);
        buffered_ = 0;
    }
    if (size >= 64) {
        blocks_(state_, data, size / 64);
        data += size & ~size_t(63);
        size &= 63;
    }
    if (size > 0) {
        std::memcpy(buffer_, data, size);
        buffered_ = size;
    }
}

Sha256::Digest Sha256::finish() {
    // §5.1.1: a 1 bit, zeros up to 56 bytes mod 64, then the length in bits as 64 bits big-endian.
    uint64_t bits = length_ * 8;
    buffer_[buffered_++] = 0x80;
    if (buffered_ > 56) {
        std::memset(buffer_ + buffered_, 0, sizeof buffer_ - buffered_);
        blocks_(state_, buffer_, 1);
        buffered_ = 0;
    }
    std::memset(buffer_ + buffered_, 0, 56 - buffered_);
    for (int i = 0; i < 8; ++i) buffer_[56 + i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
    blocks_(state_, buffer_, 1);
    Digest digest;
    for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 4; ++j) digest[4 * i + j] = static_cast<unsigned char>(state_[i] >> (24 - 8 * j));
    return digest;
}

Sha256::Digest sha256(std::string_view first, std::string_view second) {
    Sha256 hash;
    hash.update(first);
    if (!second.empty()) hash.update(second);
    return hash.finish();
}

}  // namespace remit
