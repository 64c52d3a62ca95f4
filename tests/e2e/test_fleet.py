#!/usr/bin/env python3
"""Workers sharing runs through the PostgreSQL store (docs/fleet.md), as real processes against the
private cluster of ctest's fixture "postgresql": two workers never run the same run; a run paused
on one worker completes on another after an approval given from a third process (each in a
directory of its own, as on three machines); eight workers on a shared budget that covers exactly
N calls dispatch exactly N; a submission is checked as `run` checks it, and records MCP servers and
OpenAPI services (--base-url included) and --progress for the workers; `runs list|show`."""
import json
import os
import time
from types import SimpleNamespace

from fake_server import FakeServer
from fleet import (DEDUP_ADAPTER, TEN_HOST, TEN_POLICY, TEN_PROGRAM, Worker, database, dedup_lines, runs, sql,
                   wait_until)
from harness import REMITC, REMITVM, Workspace, expect, main, read_trace, run
from test_inbox import TOKENS, Inbox, keys_file, outcome_of
from test_models import FIXTURES as MODEL_FIXTURES
from test_models import HOST as MODEL_HOST
from test_models import KEY
from test_models import PROGRAM as MODEL_PROGRAM
from test_models import policy as model_policy
from test_openapi import DOCS as OPENAPI_DOCS
from test_openapi import ENV as PET_ENV
from test_openapi import Petstore


def submit(ws, url, *args):
    r = run(REMITVM, "submit", *args, "--store", url, cwd=ws.path)
    expect(r.code == 0 and len(r.out.strip()) == 22, "submit prints the run id", r)
    return r.out.strip()


def test_two_workers_never_run_the_same_run():
    url = database("two")
    with Workspace({"host.rmti": TEN_HOST, "ten.rmt": TEN_PROGRAM, "policy.toml": TEN_POLICY}) as ws:
        service = str(ws.path / "service")
        ids = [submit(ws, url, "ten.rmt", "-i", f"tag=r{i}", "--adapter", f"python3 {DEDUP_ADAPTER}")
               for i in range(8)]
        listed = runs(url)
        expect([r["status"] for r in listed] == ["queued"] * 8 and set(listed[0]) ==
               {"run_id", "status", "program", "updated_at"}, f"runs list --json: {listed}")
        env = {"REMIT_DEDUP_STATE": service}
        workers = [Worker(url, str(ws.path), "--concurrency", "2", "--drain", env=env) for _ in range(2)]
        for w in workers:
            expect(w.wait() == 0, "a draining worker stops when the queue is empty")
        listed = {r["run_id"]: r for r in runs(url)}
        expect(all(listed[i]["status"] == "completed" for i in ids), f"every run completed: {listed}")
        # Each run was taken once (one attempt, one trace), and every effect happened once.
        attempts = sql(url, "SELECT run_id, attempts, (SELECT count(*) FROM remit_traces t WHERE t.root = r.run_id) "
                            "FROM remit_runs r")
        expect(all(a[1:] == ["1", "1"] for a in attempts), f"one attempt and one trace per run: {attempts}")
        replies = dedup_lines(service, "replies.jsonl")
        expect(len(replies) == 80 and len({r["key"] for r in replies}) == 80, "80 effects, each once")
        expect(dedup_lines(service, "repeats.jsonl") == [], "nothing was sent twice")
        shown = json.loads(run(REMITVM, "runs", "show", ids[0], "--json", "--store", url).out)
        expect(shown["outcome"]["result"] == " | ".join(f"svc.save:{{\"text\":\"r0 {i}\"}}" for i in range(10))
               and len(shown["calls"]) == 10 and shown["attempts"] == 1, f"runs show --json: {shown}")


def test_a_connection_lost_mid_run_fails_the_lease_not_the_run():
    # The database ends the connections of the worker's runs mid-call (as a network cut or a
    # failover would): those attempts stop, give up their leases, and the runs are taken again
    # and completed from their records, no effect performed twice.
    url = database("lost")
    with Workspace({"host.rmti": TEN_HOST, "ten.rmt": TEN_PROGRAM, "policy.toml": TEN_POLICY}) as ws:
        service = str(ws.path / "service")
        ids = [submit(ws, url, "ten.rmt", "-i", f"tag=r{i}", "--adapter", f"python3 {DEDUP_ADAPTER}")
               for i in range(2)]
        w = Worker(url, str(ws.path), "--concurrency", "2", "--lease", "30",
                   env={"REMIT_DEDUP_STATE": service, "REMIT_DEDUP_DELAY_MS": "60"})
        wait_until(lambda: len(dedup_lines(service, "replies.jsonl")) >= 4, what="calls to be made")
        cut = sql(url, "SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                       "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
        expect(cut[0][0] != "0", f"the runs' connections were cut: {cut}")
        wait_until(lambda: all(r["status"] == "completed" for r in runs(url)), timeout=120,
                   what="the runs to complete after all")
        expect(w.stop() == 0, "the worker stops")
        shown = [json.loads(run(REMITVM, "runs", "show", i, "--json", "--store", url).out) for i in ids]
        expect(any(s["attempts"] >= 2 for s in shown), f"an attempt was lost and another made: {shown}")
        for i, s in enumerate(shown):
            expect(s["outcome"]["result"] == " | ".join(f"svc.save:{{\"text\":\"r{i} {n}\"}}" for n in range(10)),
                   f"the uninterrupted result: {s['outcome']}")
        keys = [r["key"] for r in dedup_lines(service, "replies.jsonl")]
        expect(len(keys) == 20 and len(set(keys)) == 20, f"20 effects, each once: {len(keys)}")


REFUND_HOST = """input ticket tags untrusted

capability shop.order(id: Str) -> Float
  cost 0.001
  idempotent

capability pay.refund(order: Str, amount: Float approve untrusted) -> Str
  cost 0.002
"""

REFUND_PROGRAM = """program refunds
uses shop.order, pay.refund

fn main(ticket: Str) -> Str {
  let total = shop.order(id: ticket)
  return pay.refund(order: ticket, amount: total)
}
"""

REFUND_FIXTURES = json.dumps({"capabilities": {"shop.order": [{"output": 49.5, "repeat": True}],
                                               "pay.refund": [{"output": "rf-1", "repeat": True}]}})


def test_a_run_paused_on_one_worker_completes_on_another_after_an_approval_from_a_third_process():
    url = database("machines")
    with Workspace({"app/host.rmti": REFUND_HOST, "app/refund.rmt": REFUND_PROGRAM,
                    "app/policy.toml": '[grant."shop.order"]\n[grant."pay.refund"]\n',
                    "app/fixtures/run.json": REFUND_FIXTURES, "a/.keep": "", "b/.keep": "", "c/.keep": ""}) as ws:
        run_id = submit(ws, url, "app/refund.rmt", "-i", "ticket=A-1")
        a = Worker(url, str(ws.path / "a"), "--name", "machine-a", env={"HOME": str(ws.path / "a")})
        wait_until(lambda: runs(url)[0]["status"] == "waiting", what="the run to wait for approval")
        expect(a.stop() == 0, "machine a stops when asked (SIGTERM)")
        b = Worker(url, str(ws.path / "b"), "--name", "machine-b", env={"HOME": str(ws.path / "b")})
        listed = json.loads(run(REMITVM, "approvals", "list", "--json", "--store", url, cwd=ws.path / "c").out)
        expect(len(listed) == 1 and listed[0]["run_id"] == run_id, f"machine c sees the request: {listed}")
        r = run(REMITVM, "approve", listed[0]["digest"][:12], "--by", "carol", "--store", url, cwd=ws.path / "c")
        expect(r.code == 0, "machine c approves", r)
        wait_until(lambda: runs(url)[0]["status"] == "completed", what="machine b to finish the run")
        expect(b.stop() == 0, "machine b stops")
        shown = json.loads(run(REMITVM, "runs", "show", run_id, "--json", "--store", url).out)
        expect(shown["worker"] == "machine-b" and shown["attempts"] == 2 and shown["outcome"]["result"] == "rf-1",
               f"machine b completed it: {shown}")
        expect([c["replayed"] for c in shown["calls"]] == [True, False],
               f"the order was answered from the record, the refund performed once: {shown['calls']}")
        t = run(REMITVM, "trace", shown["trace"], "--store", url)
        expect("approved by carol" in t.out, "the trace names the approver", t)


def test_a_submitted_run_opens_the_adapters_run_would_its_model_included():
    # The model is configured by the policy's table on the submitting machine, which has no API key,
    # and the table is gone by the time the workers run: they open the submission's recorded
    # adapters (the model's whole configuration and the key's variable name, never the key), as
    # `run` records and `resume` reopens them, each with the key of its own environment.
    url = database("models")
    host = MODEL_HOST.replace("  cost 0.001\n", "  cost 0.001\n  approval always\n", 1)
    with FakeServer() as server, Workspace({"app/host.rmti": host, "app/brief.rmt": MODEL_PROGRAM,
                                            "app/fixtures/run.json": MODEL_FIXTURES, "a/.keep": "", "b/.keep": ""
                                            }) as ws:
        ws.write("app/policy.toml", model_policy(server.url("/v1")))
        answer = {"openai": {"answer": {"mood": "upbeat", "line": "tea"}, "usage": {"input": 10, "output": 5}}}
        server.script([answer])
        local = run(REMITVM, "run", "app/brief.rmt", "-i", "topic=tea", cwd=ws.path, env={"OPENAI_API_KEY": KEY})
        expect(local.code == 3, "run: paused for approval after the model call", local)
        [local_trace] = (ws.path / ".remit" / "runs").glob("*.jsonl")
        local_start = read_trace(local_trace)[0]
        expect([a["kind"] for a in local_start["adapters"]] == ["model", "fixtures"], "run's adapters", local_start)
        server.requests()

        r = run(REMITVM, "submit", "app/brief.rmt", "-i", "topic=tea", "--store", url, cwd=ws.path,
                env={"OPENAI_API_KEY": None})
        expect(r.code == 0 and "OPENAI_API_KEY is not set here; every worker needs it" in r.err,
               "a key only the workers hold is noted, not refused", r)
        run_id = r.out.strip()
        ws.write("app/policy.toml", '[grant."notes.save"]\n[grant.llm]\n')
        server.script([answer])
        a = Worker(url, str(ws.path / "a"), "--drain", env={"OPENAI_API_KEY": KEY})
        expect(a.wait() == 0 and runs(url)[0]["status"] == "waiting", "worker a ran the model call and paused")
        [sent] = server.requests()
        expect(sent["headers"]["authorization"] == "Bearer " + KEY and json.loads(sent["body"])["model"] == "test-model",
               "the worker called the submitted model with its own key", sent)
        first = json.loads(sql(url, f"SELECT record FROM remit_trace_records WHERE run_id = '{run_id}' AND line = 1")
                           [0][0])
        expect(first["adapters"] == local_start["adapters"] and first["mode"] == local_start["mode"],
               f"the worker's run records the adapters `run` records: {first['adapters']}")

        digest = json.loads(run(REMITVM, "approvals", "list", "--json", "--store", url).out)[0]["digest"]
        expect(run(REMITVM, "approve", digest, "--by", "carol", "--store", url).code == 0, "approved elsewhere")
        b = Worker(url, str(ws.path / "b"), "--drain", env={"OPENAI_API_KEY": KEY})
        expect(b.wait() == 0, "worker b drains the queue")
        shown = json.loads(run(REMITVM, "runs", "show", run_id, "--json", "--store", url).out)
        expect(shown["status"] == "completed" and shown["outcome"]["result"] == "upbeat: tea (true)"
               and shown["attempts"] == 2, f"worker b resumed and completed it: {shown}")
        expect([(c["resource"], c["replayed"]) for c in shown["calls"]] == [("llm", True), ("notes.save", False)],
               f"the model's answer came from the record: {shown['calls']}")
        expect(server.requests() == [], "the model was not called again")
        stored = sql(url, "SELECT record FROM remit_trace_records UNION ALL SELECT submission FROM remit_runs "
                          "UNION ALL SELECT coalesce(outcome, '') FROM remit_runs")
        expect(not any(KEY[:12] in row[0] for row in stored), "the key is in no row of the store")


BUDGET_HOST = "capability svc.save(text: Str) -> Str\n  cost 0.001\n"

BUDGET_PROGRAM = """program one
uses svc.save

fn main(tag: Str) -> Str {
  return svc.save(tag)
}
"""

BUDGET_POLICY = """[budget]
max_usd = 0.012
scope = "team-a"
period = "month"

[grant."svc.save"]
"""


def test_eight_workers_on_a_budget_that_covers_exactly_n_calls_dispatch_exactly_n():
    url = database("budget")
    n, submitted = 12, 30
    with Workspace({"host.rmti": BUDGET_HOST, "one.rmt": BUDGET_PROGRAM, "policy.toml": BUDGET_POLICY,
                    "fixtures/run.json": json.dumps({"capabilities": {"svc.save": [{"output": "ok", "repeat": True}]}})
                    }) as ws:
        for i in range(submitted):
            submit(ws, url, "one.rmt", "-i", f"tag=t{i}")
        workers = [Worker(url, str(ws.path), "--concurrency", "2", "--drain") for _ in range(4)]
        for w in workers:
            expect(w.wait() == 0, "the workers drain the queue")
        statuses = [r["status"] for r in runs(url)]
        expect(statuses.count("completed") == n and statuses.count("failed") == submitted - n,
               f"exactly {n} runs could spend: {statuses}")
        records = sql(url, "SELECT record FROM remit_trace_records")
        dispatched = sum(1 for (r,) in records if json.loads(r)["event"] == "dispatch")
        expect(dispatched == n, f"exactly {n} dispatches, never {n + 1}: {dispatched}")
        spent = sql(url, "SELECT spent_usd, reserved_usd FROM remit_budgets WHERE scope = 'team-a'")
        expect(len(spent) == 1 and abs(float(spent[0][0]) - 0.012) < 1e-9 and float(spent[0][1]) == 0,
               f"the ledger holds what was spent: {spent}")
        failed = [r for r in runs(url) if r["status"] == "failed"][0]
        shown = json.loads(run(REMITVM, "runs", "show", failed["run_id"], "--json", "--store", url).out)
        expect(shown["outcome"]["error"]["code"] == "R0401" and "shared budget 'team-a'" in
               shown["outcome"]["error"]["message"], f"a refused run says why: {shown['outcome']}")


def test_a_submission_is_checked_as_run_checks_it():
    url = database("submit")
    with Workspace({"host.rmti": BUDGET_HOST, "one.rmt": BUDGET_PROGRAM, "policy.toml": '[grant."svc.save"]\n',
                    "fixtures/run.json": json.dumps({"capabilities": {}})}) as ws:
        r = run(REMITVM, "submit", "one.rmt", "--store", url, cwd=ws.path)
        expect(r.code == 2 and "missing input 'tag'" in r.err, "inputs are checked", r)
        r = run(REMITVM, "submit", "one.rmt", "-i", "tag=x", cwd=ws.path)  # no --store, no $REMIT_STORE
        expect(r.code == 2 and "PostgreSQL store" in r.err, "submit needs a PostgreSQL store", r)
        r = run(REMITVM, "submit", "one.rmt", "-i", "tag=x", "--interactive", "--store", url, cwd=ws.path)
        expect(r.code == 2 and "unknown option --interactive" in r.err, "a queued run has no terminal", r)
        ws.write("bad.rmt", "program bad\nfn main() -> Int {\n  return \"no\"\n}\n")
        r = run(REMITVM, "submit", "bad.rmt", "--store", url, cwd=ws.path)
        expect(r.code == 1 and "E01" in r.err, "a program that does not check is refused", r)
        r = run(REMITVM, "submit", "one.rmt", "-i", "tag=x", "--fixtures", "missing.json", "--store", url, cwd=ws.path)
        expect(r.code == 2, "a missing fixtures file is refused", r)
        expect(runs(url) == [], "nothing was queued")
        r = run(REMITVM, "runs", "show", "20260101-120000-abcdef", "--store", url)
        expect(r.code == 2 and "no run '20260101-120000-abcdef'" in r.err, "runs show of an unknown run", r)


PET_PROGRAM = """program fetch
uses pets.getPetById

fn main() -> Str {
  return pets.getPetById(1).name
}
"""


def test_a_submission_records_mcp_servers_and_openapi_services_and_a_worker_opens_them():
    # The run-path flags of `run` work with `submit`: --adapter mcp:/openapi: and --base-url become
    # recorded adapter specs (paths made absolute), --progress a recorded flag; the worker reopens
    # the specs. An MCP server is not started by submit (only by the worker that runs the run).
    url = database("services")
    with Workspace({"fetch.rmt": PET_PROGRAM, "policy.toml": '[grant."pets.getPetById"]\n',
                    "w/.keep": ""}) as ws, Petstore() as pets:
        ws.write("petstore.yaml", (OPENAPI_DOCS / "petstore.yaml").read_text())
        r = run(REMITC, "import", "openapi", "petstore.yaml", "--as", "pets", "-o", "host.rmti", cwd=ws.path)
        expect(r.code == 0, "the host interface is imported", r)
        service = "openapi.pets:petstore.yaml auth.api_key=PET_KEY"
        r = run(REMITVM, "submit", "fetch.rmt", "--adapter", service, "--base-url", pets.base,
                "--adapter", "mcp.notes:python3 server.py", "--adapter", "mcp+https://mcp.example.com/mcp",
                "--progress", "--store", url, cwd=ws.path, env={"PET_KEY": None})
        expect(r.code == 0 and "PET_KEY (auth.api_key) is not set here; every worker needs it" in r.err,
               "a credential only the workers hold is noted, not refused", r)
        mcp_id = r.out.strip()
        [[submission]] = sql(url, f"SELECT submission FROM remit_runs WHERE run_id = '{mcp_id}'")
        submission = json.loads(submission)
        openapi = {"kind": "openapi", "document": str(ws.path / "petstore.yaml"), "namespace": "pets",
                   "base_url": pets.base, "auth": {"api_key": "PET_KEY"}}
        expect(submission["adapters"] == [openapi,
                                          {"kind": "mcp", "command": "python3 server.py", "cwd": str(ws.path),
                                           "namespace": "notes"},
                                          {"kind": "mcp", "url": "https://mcp.example.com/mcp"}],
               f"the submission records the services as `run` records them: {submission['adapters']}")
        expect(["--progress", ""] in submission["flags"], f"--progress is recorded: {submission['flags']}")
        sql(url, f"DELETE FROM remit_runs WHERE run_id = '{mcp_id}'")  # no worker here starts its servers

        r = run(REMITVM, "submit", "fetch.rmt", "--base-url", pets.base, "--store", url, cwd=ws.path)
        expect(r.code == 2 and "--base-url is for an --adapter openapi:" in r.err, "--base-url alone is refused", r)
        r = run(REMITVM, "submit", "fetch.rmt", "--adapter", "openapi.pets:nothing.yaml", "--base-url", pets.base,
                "--store", url, cwd=ws.path)
        expect(r.code == 2 and "no such file" in r.err, "the document is read at submission", r)

        r = run(REMITVM, "submit", "fetch.rmt", "--adapter", service, "--base-url", pets.base, "--progress",
                "--store", url, cwd=ws.path, env=PET_ENV)
        expect(r.code == 0 and "not set here" not in r.err, "submitted with the credential set", r)
        run_id = r.out.strip()
        pets.requests()
        worker = Worker(url, str(ws.path / "w"), "--drain", env=PET_ENV)
        expect(worker.wait() == 0, "the worker drains the queue")
        shown = json.loads(run(REMITVM, "runs", "show", run_id, "--json", "--store", url).out)
        expect(shown["status"] == "completed" and shown["outcome"]["result"] == "Rex",
               f"the worker called the service: {shown}")
        expect("pets.getPetById at" in shown["outcome"].get("stderr", ""),
               f"--progress showed the call in the run's output: {shown['outcome']}")
        seen = pets.requests()
        expect([(q["method"], q["path"]) for q in seen] == [("GET", "/api/v3/pet/1")]
               and seen[0]["headers"].get("api_key") == PET_ENV["PET_KEY"], f"with the worker's key: {seen}")
        first = json.loads(sql(url, f"SELECT record FROM remit_trace_records WHERE run_id = '{run_id}' AND line = 1")
                           [0][0])
        expect(first["adapters"] == [openapi], f"the worker's trace records the service: {first['adapters']}")


def test_an_operator_decides_in_the_web_inbox_of_the_store_and_a_worker_continues_the_run():
    """Issue #17, the inbox of a fleet: `remitvm inbox` on $REMIT_STORE lists and shows the fleet's
    requests; Approve queues the run and a worker completes it (nothing runs in the inbox), Deny
    makes a worker fail it naming the key and the reason; the run's page follows the store."""
    url = database("inbox")
    with Workspace({"app/host.rmti": REFUND_HOST, "app/refund.rmt": REFUND_PROGRAM,
                    "app/policy.toml": '[grant."shop.order"]\n[grant."pay.refund"]\n',
                    "app/fixtures/run.json": REFUND_FIXTURES, "a/.keep": "", "c/keys.json": keys_file()}) as ws:
        first = submit(ws, url, "app/refund.rmt", "-i", "ticket=A-1")
        second = submit(ws, url, "app/refund.rmt", "-i", "ticket=B-2")
        worker = Worker(url, str(ws.path / "a"), "--name", "machine-a")
        try:
            wait_until(lambda: [r["status"] for r in runs(url)] == ["waiting", "waiting"], what="both runs to wait")
            requests = json.loads(run(REMITVM, "approvals", "list", "--json", "--store", url, cwd=ws.path).out)
            digest = {q["run_id"]: q["digest"] for q in requests}
            # Another machine: the inbox there finds the store in $REMIT_STORE; no state directory is made.
            with Inbox(SimpleNamespace(path=ws.path / "c"), where=(), env={"REMIT_STORE": url}) as inbox:
                alice, victor = TOKENS["alice"], TOKENS["victor"]
                status, _, body = inbox.request("GET", "/", token=alice)
                expect(status == 200 and digest[first][:16] in body and digest[second][:16] in body
                       and "2 pending in <code>the PostgreSQL store" in body, "the list shows the fleet's requests",
                       body)
                status, _, body = inbox.request("GET", f"/requests/{digest[first]}", token=alice)
                expect(status == 200 and "queues the run for the fleet&#39;s workers" not in body
                       and "queues the run for the fleet's workers" in body
                       and f'href="/runs/{first}"' in body and "/continue" not in body,
                       "a request's page says a worker continues the run, with no Continue here", body)
                status, headers, _ = inbox.request("POST", f"/requests/{digest[first]}/approve", token=victor)
                expect(status == 403, "a viewer cannot decide a fleet's request either")
                status, headers, _ = inbox.request("POST", f"/requests/{digest[first]}/approve", token=alice)
                expect(status == 303 and headers["location"].endswith(f"&run={first}"), f"approved: {headers}")
                status, _, body = inbox.request("GET", headers["location"], token=alice)
                expect('id="follow"' in body and "a worker of the fleet continues it" in body
                       and "/continue" not in body, "the notice says a worker continues the run", body)
                state, body = outcome_of(inbox, first, alice)
                expect(state == "completed" and "&quot;rf-1&quot;" in body and "machine-a" in body,
                       "a worker completed the approved run; its page shows the result", body)
                shown = json.loads(run(REMITVM, "runs", "show", first, "--json", "--store", url).out)
                expect(shown["status"] == "completed" and shown["attempts"] == 2
                       and [c["replayed"] for c in shown["calls"]] == [True, False],
                       f"resumed by the worker, the refund performed once: {shown}")
                t = run(REMITVM, "trace", shown["trace"], "--store", url)
                expect("approved by alice" in t.out, "the trace names the inbox's key", t)
                status, _, body = inbox.request("POST", f"/runs/{first}/continue", token=alice)
                expect(status == 409 and "only a failed run" in body, "a completed run is not queued", body)

                status, headers, _ = inbox.request("POST", f"/requests/{digest[second]}/deny", token=alice,
                                                   form={"reason": "not <ours>"})
                expect(status == 303 and headers["location"].endswith(f"&run={second}"), f"denied: {headers}")
                state, body = outcome_of(inbox, second, alice)
                expect(state == "failed" and "R0302" in body and "denied by alice: not &lt;ours&gt;" in body,
                       "a worker failed the denied run, naming the key and the reason", body)
                expect(f'action="/runs/{second}/continue"' in body and "--store" in body,
                       "a failed run can be queued again, or resumed from a shell", body)
                status, _, body = inbox.request("GET", f"/runs/{second}", token=victor)
                expect(status == 200 and "/continue" not in body, "a viewer sees the run without the button")
                status, _, body = inbox.request("GET", "/runs/20260101-000000-abcdef", token=alice)
                expect(status == 404 and "no submitted run" in body, "a run the store does not have: 404")
            expect(not (ws.path / "c" / ".remit").exists(), "the inbox made no state directory")
        finally:
            expect(worker.stop() == 0, "the worker stops")


main(globals())
