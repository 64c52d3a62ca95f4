// `remitc completions bash|zsh|fish`: shell completion scripts for remitc, remitvm and remit,
// generated from the command table (cli/command_table.cpp), so they offer exactly the commands,
// subcommands and flags the parsers accept. One script covers the three tools. What a value or an
// operand completes: a flag's Complete kind or its choices; an operand synopsis of lowercase words
// joined by `|` those words, one naming a RUN_ID the run ids under .remit/runs (and files), none
// when the command takes no operands, else files.
#include <fmt/format.h>

#include <map>

#include "cli/commands.h"

namespace remit::cli {

namespace {

// One command line the scripts complete: "remitvm approvals deny" and its Command.
struct Leaf {
    std::string tool, path;  // path: "approvals deny"
    const Command* command;
};

// Every tool's commands, and for a command with subcommands each subcommand.
std::vector<Leaf> leaves() {
    std::vector<Leaf> out;
    for (const Tool& tool : allTools())
        for (const Command* command : tool.commands) {
            out.push_back({std::string(tool.name), std::string(command->name), command});
            for (const Command& sub : command->subcommands)
                out.push_back({std::string(tool.name), fmt::format("{} {}", command->name, sub.name), &sub});
        }
    return out;
}

// What completes a value or an operand: "files", "dirs", "none", "runs" or "words:a b c".
std::string flagKind(const Flag& flag) {
    if (std::vector<std::string_view> choices = flag.choices(); !choices.empty())
        return fmt::format("words:{}", fmt::join(choices, " "));
    switch (flag.complete) {
        case Complete::Files: return "files";
        case Complete::Dirs: return "dirs";
        case Complete::Nothing: return "none";
    }
    return "files";
}

std::string operandKind(const Command& command) {
    std::string_view operands = command.operands;
    if (!command.subcommands.empty() || operands.empty() || operands == "ID") return "none";
    if (std::vector<std::string_view> words = wordChoices(operands); !words.empty())
        return fmt::format("words:{}", fmt::join(words, " "));
    if (operands.find("RUN_ID") != std::string_view::npos) return "runs";
    return "files";
}

// Every spelling of the command's flags and the common ones, with what its value completes
// (empty for a switch).
std::vector<std::pair<std::string, std::string>> flagSpellings(const Command& command) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const std::vector<Flag>* list : {&command.flags, &commonFlags()})
        for (const Flag& f : *list) {
            std::string kind = f.isSwitch() ? "" : flagKind(f);
            out.emplace_back(std::string(f.name), kind);
            if (!f.aliasName.empty()) out.emplace_back(std::string(f.aliasName), kind);
        }
    return out;
}

std::string subcommandWords(const Command& command) {
    std::vector<std::string_view> names;
    for (const Command& sub : command.subcommands) names.push_back(sub.name);
    return fmt::format("{}", fmt::join(names, " "));
}

std::string toolWords(const Tool& tool) {
    std::vector<std::string_view> names;
    for (const Command* command : tool.commands) names.push_back(command->name);
    return fmt::format("{}", fmt::join(names, " "));
}

// A string in single quotes for bash, zsh and fish alike (the table holds no single quote but
// in a help text; fish and the POSIX shells escape it differently, so each script quotes its own).
std::string shQuote(std::string_view text) {
    std::string out = "'";
    for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

// The associative arrays the bash and zsh scripts share: subcommands of a path, flags of a
// command, what a flag's value and a command's operands complete. `entry` writes one key/value.
std::string tables(const std::function<std::string(const std::string&, const std::string&)>& entry) {
    std::string subs, flags, values, operands;
    for (const Tool& tool : allTools()) subs += entry(std::string(tool.name), toolWords(tool));
    for (const Leaf& leaf : leaves()) {
        std::string key = fmt::format("{} {}", leaf.tool, leaf.path);
        if (!leaf.command->subcommands.empty()) {
            subs += entry(key, subcommandWords(*leaf.command));
            continue;
        }
        std::vector<std::string> spellings;
        for (const auto& [spelling, kind] : flagSpellings(*leaf.command)) {
            spellings.push_back(spelling);
            if (!kind.empty()) values += entry(fmt::format("{} {}", key, spelling), kind);
        }
        flags += entry(key, fmt::format("{}", fmt::join(spellings, " ")));
        operands += entry(key, operandKind(*leaf.command));
    }
    return fmt::format("_remit_sub=(\n{})\n_remit_flags=(\n{})\n_remit_value=(\n{})\n_remit_operands=(\n{})\n", subs,
                       flags, values, operands);
}

constexpr const char* kBashBody = R"SH(
# The command words typed so far name a path ("remitvm approvals deny"); then a flag's value, a
# flag, or an operand is completed as the tables above say.
_remit_complete() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev="" path i=1
    ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD-1]}
    # --name=value: bash splits at '=' (COMP_WORDBREAKS).
    if [[ $cur == "=" ]]; then cur=""; elif [[ $prev == "=" ]] && ((COMP_CWORD > 1)); then prev=${COMP_WORDS[COMP_CWORD-2]}; fi
    path=${COMP_WORDS[0]##*/}
    while ((i < COMP_CWORD)) && [[ -n ${_remit_sub[$path]+set} && " ${_remit_sub[$path]} " == *" ${COMP_WORDS[i]} "* ]]; do
        path="$path ${COMP_WORDS[i]}"
        ((i++))
    done
    COMPREPLY=()
    if [[ -n ${_remit_sub[$path]+set} ]]; then
        ((i == COMP_CWORD)) || return 0
        if [[ $cur == -* ]]; then
            [[ $path == *" "* ]] && COMPREPLY=($(compgen -W "--help -h" -- "$cur")) || COMPREPLY=($(compgen -W "--help -h --version" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "${_remit_sub[$path]}" -- "$cur"))
        fi
        return 0
    fi
    local kind=${_remit_value["$path $prev"]}
    if [[ -z $kind ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "${_remit_flags[$path]}" -- "$cur"))
            return 0
        fi
        kind=${_remit_operands[$path]}
    fi
    case $kind in
        words:*) COMPREPLY=($(compgen -W "${kind#words:}" -- "$cur")) ;;
        dirs) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur")) ;;
        runs) compopt -o filenames 2>/dev/null
              COMPREPLY=($(compgen -W "$(command ls .remit/runs 2>/dev/null | sed -n 's/\.jsonl$//p')" -- "$cur") $(compgen -f -- "$cur")) ;;
        files) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")) ;;
    esac
    return 0
}
complete -F _remit_complete remitc remitvm remit
)SH";

std::string bashScript() {
    std::string out =
        "# bash completion for remitc, remitvm and remit, generated by `remitc completions bash` from the\n"
        "# tools' command table. Load it with `source <(remitc completions bash)` in ~/.bashrc, or save it as\n"
        "# ~/.local/share/bash-completion/completions/remitc (and link remitvm and remit to it).\n"
        "declare -gA _remit_sub _remit_flags _remit_value _remit_operands\n";
    out += tables([](const std::string& key, const std::string& value) {
        return fmt::format("    [{}]={}\n", shQuote(key), shQuote(value));
    });
    return out + kBashBody;
}

constexpr const char* kZshBody = R"SH(
_remit() {
    local cur=${words[CURRENT]} prev=${words[CURRENT-1]} path=${words[1]:t} i=2 kind
    while (( i < CURRENT )) && (( ${+_remit_sub[$path]} )) && [[ " ${_remit_sub[$path]} " == *" ${words[i]} "* ]]; do
        path="$path ${words[i]}"
        (( i++ ))
    done
    if (( ${+_remit_sub[$path]} )); then
        (( i == CURRENT )) || return 1
        if [[ $cur == -* ]]; then
            compadd -- --help -h
            [[ $path == *" "* ]] || compadd -- --version
        else
            compadd -- ${=_remit_sub[$path]}
        fi
        return
    fi
    kind=${_remit_value[$path $prev]}
    if [[ -z $kind ]]; then
        if [[ $cur == -* ]]; then
            compadd -- ${=_remit_flags[$path]}
            return
        fi
        kind=${_remit_operands[$path]}
    fi
    case $kind in
        words:*) compadd -- ${=kind#words:} ;;
        dirs) _directories ;;
        runs) compadd -- ${${(f)"$(command ls .remit/runs 2>/dev/null)"}%.jsonl}; _files ;;
        files) _files ;;
    esac
}

if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then
    _remit "$@"
else
    compdef _remit remitc remitvm remit
fi
)SH";

std::string zshScript() {
    std::string out =
        "#compdef remitc remitvm remit\n"
        "# zsh completion for remitc, remitvm and remit, generated by `remitc completions zsh` from the\n"
        "# tools' command table. Save it as _remitc in a directory of $fpath (before compinit runs), or\n"
        "# load it with `source <(remitc completions zsh)` after compinit in ~/.zshrc.\n"
        "typeset -gA _remit_sub _remit_flags _remit_value _remit_operands\n";
    out += tables([](const std::string& key, const std::string& value) {
        return fmt::format("    {} {}\n", shQuote(key), shQuote(value));
    });
    return out + kZshBody;
}

// fish quotes: '...' with \' and \\ inside.
std::string fishQuote(std::string_view text) {
    std::string out = "'";
    for (char c : text) {
        if (c == '\'' || c == '\\') out += '\\';
        out += c;
    }
    return out + "'";
}

constexpr const char* kFishHelpers = R"SH(
# __remit_at CMD [SUB]: the words typed so far are the tool, CMD and, when given, SUB.
function __remit_at
    set -l words (commandline -opc)
    test (count $words) -ge 2; and test "$words[2]" = "$argv[1]"; or return 1
    test (count $argv) -lt 2; and return 0
    test (count $words) -ge 3; and test "$words[3]" = "$argv[2]"
end
# __remit_only [CMD]: nothing but the tool (and CMD) has been typed: a command (a subcommand) comes next.
function __remit_only
    set -l words (commandline -opc)
    test (count $words) -eq (math 1 + (count $argv)); or return 1
    test (count $argv) -eq 0; or test "$words[2]" = "$argv[1]"
end
function __remit_runs
    command ls .remit/runs 2>/dev/null | string replace -r -f '\.jsonl$' ''
end
)SH";

// The arguments of fish's `complete` for what a value or operand completes.
std::string fishKind(const std::string& kind) {
    if (kind.starts_with("words:")) return fmt::format("-x -a {}", fishQuote(kind.substr(6)));
    if (kind == "dirs") return "-x -a '(__fish_complete_directories)'";
    if (kind == "none") return "-x";
    if (kind == "runs") return "-r -a '(__remit_runs)'";
    return "-r -F";
}

std::string fishScript() {
    std::string out =
        "# fish completion for remitc, remitvm and remit, generated by `remitc completions fish` from the\n"
        "# tools' command table. Save it as ~/.config/fish/conf.d/remit.fish, or load it with\n"
        "# `remitc completions fish | source`.\n";
    out += kFishHelpers;
    for (const Tool& tool : allTools()) {
        std::string c = fmt::format("complete -c {}", tool.name);
        out += fmt::format("\n{} -n __remit_only -f -l version -d 'print the version and exit'\n", c);
        for (const Command* command : tool.commands)
            out += fmt::format("{} -n __remit_only -f -a {} -d {}\n", c, command->name, fishQuote(command->summary));
    }
    for (const Leaf& leaf : leaves()) {
        std::string c = fmt::format("complete -c {} -n '__remit_at {}'", leaf.tool, leaf.path);
        if (!leaf.command->subcommands.empty()) {
            for (const Command& sub : leaf.command->subcommands)
                out += fmt::format("complete -c {} -n '__remit_only {}' -f -a {} -d {}\n", leaf.tool, leaf.path,
                                   sub.name, fishQuote(sub.summary));
            continue;
        }
        std::string operands = operandKind(*leaf.command);
        out += fmt::format("{} {}\n", c, operands == "files" ? "-F" : operands == "none" ? "-f" : fishKind(operands));
        for (const std::vector<Flag>* list : {&leaf.command->flags, &commonFlags()})
            for (const Flag& f : *list) {
                std::string spell = f.name.starts_with("--") ? fmt::format("-l {}", f.name.substr(2))
                                                             : fmt::format("-s {}", f.name.substr(1));
                if (f.aliasName.starts_with("--")) spell += fmt::format(" -l {}", f.aliasName.substr(2));
                else if (!f.aliasName.empty()) spell += fmt::format(" -s {}", f.aliasName.substr(1));
                out += fmt::format("{} {} {} -d {}\n", c, spell, f.isSwitch() ? "" : fishKind(flagKind(f)),
                                   fishQuote(f.help));
            }
    }
    return out;
}

}  // namespace

std::string completionScript(std::string_view shell) {
    if (shell == "bash") return bashScript();
    if (shell == "zsh") return zshScript();
    if (shell == "fish") return fishScript();
    return "";
}

int completionsCommand(std::string_view tool, Args& args) {
    if (args.positional.size() != 1) {
        fmt::print(stderr, "{}: error: completions needs one SHELL: bash, zsh or fish\n", tool);
        return kUsage;
    }
    std::string script = completionScript(args.positional[0]);
    if (script.empty()) {
        fmt::print(stderr, "{}: error: no completions for '{}'; the shells are bash, zsh and fish\n", tool,
                   args.positional[0]);
        return kUsage;
    }
    fmt::print("{}", script);
    return kOk;
}

}  // namespace remit::cli
