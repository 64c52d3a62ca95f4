#!/usr/bin/env python3
"""The checker corpus: programs with their expected diagnostics written inline.

Every .rmt file below tests/check/ is checked with `remitc check --json` (the host interface is
found by the usual walk up, so each folder has its host.rmti; a policy.toml next to a program is
used too). A trailing comment `# expect E0301` (or `# expect E0301, W0201`) on a line says which
codes must be reported on that line; `# expect-file E0107` in a file's first lines is for a
diagnostic without a position. The diagnostics reported must be exactly the expected ones: a
file without expectations must check cleanly.

    run_corpus.py --tool build/cli/remitc [--dir tests/check]
"""
import argparse
import collections
import json
import pathlib
import re
import subprocess
import sys

EXPECT = re.compile(r"#\s*expect\s+((?:[EWR]\d{4}\s*,?\s*)+)\s*$")
EXPECT_FILE = re.compile(r"#\s*expect-file\s+((?:[EWR]\d{4}\s*,?\s*)+)\s*$")


def expectations(text):
    want = collections.Counter()
    for number, line in enumerate(text.splitlines(), 1):
        m = EXPECT.search(line)
        if m:
            for code in re.findall(r"[EWR]\d{4}", m.group(1)):
                want[(number, code)] += 1
        m = EXPECT_FILE.search(line)
        if m:
            for code in re.findall(r"[EWR]\d{4}", m.group(1)):
                want[(None, code)] += 1
    return want


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--dir", default=str(pathlib.Path(__file__).parent))
    opts = parser.parse_args()
    opts.tool = str(pathlib.Path(opts.tool).resolve())
    cases = sorted(pathlib.Path(opts.dir).rglob("*.rmt"))
    failed = 0
    for case in cases:
        proc = subprocess.run([opts.tool, "check", "--json", case.name], cwd=case.parent, capture_output=True,
                              timeout=60)
        name = case.relative_to(opts.dir)
        try:
            doc = json.loads(proc.stdout)
        except json.JSONDecodeError:
            failed += 1
            print(f"FAIL {name}: no JSON (exit {proc.returncode})\n{proc.stderr.decode()}")
            continue
        # Diagnostics in another file (the host or the policy) are matched by `# expect-file`.
        got = collections.Counter((d["line"] if d["file"] == case.name else None, d["code"])
                                  for d in doc["diagnostics"])
        want = expectations(case.read_text(encoding="utf-8"))
        errors_expected = any(code.startswith("E") for (_, code) in want)
        problems = []
        if got != want:
            missing = want - got
            extra = got - want
            if missing:
                problems.append("missing: " + ", ".join(f"{c} line {l}" for (l, c) in sorted(missing, key=str)))
            if extra:
                shown = [f"{d['code']} line {d['line']}: {d['message']}" for d in doc["diagnostics"]
                         if (d["line"] if d["file"] == case.name else None, d["code"]) in extra]
                problems.append("unexpected: " + "; ".join(shown))
        if doc["ok"] == errors_expected:
            problems.append(f"ok is {doc['ok']}")
        if (proc.returncode == 0) == errors_expected:
            problems.append(f"exit code {proc.returncode}")
        if problems:
            failed += 1
            print(f"FAIL {name}: " + " | ".join(problems))
        else:
            print(f"ok   {name}")
    print(f"{len(cases) - failed} passed, {failed} failed")
    return 1 if failed or not cases else 0


if __name__ == "__main__":
    sys.exit(main())
