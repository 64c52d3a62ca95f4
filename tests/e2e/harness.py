"""A tiny harness for end-to-end tests that drive the real binaries.

Each test file defines functions named test_*; `main()` runs them in order, prints one line per
test and a final `N passed, M failed`, and exits 1 if any failed. Binaries come from the
environment (REMITC, REMIT, REMITVM), which ctest sets.
"""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import traceback

REPO = pathlib.Path(__file__).resolve().parents[2]
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


def run(tool, *args, cwd=None, timeout=60, stdin=None):
    proc = subprocess.run([tool, *map(str, args)], cwd=cwd, capture_output=True, timeout=timeout, input=stdin)
    return Result(proc)


def expect(cond, message, result=None):
    if not cond:
        raise AssertionError(message + (f"\n{result!r}" if result is not None else ""))


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
