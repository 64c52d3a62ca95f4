// Signed .rbc artifacts (docs/bytecode.md "Signatures"): a host that runs programs it did not
// build decides whose builds it runs. `remitc build --sign KEY.pem` appends a signature block to
// the file; `remitvm run --trust KEYS_DIR` (or a policy's [artifacts] trust) refuses a file that is
// unsigned, signed by a key outside KEYS_DIR, or changed after signing — before any of it is parsed.
//
// A signed file is an ordinary .rbc whose header flag kRbcFlagSigned is set (the body), followed by
// a fixed 108-byte block: magic, algorithm (1 = Ed25519), the signer's 32-byte public key and the
// 64-byte signature. The signature is Ed25519 over kRbcSignatureContext followed by the SHA-256
// of the body: the body is every byte before the block, header and manifest included, so no byte
// of a signed file can change without the signature failing (the block's own bytes name the key,
// and a different key is a different signer). loadRbc verifies the block of every signed file it
// reads, trusted or not, so a signer shown by `remitc dis` or `manifest` is one that did sign it.
//
// The crypto is OpenSSL's EVP interface, from libcrypto loaded on first use (not linked: a run of an
// unsigned file never loads it); no OpenSSL type appears in this header. The body's SHA-256 is ours
// (runtime/sha256.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace remit {

constexpr uint32_t kRbcFlagSigned = 1;          // header flags bit 0: a signature block follows
constexpr size_t kRbcSignatureBlockSize = 108;  // magic 8, algorithm 4, public key 32, signature 64
constexpr uint32_t kRbcSignatureEd25519 = 1;
constexpr size_t kEd25519PublicKeyBytes = 32;
constexpr size_t kEd25519SignatureBytes = 64;
// Domain separation: a signature over an artifact can never be replayed as one over anything else.
inline constexpr std::string_view kRbcSignatureContext = "remit-rbc-signature-v1\n";

// The signature block of a signed file.
struct RbcSignature {
    std::string publicKey;  // kEd25519PublicKeyBytes raw bytes
    std::string signature;  // kEd25519SignatureBytes raw bytes
};

// How a signer is shown everywhere (dis, manifest, errors, the trace): "ed25519:" and the public
// key's 64 hex digits. The key itself, not a digest of it: it is short, and it is what a trust
// directory's .pem files hold, so `openssl pkey -pubin -in K.pem -text` shows the same bytes.
std::string signerName(std::string_view publicKey);

// A file split into its body and, when its header says it is signed, its signature block. Only the
// header's magic and flags are read here; the body is left to loadRbc.
struct RbcParts {
    std::string_view body;
    std::optional<RbcSignature> signature;
};
// Returns the empty string, or a one-line message when the header says signed but the block is
// missing or malformed (wrong magic, unknown algorithm).
std::string splitSignedRbc(std::string_view bytes, RbcParts& parts);

// Empty when signatures can be made and checked; otherwise why not, one line naming the package to
// install ("OpenSSL's libcrypto is not installed (…); install the libssl3 package"). The first
// call loads libcrypto.so.3 (once per process); every function below that needs it checks this
// first and reports it as its error, so a host without the library gets a message, never a crash.
std::string signatureSupportError();

// True when `signature` is a valid Ed25519 signature of `body` (as the header comment says) by
// the key it names. False when signatureSupportError() is not empty: callers check that first, so
// that a missing library is not reported as a changed file.
bool signatureMatches(std::string_view body, const RbcSignature& signature);

// An Ed25519 private key read from a PEM file. The raw seed is wiped when the key is destroyed.
class SigningKey {
public:
    SigningKey() = default;
    SigningKey(const SigningKey&) = delete;
    SigningKey& operator=(const SigningKey&) = delete;
    SigningKey(SigningKey&&) noexcept = default;  // the seed's buffer moves; nothing is left to wipe
    ~SigningKey();
    const std::string& publicKey() const { return publicKey_; }

    // Reads `path` (a PKCS#8 "PRIVATE KEY" PEM, as `openssl genpkey -algorithm ed25519` and
    // `remitc keygen` write). False with `error` set (naming the file, never its contents) when it
    // is missing, not PEM, encrypted, or not an Ed25519 key. Never prompts for a passphrase.
    bool load(const std::string& path, std::string& error);
    // A fresh key from OpenSSL's random generator (`remitc keygen`).
    bool generate(std::string& error);
    // The PEM texts of the private and the public key, for `remitc keygen`.
    std::string privatePem() const;
    std::string publicPem() const;

    // The signed file for an unsigned .rbc `file` (as writeRbc returns it): the flag set, then the
    // signature block. Empty when `file` is not an unsigned .rbc or OpenSSL fails.
    std::string sign(std::string_view file) const;

private:
    std::string seed_;  // the 32-byte private key
    std::string publicKey_;
};

// The keys a host trusts: every `*.pem` file directly in one directory, each an Ed25519 public key
// ("PUBLIC KEY" PEM, as `openssl pkey -pubout` and `remitc keygen` write). A key is named after
// its file ("alice.pub.pem" and "alice.pem" are both "alice").
struct TrustedKey {
    std::string name;
    std::string publicKey;  // raw bytes
};
struct TrustStore {
    std::string dir;  // as given, for messages
    std::vector<TrustedKey> keys;

    const TrustedKey* find(std::string_view publicKey) const;
    // Reads `dir`. False with `error` when it is not a readable directory, holds no .pem file, or
    // a .pem file in it is not an Ed25519 public key (a private key there is refused outright: a
    // trust directory is meant to be copied to hosts).
    bool load(const std::string& dir, std::string& error);
};

// The host's rule for a file it is about to load: signed, by a trusted key, and unchanged since.
// Checked on the raw bytes before anything else of the file is read. `trustedBy` names the key.
struct TrustVerdict {
    const TrustedKey* trustedBy = nullptr;  // set when the file may be loaded
    std::string error;                      // otherwise: why not (one line, without the file's name)
    std::string hint;
};
TrustVerdict checkTrusted(std::string_view bytes, const TrustStore& trust);

}  // namespace remit
