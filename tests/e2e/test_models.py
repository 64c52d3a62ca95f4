#!/usr/bin/env python3
"""Configured models end to end (docs/models.md): `remitvm run` of programs whose model calls go to
a [models."NAME"] table of policy.toml (or --model), against a local server speaking each provider's
wire format (tests/e2e/adapters/fake_http.py): the exact requests (headers, schema, system prompt,
repair turn), costs from usage in the trace, fixtures for the capabilities beside a model, no
fixtures for a model-only program, resume reopening the model, a missing key, and an API key that
appears in no file a run writes and in neither output stream."""
import json
import pathlib
import subprocess
import urllib.request

from harness import REMIT, REMITC, REMITVM, REPO, Workspace, expect, main, read_trace, run

ADAPTERS = pathlib.Path(__file__).resolve().parent / "adapters"
KEY = "sk-e2e-secret-7f3a9c2e41d8b6a0"

HOST = """\
capability notes.save(text: Str) -> Bool
  cost 0.001
model llm cost 0.01
"""

PROGRAM = """\
program brief
uses notes.save, llm
budget usd 0.1

type Mood = "upbeat" | "grim"
type Summary = { mood: Mood, line: Str }

agent Writer {
  model: llm
  system: "You write one short line."
  max_calls: 3
}

fn main(topic: Str) -> Str {
  let s = Writer.ask(Summary, "Summarise {topic}", context: topic) retry 1 else { mood: "grim", line: "none" }
  let saved = notes.save(s.line) else false
  return "{s.mood}: {s.line} ({saved})"
}
"""

MODEL_ONLY = """\
program tally
uses llm
budget usd 0.05

fn main(topic: Str) -> List[Int] max 3 {
  return llm.ask(List[Int] max 3, "Three numbers about {topic}") retry 1 else []
}
"""


def policy(base_url, provider="openai", extra=""):
    return f"""\
[grant."notes.save"]
[grant.llm]

[models.llm]
provider = "{provider}"
model = "test-model"
base_url = "{base_url}"
input_usd_per_mtok = 0.15
output_usd_per_mtok = 0.6
timeout_ms = 10000
{extra}"""


FIXTURES = json.dumps({"capabilities": {"notes.save": [{"output": True, "repeat": True}]}})


class FakeServer:
    """tests/e2e/adapters/fake_http.py on a free port."""

    def __enter__(self):
        self.proc = subprocess.Popen(["python3", str(ADAPTERS / "fake_http.py")], stdout=subprocess.PIPE)
        self.port = int(self.proc.stdout.readline().split()[0])
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait()

    def url(self, path=""):
        return f"http://127.0.0.1:{self.port}{path}"

    def script(self, behaviours):
        request = urllib.request.Request(self.url("/_script"), data=json.dumps(behaviours).encode(), method="POST")
        urllib.request.urlopen(request).read()

    def requests(self):
        return json.loads(urllib.request.urlopen(self.url("/_requests")).read())


def remitvm(ws, *args, env=None):
    environment = {"OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": KEY}
    environment.update(env or {})
    return run(REMITVM, *args, cwd=ws.path, env=environment)


def trace_of(ws, result):
    runs = sorted((ws.path / ".remit" / "runs").glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
    expect(runs, "a trace was written", result)
    return read_trace(runs[-1])


def calls(events):
    return [e for e in events if e["event"] == "call"]


def assert_no_key(ws, *results):
    """The key is in no file under the workspace (traces, approvals, locks) and in no output."""
    for path in ws.path.rglob("*"):
        if path.is_file():
            expect(KEY.encode() not in path.read_bytes(), f"the API key leaked into {path}")
            expect(KEY[:12].encode() not in path.read_bytes(), f"a part of the API key leaked into {path}")
    for r in results:
        expect(KEY not in r.out and KEY not in r.err, "the API key leaked into the output", r)


def test_openai_format_run_with_costs_from_usage():
    with FakeServer() as server, Workspace({"host.rmti": HOST, "brief.rmt": PROGRAM,
                                            "fixtures/run.json": FIXTURES}) as ws:
        ws.write("policy.toml", policy(server.url("/v1")))
        server.script([{"openai": {"answer": {"mood": "upbeat", "line": "tea is popular"},
                                   "usage": {"input": 120, "output": 30}}}])
        r = remitvm(ws, "run", "brief.rmt", "-i", "topic=tea")
        expect(r.code == 0, "the run completes", r)
        expect(json.loads(r.out) == "upbeat: tea is popular (true)", "the model's answer is used", r)
        [sent] = server.requests()
        expect(sent["path"] == "/v1/chat/completions", "Chat Completions", sent)
        expect(sent["headers"]["authorization"] == "Bearer " + KEY, "the key goes in the header", sent)
        body = json.loads(sent["body"])
        expect(body["model"] == "test-model", "the configured model", body)
        expect(body["messages"][0] == {"role": "system", "content": "You write one short line."},
               "the agent's system prompt in the system slot", body)
        expect(body["messages"][1]["content"].startswith("Summarise tea\n\n<context>\ntea\n</context>"),
               "the rendered prompt", body)
        schema = body["response_format"]["json_schema"]
        expect(schema["strict"] is True and schema["schema"]["required"] == ["mood", "line"], "the schema", body)
        expect(len(sent["headers"]["idempotency-key"]) == 32, "an idempotency key", sent)
        events = trace_of(ws, r)
        model_call, save_call = calls(events)
        expect(model_call["adapter"] == "model" and save_call["adapter"] == "fixture", "who performed what", events)
        expect(abs(model_call["cost_usd"] - 0.000036) < 1e-12, "the cost from usage", model_call)
        expect(model_call["meta"]["input_tokens"] == 120 and model_call["meta"]["provider"] == "openai",
               "usage in meta", model_call)
        expect(model_call["idempotency_key"] == sent["headers"]["idempotency-key"], "the key sent is the trace's",
               model_call)
        start = events[0]
        spec = start["adapters"][0]
        expect(spec["kind"] == "model" and spec["api_key_env"] == "OPENAI_API_KEY" and spec["name"] == "llm",
               "run_start records the model adapter by its key's variable", start)
        end = events[-1]
        expect(abs(end["spent_usd"] - 0.001036) < 1e-9, "spent: the model's usage plus the fixture's declared cost",
               end)
        assert_no_key(ws, r)


def test_anthropic_format_and_a_repair_turn():
    with FakeServer() as server, Workspace({"host.rmti": HOST, "brief.rmt": PROGRAM,
                                            "fixtures/run.json": FIXTURES}) as ws:
        ws.write("policy.toml", policy(server.url("/v1"), "anthropic"))
        server.script([{"anthropic": {"answer": {"mood": "happy", "line": "x"}, "usage": {"input": 10, "output": 5}}},
                       {"anthropic": {"answer": {"mood": "grim", "line": "rain"}, "usage": {"input": 20, "output": 5}}}])
        r = remitvm(ws, "run", "brief.rmt", "-i", "topic=rain")
        expect(r.code == 0 and json.loads(r.out) == "grim: rain (true)", "the retry's answer is used", r)
        first, second = server.requests()
        expect(first["headers"]["x-api-key"] == KEY and first["headers"]["anthropic-version"] == "2023-06-01",
               "Anthropic's headers", first)
        b1, b2 = json.loads(first["body"]), json.loads(second["body"])
        expect(b1["system"] == "You write one short line." and b1["tool_choice"]["name"] == "answer",
               "system slot and forced tool", b1)
        expect(len(b1["messages"]) == 1 and len(b2["messages"]) == 3, "the retry carries a repair turn", b2)
        expect(b2["messages"][1]["content"][0]["input"] == {"mood": "happy", "line": "x"},
               "the previous answer", b2)
        repair = b2["messages"][2]["content"][0]
        expect(repair["type"] == "tool_result" and "$.mood" in repair["content"] and "happy" in repair["content"],
               "the validation error", repair)
        expect(first["headers"]["idempotency-key"] != second["headers"]["idempotency-key"],
               "each attempt has its own idempotency key", second)
        events = trace_of(ws, r)
        invalid = [e for e in events if e["event"] == "invalid_output"]
        expect(len(invalid) == 1, "the first answer is recorded as invalid output", events)
        model_calls = [c for c in calls(events) if c["resource"] == "llm"]
        expect([c["attempt"] for c in model_calls] == [0, 1], "two attempts", model_calls)
        expect(abs(model_calls[0]["cost_usd"] - 0.0000045) < 1e-12, "the invalid answer's tokens are charged",
               model_calls)
        assert_no_key(ws, r)


def test_model_only_program_needs_no_fixtures_and_flag_configures_a_model():
    with FakeServer() as server, Workspace({"host.rmti": HOST, "tally.rmt": MODEL_ONLY}) as ws:
        ws.write("policy.toml", "[grant.llm]\n")
        # The model answers in the wrapped shape the request's schema asks for.
        server.script([{"openai": {"answer": {"value": [1, 2, 3]}}}])
        r = remitvm(ws, "run", "tally.rmt", "-i", "topic=x", "--model", f"llm=openai:small@{server.url('/v1')}")
        expect(r.code == 0 and json.loads(r.out) == [1, 2, 3], "runs without a fixtures file", r)
        [sent] = server.requests()
        body = json.loads(sent["body"])
        expect(body["model"] == "small", "the flag's model", body)
        expect(body["response_format"]["json_schema"]["schema"]["properties"]["value"]["type"] == "array",
               "a list is wrapped as {value: [...]}", body)
        events = trace_of(ws, r)
        [call] = calls(events)
        expect(call["cost_usd"] == 0.01, "no usage reported: the declared cost", call)
        expect(events[0]["mode"] == "model", "the mode of a model-only run", events[0])
        # Without a model table or flag, a fixtures file is needed as before.
        r = remitvm(ws, "run", "tally.rmt", "-i", "topic=x")
        expect(r.code == 2 and "no fixtures at" in r.err, "no fixtures, no configured model", r)
        bad = remitvm(ws, "run", "tally.rmt", "-i", "topic=x", "--model", "llm=gemini:x")
        expect(bad.code == 2 and "unknown provider 'gemini'" in bad.err, "a bad --model is a usage error", bad)


def test_missing_key_refuses_the_run_and_the_key_never_leaks():
    with FakeServer() as server, Workspace({"host.rmti": HOST, "brief.rmt": PROGRAM,
                                            "fixtures/run.json": FIXTURES}) as ws:
        ws.write("policy.toml", policy(server.url("/v1")))
        r = remitvm(ws, "run", "brief.rmt", "-i", "topic=tea", env={"OPENAI_API_KEY": None})
        expect(r.code == 2 and "the environment variable OPENAI_API_KEY is not set" in r.err,
               "a missing key refuses the run before it starts", r)
        expect(not (ws.path / ".remit" / "runs").exists() or not list((ws.path / ".remit" / "runs").iterdir()),
               "no trace", r)
        # A provider that echoes the key in its errors, on every attempt.
        echo = {"status": 401, "json": {"error": {"message": f"Incorrect API key provided: {KEY}"}}}
        server.script([echo, echo])
        r = remitvm(ws, "run", "brief.rmt", "-i", "topic=tea", "--json")
        expect(r.code == 0, "the call fails operationally and the else applies", r)
        events = trace_of(ws, r)
        failed = [c for c in calls(events) if c["resource"] == "llm"]
        expect(failed and all(c["status"] == "error" and "HTTP 401" in c["error"]["message"] for c in failed),
               "the provider's error is recorded", failed)
        expect(all(c["cost_usd"] == 0.01 for c in failed), "a failed call is charged its declared cost", failed)
        assert_no_key(ws, r)


def test_resume_reopens_the_recorded_model():
    host = HOST.replace("capability notes.save(text: Str) -> Bool\n",
                        "capability notes.save(text: Str) -> Bool\n  approval always\n")
    with FakeServer() as server, Workspace({"host.rmti": host, "brief.rmt": PROGRAM,
                                            "fixtures/run.json": FIXTURES}) as ws:
        ws.write("policy.toml", policy(server.url("/v1")))
        server.script([{"openai": {"answer": {"mood": "upbeat", "line": "ok"}, "usage": {"input": 1, "output": 1}}}])
        r = remitvm(ws, "run", "brief.rmt", "-i", "topic=tea")
        expect(r.code == 3, "paused for approval after the model call", r)
        run_id = trace_of(ws, r)[0]["run_id"]
        expect(remitvm(ws, "approve", run_id).code == 0, "approved")
        # The policy's model table is gone: the resume opens the recorded adapter, not the policy's.
        ws.write("policy.toml", '[grant."notes.save"]\n[grant.llm]\n')
        resumed = remitvm(ws, "resume", run_id)
        expect(resumed.code == 0 and json.loads(resumed.out) == "upbeat: ok (true)", "the resume completes", resumed)
        expect(len(server.requests()) == 1, "the model call was replayed, not sent again")
        events = trace_of(ws, resumed)
        expect(events[0]["adapters"][0]["kind"] == "model", "the resumed run records the model again", events[0])
        assert_no_key(ws, r, resumed)


def test_policy_models_are_validated():
    with Workspace({"host.rmti": HOST, "tally.rmt": MODEL_ONLY,
                    "policy.toml": '[grant.llm]\n[models.llm]\nprovider = "openai"\nmodel = "m"\nmax_token = 5\n'}) as ws:
        r = run(REMITC, "check", "tally.rmt", cwd=ws.path)
        expect(r.code == 1 and "policy.toml:5:1: error[E0504]: unknown key 'max_token' in [models.llm]" in r.err,
               "E0504 with file and line", r)
        ws.write("policy.toml", '[grant.llm]\n[models.lm]\nprovider = "openai"\nmodel = "m"\n')
        r = run(REMITC, "check", "tally.rmt", cwd=ws.path)
        expect(r.code == 1 and "error[E0505]: policy configures model 'lm', which the host does not declare" in r.err,
               "E0505 for a model the host does not declare", r)


def test_live_models_example_offline():
    """examples/live_models runs as shipped against a local server standing in for each provider,
    and its run.sh skips each provider whose key is not set."""
    example = REPO / "examples" / "live_models"
    with FakeServer() as server, Workspace() as ws:
        for provider, name in (("openai", "policy.toml"), ("anthropic", "policy.anthropic.toml")):
            text = (example / name).read_text()
            ws.write(f"policy.{provider}.toml", text + f'base_url = "{server.url("/v1")}"\n')
            server.script([{provider: {"answer": {"mood": "upbeat", "facts": ["a", "b"]},
                                       "usage": {"input": 50, "output": 20}}}])
            r = remitvm(ws, "run", example / "live_models.rmt", "--policy", ws.path / f"policy.{provider}.toml",
                        "--host", example / "host.rmti", "-i", "topic=otters")
            expect(r.code == 0 and json.loads(r.out) == "upbeat: 2 fact(s) about otters", f"{provider} answers", r)
            [sent] = server.requests()
            expect(sent["path"] == ("/v1/chat/completions" if provider == "openai" else "/v1/messages"),
                   "the provider's endpoint", sent)
        skipped = run("bash", example / "run.sh", env={"OPENAI_API_KEY": None, "ANTHROPIC_API_KEY": None,
                                                        "REMITVM": REMITVM})
        expect(skipped.code == 0 and "skipped openai" in skipped.out and "skipped anthropic" in skipped.out,
               "run.sh skips without keys", skipped)
        assert_no_key(ws, r)


def test_schema_prints_each_model_calls_schema():
    with Workspace({"host.rmti": HOST, "brief.rmt": PROGRAM, "tally.rmt": MODEL_ONLY}) as ws:
        r = run(REMITC, "schema", "brief.rmt", cwd=ws.path)
        expect(r.code == 0, "schema of a program", r)
        out = json.loads(r.out)
        [site] = out["sites"]
        expect(site["site"] == "main#0" and site["agent"] == "Writer" and site["output_type"] == "Summary",
               "the model call site", out)
        expect(site["schema"] == {"type": "object",
                                  "properties": {"mood": {"type": "string", "enum": ["upbeat", "grim"]},
                                                 "line": {"type": "string"}},
                                  "required": ["mood", "line"], "additionalProperties": False},
               "the schema an adapter receives", site)
        one = run(REMITC, "schema", "tally.rmt", "main#0", cwd=ws.path)
        expect(one.code == 0 and json.loads(one.out) == {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
               "one site's bare schema", one)
        missing = run(REMITC, "schema", "tally.rmt", "main#9", cwd=ws.path)
        expect(missing.code == 2 and "its model call sites are main#0" in missing.err, "an unknown site", missing)
        manifest = json.loads(run(REMITC, "manifest", "brief.rmt", cwd=ws.path).out)
        calls_by_resource = {c["resource"]: c for c in manifest["call_sites"]}
        expect(calls_by_resource["llm"]["output_type"] == "Summary" and "output_type" not in calls_by_resource["notes.save"],
               "the manifest's model call sites carry the output type", manifest)


def ask_policy(server):
    """The program's policy, whose [models.llm] `remit ask --model llm` uses too (with its prices)."""
    return policy(server.url("/v1"))

ASK_EDIT = MODEL_ONLY.replace('"Three numbers about {topic}"', '"Exactly three numbers about {topic}"')
ASK_WIDER = """program tally
uses llm, notes.save
budget usd 0.05

fn main(topic: Str) -> List[Int] max 3 {
  let saved = notes.save(topic) else false
  return llm.ask(List[Int] max 3, "Three numbers about {topic}") retry 1 else []
}
"""


def proposal(program, refused=False, explanation="done"):
    return {"openai": {"answer": {"program": program, "explanation": explanation, "refused": refused},
                       "usage": {"input": 2000, "output": 300}}}


def remit_ask(ws, *args):
    return run(REMIT, "ask", *args, "--model", "llm", cwd=ws.path, env={"OPENAI_API_KEY": KEY})


def test_ask_repairs_prints_diffs_and_applies():
    with FakeServer() as server, Workspace({"host.rmti": HOST, "tally.rmt": MODEL_ONLY}) as ws:
        ws.write("policy.toml", ask_policy(server))
        broken = MODEL_ONLY.replace("return llm.ask", "return llm.ask(")
        server.script([proposal(broken), proposal(ASK_EDIT, explanation="asked for exactly three")])
        r = remit_ask(ws, "ask for exactly three numbers", "tally.rmt")
        expect(r.code == 0, "a dry run", r)
        expect("--- a/tally.rmt\n+++ b/tally.rmt\n" in r.out and
               '-  return llm.ask(List[Int] max 3, "Three numbers about {topic}") retry 1 else []' in r.out and
               '+  return llm.ask(List[Int] max 3, "Exactly three numbers about {topic}") retry 1 else []' in r.out,
               "the unified diff", r)
        expect("-- round 0: 1 error(s)" in r.out and "-- round 1: 0 error(s): asked for exactly three" in r.out,
               "one repair round", r)
        expect("model cost $0.00096\n" in r.out, "the cost of both rounds, with the digits it needs", r)
        expect("no authority widening" in r.out and "dry run: re-run with --apply" in r.out, "not written", r)
        expect(ws.read("tally.rmt") == MODEL_ONLY, "the file is unchanged", r)
        first, second = server.requests()
        b1, b2 = json.loads(first["body"]), json.loads(second["body"])
        expect(b1["response_format"]["json_schema"]["schema"]["required"] == ["program", "explanation", "refused"],
               "the proposal schema", b1)
        expect("Change request: ask for exactly three numbers" in b1["messages"][1]["content"] and
               "<host>" in b1["messages"][1]["content"], "the prompt has the request and the host", b1)
        expect("The checker rejected it" in b2["messages"][1]["content"] and "error[E" in b2["messages"][1]["content"],
               "the repair round carries the checker's errors", b2)
        server.script([proposal(ASK_EDIT)])
        applied = remit_ask(ws, "ask for exactly three numbers", "tally.rmt", "--apply")
        expect(applied.code == 0 and "wrote tally.rmt" in applied.out and ws.read("tally.rmt") == ASK_EDIT,
               "--apply writes the checked proposal", applied)
        assert_no_key(ws, r, applied)


def test_ask_refuses_widening_and_reports_declines_and_failures():
    with FakeServer() as server, Workspace({"host.rmti": HOST, "tally.rmt": MODEL_ONLY}) as ws:
        ws.write("policy.toml", ask_policy(server))
        server.script([proposal(ASK_WIDER)])
        r = remit_ask(ws, "save the topic", "tally.rmt", "--apply")
        expect(r.code == 4 and "authority WIDENED by this change" in r.out and "NEW resource 'notes.save'" in r.out,
               "a widening change is refused with exit 4", r)
        expect(ws.read("tally.rmt") == MODEL_ONLY, "nothing written", r)
        expect("\x1b[" not in r.out, "no colour when stdout is not a terminal", r)
        server.script([proposal(ASK_WIDER)])
        coloured = remit_ask(ws, "save the topic", "tally.rmt", "--color", "always")
        expect(coloured.code == 0 and "\x1b[1;31mauthority WIDENED by this change:\x1b[0m" in coloured.out and
               "\x1b[1;31m+\x1b[0m NEW resource 'notes.save'" in coloured.out and
               "\x1b[1;32m+  let saved = notes.save(topic) else false\x1b[0m" in coloured.out,
               "--color always colours the diff and the widening as `diff` does", coloured)
        server.script([proposal(ASK_WIDER)])
        allowed = remit_ask(ws, "save the topic", "tally.rmt", "--apply", "--allow-widening")
        expect(allowed.code == 0 and ws.read("tally.rmt") == ASK_WIDER, "--allow-widening writes it", allowed)
        ws.write("tally.rmt", MODEL_ONLY)
        server.script([proposal(MODEL_ONLY, refused=True, explanation="that needs a capability the host lacks")])
        declined = remit_ask(ws, "send an email", "tally.rmt", "--apply")
        expect(declined.code == 5 and "the model declined the change" in declined.out and
               "(no textual change)" in declined.out, "exit 5 when the model refuses", declined)
        bad = MODEL_ONLY.replace("fn main", "fn main(")
        server.script([proposal(bad), proposal(bad), proposal(bad)])
        failing = remit_ask(ws, "anything", "tally.rmt", "--apply")
        expect(failing.code == 1 and "proposal still fails the checker after 3 round(s); nothing written" in failing.err,
               "exit 1 after two repair rounds", failing)
        expect(len(server.requests()) == 7, "1 + 1 (coloured) + 1 + 1 + 3 requests")
        expect(ws.read("tally.rmt") == MODEL_ONLY, "nothing written", failing)
        server.script([{"status": 401, "json": {"error": {"message": "Incorrect API key provided: " + KEY}}}])
        denied = remit_ask(ws, "anything", "tally.rmt")
        expect(denied.code == 1 and "HTTP 401" in denied.err, "the provider's error", denied)
        assert_no_key(ws, r, allowed, declined, failing, denied)


if __name__ == "__main__":
    main(globals())
