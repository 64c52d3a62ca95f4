#!/usr/bin/env python3
"""Runtime labels end to end: what `remitc check` predicts about tags and approvals must be what
`remitvm run` and `remitvm serve` do (docs/language.md "Tags and flows").

Each case is a program in which a tagged value decides a branch or reaches an argument through a
construct that once lost its labels at run time (`and`, `or`, a Bool bound with `let`, `str()` of
a Bool). The checker says the refund call may need approval; the run must pause for it, and a
serve session must report `mode: "ask"` with the same reasons."""
import json

from harness import REMITC, REMITVM, LineServer, Workspace, expect, main, run

HOST = """type Order = { id: Str, total: Float }
input ticket tags untrusted
capability shop.order(id: Str) -> Order
  clears untrusted
capability payments.refund(order_id: Str deny untrusted approve untrusted, amount: Float approve untrusted) -> Str
capability audit.note(text: Str approve untrusted)
model llm cost 0.01
"""

FIXTURES = json.dumps({
    "capabilities": {"shop.order": [{"output": {"id": "A1", "total": 50.0}}],
                     "payments.refund": [{"output": "rf1"}], "audit.note": [{"output": None}]},
    "models": {"llm": [{"answer": "refund"}]},
})

PROGRAM = """program labels
uses shop.order, payments.refund, audit.note, llm

fn main(ticket: Str) -> Str {{
  let order = shop.order("A1")
  let intent = llm.ask("refund" | "other", "What does the customer want?", context: ticket)
{body}
  return "none"
}}
"""

# Each body reaches payments.refund (or audit.note) only because of the untrusted intent: through
# the left side of an `and` that is true, of an `or` that is false, a Bool kept in a variable, or
# the text of a Bool. The last case is the mirror image the VM always got right.
CASES = {
    "and, tagged left side true": """  if intent == "refund" and order.total < 100.0 {
    return payments.refund(order_id: order.id, amount: order.total)
  }""",
    "or, tagged left side false": """  if intent == "other" or order.total < 100.0 {
    return payments.refund(order_id: order.id, amount: order.total)
  }""",
    "let b = A and B": """  let b = intent == "refund" and order.total < 100.0
  if b {
    return payments.refund(order_id: order.id, amount: order.total)
  }""",
    "str(A or B) as data": """  audit.note(text: str(intent == "other" or order.total < 100.0))""",
    "and, tagged right side": """  if order.total < 100.0 and intent == "refund" {
    return payments.refund(order_id: order.id, amount: order.total)
  }""",
}


def workspace(body):
    return Workspace({"labels.rmt": PROGRAM.format(body=body), "host.rmti": HOST, "fixtures.json": FIXTURES})


def test_the_checker_predicts_approval_for_every_case():
    for name, body in CASES.items():
        with workspace(body) as ws:
            r = run(REMITC, "check", "labels.rmt", "--json", cwd=ws.path)
            expect(r.code == 0, f"{name}: checks", r)
            sites = json.loads(r.out)["manifest"]["approval_sites"]
            expect(len(sites) == 1 and any("control flow" in x or "untrusted" in x for x in sites[0]["reasons"]),
                   f"{name}: one approval site", r)


def test_remitvm_run_pauses_for_approval():
    for name, body in CASES.items():
        with workspace(body) as ws:
            r = run(REMITVM, "run", "labels.rmt", "--allow-all", "--fixtures", "fixtures.json", "-i", "ticket=hi",
                    "--json", cwd=ws.path)
            expect(r.code == 3, f"{name}: the run pauses (exit 3)", r)
            pending = json.loads(r.out)["pending"]
            expect(pending["reasons"] and all("untrusted" in x for x in pending["reasons"]),
                   f"{name}: the reasons name the tag", r)


def test_the_result_carries_the_left_sides_provenance():
    # `str(intent == "other" or order.total < 100.0)`: the text derives from the model's answer
    # (call 2) as well as from the order (call 1), so the note's call event lists both.
    with workspace(CASES["str(A or B) as data"]) as ws:
        r = run(REMITVM, "run", "labels.rmt", "--allow-all", "--approve-all", "--fixtures", "fixtures.json",
                "-i", "ticket=hi", "--json", cwd=ws.path)
        expect(r.code == 0, "completes with --approve-all", r)
        run_id = json.loads(r.out)["run_id"]
        events = [json.loads(x) for x in (ws.path / ".remit" / "runs" / f"{run_id}.jsonl").read_text().splitlines()]
        note = [e for e in events if e.get("event") == "call" and e["resource"] == "audit.note"]
        expect(len(note) == 1 and note[0]["derived_from"] == [1, 2], "derived from the order and the model", events)
        expect(note[0]["arg_tags"] == {"text": ["untrusted"]}, "the text is untrusted", events)


class Serve(LineServer):
    def __init__(self):
        super().__init__([REMITVM, "serve"])

    def ask(self, obj):
        self.send_line(json.dumps(obj))
        line = self.next_line()
        expect(line is not None, "serve answered")
        return json.loads(line)


def test_remitvm_serve_asks_with_reasons():
    results = {"shop.order": {"id": "A1", "total": 50.0}, "llm": "refund"}
    grants = [{"name": n, "mode": "allow"} for n in ("shop.order", "payments.refund", "audit.note", "llm")]
    for name, body in CASES.items():
        with Serve() as s:
            r = s.ask({"type": "run", "session": "s", "program": PROGRAM.format(body=body), "host": HOST,
                       "grants": grants, "inputs": {"ticket": "hi"}})
            while r["status"] == "host-call" and r["call"]["resource"] in results:
                r = s.ask({"type": "resume", "session": "s", "call": r["call"]["id"],
                           "perform": {"result": results[r["call"]["resource"]]}})
            expect(r["status"] == "host-call" and r["call"]["resource"] in ("payments.refund", "audit.note"),
                   f"{name}: the sink call is reported", r)
            call = r["call"]
            expect(call["mode"] == "ask" and call["reasons"], f"{name}: an allow grant still asks", r)
            tags = call["pc_tags"] + [t for ts in call["arg_tags"].values() for t in ts]
            expect("untrusted" in tags, f"{name}: the tag is reported", r)


if __name__ == "__main__":
    main(globals())
