"""A tiny harness for end-to-end tests that drive the real binaries.

Each test file defines functions named test_*; `main()` runs them in order, prints one line per
test and a final `N passed, M failed`, and exits 1 if any failed. Binaries come from the
environment (REMITC, REMIT, REMITVM), which ctest sets.
"""
import hashlib
import json
import os
import pathlib
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import traceback

REPO = pathlib.Path(__file__).resolve().parents[2]
# The tools' output is compared as plain text: a CLICOLOR_FORCE in the caller's environment would
# colour it (tests that want colour set it themselves).
os.environ.pop("CLICOLOR_FORCE", None)
# Absolute, because tests run the tools from temporary directories.
REMITC = str(pathlib.Path(os.environ.get("REMITC", REPO / "build/release/cli/remitc")).resolve())
REMIT = str(pathlib.Path(os.environ.get("REMIT", REPO / "build/release/cli/remit")).resolve())
REMITVM = str(pathlib.Path(os.environ.get("REMITVM", REPO / "build/release/cli/remitvm")).resolve())


class Result:
    def __init__(self, proc):
        self.code = proc.returncode
        self.out = proc.stdout.decode("utf-8", "replace")
        self.err = proc.stderr.decode("utf-8", "replace")

    def __repr__(self):
        return f"exit {self.code}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


def run(tool, *args, cwd=None, timeout=60, stdin=None, env=None):
    """Runs a tool; `env` adds variables to (or, with None values, removes them from) the environment."""
    environment = None
    if env is not None:
        environment = dict(os.environ)
        for k, v in env.items():
            if v is None:
                environment.pop(k, None)
            else:
                environment[k] = v
    proc = subprocess.run([tool, *map(str, args)], cwd=cwd, capture_output=True, timeout=timeout, input=stdin,
                          env=environment)
    return Result(proc)


def run_vm_json(*args, cwd, env=None, timeout=60):
    """Runs `remitvm ARGS --json`: the result and its JSON envelope (an AssertionError when stdout is not JSON)."""
    result = run(REMITVM, *args, "--json", cwd=cwd, env=env, timeout=timeout)
    try:
        return result, json.loads(result.out)
    except json.JSONDecodeError:
        raise AssertionError(f"not JSON\n{result!r}")


def expect(cond, message, result=None):
    if not cond:
        raise AssertionError(message + (f"\n{result!r}" if result is not None else ""))


def canonical(value):
    """Canonical JSON, as remitvm writes trace records and hashes keys and digests."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def chain_of(previous, record):
    """A trace record's `chain` (docs/broker.md "Traces"): the first 32 hex digits of SHA-256 of
    the previous record's chain ("" for the first) and the record's canonical JSON without it."""
    return hashlib.sha256((previous + canonical(record)).encode("utf-8")).hexdigest()[:32]


def idempotency_key(root, site, k):
    """The idempotency key of attempt k at `site` in the run family `root` (docs/broker.md)."""
    return hashlib.sha256(canonical([root, site, k]).encode("utf-8")).hexdigest()[:32]


def read_trace(path):
    """A trace's events without their `chain` fields, after checking that every line is canonical
    and every chain matches."""
    events, previous = [], ""
    for number, line in enumerate(pathlib.Path(path).read_text(encoding="utf-8").splitlines(), 1):
        event = json.loads(line)
        expect(line == canonical(event), f"{path}:{number}: trace lines are canonical JSON: {line}")
        chain = event.pop("chain", None)
        expect(chain == chain_of(previous, event), f"{path}:{number}: the chain matches")
        previous = chain
        events.append(event)
    return events


def write_trace(path, events):
    """Writes events as remitvm writes a trace: canonical JSON lines, each with its chain (so a test
    can edit a trace consistently, as a forger who knows the format could)."""
    lines, previous = [], ""
    for event in events:
        record = {k: v for k, v in event.items() if k != "chain"}
        previous = chain_of(previous, record)
        lines.append(canonical({**record, "chain": previous}) + "\n")
    pathlib.Path(path).write_text("".join(lines), encoding="utf-8")


class Workspace:
    """A temporary directory with files; removed afterwards."""

    def __init__(self, files=None):
        self.path = pathlib.Path(tempfile.mkdtemp(prefix="remit-e2e-"))
        for name, text in (files or {}).items():
            self.write(name, text)

    def write(self, name, text):
        p = self.path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text, encoding="utf-8")
        return p

    def read(self, name):
        return (self.path / name).read_text(encoding="utf-8")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


class LineServer:
    """A server process speaking one message per line on stdin/stdout (`remitvm serve`, `remitvm
    mcp`). Its output is read on a thread, so a test can wait for a line with a timeout; leaving the
    `with` block kills a server that is still running."""

    def __init__(self, argv, cwd=None):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     cwd=cwd)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.decode("utf-8"))
        self.lines.put(None)

    def send_line(self, text):
        """Writes `text` (str or bytes) and a newline unless it already ends with one."""
        data = text if isinstance(text, bytes) else text.encode("utf-8")
        self.proc.stdin.write(data if data.endswith(b"\n") else data + b"\n")
        self.proc.stdin.flush()

    def next_line(self, timeout=30):
        """The next output line, or None once the server closed its output."""
        return self.lines.get(timeout=timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def main(namespace):
    tests = [(name, fn) for name, fn in namespace.items() if name.startswith("test_") and callable(fn)]
    failed = 0
    for name, fn in tests:
        try:
            fn()
            print(f"ok    {name}")
        except Exception:  # noqa: BLE001 - report every failure and go on
            failed += 1
            print(f"FAIL  {name}")
            traceback.print_exc(file=sys.stdout)
    print(f"{len(tests) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
