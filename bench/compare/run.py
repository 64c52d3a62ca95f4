#!/usr/bin/env python3
"""Run the same compute workloads in Remit, Lua 5.4, LuaJIT's interpreter and Python 3 and print
the ratios of their CPU times, with peak memory beside them.

Each workload in bench/compare/workloads/ exists three times (NAME.rmt, NAME.lua, NAME.py), with the
same algorithm; NAME.lua runs under both `lua5.4` and `luajit -joff`. Every implementation prints
one JSON value, which must equal the workload's checksum in workloads/expected.json, or this script
fails. Each implementation runs --repeat times, interleaved; the table gives the median CPU time
(user + sys of the process, from wait4, so process start is included) and the peak resident set
size, and the ratios Remit/other with their geometric means.

    python3 bench/compare/run.py --remitvm build/release/cli/remitvm
    python3 bench/compare/run.py --only sieve,nbody --repeat 9 --json /tmp/compare.json
    python3 bench/compare/run.py --instructions          # also count instructions under callgrind
    python3 bench/compare/run.py --baselines-only        # Lua, LuaJIT and Python only

Exit status: 0 when every run succeeded and every result is the expected one; 1 when a run failed or
printed another result; 2 when remitvm is missing or failed on every workload (or a baseline
interpreter is missing).

Only the standard library is used.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS_DIR = os.path.join(HERE, "workloads")
EXPECTED_FILE = os.path.join(WORKLOADS_DIR, "expected.json")
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))

# The table's rows, in order. Each has NAME.rmt, NAME.lua and NAME.py in workloads/.
WORKLOADS = ["sieve", "mandelbrot", "nbody", "spectralnorm", "bounce", "strings", "lists",
             "statemachine", "records"]
# A tiny program timed separately: process start, load and a trivial run.
STARTUP = "startup"
IMPLS = ["remit", "lua", "luajit", "python"]
BASELINES = ["lua", "luajit", "python"]
LABELS = {"remit": "remit", "lua": "lua5.4", "luajit": "luajit -joff", "python": "python3"}

DEFAULT_MAX_STEPS = 10_000_000_000
# The VM's default wall-clock limit is 10 s; a slow build should still finish.
DEFAULT_MAX_WALL_MS = 600_000

# The targets of docs/performance.md, checked on the table (and printed, never asserted in a test).
TARGET_GEOMEAN_LUA = 0.6
TARGET_MAX_LUA = 0.9
TARGET_RSS_LUA = 1.5


class RunFailure(Exception):
    """One implementation failed to run, or printed something that is not a JSON result."""


def resolve_tool(path: str, default_base: str | None = None) -> str | None:
    """An executable for PATH: a command name looked up on PATH, or a file path. A relative file path
    is tried against the current directory, then against default_base (the repository root)."""
    if os.sep not in path and "/" not in path:
        return shutil.which(path)
    candidates = [path]
    if default_base and not os.path.isabs(path):
        candidates.append(os.path.join(default_base, path))
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.abspath(c)
    return None


def real_python(path: str) -> str:
    """The interpreter behind PATH. A pyenv or asdf shim is a shell script that takes 50-150 ms to
    find the real one on every start, which would be charged to every Python run."""
    try:
        p = subprocess.run([path, "-c", "import sys; print(sys.executable)"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True, timeout=30)
        exe = p.stdout.strip()
        if p.returncode == 0 and exe and os.path.isfile(exe) and os.access(exe, os.X_OK):
            return exe
    except (OSError, subprocess.TimeoutExpired):
        pass
    return path


def parse_result(stdout: str):
    """The JSON value an implementation printed: the whole of stdout, or else its last non-empty
    line (in case something else was printed before it)."""
    text = stdout.strip()
    if not text:
        raise RunFailure("printed nothing on stdout")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    last = [line for line in text.splitlines() if line.strip()][-1]
    try:
        return json.loads(last)
    except json.JSONDecodeError as e:
        raise RunFailure(f"stdout is not JSON ({e}): {tail(text)}") from None


def tail(text: str, lines: int = 8) -> str:
    parts = text.strip().splitlines()
    out = "\n".join(parts[-lines:])
    return out if len(out) <= 2000 else out[-2000:]


class Sample:
    """One run: CPU seconds (user + sys), wall seconds, peak RSS in KiB, the parsed result."""

    def __init__(self, cpu: float, wall: float, rss_kib: int, value):
        self.cpu, self.wall, self.rss_kib, self.value = cpu, wall, rss_kib, value


def build_measure(scratch: str) -> str:
    """Compiles measure.c (the child-process timer, see its header) into `scratch`."""
    exe = os.path.join(scratch, "measure")
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise RunFailure("no C compiler (cc) to build bench/compare/measure.c")
    p = subprocess.run([cc, "-O2", "-o", exe, os.path.join(HERE, "measure.c")], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise RunFailure(f"cannot build measure.c:\n{indent(tail(p.stdout))}")
    return exe


def run_once(measure: str, cmd: list[str], timeout: float, cwd: str) -> Sample:
    """Runs cmd once under `measure`, which reports the command's own CPU time (user + sys) and
    peak RSS from wait4. Raises RunFailure."""
    fd, report = tempfile.mkstemp(prefix="remit-measure-")
    os.close(fd)
    try:
        start = time.perf_counter()
        try:
            proc = subprocess.run([measure, report, str(max(1, math.ceil(timeout)))] + cmd, cwd=cwd,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                  text=True, timeout=timeout + 30)
        except subprocess.TimeoutExpired:
            raise RunFailure(f"timed out after {timeout:g} s") from None
        except OSError as e:
            raise RunFailure(f"could not start: {e}") from None
        wall = time.perf_counter() - start
        with open(report, encoding="utf-8") as f:
            fields = f.read().split()
    finally:
        os.unlink(report)
    if proc.returncode != 0 or len(fields) != 4:
        raise RunFailure(f"measure failed (exit {proc.returncode}): {tail(proc.stderr)}")
    utime_us, stime_us, rss_kib, status = (int(x) for x in fields)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9 and wall >= timeout:
        raise RunFailure(f"timed out after {timeout:g} s")
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        detail = tail(proc.stderr) or tail(proc.stdout) or "(no output)"
        raise RunFailure(f"exit status {code}:\n{indent(detail)}")
    return Sample((utime_us + stime_us) / 1e6, wall, rss_kib, parse_result(proc.stdout))


def first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""


def indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


class Runner:
    def __init__(self, args, measure: str):
        self.args = args
        self.measure = measure
        self.remitvm = args.remitvm_path
        self.remit_limits = ["--max-steps", str(args.max_steps)]
        if args.max_wall_ms:
            self.remit_limits += ["--max-wall-ms", str(args.max_wall_ms)]

    def command(self, impl: str, name: str, src_override: str | None = None) -> list[str]:
        if impl == "remit":
            src = src_override or os.path.join(WORKLOADS_DIR, name + ".rmt")
            return [self.remitvm, "run", src, "--allow-all"] + self.remit_limits
        if impl == "lua":
            return [self.args.lua_path, os.path.join(WORKLOADS_DIR, name + ".lua")]
        if impl == "luajit":
            # The interpreter alone: the JIT compiler off.
            return [self.args.luajit_path, "-joff", os.path.join(WORKLOADS_DIR, name + ".lua")]
        site = [] if self.args.python_site else ["-S"]
        return [self.args.python_path] + site + [os.path.join(WORKLOADS_DIR, name + ".py")]

    def run(self, impl: str, name: str, src: str | None = None) -> Sample:
        return run_once(self.measure, self.command(impl, name, src), self.args.timeout, WORKLOADS_DIR)

    def instructions(self, impl: str, name: str) -> int:
        """Instructions the whole process executes, counted by callgrind (repeatable, unlike time
        on a shared machine)."""
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"] + self.command(impl, name)
        p = subprocess.run(cmd, cwd=WORKLOADS_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           stdin=subprocess.DEVNULL, text=True, timeout=self.args.timeout * 100)
        m = re.search(r"Collected : (\d+)", p.stderr)
        if p.returncode != 0 or not m:
            raise RunFailure(f"callgrind failed (exit {p.returncode}): {tail(p.stderr)}")
        return int(m.group(1))


def note(msg: str) -> None:
    print(f"note: {msg}", file=sys.stderr, flush=True)


def fmt_ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f}"


def fmt_ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}"


def fmt_mib(kib: int | None) -> str:
    return "-" if kib is None else f"{kib / 1024:.1f}"


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def tool_version(cmd: list[str]) -> str:
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=10, stdin=subprocess.DEVNULL)
        out = p.stdout.strip().splitlines()
        return out[0] if out and p.returncode == 0 else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def measure_workload(runner: Runner, name: str, impls: list[str], repeat: int, expected) -> dict:
    """Runs each implementation `repeat` times, interleaved, and checks every result against the
    workload's checksum."""
    samples: dict[str, list[Sample]] = {i: [] for i in impls}
    errors: dict[str, str] = {}
    for _ in range(repeat):
        for impl in impls:
            if impl in errors:
                continue
            try:
                s = runner.run(impl, name)
            except RunFailure as e:
                errors[impl] = str(e)
                continue
            if expected is not None and s.value != expected:
                errors[impl] = (f"printed {json.dumps(s.value)}, expected {json.dumps(expected)} "
                                f"(workloads/expected.json)")
                continue
            samples[impl].append(s)
    ok = {i: samples[i] for i in impls if samples[i] and i not in errors}
    return {
        "name": name,
        "samples": samples,
        "cpu": {i: (statistics.median(s.cpu for s in ok[i]) if i in ok else None) for i in impls},
        "rss": {i: (max(s.rss_kib for s in ok[i]) if i in ok else None) for i in impls},
        "errors": errors,
    }


def measure_startup(runner: Runner, impls: list[str], runs: int) -> dict:
    """Times the tiny startup program: remitvm on a .rbc built by remitc, remitvm on the .rmt
    source, Lua, LuaJIT and Python. Median CPU time (user + sys), process start included."""
    info: dict = {"runs": runs, "cpu_ms": {}, "best_cpu_ms": {}, "wall_ms": {}, "rss_kib": {}, "notes": []}
    rows: list[tuple[str, str, list[str]]] = []
    tmp = None
    if "remit" in impls:
        remitc = runner.args.remitc_path
        if remitc is None:
            info["notes"].append(f"remitc not found ({runner.args.remitc}); .rbc start-up skipped")
        else:
            tmp = tempfile.mkdtemp(prefix="remit-compare-")
            # The .rbc goes in a scratch directory with a copy of the (empty) host interface, which
            # the VM looks for next to the program.
            shutil.copy(os.path.join(WORKLOADS_DIR, "host.rmti"), os.path.join(tmp, "host.rmti"))
            rbc = os.path.join(tmp, STARTUP + ".rbc")
            cmd = [remitc, "build", os.path.join(WORKLOADS_DIR, STARTUP + ".rmt"), "-o", rbc]
            try:
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   timeout=60, stdin=subprocess.DEVNULL)
                ok = p.returncode == 0 and os.path.isfile(rbc)
                why = first_line(p.stdout) if not ok else ""
            except (OSError, subprocess.TimeoutExpired) as e:
                ok, why = False, str(e)
            if ok:
                rows.append(("remitvm run startup.rbc", "remit", [rbc]))
            else:
                info["notes"].append(f"`remitc build` failed, so the .rbc start-up is skipped ({why or 'no output'})")
        rows.append(("remitvm run startup.rmt", "remit", []))
    for impl in BASELINES:
        if impl in impls:
            rows.append((f"{LABELS[impl]} startup", impl, []))

    expected = None
    try:
        for label, impl, extra in rows:
            samples = []
            try:
                for _ in range(runs):
                    s = runner.run(impl, STARTUP, extra[0] if extra else None)
                    if expected is None:
                        expected = s.value
                    elif s.value != expected:
                        raise RunFailure(f"result {json.dumps(s.value)} differs from {json.dumps(expected)}")
                    samples.append(s)
            except RunFailure as e:
                info["notes"].append(f"{label} failed: {e}")
                continue
            info["cpu_ms"][label] = statistics.median(s.cpu for s in samples) * 1000
            info["best_cpu_ms"][label] = min(s.cpu for s in samples) * 1000
            info["wall_ms"][label] = statistics.median(s.wall for s in samples) * 1000
            info["rss_kib"][label] = max(s.rss_kib for s in samples)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return info


def print_table(rows: list[dict], impls: list[str]) -> dict:
    """The ratio table. Returns the geometric means and the target checks."""
    others = [i for i in BASELINES if i in impls]
    header = ["workload"] + [f"{LABELS[i]} ms" for i in impls]
    if "remit" in impls:
        header += [f"/{LABELS[i]}" for i in others]
    header += [f"{LABELS[i]} MiB" for i in impls if i != "python"]
    if "remit" in impls and "lua" in impls:
        header += ["rss/lua"]
    body = []
    ratios: dict[str, list[float]] = {i: [] for i in others}
    rss_ratios = []
    for row in rows:
        cpu, rss = row["cpu"], row["rss"]
        cells = [row["name"]] + [fmt_ms(cpu.get(i)) for i in impls]
        row["ratios"] = {}
        if "remit" in impls:
            for i in others:
                r = cpu["remit"] / cpu[i] if cpu.get("remit") and cpu.get(i) else None
                row["ratios"][f"remit_{i}"] = r
                if r:
                    ratios[i].append(r)
                cells.append(fmt_ratio(r))
        cells += [fmt_mib(rss.get(i)) for i in impls if i != "python"]
        if "remit" in impls and "lua" in impls:
            rr = rss["remit"] / rss["lua"] if rss.get("remit") and rss.get("lua") else None
            row["ratios"]["rss_remit_lua"] = rr
            if rr:
                rss_ratios.append(rr)
            cells.append(fmt_ratio(rr))
        body.append(cells)
    means = {f"remit_{i}": geomean(ratios[i]) for i in others}
    footer = ["geomean"] + [""] * len(impls)
    if "remit" in impls:
        footer += [fmt_ratio(means[f"remit_{i}"]) for i in others]
    footer += [""] * (len(header) - len(footer))
    widths = [max(len(r[i]) for r in [header] + body + [footer]) for i in range(len(header))]

    def line(cells):
        first = cells[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(cells[1:], widths[1:])]
        return "  ".join([first] + rest)

    print(line(header))
    print("  ".join("-" * w for w in widths))
    for r in body:
        print(line(r))
    print("  ".join("-" * w for w in widths))
    print(line(footer))

    targets = {}
    if "remit" in impls and "lua" in impls and ratios["lua"]:
        g, worst = means["remit_lua"], max(ratios["lua"])
        targets["geomean_lua"] = {"value": g, "target": TARGET_GEOMEAN_LUA, "met": g <= TARGET_GEOMEAN_LUA}
        targets["max_lua"] = {"value": worst, "target": TARGET_MAX_LUA, "met": worst <= TARGET_MAX_LUA}
        if rss_ratios:
            w = max(rss_ratios)
            targets["max_rss_lua"] = {"value": w, "target": TARGET_RSS_LUA, "met": w <= TARGET_RSS_LUA}
    if "remit" in impls and "luajit" in impls and ratios["luajit"]:
        at_or_below = sum(1 for r in ratios["luajit"] if r <= 1.0)
        targets["at_or_below_luajit"] = {"value": at_or_below, "of": len(ratios["luajit"]),
                                         "met": 2 * at_or_below >= len(ratios["luajit"])}
    if targets:
        print()
        print("targets (docs/performance.md):")
        for key, t in targets.items():
            verdict = "met" if t["met"] else "MISSED"
            if key == "geomean_lua":
                print(f"  geomean remit/lua5.4 {t['value']:.2f} <= {t['target']}: {verdict}")
            elif key == "max_lua":
                print(f"  worst remit/lua5.4 {t['value']:.2f} <= {t['target']}: {verdict}")
            elif key == "max_rss_lua":
                print(f"  worst peak RSS remit/lua5.4 {t['value']:.2f} <= {t['target']}: {verdict}")
            else:
                print(f"  at or below luajit -joff on {t['value']} of {t['of']} (at least half): {verdict}")
    return {"geomean": means, "targets": targets}


def print_instructions(runner: Runner, names: list[str], impls: list[str]) -> dict:
    """Instruction counts per workload under callgrind, and their ratios (Python is left out: it
    takes minutes under valgrind)."""
    counted = [i for i in impls if i != "python"]
    print()
    print("instructions (callgrind, whole process, millions):")
    header = ["workload"] + [LABELS[i] for i in counted]
    if "remit" in counted:
        header += [f"/{LABELS[i]}" for i in counted if i != "remit"]
    table, out = [], {}
    ratios: dict[str, list[float]] = {i: [] for i in counted if i != "remit"}
    for name in names:
        counts = {}
        for impl in counted:
            try:
                counts[impl] = runner.instructions(impl, name)
            except (RunFailure, subprocess.TimeoutExpired, OSError) as e:
                note(f"{name}: {impl} under callgrind failed: {e}")
        out[name] = counts
        cells = [name] + [f"{counts[i] / 1e6:.0f}" if i in counts else "-" for i in counted]
        if "remit" in counted:
            for i in ratios:
                r = counts["remit"] / counts[i] if "remit" in counts and i in counts else None
                if r:
                    ratios[i].append(r)
                cells.append(fmt_ratio(r))
        table.append(cells)
    footer = ["geomean"] + [""] * len(counted) + [fmt_ratio(geomean(ratios[i])) for i in ratios]
    footer = footer[:len(header)]
    widths = [max(len(r[k]) for r in [header] + table + [footer]) for k in range(len(header))]
    for cells in [header] + table + [footer]:
        print("  ".join([cells[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(cells[1:], widths[1:])]))
    return {"counts": out, "geomean": {f"remit_{i}": geomean(ratios[i]) for i in ratios}}


def main() -> int:
    ap = argparse.ArgumentParser(
        description="Time the same workloads in Remit, Lua 5.4, LuaJIT's interpreter and Python 3 "
                    "and print the ratios of their CPU times and peak memory.")
    ap.add_argument("--remitvm", default="build/release/cli/remitvm",
                    help="the remitvm executable (default: %(default)s, relative to the current "
                         "directory or the repository root)")
    ap.add_argument("--remitc", default=None,
                    help="the remitc executable for the .rbc start-up measurement (default: "
                         "remitc next to remitvm)")
    ap.add_argument("--lua", default="lua5.4", help="the Lua 5.4 interpreter (default: %(default)s)")
    ap.add_argument("--luajit", default="luajit",
                    help="LuaJIT, run with -joff: its interpreter (default: %(default)s)")
    ap.add_argument("--python", default="python3",
                    help="the Python 3 interpreter (default: %(default)s)")
    ap.add_argument("--python-site", action="store_true",
                    help="run Python with its site module (by default -S: a .pth file in "
                         "site-packages can add 100 ms to every start)")
    ap.add_argument("--repeat", type=int, default=5,
                    help="runs per implementation and workload, interleaved; the median CPU time "
                         "counts (default: %(default)s)")
    ap.add_argument("--only", default=None,
                    help=f"comma-separated workloads to run (of: {', '.join(WORKLOADS)})")
    ap.add_argument("--json", metavar="OUT", default=None, help="also write every measurement to OUT")
    ap.add_argument("--instructions", action="store_true",
                    help="also count each workload's instructions under callgrind (minutes)")
    ap.add_argument("--max-steps", type=int, default=DEFAULT_MAX_STEPS,
                    help="remitvm --max-steps (default: %(default)s)")
    ap.add_argument("--max-wall-ms", type=int, default=DEFAULT_MAX_WALL_MS,
                    help="remitvm --max-wall-ms; 0 leaves the VM's default (default: %(default)s)")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds before one run is killed (default: %(default)s)")
    ap.add_argument("--startup-runs", type=int, default=20,
                    help="runs of the start-up program per implementation; 0 skips it (default: %(default)s)")
    ap.add_argument("--baselines-only", action="store_true",
                    help="run only Lua, LuaJIT and Python (check their results and time them)")
    args = ap.parse_args()

    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    names = WORKLOADS
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in WORKLOADS]
        if unknown:
            ap.error(f"unknown workload(s): {', '.join(unknown)} (known: {', '.join(WORKLOADS)})")
    try:
        with open(EXPECTED_FILE, encoding="utf-8") as f:
            expected = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        print(f"error: cannot read the checksums {EXPECTED_FILE}: {e}", file=sys.stderr)
        return 2
    missing_sums = [n for n in names if n not in expected]
    if missing_sums:
        print(f"error: {EXPECTED_FILE} has no checksum for {', '.join(missing_sums)}", file=sys.stderr)
        return 2

    args.lua_path = resolve_tool(args.lua, REPO_ROOT)
    args.luajit_path = resolve_tool(args.luajit, REPO_ROOT)
    args.python_path = resolve_tool(args.python, REPO_ROOT)
    missing = [f"{what} ({path})" for what, path, found in
               [("Lua", args.lua, args.lua_path), ("LuaJIT", args.luajit, args.luajit_path),
                ("Python", args.python, args.python_path)]
               if not found]
    if missing:
        print(f"error: baseline interpreter not found: {', '.join(missing)} (scripts/install-deps "
              "installs lua5.4, luajit and python3)", file=sys.stderr)
        return 2
    if args.instructions and not shutil.which("valgrind"):
        print("error: --instructions needs valgrind", file=sys.stderr)
        return 2

    impls = list(BASELINES) if args.baselines_only else list(IMPLS)
    args.remitvm_path = None
    args.remitc_path = None
    if not args.baselines_only:
        args.remitvm_path = resolve_tool(args.remitvm, REPO_ROOT)
        if args.remitvm_path is None:
            print(f"error: remitvm not found at '{args.remitvm}' (looked in the current directory and "
                  f"in {REPO_ROOT}).\nBuild it (make build) or pass --remitvm PATH; "
                  "--baselines-only times the others alone.", file=sys.stderr)
            return 2
        remitc = args.remitc or os.path.join(os.path.dirname(args.remitvm_path), "remitc")
        args.remitc_path = resolve_tool(remitc, REPO_ROOT)

    args.python_path = real_python(args.python_path)
    scratch = tempfile.mkdtemp(prefix="remit-compare-")
    try:
        return measure_all(args, names, expected, impls, Runner(args, build_measure(scratch)))
    except RunFailure as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def measure_all(args, names: list[str], expected: dict, impls: list[str], runner: Runner) -> int:
    versions = {"lua": tool_version([args.lua_path, "-v"]),
                "luajit": tool_version([args.luajit_path, "-v"]),
                "python": f"{tool_version([args.python_path, '--version'])} ({args.python_path})"}
    if args.remitvm_path:
        versions["remitvm"] = args.remitvm_path
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    print(f"bench/compare: {len(names)} workload(s), median CPU time (user + sys) of {args.repeat} "
          f"interleaved run(s), process start included; peak RSS; load average "
          f"{'?' if load is None else f'{load:.1f}'} on {os.cpu_count()} CPU(s)")
    print("  " + "; ".join(f"{k}: {v}" for k, v in versions.items()))
    print(flush=True)

    if "remit" in impls:
        # A quick run of the tiny program first, so a VM that cannot run anything yet is reported
        # at once instead of after every baseline has been timed.
        try:
            runner.run("remit", STARTUP)
        except RunFailure as e:
            print(f"error: remitvm ({args.remitvm_path}) cannot run a trivial program "
                  f"(workloads/{STARTUP}.rmt): {e}\nNo Remit numbers; --baselines-only times the "
                  "others alone.", file=sys.stderr)
            return 2

    progress = sys.stderr.isatty()
    rows = []
    failures: list[str] = []
    for name in names:
        if progress:
            print(f"  running {name} ...", end="", flush=True, file=sys.stderr)
        row = measure_workload(runner, name, impls, args.repeat, expected[name])
        if progress:
            print(" done", file=sys.stderr, flush=True)
        for impl, err in row["errors"].items():
            failures.append(f"{name}: {LABELS[impl]} failed: {err}")
        rows.append(row)

    summary = print_table(rows, impls)

    instructions = None
    if args.instructions:
        instructions = print_instructions(runner, names, impls)

    startup = None
    if args.startup_runs > 0:
        startup = measure_startup(runner, impls, args.startup_runs)
        print()
        print(f"start-up (tiny program, process start included, median of {args.startup_runs} runs):")
        width = max([len(k) for k in startup["cpu_ms"]] + [10])
        for label in startup["cpu_ms"]:
            print(f"  {label.ljust(width)}  CPU {startup['cpu_ms'][label]:5.2f} ms (best "
                  f"{startup['best_cpu_ms'][label]:5.2f})   wall {startup['wall_ms'][label]:6.1f} ms   "
                  f"peak RSS {startup['rss_kib'][label] / 1024:5.1f} MiB")
        for n in startup["notes"]:
            print(f"  note: {n}")

    if args.json:
        out = {
            "machine": {"platform": platform.platform(), "processor": platform.processor(),
                        "cpus": os.cpu_count(), "load_average_at_start": load},
            "versions": versions,
            "repeat": args.repeat,
            "max_steps": args.max_steps,
            "workloads": [
                {
                    "name": r["name"],
                    "cpu_ms": {i: (r["cpu"][i] * 1000 if r["cpu"][i] else None) for i in impls},
                    "peak_rss_kib": r["rss"],
                    "runs": {i: [{"cpu_ms": s.cpu * 1000, "wall_ms": s.wall * 1000, "rss_kib": s.rss_kib}
                                 for s in r["samples"][i]] for i in impls},
                    "ratios": r.get("ratios", {}),
                    "result": expected[r["name"]],
                    "errors": r["errors"],
                }
                for r in rows
            ],
            "geomean": summary["geomean"],
            "targets": summary["targets"],
            "instructions": instructions,
            "startup": startup,
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2)
            f.write("\n")
        print(f"\nwrote {args.json}")

    if failures:
        print("\nFAILED:", file=sys.stderr)
        seen = set()
        for f in failures:
            # The same error on every workload (say, the VM rejects a flag) is printed once.
            key = f.split(": ", 1)[1]
            if key in seen:
                print(f"  {f.split(': ', 1)[0]}: the same failure as above", file=sys.stderr)
                continue
            seen.add(key)
            print(f"  {f}", file=sys.stderr)
    if "remit" in impls and rows and all("remit" in r["errors"] for r in rows):
        print(f"\nerror: remitvm ({args.remitvm_path}) failed on every workload; no Remit numbers.",
              file=sys.stderr)
        return 2
    if failures:
        return 1
    print("\nevery result matches workloads/expected.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
