#!/usr/bin/env python3
"""`remitvm mcp --http` and `remit mcp --http` end to end (docs/mcp.md, "HTTP transport"): the real
server on a free port (`--port 0`, read from its start-up line), driven with the standard library.
Health checks without a key; 401 without or with a wrong key; Bearer and x-api-key; a real
initialize, tools/list and tools/call; the monthly limit (the 4th of 3 is 429 and usage.sqlite holds
(acme, month, 4), as in the prototype's test); anonymous metering by client IP; the streamable HTTP
rules (202 for notifications, 405 for GET, sessions, Origin, content type); hostile input (an
oversized body, garbage, random bytes) with the server still answering; unusable keys files; a port
in use; SIGTERM ending the server with exit 0; a run whose client hangs up aborted, not run to its
limit; in `--approvals operator` mode the user asked through MCP elicitation on the POST's event
stream."""
import datetime
import hashlib
import http.client
import json
import os
import random
import re
import signal
import socket
import sqlite3
import subprocess
import threading
import time

from harness import REMIT, REMITVM, Workspace, expect, main

ACME = "acme-token-7f3a"
BETA = "beta-token-91c2"
KEYS = {"keys": [
    {"id": "acme", "sha256": hashlib.sha256(ACME.encode()).hexdigest(), "monthly_limit": 3},
    {"id": "beta", "sha256": hashlib.sha256(BETA.encode()).hexdigest()},
]}

HOST = """capability expenses.get(id: Str) -> Float
  tags untrusted
  idempotent

capability payroll.pay(email: Str deny untrusted, amount: Float approve untrusted) -> Str

input id tags untrusted
"""
NOTE = "program note\nuses expenses.get\n\nfn main(id: Str) -> Float {\n  return expenses.get(id)\n}\n"
PAY = ("program pay\nuses expenses.get, payroll.pay\n\nfn main(id: Str) -> Str {\n"
       "  return payroll.pay(email: \"kim@corp.example\", amount: expenses.get(id))\n}\n")
FIXTURES = json.dumps({"capabilities": {"expenses.get": [{"output": 12.5, "repeat": True}],
                                        "payroll.pay": [{"output": "r-1"}]}})
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


class Server:
    """A running `mcp --http` server on a free port; SIGTERM on exit, which must end it with 0."""

    def __init__(self, *args, tool=REMITVM):
        self.proc = subprocess.Popen([tool, "mcp", "--http", "--port", "0", *map(str, args)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.proc.stderr.readline().decode()
        while line and "listening on" not in line:  # a warning may come first
            line = self.proc.stderr.readline().decode()
        found = re.search(r"mcp: listening on http://127\.0\.0\.1:(\d+)/mcp$", line.strip())
        if not found:
            self.proc.kill()
            raise AssertionError("no start-up line naming the port: " + line + self.proc.stderr.read().decode())
        self.port = int(found.group(1))

    def request(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
            conn.request(method, path, body=data, headers=headers or {})
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def post(self, message, key=None, headers=None):
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if key:
            h["Authorization"] = f"Bearer {key}"
        h.update(headers or {})
        return self.request("POST", "/mcp", message, h)

    def alive(self):
        status, _, body = self.request("GET", "/health")
        return status == 200 and body == b"ok"

    def raw(self, data, read=True):
        """Sends bytes on a fresh connection; returns what comes back until the server closes."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            s.sendall(data)
            if not read:
                return b""
            s.shutdown(socket.SHUT_WR)
            out = b""
            while chunk := s.recv(65536):
                out += chunk
            return out

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=15)
        self.proc.stdout.close()
        self.proc.stderr.close()
        if exc[0] is None:
            expect(code == 0, "SIGTERM ends the server with exit 0", code)


def test_paused_runs_are_counted_per_key():
    """One key pausing many runs cannot drop another key's (issue #16 item 4), and a run token works
    only for the key that started the run."""
    w, keys, _ = keys_workspace()
    args = {"program": PAY, "host": HOST, "fixtures": FIXTURES, "inputs": json.dumps({"id": "X"})}

    def call(name, arguments, key):
        status, _, body = s.post(tool_call(name, arguments), key=key)
        expect(status == 200, f"{name} answered", body)
        return json.loads(body_json(body)["result"]["content"][0]["text"])

    with w, Server("--keys", keys) as s:
        beta = call("remit_run", args, BETA)["run_token"]
        acme = [call("remit_run", args, ACME)["run_token"] for _ in range(9)]
        expect(call("remit_resume", {"run_token": acme[0], "approve": True}, ACME)["error"] == "unknown_run_token",
               "the key's own oldest of 9 was dropped")
        stolen = call("remit_resume", {"run_token": beta, "approve": True}, ACME)
        expect(stolen["error"] == "unknown_run_token", "another key's token is unknown to this key", stolen)
        done = call("remit_resume", {"run_token": beta, "approve": True}, BETA)
        expect(done["status"] == "completed" and done["result"] == "r-1",
               "the other key's paused run survived and continues", done)
        done = call("remit_resume", {"run_token": acme[-1], "approve": False}, ACME)
        expect(done["status"] == "failed", "the key's newest is still there", done)


SPIN = ("program spin\n\nfn main() -> Int {\n  var n = 0\n  for i in range(1000000) {\n"
        "    for j in range(1000000) {\n      n = n + len(str(j) + str(i))\n    }\n  }\n  return n\n}\n")


def test_cancellation_from_another_connection():
    """A notifications/cancelled POST stops the tool call another connection of the same key is
    waiting for (issue #16 item 2); that call gets no JSON-RPC response (202, empty)."""
    w, keys, _ = keys_workspace()
    with w, Server("--keys", keys) as s:
        answer = {}

        def run():
            answer["r"] = s.post(tool_call("remit_run_fixtures", {"program": SPIN, "host": "", "fixtures": "{}"},
                                           id=60), key=BETA)

        t = threading.Thread(target=run)
        t.start()
        status, _, _ = s.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 60}},
                              key=BETA)
        expect(status == 202, "the notification is accepted", status)
        t.join(60)
        status, _, body = answer["r"]
        expect(status == 202 and body == b"", "the cancelled call is not answered", (status, body))
        # Another key's cancellation does not reach this key's call.
        def other():
            answer["r"] = s.post(tool_call("remit_run_fixtures", {"program": NOTE, "host": HOST,
                                                                  "fixtures": FIXTURES, "inputs": '{"id": "X"}'},
                                           id=61), key=BETA)
        s.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 61}}, key=ACME)
        other()
        status, _, body = answer["r"]
        expect(status == 200 and body_json(body)["id"] == 61, "another key cannot cancel it", body)


def cpu_ticks(pid):
    """The CPU time a process has used (user + system), in clock ticks (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return int(fields[11]) + int(fields[12])  # utime and stime, the stat file's fields 14 and 15


def cpu_of_one_spin(s, hang_up):
    """The CPU time the server spends on one remit_run_fixtures of SPIN, from its POST until the
    server is idle again: with its client waiting for the answer, or hanging up once the server
    has started on it."""
    before = cpu_ticks(s.proc.pid)
    # Its policy lowers the VM time limit to 4 s, so a waited run ends sooner than the default 10.
    body = json.dumps(tool_call("remit_run_fixtures", {"program": SPIN, "host": "", "fixtures": "{}",
                                                       "policy": "[limits]\nmax_wall_ms = 4000\n"},
                                id=62)).encode()
    conn = socket.create_connection(("127.0.0.1", s.port), timeout=60)
    conn.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Accept: application/json, text/event-stream\r\n"
                 b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    for _ in range(3000):  # the server is at work on it (at most 30 s)
        if cpu_ticks(s.proc.pid) - before >= 3:
            break
        time.sleep(0.01)
    if hang_up:
        conn.close()
    else:
        answer = b""
        while b'"id":62' not in answer and (chunk := conn.recv(65536)):
            answer += chunk
        conn.close()
        expect(b"R0701" in answer, "the run ends at a limit", answer[-300:])
    last = cpu_ticks(s.proc.pid)
    for _ in range(60):  # idle again: a whole second without a tick (at most a minute)
        time.sleep(1)
        now = cpu_ticks(s.proc.pid)
        if now == last:
            break
        last = now
    return last - before


def test_a_run_ends_when_its_client_hangs_up():
    """A client that hangs up abandons its tool call (issue #16 item 5): its run is aborted instead
    of burning CPU to its limit. Work is compared, not time: the same run costs the server a
    fraction of the CPU it costs when its client waits for the answer."""
    with Server() as s:
        waited = cpu_of_one_spin(s, hang_up=False)
        hung_up = cpu_of_one_spin(s, hang_up=True)
        expect(hung_up * 4 < waited, "the abandoned run stops early (CPU ticks: hung up, waited)",
               (hung_up, waited))
        expect(s.alive(), "and the server goes on")


def test_idle_and_slow_connections_cannot_lock_clients_out():
    """Idle connections and a slowloris (issue #16 items 3 and 11): 64 connections that never send
    a byte, then 80 that send one byte at a time, while a keyed client makes 100 calls and a health
    check runs. Every one of those is answered: a squatter costs the server no thread, only a
    place among its open connections, and is closed when a place is needed."""
    w, keys, _ = keys_workspace()
    with w, Server("--keys", keys) as s:
        idle = [socket.create_connection(("127.0.0.1", s.port), timeout=10) for _ in range(64)]
        time.sleep(0.2)
        ok = sum(s.post({"jsonrpc": "2.0", "id": i, "method": "ping"}, key=BETA)[0] == 200 for i in range(50))
        expect(ok == 50, "keyed pings through 64 idle connections", ok)

        slow = []
        stop = threading.Event()

        def loris():
            for _ in range(80):
                c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
                c.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")
                slow.append(c)
            while not stop.is_set():
                for c in list(slow):
                    try:
                        c.sendall(b"X")
                    except OSError:
                        slow.remove(c)  # closed to make room
                time.sleep(0.2)

        t = threading.Thread(target=loris)
        t.start()
        time.sleep(0.5)
        ok = sum(s.post({"jsonrpc": "2.0", "id": i, "method": "ping"}, key=BETA)[0] == 200 for i in range(50))
        health = s.request("GET", "/health")[0]
        stop.set()
        t.join(30)
        expect(ok == 50 and health == 200, "keyed pings and health checks through a slowloris", (ok, health))
        for c in idle + slow:
            c.close()


def keys_workspace():
    w = Workspace({"keys.json": json.dumps(KEYS)})
    return w, w.path / "keys.json", w.path / "usage.sqlite"


def body_json(body):
    return json.loads(body.decode())


def tool_call(name, arguments, id=3):
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def month():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m")


class StreamedPost:
    """A POST read as it arrives: the head, then the events of a text/event-stream answer, one at a
    time, undoing the chunked transfer coding by hand (what an SDK client does with fetch)."""

    def __init__(self, port, message, headers):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        body = json.dumps(message).encode()
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n{head}\r\n".encode() + body)
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self._more()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in lines[1:])}
        self.data = b""  # the stream's bytes, decoded from chunks
        self.ended = False

    def _more(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise AssertionError("the server closed the stream")
        self.buffer += chunk

    def event(self):
        """The next event's data as JSON, or None when the stream has ended."""
        while b"\n\n" not in self.data:
            if self.ended:
                return None
            while b"\r\n" not in self.buffer:
                self._more()
            size_line, rest = self.buffer.split(b"\r\n", 1)
            size = int(size_line, 16)
            while len(rest) < size + 2:
                self._more()
                size_line, rest = self.buffer.split(b"\r\n", 1)
            if size == 0:
                self.ended = True
            self.data += rest[:size]
            self.buffer = rest[size + 2:]
        event, self.data = self.data.split(b"\n\n", 1)
        fields = [line.split(": ", 1) for line in event.decode().split("\n")]
        expect(fields[0] == ["event", "message"], "a message event", event)
        return json.loads("\n".join(v for k, v in fields if k == "data"))

    def close(self):
        self.sock.close()


def test_elicitation_over_the_wire():
    """`--approvals operator` asks the user through the client (MCP elicitation, issue #16 item 6):
    the POST carrying the call becomes an event stream with the elicitation/create request, and only
    the same caller's response, with that request's id, answers it — once. Sessions whose client did
    not declare elicitation, and POSTs without a session or not accepting a stream, are answered as
    before. SIGTERM while the user is asked ends the server at once."""
    w, keys, _ = keys_workspace()
    with w, Server("--keys", keys, "--approvals", "operator", "--state-dir", w.path / "state") as s:
        def session(capabilities, key=BETA):
            hello = {**INITIALIZE, "params": {**INITIALIZE["params"], "capabilities": capabilities}}
            status, headers, _ = s.post(hello, key=key)
            expect(status == 200, "initialize", status)
            return {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                    "Authorization": f"Bearer {key}", "Mcp-Session-Id": headers["mcp-session-id"]}

        run = tool_call("remit_run", {"program": PAY, "host": HOST, "fixtures": FIXTURES, "inputs": {"id": "X"}}, id=9)
        asking = session({"elicitation": {}})

        def answered(decision):
            """Runs PAY on a stream, answers its question with `decision`, returns the result."""
            call = StreamedPost(s.port, run, asking)
            try:
                expect(call.status == 200 and call.headers["content-type"] == "text/event-stream"
                       and call.headers.get("transfer-encoding") == "chunked", "an event stream", call.headers)
                question = call.event()
                expect(question["method"] == "elicitation/create" and isinstance(question["id"], str)
                       and "payroll.pay" in question["params"]["message"], "the question comes first", question)
                approve = {"jsonrpc": "2.0", "id": question["id"],
                           "result": {"action": "accept", "content": {"decision": "approve"}}}
                # Another key cannot answer it, nor can the right key answer another id.
                status, _, body = s.post(approve, key=ACME)
                expect(status == 202 and body == b"", "another caller's answer is accepted, and ignored", status)
                status, _, _ = s.post({**approve, "id": question["id"] + "0"}, headers=asking)
                expect(status == 202, "an unknown id is ignored", status)
                answer = {**approve, "result": {"action": "accept", "content": decision}}
                expect(s.post(answer, headers=asking)[0] == 202, "the answer")
                reply = call.event()
                expect(reply["id"] == 9, "then the reply to the call", reply)
                expect(call.event() is None, "and the stream ends", call.data)
                # The same answer again changes nothing.
                expect(s.post(answer, headers=asking)[0] == 202, "a repeated answer is ignored")
                return json.loads(reply["result"]["content"][0]["text"])
            finally:
                call.close()

        denied = answered({"decision": "deny", "reason": "wrong payee"})
        expect(denied["status"] == "failed" and denied["error"]["message"] ==
               "'payroll.pay' was denied by user via MCP elicitation (key:beta): wrong payee; the call was not made",
               "the user's denial, not the forged approvals", denied)
        done = answered({"decision": "approve"})
        expect(done["status"] == "completed" and done["result"] == "r-1", "approved by the user", done)
        store = json.loads((w.path / "state" / "approvals.json").read_text())
        expect([v["by"] for v in store["consumed"].values()] == ["user via MCP elicitation (key:beta)"],
               "one approval, by the user through the client, for this key", store)

        # Not asked: a session that did not declare elicitation, no session, or no stream accepted.
        for headers in (session({}), {"Content-Type": "application/json", "Authorization": f"Bearer {BETA}"},
                        {**asking, "Accept": "application/json"}):
            status, h, body = s.post(run, headers=headers)
            paused = json.loads(body_json(body)["result"]["content"][0]["text"])
            expect(status == 200 and h["content-type"] == "application/json" and paused["approver"] == "operator"
                   and "elicitation" not in paused, "paused for the operator, nobody asked", paused)

        # SIGTERM while the user is being asked: the server stops at once.
        call = StreamedPost(s.port, run, asking)
        try:
            expect(call.event()["method"] == "elicitation/create", "asked again")
            s.proc.send_signal(signal.SIGTERM)
            code = s.proc.wait(timeout=15)  # not the elicitation's 300 s
            expect(code == 0, "ended with exit 0", code)
        finally:
            call.close()


def test_health_needs_no_key():
    w, keys, _ = keys_workspace()
    with w, Server("--keys", keys) as s:
        for path in ("/health", "/healthz"):
            status, headers, body = s.request("GET", path)
            expect(status == 200 and body == b"ok" and headers["content-type"].startswith("text/plain"), path, body)
        expect(s.request("POST", "/health", b"{}")[0] == 405, "health is GET only")


def test_keys_gate_and_a_real_session():
    w, keys, _ = keys_workspace()
    with w, Server("--keys", keys) as s:
        status, _, body = s.post(INITIALIZE)
        expect(status == 401 and body_json(body) == {"error": "missing or invalid API key"}, "no key", body)
        expect(s.post(INITIALIZE, key="wrong")[0] == 401, "wrong key")
        expect(s.post(INITIALIZE, headers={"x-api-key": "wrong"})[0] == 401, "wrong x-api-key")
        expect(s.request("GET", "/mcp")[0] == 401, "every path but health is gated")

        status, headers, body = s.post(INITIALIZE, key=BETA)
        reply = body_json(body)
        expect(status == 200 and headers["content-type"] == "application/json", "initialize", (status, body))
        expect(reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "remit", "initialize result", reply)
        session = headers.get("mcp-session-id", "")
        expect(re.fullmatch(r"[0-9a-f]{32}", session), "a random session id", headers)

        h = {"x-api-key": BETA, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"}
        status, _, body = s.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=h)
        names = [t["name"] for t in body_json(body)["result"]["tools"]]
        expect(status == 200 and "remit_check" in names and len(names) == 8, "tools/list", body)
        # A lower-case scheme and no session id are fine too.
        status, _, body = s.post(tool_call("remit_check", {"program": NOTE, "host": HOST}),
                                 headers={"Authorization": "bearer " + BETA})
        result = json.loads(body_json(body)["result"]["content"][0]["text"])
        expect(status == 200 and result["ok"] is True and "expenses.get" in result["summary"], "remit_check", result)

        # A run paused on one connection is resumed on another.
        status, _, body = s.post(tool_call("remit_run", {"program": PAY, "host": HOST, "fixtures": FIXTURES,
                                                         "inputs": json.dumps({"id": "X"})}), key=BETA)
        paused = json.loads(body_json(body)["result"]["content"][0]["text"])
        expect(paused["status"] == "approval_required", "remit_run pauses", paused)
        status, _, body = s.post(tool_call("remit_resume", {"run_token": paused["run_token"], "approve": True}), key=BETA)
        done = json.loads(body_json(body)["result"]["content"][0]["text"])
        expect(done["status"] == "completed" and done["result"] == "r-1", "remit_resume", done)


def test_monthly_limit_and_usage_file():
    w, keys, usage = keys_workspace()
    with w:
        with Server("--keys", keys, "--usage", usage) as s:
            for i in range(3):
                expect(s.post({"jsonrpc": "2.0", "id": i, "method": "ping"}, key=ACME)[0] == 200, f"request {i + 1}")
            expect(s.alive() and s.request("GET", "/mcp", headers={"x-api-key": ACME})[0] == 405, "GETs are not metered")
            status, _, body = s.post({"jsonrpc": "2.0", "id": 4, "method": "ping"}, key=ACME)
            expect(status == 429 and body_json(body) == {"error": "monthly limit of 3 requests reached for acme"}, "429",
                   body)
            expect(s.post({"jsonrpc": "2.0", "id": 5, "method": "ping"}, key=BETA)[0] == 200, "other keys go on")
            with sqlite3.connect(usage) as db:  # read while the server runs
                rows = db.execute("select key_id, month, requests from usage order by key_id").fetchall()
            expect(rows == [("acme", month(), 4), ("beta", month(), 1)], "the rejected request is counted too", rows)
        with sqlite3.connect(usage) as db:
            columns = [(c[1], c[2].lower(), c[5]) for c in db.execute("pragma table_info(usage)")]
        expect(columns == [("key_id", "text", 1), ("month", "text", 2), ("requests", "integer", 0)], "the schema",
               columns)
        # The count survives a restart.
        with Server("--keys", keys, "--usage", usage) as s:
            expect(s.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, key=ACME)[0] == 429, "still over the limit")
            with sqlite3.connect(usage) as db:
                mode = db.execute("pragma journal_mode").fetchone()[0]
            expect(mode == "wal", "the file is in WAL mode (a count is a log append, not four syncs)", mode)

        # A server killed outright has lost no count: each is committed before it is answered.
        s = Server("--keys", keys, "--usage", usage)
        try:
            for i in range(20):
                expect(s.post({"jsonrpc": "2.0", "id": i, "method": "ping"}, key=BETA)[0] == 200, f"beta {i}")
        finally:
            s.proc.kill()
            s.proc.wait(timeout=15)
            s.proc.stdout.close()
            s.proc.stderr.close()
        with sqlite3.connect(usage) as db:
            beta = db.execute("select requests from usage where key_id = 'beta'").fetchone()[0]
        expect(beta == 21, "every count of a SIGKILLed server is kept", beta)


def test_anonymous_use_metered_by_client_ip():
    w, keys, usage = keys_workspace()
    with w, Server("--keys", keys, "--usage", usage, "--free-monthly", 2) as s:
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        expect([s.post(ping)[0] for _ in range(3)] == [200, 200, 429], "two free requests")
        status, _, body = s.post(ping, key="not-a-key")
        expect(status == 429 and b"anon:127.0.0.1" in body, "a wrong key is anonymous", body)
        forwarded = {"X-Forwarded-For": "203.0.113.7, 10.0.0.1"}
        expect(s.post(ping, headers=forwarded)[0] == 200, "another client by X-Forwarded-For")
        expect(s.post(ping, key=ACME)[0] == 200, "keys still work")
        with sqlite3.connect(usage) as db:
            rows = dict(db.execute("select key_id, requests from usage").fetchall())
        expect(rows == {"anon:127.0.0.1": 4, "anon:203.0.113.7": 1, "acme": 1}, "per client", rows)
    # No keys and no free tier: nothing to authenticate, nothing limited.
    with Server() as s:
        expect(s.post(INITIALIZE)[0] == 200, "open server")


def test_streamable_http_rules():
    with Server() as s:
        status, _, body = s.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        expect(status == 202 and body == b"", "a notification is 202 with no body", (status, body))
        status, _, body = s.post([{"jsonrpc": "2.0", "method": "notifications/initialized"},
                                  {"jsonrpc": "2.0", "id": 7, "method": "ping"}, {"jsonrpc": "2.0", "id": 8, "method": "x"}])
        replies = body_json(body)
        expect(status == 200 and [r["id"] for r in replies] == [7, 8] and "error" in replies[1], "a batch", replies)
        expect(s.post([{"jsonrpc": "2.0", "method": "notifications/initialized"}])[0] == 202, "a batch of notifications")
        status, _, body = s.post([])
        expect(status == 200 and body_json(body)["error"]["code"] == -32600, "an empty batch", body)
        status, headers, _ = s.request("GET", "/mcp")
        expect(status == 405 and headers.get("allow") == "POST, DELETE", "no SSE stream", headers)
        status, _, body = s.request("POST", "/mcp", b"{not json", {"Content-Type": "application/json"})
        expect(status == 400 and body_json(body)["error"]["code"] == -32700, "parse error", body)
        expect(s.request("POST", "/mcp", b"{}", {"Content-Type": "text/plain"})[0] == 415, "content type")
        expect(s.request("POST", "/mcp", b"{}")[0] == 415, "no content type")
        expect(s.post(INITIALIZE, headers={"Mcp-Session-Id": "f" * 32})[0] == 404, "an unknown session")
        expect(s.post(INITIALIZE, headers={"MCP-Protocol-Version": "1999-01-01"})[0] == 400, "an unknown version")
        expect(s.post(INITIALIZE, headers={"Origin": "https://evil.example"})[0] == 403, "a foreign origin")
        expect(s.post(INITIALIZE, headers={"Origin": "http://localhost.evil.example"})[0] == 403, "a look-alike")
        expect(s.post(INITIALIZE, headers={"Origin": "http://localhost:6274"})[0] == 200, "a local origin")
        status, _, body = s.request("GET", "/nope")
        expect(status == 404 and "error" in body_json(body), "other paths", body)
        expect(s.post(INITIALIZE)[0] == 200 and s.request("POST", "/mcp/", json.dumps(INITIALIZE).encode(),
                                                          {"Content-Type": "application/json"})[0] == 200, "/mcp/")
        session = s.post(INITIALIZE)[1]["mcp-session-id"]
        expect(s.request("DELETE", "/mcp", headers={"Mcp-Session-Id": session})[0] == 204, "DELETE ends a session")
        expect(s.post({"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers={"Mcp-Session-Id": session})[0] == 404,
               "an ended session is unknown")


def test_cors_for_pages_on_this_machine():
    """A browser page on localhost can call the server (issue #16 item 10): its preflight is
    answered before the key check, and every response names the origin and exposes the session."""
    page = "http://localhost:5173"
    with Workspace({"keys.json": json.dumps(KEYS)}) as ws, Server("--keys", ws.path / "keys.json") as s:
        status, headers, body = s.request("OPTIONS", "/mcp", headers={
            "Origin": page, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, authorization, mcp-protocol-version"})
        expect(status == 204 and body == b"", "a preflight needs no key", (status, headers, body))
        expect(headers.get("access-control-allow-origin") == page and "POST" in headers["access-control-allow-methods"]
               and "Authorization" in headers["access-control-allow-headers"]
               and "Mcp-Session-Id" in headers["access-control-allow-headers"], "what it allows", headers)
        status, headers, _ = s.request("OPTIONS", "/mcp", headers={"Origin": "https://evil.example",
                                                                   "Access-Control-Request-Method": "POST"})
        expect(status == 403 and "access-control-allow-origin" not in headers, "a foreign page gets nothing", headers)
        status, headers, _ = s.request("OPTIONS", "/mcp")
        expect(status == 401, "OPTIONS without an Origin is not a preflight: the key check applies", (status, headers))
        status, headers, _ = s.request("OPTIONS", "/mcp", headers={"Authorization": f"Bearer {ACME}"})
        expect(status == 405 and headers.get("allow") == "POST, DELETE", "and then it is not allowed", (status, headers))

        status, headers, body = s.post(INITIALIZE, key=ACME, headers={"Origin": page})
        expect(status == 200 and headers.get("access-control-allow-origin") == page
               and "Mcp-Session-Id" in headers.get("access-control-expose-headers", "")
               and "mcp-session-id" in headers, "a reply the page can read, with its session", headers)
        status, headers, _ = s.post(INITIALIZE, headers={"Origin": page})
        expect(status == 401 and headers.get("access-control-allow-origin") == page, "refusals too", headers)
        status, headers, _ = s.post(INITIALIZE, key=ACME)
        expect(status == 200 and "access-control-allow-origin" not in headers, "no CORS without an Origin", headers)


def test_hostile_input():
    with Server() as s:
        # A body over 16 MiB is refused from its Content-Length, before it is sent.
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
        conn.putrequest("POST", "/mcp")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(17 << 20))
        conn.endheaders()
        r = conn.getresponse()
        expect(r.status == 413, "oversized body", r.status)
        conn.close()
        expect(s.alive(), "alive after 413")
        reply = s.raw(b"\x16\x03\x01\x02\x00 not http at all\r\n\r\n")
        expect(reply.startswith(b"HTTP/1.1 400 "), "garbage request line", reply)
        expect(s.raw(b"GET / HTTP/1.1\r\nHost: x\r\nX: " + b"a" * (70 << 10) + b"\r\n\r\n").startswith(b"HTTP/1.1 431 "),
               "a huge header")
        expect(s.raw(b"POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
               .startswith(b"HTTP/1.1 411 "), "chunked")
        rng = random.Random(7)
        for _ in range(40):
            junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
            s.raw(junk + b"\r\n\r\n")
        s.raw(b"GET /health HTTP/1.1\r\nHost: x\r\n", read=False)  # a half request, then gone
        expect(s.alive(), "alive after garbage")
        # Several clients at once.
        results = []

        def check():
            results.append(s.post(tool_call("remit_check", {"program": NOTE, "host": HOST}))[0])

        threads = [threading.Thread(target=check) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        expect(results == [200] * 6, "concurrent tool calls", results)


def run_server(*args, tool=REMITVM):
    return subprocess.run([tool, "mcp", *map(str, args)], capture_output=True, timeout=30, stdin=subprocess.DEVNULL)


def test_unusable_files_and_flags():
    with Workspace({"bad.json": "{\"keys\": [", "hash.json": json.dumps({"keys": [{"id": "a", "sha256": ACME}]}),
                    "shape.json": "[]", "usage.sqlite": "not a database, just text........................"}) as w:
        for name, says in (("bad.json", "invalid JSON in keys file"), ("hash.json", "keys[0].sha256"),
                           ("shape.json", "\"keys\" array"), ("missing.json", "no such file")):
            r = run_server("--http", "--port", "0", "--keys", w.path / name)
            err = r.stderr.decode()
            expect(r.returncode == 2 and str(w.path / name) in err and says in err and "hint:" in err, name, err)
        r = run_server("--http", "--port", "0", "--usage", w.path / "usage.sqlite")
        expect(r.returncode == 2 and "usage.sqlite" in r.stderr.decode(), "a usage file that is not SQLite", r.stderr)
    for args, says in ((["--http", "--port", "x"], b"--port"), (["--http", "--port", "70000"], b"--port"),
                       (["--http", "--free-monthly", "-1"], b"--free-monthly"), (["--port", "8000"], b"--http")):
        r = run_server(*args)
        expect(r.returncode == 2 and says in r.stderr, args, r.stderr)


def test_port_in_use():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        r = run_server("--http", "--port", taken.getsockname()[1])
        expect(r.returncode == 1 and b"cannot listen" in r.stderr and b"--port 0" in r.stderr, "bind error", r.stderr)


def test_remit_front_end():
    w, keys, _ = keys_workspace()
    with w, Server("--keys", keys, tool=REMIT) as s:
        status, _, body = s.post(INITIALIZE, key=BETA)
        expect(status == 200 and body_json(body)["result"]["serverInfo"]["name"] == "remit", "remit mcp --http", body)
        expect(s.post(INITIALIZE)[0] == 401, "gated")


if __name__ == "__main__":
    main(globals())
