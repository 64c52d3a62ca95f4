#!/usr/bin/env python3
"""`remitc diff OLD NEW` end to end (docs/manifest.md "`remitc diff`"): no change → exit 0 and "no
authority widening"; every kind of widening → exit 4 with its line; narrowing → exit 0 with `-`
lines; the --json shape; a side that does not check → exit 1; usage errors → exit 2; and the
prototype-compatible `remit diff` behaving the same."""
import json
import os

from harness import REMIT, REMITC, Workspace, expect, main, run

# The tools may be given relative to the current directory; these tests run them in temp dirs.
REMITC, REMIT = (os.path.abspath(t) if os.sep in t else t for t in (REMITC, REMIT))

HOST = """type Customer = { id: Str, name: Str, email: Str }

capability web.fetch(url: Str deny private) -> Str
  tags untrusted
  cost 0.001
  idempotent

capability files.read(path: Str) -> Str
  tags private
  idempotent

capability crm.find(email: Str) -> Customer
  tags private
  clears untrusted
  idempotent

capability email.send(to: Str deny untrusted, subject: Str, body: Str approve untrusted)

model llm cost 0.02
input topic tags untrusted
"""

# web.fetch: range(2) → 2 calls × $0.001; llm: 1 × $0.02; worst case $0.0220; budget 0.1.
# Flows: web.fetch.url receives untrusted (the topic). email.send gets only literals: no flow,
# no approval site.
BASE = """program digest
uses web.fetch, email.send, llm
budget usd 0.1

fn main(topic: Str) -> Str {
  let pages = for i in range(2) {
    web.fetch("https://example.org/{topic}/{i}")
  }
  let summary = llm.ask(Str, "Summarise these pages in one line.", context: pages)
  email.send(to: "team@example.org", subject: "digest", body: "a digest is ready")
  return summary
}
"""


def edit(old, new, source=BASE):
    expect(source.count(old) == 1, f"{old!r} occurs exactly once")
    return source.replace(old, new)


def diff(old_text, new_text, *flags, tool=None, files=None):
    with Workspace({"host.rmti": HOST, "old.rmt": old_text, "new.rmt": new_text, **(files or {})}) as ws:
        return run(tool or REMITC, "diff", "old.rmt", "new.rmt", *flags, cwd=ws.path)


def changes_of(r):
    """The change lines of a text diff, as (sign, text)."""
    lines = r.out.splitlines()
    expect(all(line.startswith("  + ") or line.startswith("  - ") for line in lines[1:]), "change lines", r)
    return [(line[2], line[4:]) for line in lines[1:]]


def expect_widened(r, *lines, quiet=True):
    expect(r.code == 4, "exit 4 when widened", r)
    expect(r.out.startswith("authority WIDENED:\n"), "header", r)
    expect(r.err == "" or not quiet, "nothing on stderr", r)
    got = changes_of(r)
    for line in lines:
        expect(("+", line) in got, f"widening line {line!r}", r)
    return got


def expect_not_widened(r, *lines):
    expect(r.code == 0, "exit 0 when not widened", r)
    expect(r.out.startswith("no authority widening\n"), "header", r)
    got = changes_of(r)
    expect(all(sign == "-" for sign, _ in got), "only narrowing lines", r)
    for line in lines:
        expect(("-", line) in got, f"narrowing line {line!r}", r)
    return got


def test_identical_programs():
    r = diff(BASE, BASE)
    expect(r.code == 0 and r.out == "no authority widening\n" and r.err == "", "identical", r)
    # Layout and comments are not authority either.
    reformatted = "# a new comment\n" + BASE.replace("  let pages", "\n  # fetch two pages\n  let pages")
    r = diff(BASE, reformatted)
    expect(r.code == 0 and r.out == "no authority widening\n", "comments and blank lines", r)
    r = diff(BASE, BASE, "--json")
    expect(r.code == 0 and json.loads(r.out) == {"widened": False, "changes": [], "narrowed": []}, "identical, json",
           r)


def test_new_resource():
    new = edit("uses web.fetch, email.send, llm", "uses web.fetch, email.send, llm, files.read")
    new = edit('  let summary = llm.ask(Str, "Summarise these pages in one line.", context: pages)',
               '  let notes = files.read("notes/today.txt")\n'
               '  let summary = llm.ask(Str, "Summarise these pages in one line.", context: pages)', new)
    r = diff(BASE, new)
    # files.read costs nothing and its path is a literal: the new resource is the only change.
    got = expect_widened(r, "NEW resource 'files.read' (≤ 1 call(s))")
    expect(got == [("+", "NEW resource 'files.read' (≤ 1 call(s))")], "exactly one change", r)


def test_higher_call_bound():
    r = diff(BASE, edit("range(2)", "range(5)"))
    # web.fetch 2 → 5; worst case 2 × 0.001 + 0.02 = 0.022 → 5 × 0.001 + 0.02 = 0.025.
    got = expect_widened(r, "'web.fetch' worst-case calls 2 -> 5", "worst-case cost $0.0220 -> $0.0250")
    expect(len(got) == 2, "two changes", r)
    # A retry is a higher bound too: llm 1 → 2, 0.022 → 0.042.
    r = diff(BASE, edit("context: pages)", "context: pages) retry 1"))
    got = expect_widened(r, "'llm' worst-case calls 1 -> 2", "worst-case cost $0.0220 -> $0.0420")
    expect(len(got) == 2, "two changes", r)


def test_higher_worst_case_cost_alone():
    """Same program, but the NEW side's host charges more per model call: only the cost moves."""
    with Workspace({"a/host.rmti": HOST, "a/p.rmt": BASE,
                    "b/host.rmti": HOST.replace("model llm cost 0.02", "model llm cost 0.05"), "b/p.rmt": BASE}) as ws:
        r = run(REMITC, "diff", "a/p.rmt", "b/p.rmt", cwd=ws.path)
        # 2 × 0.001 + 0.05 = 0.052
        got = expect_widened(r, "worst-case cost $0.0220 -> $0.0520")
        expect(len(got) == 1, "only the cost", r)
        r = run(REMITC, "diff", "b/p.rmt", "a/p.rmt", cwd=ws.path)
        expect_not_widened(r, "worst-case cost $0.0520 -> $0.0220")


def test_new_tagged_flow_into_a_sink():
    # The email body now carries the model's summary of untrusted pages: a new untrusted flow
    # into email.send.body (approve untrusted), and with it a new approval site.
    new = edit('body: "a digest is ready"', "body: summary")
    r = diff(BASE, new)
    got = expect_widened(r, "flow into email.send.body now receives untrusted (requires approval)",
                         "approval sites 0 -> 1")
    expect(len(got) == 2, f"exactly two changes: {got}", r)
    r = diff(new, BASE)
    expect_not_widened(r, "flow into email.send.body no longer receives untrusted", "approval sites 1 -> 0")


def test_new_tag_on_an_existing_flow():
    # email.send.body already receives untrusted (the summary); now private notes join it.
    one = edit('body: "a digest is ready"', "body: summary")
    two = edit("uses web.fetch, email.send, llm", "uses web.fetch, email.send, llm, files.read", one)
    two = edit("body: summary", 'body: "{summary} {notes}"', two)
    two = edit("  email.send(", '  let notes = files.read("notes/today.txt")\n  email.send(', two)
    r = diff(one, two)
    got = expect_widened(r, "NEW resource 'files.read' (≤ 1 call(s))",
                         "flow into email.send.body now receives private (requires approval)")
    expect(len(got) == 2, f"exactly two changes: {got}", r)


def test_more_approval_sites():
    one = edit('body: "a digest is ready"', "body: summary")
    two = edit('  return summary',
               '  email.send(to: "boss@example.org", subject: "digest", body: summary)\n  return summary', one)
    r = diff(one, two)
    got = expect_widened(r, "'email.send' worst-case calls 1 -> 2", "approval sites 1 -> 2")
    expect(len(got) == 2, f"two changes: {got}", r)


def test_new_uses_entry():
    # Declared but never called: W0201, but it still asks the operator for a grant.
    new = edit("uses web.fetch, email.send, llm", "uses web.fetch, email.send, llm, files.read")
    r = diff(BASE, new)
    got = expect_widened(r, "NEW uses entry 'files.read' (not called)", quiet=False)
    expect(len(got) == 1, "one change", r)
    expect("new.rmt:2:34: warning[W0201]: 'files.read' is declared in uses but never used" in r.err,
           "the checker's warning is shown on stderr", r)
    r = diff(new, BASE)
    expect_not_widened(r, "REMOVED uses entry 'files.read'")
    expect("old.rmt:2:34: warning[W0201]" in r.err, "warning for the old side", r)


def test_higher_budget():
    r = diff(BASE, edit("budget usd 0.1", "budget usd 0.2"))
    got = expect_widened(r, "budget 0.1 -> 0.2")
    expect(len(got) == 1, "one change", r)
    # Dropping the budget line widens too (no program cap any more).
    r = diff(BASE, edit("budget usd 0.1\n", ""))
    expect_widened(r, "budget 0.1 -> None")
    r = diff(BASE, edit("budget usd 0.1", "budget usd 0.05"))
    expect_not_widened(r, "budget 0.1 -> 0.05")


def test_narrowing_is_not_widening():
    r = diff(BASE, edit("range(2)", "range(1)"))
    got = expect_not_widened(r, "'web.fetch' worst-case calls 2 -> 1", "worst-case cost $0.0220 -> $0.0210")
    expect(len(got) == 2, "two narrowing lines", r)
    # Remove web.fetch altogether.
    no_fetch = """program digest
uses email.send, llm
budget usd 0.1

fn main(topic: Str) -> Str {
  let summary = llm.ask(Str, "Summarise what you know about this topic in one line.", context: topic)
  email.send(to: "team@example.org", subject: "digest", body: "a digest is ready")
  return summary
}
"""
    r = diff(BASE, no_fetch)
    expect_not_widened(r, "REMOVED resource 'web.fetch' (was ≤ 2 call(s))", "worst-case cost $0.0220 -> $0.0200",
                       "flow into web.fetch.url no longer receives untrusted")
    r = diff(BASE, no_fetch, "--json")
    doc = json.loads(r.out)
    # The prototype's contract: `changes` holds widenings only; narrowings go to `narrowed`.
    expect(r.code == 0 and doc["widened"] is False and doc["changes"] == [] and
           "REMOVED resource 'web.fetch' (was ≤ 2 call(s))" in doc["narrowed"], "narrowing, json", r)


def test_widening_and_narrowing_together():
    new = edit("range(2)", "range(1)", edit("budget usd 0.1", "budget usd 0.3"))
    r = diff(BASE, new)
    got = expect_widened(r, "budget 0.1 -> 0.3")
    expect(("-", "'web.fetch' worst-case calls 2 -> 1") in got, "the narrowing is listed too", r)


def test_a_sink_reached_only_through_control_flow_says_so():
    # The email's arguments are literals; only the decision on the (untrusted) summary reaches it.
    new = edit('  email.send(to: "team@example.org", subject: "digest", body: "a digest is ready")',
               '  if summary != "" {\n    email.send(to: "team@example.org", subject: "digest", body: "ready")\n  }')
    r = diff(BASE, new)
    expect_widened(r, "flow into email.send.subject now receives untrusted via control flow (allowed)")
    # A flow that data reaches is worded as before.
    r = diff(BASE, edit('body: "a digest is ready"', "body: summary"))
    expect_widened(r, "flow into email.send.body now receives untrusted (requires approval)")


def test_json_shape():
    r = diff(BASE, edit("range(2)", "range(5)"), "--json")
    expect(r.code == 4, "exit 4", r)
    doc = json.loads(r.out)
    expect(list(doc) == ["widened", "changes", "narrowed"], "keys in order", r)
    expect(doc == {"widened": True, "changes": ["'web.fetch' worst-case calls 2 -> 5",
                                                "worst-case cost $0.0220 -> $0.0250"], "narrowed": []}, "content", r)
    expect(all(isinstance(c, str) for c in doc["changes"]), "changes are strings", r)
    both = diff(BASE, edit("range(2)", "range(1)", edit("budget usd 0.1", "budget usd 0.3")), "--json")
    doc = json.loads(both.out)
    expect(both.code == 4 and doc["changes"] == ["budget 0.1 -> 0.3"] and
           "'web.fetch' worst-case calls 2 -> 1" in doc["narrowed"], "widenings and narrowings apart", both)


def test_a_side_that_does_not_check():
    bad = edit("  return summary", "  return summary + 1")
    for old, new, name in ((BASE, bad, "new.rmt"), (bad, BASE, "old.rmt")):
        r = diff(old, new)
        expect(r.code == 1 and r.out == "", f"exit 1, nothing on stdout ({name} is bad)", r)
        expect(f"{name}:" in r.err and "error[E0106]" in r.err, "the diagnostic names the bad side", r)
        expect("error(s) in" not in r.err, "as the prototype's diff: no count line after the diagnostics", r)
        r = diff(old, new, "--json")
        expect(r.code == 1, f"--json: exit 1 ({name} is bad)", r)
    # A denied flow is a checker error, so a diff to it is refused rather than reported.
    leak = edit('to: "team@example.org"', "to: summary")
    r = diff(BASE, leak)
    expect(r.code == 1 and "error[E0301]" in r.err, "an E0301 side is refused", r)
    # Syntax errors too.
    r = diff(BASE, "program p\nfn main( {\n")
    expect(r.code == 1 and "error[E0100]" in r.err, "syntax error", r)


def test_a_policy_beside_the_programs_is_not_applied():
    # A policy that grants nothing and allows no spend: both versions still check and are compared.
    policy = {"policy.toml": "[budget]\nmax_usd = 0.000001\n"}
    r = diff(BASE, BASE, files=policy)
    expect(r.code == 0 and "no authority widening" in r.out, "compared despite the policy", r)
    r = diff(BASE, edit("range(2)", "range(5)"), files=policy)
    expect(r.code == 4 and "E0501" not in r.err, "the widening is reported, not the policy", r)


def test_usage_errors():
    with Workspace({"host.rmti": HOST, "old.rmt": BASE}) as ws:
        r = run(REMITC, "diff", "old.rmt", cwd=ws.path)
        expect(r.code == 2 and "diff needs OLD and NEW programs" in r.err, "one file", r)
        r = run(REMITC, "diff", "old.rmt", "missing.rmt", cwd=ws.path)
        expect(r.code == 2 and "no such file: missing.rmt" in r.err, "missing file", r)
        r = run(REMITC, "diff", "old.rmt", "old.rmt", "--bogus", cwd=ws.path)
        expect(r.code == 2, "unknown flag", r)


def test_host_flag():
    with Workspace({"hosts/h.rmti": HOST, "old.rmt": BASE, "new.rmt": edit("range(2)", "range(3)")}) as ws:
        r = run(REMITC, "diff", "old.rmt", "new.rmt", cwd=ws.path)
        expect(r.code == 1 and "error[E0002]" in r.err, "no host found", r)
        r = run(REMITC, "diff", "old.rmt", "new.rmt", "--host", "hosts/h.rmti", cwd=ws.path)
        expect_widened(r, "'web.fetch' worst-case calls 2 -> 3")


def test_remit_front_end_behaves_the_same():
    cases = [
        (BASE, BASE, ()),
        (BASE, edit("range(2)", "range(5)"), ()),
        (BASE, edit("range(2)", "range(5)"), ("--json",)),
        (BASE, edit("range(2)", "range(1)"), ()),
        (BASE, edit('body: "a digest is ready"', "body: summary"), ("--json",)),
        (BASE, edit("  return summary", "  return summary + 1"), ()),
    ]
    for old, new, flags in cases:
        a = diff(old, new, *flags)
        b = diff(old, new, *flags, tool=REMIT)
        expect((a.code, a.out, a.err) == (b.code, b.out, b.err), f"remit diff == remitc diff {flags}", b)


if __name__ == "__main__":
    main(globals())
