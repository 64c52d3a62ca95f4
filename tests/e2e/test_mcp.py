#!/usr/bin/env python3
"""`remitvm mcp` and `remit mcp` end to end (docs/mcp.md): a scripted MCP client speaks JSON-RPC
over the real server's stdin/stdout. The handshake, tools/list (the exact tool and parameter names),
each tool's success and error shapes, the resources, remit_run pausing for an approval and
remit_resume continuing or refusing it, the bound on paused runs, oversized input, malformed JSON,
unknown methods, bad params, hostile messages, nothing leaking paths, and `remit mcp` answering
exactly as `remitvm mcp` does. The transcript in docs/mcp.md is replayed."""
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

from harness import REMIT, REMITVM, REPO, LineServer, expect, main

DOC = REPO / "docs" / "mcp.md"

TOOLS = {
    "remit_guide": ["section"],
    "remit_check": ["program", "host", "policy", "strict_flows"],
    "remit_format": ["program"],
    "remit_authority_diff": ["old_program", "new_program", "host"],
    "remit_examples": ["name"],
    "remit_run_fixtures": ["program", "host", "fixtures", "inputs", "policy", "strict_flows"],
    "remit_run": ["program", "host", "fixtures", "inputs", "policy", "strict_flows"],
    "remit_resume": ["run_token", "approve"],
}
REQUIRED = {
    "remit_guide": [],
    "remit_check": ["program", "host"],
    "remit_format": ["program"],
    "remit_authority_diff": ["old_program", "new_program", "host"],
    "remit_examples": [],
    "remit_run_fixtures": ["program", "host", "fixtures"],
    "remit_run": ["program", "host", "fixtures"],
    "remit_resume": ["run_token", "approve"],
}

HOST = """type Expense = { id: Str, email: Str, amount: Float, note: Str }

capability expenses.get(id: Str) -> Expense
  tags untrusted
  cost 0.001
  idempotent

capability payroll.pay(email: Str deny untrusted, amount: Float approve untrusted) -> Str

capability directory.email(id: Str) -> Str
  clears untrusted
  idempotent

model llm cost 0.01

input id tags untrusted
"""

NOTE = """program note
uses expenses.get

fn main(id: Str) -> Str {
  return expenses.get(id).note
}
"""

PAY = """program pay
uses expenses.get, directory.email, payroll.pay

fn main(id: Str) -> Str {
  let e = expenses.get(id)
  let to = directory.email(e.id)
  let receipt = payroll.pay(email: to, amount: e.amount)
  return "paid {receipt}"
}
"""

TWICE = """program twice
uses expenses.get, directory.email, payroll.pay

fn main(id: Str) -> Str {
  let e = expenses.get(id)
  let to = directory.email(e.id)
  let a = payroll.pay(email: to, amount: e.amount)
  let b = payroll.pay(email: to, amount: e.amount)
  return "{a} {b}"
}
"""

EXPENSE = {"id": "X", "email": "a@b.example", "amount": 12.5, "note": "taxi"}
FIXTURES = json.dumps({"capabilities": {
    "expenses.get": [{"output": EXPENSE, "repeat": True}],
    "directory.email": [{"args": {"id": "X"}, "output": "kim@corp.example", "repeat": True}],
    "payroll.pay": [{"args": {"email": "kim@corp.example"}, "output": "r-1"},
                    {"args": {"email": "kim@corp.example"}, "output": "r-2"}]}})
INPUTS = json.dumps({"id": "X"})


class Client(LineServer):
    """A server process and the client side of its protocol."""

    def __init__(self, tool=REMITVM, cwd=None, flags=()):
        super().__init__([tool, "mcp", *flags], cwd=cwd)
        self.next_id = 0

    def send_raw(self, data):
        self.send_line(data)

    def reply(self, timeout=30):
        line = self.next_line(timeout)
        if line is None:
            raise AssertionError("the server ended early: " + self.proc.stderr.read().decode("utf-8", "replace"))
        return json.loads(line)

    def request(self, method, params=None):
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send_raw(json.dumps(message))
        r = self.reply()
        expect(r.get("id") == self.next_id and r.get("jsonrpc") == "2.0", "reply to the request", r)
        return r

    def notify(self, method, params=None):
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send_raw(json.dumps(message))

    def initialize(self):
        r = self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                        "clientInfo": {"name": "test", "version": "1"}})
        self.notify("notifications/initialized")
        return r

    def call(self, name, arguments):
        r = self.request("tools/call", {"name": name, "arguments": arguments})
        expect("result" in r, f"{name} answered with an error", r)
        content = r["result"]["content"]
        expect(len(content) == 1 and content[0]["type"] == "text", "one text content", r)
        text = content[0]["text"]
        return (text if name == "remit_guide" and not r["result"]["isError"] else json.loads(text)), r["result"]["isError"]

    def tool(self, name, arguments):
        value, is_error = self.call(name, arguments)
        expect(not is_error, f"{name} is not an error", value)
        return value

    def close(self):
        self.proc.stdin.close()
        code = self.proc.wait(timeout=30)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return code



def test_initialize_and_ping():
    with Client() as c:
        r = c.initialize()["result"]
        expect(r["protocolVersion"] == "2025-06-18", "the client's version is echoed", r)
        expect(r["serverInfo"]["name"] == "remit" and re.fullmatch(r"\d+\.\d+\.\d+", r["serverInfo"]["version"]),
               "server name and version", r)
        expect(set(r["capabilities"]) == {"tools", "resources"}, "capabilities", r)
        for word in ("remit_guide", "remit_check", "remit_authority_diff"):
            expect(word in r["instructions"], f"instructions name {word}", r)
        # The notification got no reply: the next line answers the ping.
        expect(c.request("ping")["result"] == {}, "ping")
        old = c.request("initialize", {"protocolVersion": "1999-01-01"})["result"]
        expect(old["protocolVersion"] == "2025-06-18", "an unknown version gets the newest", old)
        expect(c.close() == 0, "clean exit at end of input")


def test_tools_list_names_and_parameters():
    with Client() as c:
        c.initialize()
        tools = c.request("tools/list")["result"]["tools"]
        expect([t["name"] for t in tools] == list(TOOLS), "exactly the tools, in order", tools)
        for t in tools:
            schema = t["inputSchema"]
            expect(schema["type"] == "object" and list(schema["properties"]) == TOOLS[t["name"]],
                   f"{t['name']} parameters", schema)
            expect(schema["required"] == REQUIRED[t["name"]], f"{t['name']} required", schema)
            expect(t["description"], "description", t)
            # Truthful annotations: remit_run keeps a paused run, remit_resume answers an approval,
            # which a person must decide; no tool reaches the world (fixtures answer every call).
            a = t["annotations"]
            changes_state = t["name"] in ("remit_run", "remit_resume")
            expect(a["readOnlyHint"] is (not changes_state) and a["idempotentHint"] is (not changes_state)
                   and a["destructiveHint"] is (t["name"] == "remit_resume") and a["openWorldHint"] is False,
                   f"{t['name']} annotations", a)
        guide = next(t for t in tools if t["name"] == "remit_guide")["inputSchema"]["properties"]["section"]
        expect(guide["enum"] == ["guide", "spec"] and guide["default"] == "guide", "section", guide)
        inputs = next(t for t in tools if t["name"] == "remit_run_fixtures")["inputSchema"]["properties"]["inputs"]
        expect(inputs["default"] == "{}", "inputs default", inputs)
        approve = next(t for t in tools if t["name"] == "remit_resume")["inputSchema"]["properties"]["approve"]
        expect(approve["type"] == "boolean", "approve is a boolean", approve)


def test_guide_and_resources_work_from_any_directory():
    guide_text = (REPO / "docs" / "ai-guide.md").read_text(encoding="utf-8")
    spec_text = (REPO / "docs" / "spec" / "remit-language-v0.1.md").read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as elsewhere, Client(cwd=elsewhere) as c:
        c.initialize()
        expect(c.tool("remit_guide", {}) == guide_text, "the guide, embedded")
        expect(c.tool("remit_guide", {"section": "guide"}) == guide_text, "section guide")
        expect(c.tool("remit_guide", {"section": "spec"}) == spec_text, "the spec, embedded")
        bad = c.request("tools/call", {"name": "remit_guide", "arguments": {"section": "intro"}})
        expect(bad["error"]["code"] == -32602 and "guide, spec" in bad["error"]["message"], "bad section", bad)
        listed = c.request("resources/list")["result"]["resources"]
        expect([r["uri"] for r in listed] == ["remit://guide", "remit://spec"], "resources", listed)
        expect(all(r["mimeType"] == "text/markdown" for r in listed), "markdown", listed)
        for uri, text in (("remit://guide", guide_text), ("remit://spec", spec_text)):
            contents = c.request("resources/read", {"uri": uri})["result"]["contents"]
            expect(len(contents) == 1 and contents[0]["uri"] == uri and contents[0]["text"] == text, uri)
        missing = c.request("resources/read", {"uri": "remit://nope"})
        expect(missing["error"]["code"] == -32002 and missing["error"]["data"]["uri"] == "remit://nope",
               "unknown resource", missing)
        expect(c.request("resources/read", {})["error"]["code"] == -32602, "uri required")
        expect(c.request("resources/templates/list")["result"] == {"resourceTemplates": []}, "no templates")


def test_remit_check_shapes():
    with Client() as c:
        c.initialize()
        ok = c.tool("remit_check", {"program": NOTE, "host": HOST})
        expect(list(ok) == ["ok", "errors", "warnings", "summary", "manifest", "program_hash"], "keys", ok)
        expect(ok["ok"] and ok["errors"] == [] and ok["warnings"] == [], "ok", ok)
        expect("expenses.get" in ok["summary"] and ok["manifest"]["program"] == "note", "summary and manifest", ok)
        expect(re.fullmatch(r"[0-9a-f]{64}", ok["program_hash"]) and ok["manifest"]["program_hash"] == ok["program_hash"],
               "program hash", ok)

        unbounded = NOTE.replace("return expenses.get(id).note", "let n = 0\n  for w in split(id, \" \") {\n    n\n  }\n  return expenses.get(id).note")
        bad = c.tool("remit_check", {"program": unbounded, "host": HOST})
        expect(list(bad) == ["ok", "errors", "warnings"] and not bad["ok"], "error keys", bad)
        expect(bad["errors"][0].startswith("program.rmt:") and "error[E0401]" in bad["errors"][0], "E0401", bad)
        expect("hint: add a limit" in bad["errors"][0] and "   | " not in bad["errors"][0].split("\n")[0], "rendered", bad)

        warned = c.tool("remit_check", {"program": NOTE.replace("uses expenses.get", "uses expenses.get, llm"), "host": HOST})
        expect(warned["ok"] and "warning[W0201]" in warned["warnings"][0], "warnings are listed", warned)

        syntax = c.tool("remit_check", {"program": "program p\nfn main( {\n", "host": HOST})
        expect(list(syntax) == ["ok", "errors"] and "error[E0100]" in syntax["errors"][0], "parse error", syntax)
        host_error = c.tool("remit_check", {"program": NOTE, "host": "capability x(a: Str)\n"})
        expect(not host_error["ok"] and host_error["errors"][0].startswith("host.rmti:"), "host error", host_error)

        policy = '[grant."expenses.get"]\nmax_calls = 0\n'
        over = c.tool("remit_check", {"program": NOTE, "host": HOST, "policy": policy})
        expect(not over["ok"] and "error[E0502]" in over["errors"][0], "policy compared", over)
        typo = c.tool("remit_check", {"program": NOTE, "host": HOST, "policy": '[grant."expenses.get"]\nmax_call = 1\n'})
        expect(not typo["ok"] and typo["errors"][0].startswith("policy.toml:2:1: error[E0504]"), "E0504", typo)
        none = c.tool("remit_check", {"program": NOTE, "host": HOST, "policy": None})
        expect(none["ok"], "a null policy is no policy", none)


def test_remit_format_shapes():
    with Client() as c:
        c.initialize()
        messy = "program p\nfn main()->Int{ return 1+2 }\n"
        r = c.tool("remit_format", {"program": messy})
        expect(list(r) == ["ok", "program"] and r["ok"], "formatted", r)
        expect(c.tool("remit_format", {"program": r["program"]})["program"] == r["program"], "idempotent", r)
        bad = c.tool("remit_format", {"program": "program p\nfn main( {\n"})
        expect(list(bad) == ["ok", "errors"] and not bad["ok"] and "error[E0100]" in bad["errors"][0], "error", bad)


def test_remit_authority_diff_shapes():
    with Client() as c:
        c.initialize()
        same = c.tool("remit_authority_diff", {"old_program": NOTE, "new_program": NOTE, "host": HOST})
        expect(same == {"ok": True, "widened": False, "changes": [], "narrowed": []}, "no change", same)
        wider = c.tool("remit_authority_diff", {"old_program": NOTE, "new_program": PAY, "host": HOST})
        expect(wider["ok"] and wider["widened"] and any("payroll.pay" in x for x in wider["changes"]), "widened", wider)
        narrower = c.tool("remit_authority_diff", {"old_program": PAY, "new_program": NOTE, "host": HOST})
        expect(narrower["ok"] and not narrower["widened"] and narrower["changes"] == [] and narrower["narrowed"],
               "narrowed: the narrowings apart, changes the widenings only", narrower)
        broken = c.tool("remit_authority_diff", {"old_program": NOTE, "new_program": "program p\n", "host": HOST})
        expect(not broken["ok"] and broken["errors"][0].startswith("new.rmt:") and "E0107" in broken["errors"][0],
               "new fails", broken)
        old_broken = c.tool("remit_authority_diff", {"old_program": "program p\n", "new_program": NOTE, "host": HOST})
        expect(old_broken == {"ok": False, "errors": ["the old program does not check; cannot compare"]}, "old fails",
               old_broken)


def test_remit_examples_shapes():
    with Client() as c:
        c.initialize()
        listed = c.tool("remit_examples", {})
        # Every example app (a folder with its program); examples/embed holds host code, not an app.
        names = sorted(p.name for p in (REPO / "examples").iterdir() if (p / f"{p.name}.rmt").exists())
        expect(listed == {"examples": names}, "every example folder", listed)
        one = c.tool("remit_examples", {"name": "refund_bot"})
        expect(one["refund_bot.rmt"] == (REPO / "examples/refund_bot/refund_bot.rmt").read_text(encoding="utf-8"),
               "the program", list(one))
        for f in ("host.rmti", "policy.toml", "inputs.json", "fixtures/run.json"):
            expect(f in one, f"has {f}", list(one))
        unknown = c.tool("remit_examples", {"name": "nope"})
        expect(unknown == {"error": "unknown example 'nope'", "examples": names}, "unknown", unknown)
        # Every bundled example checks through the server too.
        for name in names:
            files = c.tool("remit_examples", {"name": name})
            prog = files[f"{name}.rmt"]
            r = c.tool("remit_check", {"program": prog, "host": files["host.rmti"], "policy": files["policy.toml"]})
            expect(r["ok"], f"{name} checks", r)


def test_remit_run_fixtures_shapes():
    with Client() as c:
        c.initialize()
        r = c.tool("remit_run_fixtures", {"program": NOTE, "host": HOST, "fixtures": FIXTURES, "inputs": INPUTS})
        expect(r == {"ok": True, "result": "taxi",
                     "calls": [{"resource": "expenses.get", "args": {"id": "X"}, "status": "ok"}]}, "completed", r)
        paid = c.tool("remit_run_fixtures", {"program": PAY, "host": HOST, "fixtures": FIXTURES, "inputs": INPUTS})
        expect(paid["ok"] and paid["result"] == "paid r-1", "approvals are granted", paid)
        expect(paid["calls"][-1] == {"resource": "payroll.pay", "args": {"email": "kim@corp.example", "amount": 12.5},
                                     "status": "ok", "approval_needed": True}, "approval_needed", paid)
        failed = c.tool("remit_run_fixtures", {"program": NOTE, "host": HOST, "fixtures": "{}", "inputs": INPUTS})
        expect(list(failed) == ["ok", "runtime_error", "calls"] and not failed["ok"], "failed keys", failed)
        expect(failed["runtime_error"].startswith("program.rmt:5:10: runtime error[R0501]: no fixture for"),
               "runtime error", failed)
        expect(failed["calls"] == [{"resource": "expenses.get", "args": {"id": "X"}, "status": "error"}], "calls", failed)
        # The policy applies: its limits too.
        policy = '[grant."expenses.get"]\nmax_calls = 1\n[limits]\nmax_steps = 1\n'
        limited = c.tool("remit_run_fixtures", {"program": NOTE.replace("return expenses.get(id).note", "var n = 0\n  for i in range(100) {\n    n = n + i\n  }\n  return expenses.get(id).note"),
                                                "host": HOST, "fixtures": FIXTURES, "inputs": INPUTS, "policy": policy})
        expect(not limited["ok"] and "runtime error[R0701]" in limited["runtime_error"], "policy limits", limited)
        default_inputs = c.tool("remit_run_fixtures", {"program": "program p\n\nfn main() -> Int {\n  return 7\n}\n",
                                                       "host": "", "fixtures": "{}"})
        expect(default_inputs == {"ok": True, "result": 7, "calls": []}, "inputs default to {}", default_inputs)
        # Problems before the run: the check's result, invalid JSON, bad fixtures, bad inputs.
        bad = c.tool("remit_run_fixtures", {"program": "program p\n", "host": HOST, "fixtures": "{}"})
        expect(not bad["ok"] and "E0107" in bad["errors"][0] and "warnings" in bad, "the check's result", bad)
        js = c.tool("remit_run_fixtures", {"program": NOTE, "host": HOST, "fixtures": "{\n  \"model\": [,]}"})
        expect(js == {"ok": False, "errors": ["invalid JSON in fixtures at line 2, column 13"]}, "invalid JSON", js)
        shape = c.tool("remit_run_fixtures", {"program": NOTE, "host": HOST, "fixtures": '{"capabilities": []}'})
        expect(not shape["ok"] and shape["errors"][0].startswith("invalid fixtures fixtures.json: capabilities"),
               "invalid fixtures", shape)
        missing = c.tool("remit_run_fixtures", {"program": NOTE, "host": HOST, "fixtures": FIXTURES})
        expect(missing == {"ok": False, "errors": ["missing input 'id' (main takes id)"]}, "missing input", missing)
        typed = c.tool("remit_run_fixtures", {"program": NOTE, "host": HOST, "fixtures": FIXTURES, "inputs": '{"id": 5}'})
        expect(not typed["ok"] and typed["errors"][0].startswith("input 'id' does not fit its type"), "typed", typed)
        deep = c.tool("remit_run_fixtures", {"program": NOTE, "host": HOST, "fixtures": "[" * 1000 + "]" * 1000})
        expect(not deep["ok"] and "nested deeper" in deep["errors"][0], "deep JSON", deep)


def test_remit_run_pauses_and_resume_continues():
    with Client() as c:
        c.initialize()
        args = {"program": TWICE, "host": HOST, "fixtures": FIXTURES, "inputs": INPUTS}
        first = c.tool("remit_run", args)
        expect(first["status"] == "approval_required" and re.fullmatch(r"[0-9a-f]{32}", first["run_token"]), "paused", first)
        pending = first["pending"]
        expect(pending["resource"] == "payroll.pay" and pending["site"] == "main#2" and
               pending["args"] == {"email": "kim@corp.example", "amount": 12.5} and
               pending["reasons"] == ["'amount' is untrusted"] and re.fullmatch(r"[0-9a-f]{64}", pending["digest"]),
               "pending", first)
        expect([x["resource"] for x in first["calls"]] == ["expenses.get", "directory.email"], "calls so far", first)
        second = c.tool("remit_resume", {"run_token": first["run_token"], "approve": True})
        expect(second["status"] == "approval_required" and second["pending"]["site"] == "main#3", "pauses again", second)
        expect(second["run_token"] == first["run_token"], "same run", second)
        done = c.tool("remit_resume", {"run_token": first["run_token"], "approve": True})
        expect(done["status"] == "completed" and done["result"] == "r-1 r-2", "completed", done)
        expect(done["result_tags"] == ["untrusted"] and done["spent_usd"] == 0.001, "tags and spend", done)
        expect([x.get("approval_needed", False) for x in done["calls"]] == [False, False, True, True], "calls", done)
        gone, is_error = c.call("remit_resume", {"run_token": first["run_token"], "approve": True})
        expect(is_error and gone["error"] == "unknown_run_token" and "remit_run" in gone["message"], "finished token", gone)

        refused = c.tool("remit_run", args)
        no = c.tool("remit_resume", {"run_token": refused["run_token"], "approve": False})
        expect(no["status"] == "failed" and no["error"]["code"] == "R0302" and "refused" in no["error"]["message"], "denied", no)
        expect(no["denied"]["resource"] == "payroll.pay" and "runtime error[R0302]" in no["runtime_error"], "denied call", no)
        expect(all(x["resource"] != "payroll.pay" for x in no["calls"]), "the refused call was not made", no)

        plain = c.tool("remit_run", {"program": NOTE, "host": HOST, "fixtures": FIXTURES, "inputs": INPUTS})
        expect(plain["status"] == "completed" and plain["result"] == "taxi" and "run_token" not in plain, "no pause", plain)
        failed = c.tool("remit_run", {"program": NOTE, "host": HOST, "fixtures": "{}", "inputs": INPUTS})
        expect(failed["status"] == "failed" and failed["error"]["code"] == "R0501" and failed["error"]["line"] == 5,
               "failed", failed)
        rejected = c.tool("remit_run", {"program": "program p\n", "host": HOST, "fixtures": "{}"})
        expect(rejected["status"] == "rejected" and "E0107" in rejected["errors"][0] and "ok" not in rejected, "rejected",
               rejected)
        unknown, is_error = c.call("remit_resume", {"run_token": "0" * 32, "approve": True})
        expect(is_error and unknown["status"] == "error" and unknown["error"] == "unknown_run_token", "unknown", unknown)
        bad = c.request("tools/call", {"name": "remit_resume", "arguments": {"run_token": "x", "approve": "yes"}})
        expect(bad["error"]["code"] == -32602 and "true or false" in bad["error"]["message"], "approve type", bad)


def test_paused_runs_are_bounded_and_end_with_the_server():
    with Client() as c:
        c.initialize()
        args = {"program": PAY, "host": HOST, "fixtures": FIXTURES, "inputs": INPUTS}
        tokens = [c.tool("remit_run", args)["run_token"] for _ in range(9)]
        oldest, is_error = c.call("remit_resume", {"run_token": tokens[0], "approve": True})
        expect(is_error and oldest["error"] == "unknown_run_token", "the oldest of 9 was dropped (8 are kept)", oldest)
        newest = c.tool("remit_resume", {"run_token": tokens[-1], "approve": True})
        expect(newest["status"] == "completed" and newest["result"] == "paid r-1", "the newest continues", newest)
        expect(c.close() == 0, "end of input refuses the paused runs and exits")


def test_oversized_input():
    with Client() as c:
        c.initialize()
        big = NOTE + "#" * (200_000 - len(NOTE) + 1)
        for name, args in (("remit_check", {"program": big, "host": HOST}),
                           ("remit_format", {"program": big}),
                           ("remit_authority_diff", {"old_program": NOTE, "new_program": NOTE, "host": big}),
                           ("remit_run_fixtures", {"program": NOTE, "host": HOST, "fixtures": FIXTURES, "inputs": " " * 200_001})):
            r = c.tool(name, args)
            expect(r == {"ok": False, "errors": ["input too large"]}, f"{name}: too large", r)
        r = c.tool("remit_run", {"program": big, "host": HOST, "fixtures": "{}"})
        expect(r == {"status": "rejected", "errors": ["input too large"]}, "remit_run: too large", r)
        # The limit counts characters, not bytes: 200,000 two-byte characters are accepted.
        line = "#" + "é" * 998 + "\n"
        filler = line * ((200_000 - len(NOTE)) // len(line))
        at_limit = NOTE + filler + "#" * (200_000 - len(NOTE) - len(filler))
        expect(len(at_limit) == 200_000 and len(at_limit.encode("utf-8")) > 390_000, "the test's own arithmetic")
        fits = c.tool("remit_check", {"program": at_limit, "host": HOST})
        expect(fits["ok"], "exactly at the limit", fits)
        expect(c.request("ping")["result"] == {}, "still serving")


def test_protocol_errors_and_hostile_messages():
    with Client() as c:
        c.initialize()
        c.send_raw("{not json")
        r = c.reply()
        expect(r["id"] is None and r["error"]["code"] == -32700, "malformed JSON", r)
        c.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "x": "\xff"}')
        expect(c.reply()["error"]["code"] == -32700, "invalid UTF-8")
        c.send_raw("[" * 100_000 + "]" * 100_000)
        expect(c.reply()["error"]["code"] == -32700, "deep nesting is refused unparsed")
        c.send_raw(json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]))
        expect(c.reply()["error"]["code"] == -32600, "batch")
        c.send_raw("42")
        expect(c.reply()["error"]["code"] == -32600, "not an object")
        c.send_raw(json.dumps({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}))
        expect(c.reply()["error"]["code"] == -32600, "bad id")
        c.send_raw(json.dumps({"jsonrpc": "1.0", "id": 5, "method": "ping"}))
        expect(c.reply()["error"]["code"] == -32600, "bad version")
        unknown = c.request("no/such/method")
        expect(unknown["error"]["code"] == -32601 and "no/such/method" in unknown["error"]["message"], "unknown", unknown)
        c.notify("no/such/notification")  # never answered
        c.send_raw(json.dumps({"jsonrpc": "2.0", "id": 99, "result": {}}))  # a response: nothing to answer
        c.send_raw("")
        expect(c.request("ping")["result"] == {}, "nothing was answered in between")
        for params, what in (({"name": "remit_nope", "arguments": {}}, "unknown tool"),
                             ({"arguments": {}}, "no name"),
                             ({"name": "remit_check", "arguments": {"program": NOTE}}, "missing required"),
                             ({"name": "remit_check", "arguments": {"program": 1, "host": HOST}}, "wrong type"),
                             ({"name": "remit_check", "arguments": {"program": NOTE, "host": HOST, "polcy": ""}}, "unknown argument"),
                             ({"name": "remit_check", "arguments": "program"}, "arguments not an object")):
            r = c.request("tools/call", params)
            expect(r["error"]["code"] == -32602, what, r)
        r = c.request("tools/call", ["remit_check"])
        expect(r["error"]["code"] == -32602, "params not an object", r)
        r = c.request("tools/call", {"name": "remit_check", "arguments": {"program": NOTE, "host": HOST, "polcy": ""}})
        expect("unknown argument 'polcy'" in r["error"]["message"] and "policy" in r["error"]["message"], "names them", r)
        expect(c.request("ping")["result"] == {}, "still serving")
        expect(c.close() == 0, "clean exit")


def test_messages_javascript_clients_send():
    """What an SDK client writes and a strict parser refused (issue #16 items 1, 7, 9): lone UTF-16
    surrogates, replies to unparseable requests that still name their id, null ids, and fixtures and
    inputs given as JSON objects instead of their text."""
    with Client() as c:
        c.initialize()
        # A string cut inside an emoji: "\ud83c" alone. It becomes U+FFFD; a whole pair is kept.
        program = 'program p\n\nfn main() -> Str {\n  return "cut LONE pair PAIR"\n}\n'
        line = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                           "params": {"name": "remit_format", "arguments": {"program": program}}})
        c.send_raw(line.replace("LONE", "\\ud83c").replace("PAIR", "\\ud83c\\udf75"))
        r = c.reply()
        expect(r["id"] == 7 and "result" in r, "a lone surrogate is accepted", r)
        formatted = json.loads(r["result"]["content"][0]["text"])
        expect(formatted["ok"] and "cut \ufffd pair \U0001f375" in formatted["program"],
               "U+FFFD for the lone half, the pair kept", formatted)
        c.send_raw('{"jsonrpc": "2.0", "id": "s\\udc00", "method": "ping"}')
        r = c.reply()
        expect(r["id"] == "s\ufffd" and r["result"] == {}, "a lone low half in the id too", r)
        # Escaped backslashes are not escapes: "\\ud83c" is a backslash and five letters.
        c.send_raw('{"jsonrpc": "2.0", "id": "\\\\ud83c", "method": "ping"}')
        r = c.reply()
        expect(r["id"] == "\\ud83c", "an escaped backslash is kept", r)

        # A request that does not parse is answered with its id when it can be read.
        c.send_raw('{"jsonrpc": "2.0", "id": 41, "method": "ping", "params": {"x": tru}}')
        r = c.reply()
        expect(r["id"] == 41 and r["error"]["code"] == -32700, "the id of a broken request", r)
        c.send_raw('{"jsonrpc": "2.0", "params": {"id": 5}, "id": "abc", "method": ')
        r = c.reply()
        expect(r["id"] == "abc" and r["error"]["code"] == -32700, "the top-level id, not a nested one", r)
        c.send_raw('{"jsonrpc": "2.0", "params": {"id": 5}, "method": ')
        r = c.reply()
        expect(r["id"] is None, "no top-level id: null", r)

        # A raw NUL is never JSON (the parser would stop there and accept what came before).
        c.send_raw(b'{"jsonrpc": "2.0", "id": 42, "method": "ping"}\x00{"junk"')
        r = c.reply()
        expect(r["id"] == 42 and r["error"]["code"] == -32700, "a NUL byte is a parse error", r)

        # A null id is not a request (MCP forbids it) and not a notification.
        c.send_raw(json.dumps({"jsonrpc": "2.0", "id": None, "method": "ping"}))
        r = c.reply()
        expect(r["id"] is None and r["error"]["code"] == -32600 and "must not be null" in r["error"]["message"],
               "a null id is refused", r)
        c.send_raw(json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "x"}}))
        expect(c.request("ping")["result"] == {}, "a client's error response with a null id needs no answer")

        # fixtures and inputs as JSON objects, as the Inspector and models send them.
        args = {"program": NOTE, "host": HOST, "fixtures": json.loads(FIXTURES), "inputs": {"id": "X"}}
        result = c.tool("remit_run_fixtures", args)
        expect(result["ok"] and result["result"] == "taxi", "objects are taken as the documents", result)
        as_text = c.tool("remit_run_fixtures", {**args, "fixtures": FIXTURES, "inputs": INPUTS})
        expect(as_text == result, "the same as their text", as_text)
        r = c.request("tools/call", {"name": "remit_run", "arguments": {**args, "inputs": 3}})
        expect(r["error"]["code"] == -32602 and "a JSON object or its text" in r["error"]["message"], "a number", r)
        r = c.request("tools/call", {"name": "remit_check", "arguments": {"program": {"a": 1}, "host": HOST}})
        expect(r["error"]["code"] == -32602 and "must be a string" in r["error"]["message"], "program stays text", r)
        expect(c.close() == 0, "clean exit")


SPIN = ("program spin\n\nfn main() -> Int {\n  var n = 0\n  for i in range(1000000) {\n"
        "    for j in range(1000000) {\n      n = n + len(str(j) + str(i))\n    }\n  }\n  return n\n}\n")


def test_cancellation_reaches_a_running_call():
    """notifications/cancelled is read while a tool call runs (issue #16 item 2): the call is not
    answered (MCP: no response to a cancelled request), and the requests after it are."""
    with Client() as c:
        c.initialize()
        c.send_raw(json.dumps({"jsonrpc": "2.0", "id": 50, "method": "tools/call", "params": {
            "name": "remit_run_fixtures", "arguments": {"program": SPIN, "host": "", "fixtures": "{}"}}}))
        c.notify("notifications/cancelled", {"requestId": 50, "reason": "the user pressed stop"})
        c.send_raw(json.dumps({"jsonrpc": "2.0", "id": 51, "method": "ping"}))
        r = c.reply()
        expect(r["id"] == 51 and r["result"] == {}, "the next request is answered; the cancelled one is not", r)
        # A cancellation of a request that already ended, or of one never sent, changes nothing.
        c.notify("notifications/cancelled", {"requestId": 51})
        c.notify("notifications/cancelled", {"requestId": "never"})
        c.notify("notifications/cancelled", {})
        expect(c.request("ping")["result"] == {}, "still serving")
        expect(c.close() == 0, "clean exit")


def test_operator_approvals():
    """`--approvals operator` (issue #16 item 6): the agent cannot approve its own calls; remit_resume
    continues a paused run only once the operator has approved the call with `remitvm approve`."""
    with tempfile.TemporaryDirectory() as state:
        with Client(flags=["--approvals", "operator", "--state-dir", state]) as c:
            c.initialize()
            args = {"program": PAY, "host": HOST, "fixtures": FIXTURES, "inputs": INPUTS}
            paused = c.tool("remit_run", args)
            expect(paused["status"] == "approval_required" and paused["approver"] == "operator"
                   and "remitvm approve" in paused["next"] and state not in json.dumps(paused),
                   "paused for the operator, naming no path", paused)
            token, digest = paused["run_token"], paused["pending"]["digest"]
            again = c.tool("remit_resume", {"run_token": token, "approve": True})
            expect(again["status"] == "approval_required" and again["run_token"] == token,
                   "approve: true from the client approves nothing; the run stays paused", again)
            r = subprocess.run([REMITVM, "approve", digest[:16], "--state-dir", state, "--by", "ops"],
                               capture_output=True, text=True, timeout=60)
            expect(r.returncode == 0, "the operator approves at the command line", r)
            done = c.tool("remit_resume", {"run_token": token, "approve": True})
            expect(done["status"] == "completed" and done["result"] == "paid r-1", "then the run continues", done)
            store = json.loads((pathlib.Path(state) / "approvals.json").read_text())
            expect(any(v.get("by") == "ops" for v in store["consumed"].values()), "the approval was used once", store)

            refused = c.tool("remit_resume", {"run_token": c.tool("remit_run", args)["run_token"], "approve": False})
            expect(refused["status"] == "failed", "refusing stays the client's to do", refused)
            expect(c.close() == 0, "clean exit")
    for flags, words in ((["--approvals", "agent"], "client or operator"), (["--state-dir", "x"], "--approvals operator"),
                         (["--elicitation-timeout", "5"], "--approvals operator"),
                         (["--approvals", "operator", "--elicitation-timeout", "0"], "from 1 to 3600"),
                         (["--approvals", "operator", "--elicitation-timeout", "3601"], "from 1 to 3600"),
                         (["--approvals", "operator", "--elicitation-timeout", "5s"], "from 1 to 3600")):
        r = subprocess.run([REMITVM, "mcp", *flags], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
        expect(r.returncode == 2 and words in r.stderr, f"mcp {flags}", r)
    # A fleet's store cannot hold the server's runs, which live in its memory (docs/fleet.md): refused,
    # saying why, rather than approvals recorded where no run could use them.
    for flags, env in ((["--approvals", "operator", "--store", "postgresql://ops@db/remit"], {}),
                       (["--store", "postgresql://ops@db/remit"], {}),
                       (["--approvals", "operator"], {"REMIT_STORE": "postgresql://ops@db/remit"})):
        r = subprocess.run([REMITVM, "mcp", *flags], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                           timeout=60, env=dict(os.environ, **env))
        expect(r.returncode == 2 and "live in this server's memory" in r.stderr and "--state-dir D" in r.stderr,
               f"mcp {flags} {env}", r)
    r = subprocess.run([REMITVM, "mcp"], capture_output=True, text=True, input="", timeout=60,
                       env=dict(os.environ, REMIT_STORE="postgresql://ops@db/remit"))
    expect(r.returncode == 0, "client approvals need no store: $REMIT_STORE does not matter to them", r)


def test_operator_approvals_asked_of_the_user():
    """`--approvals operator` with a client that declared elicitation (issue #16 item 6): the server
    asks the user on stdout with elicitation/create, and only the client's response with that id
    answers; a response to nothing is ignored. End of input while the user is asked ends the server
    at once, the run refused."""
    with tempfile.TemporaryDirectory() as state:
        with Client(flags=["--approvals", "operator", "--state-dir", state]) as c:
            c.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
                                     "clientInfo": {"name": "test", "version": "1"}})
            c.notify("notifications/initialized")
            args = {"program": PAY, "host": HOST, "fixtures": FIXTURES, "inputs": INPUTS}
            c.next_id += 1
            c.send_raw(json.dumps({"jsonrpc": "2.0", "id": c.next_id, "method": "tools/call",
                                   "params": {"name": "remit_run", "arguments": args}}))
            question = c.reply()
            expect(question.get("method") == "elicitation/create" and "payroll.pay" in question["params"]["message"]
                   and "'amount' is untrusted" in question["params"]["message"], "the user is asked", question)
            # A response to another id changes nothing; the right one approves.
            c.send_raw(json.dumps({"jsonrpc": "2.0", "id": "remit-elicitation-0", "result": {"action": "accept",
                                   "content": {"decision": "deny"}}}))
            c.send_raw(json.dumps({"jsonrpc": "2.0", "id": question["id"],
                                   "result": {"action": "accept", "content": {"decision": "approve"}}}))
            done = c.reply()
            expect(done.get("id") == c.next_id, "then the reply", done)
            result = json.loads(done["result"]["content"][0]["text"])
            expect(result["status"] == "completed" and result["result"] == "paid r-1", "approved by the user", result)
            trace_by = [v["by"] for v in json.loads((pathlib.Path(state) / "approvals.json").read_text())["consumed"].values()]
            expect(trace_by == ["user via MCP elicitation"], "recorded as the user's approval", trace_by)

            # End of input while the user is asked: the reply says why, and the server ends.
            c.send_raw(json.dumps({"jsonrpc": "2.0", "id": 99, "method": "tools/call",
                                   "params": {"name": "remit_run", "arguments": args}}))
            again = c.reply()
            expect(again.get("method") == "elicitation/create", "asked again", again)
            c.proc.stdin.close()
            withdrawn = c.reply()
            expect(withdrawn.get("method") == "notifications/cancelled"
                   and withdrawn["params"]["requestId"] == again["id"], "the question is withdrawn", withdrawn)
            last = c.reply()
            paused = json.loads(last["result"]["content"][0]["text"])
            expect(last["id"] == 99 and paused["elicitation"]["outcome"] == "interrupted", "interrupted", paused)
            expect(c.proc.wait(timeout=15) == 0, "clean exit, at once")


def test_nothing_leaks_host_paths():
    with tempfile.TemporaryDirectory() as elsewhere, Client(cwd=elsewhere) as c:
        c.initialize()
        replies = [
            c.call("remit_run", {"program": PAY, "host": HOST, "fixtures": FIXTURES, "inputs": INPUTS})[0],
            c.call("remit_run_fixtures", {"program": NOTE, "host": HOST, "fixtures": "{}", "inputs": INPUTS})[0],
            c.call("remit_check", {"program": "program p\nfn main() { x }\n", "host": HOST})[0],
        ]
        text = json.dumps(replies)
        for secret in (str(REPO), elsewhere, tempfile.gettempdir() + "/", "remit-mcp-", "0x"):
            expect(secret not in text, f"no {secret!r} in replies", text)


def normalise(reply):
    """A reply with run tokens replaced, for comparing two servers."""
    return re.sub(r'(\\?"run_token\\?": \\?")[0-9a-f]{32}', r"\1TOKEN", json.dumps(reply))


SESSION = [
    ("initialize", {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    ("tools/list", {}),
    ("resources/list", {}),
    ("tools/call", {"name": "remit_guide", "arguments": {"section": "spec"}}),
    ("tools/call", {"name": "remit_check", "arguments": {"program": PAY, "host": HOST}}),
    ("tools/call", {"name": "remit_format", "arguments": {"program": PAY}}),
    ("tools/call", {"name": "remit_authority_diff", "arguments": {"old_program": NOTE, "new_program": PAY, "host": HOST}}),
    ("tools/call", {"name": "remit_examples", "arguments": {"name": "hello"}}),
    ("tools/call", {"name": "remit_run_fixtures", "arguments": {"program": PAY, "host": HOST, "fixtures": FIXTURES, "inputs": INPUTS}}),
    ("tools/call", {"name": "remit_run", "arguments": {"program": PAY, "host": HOST, "fixtures": FIXTURES, "inputs": INPUTS}}),
    ("no/such", {}),
]


def test_remit_mcp_is_remitvm_mcp():
    transcripts = []
    for tool in (REMITVM, REMIT):
        with Client(tool) as c:
            transcripts.append([normalise(c.request(m, p)) for m, p in SESSION])
    for a, b in zip(*transcripts):
        expect(a == b, "remit mcp answers as remitvm mcp", (a[:300], b[:300]))
    with Client(REMIT) as c:
        c.initialize()
        paused = c.tool("remit_run", {"program": PAY, "host": HOST, "fixtures": FIXTURES, "inputs": INPUTS})
        done = c.tool("remit_resume", {"run_token": paused["run_token"], "approve": True})
        expect(done["status"] == "completed", "remit mcp resumes", done)


def test_flags():
    r = subprocess.run([REMITVM, "mcp", "extra"], capture_output=True, timeout=30)
    expect(r.returncode == 2 and b"takes no arguments" in r.stderr, "positional", r)
    r = subprocess.run([REMIT, "mcp", "--bogus"], capture_output=True, timeout=30)
    expect(r.returncode == 2, "unknown flag", r)


def transcript():
    """The client and server lines of the transcript in docs/mcp.md."""
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- transcript -->\n```\n(.*?)```", text, re.S).group(1)
    lines = [line for line in block.splitlines() if line.strip()]
    return [(line[:2], line[2:]) for line in lines]


def test_docs_transcript_replays():
    token = None
    with Client() as c:
        for direction, line in transcript():
            expect(direction in ("> ", "< "), "each line starts with > or <", line)
            if direction == "> ":
                c.send_raw(line.replace("TOKEN", token or "TOKEN"))
                continue
            reply = c.reply()
            found = re.search(r'run_token\\?": \\?"([0-9a-f]{32})', json.dumps(reply))
            token = found.group(1) if found else token
            expect(json.loads(normalise(reply)) == json.loads(line), "the documented reply", (normalise(reply), line))
        expect(c.close() == 0, "clean exit")


def regenerate():
    """Rewrites the server lines of the transcript in docs/mcp.md from a real session."""
    token = None
    out = []
    with Client() as c:
        for direction, line in transcript():
            if direction != "> ":
                continue
            out.append("> " + line)
            c.send_raw(line.replace("TOKEN", token or "TOKEN"))
            if "id" not in json.loads(line):
                continue
            reply = c.reply()
            found = re.search(r'run_token\\?": \\?"([0-9a-f]{32})', json.dumps(reply))
            token = found.group(1) if found else token
            out.append("< " + json.dumps(json.loads(normalise(reply)), ensure_ascii=False, separators=(",", ":")))
    text = DOC.read_text(encoding="utf-8")
    marker = "<!-- transcript -->\n```\n"
    start = text.index(marker) + len(marker)
    end = text.index("```", start)
    DOC.write_text(text[:start] + "\n".join(out) + "\n" + text[end:], encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--regenerate"]:
        regenerate()
    else:
        main(globals())
