#!/usr/bin/env python3
"""Golden tests: run a tool on each case file and compare exit code, stdout and stderr with the
recorded NAME.out beside it.

A case is a .rmt, .rmti or .jsonl file in the case directory; files in its subdirectories (such as
fixtures/, policies/ or traces/, which cases name) are not cases, and a file named host.rmti is the
directory's host interface. (render/unit/ holds renderings that tests/unit/test_diagnostics_render.cpp
pins, for codes no command can produce.) The leading comment lines of a .rmt or .rmti case may say how to run it:
    # golden: check --json          the arguments (default: check); the case's file name is appended
    # golden-tool: remitvm          run this tool, found beside --tool, instead of --tool
    # golden-without: host.rmti     delete this file from the case's copy of the directory (E0002)
A .jsonl case is a `remitvm serve` session (remitvm found beside --tool): its lines are the
requests, each sent after the reply to the one before; the replies are recorded, then, under
`--- rendered`, the `rendered` text of each reply that has one, unescaped.

Each case runs in a scratch copy of the case directory (its sibling directories linked beside it),
as its working directory, so paths in the output are short and stable, a run's state (.remit/:
traces, approvals) stays out of the source tree, and no case sees another's. Run ids are masked.

    run_golden.py --tool build/cli/remitc --dir tests/golden/check [--update]

--update rewrites every NAME.out from the current output (review the diff before committing).
"""
import argparse
import difflib
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

# Goldens are plain text: a CLICOLOR_FORCE in the caller's environment must not colour them.
os.environ.pop("CLICOLOR_FORCE", None)


def directives(case):
    """The `# golden...: VALUE` lines of the case's leading comment block, by name."""
    found = {}
    for line in case.read_text(encoding="utf-8", errors="replace").split("\n"):
        if not line.startswith("#"):
            break
        m = re.match(r"# (golden(?:-[a-z]+)?):(.*)$", line)
        if m:
            found[m.group(1)] = m.group(2).strip()
    return found


def run_case(tool, case):
    with tempfile.TemporaryDirectory(prefix="remit-golden-") as scratch:
        # The case directory is copied; its siblings are linked, for cases that name their files
        # (host cases check ../check/ok_program.rmt).
        directory = case.parent.resolve()
        cwd = pathlib.Path(scratch) / directory.name
        for sibling in directory.parent.iterdir():
            if sibling != directory:
                (pathlib.Path(scratch) / sibling.name).symlink_to(sibling)
        shutil.copytree(directory, cwd, ignore=shutil.ignore_patterns("*.out", ".remit"))
        if case.suffix == ".jsonl":
            text = serve_session(tool.parent / "remitvm", case, cwd)
        else:
            d = directives(case)
            if "golden-without" in d:
                (cwd / d["golden-without"]).unlink()
            program = tool.parent / d["golden-tool"] if "golden-tool" in d else tool
            command = [str(program), *shlex.split(d.get("golden", "check")), case.name]
            proc = subprocess.run(command, cwd=cwd, capture_output=True, timeout=60)
            text = (f"exit: {proc.returncode}\n--- stdout\n{proc.stdout.decode('utf-8', 'replace')}"
                    f"--- stderr\n{proc.stderr.decode('utf-8', 'replace')}")
    # Run ids carry the time and a random part.
    return RUN_ID.sub("RUN_ID", text)


def serve_session(remitvm, case, cwd):
    """Sends each request line of `case` to one `remitvm serve`, after the reply to the one before
    (an abort sent early could land while the program is still being checked), then adds each
    reply's `rendered` text as it reads unescaped."""
    proc = subprocess.Popen([str(remitvm), "serve"], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    replies = []
    for request in case.read_bytes().splitlines():
        proc.stdin.write(request + b"\n")
        proc.stdin.flush()
        replies.append(proc.stdout.readline())
    out, err = proc.communicate(timeout=60)
    stdout = b"".join(replies).decode("utf-8", "replace") + out.decode("utf-8", "replace")
    rendered = ""
    for line in stdout.splitlines():
        reply = json.loads(line)
        if "rendered" in reply:
            rendered += f"reply {reply.get('id')}:\n{reply['rendered']}"
    return (f"exit: {proc.returncode}\n--- stdout\n{stdout}--- stderr\n{err.decode('utf-8', 'replace')}"
            f"--- rendered\n{rendered}")


RUN_ID = re.compile(r"\b\d{8}-\d{6}-[0-9a-f]{6}\b")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--update", action="store_true")
    opts = parser.parse_args()
    tool = pathlib.Path(opts.tool).resolve()
    cases = sorted(p for p in pathlib.Path(opts.dir).iterdir()
                   if p.suffix in (".rmt", ".rmti", ".jsonl") and p.is_file() and p.name != "host.rmti")
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
