"""What the fleet tests share (tests/e2e/test_fleet.py, tests/killtest/fleet_killtest.py): a fresh
database in the test cluster, workers as real processes, SQL on the store, and a program whose
calls go through the de-duplicating service of adapters/dedup_service.py."""
import json
import os
import signal
import subprocess
import sys
import time

from harness import REMITVM, REPO, expect

sys.path.insert(0, str(REPO / "tests" / "pg"))
import cluster  # noqa: E402

STATE = os.environ.get("REMIT_TEST_PG_STATE", "")
DEDUP_ADAPTER = str(REPO / "tests" / "e2e" / "adapters" / "dedup_adapter.py")


def database(name):
    expect(STATE, "REMIT_TEST_PG_STATE names the test cluster (run through ctest: fixture postgresql)")
    return cluster.url(STATE, f"{name}_{os.getpid()}")


def sql(url, query):
    """Rows of `query` on the store, as lists of strings."""
    with open(STATE) as f:
        bindir = json.load(f)["bindir"]
    out = subprocess.run([os.path.join(bindir, "psql"), url, "-AtF", "\t", "-c", query], check=True,
                         capture_output=True, text=True).stdout
    return [line.split("\t") for line in out.splitlines() if line]


class Worker:
    """`remitvm worker` as a process of its own, in `cwd`, with `env` added."""

    def __init__(self, url, cwd, *flags, env=None):
        self.log = open(os.path.join(cwd, f"worker-{time.monotonic_ns()}.log"), "w")
        self.proc = subprocess.Popen([REMITVM, "worker", "--store", url, *flags], cwd=cwd, stdout=self.log,
                                     stderr=subprocess.STDOUT, env=dict(os.environ, **(env or {})))

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=timeout)
        self.log.close()
        return code

    def wait(self, timeout=120):
        code = self.proc.wait(timeout=timeout)
        self.log.close()
        return code


def runs(url):
    r = subprocess.run([REMITVM, "runs", "list", "--json", "--store", url], capture_output=True, text=True)
    expect(r.returncode == 0, f"runs list: {r.stderr}")
    return json.loads(r.stdout)


def wait_until(condition, timeout=60, what="the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def dedup_lines(state_dir, name):
    path = os.path.join(state_dir, name)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.endswith("\n")]


# A program of ten effects, each to be performed once: the calls go to the de-duplicating service.
TEN_HOST = """capability svc.save(text: Str) -> Str
  cost 0.001
"""

TEN_PROGRAM = """program ten
uses svc.save

fn main(tag: Str) -> Str {
  let saved = for i in range(10) {
    svc.save("{tag} {i}")
  }
  return join(saved, " | ")
}
"""

TEN_POLICY = '[grant."svc.save"]\n'
