#!/usr/bin/env python3
"""`remitvm serve` end to end (docs/serve.md): a real server process driven over its stdin/stdout.
Rejections (type error, ungranted capability — with no host-call message), a pause that is performed
and completes, a denial, the step limit, the wall limit while checking, an abort of a pure loop, two
sessions interleaved, malformed lines, expected_type, the rendered text and max_diagnostics, the
default limits, and the transcript in docs/serve.md replayed line by line.

`test_serve.py --regenerate` rewrites the replies of the transcript in docs/serve.md from a real
session (run it after an intended change of the protocol, and review the diff)."""
import json
import pathlib
import subprocess
import sys
import time

from harness import REMITVM, REPO, LineServer, expect, main

DOC = REPO / "docs" / "serve.md"

# The programs the client packages' tests run too (one copy: tests/data/serve_programs.json).
PROGRAMS = json.loads((REPO / "tests" / "data" / "serve_programs.json").read_text())
HOST, FETCH, SPIN = PROGRAMS["host"], PROGRAMS["fetch"], PROGRAMS["spin"]


class Server(LineServer):
    """A `remitvm serve` process; replies are read on a thread so a test can wait with a timeout."""

    def __init__(self):
        super().__init__([REMITVM, "serve"])

    def send(self, obj):
        self.send_line(json.dumps(obj))

    def reply(self, timeout=30):
        line = self.next_line(timeout)
        expect(line is not None, "the server closed its output")
        expect(line.endswith("\n"), f"a reply is one whole line: {line!r}")
        return json.loads(line)

    def no_more(self, wait=0.2):
        time.sleep(wait)
        expect(self.lines.empty(), f"unexpected reply: {self.lines.queue[0] if self.lines.qsize() else ''}")

    def close(self):
        self.proc.stdin.close()
        code = self.proc.wait(timeout=30)
        rest = []
        while True:
            line = self.lines.get(timeout=30)
            if line is None:
                break
            rest.append(json.loads(line))
        return code, rest



def run_request(session, source, grants=(), inputs=None, limits=None, expected_type=None, id=None):
    r = {"type": "run", "id": id if id is not None else f"{session}-run", "session": session, "program": source,
         "host": HOST, "grants": list(grants), "inputs": inputs or {}}
    if limits is not None:
        r["limits"] = limits
    if expected_type is not None:
        r["expected_type"] = expected_type
    return r


def test_reject_type_error_without_host_calls():
    source = FETCH.replace('return "got {page}"', "return len(page) + true")
    with Server() as s:
        s.send(run_request("a", source, grants=[{"name": "web.fetch", "mode": "allow"}], inputs={"topic": "tea"}))
        r = s.reply()
        expect(r["status"] == "rejected" and r["stage"] == "typecheck", "a type error is rejected", r)
        expect(r["diagnostics"][0]["code"] == "E0106" and r["diagnostics"][0]["line"] == 6, "at its span", r)
        expect(r["requires"] == ["web.fetch"], "requires", r)
        s.no_more()
        code, rest = s.close()
        expect(code == 0 and rest == [], "no host-call message, clean exit")


def test_reject_ungranted_capability_without_host_calls():
    with Server() as s:
        s.send(run_request("a", FETCH, grants=[], inputs={"topic": "tea"}))
        r = s.reply()
        expect(r["status"] == "rejected" and r["stage"] == "grant", "an ungranted capability is rejected", r)
        d = r["diagnostics"][0]
        expect(d["code"] == "E0501" and (d["line"], d["col"]) == (5, 14), "at the call", r)
        expect(r["requires"] == ["web.fetch"], "requires", r)
        code, rest = s.close()
        expect(code == 0 and all(x["status"] != "host-call" for x in rest), "zero host calls")


def test_pause_perform_complete():
    with Server() as s:
        s.send(run_request("a", FETCH, grants=[{"name": "web.fetch", "mode": "ask"}], inputs={"topic": "tea"}))
        r = s.reply()
        expect(r["status"] == "host-call", "pauses at the call", r)
        call = r["call"]
        expect(call["resource"] == "web.fetch" and call["mode"] == "ask" and call["site"] == "main#0", "the call", r)
        expect(call["span"] == {"line": 5, "col": 14, "end_line": 5, "end_col": 54}, "its span", r)
        expect(call["args"] == {"url": "https://example.org/tea"} and call["arg_tags"] == {"url": ["untrusted"]},
               "args and tags", r)
        s.send({"type": "resume", "id": 2, "session": "a", "call": call["id"], "perform": {"result": "a page"}})
        r = s.reply()
        expect(r["status"] == "completed" and r["result"] == "got a page" and r["host_calls"] == 1, "completes", r)
        expect(r["result_tags"] == ["untrusted"] and r["type"] == "Str" and r["id"] == 2, "tags and type", r)
        expect(r["tags"] == r["result_tags"], "the result's tags under their older name too", r)


def test_older_field_name_source():
    # 'source' was the program text's first name in this protocol; clients written against it
    # keep working, and a request may not give both names.
    with Server() as s:
        request = run_request("old", FETCH, grants=[{"name": "web.fetch", "mode": "allow"}], inputs={"topic": "tea"})
        request["source"] = request.pop("program")
        s.send(request)
        r = s.reply()
        expect(r["status"] == "host-call" and r["call"]["resource"] == "web.fetch", "runs as with 'program'", r)
        s.send({"type": "abort", "session": "old"})
        expect(s.reply()["status"] == "failed", "aborted")
        s.send({**request, "session": "both", "program": FETCH})
        r = s.reply()
        expect(r["status"] == "error" and "not both" in r["error"]["message"], "both names refused", r)


def test_deny():
    with Server() as s:
        s.send(run_request("a", FETCH, grants=[{"name": "web.fetch", "mode": "ask"}], inputs={"topic": "tea"}))
        call = s.reply()["call"]
        s.send({"type": "resume", "session": "a", "call": call["id"], "deny": {"reason": "no network today"}})
        r = s.reply()
        expect(r["status"] == "failed" and r["stage"] == "denied", "a denial fails the run", r)
        d = r["diagnostics"][0]
        expect(d["code"] == "R0303" and d["line"] == 5 and d["details"]["denied_by"] == "host", "at the call", r)
        s.send({"type": "resume", "session": "a", "call": call["id"], "perform": {"result": "late"}})
        r = s.reply()
        expect(r["status"] == "error" and r["error"]["code"] == "unknown_session", "the session is over", r)


def test_bad_result_is_a_failed_run():
    with Server() as s:
        s.send(run_request("a", FETCH, grants=[{"name": "web.fetch", "mode": "allow"}], inputs={"topic": "tea"}))
        call = s.reply()["call"]
        s.send({"type": "resume", "session": "a", "call": call["id"], "perform": {"result": {"deep": [1, 2]}}})
        r = s.reply()
        expect(r["status"] == "failed" and r["diagnostics"][0]["code"] == "R0501", "validated like the broker", r)


POLICY_HOST = """capability pay.send(account: Str, amount: Float) -> Str
  cost 0.5

model llm cost 0.1

input topic tags untrusted
"""

PAYMENTS = """program payments
uses pay.send, llm

agent Clerk {
  model: llm
  max_calls: 1
}

fn main(topic: Str) -> Str {
  let a = pay.send(account: "acct-1", amount: 10.0)
  let b = pay.send(account: "acct-2", amount: 99.0)
  return "{a} {b}"
}
"""

ASKING = """program asking
uses llm

agent Clerk {
  model: llm
  max_calls: 1
}

fn main(topic: Str) -> Str {
  let a = Clerk.ask(Str, "first") else "none"
  let b = llm.ask(Str, "second")
  return "{a} {b}"
}
"""


def serve_policy_run(s, source, grants, budget=None, host=POLICY_HOST, session="p"):
    request = {"type": "run", "session": session, "program": source, "host": host, "grants": grants,
               "inputs": {"topic": "tea"}}
    if budget is not None:
        request["budget"] = budget
    s.send(request)
    return s.reply()


def test_grants_are_a_policy_arg_prefix_and_arg_max():
    grants = [{"name": "pay.send", "mode": "allow", "arg_prefix": {"account": ["acct-"]}, "arg_max": {"amount": 50}},
              {"name": "llm", "mode": "allow"}]
    with Server() as s:
        r = serve_policy_run(s, PAYMENTS, grants)
        expect(r["status"] == "host-call" and r["call"]["args"] == {"account": "acct-1", "amount": 10.0}, "first", r)
        s.send({"type": "resume", "session": "p", "call": r["call"]["id"], "perform": {"result": "ok-1"}})
        r = s.reply()
        expect(r["status"] == "failed" and r["stage"] == "denied", "the second payment is over arg_max", r)
        d = r["diagnostics"][0]
        expect(d["code"] == "R0301" and d["details"] == {"resource": "pay.send", "param": "amount",
                                                          "constraint": "arg_max", "value": 50.0}, "R0301", r)
        expect(r["host_calls"] == 1, "never reported", r)
        grants[0]["arg_prefix"] = {"account": ["savings-"]}
        r = serve_policy_run(s, PAYMENTS, grants, session="q")
        expect(r["status"] == "failed" and r["diagnostics"][0]["details"]["constraint"] == "arg_prefix", "prefix", r)


def test_grants_are_a_policy_approval_and_approve_tags():
    grants = [{"name": "pay.send", "mode": "allow", "approval": "always"}, {"name": "llm", "mode": "allow"}]
    with Server() as s:
        r = serve_policy_run(s, PAYMENTS, grants)
        expect(r["call"]["mode"] == "ask" and r["call"]["reasons"] == ["always requires approval"], "always", r)
        grants = [{"name": "pay.send", "mode": "allow", "approve": {"account": ["untrusted"]}},
                  {"name": "llm", "mode": "allow"}]
        source = PAYMENTS.replace('account: "acct-1"', 'account: topic')
        r = serve_policy_run(s, source, grants, session="q")
        expect(r["call"]["mode"] == "ask" and r["call"]["reasons"] == ["'account' is untrusted"], "approve", r)


def test_a_budget_is_reserved_and_reconciled():
    grants = [{"name": "pay.send", "mode": "allow"}, {"name": "llm", "mode": "allow"}]
    with Server() as s:
        # 0.5 per payment is reserved; the first reports it cost 0.9, so the second cannot fit in 1.2.
        r = serve_policy_run(s, PAYMENTS, grants, budget=1.2)
        s.send({"type": "resume", "session": "p", "call": r["call"]["id"],
                "perform": {"result": "ok-1", "cost_usd": 0.9}})
        r = s.reply()
        expect(r["status"] == "failed" and r["stage"] == "limit", "over budget", r)
        d = r["diagnostics"][0]
        expect(d["code"] == "R0401" and d["details"]["spent"] == 0.9 and d["details"]["value"] == 1.2, "R0401", r)
        # The declared costs fit when the host reports nothing.
        r = serve_policy_run(s, PAYMENTS, grants, budget=1.2, session="q")
        for result in ("ok-1", "ok-2"):
            s.send({"type": "resume", "session": "q", "call": r["call"]["id"], "perform": {"result": result}})
            r = s.reply()
        expect(r["status"] == "completed" and r["spent_usd"] == 1.0, "completed within budget", r)
        s.send({"type": "run", "session": "x", "program": PAYMENTS, "host": POLICY_HOST, "grants": grants,
                "inputs": {"topic": "tea"}, "budget": -1})
        r = s.reply()
        expect(r["status"] == "error" and "budget" in r["error"]["message"], "a negative budget is refused", r)


def test_agent_and_model_calls_count_under_their_models_grant():
    # An agent's own max_calls can only be exceeded by a doctored artifact (E0403 otherwise); the
    # broker's check of it is the one `remitvm run` uses (tests/unit/test_broker.cpp). Here the
    # grant's max_calls counts the agent's call and the model's together.
    grants = [{"name": "llm", "mode": "allow", "max_calls": 1}]
    with Server() as s:
        r = serve_policy_run(s, ASKING, grants)
        expect(r["call"]["kind"] == "agent", "the agent's call", r)
        s.send({"type": "resume", "session": "p", "call": r["call"]["id"], "perform": {"result": "yes"}})
        r = s.reply()
        expect(r["status"] == "failed" and r["diagnostics"][0]["code"] == "R0402", "the second call is over", r)
    grants = [{"name": "llm", "mode": "allow"}]
    with Server() as s:
        r = serve_policy_run(s, ASKING, grants)
        s.send({"type": "resume", "session": "p", "call": r["call"]["id"], "perform": {"result": "yes"}})
        r = s.reply()
        expect(r["status"] == "host-call" and r["call"]["kind"] == "model", "then the model", r)
        s.send({"type": "resume", "session": "p", "call": r["call"]["id"], "perform": {"result": "no"}})
        r = s.reply()
        expect(r["status"] == "completed" and r["result"] == "yes no", "completed", r)


def test_step_limit():
    with Server() as s:
        s.send(run_request("a", SPIN, limits={"steps": 5000}))
        r = s.reply()
        expect(r["status"] == "failed" and r["stage"] == "limit", "the step limit", r)
        expect(r["diagnostics"][0]["code"] == "R0701", "R0701", r)
        expect(r["diagnostics"][0]["details"] == {"limit": "steps", "value": 5000}, "names the limit", r)


def test_wall_limit_during_checking():
    lines = ["program big", "", "fn main() -> Int {", "  var n = 0"]
    lines += [f"  n = n + {i} * 2 - 1" for i in range(20000)]
    lines += ["  return n", "}", ""]
    with Server() as s:
        s.send(run_request("a", "\n".join(lines), limits={"wall_ms": 1}))
        r = s.reply()
        expect(r["status"] == "failed" and r["stage"] == "limit", "the wall limit covers checking", r)
        details = r["diagnostics"][0]["details"]
        expect(details["limit"] == "wall_ms" and details["phase"] in ("parse", "check", "compile"), "before running", r)


def test_abort_pure_loop():
    with Server() as s:
        s.send(run_request("a", SPIN, limits={"steps": 10**12, "wall_ms": 600000}))
        time.sleep(0.3)
        t0 = time.monotonic()
        s.send({"type": "abort", "session": "a"})
        r = s.reply(timeout=10)
        elapsed = time.monotonic() - t0
        expect(r["status"] == "failed" and r["stage"] == "aborted", "aborted", r)
        expect(r["diagnostics"][0]["code"] == "R0702" and r["id"] == "a-run", "answers the run request", r)
        expect(elapsed < 5, f"within bounded time ({elapsed:.2f}s)")
        s.send({"type": "abort", "session": "a"})
        r = s.reply()
        expect(r["status"] == "error" and r["error"]["code"] == "unknown_session", "nothing left to abort", r)


def test_two_sessions_interleaved():
    with Server() as s:
        grants = [{"name": "web.fetch", "mode": "allow"}]
        s.send(run_request("a", FETCH, grants=grants, inputs={"topic": "tea"}))
        a = s.reply()
        s.send(run_request("b", FETCH, grants=grants, inputs={"topic": "rain"}))
        b = s.reply()
        expect(a["session"] == "a" and b["session"] == "b", "replies name their session", (a, b))
        expect(b["call"]["args"]["url"].endswith("/rain"), "b's own call", b)
        # A busy session refuses a second run; a misbehaving third session fails alone.
        s.send(run_request("a", FETCH, grants=grants, inputs={"topic": "tea"}))
        r = s.reply()
        expect(r["status"] == "error" and r["error"]["code"] == "session_busy", "one run per session", r)
        s.send(run_request("c", SPIN, limits={"steps": 1000}))
        r = s.reply()
        expect(r["session"] == "c" and r["stage"] == "limit", "c hits its limit", r)
        huge = "program huge\n\nfn main() -> List[Str] {\n  return for i in range(200000) {\n    \"xxxxxxxxxxxx\"\n  }\n}\n"
        s.send(run_request("d", huge))
        r = s.reply()
        expect(r["session"] == "d" and r["diagnostics"][0]["details"]["limit"] == "result_bytes", "d's output is cut", r)
        s.send_line('{"type": "resume", "session": "b", "call": ' + "[" * 300 + "]" * 300 + "}")
        r = s.reply()
        expect(r["status"] == "error" and r["error"]["code"] == "bad_request", "a deep line is refused", r)
        s.send({"type": "resume", "session": "b", "call": b["call"]["id"], "perform": {"result": "B"}})
        rb = s.reply()
        s.send({"type": "resume", "session": "a", "call": a["call"]["id"], "perform": {"result": "A"}})
        ra = s.reply()
        expect(rb["session"] == "b" and rb["result"] == "got B", "b completes", rb)
        expect(ra["session"] == "a" and ra["result"] == "got A", "a completes", ra)


def test_malformed_lines():
    with Server() as s:
        bad = ["not json", "{", "[1, 2]", '{"type": "run"}', '{"type": "launch", "session": "x"}',
               '{"type": "run", "session": "x", "program": "", "host": "", "limit": {}}',
               "[" * 100000, '{"type": "resume", "session": "x", "call": 1, "perform": {"result": 1}}']
        for line in bad:
            s.send_line(line)
            r = s.reply()
            expect(r["status"] == "error", f"an error reply for {line[:40]!r}", r)
            code = r["error"]["code"]
            expect(code == ("unknown_session" if "resume" in line else "bad_request"), "its code", r)
            expect(r["error"]["message"], "a message naming the problem", r)
        s.send_line('{"type": "run", "session": "x", "program": "", "host": "", "limit": {}}')
        r = s.reply()
        expect("'limit'" in r["error"]["message"] and "'limits'" in r["error"]["message"], "names the field", r)
        s.send_line("x" * (9 << 20))  # over the 8 MiB line limit
        r = s.reply()
        expect(r["error"]["code"] == "bad_request" and "longer than" in r["error"]["message"], "overlong", r)
        s.send(run_request("ok", "program p\n\nfn main() -> Int {\n  return 7\n}\n"))
        r = s.reply()
        expect(r["status"] == "completed" and r["result"] == 7, "the server still works", r)


def test_expected_type_mismatch():
    with Server() as s:
        s.send(run_request("a", "program p\n\nfn main() -> Str {\n  return \"x\"\n}\n", expected_type="Int"))
        r = s.reply()
        expect(r["status"] == "rejected" and r["stage"] == "expected-type", "expected-type", r)
        d = r["diagnostics"][0]
        expect(d["details"] == {"expected": "Int", "actual": "Str"} and d["line"] == 3, "names both types", r)


def test_rendered_text_and_max_diagnostics():
    source = "program p\n\nfn main() -> Int {\n  let a: Int = \"one\"\n  let b: Int = \"two\"\n  return a\n}\n"
    with Server() as s:
        request = run_request("a", source)
        request["max_diagnostics"] = 1
        s.send(request)
        r = s.reply()
        expect(r["status"] == "rejected" and len(r["diagnostics"]) == 2, "every diagnostic in the list", r)
        expect(r["rendered"] == "program.rmt:4:16: error[E0103]: 'a' is declared as Int but the value has type Str\n"
                                "   4 |   let a: Int = \"one\"\n"
                                "                      ^^^^^\n"
                                "... and 1 more diagnostic not shown (1 error); fix the ones above first\n",
               "one in the text, the other counted", r)
        s.send(run_request("b", FETCH, grants=[{"name": "web.fetch", "mode": "ask"}], inputs={"topic": "tea"}))
        call = s.reply()["call"]
        s.send({"type": "resume", "session": "b", "call": call["id"], "deny": {}})
        r = s.reply()
        expect(r["rendered"] == "program.rmt:5:14: runtime error[R0303]: the host denied the call to 'web.fetch'\n"
                                "   5 |   let page = web.fetch(\"https://example.org/{topic}\")\n"
                                "                    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n", "a failure too", r)
        request["session"], request["max_diagnostics"] = "c", 0
        s.send(request)
        r = s.reply()
        expect(r["status"] == "error" and r["error"]["message"] == "'max_diagnostics' must be a positive integer",
               "at least one", r)


def test_default_limits():
    with Server() as s:
        s.send(run_request("a", SPIN))
        r = s.reply(timeout=60)
        expect(r["status"] == "failed", "the default limits apply", r)
        expect(r["diagnostics"][0]["details"] == {"limit": "steps", "value": 10000000}, "10,000,000 steps", r)
        many = "program many\nuses web.fetch\n\nfn main() -> Int {\n  var n = 0\n  for i in range(200) {\n" \
               "    let p = web.fetch(\"u\")\n    n = n + len(p)\n  }\n  return n\n}\n"
        s.send(run_request("b", many, grants=[{"name": "web.fetch", "mode": "allow"}]))
        r = s.reply()
        calls = 0
        while r["status"] == "host-call":
            calls += 1
            s.send({"type": "resume", "session": "b", "call": r["call"]["id"], "perform": {"result": "x"}})
            r = s.reply()
        expect(calls == 100, f"100 host calls by default, saw {calls}", r)
        expect(r["diagnostics"][0]["details"] == {"limit": "host_calls", "value": 100}, "then the limit", r)


# ---------------------------------------------------------------- the transcript in docs/serve.md

def transcript_blocks(text):
    """The ```jsonl blocks that follow a `<!-- transcript -->` marker: (start, end) line ranges."""
    lines = text.split("\n")
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "<!-- transcript -->":
            start = i + 2  # the fence is on the next line
            expect(lines[i + 1].startswith("```"), "a transcript marker is followed by a fence")
            end = start
            while not lines[end].startswith("```"):
                end += 1
            blocks.append((start, end))
            i = end
        i += 1
    return lines, blocks


def replay(lines, blocks):
    """Sends every `> ` request of the transcript to one server, in document order. Returns the
    document with each `< ` line replaced by the reply received, and the replies that differ."""
    result, differences, i = [], [], 0
    block_end = dict(blocks)
    with Server() as s:
        while i < len(lines):
            if i not in block_end:
                result.append(lines[i])
                i += 1
                continue
            documented = [l for l in lines[i:block_end[i]] if l.startswith("< ")]
            k = 0
            for line in lines[i:block_end[i]]:
                if line.startswith("< "):
                    continue
                result.append(line)
                if line.startswith("> "):
                    s.send_line(line[2:])
                    reply = s.reply()
                    result.append("< " + json.dumps(reply, ensure_ascii=False, separators=(", ", ": ")))
                    if k >= len(documented) or json.loads(documented[k][2:]) != reply:
                        differences.append(f"request: {line}\n  doc: {documented[k] if k < len(documented) else None}"
                                           f"\n  got: {result[-1]}")
                    k += 1
            i = block_end[i]
    return result, differences


def test_transcript_in_docs():
    lines, blocks = transcript_blocks(DOC.read_text(encoding="utf-8"))
    expect(blocks, "docs/serve.md has a transcript")
    for start, end in blocks:
        requests = [l for l in lines[start:end] if l.startswith("> ")]
        replies = [l for l in lines[start:end] if l.startswith("< ")]
        expect(len(requests) == len(replies), "one reply per request in the transcript")
    _, differences = replay(lines, blocks)
    expect(not differences, "the transcript in docs/serve.md is out of date (regenerate it with "
                            "tests/e2e/test_serve.py --regenerate):\n" + "\n".join(differences))


def regenerate():
    lines, blocks = transcript_blocks(DOC.read_text(encoding="utf-8"))
    result, differences = replay(lines, blocks)
    DOC.write_text("\n".join(result), encoding="utf-8")
    print(f"rewrote {len(differences)} repl(ies) of the transcript in {DOC}")


def test_client_tests_share_the_programs():
    # The client packages' tests read tests/data/serve_programs.json (their run_tests pass its path)
    # rather than keeping copies that drift apart from these.
    for test in ("clients/python/tests/test_client.py", "clients/node/test/client.test.ts"):
        text = (REPO / test).read_text()
        expect("serve_programs" in text or "REMIT_SERVE_PROGRAMS" in text, f"{test} reads the shared programs")
        for name, program in PROGRAMS.items():
            if not name.startswith("_"):
                expect(program.splitlines()[0] not in text, f"{test} keeps no copy of '{name}'")
    for runner in ("clients/python/run_tests", "clients/node/run_tests"):
        expect("tests/data/serve_programs.json" in (REPO / runner).read_text(), f"{runner} passes the programs' path")


if __name__ == "__main__":
    if "--regenerate" in sys.argv:
        regenerate()
    else:
        main(globals())
