#!/usr/bin/env python3
"""The crash-safety harness (docs/testing.md, "Crash safety: scripts/killtest").

Three programs (tests/killtest/app: `pages` with retries, `notes` with effects that must happen
once, `pay` with an approval and an agent's retry), each with fixtures, an adapter process and
`--live` (both the de-duplicating service of tests/e2e/adapters/dedup_service.py). For each of the
nine, an uninterrupted reference run — through the approval for `pay` — gives the result, the
(site, k) of every attempt and the effects. Then real `remitvm` processes are SIGKILLed:

- at every durable system call a run or resume makes (every write to a file, fsync and rename,
  counted by tests/killtest/killpoint.c preloaded into remitvm): just before it, just after it,
  and for writes half-way through;
- inside every adapter request (`adapter` and `live`): before the service decides, and after the
  effect is on record but before remitvm hears of it;
- beyond those, a second kill in the first recovery resume (for --points above the enumeration).

Each kill is followed by what an operator does: resume (and `approve` when a run pauses) until the
run completes. Counted: kill points, runs completed with the uninterrupted result and effects,
effects repeated with the same key, effects (or attempts) under a key the uninterrupted run would
not use, wrong results, runs that cannot resume. Then every byte of the last two records of each
reference trace is cut (resume must complete as uninterrupted), and random bit flips in those
traces go through resume and replay (each must be refused, exit 2, naming the flipped line).

Exit 1 when any count that must be zero is not, or fewer kill points than asked for were made.
"""
import argparse
import concurrent.futures
import json
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
APP = HERE / "app"
ADAPTERS = HERE.parent / "e2e" / "adapters"
sys.path.insert(0, str(HERE.parent / "e2e"))
from harness import idempotency_key  # noqa: E402

PROGRAMS = {
    "pages": {"file": "pages.rmt", "inputs": [], "fixtures": "pages.json"},
    "notes": {"file": "notes.rmt", "inputs": ["-i", "topic=tea"], "fixtures": "notes.json"},
    "pay": {"file": "pay.rmt", "inputs": [], "fixtures": "pay.json"},
}
MODES = ("fixtures", "adapter", "live")
APPROVE = re.compile(r"to approve this exact call: \S+ approve ([0-9a-f]{64})")


def complete_lines(path):
    """The complete records of a trace (a line cut short by a kill is not one), parsed."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    out = []
    for line in text.split("\n")[:-1]:
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


class Scenario:
    """One fresh state directory and service for a program in a mode, driven by real processes."""

    def __init__(self, opts, program, mode, base):
        self.opts, self.program, self.mode = opts, program, mode
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix=f"{program}-{mode}-", dir=base))
        self.state = self.dir / "state"
        self.service = self.dir / "service"
        self.processes = 0  # run/resume processes started so far
        self.kills = 0      # of them, killed by SIGKILL
        self.approvals = 0  # `approve` commands the run needed

    def env(self, kill=None, log=None):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("REMIT_KILLPOINT", "REMIT_DEDUP"))}
        env["REMIT_DEDUP_STATE"] = str(self.service)
        # Sanitizer builds: the preloaded library comes before the sanitizer runtime.
        env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "verify_asan_link_order=0"]))
        if kill or log:
            env["LD_PRELOAD"] = self.opts.killpoint
        if kill and kill[0] == "sys":
            env["REMIT_KILLPOINT"] = f"{kill[1]}:{kill[2]}"
        if kill and kill[0] == "adapter":
            env["REMIT_DEDUP_KILL"] = f"{kill[1]}:{kill[2]}"
        if log:
            env["REMIT_KILLPOINT_LOG"] = str(log)
        return env

    def remitvm(self, args, env):
        proc = subprocess.run([self.opts.remitvm, *map(str, args), "--state-dir", str(self.state)], cwd=self.dir,
                              capture_output=True, env=env, timeout=120)
        return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")

    def run_args(self):
        p = PROGRAMS[self.program]
        args = ["run", APP / p["file"], *p["inputs"]]
        if self.mode == "fixtures":
            return args + ["--fixtures", APP / "fixtures" / p["fixtures"]]
        if self.mode == "adapter":
            return args + ["--adapter", f"{sys.executable} -S {ADAPTERS / 'dedup_adapter.py'}"]
        return args + ["--live"]

    def traces(self):
        runs = self.state / "runs"
        return sorted(runs.glob("*.jsonl")) if runs.exists() else []

    def root(self):
        """The first run's id: the trace whose complete run_start names no parent."""
        for t in self.traces():
            records = complete_lines(t)
            if records and records[0].get("event") == "run_start" and "resumed_from" not in records[0]:
                return records[0]["run_id"]
        return None

    def drive(self, kills=(), logs=None, stages=None):
        """Runs the program and does what an operator does until it completes: resume after a
        kill, approve and resume after a pause. `kills[i]` is the kill point of the i-th run or
        resume process (None: none). Returns (ok, result, why)."""
        code, out, err = None, "", ""
        restarted = False
        for step in range(12):
            i = self.processes
            kill = kills[i] if i < len(kills) else None
            log = logs(i) if logs else None
            before = self.requests()
            if code is None:
                code, out, err = self.remitvm(self.run_args(), self.env(kill, log))
            else:
                root = self.root()
                if root is None:
                    # Killed before its first record was written: nothing ran, so run it again.
                    if self.performed_any():
                        return False, None, "no run_start, but effects were performed"
                    restarted = True
                    code, out, err = self.remitvm(self.run_args(), self.env(kill, log))
                else:
                    code, out, err = self.remitvm(["resume", root], self.env(kill, log))
            self.processes += 1
            if stages is not None:
                stages.append(self.requests() - before)
            if code == -9:
                self.kills += 1
                continue
            if code == 0:
                return True, out, "restarted" if restarted else ""
            if code == 3:
                m = APPROVE.search(err)
                if not m:
                    return False, None, f"paused without an approve hint: {err}"
                a_code, _, a_err = self.remitvm(["approve", m.group(1), "--by", "killtest"], self.env())
                self.approvals += 1
                if a_code != 0:
                    return False, None, f"approve failed ({a_code}): {a_err}"
                continue
            return False, None, f"exit {code}: {err.strip()[-600:]}"
        return False, None, "did not complete after 12 processes"

    # -- what happened, from the service's records or the traces

    def _service(self, name):
        path = self.service / name
        return [json.loads(x) for x in path.read_text().splitlines() if x.endswith("}")] if path.exists() else []

    def requests(self):
        return len(self._service("replies.jsonl")) + len(self._service("repeats.jsonl"))

    def performed_any(self):
        return bool(self._service("replies.jsonl"))

    def attempts(self):
        """(site, k) of every attempt dispatched, over all traces (the same attempt once)."""
        out = set()
        for t in self.traces():
            for e in complete_lines(t):
                if e.get("event") == "dispatch":
                    out.add((e["site"], e["k"]))
        return out

    def keys_sent(self):
        """Every idempotency key the adapter received, in order (fixtures: every dispatch record)."""
        if self.mode != "fixtures":
            return [d["key"] for d in self._service("replies.jsonl")] + [d["key"] for d in self._service("repeats.jsonl")]
        return [e["idempotency_key"] for t in self.traces() for e in complete_lines(t) if e.get("event") == "dispatch"]

    def effects(self):
        """The effects performed, as a sorted list of (resource, args) — fixtures have none."""
        return sorted((d["resource"], json.dumps(d["args"], sort_keys=True)) for d in self._service("replies.jsonl")
                      if d["reply"]["ok"])

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class Reference:
    """The uninterrupted run of a program in a mode: result, attempts, effects, and what each of its
    processes did (counted system calls, adapter requests), from which the kill points come."""

    def __init__(self, opts, program, mode, base):
        self.scenario = Scenario(opts, program, mode, base)
        logs = self.scenario.dir / "logs"
        logs.mkdir()
        self.requests = []
        ok, self.result, why = self.scenario.drive(logs=lambda i: logs / f"{i}.log", stages=self.requests)
        if not ok:
            raise SystemExit(f"killtest: the uninterrupted {program} ({mode}) run failed: {why}")
        self.calls = [(logs / f"{i}.log").read_text() if (logs / f"{i}.log").exists() else ""
                      for i in range(self.scenario.processes)]
        self.attempts = self.scenario.attempts()
        self.effects = self.scenario.effects()
        self.root = self.scenario.root()
        # The last trace of the chain: the one no other trace names as its parent.
        parents = {complete_lines(t)[0].get("resumed_from") for t in self.scenario.traces()}
        [self.final_trace] = [t for t in self.scenario.traces() if t.stem not in parents]

    def kill_points(self):
        """Every (process index, kind, n, mode) kill point of this program and mode."""
        points = []
        for stage, calls in enumerate(self.calls):
            for n, kind in enumerate(calls, 1):
                for when in ("before", "mid", "after") if kind == "w" else ("before", "after"):
                    points.append((stage, "sys", n, when))
            if self.scenario.mode != "fixtures":
                for n in range(1, self.requests[stage] + 1):
                    for when in ("before", "after"):
                        points.append((stage, "adapter", n, when))
        return points


NAMES = {
    "kill_points": "kill points (SIGKILLs)",
    "completed": "runs completed as uninterrupted",
    "restarted": "  of them run again (killed before run_start)",
    "same_key": "calls sent again with the same key",
    "new_key": "calls under a key the uninterrupted run does not use",
    "wrong": "wrong results or effects",
    "approvals_again": "approvals asked for again",
    "cannot_resume": "runs that cannot resume",
    "truncations": "truncations",
    "truncations_ok": "truncations resumed as uninterrupted",
    "truncations_same_key": "  calls they sent again with the same key",
    "truncations_new_key": "  calls they sent under a new key",
    "flips": "bit flips",
    "flips_refused": "bit flips refused by resume and replay",
}


class Counts:
    def __init__(self):
        self.lock = threading.Lock()
        self.values = dict.fromkeys(NAMES, 0)
        self.failures = []

    def add(self, **kv):
        with self.lock:
            for k, v in kv.items():
                self.values[k] += v

    def fail(self, what):
        with self.lock:
            if len(self.failures) < 20:
                self.failures.append(what)


def check_recovery(ref, scn, ok, result, why, counts, label, prefix=""):
    """Compares a recovered scenario with the reference and counts what happened (the key counts
    under `prefix`); True when it completed exactly as the uninterrupted run."""
    if not ok:
        counts.add(cannot_resume=1)
        counts.fail(f"{label}: cannot resume: {why}")
        return False
    expected = {idempotency_key(ref.root if scn.root() is None else scn.root(), site, k) for site, k in ref.attempts}
    sent = scn.keys_sent()
    new = [k for k in sent if k not in expected]
    counts.add(**{prefix + "same_key": len(sent) - len(set(sent)), prefix + "new_key": len(new)})
    # A crash never costs a second approval: the one given is consumed by the attempt it allowed.
    again = scn.approvals - (0 if prefix else ref.scenario.approvals)
    if again:
        counts.add(approvals_again=again)
        counts.fail(f"{label}: {again} more approval(s) than the uninterrupted run")
    if new:
        counts.fail(f"{label}: {len(new)} key(s) the uninterrupted run would not use")
    if result != ref.result or scn.effects() != ref.effects:
        counts.add(wrong=1)
        counts.fail(f"{label}: result {result!r} (expected {ref.result!r}), effects {scn.effects()} "
                    f"(expected {ref.effects})")
        return False
    return not new


def kill_scenario(opts, ref, point, second, base, counts):
    scn = Scenario(opts, ref.scenario.program, ref.scenario.mode, base)
    try:
        stage, kind, n, when = point
        kills = [None] * stage + [(kind, n, when)]
        if second:
            kills.append(second)  # the first process after the kill: the recovery resume
        ok, result, why = scn.drive(kills=kills)
        counts.add(kill_points=scn.kills)
        if check_recovery(ref, scn, ok, result, why, counts, f"{scn.program}/{scn.mode} kill {point} {second or ''}"):
            counts.add(completed=1, restarted=1 if why == "restarted" else 0)
    finally:
        scn.cleanup()


def record_offsets(path):
    """The byte offsets where each line of the file starts, and its length."""
    data = path.read_bytes()
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == 0x0A][:-1]
    return data, starts


def copy_state(ref, base):
    scn = Scenario(ref.scenario.opts, ref.scenario.program, ref.scenario.mode, base)
    shutil.copytree(ref.scenario.state, scn.state)
    if ref.scenario.service.exists():
        shutil.copytree(ref.scenario.service, scn.service)
    for lock in scn.state.rglob("*.lock"):
        lock.unlink()
    return scn


def truncation_scenario(ref, cut, base, counts):
    scn = copy_state(ref, base)
    try:
        final = scn.state / "runs" / ref.final_trace.name
        data = final.read_bytes()
        final.write_bytes(data[:cut])
        ok, result, why = drive_from_resume(scn, ref.root)
        counts.add(truncations=1)
        if check_recovery(ref, scn, ok, result, why, counts, f"{scn.program}/{scn.mode} cut at {cut}/{len(data)}",
                          "truncations_"):
            counts.add(truncations_ok=1)
    finally:
        scn.cleanup()


def drive_from_resume(scn, root):
    # The first process is a resume of the copied run (drive() starts with `run` otherwise).
    code, out, err = scn.remitvm(["resume", root], scn.env())
    if code == 0:
        return True, out, ""
    if code == 3:
        m = APPROVE.search(err)
        scn.approvals += 1
        if m and scn.remitvm(["approve", m.group(1)], scn.env())[0] == 0:
            code, out, err = scn.remitvm(["resume", root], scn.env())
            if code == 0:
                return True, out, ""
    return False, None, f"exit {code}: {err.strip()[-600:]}"


def flip_scenario(ref, position, bit, base, counts):
    scn = copy_state(ref, base)
    try:
        final = scn.state / "runs" / ref.final_trace.name
        data = bytearray(final.read_bytes())
        line = data[:position].count(b"\n") + 1
        data[position] ^= 1 << bit
        final.write_bytes(bytes(data))
        before = sorted((scn.state / "runs").glob("*.jsonl"))
        refused = True
        for args in (["resume", ref.root], ["replay", ref.final_trace.stem]):
            code, out, err = scn.remitvm(args, scn.env())
            # A flipped newline between two records runs them together: the first is the one named.
            if code != 2 or f"{ref.final_trace.name}:{line}:" not in err:
                refused = False
                counts.fail(f"{scn.program}: flip of bit {bit} at byte {position} (line {line}): {args[0]} exit "
                            f"{code}: {err.strip()[-300:]}")
        if sorted((scn.state / "runs").glob("*.jsonl")) != before:
            refused = False
            counts.fail(f"{scn.program}: flip at byte {position}: a trace was started")
        counts.add(flips=1, flips_refused=1 if refused else 0)
    finally:
        scn.cleanup()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--remitvm", required=True)
    parser.add_argument("--killpoint", required=True, help="tests/killtest/killpoint.c built as a shared library")
    parser.add_argument("--points", type=int, default=1000, help="kill points to make (at least)")
    parser.add_argument("--flips", type=int, default=800)
    parser.add_argument("--truncations", choices=("all", "sample", "none"), default="all")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--python-sample", type=float, default=1.0,
                        help="share of the system-call kill points taken with an adapter process or --live")
    parser.add_argument("--seed", type=int, default=14)
    # A SIGKILL loses nothing the kernel has accepted, so memory-backed files are a faithful place
    # for these kills (power loss is another test), and their fsyncs do not wait for a disk.
    parser.add_argument("--workdir", default="/dev/shm" if os.access("/dev/shm", os.W_OK) else None,
                        help="where the scenarios' state directories go (default /dev/shm when writable)")
    opts = parser.parse_args()
    opts.remitvm = str(pathlib.Path(opts.remitvm).resolve())
    opts.killpoint = str(pathlib.Path(opts.killpoint).resolve())
    rng = random.Random(opts.seed)
    started = time.time()
    base = pathlib.Path(tempfile.mkdtemp(prefix="remit-killtest-", dir=opts.workdir))
    counts = Counts()
    try:
        with concurrent.futures.ThreadPoolExecutor(opts.jobs) as pool:
            refs = list(pool.map(lambda pm: Reference(opts, pm[0], pm[1], base),
                                 [(p, m) for p in PROGRAMS for m in MODES]))
            points = [(ref, p) for ref in refs for p in ref.kill_points()]
            # With an adapter process or --live, every scenario starts Python processes (most of the
            # harness's time): --python-sample takes that share of their system-call points, evenly
            # (their adapter-request points are always all taken).
            jobs, taken = [], 0.0
            for ref, p in points:
                if ref.scenario.mode != "fixtures" and p[1] == "sys":
                    taken += opts.python_sample
                    if taken < 1:
                        continue
                    taken -= 1
                jobs.append((ref, p, None))
            # Beyond the enumeration: kill the recovery resume too, at a point drawn at random
            # (with fixtures unless every point was taken).
            cheap = [(ref, p) for ref, p in points if ref.scenario.mode == "fixtures" or opts.python_sample >= 1]
            while len(jobs) < opts.points:
                ref, p = rng.choice(cheap)
                jobs.append((ref, p, ("sys", rng.randint(1, 40), rng.choice(("before", "mid", "after")))))
            if len(jobs) > opts.points:  # an even sample of the enumeration, every program and mode kept
                step = len(jobs) / opts.points
                jobs = [jobs[int(i * step)] for i in range(opts.points)]
            futures = [pool.submit(kill_scenario, opts, ref, p, second, base, counts) for ref, p, second in jobs]
            fixture_refs = [r for r in refs if r.scenario.mode == "fixtures"]
            if opts.truncations != "none":
                for ref in fixture_refs:
                    data, starts = record_offsets(ref.final_trace)
                    cuts = range(starts[-2], len(data))
                    if opts.truncations == "sample":
                        cuts = sorted(rng.sample(list(cuts), min(60, len(cuts))))
                    futures += [pool.submit(truncation_scenario, ref, cut, base, counts) for cut in cuts]
            for i in range(opts.flips):
                ref = fixture_refs[i % len(fixture_refs)]
                size = ref.final_trace.stat().st_size
                futures.append(pool.submit(flip_scenario, ref, rng.randrange(size), rng.randrange(8), base, counts))
            for f in futures:
                f.result()
    finally:
        shutil.rmtree(base, ignore_errors=True)

    v = counts.values
    print(f"killtest: {len(refs)} reference runs ({', '.join(PROGRAMS)} x {', '.join(MODES)}), "
          f"{len(points)} enumerated kill points, {len(jobs)} scenarios, seed {opts.seed}, "
          f"{time.time() - started:.1f} s")
    for key, name in NAMES.items():
        print(f"  {name:48} {v[key]}")
    for f in counts.failures:
        print(f"  FAIL {f}")
    bad = (v["new_key"] or v["truncations_new_key"] or v["wrong"] or v["approvals_again"] or v["cannot_resume"] or v["kill_points"] < opts.points or
           v["flips_refused"] != v["flips"] or v["truncations_ok"] != v["truncations"])
    print("killtest: FAILED" if bad else "killtest: ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
