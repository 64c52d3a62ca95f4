#!/usr/bin/env python3
"""The PostgreSQL store from the command line (docs/fleet.md), against the private cluster of
ctest's fixture "postgresql" (tests/pg/cluster.py; $REMIT_TEST_PG_STATE): `run`, `approve`,
`approvals`, `resume`, `trace` and `replay` with `--store URL` (or $REMIT_STORE) behave exactly as
with a state directory; malformed URLs, unreachable databases and newer schemas are exit 2 naming
the store and never its password; `store migrate`; approvals with a quorum and an expiry and a
shared budget scope, in both stores."""
import json
import time

from fleet import database, sql
from harness import REMITVM, Workspace, expect, main, run
from test_approvals import PROGRAM

HOST = """input who tags untrusted

capability crm.lookup(name: Str) -> Str
  tags untrusted
  cost 0.001
  idempotent

capability mail.send(to: Str, body: Str approve untrusted) -> Str
  cost 0.002
"""

FIXTURES = json.dumps({"capabilities": {"crm.lookup": [{"output": "a customer", "repeat": True}],
                                        "mail.send": [{"output": "m-1", "repeat": True}]}})

POLICY = '[grant."crm.lookup"]\nmax_calls = 1\n\n[grant."mail.send"]\nmax_calls = 1\n'


def workspace(policy=POLICY):
    return Workspace({"host.rmti": HOST, "prog.rmt": PROGRAM, "policy.toml": policy, "fixtures/run.json": FIXTURES})


def pause(ws, *store):
    r = run(REMITVM, "run", "prog.rmt", "-i", "who=Ada", "--json", *store, cwd=ws.path)
    expect(r.code == 3, "the send pauses for approval", r)
    return json.loads(r.out)


def calls_of(trace_text):
    """(resource, status, replayed) of each call in `remitvm trace` output."""
    return [line.split()[2:5] for line in trace_text.splitlines() if line.startswith("#")]


def test_a_run_approved_and_resumed_is_the_same_in_both_stores():
    url = database("same")
    outcomes = {}
    for name, flags in (("files", ["--state-dir", "st"]), ("postgresql", ["--store", url])):
        with workspace() as ws:
            paused = pause(ws, *flags)
            digest, run_id = paused["pending"]["digest"], paused["run_id"]
            listed = json.loads(run(REMITVM, "approvals", "list", "--json", *flags, cwd=ws.path).out)
            expect([r["digest"] for r in listed] == [digest], f"{name}: the request is listed: {listed}")
            a = run(REMITVM, "approve", digest[:10], "--by", "ann", *flags, cwd=ws.path)
            expect(a.code == 0 and "approved" in a.out, f"{name}: approve", a)
            r = run(REMITVM, "resume", run_id, "--json", *flags, cwd=ws.path)
            expect(r.code == 0, f"{name}: the resume completes", r)
            done = json.loads(r.out)
            t = run(REMITVM, "trace", done["run_id"], *flags, cwd=ws.path)
            expect(t.code == 0, f"{name}: trace", t)
            p = run(REMITVM, "replay", done["run_id"], *flags, cwd=ws.path)
            expect(p.code == 0 and "replay ok: 2 recorded call(s)" in p.err, f"{name}: replay", p)
            again = run(REMITVM, "approve", digest, *flags, cwd=ws.path)
            expect(again.code == 2 and "already used by run" in again.err, f"{name}: single use", again)
            outcomes[name] = (done["result"], done["spent_usd"], calls_of(t.out))
    expect(outcomes["files"] == outcomes["postgresql"], f"the same outcome in both stores: {outcomes}")


def test_remit_store_names_the_store_and_follow_ups_repeat_it():
    url = database("env")
    with workspace() as ws:
        env_run = lambda *a: run(REMITVM, *a, cwd=ws.path, env={"REMIT_STORE": url})  # noqa: E731
        r = env_run("run", "prog.rmt", "-i", "who=Ada")
        expect(r.code == 3 and "--store" not in r.err, "with $REMIT_STORE the follow-ups need no flag", r)
        expect(not (ws.path / ".remit").exists(), "nothing went to a state directory")
        listed = json.loads(env_run("approvals", "list", "--json").out)
        expect(len(listed) == 1, "the request is in the database")
        r = run(REMITVM, "run", "prog.rmt", "-i", "who=Bo", "--store", url, cwd=ws.path)
        expect(r.code == 3 and f"--store '{url}'" in r.err, "the follow-ups repeat --store", r)
        r = env_run("run", "prog.rmt", "-i", "who=Cy", "--state-dir", "st")
        expect(r.code == 3 and (ws.path / "st" / "approvals.json").exists(), "--state-dir wins over $REMIT_STORE", r)
        r = run(REMITVM, "trace", "20260101-120000-abcdef", "--store", url, "--state-dir", "st", cwd=ws.path)
        expect(r.code == 2 and "--store and --state-dir name two different stores" in r.err, "one store", r)


def test_bad_urls_unreachable_databases_and_newer_schemas_are_exit_2_naming_the_store():
    with workspace() as ws:
        for args, words in (
            (["--store", "mysql://db"], "malformed store URL"),
            (["--store", "postgresql://ann:s3cret@/db?port=nope"], 'invalid integer value "nope"'),
            (["--store", "postgresql://ann:s3cret@/db?host=/nonexistent-remit"],
             "cannot connect to the PostgreSQL store postgresql://ann@/db?host=/nonexistent-remit"),
        ):
            for command in (["run", "prog.rmt", "-i", "who=A"], ["approvals", "list"], ["runs", "list"],
                            ["resume", "20260101-120000-abcdef"], ["store", "migrate"]):
                r = run(REMITVM, *command, *args, cwd=ws.path)
                expect(r.code == 2 and words in r.err and "s3cret" not in r.err + r.out,
                       f"{command[0]} with {args[1]}", r)
        url = database("newer")
        r = run(REMITVM, "store", "migrate", "--store", url, cwd=ws.path)
        expect(r.code == 0 and "schema version 1 (1 migration(s) applied)" in r.out, "store migrate", r)
        r = run(REMITVM, "store", "migrate", "--store", url, cwd=ws.path)
        expect(r.code == 0 and "(0 migration(s) applied)" in r.out, "a second migrate changes nothing", r)
        sql(url, "INSERT INTO remit_schema VALUES (7)")
        r = run(REMITVM, "run", "prog.rmt", "-i", "who=A", "--store", url, cwd=ws.path)
        expect(r.code == 2 and "schema version 7, newer than this remitvm, which knows versions up to 1" in r.err,
               "a newer schema is refused with both versions", r)


QUORUM_POLICY = """[grant."crm.lookup"]
[grant."mail.send"]
approval = { quorum = 2, expires = "1h" }
"""

EXPIRING_POLICY = """[grant."crm.lookup"]
[grant."mail.send"]
approval = { expires = "1s" }
"""


def test_a_quorum_needs_distinct_approvers_in_both_stores():
    url = database("quorum")
    for flags in (["--state-dir", "st"], ["--store", url]):
        with workspace(QUORUM_POLICY) as ws:
            paused = pause(ws, *flags)
            digest = paused["pending"]["digest"]
            shown = json.loads(run(REMITVM, "approvals", "show", digest, "--json", *flags, cwd=ws.path).out)
            expect(shown["quorum"] == 2 and shown["approvers"] == [] and shown["expires_at"] > time.time(),
                   f"show gives the quorum and the expiry: {shown}")
            a = run(REMITVM, "approvals", "approve", digest, "--by", "ann", *flags, cwd=ws.path)
            expect(a.code == 0 and "1 of the 2 approvers it needs" in a.out, "one of two", a)
            r = run(REMITVM, "resume", paused["run_id"], "--json", *flags, cwd=ws.path)
            expect(r.code == 3, "one approver is not enough: the run pauses again", r)
            a = run(REMITVM, "approve", digest, "--by", "ann", *flags, cwd=ws.path)
            expect(a.code == 2 and "ann has already approved" in a.err, "the same approver twice", a)
            a = run(REMITVM, "approvals", "approve", digest, "--by", "bob", *flags, cwd=ws.path)
            expect(a.code == 0 and "single use" in a.out, "the second approver completes the quorum", a)
            r = run(REMITVM, "resume", paused["run_id"], "--json", *flags, cwd=ws.path)
            expect(r.code == 0 and json.loads(r.out)["result"] == "sent m-1", "then it runs", r)
            t = run(REMITVM, "trace", json.loads(r.out)["run_id"], *flags, cwd=ws.path)
            expect("approved by ann, bob" in t.out, "the trace names both approvers", t)


def test_approve_json_short_of_the_quorum_says_the_run_waits_in_both_stores():
    """`approvals approve --json` by one approver of two: the request as it now is (still pending,
    the approvers so far) and no resume command; the second approver's gives the decision."""
    url = database("quorum_json")
    for flags in (["--state-dir", "st"], ["--store", url]):
        with workspace(QUORUM_POLICY) as ws:
            digest = pause(ws, *flags)["pending"]["digest"]
            a = run(REMITVM, "approvals", "approve", digest, "--by", "ann", "--json", *flags, cwd=ws.path)
            j = json.loads(a.out) if a.code == 0 else {}
            expect(j.get("status") == "pending" and j.get("approvers") == ["ann"] and j.get("resume", 0) is None
                   and j.get("quorum") == 2, f"one of two: {a}")
            a = run(REMITVM, "approvals", "approve", digest, "--by", "bob", "--json", *flags, cwd=ws.path)
            j = json.loads(a.out) if a.code == 0 else {}
            expect(j.get("status") == "approved" and j.get("approved_by") == "ann, bob"
                   and str(j.get("resume")).startswith("remitvm resume "), f"the quorum reached: {a}")


def test_an_expired_request_cannot_be_approved_and_fails_the_run_in_both_stores():
    url = database("expiry")
    for flags in (["--state-dir", "st"], ["--store", url]):
        with workspace(EXPIRING_POLICY) as ws:
            paused = pause(ws, *flags)
            time.sleep(1.3)
            listed = json.loads(run(REMITVM, "approvals", "list", "--json", *flags, cwd=ws.path).out)
            expect(listed[0]["status"] == "expired", f"listed as expired: {listed}")
            a = run(REMITVM, "approve", paused["pending"]["digest"], *flags, cwd=ws.path)
            expect(a.code == 2 and "expired" in a.err and "can no longer be approved" in a.err, "too late", a)
            r = run(REMITVM, "resume", paused["run_id"], *flags, cwd=ws.path)
            expect(r.code == 1 and "R0302" in r.err and "was not approved in time" in r.err, "the run fails", r)
            again = run(REMITVM, "run", "prog.rmt", "-i", "who=Ada", *flags, cwd=ws.path)
            expect(again.code == 3, "the same call made again is a new request", again)


SCOPED_POLICY = """[budget]
max_usd = 0.005
scope = "team-a"
period = "day"

[grant."crm.lookup"]
[grant."mail.send"]
"""

PURE_LOOKUP = """program lookup
uses crm.lookup

fn main(who: Str) -> Str {
  return crm.lookup(name: who)
}
"""


def test_a_shared_scope_is_spent_across_runs_in_both_stores():
    # Five runs of one $0.001 call share $0.005 a day: the sixth is refused (R0401), in a state
    # directory (budgets.json) and in PostgreSQL alike.
    url = database("scope")
    for flags in (["--state-dir", "st"], ["--store", url]):
        with workspace(SCOPED_POLICY) as ws:
            ws.write("lookup.rmt", PURE_LOOKUP)
            codes = [run(REMITVM, "run", "lookup.rmt", "-i", f"who=p{i}", *flags, cwd=ws.path) for i in range(6)]
            expect([c.code for c in codes] == [0] * 5 + [1], f"five fit: {[c.code for c in codes]}", codes[-1])
            expect("could exceed the shared budget 'team-a'" in codes[-1].err, "R0401 names the scope", codes[-1])


if __name__ == "__main__":
    main(globals())
