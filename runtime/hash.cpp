// SHA-256 hex digests with our own SHA-256 (runtime/sha256.h), and random bytes from the kernel
// (see hash.h for who uses them). Neither needs a cryptography library: linking OpenSSL for them
// cost every start of every tool its relocations and resident tables (docs/performance.md, "Our
// own SHA-256, libcrypto on first use").
#include "runtime/hash.h"

#include "runtime/sha256.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace remit {

namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

}  // namespace

std::string sha256Hex(std::string_view first, std::string_view second, size_t digits) {
    Sha256::Digest digest = sha256(first, second);
    char hex[Sha256::kDigestBytes * 2];
    for (size_t i = 0; i < digest.size(); ++i) {
        hex[2 * i] = kHexDigits[digest[i] >> 4];
        hex[2 * i + 1] = kHexDigits[digest[i] & 0x0F];
    }
    return std::string(hex, std::min(digits, sizeof hex));
}

std::string sha256Hex(std::string_view bytes) { return sha256Hex(bytes, {}, Sha256::kDigestBytes * 2); }

std::string randomHex(size_t bytes) {
    std::string random(bytes, '\0');
    // getrandom(2) from the urandom source, blocking only until the kernel's pool is first seeded
    // (a guessable token would be worse than a wait). A signal can interrupt it (EINTR) and a
    // request over 32 MiB returns short, so it is called until every byte is filled.
    for (size_t filled = 0; filled < bytes;) {
        ssize_t got = ::getrandom(random.data() + filled, bytes - filled, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            throw std::runtime_error(std::string("no random bytes: getrandom failed: ") + std::strerror(errno));
        }
        filled += static_cast<size_t>(got);
    }
    std::string out(2 * bytes, '\0');
    for (size_t i = 0; i < bytes; ++i) {
        auto b = static_cast<unsigned char>(random[i]);
        out[2 * i] = kHexDigits[b >> 4];
        out[2 * i + 1] = kHexDigits[b & 15];
    }
    return out;
}

}  // namespace remit
