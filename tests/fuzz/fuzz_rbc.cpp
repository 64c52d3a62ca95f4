// libFuzzer harness for the .rbc loader and verifier (bytecode/rbc.h, bytecode/verifier.h), the
// disassembler (bytecode/disasm.h) and the VM (vm/vm.cpp): the path every artifact takes, so it must
// survive any bytes without crashing, hanging, leaking, reading out of bounds or allocating
// without bound.
//
// The input is a .rbc file. It is loaded as it is, which almost always stops at the checksum; so
// it is also loaded with its checksum and program hash recomputed, which lets the fuzzer explore
// the section table, the parser and the verifier. When that copy loads, the harness checks two
// promises and traps if one breaks:
//   - a load gives exactly one of a module and a one-line error;
//   - the encoding is canonical: writeRbc of the loaded module gives back exactly the bytes loaded.
// It also disassembles the module (with and without source text), materialises its types, and
// runs it: main and every test function, under small limits, with every host call refused as a
// deny-all broker would (tests/fuzz/run_module.h). A module the verifier accepts must run safely.
//
// Seeds: tests/fuzz/corpus/rbc (written by tests/unit/test_rbc.cpp). Build and run:
// `scripts/fuzz rbc SECONDS`. Replay: build/fuzz/tests/fuzz/fuzz_rbc_replay FILE...; the
// regressions it found are tests/fuzz/regressions/rbc-*, replayed by tests/unit/test_rbc.cpp.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "vm/run.h"
#include "runtime/types.h"
#include "tests/fuzz/run_module.h"
#include "bytecode/disasm.h"
#include "bytecode/rbc.h"

namespace {

using namespace remit;

[[noreturn]] void broken(const char* what, const std::string& input) {
    std::fprintf(stderr, "\n*** fuzz_rbc: %s (input of %zu bytes)\n", what, input.size());
    __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string bytes(reinterpret_cast<const char*>(data), size);
    RbcLoadResult asIs = loadRbc(bytes);
    if ((asIs.module == nullptr) == asIs.error.empty()) broken("not exactly one of module and error", bytes);

    resealRbcWithProgramHash(bytes);
    RbcLoadResult result = loadRbc(bytes);
    if (!result.module) {
        if (result.error.empty() || result.error.find('\n') != std::string::npos)
            broken("the error is not one line", bytes);
        return 0;
    }
    const Module& module = *result.module;
    if (writeRbc(module) != bytes) broken("the loaded module does not re-encode to the same bytes", bytes);

    // The manifest's text stands in for the program's source, so the source-line path of the
    // listing runs on fuzzer-chosen lines and spans.
    volatile size_t sink = disassemble(module).size() + disassemble(module, module.manifestJson).size();
    TypeArena arena;
    sink = sink + materializeTypes(module, arena).size();
    (void)sink;

    auto program = std::make_shared<const LoadedProgram>(std::move(result.module));
    fuzz::runEveryEntry(program);
    return 0;
}
