#!/usr/bin/env python3
"""Approvals, resume, replay and crash safety end to end (issue #6; docs/broker.md "Approvals",
"Traces" and "Resume and replay"; docs/compatibility.md).

The program makes real, countable effects through tests/e2e/adapters/effects_adapter.py, whose log
shows every effect performed and every repeated idempotency key it recognised. The scenarios:
run → exit 3 → approve → resume → completed; resuming again performs nothing new; an edited
program or host is refused; replay reproduces the run and a tampered trace diverges with R0601;
SIGKILL between an effect and its record, then resume, repeats no effect; two resumes at once
cannot both dispatch."""
import json
import pathlib
import re
import subprocess
import sys
import time

from harness import REMIT, REMITVM, Workspace, expect, main, read_trace, run, write_trace

ADAPTER = pathlib.Path(__file__).resolve().parent / "adapters" / "effects_adapter.py"

HOST = """input order tags untrusted

capability crm.lookup(id: Str) -> Str
  tags untrusted
  idempotent

capability mail.send(to: Str, body: Str) -> Str

capability pay.refund(order: Str approve untrusted, amount: Float) -> Str
"""

PROGRAM = """program refunder
uses crm.lookup, mail.send, pay.refund

fn main(order: Str) -> Str {
  let who = crm.lookup(order)
  let note = mail.send("ops", "refund for " + who)
  let paid = pay.refund(order, 12.5)
  let done = mail.send("customer", "refunded " + order)
  return paid + " " + done
}
"""

POLICY = """[grant."crm.lookup"]
[grant."mail.send"]
[grant."pay.refund"]
"""


def adapter(*extra):
    return " ".join([sys.executable, str(ADAPTER), "--log", "effects.jsonl", *extra])


def workspace():
    return Workspace({"host.rmti": HOST, "prog.rmt": PROGRAM, "policy.toml": POLICY})


def effects(ws):
    path = ws.path / "effects.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines]


def performed(ws):
    return [e["resource"] for e in effects(ws) if "resource" in e]


def wait_until_performed(ws, resource, what):
    """Waits (at most 20 s) until the adapter has performed a call to `resource`."""
    deadline = time.time() + 20
    while resource not in performed(ws) and time.time() < deadline:
        time.sleep(0.05)
    expect(resource in performed(ws), what, effects(ws))


def run_id_of(result):
    m = re.search(r"^trace: \.remit/runs/(\S+)\.jsonl", result.err, re.M)
    expect(m is not None, "the trace line names the run", result)
    return m.group(1)


def events_of(ws, run_id):
    return [json.loads(line) for line in (ws.path / ".remit/runs" / f"{run_id}.jsonl").read_text().splitlines()]


def calls(events):
    return [e for e in events if e["event"] == "call"]


def paused_run(ws):
    """Runs the program until it waits for the refund's approval; returns the run id."""
    r = run(REMITVM, "run", "prog.rmt", "-i", "order=A-1", "--adapter", adapter(), cwd=ws.path)
    expect(r.code == 3 and "needs approval" in r.err, "paused for approval: exit 3", r)
    expect(performed(ws) == ["crm.lookup", "mail.send"], "two effects before the pause", effects(ws))
    return run_id_of(r)


def test_approve_resume_completes_and_resuming_again_performs_nothing():
    with workspace() as ws:
        first = paused_run(ws)
        r = run(REMITVM, "resume", first, cwd=ws.path)
        expect(r.code == 3, "resuming before the approval pauses again", r)
        expect(performed(ws) == ["crm.lookup", "mail.send"], "and performs nothing", effects(ws))
        a = run(REMITVM, "approve", first, "--by", "ops-lead", cwd=ws.path)
        expect(a.code == 0 and "approved " in a.out and '"resource": "pay.refund"' in a.out, "approve RUN_ID", a)
        r = run(REMITVM, "resume", first, cwd=ws.path)
        expect(r.code == 0, "resume completes", r)
        expect(json.loads(r.out) == "done:pay.refund done:mail.send", "result", r)
        expect(performed(ws) == ["crm.lookup", "mail.send", "pay.refund", "mail.send"],
               "completed effects are not repeated", effects(ws))
        expect(not any("dedup" in e for e in effects(ws)), "nothing was even sent twice", effects(ws))
        second = run_id_of(r)
        ev = events_of(ws, second)
        start = ev[0]
        expect(second != first and start["idempotency_root"] == first and start["replaying"] == 2,
               "a new run id, the root kept, two recorded calls", start)
        c = calls(ev)
        expect([x.get("replayed", False) for x in c] == [True, True, False, False], "two replayed calls", c)
        expect([x["seq"] for x in c] == [1, 2, 3, 4] and all(x["run_id"] == second for x in c), "new seq", c)
        expect(c[2]["approval"]["approved_by"] == "ops-lead", "the approver is on the call that consumed it", c)
        granted = [e for e in ev if e["event"] == "approval_granted"]
        expect(len(granted) == 1 and granted[0]["approved_by"] == "ops-lead", "approval_granted", ev)
        # Tags survive the replay: the lookup's result is untrusted again.
        expect(c[0]["result_tags"] == ["untrusted"], "replayed results are re-tagged", c)
        t = run(REMITVM, "trace", second, cwd=ws.path)
        expect(t.code == 0 and "approval granted" in t.out and "(replayed)" in t.out, "trace shows it", t)
        t = run(REMITVM, "trace", first, cwd=ws.path)
        expect("pending approval: pay.refund" in t.out, "trace shows the pending approval", t)
        # Resuming the first run again continues from its newest resume: nothing new happens.
        r = run(REMITVM, "resume", first, cwd=ws.path)
        expect(r.code == 0 and f"was resumed as {second}" in r.err, "follows the resume chain", r)
        expect(len(effects(ws)) == 4, "resume again performs nothing", effects(ws))
        r = run(REMIT, "resume", second, cwd=ws.path)
        expect(r.code == 0 and len(effects(ws)) == 4, "remit resume too", r)
        # The consumed approval is single use: a fresh run waits again.
        r = run(REMITVM, "run", "prog.rmt", "-i", "order=A-1", "--adapter", adapter(), cwd=ws.path)
        expect(r.code == 3, "a consumed approval authorises no second call", r)
        store = json.loads(ws.read(".remit/approvals.json"))
        digest = c[2]["approval"]["digest"]
        a = run(REMITVM, "approve", digest[:12], cwd=ws.path)
        expect(a.code == 0, "the new request can be approved again", a)


def test_approve_errors():
    with workspace() as ws:
        first = paused_run(ws)
        a = run(REMITVM, "approve", "0000", cwd=ws.path)
        expect(a.code == 2 and "no pending approval matching '0000'" in a.err, "unknown: exit 2", a)
        a = run(REMITVM, "approve", "", cwd=ws.path)
        expect(a.code == 2, "empty: exit 2", a)
        a = run(REMITVM, "approve", first, cwd=ws.path)
        expect(a.code == 0, "approve", a)
        r = run(REMITVM, "resume", first, cwd=ws.path)
        expect(r.code == 0, "resume consumes it", r)
        digest = calls(events_of(ws, run_id_of(r)))[2]["approval"]["digest"]
        a = run(REMITVM, "approve", digest, cwd=ws.path)
        expect(a.code == 2 and "already used" in a.err and run_id_of(r) in a.err, "consumed: exit 2, says by whom", a)


def test_resume_refuses_an_edited_program_or_host():
    with workspace() as ws:
        first = paused_run(ws)
        # Reformatting and comments do not change the semantic hash.
        ws.write("prog.rmt", "# a comment\n" + PROGRAM.replace("  let who", "\n  let who"))
        r = run(REMITVM, "resume", first, cwd=ws.path)
        expect(r.code == 3, "a comment and a blank line are no change", r)
        ws.write("prog.rmt", PROGRAM.replace("refund for ", "refund of "))
        r = run(REMITVM, "resume", first, cwd=ws.path)
        expect(r.code == 1 and "the program changed since this run" in r.err, "a semantic edit is refused", r)
        ws.write("prog.rmt", PROGRAM)
        ws.write("host.rmti", HOST + "\ncapability extra.thing(x: Str)\n")
        r = run(REMITVM, "resume", first, cwd=ws.path)
        expect(r.code == 1 and "the host interface changed since this run" in r.err, "a host edit is refused", r)
        ws.write("host.rmti", HOST)
        # A changed policy is simply applied (here the check refuses the program against it).
        ws.write("policy.toml", '[grant."mail.send"]\n[grant."pay.refund"]\n')
        r = run(REMITVM, "resume", first, cwd=ws.path)
        expect(r.code == 1 and "does not grant 'crm.lookup'" in r.err, "a revoked grant stops the resume", r)
        expect(performed(ws) == ["crm.lookup", "mail.send"], "nothing performed", effects(ws))
        r = run(REMITVM, "resume", "no-such-run", cwd=ws.path)
        expect(r.code == 2 and "no trace for run 'no-such-run'" in r.err, "unknown run: exit 2", r)


def completed_run(ws):
    first = paused_run(ws)
    run(REMITVM, "approve", first, cwd=ws.path)
    r = run(REMITVM, "resume", first, cwd=ws.path)
    expect(r.code == 0, "completed", r)
    return first, run_id_of(r)


def test_replay_reproduces_and_detects_tampering():
    with workspace() as ws:
        first, second = completed_run(ws)
        before = len(effects(ws))
        r = run(REMITVM, "replay", second, cwd=ws.path)
        expect(r.code == 0 and json.loads(r.out) == "done:pay.refund done:mail.send", "replay prints the result", r)
        expect("replay ok: 4 recorded call(s) reproduced, no live effects" in r.err, "replay ok line", r)
        r = run(REMITVM, "replay", second, "--json", cwd=ws.path)
        env = json.loads(r.out)
        expect(r.code == 0 and env["status"] == "completed" and env["result_tags"] == ["untrusted"], "--json", r)
        r = run(REMIT, "replay", f".remit/runs/{first}.jsonl", cwd=ws.path)
        expect(r.code == 0 and "paused for approval of 'pay.refund' as recorded" in r.err, "a paused run replays", r)
        expect(len(effects(ws)) == before, "replay performs nothing", effects(ws))
        runs = sorted((ws.path / ".remit/runs").glob("*.jsonl"))

        path = ws.path / ".remit/runs" / f"{second}.jsonl"
        original = path.read_text()
        lines = original.splitlines()

        def tampered(edit):
            """Replays the trace edited consistently (every chain recomputed, as a forger who knows
            the format could): the divergence checks behind the checksums."""
            ev = read_trace(path)
            edit(ev)
            write_trace(path, ev)
            result = run(REMITVM, "replay", second, cwd=ws.path)
            path.write_text(original)
            return result

        # An edit that does not recompute the chain is a damaged record: refused by its line, and
        # neither replay nor resume acts on it.
        edits = 0
        for number, text in enumerate(lines, 1):
            if '"event":"call"' not in text:
                continue
            edited = text.replace('"result":"customer of A-1"', '"result":"customer of B-2"')
            if edited == text:
                continue
            path.write_text("\n".join(lines[: number - 1] + [edited] + lines[number:]) + "\n")
            for command in ("replay", "resume"):
                r = run(REMITVM, command, second, cwd=ws.path)
                expect(r.code == 2 and f"{second}.jsonl:{number}: damaged record" in r.err, f"{command} refuses it", r)
            expect(len(effects(ws)) == before, "nothing performed", effects(ws))
            path.write_text(original)
            edits += 1
        expect(edits == 1, "the recorded lookup was edited once")

        def change_result(ev):
            calls(ev)[0]["result"] = "someone else"
        r = tampered(change_result)
        line = next(i for i, x in enumerate(lines, 1) if '"resource":"mail.send"' in x and '"event":"call"' in x)
        expect(r.code == 1 and "R0601" in r.err and f"{second}.jsonl:{line}" in r.err and "'body'" in r.err,
               "a changed recorded result diverges at the next call, named by its line", r)

        def change_args(ev):
            calls(ev)[2]["args"]["amount"] = 99.0
        r = tampered(change_args)
        expect(r.code == 1 and "R0601" in r.err and "'amount'" in r.err, "a different argument", r)

        def extra_call(ev):
            ev.insert(len(ev) - 1, dict(calls(ev)[-1]))
        r = tampered(extra_call)
        expect(r.code == 1 and "program made 4 of 5 recorded calls" in r.err, "fewer calls than recorded", r)

        def change_final(ev):
            ev[-1]["result"] = "something else"
        r = tampered(change_final)
        expect(r.code == 1 and "R0601" in r.err and "final result differs" in r.err, "a different final result", r)

        def change_tags(ev):
            ev[-1]["result_tags"] = []
        r = tampered(change_tags)
        expect(r.code == 1 and "tags differ" in r.err, "different result tags", r)

        def bad_type(ev):
            calls(ev)[0]["result"] = 42
        r = tampered(bad_type)
        expect(r.code == 1 and "R0601" in r.err and "does not fit" in r.err, "a recorded result of the wrong type", r)

        def failed_end(ev):
            ev[-1] = {"event": "run_end", "run_id": second, "status": "error", "code": "R0303",
                      "message": "recorded as failed"}
        r = tampered(failed_end)
        expect(r.code == 1 and "the run ended with error, the replay completed" in r.err, "a recorded failure", r)

        def no_end(ev):
            ev.pop()
        r = tampered(no_end)
        expect(r.code == 0 and "no run_end to compare the result with" in r.err, "a trace without run_end", r)

        # The paused run's trace: the pause must be for the same call.
        paused_path = ws.path / ".remit/runs" / f"{first}.jsonl"
        paused_original = paused_path.read_text()
        ev = read_trace(paused_path)
        pending = [e for e in ev if e["event"] == "pending_approval"]
        expect(len(pending) == 1, "the paused trace records its pending approval", ev)
        pending[0]["args"]["amount"] = 99.0
        write_trace(paused_path, ev)
        r = run(REMITVM, "replay", first, cwd=ws.path)
        paused_path.write_text(paused_original)
        expect(r.code == 1 and "paused for approval of another call than 'pay.refund'" in r.err,
               "a pause for different arguments diverges", r)

        # A last line cut short is reported and ignored; a broken line elsewhere is exit 2.
        path.write_text(original[: len(original) - 20])
        r = run(REMITVM, "replay", second, cwd=ws.path)
        expect(r.code == 0 and "cut short" in r.err and "without a run_end" not in r.out, "truncated tail", r)
        path.write_text(lines[0] + "\n{not json\n" + "\n".join(lines[1:]) + "\n")
        r = run(REMITVM, "replay", second, cwd=ws.path)
        expect(r.code == 2 and f"{second}.jsonl:2" in r.err, "a corrupt line: exit 2 naming it", r)
        r = run(REMITVM, "resume", second, cwd=ws.path)
        expect(r.code == 2 and "Traceback" not in r.err, "resume of a corrupt trace: exit 2", r)
        path.write_text(original)
        expect(sorted((ws.path / ".remit/runs").glob("*.jsonl")) == runs, "replay writes no trace")


def test_sigkill_between_effect_and_record_then_resume():
    with workspace() as ws:
        first = paused_run(ws)
        run(REMITVM, "approve", first, "--by", "ops-lead", cwd=ws.path)
        r = run(REMITVM, "resume", first, "--adapter", adapter("--kill-once", "pay.refund:killed.marker"),
                cwd=ws.path)
        expect(r.code == -9, "remitvm was killed", r)
        expect(performed(ws) == ["crm.lookup", "mail.send", "pay.refund"], "the refund happened", effects(ws))
        killed = max(p.stem for p in (ws.path / ".remit/runs").glob("*.jsonl") if p.stem != first)
        ev = events_of(ws, killed)
        dispatched = [e for e in ev if e["event"] == "dispatch"]
        expect(dispatched and dispatched[-1]["resource"] == "pay.refund" and
               not any(c["resource"] == "pay.refund" for c in calls(ev)), "in flight: dispatched, not recorded", ev)
        t = run(REMITVM, "trace", killed, cwd=ws.path)
        expect(t.code == 0 and "in flight" in t.out, "trace names the in-flight call", t)
        # Resume (the original id: the chain leads to the killed run).
        r = run(REMITVM, "resume", first, cwd=ws.path)
        expect(r.code == 0 and json.loads(r.out) == "done:pay.refund done:mail.send", "completes", r)
        expect("dispatched but not recorded" in r.err, "the note says what happens", r)
        eff = effects(ws)
        expect(performed(ws) == ["crm.lookup", "mail.send", "pay.refund", "mail.send"], "no effect repeated", eff)
        key = dispatched[-1]["idempotency_key"]
        expect({"dedup": key} in eff, "the refund was sent again with the same key and recognised", eff)
        c = calls(events_of(ws, run_id_of(r)))
        refund = next(x for x in c if x["resource"] == "pay.refund")
        expect(refund["idempotency_key"] == key and refund["in_flight_retry"]["run_id"] == killed, "trace says so", c)
        expect(refund["approval"]["approved_by"] == "ops-lead" and refund["approval"]["in_flight_retry"],
               "under the approval the in-flight dispatch consumed", refund)


def test_concurrent_resumes_cannot_both_dispatch():
    with workspace() as ws:
        first = paused_run(ws)
        run(REMITVM, "approve", first, cwd=ws.path)
        slow = subprocess.Popen([REMITVM, "resume", first, "--adapter", adapter("--hold", "pay.refund:3")],
                                cwd=ws.path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_until_performed(ws, "pay.refund", "the first resume is dispatching")
        r = run(REMITVM, "resume", first, "--adapter", adapter(), cwd=ws.path)
        expect(r.code == 1 and "another remitvm is running or resuming this run" in r.err, "the second is refused", r)
        out, err = slow.communicate(timeout=60)
        expect(slow.returncode == 0, f"the first completes: {err.decode()}")
        expect(performed(ws) == ["crm.lookup", "mail.send", "pay.refund", "mail.send"], "each effect once", effects(ws))


def test_resume_json_envelopes():
    with workspace() as ws:
        first = paused_run(ws)
        r = run(REMITVM, "resume", first, "--json", cwd=ws.path)
        env = json.loads(r.out)
        expect(r.code == 3 and env["status"] == "approval_required" and env["run_id"] != first, "still waiting", r)
        pending = env["pending"]
        expect(pending["resource"] == "pay.refund" and pending["site"] == "main#2" and
               pending["args"] == {"order": "A-1", "amount": 12.5} and len(pending["digest"]) == 64, "pending call", env)
        run(REMITVM, "approve", pending["digest"][:10], cwd=ws.path)
        r = run(REMITVM, "resume", first, "--json", cwd=ws.path)
        env = json.loads(r.out)
        expect(r.code == 0 and env["status"] == "completed" and env["result"] == "done:pay.refund done:mail.send",
               "completed envelope", r)
        expect(env["result_tags"] == ["untrusted"] and env["run_id"] != first, "tags and the new run id", env)
        expect(performed(ws) == ["crm.lookup", "mail.send", "pay.refund", "mail.send"], "each effect once", effects(ws))


def test_a_running_run_holds_its_lock():
    """A plain run holds the lock of its idempotency root: resuming it while it still runs is refused."""
    with workspace() as ws:
        slow = subprocess.Popen([REMITVM, "run", "prog.rmt", "-i", "order=A-3", "--approve-all", "--adapter",
                                 adapter("--hold", "mail.send:2")],
                                cwd=ws.path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_until_performed(ws, "mail.send", "the run is dispatching")
        traces = list((ws.path / ".remit/runs").glob("*.jsonl"))
        expect(len(traces) == 1, "the running run has its trace", traces)
        r = run(REMITVM, "resume", traces[0].stem, "--approve-all", "--adapter", adapter(), cwd=ws.path)
        expect(r.code == 1 and "another remitvm is running or resuming this run" in r.err, "resume is refused", r)
        out, err = slow.communicate(timeout=60)
        expect(slow.returncode == 0, f"the run completes: {err.decode()}")
        expect(performed(ws) == ["crm.lookup", "mail.send", "pay.refund", "mail.send"], "each effect once", effects(ws))


def test_interactive_asks_at_the_terminal():
    import os
    import pty
    with workspace() as ws:
        for answer, code in ((b"n\n", 3), (b"y\n", 0)):
            master, slave = pty.openpty()
            os.write(master, answer)
            proc = subprocess.run([REMITVM, "run", "prog.rmt", "-i", "order=A-2", "--interactive", "--adapter",
                                   adapter()], cwd=ws.path, stdin=slave, capture_output=True, timeout=60)
            os.close(slave)
            os.close(master)
            err = proc.stderr.decode()
            expect(proc.returncode == code and "approve this exact call? [y/N]" in err and '"pay.refund"' in err,
                   f"answer {answer!r}: exit {code}\n{err}")
        c = calls(events_of(ws, re.search(r"runs/(\S+)\.jsonl", err).group(1)))
        expect(c[2]["approval"]["approved_by"] == "interactive", "recorded as interactive", c)
        store = json.loads(ws.read(".remit/approvals.json"))
        expect(c[2]["approval"]["digest"] in store["consumed"], "and consumed", store)
        # Without a terminal, --interactive is the store: it pauses.
        r = run(REMITVM, "run", "prog.rmt", "-i", "order=A-2", "--interactive", "--adapter", adapter(), cwd=ws.path,
                stdin=b"y\n")
        expect(r.code == 3 and "[y/N]" not in r.err, "no terminal, no prompt", r)


if __name__ == "__main__":
    main(globals())
