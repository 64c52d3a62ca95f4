#!/usr/bin/env python3
"""Hostile files and values end to end: every tool reads only regular files of bounded size
(a FIFO, a device or a directory is named for what it is, never waited on or read without end),
and says precisely what is wrong with a file it refuses."""
import ctypes
import json
import os
import pathlib
import struct
import subprocess
import time

from harness import REMIT, REMITC, REMITVM, Workspace, expect, main, run

HOST = """input secret tags private

capability notes.save(text: Str) -> Str
  cost 0.01
  approval always
"""

PURE = """program pure
fn main(n: Int) -> Int {
  return n + 1
}
"""

SAVER = """program saver
uses notes.save
budget usd 0.1
fn main(text: Str) -> Str {
  return notes.save(text)
}
"""

POLICY = '[grant."notes.save"]\nmax_calls = 1\n'

# A tool that blocks (a FIFO opened for reading) is stopped by this timeout and fails the test.
QUICK = 20


def reseal(data):
    """The .rbc with its checksum recomputed (XXH3_64bits of every byte after the checksum field,
    docs/bytecode.md), through the libxxhash the build links."""
    xxh = ctypes.CDLL("libxxhash.so.0")
    xxh.XXH3_64bits.restype = ctypes.c_uint64
    xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    body = bytes(data[24:])
    return bytes(data[:16]) + struct.pack("<Q", xxh.XXH3_64bits(body, len(body))) + body


def fifo(ws, name):
    path = ws.path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def test_a_fifo_is_refused_wherever_a_file_is_read():
    with Workspace({"host.rmti": HOST, "prog.rmt": PURE, "saver.rmt": SAVER, "policy.toml": POLICY,
                    "fixtures/run.json": "{}"}) as ws:
        fifo(ws, "pipe.rmt")
        r = run(REMITC, "check", "pipe.rmt", cwd=ws.path, timeout=QUICK)
        expect(r.code == 2 and "pipe.rmt is a FIFO (named pipe), not a regular file" in r.err, "program", r)
        fifo(ws, "inputs.json")
        r = run(REMITVM, "run", "prog.rmt", "--allow-all", "--inputs", "inputs.json", cwd=ws.path, timeout=QUICK)
        expect(r.code == 2 and "inputs.json is a FIFO (named pipe), not a regular file" in r.err, "inputs", r)
        fifo(ws, "pipe.json")
        r = run(REMITVM, "run", "saver.rmt", "-i", "text=x", "--fixtures", "pipe.json", cwd=ws.path, timeout=QUICK)
        expect(r.code == 2 and "pipe.json is a FIFO (named pipe), not a regular file" in r.err, "fixtures", r)
        fifo(ws, ".remit/approvals.json")
        r = run(REMITVM, "run", "saver.rmt", "-i", "text=x", cwd=ws.path, timeout=QUICK)
        expect(r.code == 2 and "approvals.json is a FIFO (named pipe), not a regular file" in r.err,
               "the approval store", r)
        r = run(REMITVM, "approve", "0" * 64, cwd=ws.path, timeout=QUICK)
        expect(r.code == 2 and "is a FIFO (named pipe), not a regular file" in r.err, "approve", r)
        fifo(ws, "policy2.toml")
        r = run(REMITC, "check", "saver.rmt", "--policy", "policy2.toml", cwd=ws.path, timeout=QUICK)
        expect(r.code == 2 and "policy2.toml is a FIFO (named pipe), not a regular file" in r.err, "policy", r)


def test_a_device_is_refused_not_read():
    with Workspace({"host.rmti": HOST, "saver.rmt": SAVER, "policy.toml": POLICY}) as ws:
        os.symlink("/dev/zero", ws.path / "zero.json")
        r = run(REMITVM, "run", "saver.rmt", "-i", "text=x", "--fixtures", "zero.json", cwd=ws.path, timeout=QUICK)
        expect(r.code == 2 and "zero.json is a character device, not a regular file" in r.err,
               "a symlink to /dev/zero as fixtures", r)
        r = run(REMITVM, "run", "saver.rmt", "--allow-all", "--inputs", "zero.json", cwd=ws.path, timeout=QUICK)
        expect(r.code == 2 and "zero.json is a character device" in r.err, "as inputs", r)


def test_host_discovery_stops_at_a_host_rmti_that_is_not_a_file():
    # Without the fix the directory was skipped and the parent's host interface used silently.
    with Workspace({"host.rmti": HOST, "app/prog.rmt": PURE}) as ws:
        (ws.path / "app/host.rmti").mkdir()
        r = run(REMITC, "check", "app/prog.rmt", cwd=ws.path, timeout=QUICK)
        expect(r.code == 2 and "app/host.rmti is a directory, not a file" in r.err, "a directory", r)
        (ws.path / "app/host.rmti").rmdir()
        fifo(ws, "app/host.rmti")
        r = run(REMITC, "check", "app/prog.rmt", cwd=ws.path, timeout=QUICK)
        expect(r.code == 2 and "app/host.rmti is a FIFO (named pipe)" in r.err, "a FIFO", r)


def test_an_adapter_that_is_a_directory_is_refused_at_start():
    with Workspace({"host.rmti": HOST, "saver.rmt": SAVER, "policy.toml": POLICY}) as ws:
        (ws.path / "adapters").mkdir()
        r = run(REMITVM, "run", "saver.rmt", "-i", "text=x", "--adapter", "./adapters", cwd=ws.path, timeout=QUICK)
        expect(r.code == 2 and "adapter program './adapters' is a directory, not a program" in r.err, "directory", r)


def test_inputs_file_problems_are_named_precisely():
    with Workspace({"host.rmti": HOST, "prog.rmt": PURE}) as ws:
        ws.write("bad.json", '{"n": 1,,}')
        r = run(REMITVM, "run", "prog.rmt", "--allow-all", "--inputs", "bad.json", cwd=ws.path)
        expect(r.code == 2 and "invalid JSON in bad.json at line 1, column 9" in r.err, "not JSON", r)
        ws.write("list.json", "[1, 2]")
        r = run(REMITVM, "run", "prog.rmt", "--allow-all", "--inputs", "list.json", cwd=ws.path)
        expect(r.code == 2 and "list.json must hold a JSON object of inputs (name: value), not an array" in r.err,
               "not an object", r)
        with open(ws.path / "big.json", "wb") as f:
            f.truncate((64 << 20) + 1)  # sparse: nothing is written
        r = run(REMITVM, "run", "prog.rmt", "--allow-all", "--inputs", "big.json", cwd=ws.path)
        expect(r.code == 2 and "big.json is larger than 64 MiB, the limit for an inputs file" in r.err, "too big", r)
        r = run(REMITVM, "run", "prog.rmt", "--allow-all", "--inputs", "missing.json", cwd=ws.path)
        expect(r.code == 2 and "no such file: missing.json" in r.err, "missing", r)
        r = run(REMITVM, "run", "prog.rmt", "--allow-all", "-i", "n=[[", cwd=ws.path)
        expect(r.code == 2 and "invalid JSON in input 'n'" in r.err and "(type Int is given as JSON)" in r.err,
               "a bad -i value", r)



def test_memory_errors_quote_the_real_numbers():
    prog = """program huge
fn main() -> Int {
  let xs = range(1000000000000)
  return len(xs)
}
"""
    with Workspace({"host.rmti": HOST, "prog.rmt": prog}) as ws:
        r = run(REMITVM, "run", "prog.rmt", "--allow-all", "--json", cwd=ws.path)
        err = json.loads(r.out)["error"]
        # 10^12 items of 16 bytes, not the heap's internal cap of 32 GiB.
        expect(r.code == 1 and "16000000000000 more were needed" in err["message"] and
               err["details"] == {"limit": "max_memory", "value": 268435456}, "the bytes range() needed", r)
        r = run(REMITVM, "run", "prog.rmt", "--allow-all", "--max-memory", str(40 << 30), cwd=ws.path)
        expect(r.code == 2 and "--max-memory 42949672960 is more than the 34359738368 bytes (32 GiB)" in r.err,
               "a budget the heap cannot honour is refused, not clamped", r)



def test_a_host_hash_mismatch_shows_prefixes_that_differ():
    with Workspace({"host.rmti": HOST, "prog.rmt": PURE}) as ws:
        expect(run(REMITC, "build", "prog.rmt", cwd=ws.path).code == 0, "build")
        data = bytearray((ws.path / "prog.rbc").read_bytes())
        real = data[88:152].decode()
        # The same first 12 digits, a different 13th: the message used to print two equal prefixes.
        forged = real[:12] + ("0" if real[12] != "0" else "1") + real[13:]
        data[88:152] = forged.encode()
        ws.write("prog.rbc", reseal(data))
        r = run(REMITVM, "run", "prog.rbc", "--allow-all", "-i", "n=1", cwd=ws.path)
        expect(r.code == 1 and f"(host hash {forged[:13]} in the artifact, {real[:13]} here)" in r.err,
               "13 digits, enough to tell them apart", r)



DEEP = "[" * 200000 + "]" * 200000  # valid JSON, 200,000 levels deep


def test_deep_json_is_refused_before_it_is_parsed():
    with Workspace({"host.rmti": HOST, "saver.rmt": SAVER, "prog.rmt": PURE, "policy.toml": POLICY}) as ws:
        ws.write("deep.json", '{"capabilities": {"notes.save": [{"output": ' + DEEP + '}]}}')
        r = run(REMITVM, "run", "saver.rmt", "-i", "text=x", "--fixtures", "deep.json", cwd=ws.path)
        expect(r.code == 2 and "invalid JSON in deep.json: nested deeper than 256 levels" in r.err, "fixtures", r)
        ws.write("inputs.json", '{"n": ' + DEEP + '}')
        r = run(REMITVM, "run", "prog.rmt", "--inputs", "inputs.json", cwd=ws.path)
        expect(r.code == 2 and "nested deeper than 256 levels" in r.err, "inputs", r)
        ws.write(".remit/approvals.json", '{"approved": {"x": ' + DEEP + '}}')
        ws.write("fixtures/run.json", '{"capabilities": {"notes.save": [{"output": "ok"}]}}')
        r = run(REMITVM, "run", "saver.rmt", "-i", "text=x", cwd=ws.path)
        expect(r.code == 2 and "approvals.json is not a valid approval store: invalid JSON" in r.err and
               "nested deeper than 256 levels" in r.err, "the approval store, for run", r)
        r = run(REMITVM, "approve", "0" * 64, cwd=ws.path)
        expect(r.code == 2 and "nested deeper than 256 levels" in r.err, "and for approve", r)
        # A trace whose event is nested too deep: replay refuses it with the line.
        (ws.path / ".remit/approvals.json").unlink()
        r = run(REMITVM, "run", "saver.rmt", "-i", "text=x", "--approve-all", cwd=ws.path)
        expect(r.code == 0, "a run that writes a trace", r)
        trace = next((ws.path / ".remit/runs").glob("*.jsonl"))
        lines = trace.read_text().splitlines()
        lines.insert(1, '{"event": "note", "x": ' + DEEP + '}')
        trace.write_text("\n".join(lines) + "\n")
        r = run(REMITVM, "replay", trace.stem, cwd=ws.path)
        expect(r.code == 2 and f"{trace.name}:2: the event is nested deeper than 256 levels" in r.err, "replay", r)


def test_a_policy_key_of_150000_parts_is_an_error_not_a_crash():
    key = ".".join(["a"] * 150000)
    with Workspace({"host.rmti": HOST, "prog.rmt": PURE, "policy.toml": f"[grant.llm]\n{key} = 1\n"}) as ws:
        for tool, args in ((REMITC, ["check", "prog.rmt"]), (REMITVM, ["run", "prog.rmt", "-i", "n=1"])):
            r = run(tool, *args, cwd=ws.path)
            expect(r.code == 1 and "policy.toml:2:60: error[E0504]: policy nests keys, tables or arrays more than "
                   "32 levels deep" in r.err, "E0504 at the 33rd level", r)
    # Sent as one remit_check request, it used to kill the server for every client (99,000 parts fit
    # the 200,000-character argument limit).
    from test_mcp import Client
    key = ".".join(["a"] * 99000)
    with Client() as c:
        c.initialize()
        out = c.tool("remit_check", {"program": PURE, "host": HOST, "policy": f"[grant.llm]\n{key} = 1\n"})
        expect(out["ok"] is False and any("E0504" in e for e in out["errors"]), "an E0504 reply", out)
        again = c.tool("remit_check", {"program": PURE, "host": HOST})
        expect(again["ok"] is True, "the server still answers", again)
        expect(c.close() == 0, "and ends cleanly")



DUMPER = """program dumper
uses notes.save
budget usd 0.1
fn main(text: Str) -> Str {
  let first = notes.save(text)
  return "dumped {first}"
}
"""


def trace_start(ws, result):
    path = ws.path / result.err.splitlines()[-1].split()[1]
    return json.loads(path.read_text().splitlines()[0])


def test_a_copied_program_hash_is_refused_and_cannot_borrow_approvals():
    files = {"host.rmti": HOST, "a/saver.rmt": SAVER, "b/dumper.rmt": DUMPER, "a/policy.toml": POLICY,
             "b/policy.toml": POLICY, "a/fixtures/run.json": '{"capabilities": {"notes.save": [{"output": "ok"}]}}',
             "b/fixtures/run.json": '{"capabilities": {"notes.save": [{"output": "ok"}]}}'}
    with Workspace(files) as ws:
        built = {}
        for prog in ("a/saver", "b/dumper"):
            r = run(REMITC, "build", prog + ".rmt", cwd=ws.path)
            expect(r.code == 0, "build", r)
            built[prog] = r.out.split("program hash ")[1].strip()
        a_hash = built["a/saver"]
        # A's call pauses; approve it.
        r = run(REMITVM, "run", "a/saver.rbc", "-i", "text=secret", cwd=ws.path)
        expect(r.code == 3, "A pauses for approval", r)
        start = trace_start(ws, r)
        expect(start["program_hash"] == a_hash, "the trace records the hash build printed", start)
        digest = r.err.split("remitvm approve ")[1].split()[0]
        expect(run(REMITVM, "approve", digest, cwd=ws.path).code == 0, "approve A's call")
        # B with A's hash in its header (and the checksum fixed): refused before anything runs.
        data = bytearray((ws.path / "b/dumper.rbc").read_bytes())
        data[24:88] = a_hash.encode()
        ws.write("b/forged.rbc", reseal(data))
        r = run(REMITVM, "run", "b/forged.rbc", "-i", "text=secret", cwd=ws.path)
        expect(r.code == 2 and f"program hash: the header says {a_hash} but the module's content hashes to "
               f"{built['b/dumper']}" in r.err, "the forged artifact is refused", r)
        store = json.loads(ws.read(".remit/approvals.json"))
        expect(digest in store["approved"] and not store.get("consumed"), "A's approval is untouched", store)
        # B itself, honest, asks for its own approval: the same call under another program.
        r = run(REMITVM, "run", "b/dumper.rbc", "-i", "text=secret", cwd=ws.path)
        expect(r.code == 3 and digest not in r.err, "B's call needs B's approval", r)
        # A from source is the same program as A's .rbc: it consumes the approval.
        r = run(REMITVM, "run", "a/saver.rmt", "-i", "text=secret", cwd=ws.path)
        expect(r.code == 0 and trace_start(ws, r)["program_hash"] == a_hash, "source and .rbc share the hash", r)


def test_formatting_keeps_the_run_hash():
    with Workspace({"host.rmti": HOST, "saver.rmt": SAVER}) as ws:
        first = run(REMITC, "build", "saver.rmt", cwd=ws.path)
        ws.write("saver.rmt", "# a comment\n\n" + SAVER.replace("  return", "\n\n  # spaced out\n  return"))
        second = run(REMITC, "build", "saver.rmt", cwd=ws.path)
        expect(first.code == 0 and second.code == 0 and
               first.out.split("program hash ")[1] == second.out.split("program hash ")[1],
               "comments and layout do not change the hash", (first, second))
        ws.write("saver.rmt", SAVER.replace("budget usd 0.1", "budget usd 0.2"))
        third = run(REMITC, "build", "saver.rmt", cwd=ws.path)
        expect(third.out.split("program hash ")[1] != first.out.split("program hash ")[1], "meaning does", third)



def peak_rss(args, cwd):
    """Peak RSS in bytes of one remitvm run, measured with os.wait4."""
    proc = subprocess.Popen([REMITVM, *map(str, args)], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = proc.stdout.read()
    proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, json.loads(out), usage.ru_maxrss * 1024


GROW_STR = """program grow
fn main() -> Int {
  var s = "x"
  for i in range(1000000000) {
    s = s + "abcdefghijklmnopqrstuvwxyz0123456789"
  }
  return len(s)
}
"""

GROW_MIX = """program mix
fn main() -> Int {
  var s = ""
  var xs = []
  for i in range(1000000000) {
    s = s + "{i},"
    xs = xs + [i]
  }
  return len(s) + len(xs)
}
"""

MiB = 1 << 20
# A sanitizer build has its own allocator and shadow memory: its RSS says nothing about ours.
SANITIZED = os.environ.get("REMIT_SANITIZED") == "1"


def test_growth_near_the_memory_limit_is_linear_and_within_the_limit():
    # Once doubling no longer fitted, every append copied the whole string (it did not stop in
    # 120 s), and the old buffer was not counted while the new one was filled (RSS reached 4x
    # max_memory). Now: R0701 for memory in well under a second, and the process's peak RSS
    # (its baseline of a few MiB included) stays within max_memory + 16 MiB (docs/language.md, 46).
    limit = 64 * MiB
    with Workspace({"host.rmti": HOST, "grow.rmt": GROW_STR, "mix.rmt": GROW_MIX}) as ws:
        for prog in ("grow.rmt", "mix.rmt"):
            started = time.monotonic()
            code, env, rss = peak_rss(["run", prog, "--allow-all", "--json", "--max-memory", limit,
                                       "--max-steps", 10**12, "--max-wall-ms", 600000], ws.path)
            elapsed = time.monotonic() - started
            expect(code == 1 and env["error"]["details"] == {"limit": "max_memory", "value": limit},
                   f"{prog}: the memory limit stops it", env)
            expect(elapsed < (60 if SANITIZED else 10), f"{prog}: stopped after {elapsed:.1f} s", env)
            expect(SANITIZED or rss <= limit + 16 * MiB,
                   f"{prog}: peak RSS {rss / MiB:.1f} MiB for a {limit // MiB} MiB limit", env)


def test_wall_time_bounds_work_inside_builtins():
    # A loop whose body is one big replace: each iteration was charged a few steps, and the clock
    # was read every 1024 of them, so a 500 ms limit fired after tens of seconds.
    loop = """program loop
fn main(s: Str) -> Int {
  var n = 0
  for i in range(1000000000) {
    n = n + len(replace(s, "a", "b"))
  }
  return n
}
"""
    once = """program once
fn main(s: Str) -> Int {
  return len(replace(s, "a", "aa"))
}
"""
    with Workspace({"host.rmti": HOST, "loop.rmt": loop, "once.rmt": once}) as ws:
        ws.write("big.json", json.dumps({"s": "a" * (16 * MiB)}))
        r = run(REMITVM, "run", "loop.rmt", "--allow-all", "--json", "--inputs", "big.json", "--max-wall-ms", 500,
                "--max-steps", 10**12, cwd=ws.path, timeout=30)
        env = json.loads(r.out)
        expect(r.code == 1 and env["error"]["details"] == {"limit": "wall_ms", "value": 500}, "the wall limit", r)
        # One replace of 16 MiB is no longer one uninterruptible step: a 5 ms limit stops it inside.
        r = run(REMITVM, "run", "once.rmt", "--allow-all", "--json", "--inputs", "big.json", "--max-wall-ms", 5,
                "--max-memory", 512 * MiB, cwd=ws.path)
        env = json.loads(r.out)
        expect(r.code == 1 and env["error"]["details"]["limit"] == "wall_ms" and env["error"]["line"] == 3,
               "stopped inside the replace", r)
        # (The wall limit is raised: this is about steps, and sanitizer builds are slow.)
        r = run(REMITVM, "run", "once.rmt", "--allow-all", "--inputs", "big.json", "--max-memory", 512 * MiB,
                "--max-steps", 10**5, "--max-wall-ms", 600000, "--json", cwd=ws.path, timeout=600)
        env = json.loads(r.out)
        expect(r.code == 1 and env["error"]["details"]["limit"] == "steps", "its work is charged as steps", r)


def test_searches_and_unique_are_not_quadratic():
    quad = """program quad
fn main(s: Str, p: Str) -> Bool {
  return contains(s, p) or p in s or len(split(s, p)) > 1 or replace(s, p, "") != s
}
"""
    uniq = """program uniq
fn main() -> Int {
  let base = range(16)
  let xs = for i in range(50000) {
    base + [i]
  }
  return len(unique(xs))
}
"""
    with Workspace({"host.rmti": HOST, "quad.rmt": quad, "uniq.rmt": uniq}) as ws:
        # The worst case of a naive search: about 4 M x 64 K byte comparisons (minutes) before.
        ws.write("quad.json", json.dumps({"s": "a" * (4 * MiB), "p": "a" * (64 << 10) + "b"}))
        r = run(REMITVM, "run", "quad.rmt", "--allow-all", "--inputs", "quad.json", cwd=ws.path, timeout=20)
        expect(r.code == 0 and r.out.strip() == "false", "linear searches", r)
        # 50,000 lists whose first 16 items agree hash alike and were compared pairwise without
        # limit (a billion comparisons); each comparison is now work, and the step limit stops it.
        r = run(REMITVM, "run", "uniq.rmt", "--allow-all", "--json", "--max-steps", 10**7, cwd=ws.path, timeout=20)
        env = json.loads(r.out)
        expect(r.code == 1 and env["error"]["details"]["limit"] == "steps", "stopped by the step limit", r)


if __name__ == "__main__":
    main(globals())
