#!/usr/bin/env python3
"""The operator's approvals workflow from the command line (docs/operators.md): `remitvm approvals
list | show | approve | deny` (and `remit approvals`), with `--json`; a denied request fails the
run at its next resume with R0302 naming the denier and the reason, recorded in the trace, and the
same call made again asks again; the follow-up commands a paused run prints carry its
`--state-dir`, so pasting them works; `trace --full` shows arguments whole; a store in the
prototype's format (three sections, no request times) still lists."""
import json
import shlex

from harness import REMIT, REMITVM, REPO, Workspace, expect, main, read_trace, run

HOST = """input who tags untrusted

capability crm.lookup(name: Str) -> Str
  tags untrusted
  cost 0.001

capability mail.send(to: Str, body: Str approve untrusted) -> Str
  cost 0.002
"""

# The body derives from the lookup's (untrusted) result: the approver must see that chain.
PROGRAM = """program mailer
uses crm.lookup, mail.send

fn main(who: Str) -> Str {
  let note = crm.lookup(name: who)
  let id = mail.send(to: "ops@example.com", body: "about " + note)
  return "sent " + id
}
"""

LONG = "x" * 300 + " the tail an approver must see"

FIXTURES = json.dumps({"capabilities": {"crm.lookup": [{"output": "a customer " + LONG}] * 3,
                                        "mail.send": [{"output": "m-1"}] * 3}})

POLICY = '[grant."crm.lookup"]\nmax_calls = 1\n\n[grant."mail.send"]\nmax_calls = 1\n'


def workspace():
    return Workspace({"host.rmti": HOST, "prog.rmt": PROGRAM, "policy.toml": POLICY, "fixtures/run.json": FIXTURES})


def pause(ws, state="st"):
    r = run(REMITVM, "run", "prog.rmt", "-i", "who=Ada", "--state-dir", state, cwd=ws.path)
    expect(r.code == 3, "the send pauses for approval", r)
    return r


def test_list_and_show_give_the_operator_everything_to_decide():
    with workspace() as ws:
        r = run(REMITVM, "approvals", "list", "--state-dir", "st", cwd=ws.path)
        expect(r.code == 0 and "no pending approvals in st/approvals.json" in r.out, "an empty store", r)
        pause(ws)
        r = run(REMITVM, "approvals", "list", "--state-dir", "st", cwd=ws.path)
        expect(r.code == 0 and "1 pending approval(s)" in r.out and "mail.send @ main#1" in r.out
               and "'body' is untrusted" in r.out and "asked" in r.out, "the text list", r)
        listed = json.loads(run(REMITVM, "approvals", "list", "--json", "--state-dir", "st", cwd=ws.path).out)
        expect(len(listed) == 1, f"one request: {listed}")
        req = listed[0]
        expect(req["resource"] == "mail.send" and req["site"] == "main#1" and req["status"] == "pending"
               and len(req["digest"]) == 64 and req["run_id"] and req["age_s"] >= 0
               and req["args"]["body"] == "about a customer " + LONG, f"the JSON list: {req}")

        s = run(REMITVM, "approvals", "show", req["digest"][:12], "--state-dir", "st", cwd=ws.path)
        expect(s.code == 0 and LONG in s.out, "show prints the arguments in full", s)
        expect("'body' carries [\"untrusted\"]" in s.out and "crm.lookup @ main#0" in s.out,
               "show names the tags and the call the body derives from", s)
        expect("mail.send at most 1 call(s)" in s.out and "flow into mail.send.body" in s.out,
               "show gives the program's manifest for the call", s)
        j = json.loads(run(REMITVM, "approvals", "show", req["digest"], "--json", "--state-dir", "st",
                           cwd=ws.path).out)
        expect(j["program"]["name"] == "mailer" and j["derived_from"] == [1]
               and j["arg_tags"]["body"] == ["untrusted"] and j["manifest"]["call_site"]["site"] == "main#1"
               and j["manifest"]["resource"]["max_calls"] == 1, f"show --json: {j}")
        expect(j["arg_derived_from"] == {"body": [1], "to": []} and j["inputs"] == {"who": "Ada"}
               and [c["resource"] for c in j["provenance"]] == ["crm.lookup"]
               and j["provenance"][0]["args"] == {"name": "Ada"}, f"show --json: provenance per argument: {j}")
        expect("'body' derives from call(s) [1]" in s.out, "show says which calls each argument derives from", s)

        # trace cuts long values unless --full.
        t = run(REMITVM, "trace", req["run_id"], "--state-dir", "st", cwd=ws.path)
        expect(t.code == 0 and LONG not in t.out and "…" in t.out, "trace cuts long arguments", t)
        t = run(REMITVM, "trace", req["run_id"], "--full", "--state-dir", "st", cwd=ws.path)
        expect(t.code == 0 and LONG in t.out, "trace --full shows them whole", t)


def test_a_denied_request_fails_the_run_at_its_next_resume():
    with workspace() as ws:
        pause(ws)
        req = json.loads(run(REMITVM, "approvals", "list", "--json", "--state-dir", "st", cwd=ws.path).out)[0]
        d = run(REMITVM, "approvals", "deny", req["run_id"], "--reason", "wrong recipient", "--by", "alice",
                "--state-dir", "st", cwd=ws.path)
        expect(d.code == 0 and "denied" in d.out and "alice" in d.out, "deny by run id", d)
        listed = json.loads(run(REMITVM, "approvals", "list", "--json", "--state-dir", "st", cwd=ws.path).out)
        expect(listed == [], "a denied request is no longer pending")
        r = run(REMITVM, "resume", req["run_id"], "--state-dir", "st", cwd=ws.path)
        expect(r.code == 1 and "R0302" in r.err and "denied by alice: wrong recipient" in r.err
               and "the call was not made" in r.err, "the resume fails naming the denier and the reason", r)
        runs = sorted((ws.path / "st/runs").glob("*.jsonl"))
        events = [e for path in runs for e in read_trace(path)]
        denied = [e for e in events if e["event"] == "approval_denied"]
        expect(len(denied) == 1 and denied[0]["denied_by"] == "alice" and denied[0]["reason"] == "wrong recipient"
               and denied[0]["digest"] == req["digest"], f"the trace records the denial: {denied}")
        expect(not [e for e in events if e["event"] == "call" and e["resource"] == "mail.send"], "nothing was sent")
        store = json.loads((ws.path / "st/approvals.json").read_text())
        expect(req["digest"] in store["refused"] and not store["denied"], f"the denial was used up: {store}")
        # The same call asked again is a new request, not a standing refusal.
        pause(ws)
        listed = json.loads(run(REMITVM, "approvals", "list", "--json", "--state-dir", "st", cwd=ws.path).out)
        expect(len(listed) == 1 and listed[0]["digest"] == req["digest"], "a new run asks again")


def test_approve_through_approvals_and_the_printed_follow_ups_work_when_pasted():
    with workspace() as ws:
        r = pause(ws, state="my state")
        lines = [l.split(": ", 1)[1] for l in r.err.splitlines() if l.startswith("  to approve") or
                 l.startswith("  then continue")]
        expect(len(lines) == 2 and all("--state-dir 'my state'" in l for l in lines),
               "the follow-ups carry the state directory, quoted", r)
        approve_line, resume_line = (shlex.split(l) for l in lines)
        a = run(REMITVM, *approve_line[1:], "--by", "bob", cwd=ws.path)
        expect(a.code == 0 and "approved" in a.out, "the pasted approve works", a)
        listed = json.loads(run(REMITVM, "approvals", "list", "--json", "--state-dir", "my state", cwd=ws.path).out)
        expect(listed[0]["status"] == "approved" and listed[0]["approved_by"] == "bob",
               "approved but unused shows as such", listed)
        c = run(REMITVM, *resume_line[1:], cwd=ws.path)
        expect(c.code == 0 and json.loads(c.out) == "sent m-1", "the pasted resume completes the run", c)

    with workspace() as ws:
        pause(ws)
        req = json.loads(run(REMITVM, "approvals", "list", "--json", "--state-dir", "st", cwd=ws.path).out)[0]
        a = run(REMIT, "approvals", "approve", req["digest"][:10], "--by", "carol", "--state-dir", "st", cwd=ws.path)
        expect(a.code == 0, "remit approvals approve", a)
        c = run(REMITVM, "resume", req["run_id"], "--state-dir", "st", cwd=ws.path)
        expect(c.code == 0, "resumed after approval", c)
        d = run(REMITVM, "approvals", "deny", req["digest"][:10], "--state-dir", "st", cwd=ws.path)
        expect(d.code == 2 and "already used" in d.err, "a used approval cannot be denied", d)


def test_approve_and_deny_print_the_decision_as_json():
    """`approvals approve|deny --json`: the request as `list --json` gave it, with the decision, who
    made it, the denial's reason and the command that continues the run (pasteable)."""
    with workspace() as ws:
        pause(ws, state="my state")
        req = json.loads(run(REMITVM, "approvals", "list", "--json", "--state-dir", "my state", cwd=ws.path).out)[0]
        a = run(REMITVM, "approvals", "approve", req["digest"][:12], "--json", "--by", "bob", "--state-dir", "my state",
                cwd=ws.path)
        expect(a.code == 0, "approve --json", a)
        j = json.loads(a.out)
        expect(j["digest"] == req["digest"] and j["status"] == "approved" and j["approved_by"] == "bob"
               and j["args"] == req["args"] and j["run_id"] == req["run_id"]
               and j["resume"] == f"remitvm resume {req['run_id']} --state-dir 'my state'", f"approve --json: {j}")
        # An approval not used yet can still be denied; the denial overrides it.
        d = run(REMIT, "approvals", "deny", req["run_id"], "--json", "--reason", "<wrong> recipient", "--by", "alice",
                "--state-dir", "my state", cwd=ws.path)
        expect(d.code == 0, "remit approvals deny --json", d)
        j = json.loads(d.out)
        expect(j["digest"] == req["digest"] and j["status"] == "denied" and j["denied_by"] == "alice"
               and j["approved_by"] is None and j["reason"] == "<wrong> recipient"
               and j["resume"] == f"remit resume {req['run_id']} --state-dir 'my state'", f"deny --json: {j}")
        r = run(REMITVM, *shlex.split(j["resume"])[1:], cwd=ws.path)
        expect(r.code == 1 and "denied by alice: <wrong> recipient" in r.err, "the printed resume meets the denial", r)
        d = run(REMITVM, "approvals", "deny", req["digest"], "--json", "--state-dir", "my state", cwd=ws.path)
        expect(d.code == 2 and d.out == "" and "no pending approval" in d.err, "nothing left to deny: exit 2, no JSON", d)


def test_bad_requests_are_clear_errors():
    with workspace() as ws:
        r = run(REMITVM, "approvals", cwd=ws.path)
        expect(r.code == 2 and "list, show ID" in r.err, "no subcommand", r)
        r = run(REMITVM, "approvals", "lsit", cwd=ws.path)
        expect(r.code == 2 and "unknown approvals subcommand 'lsit'" in r.err, "unknown subcommand", r)
        r = run(REMITVM, "approvals", "show", "abcd", cwd=ws.path)
        expect(r.code == 2 and "no pending approval matching 'abcd' in .remit/approvals.json" in r.err
               and "--state-dir" in r.err, "an unknown id says where it looked", r)
        r = run(REMITVM, "approvals", "deny", cwd=ws.path)
        expect(r.code == 2 and "needs one ID" in r.err, "deny without an id", r)


def test_a_prototype_store_lists():
    with workspace() as ws:
        digest = "ab" * 32
        ws.write(".remit/approvals.json", json.dumps({"approved": {}, "consumed": {}, "pending": {
            digest: {"resource": "mail.send", "site": "main#1", "args": {"to": "x"}, "program_hash": "00" * 32,
                     "reasons": ["'body' is untrusted"]}}}))
        r = run(REMITVM, "approvals", "list", cwd=ws.path)
        expect(r.code == 0 and "abababababababab  mail.send @ main#1" in r.out, "listed without a time", r)
        listed = json.loads(run(REMITVM, "approvals", "list", "--json", cwd=ws.path).out)
        expect(listed[0]["age_s"] is None and listed[0]["run_id"] is None, f"unknown age and run: {listed}")
        s = run(REMITVM, "approvals", "show", "abab", cwd=ws.path)
        expect(s.code == 0 and '"to": "x"' in s.out, "shown", s)

# An adapter with countable effects: each call it performs is a line of its --log
# (tests/e2e/adapters/effects_adapter.py). The tests copy it into the workspace as ad.py, so that a
# relative adapter command means something only where the run was made (and so that a test can
# break and mend its first line, #!).
EFFECTS_ADAPTER = (REPO / "tests/e2e/adapters/effects_adapter.py").read_text().split("\n", 1)[1]


def sends(ws):
    log = ws.path / "effects.jsonl"
    lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [e for e in lines if e.get("resource") == "mail.send"]


def test_a_run_resumed_from_another_directory_finds_its_program_and_adapter():
    for command in ("python3 ad.py --log effects.jsonl", "./ad.py --log effects.jsonl"):
        resume_from_elsewhere(command)


def resume_from_elsewhere(command):
    with workspace() as ws:
        ws.write("ad.py", "#!/usr/bin/env python3\n" + EFFECTS_ADAPTER).chmod(0o755)
        state = ws.path / "st"
        r = run(REMITVM, "run", "prog.rmt", "-i", "who=Ada", "--adapter", command, "--state-dir", state,
                cwd=ws.path)
        expect(r.code == 3, "paused", r)
        start = read_trace(sorted(state.glob("runs/*.jsonl"))[-1])[0]
        expect(start["path"] == str(ws.path / "prog.rmt") and start["adapter_cwd"] == str(ws.path),
               f"the program path and the adapter's directory are recorded absolute: {start}")
        elsewhere = ws.path / "elsewhere"
        elsewhere.mkdir()
        a = run(REMITVM, "approvals", "approve", start["run_id"], "--state-dir", state, cwd=elsewhere)
        expect(a.code == 0, "approved from elsewhere", a)
        c = run(REMITVM, "resume", start["run_id"], "--state-dir", state, cwd=elsewhere)
        expect(c.code == 0 and json.loads(c.out) == "sent done:mail.send",
               f"the resume runs the program and `{command}` where the run was made", c)
        expect(len(sends(ws)) == 1, f"the effect happened once, logged where the run was made: {sends(ws)}")


def test_an_approval_is_used_only_by_a_dispatch_that_reaches_the_adapter():
    """Issue #18: a resume whose adapter could not start used up the approval. Now the operator
    approves once, the failed starts give it back (and the trace says so), and the fixed resume
    performs the effect once under that approval."""
    with workspace() as ws:
        script = ws.write("ad.py", "#!/usr/bin/env python3\n" + EFFECTS_ADAPTER)
        script.chmod(0o755)
        state = ws.path / "st"
        adapter = "./ad.py --log effects.jsonl"
        r = run(REMITVM, "run", "prog.rmt", "-i", "who=Ada", "--adapter", adapter, "--state-dir", state,
                cwd=ws.path)
        expect(r.code == 3, "paused", r)
        run_id = read_trace(sorted(state.glob("runs/*.jsonl"))[-1])[0]["run_id"]
        elsewhere = ws.path / "elsewhere"
        elsewhere.mkdir()
        a = run(REMITVM, "approvals", "approve", run_id, "--by", "alice", "--state-dir", state, cwd=elsewhere)
        expect(a.code == 0, "approved once", a)

        def still_approved(what):
            listed = json.loads(run(REMITVM, "approvals", "list", "--json", "--state-dir", state, cwd=elsewhere).out)
            expect(len(listed) == 1 and listed[0]["status"] == "approved" and listed[0]["approved_by"] == "alice",
                   f"{what}: the approval is still there, unused: {listed}")
            expect(not sends(ws), f"{what}: nothing was sent")

        # 1. A bad interpreter: the adapter cannot be started (exec fails).
        script.write_text("#!/nonexistent/python3\n" + EFFECTS_ADAPTER)
        c = run(REMITVM, "resume", run_id, "--state-dir", state, cwd=elsewhere)
        expect(c.code == 2 and "did not reach the adapter" in c.err and "cannot start adapter process" in c.err
               and "the approval by alice is kept" in c.err and f"resume" in c.err,
               "the resume stops, says nothing was sent and keeps the approval", c)
        still_approved("after a failed start")
        traces = [read_trace(path) for path in state.glob("runs/*.jsonl")]
        stopped = next(t for t in traces if t[0].get("resumed_from"))
        lost = [e for e in stopped if e["event"] == "not_delivered"]
        expect(len(lost) == 1 and lost[0]["resource"] == "mail.send" and lost[0]["approval"]["kept"] is True
               and lost[0]["approval"]["approved_by"] == "alice", f"the trace says so: {lost}")
        expect(not [e for e in stopped if e["event"] == "call" and e["resource"] == "mail.send"],
               "no call is recorded for it")
        t = run(REMITVM, "trace", stopped[0]["run_id"], "--state-dir", state, cwd=elsewhere)
        expect("not delivered: mail.send @ main#1" in t.out and "is kept" in t.out and "in flight" not in t.out,
               "trace shows it as not delivered, not in flight", t)
        script.write_text("#!/usr/bin/env python3\n" + EFFECTS_ADAPTER)

        # 2. A process that starts and dies before reading the request (python3 cannot open ad.py
        # from here), twice (once restarted): not delivered either.
        c = run(REMITVM, "resume", run_id, "--adapter", "python3 ad.py --log effects.jsonl", "--state-dir", state,
                cwd=elsewhere)
        expect(c.code == 2 and "without reading the request" in c.err and "is kept" in c.err,
               "a process that dies before reading gives the approval back", c)
        still_approved("after a process that died before reading")

        # 3. A program that is not there is refused before the run starts.
        c = run(REMITVM, "resume", run_id, "--adapter", "./missing.py", "--state-dir", state, cwd=elsewhere)
        expect(c.code == 2 and "not found" in c.err, "a missing adapter program is refused", c)
        still_approved("after a missing program")

        # 4. Fixed: the same approval, the effect once.
        c = run(REMITVM, "resume", run_id, "--adapter", adapter, "--state-dir", state, cwd=ws.path)
        expect(c.code == 0 and json.loads(c.out) == "sent done:mail.send", "the fixed resume completes", c)
        effects = [e["key"] for e in sends(ws)]
        expect(len(effects) == 1, f"the effect happened once: {effects}")
        events = [e for path in state.glob("runs/*.jsonl") for e in read_trace(path)]
        sent = [e for e in events if e["event"] == "call" and e["resource"] == "mail.send"]
        expect(len(sent) == 1 and sent[0]["approval"]["approved_by"] == "alice"
               and sent[0]["idempotency_key"] == effects[0] == lost[0]["idempotency_key"],
               f"under alice's approval, as the same attempt: {sent}")
        store = json.loads((state / "approvals.json").read_text())
        expect(not store["pending"] and not store["approved"] and store["consumed"][sent[0]["approval"]["digest"]]
               ["by"] == "alice", f"and it is used now: {store}")


if __name__ == "__main__":
    main(globals())
