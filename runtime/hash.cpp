// SHA-256 through OpenSSL's EVP interface (see hash.h for who uses it).
#include "runtime/hash.h"

#include <stdexcept>

#include <openssl/evp.h>

namespace remit {

std::string sha256Hex(std::string_view bytes) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    // EVP_Digest fails only when OpenSSL itself is broken (no SHA-256 provider); there is no
    // meaningful hash to return then, and an empty string would silently match other empties.
    if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) != 1)
        throw std::runtime_error("SHA-256 is unavailable in this OpenSSL build");
    static constexpr char kHexDigits[] = "0123456789abcdef";
    std::string hex;
    hex.reserve(length * 2);
    for (unsigned int i = 0; i < length; ++i) {
        hex += kHexDigits[digest[i] >> 4];
        hex += kHexDigits[digest[i] & 0x0F];
    }
    return hex;
}

}  // namespace remit
