#!/usr/bin/env python3
"""Workers killed with SIGKILL at random points (docs/testing.md, "Crash safety"; docs/fleet.md):
runs of a ten-call program whose calls go through a de-duplicating adapter are submitted to a
PostgreSQL store; workers are started and killed with `kill -9` after random delays, again and
again, each time with runs in the middle of their calls; then one last worker drains the queue.
Every run must complete with the result of an uninterrupted run, no effect may happen twice (the
service decided each idempotency key once), and every in-flight call sent again carried its
first key (a repeat in the service's log).

    tests/killtest/fleet_killtest.py --kills N [--runs R] [--seed S]

ctest's "pg: fleet killtest" kills 8 times; scripts/fleet-killtest 50 runs the full campaign.
Needs $REMIT_TEST_PG_STATE (a cluster of tests/pg/cluster.py) and $REMITVM."""
import argparse
import json
import os
import pathlib
import random
import signal
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "e2e"))
from fleet import (DEDUP_ADAPTER, TEN_HOST, TEN_POLICY, TEN_PROGRAM, Worker, database, dedup_lines,  # noqa: E402
                   runs)
from harness import REMITVM, Workspace, expect, run  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=8)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"fleet killtest: {args.runs} runs, {args.kills} kills, seed {args.seed}")
    url = database("kill")
    with Workspace({"host.rmti": TEN_HOST, "ten.rmt": TEN_PROGRAM, "policy.toml": TEN_POLICY}) as ws:
        adapter = f"python3 {DEDUP_ADAPTER}"
        # The uninterrupted results, from a service of their own.
        os.environ["REMIT_DEDUP_STATE"] = str(ws.path / "calm-service")
        expected = {}
        for i in range(args.runs):
            r = run(REMITVM, "run", "ten.rmt", "-i", f"tag=r{i}", "--adapter", adapter, "--json",
                    "--state-dir", "calm", cwd=ws.path)
            expect(r.code == 0, "an uninterrupted run", r)
            expected[f"r{i}"] = json.loads(r.out)["result"]
        service = str(ws.path / "service")
        env = {"REMIT_DEDUP_STATE": service, "REMIT_DEDUP_DELAY_MS": "40"}

        def requests_seen():
            return len(dedup_lines(service, "replies.jsonl")) + len(dedup_lines(service, "repeats.jsonl"))

        ids = {}
        for i in range(args.runs):
            r = run(REMITVM, "submit", "ten.rmt", "-i", f"tag=r{i}", "--adapter", adapter, "--store", url,
                    cwd=ws.path)
            expect(r.code == 0, "submit", r)
            ids[r.out.strip()] = f"r{i}"
        kills = 0
        while kills < args.kills:
            if all(r["status"] == "completed" for r in runs(url)):
                break  # everything finished before the kills ran out
            # Each kill lands while the worker is at work: after it has sent a call, at a random
            # moment of what follows (often with a call in flight: each takes 40 ms).
            seen = requests_seen()
            w = Worker(url, str(ws.path), "--concurrency", "2", "--lease", "1", env=env)
            deadline = time.monotonic() + 30
            while requests_seen() == seen and w.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(rng.uniform(0, 0.3))
            w.stop(signal.SIGKILL)
            kills += 1
        last = Worker(url, str(ws.path), "--concurrency", "2", "--lease", "1", "--drain", env=env)
        # Runs a killed worker held stay running until their lease runs out: drain until none is left.
        deadline = time.monotonic() + 120
        while True:
            expect(last.wait(timeout=120) == 0, "the last worker drains the queue")
            if all(r["status"] == "completed" for r in runs(url)) or time.monotonic() > deadline:
                break
            time.sleep(1.1)
            last = Worker(url, str(ws.path), "--concurrency", "2", "--lease", "1", "--drain", env=env)
        listed = runs(url)
        expect(all(r["status"] == "completed" for r in listed), f"every run completed: {listed}")
        for run_id, tag in ids.items():
            shown = json.loads(run(REMITVM, "runs", "show", run_id, "--json", "--store", url).out)
            expect(shown["outcome"]["result"] == expected[tag], f"{run_id} has the uninterrupted result: {shown}")
        replies = dedup_lines(service, "replies.jsonl")
        keys = [r["key"] for r in replies]
        expect(len(keys) == len(set(keys)) == 10 * args.runs,
               f"each of the {10 * args.runs} effects happened once ({len(keys)} decisions, {len(set(keys))} keys)")
        repeats = dedup_lines(service, "repeats.jsonl")
        expect(all(r["key"] in set(keys) for r in repeats), "a call sent again carried its first key")
        attempts = sum(json.loads(run(REMITVM, "runs", "show", i, "--json", "--store", url).out)["attempts"] for i in ids)
        print(f"fleet killtest: ok: {kills} kills, {attempts} attempts for {args.runs} runs, "
              f"{len(repeats)} in-flight call(s) sent again with their key, 0 effects repeated")


if __name__ == "__main__":
    main()
