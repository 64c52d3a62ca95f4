#!/usr/bin/env python3
"""Run the same compute workloads in Remit, Lua 5.4 and Python 3 and compare their wall times.

Each workload in bench/compare/workloads/ exists three times (NAME.rmt, NAME.lua, NAME.py), with the
same algorithm. Every implementation prints one JSON value; the three must be equal, or this script
fails. It prints a table of the best (minimum) wall time of --repeat runs of each, process start
included, and the ratios Remit/Lua and Remit/Python with their geometric means.

    python3 bench/compare/run.py --remitvm build/release/cli/remitvm
    python3 bench/compare/run.py --only sieve,nbody --repeat 5 --json /tmp/compare.json
    python3 bench/compare/run.py --baselines-only        # Lua and Python only (no remitvm needed)

Exit status: 0 when every run succeeded and all results agree; 1 when a run failed or results
differ; 2 when remitvm is missing or failed on every workload (or a baseline interpreter is missing).

Only the standard library is used.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS_DIR = os.path.join(HERE, "workloads")
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))

# The table's rows, in order. Each has NAME.rmt, NAME.lua and NAME.py in workloads/.
WORKLOADS = ["sieve", "mandelbrot", "nbody", "strings", "lists", "statemachine", "records"]
# A tiny program timed separately: process start, load and a trivial run.
STARTUP = "startup"
IMPLS = ["remit", "lua", "python"]

DEFAULT_MAX_STEPS = 10_000_000_000
# The VM's default wall-clock limit is 10 s; a slow build should still finish.
DEFAULT_MAX_WALL_MS = 600_000


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


def run_once(cmd: list[str], timeout: float, cwd: str) -> tuple[float, object]:
    """Runs cmd once; returns (wall seconds, parsed JSON result). Raises RunFailure."""
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, timeout=timeout, text=True)
    except subprocess.TimeoutExpired:
        raise RunFailure(f"timed out after {timeout:g} s") from None
    except OSError as e:
        raise RunFailure(f"could not start: {e}") from None
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        detail = tail(proc.stderr) or tail(proc.stdout) or "(no output)"
        raise RunFailure(f"exit status {proc.returncode}:\n{indent(detail)}")
    return elapsed, parse_result(proc.stdout)


def first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""


def indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


class Runner:
    def __init__(self, args):
        self.args = args
        self.remitvm = args.remitvm_path
        self.remit_limits = ["--max-steps", str(args.max_steps)]
        if args.max_wall_ms:
            self.remit_limits += ["--max-wall-ms", str(args.max_wall_ms)]

    def command(self, impl: str, name: str, ext_override: str | None = None) -> list[str]:
        if impl == "remit":
            src = ext_override or os.path.join(WORKLOADS_DIR, name + ".rmt")
            return [self.remitvm, "run", src, "--allow-all"] + self.remit_limits
        if impl == "lua":
            return [self.args.lua_path, os.path.join(WORKLOADS_DIR, name + ".lua")]
        site = [] if self.args.python_site else ["-S"]
        return [self.args.python_path] + site + [os.path.join(WORKLOADS_DIR, name + ".py")]

    def run(self, impl: str, name: str, src: str | None = None) -> tuple[float, object]:
        cmd = self.command(impl, name, src)
        try:
            return run_once(cmd, self.args.timeout, WORKLOADS_DIR)
        except RunFailure as e:
            # An early VM may not know --max-wall-ms yet: drop it once and retry.
            if impl == "remit" and "--max-wall-ms" in self.remit_limits and "max-wall-ms" in str(e):
                i = self.remit_limits.index("--max-wall-ms")
                del self.remit_limits[i:i + 2]
                note("remitvm rejected --max-wall-ms; retrying without it")
                return run_once(self.command(impl, name, src), self.args.timeout, WORKLOADS_DIR)
            raise


def note(msg: str) -> None:
    print(f"note: {msg}", file=sys.stderr, flush=True)


def fmt_ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def fmt_ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}"


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


def measure_workload(runner: Runner, name: str, impls: list[str], repeat: int) -> dict:
    """Runs each implementation `repeat` times, interleaved, and collects times and results."""
    times: dict[str, list[float]] = {i: [] for i in impls}
    results: dict[str, object] = {}
    errors: dict[str, str] = {}
    for _ in range(repeat):
        for impl in impls:
            if impl in errors:
                continue
            try:
                elapsed, value = runner.run(impl, name)
            except RunFailure as e:
                errors[impl] = str(e)
                continue
            if impl in results and results[impl] != value:
                errors[impl] = (f"result changed between runs: {json.dumps(results[impl])} then "
                                f"{json.dumps(value)}")
                continue
            results[impl] = value
            times[impl].append(elapsed)
    best = {i: (min(times[i]) if times[i] and i not in errors else None) for i in impls}
    return {"name": name, "times": times, "best": best, "results": results, "errors": errors}


def measure_startup(runner: Runner, impls: list[str], runs: int) -> dict:
    """Times the tiny startup program: remitvm on a .rbc built by remitc (when `remitc build`
    exists), remitvm on the .rmt source, Lua and Python. Process start included."""
    info: dict = {"runs": runs, "best_ms": {}, "median_ms": {}, "notes": []}
    rows: list[tuple[str, str, list[str]]] = []
    tmp = None
    if "remit" in impls:
        remitc = runner.args.remitc_path
        if remitc is None:
            info["notes"].append(f"remitc not found ({runner.args.remitc}); .rbc start-up skipped")
        else:
            tmp = tempfile.mkdtemp(prefix="remit-compare-")
            # The .rbc goes in a scratch directory with a copy of the (empty) host interface, in
            # case the VM looks for one next to the program.
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
                info["notes"].append("`remitc build` is not available yet, so the .rbc start-up "
                                     f"is skipped ({why or 'no output'})")
        rows.append(("remitvm run startup.rmt", "remit", []))
    if "lua" in impls:
        rows.append(("lua startup.lua", "lua", []))
    if "python" in impls:
        rows.append(("python startup.py", "python", []))

    expected = None
    try:
        for label, impl, extra in rows:
            times = []
            try:
                for _ in range(runs):
                    elapsed, value = runner.run(impl, STARTUP, extra[0] if extra else None)
                    if expected is None:
                        expected = value
                    elif value != expected:
                        raise RunFailure(f"result {json.dumps(value)} differs from "
                                         f"{json.dumps(expected)}")
                    times.append(elapsed)
            except RunFailure as e:
                info["notes"].append(f"{label} failed: {e}")
                continue
            info["best_ms"][label] = min(times) * 1000
            info["median_ms"][label] = statistics.median(times) * 1000
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return info


def print_table(rows: list[dict], impls: list[str]) -> tuple[float | None, float | None]:
    header = ["workload", "remit ms", "lua ms", "python ms", "remit/lua", "remit/python"]
    body = []
    r_lua, r_py = [], []
    for row in rows:
        b = row["best"]
        rem, lua, py = b.get("remit"), b.get("lua"), b.get("python")
        rl = rem / lua if rem and lua else None
        rp = rem / py if rem and py else None
        row["ratios"] = {"remit_lua": rl, "remit_python": rp}
        if rl:
            r_lua.append(rl)
        if rp:
            r_py.append(rp)
        body.append([row["name"], fmt_ms(rem), fmt_ms(lua), fmt_ms(py), fmt_ratio(rl), fmt_ratio(rp)])
    g_lua, g_py = geomean(r_lua), geomean(r_py)
    footer = ["geomean", "", "", "", fmt_ratio(g_lua), fmt_ratio(g_py)]
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
    return g_lua, g_py


def main() -> int:
    ap = argparse.ArgumentParser(
        description="Time the same workloads in Remit, Lua 5.4 and Python 3 and print the ratios.")
    ap.add_argument("--remitvm", default="build/release/cli/remitvm",
                    help="the remitvm executable (default: %(default)s, relative to the current "
                         "directory or the repository root)")
    ap.add_argument("--remitc", default=None,
                    help="the remitc executable for the .rbc start-up measurement (default: "
                         "remitc next to remitvm)")
    ap.add_argument("--lua", default="lua5.4", help="the Lua 5.4 interpreter (default: %(default)s)")
    ap.add_argument("--python", default="python3",
                    help="the Python 3 interpreter (default: %(default)s)")
    ap.add_argument("--python-site", action="store_true",
                    help="run Python with its site module (by default -S: a .pth file in "
                         "site-packages can add 100 ms to every start)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs per implementation; the best (minimum) wall time counts (default: 3)")
    ap.add_argument("--only", default=None,
                    help=f"comma-separated workloads to run (of: {', '.join(WORKLOADS)})")
    ap.add_argument("--json", metavar="OUT", default=None, help="also write the numbers to OUT")
    ap.add_argument("--max-steps", type=int, default=DEFAULT_MAX_STEPS,
                    help="remitvm --max-steps (default: %(default)s)")
    ap.add_argument("--max-wall-ms", type=int, default=DEFAULT_MAX_WALL_MS,
                    help="remitvm --max-wall-ms; 0 leaves the VM's default (default: %(default)s)")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds before one run is killed (default: %(default)s)")
    ap.add_argument("--startup-runs", type=int, default=10,
                    help="runs of the start-up program per implementation; 0 skips it (default: 10)")
    ap.add_argument("--baselines-only", action="store_true",
                    help="run only Lua and Python (check that they agree and time them)")
    args = ap.parse_args()

    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    names = WORKLOADS
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in WORKLOADS]
        if unknown:
            ap.error(f"unknown workload(s): {', '.join(unknown)} (known: {', '.join(WORKLOADS)})")

    args.lua_path = resolve_tool(args.lua, REPO_ROOT)
    args.python_path = resolve_tool(args.python, REPO_ROOT)
    missing = [f"{what} ({path})" for what, path, found in
               [("Lua", args.lua, args.lua_path), ("Python", args.python, args.python_path)]
               if not found]
    if missing:
        print(f"error: baseline interpreter not found: {', '.join(missing)}", file=sys.stderr)
        return 2

    impls = ["lua", "python"] if args.baselines_only else IMPLS
    args.remitvm_path = None
    args.remitc_path = None
    if not args.baselines_only:
        args.remitvm_path = resolve_tool(args.remitvm, REPO_ROOT)
        if args.remitvm_path is None:
            print(f"error: remitvm not found at '{args.remitvm}' (looked in the current directory and "
                  f"in {REPO_ROOT}).\nBuild it (make build) or pass --remitvm PATH; "
                  "--baselines-only times Lua and Python alone.", file=sys.stderr)
            return 2
        remitc = args.remitc or os.path.join(os.path.dirname(args.remitvm_path), "remitc")
        args.remitc_path = resolve_tool(remitc, REPO_ROOT)

    args.python_path = real_python(args.python_path)
    runner = Runner(args)
    versions = {"lua": tool_version([args.lua_path, "-v"]),
                "python": f"{tool_version([args.python_path, '--version'])} ({args.python_path})"}
    if args.remitvm_path:
        versions["remitvm"] = args.remitvm_path
    print(f"bench/compare: {len(names)} workload(s), best of {args.repeat} run(s), "
          f"process start included")
    print("  " + "; ".join(f"{k}: {v}" for k, v in versions.items()))
    print(flush=True)

    if "remit" in impls:
        # A quick run of the tiny program first, so a VM that cannot run anything yet is reported
        # at once instead of after every baseline has been timed.
        try:
            runner.run("remit", STARTUP)
        except RunFailure as e:
            print(f"error: remitvm ({args.remitvm_path}) cannot run a trivial program "
                  f"(workloads/{STARTUP}.rmt): {e}\nNo Remit numbers; --baselines-only times Lua "
                  "and Python alone.", file=sys.stderr)
            return 2

    progress = sys.stderr.isatty()
    rows = []
    failures: list[str] = []
    for name in names:
        if progress:
            print(f"  running {name} ...", end="", flush=True, file=sys.stderr)
        row = measure_workload(runner, name, impls, args.repeat)
        if progress:
            print(" done", file=sys.stderr, flush=True)
        for impl, err in row["errors"].items():
            failures.append(f"{name}: {impl} failed: {err}")
        agreed = {i: row["results"][i] for i in impls if i in row["results"] and i not in row["errors"]}
        distinct = {json.dumps(v, sort_keys=True) for v in agreed.values()}
        if len(distinct) > 1:
            lines = "\n".join(f"    {i:7} {json.dumps(v)}" for i, v in agreed.items())
            failures.append(f"{name}: results differ:\n{lines}")
            row["mismatch"] = True
            # Times of a wrong answer do not count. When the two baselines agree with each other
            # only Remit's are dropped; otherwise nobody's are.
            base = [agreed[i] for i in ("lua", "python") if i in agreed]
            baselines_agree = len(base) == 2 and base[0] == base[1]
            for i in agreed:
                if not baselines_agree or agreed[i] != base[0]:
                    row["best"][i] = None
        rows.append(row)

    g_lua, g_py = print_table(rows, impls)

    startup = None
    if args.startup_runs > 0:
        startup = measure_startup(runner, impls, args.startup_runs)
        print()
        print(f"start-up (tiny program, process start included, {args.startup_runs} runs):")
        width = max([len(k) for k in startup["best_ms"]] + [10])
        for label in startup["best_ms"]:
            print(f"  {label.ljust(width)}  best {startup['best_ms'][label]:7.1f} ms   "
                  f"median {startup['median_ms'][label]:7.1f} ms")
        for n in startup["notes"]:
            print(f"  note: {n}")

    if args.json:
        out = {
            "machine": {"platform": platform.platform(), "processor": platform.processor(),
                        "cpus": os.cpu_count()},
            "versions": versions,
            "repeat": args.repeat,
            "max_steps": args.max_steps,
            "workloads": [
                {
                    "name": r["name"],
                    "best_ms": {i: (r["best"].get(i) * 1000 if r["best"].get(i) else None)
                                for i in impls},
                    "runs_ms": {i: [t * 1000 for t in r["times"][i]] for i in impls},
                    "ratios": r.get("ratios", {}),
                    "result": next(iter(r["results"].values()), None),
                    "errors": r["errors"],
                    "mismatch": r.get("mismatch", False),
                }
                for r in rows
            ],
            "geomean": {"remit_lua": g_lua, "remit_python": g_py},
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
    print("\nall results agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
