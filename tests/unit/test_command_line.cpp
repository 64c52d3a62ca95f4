// The command table's parser and help (cli/commands.h, cli/command_line.cpp): how flags, values,
// aliases, repeats, choices and operands are read, and that every command of every tool documents
// each flag its parser accepts. The real binaries are driven by tests/e2e/test_cli_help.py.
#include <doctest/doctest.h>

#include <set>

#include "cli/commands.h"

using namespace remit::cli;

namespace {

int noop(std::string_view, Args&) { return 0; }

const Command kSample{
    .name = "sample",
    .operands = "FILE...",
    .summary = "a command for the tests",
    .flags = {Flag{"--json", "", "a switch"}, Flag{"--host", "H", "a value"},
              Flag{"--input", "NAME=VALUE", "repeatable"}.alias("-i").repeatable(), Flag{"-o", "OUT", "short only"},
              Flag{"--mode", "fast|slow", "a choice"}, Flag{"--dir", "D", "a directory"}.completes(Complete::Dirs)},
    .run = noop,
};

Parsed parse(std::vector<std::string> argv, Args& args) { return parseCommandLine("tool", kSample, argv, args); }

}  // namespace

TEST_CASE("command line: flags, values, aliases and operands") {
    Args args;
    REQUIRE(parse({"a.rmt", "--json", "--host", "h1", "--host=h2", "-i", "x=1", "--input", "y=2", "-iz=3", "-oout.rbc",
                   "--", "--json", "b.rmt"},
                  args) == Parsed::Ok);
    CHECK(args.positional == std::vector<std::string>{"a.rmt", "--json", "b.rmt"});
    CHECK(args.has("--json"));
    CHECK(*args.value("--host") == "h2");  // the last one wins
    CHECK(args.values("--input") == std::vector<std::string>{"x=1", "y=2", "z=3"});  // stored under the long name
    CHECK(!args.has("-i"));
    CHECK(*args.value("-o") == "out.rbc");
    CHECK(args.value("--mode") == nullptr);
    Args dash;
    REQUIRE(parse({"-"}, dash) == Parsed::Ok);
    CHECK(dash.positional == std::vector<std::string>{"-"});
}

TEST_CASE("command line: errors and help") {
    Args args;
    CHECK(parse({"--bogus"}, args) == Parsed::Error);
    CHECK(parse({"--host"}, args) == Parsed::Error);
    CHECK(parse({"--json=1"}, args) == Parsed::Error);
    CHECK(parse({"--mode", "medium"}, args) == Parsed::Error);
    CHECK(parse({"--dir", ""}, args) == Parsed::Error);
    CHECK(parse({"--mode", "slow"}, args) == Parsed::Ok);
    CHECK(parse({"x", "--help"}, args) == Parsed::Help);
    CHECK(parse({"-h"}, args) == Parsed::Help);
    CHECK(parse({"--host", "--help"}, args) == Parsed::Ok);  // a value, even one that looks like a flag
}

TEST_CASE("command line: choices come from a placeholder of lowercase words") {
    CHECK(Flag{"--mode", "fast|slow", ""}.choices() == std::vector<std::string_view>{"fast", "slow"});
    CHECK(Flag{"--file", "PROG.rmt|PROG.rbc", ""}.choices().empty());
    CHECK(Flag{"--n", "N", ""}.choices().empty());
}

TEST_CASE("command line: every command's help lists every flag its parser accepts") {
    REQUIRE(allTools().size() == 3);
    for (const Tool& tool : allTools()) {
        CHECK(toolHelp(tool).find(std::string("usage: ") + std::string(tool.name)) == 0);
        std::set<std::string_view> names;
        for (const Command* command : tool.commands) {
            CHECK_MESSAGE(names.insert(command->name).second, tool.name, " lists ", command->name, " once");
            CHECK(toolHelp(tool).find("\n  " + std::string(command->name)) != std::string::npos);
            std::vector<std::pair<std::string, const Command*>> leaves;
            if (command->subcommands.empty()) leaves.emplace_back(command->name, command);
            for (const Command& sub : command->subcommands)
                leaves.emplace_back(std::string(command->name) + " " + std::string(sub.name), &sub);
            CHECK((command->run == nullptr) == !command->subcommands.empty());
            for (const auto& [path, leaf] : leaves) {
                std::string help = commandHelp(tool.name, path, *leaf);
                CAPTURE(help);
                std::set<std::string_view> spellings;
                for (const std::vector<Flag>* list : {&leaf->flags, &commonFlags()}) {
                    for (const Flag& flag : *list) {
                        CHECK(!flag.help.empty());
                        CHECK_MESSAGE(spellings.insert(flag.name).second, path, ": ", flag.name, " declared once");
                        if (!flag.aliasName.empty()) CHECK(spellings.insert(flag.aliasName).second);
                        std::string column = flag.aliasName.empty() ? std::string(flag.name)
                                                                    : std::string(flag.aliasName) + ", " + std::string(flag.name);
                        if (!flag.isSwitch()) column += " " + std::string(flag.value);
                        CHECK_MESSAGE(help.find("\n  " + column + " ") != std::string::npos, path, " lists ", column);
                        // ... and the parser takes it.
                        std::vector<std::string> argv{std::string(flag.name)};
                        if (!flag.isSwitch())
                            argv.emplace_back(flag.choices().empty() ? std::string("x") : std::string(flag.choices()[0]));
                        Args args;
                        Parsed expected = flag.name == "--help" ? Parsed::Help : Parsed::Ok;
                        CHECK_MESSAGE(parseCommandLine(tool.name, *leaf, argv, args) == expected, path, " parses ",
                                      flag.name);
                    }
                }
            }
        }
    }
}
