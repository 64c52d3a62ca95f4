// remitvm: the VM's command line (run, approve, resume, replay, trace, test, serve, mcp). Its
// commands arrive with the VM and broker stages; until then it only explains itself.
#include <cstdio>
#include <string>

#include <fmt/format.h>

namespace {

constexpr const char* kUsage =
    "usage: remitvm <command> [options]\n"
    "\n"
    "This build of remitvm has no commands yet: run, approve, resume, replay, trace, test, serve\n"
    "and mcp arrive with the bytecode VM and the broker. Use remitc to check and format programs.\n";

}  // namespace

int main(int argc, char** argv) {
    std::string first = argc > 1 ? argv[1] : "";
    if (first == "-h" || first == "--help") {
        fmt::print("{}", kUsage);
        return 0;
    }
    if (!first.empty()) fmt::print(stderr, "remitvm: error: unknown command '{}'\n\n", first);
    fmt::print(stderr, "{}", kUsage);
    return 2;
}
