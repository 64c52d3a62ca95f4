#!/usr/bin/env python3
"""End-to-end tests of `remitc check` and the `remit` front end: exit codes, text and JSON output,
host discovery, directories, and I/O errors (docs/compatibility.md, docs/diagnostics.md)."""
import json

from harness import REMIT, REMITC, REMITVM, Workspace, expect, main, run

HOST = """capability web.fetch(url: Str deny private) -> Str
  tags untrusted
  cost 0.001
  idempotent
model llm cost 0.02
input topic tags untrusted
"""

GOOD = """program good
uses web.fetch

fn main(topic: Str) -> Str {
  return web.fetch("https://example.org/{topic}")
}
"""

BAD = """program bad

fn main() -> Int {
  let x = 1 < 2 < 3
  return x +
}
"""


def test_usage_errors_exit_2():
    r = run(REMITC)
    expect(r.code == 2 and "usage: remitc" in r.err, "no command", r)
    r = run(REMITC, "frobnicate")
    expect(r.code == 2 and "unknown command 'frobnicate'" in r.err, "unknown command", r)
    r = run(REMITC, "check", "--bogus", "x.rmt")
    expect(r.code == 2 and "unknown option --bogus" in r.err, "unknown flag", r)
    r = run(REMITC, "check")
    expect(r.code == 2, "check without files", r)
    r = run(REMITC, "check", "--host")
    expect(r.code == 2 and "needs a value" in r.err, "flag without value", r)
    r = run(REMITVM)
    expect(r.code == 2, "remitvm without a command", r)
    r = run(REMITC, "--help")
    expect(r.code == 0 and "check" in r.out, "help", r)


def test_missing_file_is_io_error():
    with Workspace() as ws:
        r = run(REMITC, "check", "nope.rmt", cwd=ws.path)
        expect(r.code == 2 and "no such file: nope.rmt" in r.err, "missing file", r)
        r = run(REMITC, "check", "nope.rmt", "--json", cwd=ws.path)
        expect(r.code == 2 and r.out == "", "--json usage errors print nothing on stdout", r)


def test_good_program_checks():
    with Workspace({"host.rmti": HOST, "good.rmt": GOOD}) as ws:
        r = run(REMITC, "check", "good.rmt", cwd=ws.path)
        expect(r.code == 0, "exit 0", r)
        expect(r.out.strip().endswith("ok: good.rmt (no policy checked)"), "ok line", r)
        r2 = run(REMIT, "check", "good.rmt", cwd=ws.path)
        expect((r2.code, r2.out, r2.err) == (r.code, r.out, r.err), "remit check == remitc check", r2)


def test_syntax_errors_text_and_json():
    with Workspace({"host.rmti": HOST, "bad.rmt": BAD}) as ws:
        r = run(REMITC, "check", "bad.rmt", cwd=ws.path)
        expect(r.code == 1, "exit 1", r)
        expect("bad.rmt:4:17: error[E0100]: comparisons cannot be chained" in r.err, "chained", r)
        expect("   4 |   let x = 1 < 2 < 3" in r.err, "excerpt", r)
        expect("bad.rmt:5:13: error[E0100]: expected an expression, found end of line" in r.err, "second error", r)
        expect(r.err.strip().endswith("2 error(s) in bad.rmt"), "count line", r)
        r = run(REMITC, "check", "bad.rmt", "--json", cwd=ws.path)
        expect(r.code == 1, "exit 1 with --json", r)
        doc = json.loads(r.out)
        expect(doc["file"] == "bad.rmt" and doc["ok"] is False and doc["manifest"] is None, "envelope", r)
        d = doc["diagnostics"][0]
        expect(list(d) == ["code", "severity", "message", "file", "line", "col", "end_line", "end_col", "hint",
                           "notes"], "diagnostic keys in order", r)
        expect((d["code"], d["line"], d["col"]) == ("E0100", 4, 17), "first diagnostic", r)


def test_several_files_and_directories():
    with Workspace({"host.rmti": HOST, "a/good.rmt": GOOD, "a/sub/bad.rmt": BAD, "a/.hidden/x.rmt": BAD,
                    "a/notes.txt": "not a program"}) as ws:
        r = run(REMITC, "check", "a", "--json", cwd=ws.path)
        expect(r.code == 1, "one bad file makes exit 1", r)
        docs = json.loads(r.out)
        expect([d["file"] for d in docs] == ["a/good.rmt", "a/sub/bad.rmt"], "files found, hidden skipped", r)
        expect([d["ok"] for d in docs] == [True, False], "per-file ok", r)
        r = run(REMITC, "check", "a/good.rmt", "a/good.rmt", cwd=ws.path)
        expect(r.code == 0 and r.out.count("ok: a/good.rmt") == 2, "two files, text", r)


def test_host_discovery_walks_up():
    with Workspace({"host.rmti": HOST, "deep/er/good.rmt": GOOD}) as ws:
        r = run(REMITC, "check", "deep/er/good.rmt", cwd=ws.path)
        expect(r.code == 0, "host found two levels up", r)
        r = run(REMITC, "check", "good.rmt", cwd=ws.path / "deep" / "er")
        expect(r.code == 0, "host found from inside", r)


def test_no_host_is_E0002():
    with Workspace({"good.rmt": GOOD}) as ws:
        r = run(REMITC, "check", "good.rmt", cwd=ws.path)
        expect(r.code == 1, "exit 1", r)
        expect("good.rmt:1:1: error[E0002]: no host.rmti found next to the program or in a parent directory\n"
               "   1 | program good\n       ^^^^^^^^^^^^\n" in r.err, "E0002 message, at the program's header", r)
        expect("hint: pass --host" in r.err, "hint", r)
        ws.write("elsewhere/h.rmti", HOST)
        r = run(REMITC, "check", "good.rmt", "--host", "elsewhere/h.rmti", cwd=ws.path)
        expect(r.code == 0, "--host", r)
        r = run(REMITC, "check", "good.rmt", "--host", "missing.rmti", cwd=ws.path)
        expect(r.code == 2 and "no such file: missing.rmti" in r.err, "--host to a missing file", r)


def test_host_syntax_errors_name_the_host_file():
    with Workspace({"host.rmti": "capability send(to: Str)\n  cost 0.1 idempotent\n", "good.rmt": GOOD}) as ws:
        r = run(REMITC, "check", "good.rmt", cwd=ws.path)
        expect(r.code == 1, "exit 1", r)
        expect("host.rmti:1:12: error[E0100]: capability names must be namespaced, e.g. email.send" in r.err,
               "host error 1", r)


def test_not_utf8_is_E0001():
    with Workspace({"host.rmti": HOST, "bin.rmt": b"program p\n# \xff\xfe\n"}) as ws:
        r = run(REMITC, "check", "bin.rmt", cwd=ws.path)
        expect(r.code == 1 and "bin.rmt:2:3: error[E0001]: source is not valid UTF-8" in r.err, "E0001", r)


def test_directory_as_file_for_fmt():
    with Workspace({"d/x.txt": "x"}) as ws:
        r = run(REMITC, "fmt", "d", cwd=ws.path)
        expect(r.code == 2 and "is a directory" in r.err, "fmt on a directory", r)


if __name__ == "__main__":
    main(globals())
