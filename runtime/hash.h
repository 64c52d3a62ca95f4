// Cryptographic hashing shared by the compiler (program_hash, host_hash), the policy loader
// (policy_hash) and the broker (approval digests, idempotency keys). Every hash Remit shows a user
// or writes to a trace is bare lowercase hex SHA-256 (docs/compatibility.md "Hashes and canonical
// JSON"), computed by runtime/sha256.h (FIPS 180-4), so the digests match the prototype's hashlib
// ones byte for byte.
// (Internal, never-shown hashing uses XXH3 instead and does not live here.)
#pragma once

#include <string>
#include <string_view>

namespace remit {

// SHA-256 of `bytes` as 64 lowercase hex digits, no prefix.
std::string sha256Hex(std::string_view bytes);
// SHA-256 of `first` followed by `second` (hashed in turn, never copied into one string), as its
// first `digits` hex digits (at most 64): the trace's hash chain and the idempotency keys (32).
std::string sha256Hex(std::string_view first, std::string_view second, size_t digits = 64);

// `bytes` bytes from the kernel's random generator (getrandom(2)) as lowercase hex (tokens, session
// roots). Throws std::runtime_error when the system has no entropy to give: a guessable token would
// be worse.
std::string randomHex(size_t bytes);

}  // namespace remit
