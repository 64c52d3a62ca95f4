// Our SHA-256 (runtime/sha256.h), each compression function forced in turn: FIPS 180-4's
// examples and NIST's one-million-'a' message, then every length from 0 to 300 and random splits
// against OpenSSL (which this test binary still links; the tools no longer do).
#define OPENSSL_SUPPRESS_DEPRECATED
#include <doctest/doctest.h>
#include <openssl/sha.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "runtime/hash.h"
#include "runtime/sha256.h"

using namespace remit;

namespace {

std::string hex(const Sha256::Digest& digest) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    for (unsigned char b : digest) {
        out += kDigits[b >> 4];
        out += kDigits[b & 15];
    }
    return out;
}

std::string hashWith(Sha256::Engine engine, std::string_view first, std::string_view second = {}) {
    Sha256 hash(engine);
    hash.update(first);
    hash.update(second);
    return hex(hash.finish());
}

std::string openssl(std::string_view bytes) {
    Sha256::Digest digest;
    SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest.data());
    return hex(digest);
}

// The engines this CPU can run: portable always, the BMI2 build of it and SHA-NI where cpuid says
// so (valgrind's has no SHA-NI).
std::vector<Sha256::Engine> engines() {
    std::vector<Sha256::Engine> out{Sha256::Engine::portable};
    if (Sha256::bmi2Available()) out.push_back(Sha256::Engine::portableBmi2);
    if (Sha256::shaNiAvailable()) out.push_back(Sha256::Engine::shaNi);
    return out;
}

const char* name(Sha256::Engine engine) {
    switch (engine) {
        case Sha256::Engine::shaNi: return "sha-ni";
        case Sha256::Engine::portableBmi2: return "portable, bmi2";
        default: return "portable";
    }
}

}  // namespace

TEST_CASE("sha256: FIPS 180-4's examples and NIST's long message, with each engine") {
    if (!Sha256::shaNiAvailable()) MESSAGE("this CPU (or valgrind) has no SHA-NI: its engine is not tested");
    if (!Sha256::bmi2Available()) MESSAGE("this CPU has no BMI2: the portable engine's BMI2 build is not tested");
    for (Sha256::Engine engine : engines()) {
        CAPTURE(name(engine));
        CHECK(hashWith(engine, "") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        CHECK(hashWith(engine, "abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        CHECK(hashWith(engine, "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==  // 448 bits
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
        CHECK(hashWith(engine,
                       "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmn"
                       "opqrsmnopqrstnopqrstu") ==  // 896 bits
              "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
        CHECK(hashWith(engine, std::string(1'000'000, 'a')) ==
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
        // The same million fed in pieces that straddle the 64-byte blocks in every way.
        Sha256 pieces(engine);
        std::string a(1'000'000, 'a');
        for (size_t at = 0, step = 1; at < a.size(); at += step, step = step % 131 + 1)
            pieces.update(std::string_view(a).substr(at, step));
        CHECK(hex(pieces.finish()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    }
}

// Hashes `bytes` of `length` fresh random bytes with every engine, whole and split in two at
// `splits` random places, and requires OpenSSL's digest each time; returns that digest.
std::string checkAgainstOpenSSL(std::mt19937_64& random, size_t length, int splits) {
    std::string bytes(length, '\0');
    for (char& c : bytes) c = static_cast<char>(random());
    std::string expected = openssl(bytes);
    for (Sha256::Engine engine : engines()) {
        CAPTURE(name(engine));
        CAPTURE(length);
        REQUIRE(hashWith(engine, bytes) == expected);
        for (int i = 0; i < splits; ++i) {
            size_t split = random() % (length + 1);
            CAPTURE(split);
            REQUIRE(hashWith(engine, std::string_view(bytes).substr(0, split), std::string_view(bytes).substr(split)) ==
                    expected);
        }
    }
    // What the tools call (the best engine), through the hex API with its two parts and digit cut.
    size_t split = length / 3;
    CHECK(sha256Hex(std::string_view(bytes).substr(0, split), std::string_view(bytes).substr(split)) == expected);
    CHECK(sha256Hex(bytes, {}, 32) == expected.substr(0, 32));
    return expected;
}

TEST_CASE("sha256: every length 0..300 and random two-part splits agree with OpenSSL, with each engine") {
    std::mt19937_64 random(20261204);
    std::set<std::string> digests;
    for (size_t length = 0; length <= 300; ++length) digests.insert(checkAgainstOpenSSL(random, length, 4));
    CHECK(digests.size() == 301);  // the inputs (and so the comparisons) all differed
    // Longer inputs: many blocks at once after a partial one.
    for (size_t length : {1000u, 4095u, 4096u, 65537u, 1u << 20}) checkAgainstOpenSSL(random, length, 1);
}

TEST_CASE("random: randomHex gives the asked-for number of fresh hex bytes") {
    CHECK(randomHex(0).empty());
    std::string one = randomHex(32), two = randomHex(32);
    CHECK(one.size() == 64);
    CHECK(one.find_first_not_of("0123456789abcdef") == std::string::npos);
    CHECK(one != two);  // 2^-256 to fail by chance
    // More than getrandom gives in one call from the urandom source (33,554,431 bytes) would be a
    // short read; a megabyte is enough to cross page and buffer boundaries without being slow.
    std::string big = randomHex(1 << 20);
    CHECK(big.size() == 2u << 20);
    CHECK(big.find(std::string(64, '0')) == std::string::npos);
}
