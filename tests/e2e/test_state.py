#!/usr/bin/env python3
"""The state directory under crashes, full disks, damage and hostile files (issue #14; docs/broker.md
"Traces", "Resume and replay" and "Approvals"), end to end through the real binaries.

The adapter is tests/e2e/adapters/dedup_adapter.py: a service with real effects that de-duplicates
by idempotency key and can SIGKILL remitvm at a chosen request, so every effect, every repeat and
every key is on record (dedup_service.py)."""
import json
import os
import pathlib
import resource
import signal
import subprocess
import sys

from harness import REMITVM, Result, Workspace, expect, idempotency_key, main, read_trace, run, write_trace

ADAPTERS = pathlib.Path(__file__).resolve().parent / "adapters"
ADAPTER = f"{sys.executable} {ADAPTERS / 'dedup_adapter.py'}"

HOST = """capability web.fetch(url: Str) -> Str
  idempotent

capability notes.save(text: Str) -> Str

capability pay.send(amount: Float) -> Str
  approval always
"""

POLICY = """[grant."web.fetch"]
[grant."notes.save"]
[grant."pay.send"]
"""

# Issue #14, item 1: a call with `retry` fails once, its retry is in flight when remitvm dies.
PAGES = """program pages
uses web.fetch

fn main() -> Str {
  let pages = for u in ["u0-flaky1", "u1"] {
    web.fetch(u) retry 1 else "none"
  }
  return join(pages, ",")
}
"""

# Nine effects, for the full-disk runs (item 2).
NOTES = """program notes
uses notes.save

fn main() -> Str {
  let saved = for i in range(9) {
    notes.save("note {i}")
  }
  return "saved {len(saved)}"
}
"""

PAY = """program pay
uses pay.send

fn main() -> Str {
  return pay.send(12.5)
}
"""


def workspace(program):
    ws = Workspace({"host.rmti": HOST, "policy.toml": POLICY, "prog.rmt": program})
    (ws.path / "service").mkdir()
    return ws


def env_for(ws, kill=None):
    env = {**os.environ, "REMIT_DEDUP_STATE": str(ws.path / "service")}
    env.pop("REMIT_DEDUP_KILL", None)
    if kill:
        env["REMIT_DEDUP_KILL"] = kill
    return env


def remitvm(ws, *args, kill=None, preexec=None, timeout=60):
    proc = subprocess.run([REMITVM, *map(str, args)], cwd=ws.path, capture_output=True, timeout=timeout,
                          env=env_for(ws, kill), preexec_fn=preexec)
    return Result(proc)


def service_log(ws, name):
    path = ws.path / "service" / name
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def effects(ws):
    """(resource, args) of every effect the service performed."""
    return [(d["resource"], d["args"]) for d in service_log(ws, "replies.jsonl") if d["reply"]["ok"]]


def traces(ws):
    runs = ws.path / ".remit" / "runs"
    return sorted(runs.glob("*.jsonl")) if runs.exists() else []


def test_a_retry_in_flight_keeps_its_key_and_the_next_call_gets_its_own():
    with workspace(PAGES) as ws:
        # Request 2 is the retry of u0 (the first attempt failed): it is performed, then remitvm dies.
        r = remitvm(ws, "run", "prog.rmt", "--adapter", ADAPTER, kill="2:after")
        expect(r.code == -signal.SIGKILL, "killed", r)
        root = traces(ws)[0].stem
        r = remitvm(ws, "resume", root)
        expect(r.code == 0 and json.loads(r.out) == "page u0-flaky1,page u1", "the uninterrupted result", r)
        keys = {idempotency_key(root, "main#0", k) for k in range(3)}
        decided = service_log(ws, "replies.jsonl")
        expect({d["key"] for d in decided} == keys and len(decided) == 3, "exactly the keys of an uninterrupted run",
               decided)
        expect(effects(ws) == [("web.fetch", {"url": "u0-flaky1"}), ("web.fetch", {"url": "u1"})],
               "each effect once", decided)
        expect([x["key"] for x in service_log(ws, "repeats.jsonl")] == [idempotency_key(root, "main#0", 1)],
               "only the in-flight retry was sent again, with its own key", service_log(ws, "repeats.jsonl"))


def limit_file_size(limit):
    def preexec():
        # A full disk for the trace: writes past `limit` bytes fail with EFBIG (SIGXFSZ ignored).
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    return preexec


def test_nothing_is_dispatched_once_the_trace_cannot_be_written():
    with workspace(NOTES) as ws:
        # No byte can be written: the run does not start, and leaves no trace.
        r = remitvm(ws, "run", "prog.rmt", "--adapter", ADAPTER, preexec=limit_file_size(0))
        expect(r.code == 2 and "cannot keep this run's records in the state directory .remit" in r.err and
               "the run did not start" in r.err and "File too large" in r.err, "exit 2 naming the state directory", r)
        expect(str(ws.path) not in r.err and "Traceback" not in r.err, "no other host path", r)
        expect(effects(ws) == [] and traces(ws) == [], "nothing performed, no trace", effects(ws))
        # Room for a few records: every effect that went out has its dispatch record on disk.
        for limit in (1000, 3000, 6000):
            for t in traces(ws):
                t.unlink()
            for f in (ws.path / "service").iterdir():
                f.unlink()
            r = remitvm(ws, "run", "prog.rmt", "--adapter", ADAPTER, preexec=limit_file_size(limit))
            expect(r.code == 2 and "the state directory .remit" in r.err and "File too large" in r.err and
                   "resume" in r.err, f"exit 2 at {limit} bytes, with the resume hint", r)
            [trace] = traces(ws)
            records = [json.loads(line) for line in trace.read_text().split("\n")[:-1]]
            announced = {e["idempotency_key"] for e in records if e["event"] == "dispatch"}
            performed = {d["key"] for d in service_log(ws, "replies.jsonl")}
            expect(performed <= announced and len(performed) < 9, f"{len(performed)} effect(s), each on record first",
                   records)
            # Once there is room again, the run resumes and completes, each effect once.
            r = remitvm(ws, "resume", trace.stem)
            expect(r.code == 0 and json.loads(r.out) == "saved 9", "resumes once there is room", r)
            expect(sorted(a["text"] for _, a in effects(ws)) == [f"note {i}" for i in range(9)], "each effect once",
                   effects(ws))
            keys = {idempotency_key(trace.stem, "main#0", k) for k in range(9)}
            expect({d["key"] for d in service_log(ws, "replies.jsonl")} == keys, "under the run's own keys")


def test_damaged_or_forged_records_are_refused_by_their_line():
    with workspace(PAGES) as ws:
        r = remitvm(ws, "run", "prog.rmt", "--adapter", ADAPTER, kill="2:after")
        [trace] = traces(ws)
        original = trace.read_text()
        lines = original.splitlines()
        number = max(i for i, line in enumerate(lines, 1) if '"event":"dispatch"' in line)
        events = read_trace(trace)
        key = events[number - 1]["idempotency_key"]
        # A digit of the in-flight key changed on disk: the record no longer checks.
        other = key[:-1] + ("0" if key[-1] != "0" else "1")
        trace.write_text(original.replace(key, other, 1) if original.count(key) == 1 else
                         "\n".join(lines[: number - 1] + [lines[number - 1].replace(key, other)] + lines[number:]) + "\n")
        for command in ("resume", "replay"):
            r = remitvm(ws, command, trace.stem)
            expect(r.code == 2 and f"{trace.stem}.jsonl:{number}: damaged record" in r.err, f"{command} refuses", r)
        # The same change with the checksums recomputed: the key is not the one (root, site, k) derive.
        events[number - 1]["idempotency_key"] = other
        write_trace(trace, events)
        r = remitvm(ws, "resume", trace.stem)
        expect(r.code == 2 and f"{trace.stem}.jsonl:{number}: dispatch event's idempotency_key is not the key" in r.err,
               "a key that does not derive is refused", r)
        expect(len(service_log(ws, "replies.jsonl")) == 2 and not service_log(ws, "repeats.jsonl"),
               "nothing was sent", service_log(ws, "replies.jsonl"))
        trace.write_text(original)
        r = remitvm(ws, "resume", trace.stem)
        expect(r.code == 0, "the undamaged trace resumes", r)
        # The first record of a resume is damaged: it might continue this run, so resuming the run
        # from its older record (and sending again what the resume did) is refused too.
        [resumed] = [t for t in traces(ws) if t != trace]
        text = resumed.read_text()
        resumed.write_text(text.replace('"event":"run_start"', '"event":"run_stArt"', 1))
        sent = len(service_log(ws, "replies.jsonl")) + len(service_log(ws, "repeats.jsonl"))
        r = remitvm(ws, "resume", trace.stem)
        expect(r.code == 2 and f"cannot tell which run .remit/runs/{resumed.name} continues" in r.err and
               f"{resumed.name}:1: damaged record" in r.err, "a damaged first record stops the resume", r)
        expect(len(service_log(ws, "replies.jsonl")) + len(service_log(ws, "repeats.jsonl")) == sent, "nothing sent")


def test_a_trace_without_checksums_is_shown_but_not_acted_on():
    with workspace(PAGES) as ws:
        r = remitvm(ws, "run", "prog.rmt", "--adapter", ADAPTER, kill="2:after")
        [trace] = traces(ws)
        # As a remitvm before record checksums wrote it: the same records, no chain.
        trace.write_text("".join(json.dumps(e, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
                                 for e in read_trace(trace)))
        for command in ("resume", "replay"):
            r = remitvm(ws, command, trace.stem)
            expect(r.code == 2 and f"{trace.stem}.jsonl:1: the trace has no record checksums" in r.err and
                   "hint: run the program again" in r.err, f"{command} refuses it", r)
        r = remitvm(ws, "trace", trace.stem)
        expect(r.code == 0 and "in flight: web.fetch" in r.out and "shown unverified" in r.err, "trace shows it", r)
        expect(len(service_log(ws, "replies.jsonl")) == 2 and not service_log(ws, "repeats.jsonl"), "nothing sent")


def test_ids_from_a_trace_never_name_paths_outside_the_state_directory():
    with workspace(PAGES) as ws:
        r = remitvm(ws, "run", "prog.rmt", "--adapter", ADAPTER, kill="1:before")
        [trace] = traces(ws)
        events = read_trace(trace)
        outside = ws.path / "outside"
        for root in ("../../outside/x", str(outside / "y"), ""):
            edited = [dict(e) for e in events]
            edited[0]["idempotency_root"] = root
            write_trace(trace, edited)
            r = remitvm(ws, "resume", trace.stem)
            expect(r.code == 2 and "is not a run id" in r.err, f"idempotency_root {root!r} refused", r)
        expect(not outside.exists() and not (ws.path.parent / "outside").exists(), "nothing created outside")
        expect(sorted(p.name for p in (ws.path / ".remit" / "runs").iterdir()) == [trace.name, f"{trace.stem}.lock"],
               "no other lock or directory", list((ws.path / ".remit" / "runs").iterdir()))
        r = remitvm(ws, "resume", "../../outside/x")
        expect(r.code == 2 and "not a run id" in r.err, "a run id argument is checked too", r)


def test_an_empty_state_dir_is_a_usage_error():
    with workspace(PAGES) as ws:
        for args in (["run", "prog.rmt", "--adapter", ADAPTER], ["resume", "20260101-120000-a1b2c3"],
                     ["approve", "abc"], ["trace", "20260101-120000-a1b2c3"], ["replay", "20260101-120000-a1b2c3"]):
            r = remitvm(ws, *args, "--state-dir", "")
            expect(r.code == 2 and "--state-dir needs a directory" in r.err, f"{args[0]}: exit 2", r)
            r = remitvm(ws, *args, "--state-dir=")
            expect(r.code == 2 and "--state-dir needs a directory" in r.err, f"{args[0]} --state-dir=: exit 2", r)
        expect(sorted(p.name for p in ws.path.iterdir()) == ["host.rmti", "policy.toml", "prog.rmt", "service"],
               "nothing written", list(ws.path.iterdir()))


def paused(ws):
    r = remitvm(ws, "run", "prog.rmt", "--adapter", ADAPTER)
    expect(r.code == 3, "paused for approval", r)
    return max(traces(ws)).stem


def test_approve_run_id_matches_its_digest_exactly():
    with workspace(PAY) as ws:
        victim = paused(ws)
        store = json.loads((ws.path / ".remit" / "approvals.json").read_text())
        [digest] = store["pending"]
        # A crafted trace of another run names the first two digits of the victim's digest.
        attacker = "20260101-120000-a1b2c3"
        events = read_trace(ws.path / ".remit" / "runs" / f"{victim}.jsonl")
        for e in events:
            e["run_id"] = attacker
            if "digest" in e:
                e["digest"] = digest[:2]
        events[0]["idempotency_root"] = attacker
        write_trace(ws.path / ".remit" / "runs" / f"{attacker}.jsonl", events)
        r = remitvm(ws, "approve", attacker)
        expect(r.code == 2 and "digest is not a full SHA-256 digest" in r.err, "refused", r)
        after = json.loads((ws.path / ".remit" / "approvals.json").read_text())
        expect(after == store, "nothing approved", after)
        r = remitvm(ws, "approve", victim)
        expect(r.code == 0 and f"approved {digest}" in r.out, "the run's own request by its id", r)


def run_as_nobody():
    os.setgid(65534)
    os.setuid(65534)


def test_an_unreadable_store_or_lock_stops_and_changes_nothing():
    with workspace(PAY) as ws:
        run_id = paused(ws)
        state = ws.path / ".remit"
        store = state / "approvals.json"
        before = store.read_bytes()
        # A store that cannot be read (a directory in its place, as root cannot lose read access).
        store.rename(state / "saved.json")
        store.mkdir()
        for args in (["approve", run_id], ["run", "prog.rmt", "--adapter", ADAPTER], ["resume", run_id]):
            r = remitvm(ws, *args)
            expect(r.code == 2 and "cannot read the approval store .remit/approvals.json" in r.err,
                   f"{args[0]}: exit 2 with a message", r)
        store.rmdir()
        (state / "saved.json").rename(store)
        if os.geteuid() == 0:
            # As another user: the store (mode 600) cannot be read, the lock not opened.
            os.chmod(ws.path, 0o755)
            for p in [state, *state.rglob("*")]:
                os.chmod(p, 0o777 if p.is_dir() else 0o666)
            os.chmod(store, 0o600)
            r = remitvm(ws, "approve", run_id, preexec=run_as_nobody)
            expect(r.code == 2 and "cannot read the approval store" in r.err and "Permission denied" in r.err,
                   "another user: exit 2", r)
            os.chmod(store, 0o666)
            os.chmod(state / "approvals.json.lock", 0o600)
            r = remitvm(ws, "approve", run_id, preexec=run_as_nobody)
            expect(r.code == 2 and "cannot lock the approval store" in r.err, "no lock, no write", r)
            os.chmod(state / "approvals.json.lock", 0o666)
        # A lock that cannot be opened at all.
        (state / "approvals.json.lock").unlink()
        (state / "approvals.json.lock").mkdir()
        r = remitvm(ws, "approve", run_id)
        expect(r.code == 2 and "cannot lock the approval store" in r.err, "no lock, no write", r)
        r = remitvm(ws, "resume", run_id)
        expect(r.code == 2 and "cannot lock the approval store" in r.err, "a run stops too", r)
        expect(store.read_bytes() == before, "the store is untouched")
        (state / "approvals.json.lock").rmdir()
        r = remitvm(ws, "approve", run_id)
        expect(r.code == 0, "approves once the lock can be taken", r)


def test_concurrent_and_killed_approves_lose_nothing():
    with workspace(PAY) as ws:
        state = ws.path / ".remit"
        state.mkdir()
        digests = [f"{i:064x}" for i in range(61)]
        pending = {d: {"resource": "pay.send", "site": "main#0", "args": {"amount": i}, "program_hash": "h",
                       "reasons": ["always requires approval"]} for i, d in enumerate(digests)}
        (state / "approvals.json").write_text(json.dumps({"approved": {}, "consumed": {}, "pending": pending}))
        procs = [subprocess.Popen([REMITVM, "approve", d], cwd=ws.path, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for d in digests[:40]]
        codes = [p.wait(timeout=60) for p in procs]
        expect(codes == [0] * 40, "every approve succeeded", codes)
        store = json.loads((state / "approvals.json").read_text())
        expect(sorted(store["approved"]) == digests[:40], "no update lost", sorted(store["approved"]))
        # Approves killed at random moments leave at most the one temporary file, and a valid store.
        for i, d in enumerate(digests[40:60]):
            p = subprocess.Popen([REMITVM, "approve", d], cwd=ws.path, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            try:
                p.wait(timeout=0.0005 * (i % 8))
            except subprocess.TimeoutExpired:
                pass
            p.kill()
            p.wait()
        leftovers = [p.name for p in state.iterdir() if ".tmp" in p.name]
        expect(leftovers in ([], ["approvals.json.tmp"]), "one temporary name at most", leftovers)
        json.loads((state / "approvals.json").read_text())
        r = run(REMITVM, "approve", digests[60], cwd=ws.path)
        expect(r.code == 0, "the store still works", r)
        expect([p.name for p in state.iterdir() if ".tmp" in p.name] == [], "the next write reuses and renames it")


if __name__ == "__main__":
    main(globals())
