// Signed .rbc artifacts (bytecode/signature.h); docs/bytecode.md "Signatures" is the reference.
//
// Ed25519 and the PEM key files are OpenSSL's, but libcrypto is loaded with dlopen when a command
// first signs or checks a signature (runtime/shared_library.h), not linked: linked, its tables were
// half of what a small run kept resident and its relocations a good part of every start of every
// tool (docs/performance.md, "Our own SHA-256, libcrypto on first use"). OpenSSL's headers give the
// types, constants and prototypes; every function is called through the pointers loaded below.
#include "bytecode/signature.h"

#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>

#include <string.h>  // explicit_bzero

#include <algorithm>
#include <array>
#include <filesystem>
#include <memory>
#include <system_error>

#include "bytecode/rbc.h"
#include "runtime/files.h"
#include "runtime/sha256.h"
#include "runtime/shared_library.h"

namespace remit {

namespace {

constexpr std::array<char, 8> kBlockMagic = {'\x89', 'R', 'S', 'G', '\r', '\n', '\x1a', '\n'};
constexpr size_t kAlgorithmOffset = 8;
constexpr size_t kPublicKeyOffset = 12;
constexpr size_t kSignatureOffset = kPublicKeyOffset + kEd25519PublicKeyBytes;
static_assert(kSignatureOffset + kEd25519SignatureBytes == kRbcSignatureBlockSize);
constexpr size_t kMaxKeyFileBytes = 64 * 1024;

// libcrypto's functions, loaded once for the process and never unloaded. The types come from the
// prototypes in OpenSSL's headers, so a mismatch is a compile error, not a crash.
struct CryptoApi : SharedLibraryApi {
    decltype(&EVP_PKEY_new_raw_public_key) newRawPublicKey = nullptr;
    decltype(&EVP_PKEY_new_raw_private_key) newRawPrivateKey = nullptr;
    decltype(&EVP_PKEY_get_raw_public_key) getRawPublicKey = nullptr;
    decltype(&EVP_PKEY_get_raw_private_key) getRawPrivateKey = nullptr;
    decltype(&EVP_PKEY_get_id) getId = nullptr;
    decltype(&EVP_PKEY_free) pkeyFree = nullptr;
    decltype(&EVP_PKEY_CTX_new_id) pkeyCtxNewId = nullptr;
    decltype(&EVP_PKEY_CTX_free) pkeyCtxFree = nullptr;
    decltype(&EVP_PKEY_keygen_init) keygenInit = nullptr;
    decltype(&EVP_PKEY_keygen) keygen = nullptr;
    decltype(&EVP_MD_CTX_new) mdCtxNew = nullptr;
    decltype(&EVP_MD_CTX_free) mdCtxFree = nullptr;
    decltype(&EVP_DigestSignInit) digestSignInit = nullptr;
    decltype(&EVP_DigestSign) digestSign = nullptr;
    decltype(&EVP_DigestVerifyInit) digestVerifyInit = nullptr;
    decltype(&EVP_DigestVerify) digestVerify = nullptr;
    decltype(&OBJ_nid2sn) nid2sn = nullptr;
    decltype(&BIO_new) bioNew = nullptr;
    decltype(&BIO_s_mem) bioSMem = nullptr;
    decltype(&BIO_new_mem_buf) bioNewMemBuf = nullptr;
    decltype(&BIO_ctrl) bioCtrl = nullptr;
    decltype(&BIO_free) bioFree = nullptr;
    decltype(&PEM_read_bio_PrivateKey) readPrivateKey = nullptr;
    decltype(&PEM_read_bio_PUBKEY) readPublicKey = nullptr;
    decltype(&PEM_write_bio_PrivateKey) writePrivateKey = nullptr;
    decltype(&PEM_write_bio_PUBKEY) writePublicKey = nullptr;
};

// OpenSSL 3's soname first; an unversioned libcrypto.so of an older major version lacks some of the
// functions below (EVP_PKEY_get_id is new in 3.0) and is refused.
bool bindCrypto(const SharedLibrary& lib, CryptoApi& api) {
    return lib.bind("EVP_PKEY_new_raw_public_key", api.newRawPublicKey) &&
           lib.bind("EVP_PKEY_new_raw_private_key", api.newRawPrivateKey) &&
           lib.bind("EVP_PKEY_get_raw_public_key", api.getRawPublicKey) &&
           lib.bind("EVP_PKEY_get_raw_private_key", api.getRawPrivateKey) &&
           lib.bind("EVP_PKEY_get_id", api.getId) && lib.bind("EVP_PKEY_free", api.pkeyFree) &&
           lib.bind("EVP_PKEY_CTX_new_id", api.pkeyCtxNewId) && lib.bind("EVP_PKEY_CTX_free", api.pkeyCtxFree) &&
           lib.bind("EVP_PKEY_keygen_init", api.keygenInit) && lib.bind("EVP_PKEY_keygen", api.keygen) &&
           lib.bind("EVP_MD_CTX_new", api.mdCtxNew) && lib.bind("EVP_MD_CTX_free", api.mdCtxFree) &&
           lib.bind("EVP_DigestSignInit", api.digestSignInit) && lib.bind("EVP_DigestSign", api.digestSign) &&
           lib.bind("EVP_DigestVerifyInit", api.digestVerifyInit) &&
           lib.bind("EVP_DigestVerify", api.digestVerify) && lib.bind("OBJ_nid2sn", api.nid2sn) &&
           lib.bind("BIO_new", api.bioNew) && lib.bind("BIO_s_mem", api.bioSMem) &&
           lib.bind("BIO_new_mem_buf", api.bioNewMemBuf) && lib.bind("BIO_ctrl", api.bioCtrl) &&
           lib.bind("BIO_free", api.bioFree) && lib.bind("PEM_read_bio_PrivateKey", api.readPrivateKey) &&
           lib.bind("PEM_read_bio_PUBKEY", api.readPublicKey) &&
           lib.bind("PEM_write_bio_PrivateKey", api.writePrivateKey) &&
           lib.bind("PEM_write_bio_PUBKEY", api.writePublicKey);
}

// Its users check loaded() (or signatureSupportError()) before calling any of its functions.
const CryptoApi& crypto() {
    static const CryptoApi api = loadSharedLibraryApi<CryptoApi>(
        "OpenSSL's libcrypto", {"libcrypto.so.3", "libcrypto.so"}, "libssl3", bindCrypto);  // thread-safe, once
    return api;
}

struct PkeyFree {
    void operator()(EVP_PKEY* p) const { crypto().pkeyFree(p); }
};
struct MdCtxFree {
    void operator()(EVP_MD_CTX* p) const { crypto().mdCtxFree(p); }
};
struct BioFree {
    void operator()(BIO* p) const { crypto().bioFree(p); }
};
struct PkeyCtxFree {
    void operator()(EVP_PKEY_CTX* p) const { crypto().pkeyCtxFree(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;
using Bio = std::unique_ptr<BIO, BioFree>;
using PkeyCtx = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree>;

// Wipes a secret so the compiler cannot drop the stores as dead (OpenSSL's OPENSSL_cleanse did this).
void wipeSecret(void* data, size_t size) { explicit_bzero(data, size); }

uint32_t readU32(std::string_view bytes, size_t offset) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v |= uint32_t(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
    return v;
}

void putU32(std::string& bytes, size_t offset, uint32_t v) {
    for (size_t i = 0; i < 4; ++i) bytes[offset + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// What is signed: the context, then the SHA-256 of the body (one pass over a file of any size,
// and a fixed-size message for Ed25519, which otherwise needs the whole message in one buffer).
std::string signedMessage(std::string_view body) {
    Sha256::Digest digest = sha256(body);
    std::string message(kRbcSignatureContext);
    message.append(reinterpret_cast<const char*>(digest.data()), digest.size());
    return message;
}

// Never let OpenSSL prompt on the terminal for a passphrase: an encrypted key is an error.
int refusePassphrase(char*, int, int, void*) { return -1; }

std::string rawPublicKey(EVP_PKEY* key) {
    std::string raw(kEd25519PublicKeyBytes, '\0');
    size_t length = raw.size();
    if (crypto().getRawPublicKey(key, reinterpret_cast<unsigned char*>(raw.data()), &length) != 1 ||
        length != kEd25519PublicKeyBytes)
        return {};
    return raw;
}

std::string pemOf(EVP_PKEY* key, bool privatePart) {
    Bio bio(crypto().bioNew(crypto().bioSMem()));
    if (!bio) return {};
    int ok = privatePart ? crypto().writePrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr)
                         : crypto().writePublicKey(bio.get(), key);
    if (ok != 1) return {};
    char* data = nullptr;
    long length = crypto().bioCtrl(bio.get(), BIO_CTRL_INFO, 0, &data);  // BIO_get_mem_data
    std::string text(data, static_cast<size_t>(length));
    if (privatePart) wipeSecret(data, static_cast<size_t>(length));
    return text;
}

// Reads a small PEM file for a key; false with `error` naming the file.
bool readKeyFile(const std::string& path, std::string& text, std::string& error) {
    if (auto problem = readRegularFile(path, kMaxKeyFileBytes, text)) {
        error = problem->message;
        return false;
    }
    if (text.size() > kMaxKeyFileBytes) {
        error = tooLargeMessage(path, kMaxKeyFileBytes, "a key file");
        return false;
    }
    return true;
}

}  // namespace

std::string signerName(std::string_view publicKey) {
    std::string out = "ed25519:";
    for (unsigned char c : publicKey) out += fmt::format("{:02x}", c);
    return out;
}

std::string splitSignedRbc(std::string_view bytes, RbcParts& parts) {
    parts.body = bytes;
    parts.signature.reset();
    // Too short to have flags, or not a .rbc at all: loadRbc says which.
    if (bytes.size() < kRbcFlagsOffset + 4 || bytes.substr(0, kRbcMagic.size()) != kRbcMagic) return {};
    if ((readU32(bytes, kRbcFlagsOffset) & kRbcFlagSigned) == 0) return {};
    if (bytes.size() < kRbcHeaderSize + kRbcSignatureBlockSize)
        return fmt::format(
            "file is truncated: {} bytes, shorter than a signed file's header and {}-byte signature block",
            bytes.size(), kRbcSignatureBlockSize);
    size_t start = bytes.size() - kRbcSignatureBlockSize;
    std::string_view block = bytes.substr(start);
    if (!std::equal(kBlockMagic.begin(), kBlockMagic.end(), block.begin()))
        return fmt::format(
            "the header says the file is signed, but its last {} bytes (from byte {}) are not a "
            "signature block (wrong magic bytes)",
            kRbcSignatureBlockSize, start);
    if (uint32_t algorithm = readU32(block, kAlgorithmOffset); algorithm != kRbcSignatureEd25519)
        return fmt::format("signature algorithm {} is unknown (this build knows {}, Ed25519) (at byte {})", algorithm,
                           kRbcSignatureEd25519, start + kAlgorithmOffset);
    parts.body = bytes.substr(0, start);
    parts.signature = RbcSignature{std::string(block.substr(kPublicKeyOffset, kEd25519PublicKeyBytes)),
                                   std::string(block.substr(kSignatureOffset, kEd25519SignatureBytes))};
    return {};
}

std::string signatureSupportError() { return crypto().error; }

bool signatureMatches(std::string_view body, const RbcSignature& signature) {
    if (!crypto().loaded()) return false;
    if (signature.publicKey.size() != kEd25519PublicKeyBytes || signature.signature.size() != kEd25519SignatureBytes)
        return false;
    Pkey key(crypto().newRawPublicKey(EVP_PKEY_ED25519, nullptr,
                                         reinterpret_cast<const unsigned char*>(signature.publicKey.data()),
                                         signature.publicKey.size()));
    MdCtx ctx(crypto().mdCtxNew());
    if (!key || !ctx || crypto().digestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) return false;
    std::string message = signedMessage(body);
    return crypto().digestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.signature.data()),
                            signature.signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                            message.size()) == 1;
}

SigningKey::~SigningKey() { wipeSecret(seed_.data(), seed_.size()); }

bool SigningKey::load(const std::string& path, std::string& error) {
    if (!crypto().loaded()) {
        error = fmt::format("cannot read the signing key {}: {}", path, crypto().error);
        return false;
    }
    std::string text;
    if (!readKeyFile(path, text, error)) return false;
    // Wipe the file's text however this returns: it is the secret.
    struct Wipe {
        std::string& s;
        ~Wipe() { wipeSecret(s.data(), s.size()); }
    } wipe{text};
    if (text.find("ENCRYPTED") != std::string::npos) {
        error = fmt::format("{} is an encrypted private key; remitc reads unencrypted PEM keys only", path);
        return false;
    }
    if (text.find("PUBLIC KEY-----") != std::string::npos && text.find("PRIVATE KEY-----") == std::string::npos) {
        error = fmt::format(
            "{} holds a public key; signing needs the private key (the file `remitc keygen` or "
            "`openssl genpkey -algorithm ed25519` wrote)",
            path);
        return false;
    }
    Bio bio(crypto().bioNewMemBuf(text.data(), static_cast<int>(text.size())));
    Pkey key(bio ? crypto().readPrivateKey(bio.get(), nullptr, refusePassphrase, nullptr) : nullptr);
    if (!key) {
        error = fmt::format("{} is not a PEM private key", path);
        return false;
    }
    if (crypto().getId(key.get()) != EVP_PKEY_ED25519) {
        error = fmt::format("{} is a {} key; artifacts are signed with Ed25519 keys", path,
                            crypto().nid2sn(crypto().getId(key.get())));
        return false;
    }
    std::string seed(32, '\0');
    size_t length = seed.size();
    if (crypto().getRawPrivateKey(key.get(), reinterpret_cast<unsigned char*>(seed.data()), &length) != 1 ||
        length != seed.size() || (publicKey_ = rawPublicKey(key.get())).empty()) {
        wipeSecret(seed.data(), seed.size());
        error = fmt::format("{}: OpenSSL could not read the Ed25519 key", path);
        return false;
    }
    wipeSecret(seed_.data(), seed_.size());
    seed_ = std::move(seed);
    return true;
}

bool SigningKey::generate(std::string& error) {
    if (!crypto().loaded()) {
        error = "cannot generate a key: " + crypto().error;
        return false;
    }
    EVP_PKEY* raw = nullptr;
    PkeyCtx ctx(crypto().pkeyCtxNewId(EVP_PKEY_ED25519, nullptr));
    if (!ctx || crypto().keygenInit(ctx.get()) != 1 || crypto().keygen(ctx.get(), &raw) != 1) {
        error = "OpenSSL could not generate an Ed25519 key (no entropy?)";
        return false;
    }
    Pkey key(raw);
    std::string seed(32, '\0');
    size_t length = seed.size();
    if (crypto().getRawPrivateKey(key.get(), reinterpret_cast<unsigned char*>(seed.data()), &length) != 1 ||
        (publicKey_ = rawPublicKey(key.get())).empty()) {
        error = "OpenSSL could not export the generated key";
        return false;
    }
    seed_ = std::move(seed);
    return true;
}

std::string SigningKey::privatePem() const {
    if (!crypto().loaded()) return {};
    Pkey key(crypto().newRawPrivateKey(EVP_PKEY_ED25519, nullptr,
                                          reinterpret_cast<const unsigned char*>(seed_.data()), seed_.size()));
    return key ? pemOf(key.get(), true) : std::string();
}

std::string SigningKey::publicPem() const {
    if (!crypto().loaded()) return {};
    Pkey key(crypto().newRawPublicKey(EVP_PKEY_ED25519, nullptr,
                                         reinterpret_cast<const unsigned char*>(publicKey_.data()), publicKey_.size()));
    return key ? pemOf(key.get(), false) : std::string();
}

std::string SigningKey::sign(std::string_view file) const {
    RbcParts parts;
    if (!crypto().loaded() || seed_.size() != 32 || file.size() < kRbcHeaderSize || !splitSignedRbc(file, parts).empty() || parts.signature)
        return {};
    std::string out(file);
    putU32(out, kRbcFlagsOffset, readU32(out, kRbcFlagsOffset) | kRbcFlagSigned);
    Pkey key(crypto().newRawPrivateKey(EVP_PKEY_ED25519, nullptr,
                                          reinterpret_cast<const unsigned char*>(seed_.data()), seed_.size()));
    MdCtx ctx(crypto().mdCtxNew());
    if (!key || !ctx || crypto().digestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) return {};
    std::string message = signedMessage(out);
    std::string signature(kEd25519SignatureBytes, '\0');
    size_t length = signature.size();
    if (crypto().digestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &length,
                       reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1 ||
        length != kEd25519SignatureBytes)
        return {};
    std::string block(kBlockMagic.begin(), kBlockMagic.end());
    block.resize(kRbcSignatureBlockSize, '\0');
    putU32(block, kAlgorithmOffset, kRbcSignatureEd25519);
    std::copy(publicKey_.begin(), publicKey_.end(), block.begin() + kPublicKeyOffset);
    std::copy(signature.begin(), signature.end(), block.begin() + kSignatureOffset);
    return out + block;
}

const TrustedKey* TrustStore::find(std::string_view publicKey) const {
    for (const TrustedKey& k : keys)
        if (k.publicKey == publicKey) return &k;
    return nullptr;
}

bool TrustStore::load(const std::string& directory, std::string& error) {
    namespace fs = std::filesystem;
    dir = directory;
    keys.clear();
    std::error_code ec;
    if (!fs::is_directory(directory, ec)) {
        error = fs::exists(directory, ec) ? fmt::format("trust directory {} is not a directory", directory)
                                          : fmt::format("no such trust directory: {}", directory);
        return false;
    }
    std::vector<fs::path> files;
    for (fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec))
        if (it->path().extension() == ".pem") files.push_back(it->path());
    if (ec) {
        error = fmt::format("cannot read trust directory {}: {}", directory, ec.message());
        return false;
    }
    std::sort(files.begin(), files.end());  // names in a stable order, for messages
    if (!files.empty() && !crypto().loaded()) {
        error = fmt::format("cannot read the keys in trust directory {}: {}", directory, crypto().error);
        return false;
    }
    for (const fs::path& file : files) {
        std::string text;
        if (!readKeyFile(file.string(), text, error)) return false;
        if (text.find("PRIVATE KEY-----") != std::string::npos) {
            wipeSecret(text.data(), text.size());
            error = fmt::format(
                "{} in trust directory {} holds a private key; a trust directory holds public keys "
                "only (write one with `openssl pkey -in KEY.pem -pubout`)",
                file.filename().string(), directory);
            return false;
        }
        Bio bio(crypto().bioNewMemBuf(text.data(), static_cast<int>(text.size())));
        Pkey key(bio ? crypto().readPublicKey(bio.get(), nullptr, refusePassphrase, nullptr) : nullptr);
        if (!key || crypto().getId(key.get()) != EVP_PKEY_ED25519) {
            error = fmt::format("{} in trust directory {} is not an Ed25519 public key in PEM form",
                                file.filename().string(), directory);
            return false;
        }
        std::string name = file.filename().string();
        name.erase(name.size() - (name.ends_with(".pub.pem") ? 8 : 4));
        keys.push_back(TrustedKey{name, rawPublicKey(key.get())});
    }
    if (keys.empty()) {
        error = fmt::format("trust directory {} holds no .pem public keys, so it would trust nothing", directory);
        return false;
    }
    return true;
}

TrustVerdict checkTrusted(std::string_view bytes, const TrustStore& trust) {
    TrustVerdict verdict;
    RbcParts parts;
    if (std::string problem = splitSignedRbc(bytes, parts); !problem.empty()) {
        verdict.error = "its signature block is malformed: " + problem;
        verdict.hint = "rebuild and sign it again with `remitc build PROG.rmt --sign KEY.pem`";
        return verdict;
    }
    if (!parts.signature) {
        verdict.error =
            fmt::format("it is not signed, and this host runs only artifacts signed by a key in {}", trust.dir);
        verdict.hint = "sign it where it is built: `remitc build PROG.rmt --sign KEY.pem`";
        return verdict;
    }
    const TrustedKey* key = trust.find(parts.signature->publicKey);
    if (!key) {
        verdict.error = fmt::format("it is signed by {}, which is not one of the {} key(s) trusted in {}",
                                    signerName(parts.signature->publicKey), trust.keys.size(), trust.dir);
        verdict.hint = fmt::format("if you trust its builder, add their public key to {} as NAME.pub.pem", trust.dir);
        return verdict;
    }
    if (std::string unsupported = signatureSupportError(); !unsupported.empty()) {
        verdict.error = fmt::format("its signature by '{}' cannot be checked: {}", key->name, unsupported);
        verdict.hint = "signatures are checked with OpenSSL 3's libcrypto.so.3, from the libssl3 package";
        return verdict;
    }
    if (!signatureMatches(parts.body, *parts.signature)) {
        verdict.error = fmt::format(
            "its signature by '{}' does not match its content: the file was changed after "
            "it was signed",
            key->name);
        verdict.hint = "get the artifact again from its builder, or rebuild and sign it";
        return verdict;
    }
    verdict.trustedBy = key;
    return verdict;
}

}  // namespace remit
