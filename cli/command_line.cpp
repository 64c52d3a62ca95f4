// The machinery behind the command table (cli/command_table.cpp): the parser every command's
// arguments go through, the help texts, and each tool's main(). Nothing here knows a particular
// command; adding one is a change to the table only (cli/commands.h says how).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "cli/terminal.h"
#include "runtime/source.h"
#include "runtime/suggest.h"

#ifndef REMIT_VERSION
#define REMIT_VERSION "unknown"
#endif

namespace remit::cli {

std::string_view remitVersion() { return REMIT_VERSION; }

std::vector<std::string_view> wordChoices(std::string_view placeholder) {
    if (placeholder.find('|') == std::string_view::npos) return {};
    bool words = std::all_of(placeholder.begin(), placeholder.end(),
                             [](char c) { return (c >= 'a' && c <= 'z') || c == '|' || c == '-'; });
    if (!words) return {};
    std::vector<std::string_view> out;
    std::string_view rest = placeholder;
    while (true) {
        size_t bar = rest.find('|');
        out.push_back(rest.substr(0, bar));
        if (bar == std::string_view::npos) break;
        rest.remove_prefix(bar + 1);
    }
    return out;
}

bool Args::has(std::string_view name) const {
    for (const auto& [key, value] : options)
        if (key == name) return true;
    return false;
}

const std::string* Args::value(std::string_view name) const {
    const std::string* found = nullptr;
    for (const auto& [key, value] : options)
        if (key == name) found = &value;  // the last one wins, as with argparse
    return found;
}

std::vector<std::string> Args::values(std::string_view name) const {
    std::vector<std::string> out;
    for (const auto& [key, value] : options)
        if (key == name) out.push_back(value);
    return out;
}

namespace {

// "a, b or c".
std::string joinOr(const std::vector<std::string>& items) {
    std::string out;
    for (size_t k = 0; k < items.size(); ++k)
        out += fmt::format("{}{}", k == 0 ? "" : k + 1 == items.size() ? " or " : ", ", items[k]);
    return out;
}

// "remitvm approvals list": how messages and hints name a command.
std::string commandPath(std::string_view tool, std::string_view path) { return fmt::format("{} {}", tool, path); }

const Flag* findFlag(const std::vector<Flag>& flags, std::string_view spelled) {
    for (const Flag& f : flags)
        if (f.name == spelled || (!f.aliasName.empty() && f.aliasName == spelled)) return &f;
    return nullptr;
}

// The flag `spelled` names among the command's and the common flags.
const Flag* lookUp(const Command& command, std::string_view spelled) {
    if (const Flag* f = findFlag(command.flags, spelled)) return f;
    return findFlag(commonFlags(), spelled);
}

void unknownFlag(std::string_view tool, std::string_view path, const Command& command, const std::string& arg) {
    std::vector<std::string> names;
    for (const std::vector<Flag>* list : {&command.flags, &commonFlags()})
        for (const Flag& f : *list) names.emplace_back(f.name);
    std::string spelled = arg.substr(0, arg.find('='));
    std::optional<std::string> near = closestName(spelled, names);
    fmt::print(stderr, "{}: error: unknown option {}{}\n", tool, arg,
               near ? fmt::format("; did you mean {}?", *near) : std::string());
    fmt::print(stderr, "  hint: `{} --help` lists its flags\n", commandPath(tool, path));
}

// The help's left column for a flag: "-i, --input NAME=VALUE".
std::string flagColumn(const Flag& f) {
    std::string left = f.aliasName.empty() ? std::string(f.name) : fmt::format("{}, {}", f.aliasName, f.name);
    if (!f.isSwitch()) left += fmt::format(" {}", f.value);
    return left;
}

// The width of the left column for `rows`: the widest left part up to a cap.
size_t columnWidth(const std::vector<std::pair<std::string, std::string>>& rows) {
    constexpr size_t kMaxColumn = 30;
    size_t width = 0;
    for (const auto& [left, right] : rows)
        if (left.size() <= kMaxColumn) width = std::max(width, left.size());
    return width;
}

// Rows of "  left   right", the right column aligned at `width`; a wider left part puts its right
// part on the next line.
std::string table(const std::vector<std::pair<std::string, std::string>>& rows, size_t width) {
    std::string out;
    for (const auto& [left, right] : rows) {
        if (left.size() > width) out += fmt::format("  {}\n  {:{}}  {}\n", left, "", width, right);
        else out += fmt::format("  {:{}}  {}\n", left, width, right);
    }
    return out;
}

std::string table(const std::vector<std::pair<std::string, std::string>>& rows) {
    return table(rows, columnWidth(rows));
}

std::vector<std::pair<std::string, std::string>> flagRows(const std::vector<Flag>& flags) {
    std::vector<std::pair<std::string, std::string>> rows;
    for (const Flag& f : flags)
        rows.emplace_back(flagColumn(f), f.many ? fmt::format("{} (repeatable)", f.help) : std::string(f.help));
    return rows;
}

// "list|show|approve|deny": a command's subcommands as its operands.
std::string subcommandNames(const Command& command) {
    std::string out;
    for (const Command& sub : command.subcommands) out += (out.empty() ? "" : "|") + std::string(sub.name);
    return out;
}

std::string synopsisOperands(const Command& command) {
    if (!command.subcommands.empty()) return subcommandNames(command);
    return std::string(command.operands);
}

std::string paragraphs(std::string_view details) {
    if (details.empty()) return "";
    std::string text(details);
    if (!text.ends_with('\n')) text += '\n';
    return "\n" + text;
}

const Command* findSubcommand(const Command& command, std::string_view name) {
    for (const Command& sub : command.subcommands)
        if (sub.name == name) return &sub;
    return nullptr;
}

bool isHelpWord(std::string_view arg) { return arg == "-h" || arg == "--help"; }

// Runs one command (or, for a command with subcommands, the one argv[0] names).
int runCommandLine(std::string_view tool, std::string path, const Command& command, std::vector<std::string> argv) {
    if (!command.subcommands.empty()) {
        std::string names = subcommandNames(command);
        if (!argv.empty() && isHelpWord(argv[0])) {
            fmt::print("{}", commandHelp(tool, path, command));
            return kOk;
        }
        if (argv.empty()) {
            std::vector<std::string> forms;  // "list, show ID, approve ID or deny ID"
            for (const Command& sub : command.subcommands)
                forms.push_back(sub.operands.empty() ? std::string(sub.name) : fmt::format("{} {}", sub.name, sub.operands));
            fmt::print(stderr, "{}: error: {} needs a subcommand: {}\n\n{}", tool, path, joinOr(forms),
                       commandHelp(tool, path, command));
            return kUsage;
        }
        const Command* sub = findSubcommand(command, argv[0]);
        if (!sub) {
            std::vector<std::string> candidates;
            for (const Command& s : command.subcommands) candidates.emplace_back(s.name);
            std::optional<std::string> near = closestName(argv[0], candidates);
            fmt::print(stderr, "{}: error: unknown {} subcommand '{}'{}; it is one of {}\n", tool, command.name, argv[0],
                       near ? fmt::format(" (did you mean '{}'?)", *near) : std::string(), names);
            fmt::print(stderr, "  hint: `{} --help` describes them\n", commandPath(tool, path));
            return kUsage;
        }
        std::string subPath = fmt::format("{} {}", path, sub->name);
        argv.erase(argv.begin());
        return runCommandLine(tool, subPath, *sub, std::move(argv));
    }
    Args args;
    switch (parseCommandLine(tool, command, argv, args, path)) {
        case Parsed::Help: fmt::print("{}", commandHelp(tool, path, command)); return kOk;
        case Parsed::Error: return kUsage;
        case Parsed::Ok: break;
    }
    chooseColor(args.value("--color"));
    return command.run(tool, args);
}

}  // namespace

Parsed parseCommandLine(std::string_view tool, const Command& command, const std::vector<std::string>& argv,
                        Args& out, std::string_view path) {
    if (path.empty()) path = command.name;
    bool onlyPositional = false;
    for (size_t i = 0; i < argv.size(); ++i) {
        const std::string& arg = argv[i];
        if (onlyPositional || arg.size() < 2 || arg[0] != '-') {
            out.positional.push_back(arg);
            continue;
        }
        if (arg == "--") {
            onlyPositional = true;
            continue;
        }
        if (isHelpWord(arg)) return Parsed::Help;
        // --name=value; -xVALUE for a one-letter flag that takes a value (as argparse allows).
        std::string spelled = arg, value;
        bool inlineValue = false;
        if (size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string::npos) {
            spelled = arg.substr(0, eq);
            value = arg.substr(eq + 1);
            inlineValue = true;
        } else if (!arg.starts_with("--") && arg.size() > 2) {
            const Flag* shortFlag = lookUp(command, arg.substr(0, 2));
            if (shortFlag && !shortFlag->isSwitch()) {
                spelled = arg.substr(0, 2);
                value = arg.substr(2);
                inlineValue = true;
            }
        }
        const Flag* flag = lookUp(command, spelled);
        if (!flag) {
            unknownFlag(tool, path, command, arg);
            return Parsed::Error;
        }
        if (flag->isSwitch()) {
            if (inlineValue) {
                fmt::print(stderr, "{}: error: {} is a switch and takes no value (given '{}')\n", tool, flag->name,
                           value);
                return Parsed::Error;
            }
            out.options.emplace_back(flag->name, "");
            continue;
        }
        if (!inlineValue) {
            if (i + 1 >= argv.size()) {
                fmt::print(stderr, "{}: error: option {} needs a value ({})\n", tool, spelled, flag->value);
                return Parsed::Error;
            }
            value = argv[++i];
        }
        if (std::vector<std::string_view> choices = flag->choices();
            !choices.empty() && std::find(choices.begin(), choices.end(), value) == choices.end()) {
            fmt::print(stderr, "{}: error: {} must be {}, not '{}'\n", tool, flag->name,
                       joinOr({choices.begin(), choices.end()}),
                       firstCodePoints(value, 40));
            return Parsed::Error;
        }
        // An empty directory would put what the command writes in the current directory.
        if (flag->complete == Complete::Dirs && value.empty()) {
            fmt::print(stderr, "{}: error: {} needs a directory, not an empty string\n", tool, flag->name);
            fmt::print(stderr, "  hint: leave it out to use the default, or pass {} {}\n", flag->name, flag->value);
            return Parsed::Error;
        }
        out.options.emplace_back(flag->name, value);
    }
    return Parsed::Ok;
}

std::string commandHelp(std::string_view tool, std::string_view path, const Command& command) {
    std::string out;
    if (!command.subcommands.empty()) {
        out += fmt::format("usage: {} <subcommand> [options]\n\n{}\n\nsubcommands:\n", commandPath(tool, path),
                           command.summary);
        std::vector<std::pair<std::string, std::string>> rows;
        for (const Command& sub : command.subcommands)
            rows.emplace_back(sub.operands.empty() ? std::string(sub.name) : fmt::format("{} {}", sub.name, sub.operands),
                              std::string(sub.summary));
        out += table(rows);
        out += paragraphs(command.details);
        out += fmt::format("\nRun `{} SUBCOMMAND --help` for a subcommand's flags.\n", commandPath(tool, path));
        return out;
    }
    std::string operands = command.operands.empty() ? "" : fmt::format(" {}", command.operands);
    out += fmt::format("usage: {}{}{}\n\n{}\n", commandPath(tool, path), operands,
                       command.flags.empty() ? "" : " [options]", command.summary);
    // One column width for both lists, so they read as one.
    auto own = flagRows(command.flags), common = flagRows(commonFlags());
    auto all = own;
    all.insert(all.end(), common.begin(), common.end());
    size_t width = columnWidth(all);
    if (!own.empty()) out += "\noptions:\n" + table(own, width);
    out += "\ncommon options:\n" + table(common, width);
    out += paragraphs(command.details);
    return out;
}

std::string toolHelp(const Tool& tool) {
    std::string out = fmt::format("usage: {} <command> [options]\n\n{}\n\ncommands:\n", tool.name, tool.summary);
    std::vector<std::pair<std::string, std::string>> rows;
    for (const Command* command : tool.commands) {
        std::string operands = synopsisOperands(*command);
        rows.emplace_back(operands.empty() ? std::string(command->name) : fmt::format("{} {}", command->name, operands),
                          std::string(command->summary));
    }
    out += table(rows);
    out += "\noptions:\n" + table({{"--version", "print the version and exit"}, {"-h, --help", "print this help and exit"}});
    out += paragraphs(tool.details);
    out += fmt::format("\nRun `{} COMMAND --help` for a command's flags.\n", tool.name);
    return out;
}

const Tool* findTool(std::string_view name) {
    for (const Tool& tool : allTools())
        if (tool.name == name) return &tool;
    return nullptr;
}

std::vector<std::shared_ptr<void>>& keptUntilExit() {
    static auto* kept = new std::vector<std::shared_ptr<void>>();  // never destroyed, on purpose
    return *kept;
}

int runTool(std::string_view toolName, int argc, char** argv) {
    const Tool* tool = findTool(toolName);
    if (!tool) return kFailure;
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || isHelpWord(args[0])) {
        fmt::print(args.empty() ? stderr : stdout, "{}", toolHelp(*tool));
        return args.empty() ? kUsage : kOk;
    }
    if (args[0] == "--version") {
        fmt::print("{} {}\n", tool->name, remitVersion());
        return kOk;
    }
    std::string name = args[0];
    args.erase(args.begin());
    for (const Command* command : tool->commands) {
        if (command->name != name) continue;
        try {
            return runCommandLine(tool->name, name, *command, std::move(args));
        } catch (const std::exception&) {
            fmt::print(stderr, "{}: internal error while running '{}'; please report it with the input file\n",
                       tool->name, name);
            return kFailure;
        }
    }
    std::vector<std::string> names;
    for (const Command* command : tool->commands) names.emplace_back(command->name);
    std::optional<std::string> near = closestName(name, names);
    fmt::print(stderr, "{}: error: unknown command '{}'{}\n\n{}", tool->name, name,
               near ? fmt::format(" (did you mean '{}'?)", *near) : std::string(), toolHelp(*tool));
    return kUsage;
}

}  // namespace remit::cli
