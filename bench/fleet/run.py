#!/usr/bin/env python3
"""Fleet measurements (docs/performance.md, "Fleets"), against a private PostgreSQL cluster this
script starts (tests/pg/cluster.py, fsync on unless --no-fsync) and removes:

1. throughput: M runs of a program with two fixture calls, submitted first, then drained by W
   worker processes (1, 2, 4, 8; each --concurrency 1, and also one process with --concurrency W):
   runs/s over the drain, with the CPU seconds of the workers and of the database server;
2. the latency a host call adds in the PostgreSQL store over a state directory: `remitvm run` of
   the same program making 1 and 41 fixture calls, in each store; the difference of the slopes
   (time per extra call) is the added latency per call;
3. approval-to-resume: an idle worker, a run paused for approval; from just before `approve`
   starts to the moment the resumed run's trace is created (the database's clock, same machine).

    python3 bench/fleet/run.py [--remitvm PATH] [--runs M] [--repeat R] [--no-fsync]

Timings are wall and CPU time on a shared machine: the script prints the load average with them.
No result is asserted; the targets are printed beside the figures."""
import argparse
import json
import os
import pathlib
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "pg"))
import cluster  # noqa: E402

HOST = """capability kv.get(key: Str) -> Str
  cost 0.0001
  idempotent

capability kv.put(key: Str, value: Str) -> Str
  cost 0.0001
"""

TWO_CALLS = """program two
uses kv.get, kv.put

fn main(key: Str) -> Str {
  let v = kv.get(key: key)
  return kv.put(key: key, value: v + "!")
}
"""

POLICY = '[grant."kv.get"]\n[grant."kv.put"]\n'

FIXTURES = json.dumps({"capabilities": {"kv.get": [{"output": "v", "repeat": True}],
                                        "kv.put": [{"output": "ok", "repeat": True}]}})


# A live adapter for the durable path: runs with an adapter process act on the world, so their
# run_start, dispatch and call records wait for the disk (fixture runs' do not). Perl starts in a
# few ms, so the adapter's own cost stays small next to the store's.
ADAPTER = r"""$| = 1;
while (my $line = <STDIN>) {
    next unless $line =~ /"id":\s*(\d+)/;
    print "{\"id\":$1,\"ok\":true,\"result\":\"v\"}\n";
}
"""


def calls_program(n):
    return f"""program many
uses kv.get

fn main(key: Str) -> Int {{
  let got = for i in range({n}) {{
    kv.get(key: "{{key}}{{i}}")
  }}
  return len(got)
}}
"""


def postgres_cpu(state):
    """CPU seconds of the cluster so far: the postmaster with its reaped children, and live backends."""
    def stat(pid):
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return [int(x) for x in fields[11:15]]  # utime stime cutime cstime
    ticks = os.sysconf("SC_CLK_TCK")
    main = state["postmaster"]
    total = sum(stat(main))
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == main:
                        u, s, _, _ = stat(int(entry))
                        total += u + s
            except (OSError, ValueError, IndexError):
                pass
    return total / ticks


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def sh(*args, cwd, env=None, check=True):
    r = subprocess.run(list(map(str, args)), cwd=cwd, capture_output=True, text=True, env=env)
    if check and r.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, args))}\n{r.stdout}\n{r.stderr}")
    return r


def throughput(remitvm, state_path, state, work, runs, layouts, adapter=None):
    what = "a live adapter: durable records" if adapter else "fixtures"
    print(f"\n== throughput: runs of a two-call program ({what}), submitted first, then drained")
    print(f"{'workers':<24} {'runs':>5} {'wall s':>7} {'runs/s':>7} {'worker CPU s':>13} {'db CPU s':>9} "
          f"{'CPU ms/run':>10}")
    rows = []
    for label, processes, concurrency in layouts:
        url = cluster.url(state_path, f"bench_{processes}_{concurrency}{'_live' if adapter else ''}")
        sh(remitvm, "store", "migrate", "--store", url, cwd=work)
        for i in range(runs):
            sh(remitvm, "submit", "two.rbc", "-i", f"key=k{i}", *(["--adapter", adapter] if adapter else []),
               "--store", url, cwd=work)
        cpu0, db0, t0 = children_cpu(), postgres_cpu(state), time.monotonic()
        workers = [subprocess.Popen([remitvm, "worker", "--store", url, "--drain", "--concurrency", str(concurrency)],
                                    cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                   for _ in range(processes)]
        for w in workers:
            w.wait()
        wall = time.monotonic() - t0
        cpu, db = children_cpu() - cpu0, postgres_cpu(state) - db0
        listed = json.loads(sh(remitvm, "runs", "list", "--json", "--store", url, cwd=work).stdout)
        done = sum(1 for r in listed if r["status"] == "completed")
        if done != runs:
            sys.exit(f"{label}: only {done} of {runs} runs completed")
        rows.append((label, runs / wall))
        print(f"{label:<24} {runs:>5} {wall:>7.2f} {runs / wall:>7.0f} {cpu:>13.2f} {db:>9.2f} "
              f"{1000 * (cpu + db) / runs:>10.2f}")
    return rows


def call_latency(remitvm, state_path, work, repeat, adapter=None):
    what = "calls through a live adapter (durable)" if adapter else "fixture calls"
    print(f"\n== added latency per host call: `remitvm run` of 1 and 41 {what}, in each store")
    url = cluster.url(state_path, "bench_latency_live" if adapter else "bench_latency")
    sh(remitvm, "store", "migrate", "--store", url, cwd=work)
    # Interleaved — each repetition runs every store and size once — so both stores see the same
    # moments of a shared machine; medians over the repetitions.
    stores = (("files", ["--state-dir", "st"]), ("postgresql", ["--store", url]))
    samples = {(store, n): ([], []) for store, _ in stores for n in (1, 41)}
    for i in range(repeat):
        for store, flags in stores:
            for n in (1, 41):
                c0, t0 = children_cpu(), time.monotonic()
                sh(remitvm, "run", f"many{n}.rbc", "-i", f"key=k{i}", *flags,
                   *(["--adapter", adapter] if adapter else []), cwd=work)
                samples[(store, n)][0].append(time.monotonic() - t0)
                samples[(store, n)][1].append(children_cpu() - c0)
    results = {k: (statistics.median(w), statistics.median(c)) for k, (w, c) in samples.items()}
    print(f"{'store':<12} {'1 call ms':>10} {'41 calls ms':>12} {'per call ms':>12} {'CPU per call ms':>16}")
    per = {}
    for store in ("files", "postgresql"):
        (w1, c1), (w41, c41) = results[(store, 1)], results[(store, 41)]
        per[store] = ((w41 - w1) / 40 * 1000, (c41 - c1) / 40 * 1000)
        print(f"{store:<12} {w1 * 1000:>10.1f} {w41 * 1000:>12.1f} {per[store][0]:>12.3f} {per[store][1]:>16.3f}")
    added = per["postgresql"][0] - per["files"][0]
    print(f"added by PostgreSQL: {added:.3f} ms per host call (target <= 1 ms); "
          f"client CPU {per['postgresql'][1] - per['files'][1]:+.3f} ms")
    return added


def approval_latency(remitvm, state_path, work, repeat):
    print("\n== approval to resume: an idle worker, a run waiting for approval")
    url = cluster.url(state_path, "bench_approval")
    sh(remitvm, "store", "migrate", "--store", url, cwd=work)
    worker = subprocess.Popen([remitvm, "worker", "--store", url], cwd=work, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    psql = [os.path.join(json.load(open(state_path))["bindir"], "psql"), url, "-At", "-c"]
    samples = []
    try:
        for i in range(repeat):
            run_id = sh(remitvm, "submit", "approve.rbc", "--policy", "policy-approve.toml", "-i", f"key=k{i}",
                        "--store", url, cwd=work).stdout.strip()
            while True:
                status = subprocess.run(psql + [f"SELECT status, waiting_digest FROM remit_runs WHERE run_id = "
                                                f"'{run_id}'"], capture_output=True, text=True).stdout.strip()
                if status.startswith("waiting|"):
                    break
                time.sleep(0.05)
            digest = status.split("|")[1]
            time.sleep(0.3)  # the worker is idle again, waiting on LISTEN
            t0 = time.time()
            sh(remitvm, "approve", digest, "--store", url, cwd=work)
            while True:
                row = subprocess.run(psql + [f"SELECT created_at FROM remit_traces WHERE root = '{run_id}' AND "
                                             f"run_id <> root"], capture_output=True, text=True).stdout.strip()
                if row:
                    break
                time.sleep(0.01)
            samples.append(float(row) - t0)
    finally:
        worker.terminate()
        worker.wait()
    print(f"approval to resume (the resumed run's trace created): median {statistics.median(samples) * 1000:.0f} ms, "
          f"max {max(samples) * 1000:.0f} ms over {repeat} (target <= 1 s; the approve command's own start "
          f"included)")
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--remitvm", default=str(REPO / "build/release/cli/remitvm"))
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--no-fsync", action="store_true")
    parser.add_argument("--only-durable", action="store_true",
                        help="only the live-adapter (durable) throughput and latency")
    args = parser.parse_args()
    remitvm = os.path.abspath(args.remitvm)
    remitc = os.path.join(os.path.dirname(remitvm), "remitc")
    work = tempfile.mkdtemp(prefix="remit-bench-fleet-")
    state_path = os.path.join(work, "cluster.json")
    try:
        for name, text in (("host.rmti", HOST), ("two.rmt", TWO_CALLS), ("policy.toml", POLICY),
                           ("fixtures/run.json", FIXTURES), ("many1.rmt", calls_program(1)),
                           ("many41.rmt", calls_program(41)),
                           ("approve.rmt", TWO_CALLS.replace("program two", "program gated")),
                           ("adapter.pl", ADAPTER)):
            p = pathlib.Path(work) / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        for prog in ("two", "many1", "many41", "approve"):
            sh(remitc, "build", f"{prog}.rmt", cwd=work)
        pathlib.Path(work, "policy-approve.toml").write_text('[grant."kv.get"]\n[grant."kv.put"]\napproval = "always"\n')
        cluster.start(state_path, fsync=not args.no_fsync)
        state = json.load(open(state_path))
        print(f"fleet benchmark: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start, "
              f"PostgreSQL fsync {'on' if state['fsync'] else 'off'}, Unix socket, {args.runs} runs per layout")
        layouts = [("1 worker", 1, 1), ("2 workers", 2, 1), ("4 workers", 4, 1), ("8 workers", 8, 1),
                   ("1 worker x 4 threads", 1, 4)]
        adapter = f"perl {os.path.join(work, 'adapter.pl')}"
        if not args.only_durable:
            throughput(remitvm, state_path, state, work, args.runs, layouts)
        throughput(remitvm, state_path, state, work, args.runs, [l for l in layouts if l[0] in ("4 workers", "8 workers")],
                   adapter)
        if not args.only_durable:
            call_latency(remitvm, state_path, work, args.repeat)
        call_latency(remitvm, state_path, work, args.repeat, adapter)
        if not args.only_durable:
            approval_latency(remitvm, state_path, work, args.repeat)
        print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    finally:
        cluster.stop(state_path)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
