#!/usr/bin/env python3
"""The command line's basics end to end (docs/compatibility.md "Colour, completions and progress"):
colour (--color, NO_COLOR, CLICOLOR_FORCE, a terminal), `remitc completions bash|zsh|fish` (the
bash script really completes commands, subcommands, flags and their values; the zsh and fish
scripts parse), `run --progress` (each call as it starts and ends, on by default at a terminal),
costs printed with the digits they need, and fixture runs that skip fsync while adapter runs keep
it (docs/broker.md "Durability")."""
import json
import os
import pty
import re
import select
import shutil
import subprocess

from harness import REMITC, REMITVM, Workspace, expect, main, read_trace, run

HOST = """capability web.fetch(url: Str) -> Str
  tags untrusted
  cost 0.000012
  idempotent
model llm cost 0.01
"""

PROGRAM = """program fetcher
uses web.fetch

fn main() -> Int {
  let a = web.fetch("https://example.org/a")
  let b = web.fetch("https://example.org/b") retry 1 else "none"
  let c = web.fetch("https://example.org/c")
  return len(a) + len(b) + len(c)
}
"""

FIXTURES = {"capabilities": {"web.fetch": [
    {"args": {"url": "https://example.org/a"}, "output": "aa", "cost_usd": 0.000012},
    {"args": {"url": "https://example.org/b"}, "error": "down", "cost_usd": 0.000012},
    {"args": {"url": "https://example.org/b"}, "output": "b", "cost_usd": 0.000012},
    {"args": {"url": "https://example.org/c"}, "output": "ccc"}]}}

POLICY = """[grant."web.fetch"]
max_calls = 10
"""

BAD = """program bad

fn main() -> Int {
  return "text"
}
"""

ESC = "\x1b["


def workspace():
    return Workspace({"host.rmti": HOST, "prog.rmt": PROGRAM, "bad.rmt": BAD, "policy.toml": POLICY,
                      "fixtures/run.json": json.dumps(FIXTURES)})


def run_env(tool, *args, cwd=None, env=None, drop=()):
    """run() with environment variables set (env) or removed (drop)."""
    full = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "CLICOLOR_FORCE", *drop)}
    full.update(env or {})
    proc = subprocess.run([tool, *map(str, args)], cwd=cwd, env=full, capture_output=True, timeout=60)

    class R:
        code = proc.returncode
        out = proc.stdout.decode("utf-8", "replace")
        err = proc.stderr.decode("utf-8", "replace")

        def __repr__(self):
            return f"exit {self.code}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"
    return R()


def run_at_terminal(tool, *args, cwd=None):
    """Runs a tool with stdout and stderr on a pseudo-terminal; returns (exit code, what it wrote)."""
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "CLICOLOR_FORCE")}
    env["TERM"] = "xterm"
    proc = subprocess.Popen([tool, *map(str, args)], cwd=cwd, stdin=subprocess.DEVNULL, stdout=follower,
                            stderr=follower, env=env)
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 30)
        if not ready:
            proc.kill()
            break
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return proc.wait(timeout=30), b"".join(chunks).decode("utf-8", "replace")


def test_colour_follows_the_flag_the_environment_and_the_terminal():
    with workspace() as ws:
        plain = run_env(REMITC, "check", "bad.rmt", cwd=ws.path)
        expect(plain.code == 1 and ESC not in plain.err and "error[E0109]" in plain.err, "no colour in a pipe", plain)
        always = run_env(REMITC, "check", "bad.rmt", "--color", "always", cwd=ws.path)
        expect(always.code == 1 and f"{ESC}1;31merror[E0109]{ESC}0m" in always.err, "--color always", always)
        expect(re.sub(r"\x1b\[[0-9;]*m", "", always.err) == plain.err, "colour adds styles and nothing else", always)
        forced = run_env(REMITC, "check", "bad.rmt", cwd=ws.path, env={"CLICOLOR_FORCE": "1"})
        expect(forced.err == always.err, "CLICOLOR_FORCE colours a pipe", forced)
        zero = run_env(REMITC, "check", "bad.rmt", cwd=ws.path, env={"CLICOLOR_FORCE": "0"})
        expect(ESC not in zero.err, "CLICOLOR_FORCE=0 does not", zero)
        both = run_env(REMITC, "check", "bad.rmt", cwd=ws.path, env={"CLICOLOR_FORCE": "1", "NO_COLOR": "1"})
        expect(ESC not in both.err, "NO_COLOR wins over CLICOLOR_FORCE", both)
        flag = run_env(REMITC, "check", "bad.rmt", "--color=always", cwd=ws.path, env={"NO_COLOR": "1"})
        expect(ESC in flag.err, "the flag wins over NO_COLOR", flag)
        never = run_env(REMITC, "check", "bad.rmt", "--color", "never", cwd=ws.path, env={"CLICOLOR_FORCE": "1"})
        expect(ESC not in never.err, "--color never", never)
        js = run_env(REMITC, "check", "bad.rmt", "--json", "--color", "always", cwd=ws.path)
        expect(ESC not in js.out and json.loads(js.out)["ok"] is False, "JSON is never coloured", js)
        code, text = run_at_terminal(REMITC, "check", "bad.rmt", cwd=ws.path)
        expect(code == 1 and f"{ESC}1;31merror[E0109]" in text, f"colour at a terminal: {text!r}")
        ok = run_env(REMITC, "check", "prog.rmt", "--color", "always", cwd=ws.path)
        expect(f"{ESC}1;32mok:{ESC}0m prog.rmt" in ok.out, "the ok line is highlighted", ok)
        bad = run_env(REMITC, "check", "bad.rmt", "--color", "sometimes", cwd=ws.path)
        expect(bad.code == 2 and "--color must be auto, always or never, not 'sometimes'" in bad.err, "a bad --color",
               bad)


def bash_complete(script, words, cword=None):
    """What the bash completion function offers for `words` (the last one being completed)."""
    cword = len(words) - 1 if cword is None else cword
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    probe = (f"{script}\nCOMP_WORDS=({quoted}); COMP_CWORD={cword}; COMP_LINE=\"${{COMP_WORDS[*]}}\"\n"
             "_remit_complete; printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", probe], capture_output=True, text=True, timeout=30)
    expect(proc.returncode == 0, f"bash ran the completion: {proc.stderr}")
    return set(filter(None, proc.stdout.splitlines()))


def test_bash_completion_completes_commands_flags_and_values():
    r = run(REMITC, "completions", "bash")
    expect(r.code == 0 and "complete -F _remit_complete remitc remitvm remit" in r.out, "the bash script", r)
    script = r.out
    expect(bash_complete(script, ["remitvm", "ru"]) == {"run"}, "a command")
    expect({"check", "completions", "diff"} <= bash_complete(script, ["remitc", ""]), "every command")
    expect(bash_complete(script, ["remitc", "--v"]) == {"--version"}, "--version")
    expect(bash_complete(script, ["remitvm", "approvals", "d"]) == {"deny"}, "a subcommand")
    expect(bash_complete(script, ["remitvm", "run", "prog.rmt", "--po"]) == {"--policy"}, "a flag")
    expect(bash_complete(script, ["remitvm", "approvals", "deny", "--re"]) == {"--reason"}, "a subcommand's flag")
    expect(bash_complete(script, ["remit", "run", "-"]) >= {"-i", "--input", "--inputs", "--approve-all", "--color"},
           "remit run's prototype flags")
    expect(bash_complete(script, ["remitvm", "mcp", "--approvals", "o"]) == {"operator"}, "a flag's choices")
    expect(bash_complete(script, ["remitc", "check", "--color", ""]) == {"auto", "always", "never"}, "--color's")
    expect(bash_complete(script, ["remitc", "completions", ""]) == {"bash", "zsh", "fish"}, "an operand's choices")
    expect(bash_complete(script, ["remitvm", "run", "--max-steps", ""]) == set(), "a number completes nothing")
    with workspace() as ws:
        r = run(REMITVM, "run", "prog.rmt", cwd=ws.path)
        run_id = re.search(r"runs/(\S+)\.jsonl", r.err).group(1)
        probe = f"cd '{ws.path}'\n{script}"
        expect(bash_complete(probe, ["remitvm", "trace", run_id[:6]]) == {run_id}, "a run id")
        expect(bash_complete(probe, ["remitvm", "run", "pro"]) == {"prog.rmt"}, "a file operand")
        expect(bash_complete(probe, ["remitvm", "run", "--fixtures", "fix"]) == {"fixtures"}, "a file value")
        expect(bash_complete(probe, ["remitvm", "run", "--state-dir", "fix"]) == {"fixtures"}, "a directory value")


def test_zsh_and_fish_scripts_parse():
    for shell in ("zsh", "fish"):
        r = run(REMITC, "completions", shell)
        expect(r.code == 0 and "remitvm" in r.out and "approvals" in r.out, f"the {shell} script", r)
        binary = shutil.which(shell)
        expect(binary is not None, f"{shell} is installed (scripts/install-deps installs it)")
        check = subprocess.run([binary, "-n"], input=r.out, capture_output=True, text=True, timeout=30)
        expect(check.returncode == 0, f"{shell} -n accepts the script: {check.stderr}")
    zsh = run(REMITC, "completions", "zsh").out
    probe = zsh + "\nprint -r -- ${_remit_sub[remitvm approvals]}\nprint -r -- ${_remit_value[remitvm mcp --approvals]}\n"
    out = subprocess.run(["zsh", "-f", "-c", "autoload -U compinit && compinit -u -D\n" + probe], capture_output=True,
                         text=True, timeout=30)
    expect(out.returncode == 0 and out.stdout.splitlines() == ["list show approve deny", "words:client operator"],
           f"zsh loads the script and its tables: {out.stdout!r} {out.stderr!r}")
    fish = run(REMITC, "completions", "fish").out
    probe = fish + "\ncomplete -C 'remitvm approvals d'\ncomplete -C 'remitvm mcp --approvals o'\n"
    out = subprocess.run(["fish", "--no-config", "-c", probe], capture_output=True, text=True, timeout=30)
    lines = [line.split("\t")[0] for line in out.stdout.splitlines()]
    expect(out.returncode == 0 and "deny" in lines and "operator" in lines, f"fish completes: {out.stdout!r} {out.stderr!r}")
    bad = run(REMITC, "completions", "powershell")
    expect(bad.code == 2 and "bash, zsh and fish" in bad.err, "an unknown shell", bad)


def test_progress_shows_each_call_as_it_starts_and_ends():
    with workspace() as ws:
        r = run(REMITVM, "run", "prog.rmt", "--progress", cwd=ws.path)
        expect(r.code == 0 and r.out.strip() == "6", "the run", r)
        lines = [line for line in r.err.splitlines() if line.startswith("  ")]
        expect(lines == [
            "  → [1] web.fetch at main#0: …",
            "  ✓ [1] web.fetch at main#0: " + lines[1].split(": ", 1)[1],
            "  → [2] web.fetch at main#1: …",
            "  ✗ [2] web.fetch at main#1: CapabilityFailed: down",
            "  → [3] web.fetch at main#1 (retry 1): …",
            "  ✓ [3] web.fetch at main#1 (retry 1): " + lines[5].split(": ", 1)[1],
            "  → [4] web.fetch at main#2: …",
            "  ✓ [4] web.fetch at main#2: " + lines[7].split(": ", 1)[1],
        ], "each attempt starts and ends", r)
        expect(re.fullmatch(r"\d+ ms, \$0\.000012", lines[1].split(": ", 1)[1]), "its time and cost", r)
        expect(re.fullmatch(r"\d+ ms, \$0\.000012", lines[7].split(": ", 1)[1]), "the declared cost by default", r)
        quiet = run(REMITVM, "run", "prog.rmt", cwd=ws.path)
        expect(quiet.code == 0 and "→" not in quiet.err, "off by default in a pipe", quiet)
        code, text = run_at_terminal(REMITVM, "run", "prog.rmt", cwd=ws.path)
        expect(code == 0 and "✓" in text and "\r\x1b[K" in text, f"on by default at a terminal: {text!r}")
        code, text = run_at_terminal(REMITVM, "run", "prog.rmt", "--no-progress", cwd=ws.path)
        expect(code == 0 and "✓" not in text, f"--no-progress: {text!r}")


def test_costs_show_the_digits_they_need():
    with workspace() as ws:
        r = run(REMITVM, "run", "prog.rmt", cwd=ws.path)
        expect("(spent $0.000048, 4 call(s)" in r.err, "the trace line", r)
        run_id = re.search(r"runs/(\S+)\.jsonl", r.err).group(1)
        t = run(REMITVM, "trace", run_id, cwd=ws.path)
        expect("cost $0.000012" in t.out and "spent $0.000048" in t.out, "the timeline", t)
        c = run(REMITC, "check", "prog.rmt", cwd=ws.path)
        expect("worst-case cost $0.000048" in c.out and "≤ $0.000048" in c.out, "the manifest summary", c)


def test_fixture_runs_skip_fsync_and_adapter_runs_keep_it():
    lib = os.environ.get("REMIT_KILLPOINT_LIB")
    expect(lib and os.path.exists(lib), "ctest names the kill-point library (tests/CMakeLists.txt)")
    adapter = ("import json, sys\n"
               "for line in sys.stdin:\n"
               "    r = json.loads(line)\n"
               "    print(json.dumps({'id': r['id'], 'ok': True, 'result': 'x'}), flush=True)\n")
    with workspace() as ws:
        ws.write("adapter.py", adapter)
        for mode, extra in (("fixtures", []), ("adapter", ["--adapter", f"python3 {ws.path / 'adapter.py'}"])):
            log = ws.path / f"{mode}.log"
            r = run_env(REMITVM, "run", "prog.rmt", *extra, cwd=ws.path,
                        env={"LD_PRELOAD": lib, "REMIT_KILLPOINT_LOG": str(log),
                             "ASAN_OPTIONS": ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"),
                                                                     "verify_asan_link_order=0"]))})
            expect(r.code == 0, f"the {mode} run", r)
            calls = log.read_text()
            run_id = re.search(r"runs/(\S+)\.jsonl", r.err).group(1)
            expect(len(read_trace(ws.path / ".remit" / "runs" / f"{run_id}.jsonl")) > 4, f"the {mode} trace is whole")
            if mode == "fixtures":
                expect("w" in calls and "s" not in calls, f"a fixture run writes without fsync: {calls}")
            else:
                expect(calls.count("s") >= 5, f"an adapter run fsyncs run_start, each dispatch and result: {calls}")


if __name__ == "__main__":
    main(globals())
