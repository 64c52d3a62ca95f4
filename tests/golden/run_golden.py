#!/usr/bin/env python3
"""Golden tests: run a tool on each case file and compare exit code, stdout and stderr with the
recorded NAME.out beside it.

A case is any .rmt or .rmti file in the case directory. Its first line may say how to run it:
    # golden: check --json          (the default is: check)
The case file's name is appended to those arguments. The tool runs with the case directory as
its working directory, so paths in the output are short and stable; run ids are masked. A file
named host.rmti is the directory's host interface, not a case.

    run_golden.py --tool build/cli/remitc --dir tests/golden/check [--update]

--update rewrites every NAME.out from the current output (review the diff before committing).
"""
import argparse
import difflib
import pathlib
import re
import shlex
import subprocess
import sys


def run_case(tool, case):
    first = case.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0]
    args = ["check"]
    if first.startswith("# golden:"):
        args = shlex.split(first[len("# golden:"):])
    proc = subprocess.run([tool, *args, case.name], cwd=case.parent, capture_output=True, timeout=60)
    text = (f"exit: {proc.returncode}\n--- stdout\n{proc.stdout.decode('utf-8', 'replace')}"
            f"--- stderr\n{proc.stderr.decode('utf-8', 'replace')}")
    # Run ids carry the time and a random part.
    return RUN_ID.sub("RUN_ID", text)


RUN_ID = re.compile(r"\b\d{8}-\d{6}-[0-9a-f]{6}\b")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--update", action="store_true")
    opts = parser.parse_args()
    tool = str(pathlib.Path(opts.tool).resolve())
    # A directory's shared host interface (host.rmti) is not a case.
    cases = sorted(p for p in pathlib.Path(opts.dir).iterdir()
                   if p.suffix in (".rmt", ".rmti") and p.is_file() and p.name != "host.rmti")
    if not cases:
        print(f"no cases in {opts.dir}")
        return 1
    failed = 0
    for case in cases:
        actual = run_case(tool, case)
        expected_path = case.with_suffix(".out")
        if opts.update:
            expected_path.write_text(actual, encoding="utf-8")
            continue
        expected = expected_path.read_text(encoding="utf-8") if expected_path.exists() else "<missing .out file>\n"
        if actual != expected:
            failed += 1
            print(f"FAIL {case.name}")
            sys.stdout.writelines(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                                       "expected", "actual"))
        else:
            print(f"ok   {case.name}")
    print(f"{len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
