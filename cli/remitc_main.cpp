// remitc: the compiler's command line — check and format Remit source (shared/DESIGN.md A1).
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"

namespace {

constexpr const char* kUsage =
    "usage: remitc <command> [options]\n"
    "\n"
    "commands:\n"
    "  check FILE|DIR... [--host H] [--policy P] [--json]   check programs, report diagnostics\n"
    "  fmt FILE... [--check]                                 format .rmt and .rmti files in place\n"
    "  manifest PROGRAM [--host H]                           print the manifest as JSON\n"
    "  diff OLD NEW [--host H] [--json]                      did the edit widen authority? (exit 4 if so)\n";

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "-h" || args[0] == "--help") {
        fmt::print(args.empty() ? stderr : stdout, "{}", kUsage);
        return args.empty() ? remit::cli::kUsage : remit::cli::kOk;
    }
    std::string command = args[0];
    args.erase(args.begin());
    try {
        if (command == "check") return remit::cli::checkCommand("remitc", args);
        if (command == "fmt") return remit::cli::fmtCommand("remitc", args);
        if (command == "manifest") return remit::cli::manifestCommand("remitc", args);
        if (command == "diff") return remit::cli::diffCommand("remitc", args);
    } catch (const std::exception&) {
        // Internal failures must never show exception text or paths (shared/DESIGN.md A2).
        fmt::print(stderr, "remitc: internal error while running '{}'; please report it with the input file\n", command);
        return remit::cli::kFailure;
    }
    fmt::print(stderr, "remitc: error: unknown command '{}'\n\n{}", command, kUsage);
    return remit::cli::kUsage;
}
