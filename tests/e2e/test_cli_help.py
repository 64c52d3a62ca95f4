#!/usr/bin/env python3
"""Every command's --help against what its parser accepts, for all three tools (cli/command_table.cpp,
docs/compatibility.md "Command lines").

The commands are read from `TOOL --help`, their flags from `TOOL COMMAND --help`; each flag listed is
then given to the real binary as `TOOL COMMAND FLAG [VALUE] --help`, which exits 0 only when the
parser accepted FLAG (and its value) before reaching --help. The converse: a flag no help lists is
refused, every flag docs/compatibility.md shows for a command is one its help lists, and `remit`
accepts every flag of the prototype's command lines."""
import re
from pathlib import Path

from harness import REMIT, REMITC, REMITVM, expect, main, run

TOOLS = {"remitc": REMITC, "remitvm": REMITVM, "remit": REMIT}
ROOT = Path(__file__).resolve().parents[2]

# The prototype's flags per command (its argparse parsers); `remit` must accept every one.
PROTOTYPE_FLAGS = {
    "check": ["--host", "--policy", "--json"],
    "build": ["--host", "--out"],
    "run": ["--host", "--input", "-i", "--inputs", "--policy", "--allow-all", "--live", "--fixtures",
            "--interactive", "--approve-all"],
    "resume": ["--host", "--file", "--policy", "--allow-all", "--live", "--fixtures", "--interactive",
               "--approve-all"],
    "replay": ["--host", "--file"],
    "approve": ["--by"],
    "test": ["--host"],
    "fmt": ["--check"],
    "diff": ["--host", "--json"],
}


def section(text, title):
    """The lines of a help section ("commands:", "options:"), up to the next blank line."""
    lines = text.splitlines()
    if title not in lines:
        return []
    out = []
    for line in lines[lines.index(title) + 1:]:
        if not line.strip():
            break
        out.append(line)
    return out


def listed_flags(help_text):
    """{spelling: placeholder or None} for every flag in the options sections of a command's help."""
    flags = {}
    for title in ("options:", "common options:"):
        for line in section(help_text, title):
            if not line.startswith("  -"):
                continue  # a help text continued on its own line
            left = re.split(r"\s{2,}", line.strip())[0]  # "-i, --input NAME=VALUE", "--json"
            *aliases, named = left.split(", ")
            name, _, placeholder = named.partition(" ")
            spellings = aliases + [name]
            for s in spellings:
                expect(s not in flags, f"{s} is listed once: {help_text}")
                flags[s] = placeholder or None
    return flags


def commands_of(tool):
    """[(path, help_text)] for every command and subcommand of a tool, from its help."""
    r = run(TOOLS[tool], "--help")
    expect(r.code == 0 and r.out.startswith(f"usage: {tool} <command>"), f"{tool} --help", r)
    out = []
    for line in section(r.out, "commands:"):
        if not line.startswith("  ") or line.startswith("   "):
            continue  # a summary continued on its own line
        name = line.split()[0]
        h = run(TOOLS[tool], name, "--help")
        expect(h.code == 0 and h.out.startswith(f"usage: {tool} {name}"), f"{tool} {name} --help", h)
        subs = section(h.out, "subcommands:")
        if not subs:
            out.append(([name], h.out))
            continue
        for sub_line in subs:
            sub = sub_line.split()[0]
            s = run(TOOLS[tool], name, sub, "--help")
            expect(s.code == 0 and s.out.startswith(f"usage: {tool} {name} {sub}"), f"{tool} {name} {sub} --help", s)
            out.append(([name, sub], s.out))
    return out


def value_for(placeholder):
    if placeholder is None:
        return []
    if re.fullmatch(r"[a-z-]+(\|[a-z-]+)+", placeholder):
        return [placeholder.split("|")[0]]  # a choice: the parser accepts only these words
    return ["x"]


def test_every_listed_flag_is_accepted_and_no_other():
    for tool in TOOLS:
        for path, help_text in commands_of(tool):
            flags = listed_flags(help_text)
            expect("--help" in flags and "-h" in flags, f"{tool} {' '.join(path)}: help lists --help")
            for spelling, placeholder in flags.items():
                if spelling in ("-h", "--help"):
                    continue
                r = run(TOOLS[tool], *path, spelling, *value_for(placeholder), "--help")
                expect(r.code == 0 and r.out == help_text,
                       f"{tool} {' '.join(path)} accepts {spelling} {placeholder or ''} as its help lists it", r)
                if placeholder is not None:
                    r = run(TOOLS[tool], *path, spelling)
                    expect(r.code == 2 and "needs a value" in r.err, f"{tool} {' '.join(path)} {spelling} needs a value", r)
                else:
                    r = run(TOOLS[tool], *path, f"{spelling}=1", "--help") if spelling.startswith("--") else None
                    expect(r is None or (r.code == 2 and "takes no value" in r.err),
                           f"{tool} {' '.join(path)} {spelling} is a switch", r)
            r = run(TOOLS[tool], *path, "--not-a-flag-of-any-command", "--help")
            expect(r.code == 2 and "unknown option --not-a-flag-of-any-command" in r.err,
                   f"{tool} {' '.join(path)} refuses a flag its help does not list", r)


def documented_command_lines():
    """{(tool, command): {flags}} from the command-line block of docs/compatibility.md."""
    text = (ROOT / "docs" / "compatibility.md").read_text()
    block = text.split("## Command lines", 1)[1].split("```", 2)[1]
    out, key = {}, None
    for line in block.splitlines():
        m = re.match(r"(remitc|remitvm|remit)\s+(\w+)", line)
        if m:
            key = (m.group(1), m.group(2))
            out.setdefault(key, set())
        if key:
            code = line.split("#", 1)[0]
            out[key] |= set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-z])\b", code))
    return out


def test_documented_flags_are_in_help():
    documented = documented_command_lines()
    expect(len(documented) >= 15, f"docs/compatibility.md lists the command lines: {sorted(documented)}")
    helps = {tool: {" ".join(path): listed_flags(h) for path, h in commands_of(tool)} for tool in TOOLS}
    for (tool, command), flags in documented.items():
        matching = {p: f for p, f in helps[tool].items() if p == command or p.startswith(command + " ")}
        expect(matching, f"{tool} {command} of docs/compatibility.md is a command")
        accepted = set().union(*[set(f) for f in matching.values()])
        missing = flags - accepted
        expect(not missing, f"docs/compatibility.md shows {tool} {command} with {sorted(missing)}, "
                            f"which its --help does not list")


def test_remit_accepts_the_prototype_flags():
    for command, flags in PROTOTYPE_FLAGS.items():
        h = run(REMIT, command, "--help")
        expect(h.code == 0, f"remit {command} --help", h)
        listed = listed_flags(h.out)
        for flag in flags:
            expect(flag in listed, f"remit {command} accepts the prototype's {flag}", h)


def test_usage_text_and_version():
    for tool, binary in TOOLS.items():
        r = run(binary)
        expect(r.code == 2 and r.out == "" and r.err.startswith(f"usage: {tool} <command>"), f"{tool} alone", r)
        r = run(binary, "--version")
        expect(r.code == 0 and re.fullmatch(rf"{tool} \d+\.\d+\.\d+\n", r.out), f"{tool} --version", r)
        versions = {run(b, "--version").out.split()[1] for b in TOOLS.values()}
        expect(len(versions) == 1, f"one version for the three tools: {versions}")
    r = run(REMITVM, "rnu")
    expect(r.code == 2 and "unknown command 'rnu' (did you mean 'run'?)" in r.err, "a misspelt command", r)
    r = run(REMITVM, "approvals", "lsit")
    expect(r.code == 2 and "did you mean 'list'?" in r.err, "a misspelt subcommand", r)
    r = run(REMITC, "check", "--polcy", "p.toml")
    expect(r.code == 2 and "unknown option --polcy; did you mean --policy?" in r.err
           and "`remitc check --help`" in r.err, "a misspelt flag", r)
    r = run(REMITVM, "mcp", "--approvals", "everyone")
    expect(r.code == 2 and "--approvals must be client or operator, not 'everyone'" in r.err, "a choice", r)
    r = run(REMITVM, "trace", "--state-dir", "", "x")
    expect(r.code == 2 and "--state-dir needs a directory, not an empty string" in r.err, "an empty directory", r)


if __name__ == "__main__":
    main(globals())
