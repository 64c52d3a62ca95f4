// remit: the prototype-compatible front end. Its commands and flags are the Python prototype's
// (shared/PROTOTYPE.md §1); each maps onto the remitc/remitvm command that implements it.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"

namespace {

constexpr const char* kUsage =
    "usage: remit <command> [options]\n"
    "\n"
    "commands available in this build:\n"
    "  check FILE... [--host H] [--policy P] [--json]\n"
    "  fmt FILE... [--check]\n"
    "  diff OLD NEW [--host H] [--json]\n"
    "(build, run, resume, replay, approve, test and mcp arrive with later stages)\n";

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
        if (command == "check") return remit::cli::checkCommand("remit", args);
        if (command == "fmt") return remit::cli::fmtCommand("remit", args);
        if (command == "manifest") return remit::cli::manifestCommand("remit", args);
        if (command == "diff") return remit::cli::diffCommand("remit", args);
    } catch (const std::exception&) {
        fmt::print(stderr, "remit: internal error while running '{}'; please report it with the input file\n", command);
        return remit::cli::kFailure;
    }
    fmt::print(stderr, "remit: error: unknown command '{}'\n\n{}", command, kUsage);
    return remit::cli::kUsage;
}
