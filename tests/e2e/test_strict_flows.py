#!/usr/bin/env python3
"""Strict flows end to end (docs/language.md "Strict flows"): chosen by the host with
`--strict-flows`, `[flows] strict = true` or serve's `strict_flows`; shown in the manifest; the
termination channels the default mode misses (a break or a loop filter on tagged data) pause for
approval in strict mode and the manifest predicts it; the pc reaches `deny` (E0301); a .rbc built
without strict flows is refused under a strict policy; a strict run resumes strict."""
import json

from harness import REMITC, REMITVM, LineServer, Workspace, expect, main, run

HOST = """input t tags untrusted
capability audit.count(n: Int approve untrusted)
capability audit.note(text: Str approve untrusted)
capability vault.open(code: Str deny untrusted)
"""

FIXTURES = json.dumps({"capabilities": {"audit.count": [{"output": None}], "audit.note": [{"output": None}],
                                        "vault.open": [{"output": None}]}})

# n counts the words before t: the loop's break reveals t, and n carries no tag of t's in the
# default mode (the break's condition is only control flow).
BREAK = """program brk
uses audit.count

fn main(t: Str) {
  var n = 0
  for w in ["a", "b", "c"] {
    if w == t {
      break
    }
    n = n + 1
  }
  audit.count(n: n)
}
"""

# len(ys) reveals whether t is "yes": the filter's condition decides the list's length.
FILTER = """program filt
uses audit.count

fn main(t: Str) {
  let ys = for w in ["yes", "b"] if w == t { w }
  audit.count(n: len(ys))
}
"""

# The note is written only when no word matched: an early return on tagged data.
RETURN = """program ret
uses audit.note

fn find(t: Str) -> Int {
  for w in ["a", "b"] {
    if w == t {
      return 1
    }
  }
  audit.note(text: "nothing found")
  return 0
}

fn main(t: Str) -> Int {
  return find(t)
}
"""

# The vault is opened only when t is "x": in strict mode that decision may not reach a deny sink.
DENY = """program vault
uses vault.open

fn main(t: Str) {
  if t == "x" {
    vault.open(code: "1234")
  }
}
"""

# The right side of `and` runs only when the left one is true.
AND = """program conj
uses audit.note

fn noted() -> Bool {
  audit.note(text: "checked")
  return true
}

fn main(t: Str) -> Bool {
  return t == "a" and noted()
}
"""


def workspace(program, policy=None):
    files = {"p.rmt": program, "host.rmti": HOST, "fixtures.json": FIXTURES}
    if policy is not None:
        files["policy.toml"] = policy
    return Workspace(files)


def check_json(ws, *flags):
    r = run(REMITC, "check", "p.rmt", "--json", *flags, cwd=ws.path)
    return r, json.loads(r.out)


def run_json(ws, t, *flags):
    r = run(REMITVM, "run", "p.rmt", "--fixtures", "fixtures.json", "-i", f"t={t}", "--json", *flags, cwd=ws.path)
    return r, json.loads(r.out)


def test_termination_channels_pause_only_in_strict_mode():
    for name, program in (("break", BREAK), ("filter", FILTER), ("return", RETURN)):
        with workspace(program) as ws:
            r, out = check_json(ws)
            expect(out["ok"] and out["manifest"]["approval_sites"] == [], f"{name}: default predicts nothing", r)
            expect("strict_flows" not in out["manifest"], f"{name}: a default manifest keeps its shape", r)
            r, out = check_json(ws, "--strict-flows")
            manifest = out["manifest"]
            expect(out["ok"] and manifest["strict_flows"] is True, f"{name}: the manifest shows the mode", r)
            expect(len(manifest["approval_sites"]) == 1, f"{name}: strict predicts the approval", r)
            # Every value of t: the tagged comparison decides what happens, taken or not (except
            # that an early return skips the call altogether).
            for t in ("a", "b", "yes", "zz"):
                r, out = run_json(ws, t, "--allow-all")
                expect(r.code == 0 and out["status"] == "completed", f"{name} t={t}: default runs through", r)
                returned = name == "return" and t in ("a", "b")
                expect(out["calls"] == (0 if returned else 1), f"{name} t={t}: calls", r)
                r, out = run_json(ws, t, "--allow-all", "--strict-flows")
                if returned:
                    expect(r.code == 0 and out["result_tags"] == ["untrusted"], f"{name} t={t}: returned", r)
                    continue
                expect(r.code == 3 and out["status"] == "approval_required", f"{name} t={t}: strict pauses", r)
                expect(all("untrusted" in reason for reason in out["pending"]["reasons"]), "names the tag", r)


def test_the_policy_chooses_strict_flows():
    policy = '[grant."audit.count"]\n\n[flows]\nstrict = true\n'
    with workspace(BREAK, policy) as ws:
        r, out = check_json(ws)
        expect(out["ok"] and out["manifest"].get("strict_flows") is True, "check follows the policy", r)
        r = run(REMITC, "check", "p.rmt", cwd=ws.path)
        expect("approval possible audit.count" in r.out, "the summary shows the approval", r)
        r, out = run_json(ws, "a")
        expect(r.code == 3 and out["status"] == "approval_required", "run follows the policy", r)
        events = [json.loads(x) for x in (ws.path / ".remit/runs" / f"{out['run_id']}.jsonl").read_text().splitlines()]
        expect(events[0]["event"] == "run_start" and events[0]["strict_flows"] is True, "run_start records it", events)


def test_a_strict_run_resumes_strict():
    with workspace(BREAK) as ws:
        r, out = run_json(ws, "a", "--allow-all", "--strict-flows")
        expect(r.code == 3, "pauses", r)
        run_id = out["run_id"]
        r = run(REMITVM, "approve", run_id, cwd=ws.path)
        expect(r.code == 0, "approved", r)
        r = run(REMITVM, "resume", run_id, "--allow-all", "--json", cwd=ws.path)
        expect(r.code == 0 and json.loads(r.out)["status"] == "completed", "resumes and completes", r)
        runs = sorted((ws.path / ".remit/runs").glob("*.jsonl"))
        starts = [json.loads(p.read_text().splitlines()[0]) for p in runs]
        expect(all(s.get("strict_flows") is True for s in starts), "both runs are strict", starts)


def test_the_pc_reaches_deny_in_strict_mode():
    with workspace(DENY) as ws:
        r, out = check_json(ws)
        expect(out["ok"], "default: a decision on untrusted data may open the vault", r)
        r, out = check_json(ws, "--strict-flows")
        expect(not out["ok"], "strict: refused", r)
        d = out["diagnostics"][0]
        expect(d["code"] == "E0301" and d["line"] == 6 and "control flow tagged untrusted" in d["message"], "E0301", r)
        expect(d["details"]["via"] == "control" and d["details"]["param"] == "code", "details", r)
        expect(any("input 't'" in n for n in d["notes"]), "the origin", r)


def test_the_right_side_of_and_runs_under_the_left_side():
    with workspace(AND) as ws:
        r, out = run_json(ws, "a", "--allow-all")
        expect(r.code == 0, "default: the note is written without approval", r)
        r, out = run_json(ws, "a", "--allow-all", "--strict-flows")
        expect(r.code == 3 and out["pending"]["reasons"] == ["'text' is untrusted (control flow)"], "strict", r)


def test_a_default_rbc_is_refused_under_a_strict_policy():
    policy = '[grant."audit.count"]\n\n[flows]\nstrict = true\n'
    with workspace(BREAK, policy) as ws:
        r = run(REMITC, "build", "p.rmt", cwd=ws.path)
        expect(r.code == 0, "builds", r)
        r = run(REMITVM, "run", "p.rbc", "--fixtures", "fixtures.json", "-i", "t=a", cwd=ws.path)
        expect(r.code == 1 and "built without strict flows" in r.err and "--strict-flows" in r.err, "refused", r)
        r = run(REMITC, "build", "p.rmt", "--strict-flows", cwd=ws.path)
        expect(r.code == 0, "builds strict", r)
        r = run(REMITC, "manifest", "p.rbc", cwd=ws.path)
        expect(json.loads(r.out)["strict_flows"] is True, "the artifact's manifest says so", r)
        r = run(REMITVM, "run", "p.rbc", "--fixtures", "fixtures.json", "-i", "t=a", "--json", cwd=ws.path)
        expect(r.code == 3, "the strict artifact pauses", r)


class Serve(LineServer):
    def __init__(self):
        super().__init__([REMITVM, "serve"])

    def ask(self, obj):
        self.send_line(json.dumps(obj))
        return json.loads(self.next_line())


def test_serve_strict_flows():
    grants = [{"name": "audit.count", "mode": "allow"}, {"name": "vault.open", "mode": "allow"}]
    with Serve() as s:
        base = {"type": "run", "host": HOST, "grants": grants, "inputs": {"t": "a"}}
        r = s.ask({**base, "session": "d", "program": BREAK})
        expect(r["status"] == "host-call" and r["call"]["mode"] == "allow", "default: allowed", r)
        r = s.ask({**base, "session": "s", "program": BREAK, "strict_flows": True})
        expect(r["status"] == "host-call" and r["call"]["mode"] == "ask", "strict: asks", r)
        expect(r["call"]["reasons"] == ["'n' is untrusted (control flow)"] and r["call"]["pc_tags"] == ["untrusted"],
               "the break's guard is in the pc", r)
        r = s.ask({**base, "session": "v", "program": DENY, "strict_flows": True})
        expect(r["status"] == "rejected" and r["diagnostics"][0]["code"] == "E0301", "strict deny is rejected", r)
        r = s.ask({**base, "session": "x", "program": BREAK, "strict_flows": "yes"})
        expect(r["status"] == "error" and "strict_flows" in r["error"]["message"], "a bad value is refused", r)


def test_mcp_strict_flows():
    from test_mcp import Client  # the MCP client of the MCP tests

    with Client() as c:
        c.initialize()
        out = c.tool("remit_check", {"program": DENY, "host": HOST})
        expect(out["ok"], "default: checks", out)
        value, is_error = c.call("remit_check", {"program": DENY, "host": HOST, "strict_flows": True})
        expect(not value["ok"] and "E0301" in value["errors"][0], "strict: E0301", value)
        out = c.tool("remit_run", {"program": BREAK, "host": HOST, "fixtures": FIXTURES, "inputs": '{"t": "a"}'})
        expect(out["status"] == "completed", "default: completes", out)
        out = c.tool("remit_run", {"program": BREAK, "host": HOST, "fixtures": FIXTURES, "inputs": '{"t": "a"}',
                                   "strict_flows": True})
        expect(out["status"] == "approval_required" and out["pending"]["resource"] == "audit.count", "strict", out)
        policy = '[grant."audit.count"]\n\n[flows]\nstrict = true\n'
        out = c.tool("remit_run", {"program": BREAK, "host": HOST, "fixtures": FIXTURES, "inputs": '{"t": "b"}',
                                   "policy": policy})
        expect(out["status"] == "approval_required", "a strict policy", out)


if __name__ == "__main__":
    main(globals())
