// `remitvm test [PATH...] [--host H]` and `remit test`: runs the `test` blocks of .rmt files with the
// prototype's semantics (docs/testing.md). Each file is checked and compiled as `run` does
// (compiler/driver.h, session/pipeline.h); each test runs as session/test_blocks.h says. Output is
// the prototype's: the file, `  ok    NAME` or
// `  FAIL  NAME: file:line:col: message` per test, then `N passed, M failed`; exit 1 when any
// test failed, 2 on a usage error.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/terminal.h"
#include "compiler/driver.h"
#include "runtime/diagnostics.h"
#include "session/pipeline.h"
#include "session/test_blocks.h"

namespace remit::cli {

namespace {

namespace fs = std::filesystem;

struct Tally {
    size_t passed = 0, failed = 0;
};

// Checks, compiles and runs the tests of one file, printing its lines.
void testFile(std::string_view tool, const std::string& file, const std::optional<std::string>& hostPath,
              Tally& tally) {
    CheckOptions options;
    options.checkPolicy = false;  // tests run under an allow-all policy
    options.hostPath = hostPath;
    CheckOutcome outcome = checkProgramFile(file, options);
    if (outcome.ioError) {
        // The file was listed but cannot be read: it may hold tests, so it counts as one failure.
        fmt::print(stderr, "{}: error: {}\n", tool, outcome.ioError->message);
        ++tally.failed;
        return;
    }
    size_t tests = countTests(outcome.program.get());
    // The driver looks for the host only once the file parsed: no host path and no E0002 means
    // the parser stopped it, and its tests cannot be counted with certainty.
    bool parsed = outcome.hostPath.has_value();
    for (const Diagnostic& d : outcome.diags.items()) parsed = parsed || d.code == DiagCode::E0002;
    if (parsed && tests == 0) return;  // no test blocks: skipped silently
    if (!outcome.ok() || !outcome.checked) {
        // A file that does not check fails all its tests; one that does not parse fails at least
        // once, so a syntax error can never hide a test.
        printDiagnostics(outcome.diags, &outcome);
        fmt::print(stderr, "{} error(s) in {}\n", outcome.diags.errorCount(), file);
        tally.failed += parsed ? tests : std::max<size_t>(tests, 1);
        return;
    }
    int exit = kOk;
    std::shared_ptr<const LoadedProgram> program = compileChecked(outcome, exit);
    if (!program) {
        tally.failed += tests;
        return;
    }
    fmt::print("{}\n", file);
    for (const TestCase& test : program->module().tests) {
        std::optional<std::string> failure = runTestBlock(program, test, file, outcome.checked->host);
        if (failure) {
            ++tally.failed;
            fmt::print("  {}  {}: {}\n", paint(Stream::Out, TextStyle::Error, "FAIL"), test.name, *failure);
        } else {
            ++tally.passed;
            fmt::print("  {}    {}\n", paint(Stream::Out, TextStyle::Ok, "ok"), test.name);
        }
    }
}

}  // namespace

int testCommand(std::string_view tool, Args& args) {
    std::vector<std::string> paths = args.positional.empty() ? std::vector<std::string>{"."} : args.positional;
    for (const std::string& path : paths) {
        std::error_code ec;
        if (!fs::exists(path, ec)) {
            fmt::print(stderr, "{}: error: {}: no such file or directory\n", tool, path);
            return kUsage;
        }
        if (!fs::is_directory(path, ec) && path.ends_with(".rbc")) {
            fmt::print(stderr, "{}: error: {} is bytecode; test runs the test blocks of .rmt source files\n", tool,
                       path);
            return kUsage;
        }
    }
    std::optional<std::string> hostPath;
    if (const std::string* host = args.value("--host")) {
        std::error_code ec;
        if (!fs::is_regular_file(*host, ec)) {
            fmt::print(stderr, "{}: error: {}: no such file\n", tool, *host);
            return kUsage;
        }
        hostPath = *host;
    }
    std::vector<IoError> errors;
    std::vector<std::string> files = expandProgramPaths(paths, errors);
    if (!errors.empty()) {
        for (const IoError& e : errors) fmt::print(stderr, "{}: error: {}\n", tool, e.message);
        return kUsage;
    }
    Tally tally;
    for (const std::string& file : files) {
        testFile(tool, file, hostPath, tally);
        std::fflush(stdout);  // keep each file's lines ahead of the next file's diagnostics
    }
    fmt::print("{} passed, {} failed\n", tally.passed, tally.failed);
    return tally.failed ? kFailure : kOk;
}

}  // namespace remit::cli
