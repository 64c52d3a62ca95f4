// See test_blocks.h.
#include "session/test_blocks.h"

#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "broker/broker.h"
#include "broker/fixture_adapter.h"
#include "runtime/diagnostics.h"
#include "runtime/policy.h"
#include "session/run_lifecycle.h"
#include "vm/run.h"

namespace remit {

namespace fs = std::filesystem;

namespace {

// An expectation is `file:line:col: message`; a runtime error is rendered as `run` renders it,
// without the source excerpt (one line).
std::string failureText(const std::string& file, const RunFailure& f) {
    if (f.expectationFailed) return fmt::format("{}:{}:{}: {}", file, f.span.line, f.span.col, f.error.message);
    return renderText(makeDiagnostic(f.error.code, f.error.message, file, f.span), nullptr);
}

}  // namespace

size_t countTests(const ast::Program* program) {
    if (!program) return 0;
    size_t n = 0;
    for (const ast::DeclPtr& d : program->decls)
        if (d->kind == ast::DeclKind::Test) ++n;
    return n;
}

std::optional<std::string> runTestBlock(const std::shared_ptr<const LoadedProgram>& program, const TestCase& test,
                                        const std::string& file, const HostModel& host) {
    const Policy policy = Policy::allowAllPolicy();
    const Module& module = program->module();
    std::unique_ptr<FixtureAdapter> adapter;
    if (test.fixtures) {
        std::string path = (fs::path(file).parent_path() / *test.fixtures).string();
        std::string where = fmt::format("{}:{}:{}", file, test.span.line, test.span.col);
        std::error_code ec;
        if (!fs::exists(path, ec)) return fmt::format("{}: fixtures file {} does not exist", where, path);
        std::string error, hint;
        adapter = FixtureAdapter::load(path, error, hint);
        if (adapter && !adapter->checkAgainst(host, error, hint)) adapter.reset();
        if (!adapter) return fmt::format("{}: {}", where, error);
    } else {
        adapter = FixtureAdapter::empty();
    }

    Run run(program, VmLimits{});
    // No trace; without approve_all every approval is denied: R0302.
    BrokerOptions options = brokerOptionsFor(module, host, policy, "test", false);
    options.adapterKind = adapter->kind();
    options.approveAll = adapter->approveAll();
    Broker broker(options, run);
    run.start(test.function, {});
    RunStatus status = driveWith(run, broker, adapter.get());
    if (status == RunStatus::Completed) return std::nullopt;
    if (status == RunStatus::Failed) return failureText(file, run.failure());
    return fmt::format("{}:{}:{}: the test stopped before it completed", file, test.span.line, test.span.col);
}

}  // namespace remit
