// SHA-256 through OpenSSL's low-level SHA256_* functions (see hash.h for who uses it).
//
// Why not EVP: the first EVP digest of a process fetches the algorithm through OpenSSL 3's provider
// machinery, which loads openssl.cnf, registers every legacy name and loads the error strings —
// about 5 million instructions, 80% of the whole start-up of `remitvm run` on a small .rbc
// (measured with callgrind; docs/performance.md "Start-up"). The low-level functions are the same
// implementation without the provider lookup. OpenSSL 3 marks them deprecated, not removed; should
// a later major version remove them, the EVP path below takes over.
#define OPENSSL_SUPPRESS_DEPRECATED
#include "runtime/hash.h"

#include <algorithm>
#include <stdexcept>

#include <openssl/opensslv.h>
#if OPENSSL_VERSION_MAJOR >= 4
#include <openssl/evp.h>
#else
#include <openssl/rand.h>
#include <openssl/sha.h>
#endif

namespace remit {

namespace {

constexpr size_t kDigestBytes = 32;

void sha256(std::string_view first, std::string_view second, unsigned char (&digest)[kDigestBytes]) {
#if OPENSSL_VERSION_MAJOR >= 4
    // Fails only when OpenSSL itself is broken (no SHA-256 provider); there is no meaningful hash
    // to return then, and an empty string would silently match other empties.
    unsigned int length = 0;
    EVP_MD_CTX* context = EVP_MD_CTX_new();
    bool ok = context && EVP_DigestInit_ex(context, EVP_sha256(), nullptr) == 1 &&
              EVP_DigestUpdate(context, first.data(), first.size()) == 1 &&
              EVP_DigestUpdate(context, second.data(), second.size()) == 1 &&
              EVP_DigestFinal_ex(context, digest, &length) == 1 && length == kDigestBytes;
    EVP_MD_CTX_free(context);
    if (!ok) throw std::runtime_error("SHA-256 is unavailable in this OpenSSL build");
#else
    SHA256_CTX context;
    SHA256_Init(&context);
    SHA256_Update(&context, first.data(), first.size());
    if (!second.empty()) SHA256_Update(&context, second.data(), second.size());
    SHA256_Final(digest, &context);
#endif
}

}  // namespace

std::string sha256Hex(std::string_view first, std::string_view second, size_t digits) {
    unsigned char digest[kDigestBytes];
    sha256(first, second, digest);
    static constexpr char kHexDigits[] = "0123456789abcdef";
    char hex[kDigestBytes * 2];
    for (size_t i = 0; i < kDigestBytes; ++i) {
        hex[2 * i] = kHexDigits[digest[i] >> 4];
        hex[2 * i + 1] = kHexDigits[digest[i] & 0x0F];
    }
    return std::string(hex, std::min(digits, sizeof hex));
}

std::string sha256Hex(std::string_view bytes) { return sha256Hex(bytes, {}, kDigestBytes * 2); }

std::string randomHex(size_t bytes) {
    std::string random(bytes, '\0');
    if (RAND_bytes(reinterpret_cast<unsigned char*>(random.data()), static_cast<int>(bytes)) != 1)
        throw std::runtime_error("no random bytes");
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (unsigned char b : random) {
        out += kHex[b >> 4];
        out += kHex[b & 15];
    }
    return out;
}

}  // namespace remit
