// Our SHA-256 (runtime/sha256.h) against OpenSSL's, on 64 B (a trace chain link), 1 KiB (a record)
// and 1 MiB (a large program's hash): docs/performance.md "Our own SHA-256". BM_Sha256/portable,
// portable_bmi2 and sha_ni force an engine (skipped on a CPU without its instructions);
// BM_Sha256OpenSSL is OpenSSL's SHA256_Init/Update/Final, which the tools called before (its
// one-shot SHA256() goes through the EVP provider lookup on every call, about 0.3 µs more), with
// SHA-NI where the CPU has it. To compare with OpenSSL's code
// for CPUs without SHA-NI, run with OPENSSL_ia32cap=':~0x20000000' (clears the SHA bit OpenSSL
// reads from cpuid leaf 7).
#define OPENSSL_SUPPRESS_DEPRECATED
#include <benchmark/benchmark.h>
#include <openssl/sha.h>

#include <string>

#include "runtime/sha256.h"

namespace {

std::string input(size_t size) {
    std::string bytes(size, '\0');
    for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(i * 131 + 7);
    return bytes;
}

void BM_Sha256(benchmark::State& state, remit::Sha256::Engine engine) {
    if ((engine == remit::Sha256::Engine::shaNi && !remit::Sha256::shaNiAvailable()) ||
        (engine == remit::Sha256::Engine::portableBmi2 && !remit::Sha256::bmi2Available())) {
        state.SkipWithError("this CPU lacks the instructions");
        return;
    }
    std::string bytes = input(static_cast<size_t>(state.range(0)));
    for (auto _ : state) {
        remit::Sha256 hash(engine);
        hash.update(bytes);
        benchmark::DoNotOptimize(hash.finish());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_Sha256OpenSSL(benchmark::State& state) {
    std::string bytes = input(static_cast<size_t>(state.range(0)));
    unsigned char digest[SHA256_DIGEST_LENGTH];
    for (auto _ : state) {
        SHA256_CTX context;
        SHA256_Init(&context);
        SHA256_Update(&context, bytes.data(), bytes.size());
        SHA256_Final(digest, &context);
        benchmark::DoNotOptimize(digest);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

}  // namespace

BENCHMARK_CAPTURE(BM_Sha256, portable, remit::Sha256::Engine::portable)->Arg(64)->Arg(1024)->Arg(1 << 20);
BENCHMARK_CAPTURE(BM_Sha256, portable_bmi2, remit::Sha256::Engine::portableBmi2)->Arg(64)->Arg(1024)->Arg(1 << 20);
BENCHMARK_CAPTURE(BM_Sha256, sha_ni, remit::Sha256::Engine::shaNi)->Arg(64)->Arg(1024)->Arg(1 << 20);
BENCHMARK(BM_Sha256OpenSSL)->Arg(64)->Arg(1024)->Arg(1 << 20);

BENCHMARK_MAIN();
