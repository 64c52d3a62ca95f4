#!/usr/bin/env python3
"""MCP servers as capabilities (docs/adapters.md "MCP servers as capabilities", docs/import.md),
against the official reference servers from npm — @modelcontextprotocol/server-filesystem under a
temporary root, server-memory and server-everything, pinned in tests/mcp_servers/package-lock.json
and installed by scripts/install-deps — and our hostile server (tests/e2e/adapters/hostile_mcp.py):
`remitc import mcp` drafts a host interface that formats and checks, a program written against it
runs live through `remitvm run --adapter mcp:…`, a write pauses for approval and is performed once
after it, the run resumes with the servers it recorded and replays without them; two servers serve
one run; a server that hangs, exits or cannot start is an operational failure the program's `else`
handles, with the server's stderr in the state directory's log, never on the program's output."""
import hashlib
import json
import os
import shlex
import socket
import subprocess
import sys
import time

from harness import REMITC, REMITVM, REPO, Workspace, expect, main, read_trace, run, run_vm_json as run_json
from test_models import FakeServer

SERVERS = REPO / "tests" / "mcp_servers" / "node_modules" / ".bin"
HOSTILE = REPO / "tests" / "e2e" / "adapters" / "hostile_mcp.py"


def server(name, *args):
    """The command line that starts a reference server with node (no npx: nothing is downloaded)."""
    path = SERVERS / f"mcp-server-{name}"
    if not path.exists():
        sys.exit(f"FAIL: {path} is missing; run scripts/install-deps (npm ci in tests/mcp_servers)")
    return shlex.join(["node", str(path), *map(str, args)])


HOSTILE_CMD = shlex.join([sys.executable, str(HOSTILE)])


NOTES = """program notes
uses fs.list_directory, fs.read_text_file, fs.write_file

fn main(root: Str) -> Str {
  let listing = fs.list_directory(root)
  let note = fs.read_text_file("{root}/in.txt")
  let written = fs.write_file("{root}/out.txt", "summary: " + note.content)
  return "{listing.content} | {written.content}"
}
"""

NOTES_POLICY = """[grant."fs.list_directory"]
[grant."fs.read_text_file"]
[grant."fs.write_file"]
max_calls = 1
"""


def test_the_filesystem_server_imported_checked_run_approved_resumed_and_replayed():
    with Workspace({"notes.rmt": NOTES, "policy.toml": NOTES_POLICY, "root/in.txt": "remember the milk"}) as ws:
        root = ws.path / "root"
        command = server("filesystem", root)
        imported = run(REMITC, "import", "mcp", command, "--as", "fs", "-o", "host.rmti", cwd=ws.path)
        expect(imported.code == 0, "import succeeds", imported)
        expect("imported 14 of 14 tool(s) from MCP server 'secure-filesystem-server' as fs.* into host.rmti"
               in imported.err, "the summary names the server", imported)
        expect(imported.out == "", "with -o nothing goes to stdout", imported)
        host = ws.read("host.rmti")
        for line in ["capability fs.read_text_file(path: Str) -> ReadTextFileResult\n  idempotent\n",
                     "capability fs.write_file(path: Str, content: Str) -> WriteFileResult\n",
                     "capability fs.list_directory(path: Str) -> ListDirectoryResult\n",
                     "type ReadTextFileResult = { content: Str }\n",
                     "# optional, never sent (Remit parameters are all required): tail (number), head (number)\n",
                     "# TODO(operator): this is a draft.",
                     "# destructive, says the server (destructiveHint): consider `approval always`\n"]:
            expect(line in host, f"the draft has {line!r}", host)
        fmt = run(REMITC, "fmt", "--check", "host.rmti", cwd=ws.path)
        expect(fmt.code == 0, "the draft is formatted", fmt)
        # The operator follows the TODO: file text is untrusted, and every write is approved.
        host = host.replace("capability fs.read_text_file(path: Str) -> ReadTextFileResult\n  idempotent\n",
                            "capability fs.read_text_file(path: Str) -> ReadTextFileResult\n  tags untrusted\n"
                            "  idempotent\n")
        host = host.replace("capability fs.write_file(path: Str, content: Str) -> WriteFileResult\n  idempotent\n",
                            "capability fs.write_file(path: Str, content: Str) -> WriteFileResult\n  idempotent\n"
                            "  approval always\n")
        ws.write("host.rmti", host)
        expect(run(REMITC, "fmt", "--check", "host.rmti", cwd=ws.path).code == 0, "still formatted")
        checked = run(REMITC, "check", "notes.rmt", cwd=ws.path)
        expect(checked.code == 0, "a program written against the draft checks", checked)
        expect("fs.write_file" in checked.out and "approval" in checked.out, "the manifest shows the approval", checked)

        # Live: the reads happen, the write pauses for approval.
        flags = ["--adapter", f"mcp.fs:{command}", "--state-dir", "st"]
        first, paused = run_json("run", "notes.rmt", "-i", f"root={root}", *flags, cwd=ws.path)
        expect(first.code == 3 and paused["status"] == "approval_required", "the write pauses", first)
        expect(paused["pending"]["resource"] == "fs.write_file", "the pending call is the write", first)
        expect(paused["pending"]["args"] == {"path": f"{root}/out.txt", "content": "summary: remember the milk"},
               "the approver sees the file text the program read", first)
        expect(not (root / "out.txt").exists(), "nothing was written before the approval")
        expect("Secure MCP Filesystem Server" not in first.err, "the server's stderr is not on ours", first)
        run_id = paused["run_id"]
        log = ws.read(f"st/logs/{run_id}.mcp.log")
        expect("Secure MCP Filesystem Server running on stdio" in log, "it is in the run's log", log)
        start = read_trace(ws.path / "st" / "runs" / f"{run_id}.jsonl")[0]
        expect(start["adapters"] == [{"kind": "mcp", "command": command, "cwd": str(ws.path), "namespace": "fs"}],
               "run_start records the server", start)
        expect(start["mode"] == "mcp", "and the mode", start)

        approved = run(REMITVM, "approve", paused["pending"]["digest"], "--state-dir", "st", cwd=ws.path)
        expect(approved.code == 0, "approve", approved)
        # Resumed from elsewhere without adapter flags: the recorded server is started again.
        second, done = run_json("resume", run_id, "--state-dir", str(ws.path / "st"), cwd=root)
        expect(second.code == 0 and done["status"] == "completed", "the resume completes", second)
        expect("[FILE] in.txt" in done["result"] and f"Successfully wrote to {root}/out.txt" in done["result"],
               "the result holds both servers' answers", second)
        expect((root / "out.txt").read_text() == "summary: remember the milk", "the write happened")

        # Calls the servers performed, in both traces (a resume records what it answered from the old
        # trace as `replayed`).
        events = [e for trace in (ws.path / "st" / "runs").glob("*.jsonl") for e in read_trace(trace)
                  if e["event"] == "call" and not e.get("replayed")]
        writes = [e for e in events if e["resource"] == "fs.write_file"]
        expect(len(writes) == 1 and writes[0]["status"] == "ok", "the write was performed exactly once", writes)
        expect(writes[0]["adapter"] == "mcp" and writes[0]["meta"] == {"mcp_server": "secure-filesystem-server",
                                                                        "mcp_tool": "write_file"},
               "the trace names the server and the tool", writes)
        reads = [e for e in events if e["resource"] == "fs.read_text_file"]
        expect(len(reads) == 1 and reads[0]["result_tags"] == ["untrusted"], "the read was not repeated", reads)

        replayed = run(REMITVM, "replay", done["run_id"], "--state-dir", "st", cwd=ws.path)
        expect(replayed.code == 0 and "replay ok: 3 recorded call(s) reproduced" in replayed.err,
               "the run replays from its trace, no server started", replayed)


MEMORY_AND_EVERYTHING = """program kb
uses kg.create_entities, kg.search_nodes, ev.get_sum, ev.get_structured_content, ev.echo

fn main(name: Str) -> Str {
  let sum = ev.get_sum(2.0, 3.5)
  let weather = ev.get_structured_content("Chicago")
  let created = kg.create_entities([{ name: name, entityType: "city", observations: [sum, weather.conditions] }])
  let found = kg.search_nodes(name)
  let echoed = ev.echo("found {len(found.entities)}, created {len(created.entities)}")
  return "{sum} / {echoed}"
}
"""


def test_two_reference_servers_serve_one_run():
    with Workspace({"kb.rmt": MEMORY_AND_EVERYTHING}) as ws:
        memory, everything = server("memory"), server("everything", "stdio")
        env = dict(os.environ, MEMORY_FILE_PATH=str(ws.path / "memory.jsonl"))
        drafts = []
        for command, ns in ((memory, "kg"), (everything, "ev")):
            imported = run(REMITC, "import", "mcp", command, "--as", ns, cwd=ws.path)
            expect(imported.code == 0, f"import {ns}", imported)
            drafts.append(imported.out)
        expect("capability kg.create_entities(entities: List[Entity]) -> CreateEntitiesResult\n" in drafts[0],
               "records from the input schema", drafts[0])
        expect("type Entity = { name: Str, entityType: Str, observations: List[Str] }\n" in drafts[0],
               "the entity record, shared", drafts[0])
        expect("# the service names it 'get-sum'\n" in drafts[1] and "capability ev.get_sum(a: Float, b: Float) -> Str\n"
               in drafts[1], "dashed names become identifiers", drafts[1])
        expect('capability ev.get_structured_content(location: "New York" | "Chicago" | "Los Angeles") -> '
               "GetStructuredContentResult\n" in drafts[1], "enums of strings", drafts[1])
        ws.write("host.rmti", drafts[0] + "\n" + drafts[1])
        expect(run(REMITC, "fmt", "--check", "host.rmti", cwd=ws.path).code == 0, "the two drafts together are formatted")
        checked = run(REMITC, "check", "kb.rmt", cwd=ws.path)
        expect(checked.code == 0, "a program using both checks", checked)

        # Unscoped: each call goes to the server that has the tool.
        result, done = run_json("run", "kb.rmt", "--allow-all", "-i", "name=Chicago", "--state-dir", "st",
                                "--adapter", f"mcp:{memory}", "--adapter", f"mcp:{everything}", cwd=ws.path, env=env)
        expect(result.code == 0, "the run completes", result)
        expect(done["result"] == "The sum of 2 and 3.5 is 5.5. / Echo: found 1, created 1", "both servers answered",
               result)
        events = read_trace(ws.path / "st" / "runs" / f"{done['run_id']}.jsonl")
        servers = {e["resource"]: e["meta"]["mcp_server"] for e in events if e["event"] == "call"}
        expect(servers == {"ev.get_sum": "mcp-servers/everything", "ev.get_structured_content": "mcp-servers/everything",
                           "kg.create_entities": "memory-server", "kg.search_nodes": "memory-server",
                           "ev.echo": "mcp-servers/everything"}, "each call went to the server with the tool", servers)
        keys = [e["idempotency_key"] for e in events if e["event"] == "call"]
        expect(len(set(keys)) == 5, "every call had its own idempotency key", keys)
        saved = (ws.path / "memory.jsonl").read_text()
        expect('"name":"Chicago"' in saved and "The sum of 2 and 3.5 is 5.5." in saved, "the memory server stored it",
               saved)


MIXED = """program mixed
uses llm, ev.echo
budget usd 0.1

fn main(topic: Str) -> Str {
  let line = llm.ask(Str, "One line about {topic}") else "none"
  return ev.echo(line)
}
"""


def test_a_configured_model_and_a_server_in_one_run_paused_and_resumed():
    with FakeServer() as model, Workspace({"mixed.rmt": MIXED}) as ws:
        everything = server("everything", "stdio")
        imported = run(REMITC, "import", "mcp", everything, "--as", "ev", cwd=ws.path)
        expect(imported.code == 0, "import", imported)
        ws.write("host.rmti", imported.out + "\nmodel llm cost 0.01\n")
        ws.write("policy.toml", '[grant.llm]\n\n[grant."ev.echo"]\napproval = "always"\n')
        model.script([{"openai": {"answer": {"value": "tea is hot"}}}])
        env = {"OPENAI_API_KEY": "e2e-model-key"}  # the key variable of a model given by --model
        flags = ["--model", f"llm=openai:small@{model.url('/v1')}", "--adapter", f"mcp.ev:{everything}"]
        first, paused = run_json("run", "mixed.rmt", "-i", "topic=tea", "--state-dir", "st", *flags, cwd=ws.path,
                                 env=env)
        expect(first.code == 3 and paused["pending"]["resource"] == "ev.echo", "the server's call pauses", first)
        expect(paused["pending"]["args"] == {"message": "tea is hot"}, "with the model's answer", first)
        start = read_trace(ws.path / "st" / "runs" / f"{paused['run_id']}.jsonl")[0]
        kinds = [spec["kind"] for spec in start["adapters"]]
        expect(kinds == ["model", "mcp"] and start["adapters"][1]["namespace"] == "ev" and start["mode"] == "mcp",
               "run_start records the model, then the server, and no fixtures", start)
        approved = run(REMITVM, "approve", paused["pending"]["digest"], "--state-dir", "st", cwd=ws.path)
        expect(approved.code == 0, "approve", approved)
        second, done = run_json("resume", paused["run_id"], "--state-dir", "st", cwd=ws.path, env=env)
        expect(second.code == 0 and done["result"] == "Echo: tea is hot", "the resume reopens both", second)
        expect(len(model.requests()) == 1, "the model was asked once: the resume answered it from the trace")
        events = read_trace(ws.path / "st" / "runs" / f"{done['run_id']}.jsonl")
        performed = {e["resource"]: e["adapter"] for e in events if e["event"] == "call" and not e.get("replayed")}
        expect(performed == {"ev.echo": "mcp"}, "the resume performed only the approved call, on the server", events)
        expect(events[0]["adapters"] == start["adapters"], "the resumed run records the same adapters", events[0])


HOSTILE_PROGRAM = """program brave
uses h.hang, h.exit_now, h.echo, h.get_sum, h.keywords

fn main() -> Str {
  let a = h.hang() timeout 1s else "gave up waiting"
  let b = h.exit_now() else "it died"
  let c = h.echo("still here")
  let d = h.get_sum(1.0, 2.0)
  let e = h.keywords(3.0, "kind")
  return "{a}; {b}; {c.text}; {d}; {e.limit} {e.type}"
}
"""


def test_a_hostile_server_fails_calls_operationally_and_never_hangs_a_run():
    with Workspace({"brave.rmt": HOSTILE_PROGRAM}) as ws:
        imported = run(REMITC, "import", "mcp", HOSTILE_CMD, "-o", "host.rmti", cwd=ws.path)
        expect(imported.code == 0, "import the hostile server", imported)
        host = ws.read("host.rmti")
        expect("capability hostile.keywords(limit_: Float, type_: Str) -> Str\n" in host,
               "keywords become limit_ and type_ (the namespace from the server's name)", host)
        # The program says `h`: import again with --as.
        imported = run(REMITC, "import", "mcp", HOSTILE_CMD, "--as", "h", "-o", "host.rmti", cwd=ws.path)
        host = ws.read("host.rmti").replace("capability h.keywords(limit_: Float, type_: Str) -> Str",
                                            "capability h.keywords(limit_: Float, type_: Str) -> { limit: Float, type: Str }")
        ws.write("host.rmti", host)
        checked = run(REMITC, "check", "brave.rmt", cwd=ws.path)
        expect(checked.code == 0, "the program checks", checked)
        result, done = run_json("run", "brave.rmt", "--allow-all", "--state-dir", "st",
                                "--adapter", f"mcp:{HOSTILE_CMD}", cwd=ws.path, timeout=60)
        expect(result.code == 0, "the run completes", result)
        expect(done["result"] == "gave up waiting; it died; still here; 3.0; 3.0 kind",
               "a hang and an exit took their else; the server was started again", result)
        expect("hostile_mcp: exiting" not in result.err, "the server's stderr is not ours", result)
        events = read_trace(ws.path / "st" / "runs" / f"{done['run_id']}.jsonl")
        errors = [e["error"] for e in events if e["event"] == "call" and e["status"] == "error"]
        expect(errors[0]["code"] == "R0503" and "did not answer tools/call 'hang' within 1000 ms" in errors[0]["message"],
               "the hang is a timeout", errors)
        expect(errors[1]["code"] == "R0501" and "during tools/call 'exit_now' (exit status 3); its last stderr line: "
               "hostile_mcp: exiting in the middle of a call" in errors[1]["message"], "the exit is a failure", errors)
        expect("hostile_mcp: exiting in the middle of a call" in ws.read(f"st/logs/{done['run_id']}.mcp.log"),
               "the stderr is in the log")


def test_servers_that_cannot_start_and_bad_flags():
    program = "program p\nuses h.echo\n\nfn main() -> Str {\n  let c = h.echo(\"x\") else { text: \"no server\" }\n" \
              "  return c.text\n}\n"
    with Workspace({"p.rmt": program, "host.rmti": "capability h.echo(text: Str) -> { text: Str }\n"}) as ws:
        # A server that exits at once: the call fails with its stderr line, the else applies.
        result, done = run_json("run", "p.rmt", "--allow-all", "--state-dir", "st",
                                "--adapter", f"mcp:{HOSTILE_CMD} --exit-at-start", cwd=ws.path)
        expect(result.code == 0 and done["result"] == "no server", "the else applies", result)
        events = read_trace(ws.path / "st" / "runs" / f"{done['run_id']}.jsonl")
        failure = [e for e in events if e["event"] == "call"][0]["error"]["message"]
        expect("before answering initialize (exit status 1); its last stderr line: hostile_mcp: cannot open the "
               "database" in failure, "the message says why", failure)
        # One that never answers initialize, bounded by the policy's [mcp] startup_timeout_ms.
        ws.write("policy.toml", '[grant."h.echo"]\n\n[mcp]\nstartup_timeout_ms = 1500\n')
        result, done = run_json("run", "p.rmt", "--state-dir", "st", "--adapter", f"mcp:{HOSTILE_CMD} --hang-init",
                                cwd=ws.path)
        expect(result.code == 0 and done["result"] == "no server", "the else applies", result)
        # The policy's map: h.echo performed by the tool `text_plain`... whose text is not JSON.
        ws.write("policy.toml", '[grant."h.echo"]\n\n[mcp.tools]\n"h.echo" = "text_plain"\n')
        result, done = run_json("run", "p.rmt", "--state-dir", "st", "--adapter", f"mcp:{HOSTILE_CMD}", cwd=ws.path)
        expect(done["result"] == "no server", "mapped to another tool, whose answer does not fit", result)
        ws.write("policy.toml", '[grant."h.echo"]\n\n[mcp.tools]\n"h.ech" = "echo"\n')
        checked = run(REMITC, "check", "p.rmt", cwd=ws.path)
        expect(checked.code == 1 and "E0505" in checked.err and "policy maps 'h.ech' to MCP tool 'echo'" in checked.err,
               "a map of an undeclared capability is E0505", checked)

        for flag, message in [
            ("mcp:no-such-mcp-server --stdio", "--adapter mcp: MCP server program 'no-such-mcp-server' not found on PATH"),
            ("mcp.1x:node s.js", "write an MCP server for one namespace as mcp.NS:"),
            ("mcp:", "mcp: needs the command that starts the server"),
            ("mcp:node a.js | tee", "it is run without a shell"),
        ]:
            bad = run(REMITVM, "run", "p.rmt", "--allow-all", "--state-dir", "bad", "--adapter", flag, cwd=ws.path)
            expect(bad.code == 2 and message in bad.err, f"--adapter {flag!r} is refused", bad)
        expect(not (ws.path / "bad" / "runs").exists(), "a refused run leaves no trace")

        # remitc import: failures are clear, and nothing is written.
        for args, code, message in [
            (["mcp", f"{HOSTILE_CMD} --exit-at-start"], 1, "its last stderr line: hostile_mcp: cannot open the database"),
            (["mcp", f"{HOSTILE_CMD} --hang-init", "--timeout-ms", "1500"], 1, "did not answer initialize within 1500 ms"),
            (["mcp", f"{HOSTILE_CMD} --no-tools"], 1, "lists no tools to import"),
            (["mcp", HOSTILE_CMD, "--as", "match"], 2, "--as 'match' is not a namespace"),
            (["mcp"], 2, "import mcp needs exactly one command"),
            (["graphql", "schema.graphql"], 2, "unknown import subcommand 'graphql'; it is one of mcp|openapi"),
            (["mcp", "no-such-mcp-server"], 2, "MCP server program 'no-such-mcp-server' not found on PATH"),
        ]:
            bad = run(REMITC, "import", *args, "-o", "out.rmti", cwd=ws.path)
            expect(bad.code == code and message in bad.err, f"import {args} fails clearly", bad)
            expect(not (ws.path / "out.rmti").exists(), "nothing is written")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Background:
    """A server process for one test, stopped (and reaped) when the test ends; `wait_for` reads its
    stderr until a line contains a text."""

    def __init__(self, argv, env=None, cwd=None):
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd,
                                     text=True)

    def wait_for(self, text, seconds=30):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if text in line:
                return line
            if not line and self.proc.poll() is not None:
                break
        raise AssertionError(f"the server did not print {text!r}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


HTTP_PROGRAM = """program weather
uses ev.get_structured_content, ev.echo

fn main(city: "New York" | "Chicago" | "Los Angeles") -> Str {
  let w = ev.get_structured_content(city)
  let e = ev.echo("{w.conditions} in {city}")
  return e
}
"""

FORMAT_PROGRAM = """program tidy
uses rm.remit_format

fn main(src: Str) -> Str {
  return rm.remit_format(src) else "no server"
}
"""


def test_servers_over_streamable_http():
    port = free_port()
    everything = SERVERS / "mcp-server-everything"
    with Workspace({"weather.rmt": HTTP_PROGRAM}) as ws, \
            Background(["node", str(everything), "streamableHttp"], env=dict(os.environ, PORT=str(port))) as server:
        server.wait_for("listening on port")
        url = f"http://127.0.0.1:{port}/mcp"
        imported = run(REMITC, "import", "mcp", url, "--as", "ev", "-o", "host.rmti", cwd=ws.path)
        expect(imported.code == 0, "import over HTTP", imported)
        host = ws.read("host.rmti")
        expect(f"# Server: {url}\n" in host and f'--adapter "mcp.ev+{url}"' in host, "the header names the URL", host)
        result, done = run_json("run", "weather.rmt", "--allow-all", "-i", 'city="Chicago"', "--state-dir", "st",
                                "--adapter", f"mcp.ev+{url}", cwd=ws.path)
        # The server's weather is random; its shape is not.
        expect(result.code == 0 and done["result"].startswith("Echo: ") and done["result"].endswith(" in Chicago"),
               "the run used the HTTP server", result)
        start = read_trace(ws.path / "st" / "runs" / f"{done['run_id']}.jsonl")[0]
        expect(start["adapters"] == [{"kind": "mcp", "url": url, "namespace": "ev"}], "run_start records the URL", start)

    # Our own server over HTTP, which wants a bearer token.
    keys = json.dumps({"keys": [{"id": "t", "sha256": hashlib.sha256(b"e2e-secret-token").hexdigest(),
                                 "monthly_limit": 1000}]})
    with Workspace({"tidy.rmt": FORMAT_PROGRAM, "keys.json": keys}) as ws, \
            Background([REMITVM, "mcp", "--http", "--port", "0", "--keys", "keys.json"], cwd=ws.path) as server:
        url = server.wait_for("listening on").split("listening on ")[1].strip()
        env = dict(os.environ, REMIT_E2E_TOKEN="e2e-secret-token")
        refused = run(REMITC, "import", "mcp", url, cwd=ws.path)
        expect(refused.code == 1 and "refused the request with HTTP 401" in refused.err, "no token, no import", refused)
        imported = run(REMITC, "import", "mcp", url, "--as", "rm", "--token-env", "REMIT_E2E_TOKEN", "-o", "host.rmti",
                       cwd=ws.path, env=env)
        expect(imported.code == 0 and "capability rm.remit_format(program_: Str) -> Str\n" in ws.read("host.rmti"),
               "a parameter named like a keyword gets a _", imported)
        expect("not imported: 'remit_run': parameter 'fixtures' is a union of types (object or string)" in imported.err,
               "what cannot be expressed is reported", imported)
        flag = f"mcp.rm+{url} token_env=REMIT_E2E_TOKEN"
        result, done = run_json("run", "tidy.rmt", "--allow-all", "-i", "src=program x\nfn main() -> Int {\nreturn   1\n}",
                                "--state-dir", "st", "--adapter", flag, cwd=ws.path, env=env)
        expect(result.code == 0, "the run completes", result)
        expect(json.loads(done["result"])["program"] == "program x\n\nfn main() -> Int {\n  return 1\n}\n",
               "remit_format answered through the adapter", result)
        trace = (ws.path / "st" / "runs" / f"{done['run_id']}.jsonl").read_text()
        expect("e2e-secret-token" not in trace and '"token_env":"REMIT_E2E_TOKEN"' in trace,
               "the trace names the variable, never the token", trace)
        missing = run(REMITVM, "run", "tidy.rmt", "--allow-all", "-i", "src=x", "--state-dir", "st", "--adapter", flag,
                      cwd=ws.path)
        expect(missing.code == 2 and "the environment variable REMIT_E2E_TOKEN (the bearer token for" in missing.err,
               "a missing token refuses the run before it starts", missing)
        wrong = dict(os.environ, REMIT_E2E_TOKEN="not-the-token")
        result, done = run_json("run", "tidy.rmt", "--allow-all", "-i", "src=x", "--state-dir", "st", "--adapter", flag,
                                cwd=ws.path, env=wrong)
        expect(result.code == 0 and done["result"] == "no server", "a refused token is an operational failure", result)
        for value, message in [(f"mcp+ftp://{url[7:]}", "an MCP server's URL starts with http:// or https://"),
                               ("mcp+https://me:pw@example.com/mcp", "must not hold a user or password"),
                               ("mcp+https://example.com/mcp?api_key=k1", "must not hold a query string"),
                               (f"mcp+{url} token=X", "only token_env=NAME may follow")]:
            bad = run(REMITVM, "run", "tidy.rmt", "--allow-all", "-i", "src=x", "--adapter", value, cwd=ws.path)
            expect(bad.code == 2 and message in bad.err, f"--adapter {value!r} is refused", bad)


if __name__ == "__main__":
    main(globals())
