// Signed .rbc artifacts (bytecode/signature.h, docs/bytecode.md "Signatures"): a signed file
// loads to the same module as its unsigned self; no single-byte change of a signed file gets past
// the trust check or the loader; a trust directory admits exactly its keys; and a signature
// vouches for nothing but the bytes — a forged module signed by a trusted key still meets the
// verifier.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "bytecode/rbc.h"
#include "bytecode/signature.h"
#include "bytecode/verifier.h"
#include "session/pipeline.h"

namespace {

using namespace remit;
namespace fs = std::filesystem;

constexpr std::string_view kHost = "capability mail.send(to: Str, body: Str)\n  cost 0.01\n";
constexpr std::string_view kProgram = R"(program signed_demo
uses mail.send

fn main(name: Str) -> Str {
  mail.send(to: "ops@example.com", body: "hello " + name)
  return "sent"
}
)";

// The program's unsigned .rbc, as `remitc build` writes it.
std::string unsignedFile() {
    CompileOutcome compiled = compileProgram(kProgram, "signed_demo.rmt", kHost, "host.rmti");
    REQUIRE(compiled.program);
    return writeRbc(compiled.program->module());
}

// A fresh directory under the system's temporary directory, removed at the end of the test.
struct TempDir {
    fs::path path;
    TempDir() {
        path = fs::temp_directory_path() / ("remit-signature-" + std::to_string(::getpid()) + "-" +
                                            std::to_string(reinterpret_cast<uintptr_t>(this)));
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    void write(const std::string& name, const std::string& text) const {
        std::ofstream(path / name, std::ios::binary) << text;
    }
};

SigningKey freshKey() {
    SigningKey key;
    std::string error;
    REQUIRE(key.generate(error));
    return key;
}

TrustStore trusting(const TempDir& dir, const SigningKey& key, const std::string& name) {
    dir.write(name + ".pub.pem", key.publicPem());
    TrustStore trust;
    std::string error;
    REQUIRE_MESSAGE(trust.load(dir.path.string(), error), error);
    return trust;
}

}  // namespace

TEST_CASE("signature: a signed file loads to the module of its unsigned self, signed by its key") {
    SigningKey key = freshKey();
    std::string plain = unsignedFile();
    std::string signedFile = key.sign(plain);
    REQUIRE(signedFile.size() == plain.size() + kRbcSignatureBlockSize);
    RbcLoadResult fromPlain = loadRbc(plain);
    RbcLoadResult fromSigned = loadRbc(signedFile);
    REQUIRE_MESSAGE(fromSigned.module, fromSigned.error);
    REQUIRE(fromPlain.module);
    CHECK_FALSE(fromPlain.signature);
    REQUIRE(fromSigned.signature);
    CHECK(fromSigned.signature->publicKey == key.publicKey());
    CHECK(signerName(key.publicKey()).size() == 8 + 64);
    // The module is the body's, and it re-encodes to the unsigned file: the signature is the file's.
    CHECK(writeRbc(*fromSigned.module) == plain);
    CHECK(fromSigned.module->programHash == fromPlain.module->programHash);
    // A signed file cannot be signed again (it would hide the first signer), nor can garbage.
    CHECK(key.sign(signedFile).empty());
    CHECK(key.sign("not a module").empty());
}

TEST_CASE("signature: every single-byte change of a signed file is refused, by the trust check and the loader") {
    TempDir dir;
    SigningKey key = freshKey();
    TrustStore trust = trusting(dir, key, "builder");
    std::string signedFile = key.sign(unsignedFile());
    REQUIRE(checkTrusted(signedFile, trust).trustedBy);
    // Every position is changed. The bytes read before the signature is checked — the header's
    // magic, version and flags, and the whole signature block — take every other value; the rest
    // reach the check only through SHA-256, so each of their 8 single-bit flips and the complement
    // stand for the other values (REMIT_SIGNATURE_EXHAUSTIVE=1 tries all 255 everywhere: ~400,000
    // changes, 90 s). Each change must be refused before parsing (checkTrusted), and by loadRbc alone.
    bool exhaustive = std::getenv("REMIT_SIGNATURE_EXHAUSTIVE") != nullptr;
    size_t blockStart = signedFile.size() - kRbcSignatureBlockSize;
    auto readBeforeTheCheck = [&](size_t i) { return i < kRbcFlagsOffset + 4 || i >= blockStart; };
    size_t refusedByTrust = 0, refusedByLoader = 0, changes = 0;
    std::string changed = signedFile;
    for (size_t i = 0; i < signedFile.size(); ++i) {
        for (int delta = 1; delta < 256; ++delta) {
            bool singleBitOrComplement = (delta & (delta - 1)) == 0 || delta == 0xff;
            if (!exhaustive && !readBeforeTheCheck(i) && !singleBitOrComplement) continue;
            changed[i] = static_cast<char>(static_cast<unsigned char>(signedFile[i]) ^ delta);
            ++changes;
            if (!checkTrusted(changed, trust).trustedBy) ++refusedByTrust;
            if (!loadRbc(changed).module) ++refusedByLoader;
        }
        changed[i] = signedFile[i];
    }
    CHECK(changes >= signedFile.size() * 9);
    CHECK(refusedByTrust == changes);
    CHECK(refusedByLoader == changes);
    // Cut or lengthened by a byte: refused too.
    CHECK_FALSE(checkTrusted(signedFile.substr(0, signedFile.size() - 1), trust).trustedBy);
    CHECK_FALSE(loadRbc(signedFile.substr(0, signedFile.size() - 1)).module);
    CHECK_FALSE(checkTrusted(signedFile + '\0', trust).trustedBy);
    CHECK_FALSE(loadRbc(signedFile + '\0').module);
}

TEST_CASE("signature: the trust check names what is wrong") {
    TempDir dir;
    SigningKey builder = freshKey();
    SigningKey stranger = freshKey();
    TrustStore trust = trusting(dir, builder, "builder");
    std::string plain = unsignedFile();

    TrustVerdict unsignedVerdict = checkTrusted(plain, trust);
    CHECK_FALSE(unsignedVerdict.trustedBy);
    CHECK(unsignedVerdict.error.find("not signed") != std::string::npos);

    TrustVerdict strangerVerdict = checkTrusted(stranger.sign(plain), trust);
    CHECK_FALSE(strangerVerdict.trustedBy);
    CHECK(strangerVerdict.error.find(signerName(stranger.publicKey())) != std::string::npos);
    CHECK(strangerVerdict.error.find("not one of the 1 key(s)") != std::string::npos);
    // The stranger's file is still a valid signed file: only this host does not trust it.
    CHECK(loadRbc(stranger.sign(plain)).module);

    TrustVerdict ok = checkTrusted(builder.sign(plain), trust);
    REQUIRE(ok.trustedBy);
    CHECK(ok.trustedBy->name == "builder");

    // Swapping in the stranger's key over the builder's signature: refused as a mismatch, or
    // (this host) as an unknown key — never admitted.
    std::string swapped = builder.sign(plain);
    std::copy(stranger.publicKey().begin(), stranger.publicKey().end(),
              swapped.end() - static_cast<ptrdiff_t>(kRbcSignatureBlockSize - 12));
    CHECK_FALSE(checkTrusted(swapped, trust).trustedBy);
    CHECK(loadRbc(swapped).error.find("does not match") != std::string::npos);

    // Stripping the signature (block cut off, flag cleared) leaves an unsigned file: refused.
    std::string stripped = builder.sign(plain).substr(0, plain.size());
    stripped[kRbcFlagsOffset] = 0;
    CHECK(stripped == plain);
    CHECK_FALSE(checkTrusted(stripped, trust).trustedBy);
}

TEST_CASE("signature: a forged module signed by a trusted key still meets the verifier") {
    TempDir dir;
    SigningKey key = freshKey();
    TrustStore trust = trusting(dir, key, "builder");
    CompileOutcome compiled = compileProgram(kProgram, "signed_demo.rmt", kHost, "host.rmti");
    REQUIRE(compiled.program);
    Module forged = compiled.program->module();
    // A register far outside main's frame: the kind of edit that would read out of bounds.
    Function& main = forged.functions[forged.entry];
    REQUIRE_FALSE(main.code.empty());
    main.code[0].a = static_cast<uint16_t>(main.numRegs + 100);
    sealProgramHash(forged);  // hash and checksum agree: only the verifier can tell
    REQUIRE_FALSE(verifyModule(forged).empty());
    std::string signedForgery = key.sign(writeRbc(forged));
    REQUIRE_FALSE(signedForgery.empty());
    TrustVerdict verdict = checkTrusted(signedForgery, trust);
    CHECK(verdict.trustedBy);  // the signature is genuine...
    RbcLoadResult loaded = loadRbc(signedForgery);
    CHECK_FALSE(loaded.module);  // ...and the module is still refused
    CHECK(loaded.error == verifyModule(forged));
}

TEST_CASE("signature: keys and trust directories are read as hostile files") {
    TempDir dir;
    SigningKey key = freshKey();
    std::string error;

    SUBCASE("a private key round-trips through PEM") {
        dir.write("k.pem", key.privatePem());
        SigningKey loaded;
        REQUIRE_MESSAGE(loaded.load((dir.path / "k.pem").string(), error), error);
        CHECK(loaded.publicKey() == key.publicKey());
        std::string plain = unsignedFile();
        CHECK(loaded.sign(plain) == key.sign(plain));  // Ed25519 is deterministic
    }
    SUBCASE("a public key is not a signing key") {
        dir.write("k.pub.pem", key.publicPem());
        SigningKey loaded;
        CHECK_FALSE(loaded.load((dir.path / "k.pub.pem").string(), error));
        CHECK(error.find("holds a public key") != std::string::npos);
    }
    SUBCASE("garbage, a missing file and an encrypted key are errors, never a prompt") {
        dir.write("junk.pem", "-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n");
        SigningKey loaded;
        CHECK_FALSE(loaded.load((dir.path / "junk.pem").string(), error));
        CHECK(error.find("not a PEM private key") != std::string::npos);
        CHECK_FALSE(loaded.load((dir.path / "missing.pem").string(), error));
        dir.write("enc.pem", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n");
        CHECK_FALSE(loaded.load((dir.path / "enc.pem").string(), error));
        CHECK(error.find("encrypted") != std::string::npos);
    }
    SUBCASE("a trust directory with a private key in it is refused") {
        dir.write("a.pub.pem", key.publicPem());
        dir.write("oops.pem", key.privatePem());
        TrustStore trust;
        CHECK_FALSE(trust.load(dir.path.string(), error));
        CHECK(error.find("oops.pem") != std::string::npos);
        CHECK(error.find("private key") != std::string::npos);
        CHECK(error.find("BEGIN") == std::string::npos);  // the key's text never reaches a message
    }
    SUBCASE("an empty or missing trust directory trusts nothing, and says so") {
        TrustStore trust;
        dir.write("README", "no keys here");
        CHECK_FALSE(trust.load(dir.path.string(), error));
        CHECK(error.find("holds no .pem public keys") != std::string::npos);
        CHECK_FALSE(trust.load((dir.path / "nowhere").string(), error));
        CHECK(error.find("no such trust directory") != std::string::npos);
    }
    SUBCASE("keys are named after their files") {
        SigningKey other = freshKey();
        dir.write("alice.pub.pem", key.publicPem());
        dir.write("bob.pem", other.publicPem());
        TrustStore trust;
        REQUIRE_MESSAGE(trust.load(dir.path.string(), error), error);
        REQUIRE(trust.keys.size() == 2);
        CHECK(trust.keys[0].name == "alice");
        CHECK(trust.keys[1].name == "bob");
        CHECK(trust.find(other.publicKey())->name == "bob");
    }
}
