#!/usr/bin/env python3
"""`remitvm test` / `remit test` end to end (docs/testing.md): the file line, `  ok    NAME` and
`  FAIL  NAME: file:line:col: message` lines and the `N passed, M failed` total; exit 0, 1 and 2;
expectation messages with their position; runtime errors rendered on one line; approve_all against
R0302; the program budget; missing and malformed fixture files; untagged arguments to main;
directory search (sorted, .venv skipped); files that do not check; both front ends alike; and the
examples' own tests."""
import time

from harness import REMIT, REMITVM, REPO, Workspace, expect, main, run

SUITE = "tests/e2e/programs_test/suite.rmt"


def line_col(path, snippet, nth=1):
    """1-based line and column of the nth occurrence of snippet in the file."""
    hits = []
    for i, line in enumerate((REPO / path).read_text(encoding="utf-8").splitlines()):
        if snippet in line:
            hits.append((i + 1, line.index(snippet) + 1))
    expect(len(hits) >= nth, f"{path}: no occurrence {nth} of {snippet!r}")
    return hits[nth - 1]


def at(path, snippet, nth=1):
    line, col = line_col(path, snippet, nth)
    return f"{path}:{line}:{col}"


def test_suite_reports_every_outcome():
    r = run(REMITVM, "test", SUITE, cwd=REPO)
    expect(r.code == 1, "a failing test exits 1", r)
    lines = r.out.splitlines()
    # A runtime error is rendered at the place it happened, on one line.
    index_at = at(SUITE, "xs[i]")
    missing_at = at(SUITE, 'test "missing fixtures"')
    malformed_at = at(SUITE, 'test "malformed fixtures"')
    expected = [
        SUITE,
        "  ok    arithmetic",
        f"  FAIL  expect with a message: {at(SUITE, 'expect 1 + 1 == 3')}: one plus one is two",
        f"  FAIL  expect without a message: {at(SUITE, 'expect x * 2 == 5')}: expectation failed: x * 2 == 5",
        None,  # runtime error: checked below
        "  ok    arguments to main are untagged",
        None,  # R0302: checked below
        "  ok    approve_all approves",
        None,  # R0302 for `approval always`
        f"  FAIL  missing fixtures: {missing_at}: fixtures file "
        "tests/e2e/programs_test/fixtures/nope.json does not exist",
        None,  # malformed fixtures
        None,  # R0401
        "3 passed, 8 failed",
    ]
    expect(len(lines) == len(expected), f"{len(expected)} lines", r)
    for got, want in zip(lines, expected):
        if want is not None:
            expect(got == want, f"line {want!r}", r)
    expect(lines[4].startswith(f"  FAIL  runtime error: {index_at}: runtime error[R0101]: "), "index error", r)
    expect(lines[6].startswith(f"  FAIL  untrusted data needs approval: {at(SUITE, 'notes.save(page)')}: "
                               "runtime error[R0302]: 'notes.save' needs approval"), "R0302 without approve_all", r)
    expect(lines[8].startswith(f"  FAIL  approval always is denied: {at(SUITE, 'bank.pay(amount)')}: "
                               "runtime error[R0302]: 'bank.pay' needs approval"), "approval always", r)
    expect(lines[10].startswith(f"  FAIL  malformed fixtures: {malformed_at}: "
                                "invalid fixtures tests/e2e/programs_test/fixtures/broken.json: "), "malformed", r)
    expect(lines[11].startswith(f"  FAIL  the program budget applies: {at(SUITE, 'web.get(url)', 3)}: "
                                "runtime error[R0401]: "), "the program's budget still applies", r)
    expect(r.err == "", "nothing on stderr for a program that checks", r)


def test_remit_test_is_remitvm_test():
    for args in ([SUITE], ["examples/hello"], ["tests/e2e/programs_test", "--host",
                                               "tests/e2e/programs_test/host.rmti"]):
        a = run(REMITVM, "test", *args, cwd=REPO)
        b = run(REMIT, "test", *args, cwd=REPO)
        expect((a.code, a.out, a.err) == (b.code, b.out, b.err), f"remit test == remitvm test for {args}", b)


def test_examples_pass():
    files = sorted(str(p.relative_to(REPO)) for p in (REPO / "examples").glob("*/*.rmt")
                   if p.name != "unsafe_variant.rmt")
    r = run(REMITVM, "test", *files, cwd=REPO)
    expect(r.code == 0 and r.err == "", "every example's tests pass", r)
    lines = r.out.splitlines()
    expect(not any(line.startswith("  FAIL") for line in lines), "no FAIL line", r)
    for f in files:
        expect(f in lines, f"{f} has tests", r)
        block = lines[lines.index(f) + 1:]
        oks = 0
        for line in block:
            if not line.startswith("  ok    "):
                break
            oks += 1
        expect(oks >= 2, f"{f}: at least two tests", r)
    passed = sum(1 for line in lines if line.startswith("  ok    "))
    expect(lines[-1] == f"{passed} passed, 0 failed", "total", r)


def test_examples_directory():
    # The directory also holds email_assistant's unsafe_variant.rmt, which does not check (E0301) on
    # purpose and has no test blocks: a file without tests is skipped, so it does not count.
    r = run(REMITVM, "test", "examples", cwd=REPO)
    expect(r.code == 0 and r.err == "", "every test in examples/ passes", r)
    lines = r.out.splitlines()
    expect("examples/email_assistant/unsafe_variant.rmt" not in lines, "a file without tests prints nothing", r)
    expect(not any(line.startswith("  FAIL") for line in lines), "no test fails", r)
    expect(lines[-1].endswith(" passed, 0 failed"), "total", r)
    files = [line for line in lines if line.startswith("examples/")]
    # One line per example app (a folder with its program), in sorted order.
    apps = sorted(f"examples/{p.name}/{p.name}.rmt" for p in (REPO / "examples").iterdir() if (p / f"{p.name}.rmt").exists())
    expect(files == apps and len(files) == 5, f"sorted file lines {files}", r)


HOST = """capability kv.get(key: Str) -> Str
  cost 0.001
  idempotent
"""

PASSING = """program p
uses kv.get

fn main(key: Str) -> Str {
  return kv.get(key) retry 1 else "none"
}

test "reads a key" fixtures "fixtures/kv.json" {
  expect main("a") == "1"
}

test "no fixtures means every call fails" {
  expect main("a") == "none"
}
"""

FIXTURE = '{"capabilities": {"kv.get": [{"args": {"key": "a"}, "output": "1"}]}}'


def test_directory_search_sorts_and_skips_venv():
    with Workspace({"host.rmti": HOST, "b/p.rmt": PASSING, "a/p.rmt": PASSING, "b/fixtures/kv.json": FIXTURE,
                    "a/fixtures/kv.json": FIXTURE, "a/notests.rmt": "program q\n\nfn main() -> Int {\n  return 1\n}\n",
                    ".venv/lib/p.rmt": PASSING.replace('== "1"', '== "2"'),
                    "a/.venv/x.rmt": "program broken {"}) as ws:
        r = run(REMITVM, "test", cwd=ws.path)  # default: the current directory
        expect(r.code == 0, "exit 0 when every test passes", r)
        expect(r.out == "./a/p.rmt\n  ok    reads a key\n  ok    no fixtures means every call fails\n"
               "./b/p.rmt\n  ok    reads a key\n  ok    no fixtures means every call fails\n4 passed, 0 failed\n",
               "sorted, files without tests skipped, .venv skipped", r)
        r = run(REMITVM, "test", "b", "a/p.rmt", cwd=ws.path)
        expect(r.code == 0 and r.out.splitlines()[0] == "b/p.rmt" and r.out.splitlines()[3] == "a/p.rmt",
               "paths in the order given", r)
        r = run(REMITVM, "test", "a/notests.rmt", cwd=ws.path)
        expect(r.code == 0 and r.out == "0 passed, 0 failed\n", "no tests: exit 0", r)


def test_file_that_does_not_check():
    bad = PASSING.replace('return kv.get(key) retry 1 else "none"', 'return kv.get(1)')
    with Workspace({"host.rmti": HOST, "bad.rmt": bad, "good.rmt": PASSING, "fixtures/kv.json": FIXTURE,
                    "syntax.rmt": "program s\n\nfn main( -> Int {\n}\n"}) as ws:
        r = run(REMITVM, "test", "bad.rmt", "good.rmt", cwd=ws.path)
        expect(r.code == 1, "exit 1", r)
        expect(r.out == "good.rmt\n  ok    reads a key\n  ok    no fixtures means every call fails\n"
               "2 passed, 2 failed\n", "both tests of bad.rmt count as failed", r)
        expect(r.err.startswith("bad.rmt:") and "error[" in r.err and "1 error(s) in bad.rmt" in r.err,
               "its diagnostics on stderr", r)
        r = run(REMITVM, "test", "syntax.rmt", cwd=ws.path)
        expect(r.code == 1 and r.out == "0 passed, 1 failed\n" and "syntax.rmt:3:" in r.err,
               "a file that does not parse counts as a failure", r)
    # No host.rmti next to the program or above it: E0002 fails its tests, unless --host names one.
    with Workspace({"hosts/kv.rmti": HOST, "p.rmt": PASSING, "fixtures/kv.json": FIXTURE}) as ws:
        r = run(REMITVM, "test", "p.rmt", cwd=ws.path)
        expect(r.code == 1 and r.out == "0 passed, 2 failed\n" and "error[E0002]" in r.err, "no host", r)
        r = run(REMITVM, "test", "p.rmt", "--host", "hosts/kv.rmti", cwd=ws.path)
        expect(r.code == 0 and r.out.endswith("2 passed, 0 failed\n"), "--host names the host interface", r)


def test_usage_errors():
    with Workspace({"host.rmti": HOST, "p.rmt": PASSING, "fixtures/kv.json": FIXTURE}) as ws:
        for args in (["missing.rmt"], ["p.rmt", "missing_dir"], ["--bogus"], ["p.rmt", "--host", "nope.rmti"],
                     ["p.rbc"]):
            if args == ["p.rbc"]:
                ws.write("p.rbc", "RBC")
            for tool in (REMITVM, REMIT):
                r = run(tool, "test", *args, cwd=ws.path)
                expect(r.code == 2 and r.out == "" and r.err != "", f"{args}: usage error, exit 2", r)


def test_fixture_problems_fail_one_test_only():
    prog = PASSING + '\ntest "gone" fixtures "fixtures/gone.json" {\n  expect true\n}\n' \
        + '\ntest "bad json" fixtures "fixtures/bad.json" {\n  expect true\n}\n'
    with Workspace({"host.rmti": HOST, "sub/p.rmt": prog, "sub/fixtures/kv.json": FIXTURE,
                    "sub/fixtures/bad.json": "{ not json"}) as ws:
        r = run(REMITVM, "test", "sub/p.rmt", cwd=ws.path)
        lines = r.out.splitlines()
        expect(r.code == 1 and lines[-1] == "2 passed, 2 failed", "exit 1, the other tests run", r)
        expect(lines[3] == "  FAIL  gone: sub/p.rmt:16:1: fixtures file sub/fixtures/gone.json does not exist",
               "a missing fixture names the file, relative to the program's directory", r)
        expect(lines[4] == "  FAIL  bad json: sub/p.rmt:20:1: invalid JSON in sub/fixtures/bad.json at line 1, column 4",
               "malformed JSON names the file and where it breaks", r)


def test_many_tests_are_fast():
    tests = "".join(f'\ntest "t{i}" fixtures "fixtures/kv.json" {{\n  expect main("a") == "1"\n}}\n'
                    for i in range(50))
    with Workspace({"host.rmti": HOST, "p.rmt": PASSING + tests, "fixtures/kv.json": FIXTURE}) as ws:
        start = time.monotonic()
        r = run(REMITVM, "test", "p.rmt", cwd=ws.path)
        elapsed = time.monotonic() - start
        expect(r.code == 0 and r.out.endswith("52 passed, 0 failed\n"), "52 tests pass", r)
        # Milliseconds in a release build; generous for debug and sanitizer builds on a busy machine.
        expect(elapsed < 5, f"52 tests took {elapsed:.2f}s")


if __name__ == "__main__":
    main(globals())
