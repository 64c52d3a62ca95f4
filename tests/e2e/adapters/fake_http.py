#!/usr/bin/env python3
"""A scriptable local HTTP/1.1 server for the tests of the HTTP client, the model adapters and MCP
over streamable HTTP (tests/unit/test_http_client.cpp, tests/unit/test_model_adapter.cpp,
tests/unit/test_mcp_client.cpp, tests/e2e/test_models.py).

Standard library only; it listens on 127.0.0.1 on a free port and prints "PORT PID" on its first
stdout line. It stops on POST /_quit, when its parent process goes away, or after --lifetime
seconds (default 300), so it never outlives the test that started it.

Control endpoints (not recorded):
  POST /_script     a JSON list of behaviours, queued for the next requests (one each, in order)
  GET  /_requests   the requests recorded since the last GET /_requests, as a JSON list of
                    {method, path, query, headers: {lower-case name: value}, body, client_port}
  POST /_quit       stop

Every other request is recorded, then answered by the next queued behaviour, else by
{"status": 200, "echo": true}. A behaviour is an object (all keys optional):
  status            the status code (200)
  headers           {name: value} added to the response
  body / json       the body as text, or a value sent as JSON (with Content-Type)
  echo              the body is the recorded request, as JSON
  big               the body is this many bytes of "x"
  delay_ms          wait this long before answering
  gzip              send the body gzip-encoded
  truncate          announce more bytes than are sent, then close the connection
  close             close the connection without answering
  garbage           write bytes that are not HTTP, then close
  header_bytes      add headers (X-Big-0, X-Big-1, ...) holding this many bytes in all
  content_type      the Content-Type of a `body` (default text/plain), e.g. text/event-stream
  openai / anthropic   answer in that provider's wire format (see provider_body below)
"""
import gzip
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lifetime = 300.0
if "--lifetime" in sys.argv:
    lifetime = float(sys.argv[sys.argv.index("--lifetime") + 1])

lock = threading.Lock()
script = []
recorded = []


def provider_body(kind, spec, request_body):
    """A response in the provider's documented (non-streaming) format for spec:
    answer (any JSON value, sent as the structured output), text (raw text content instead),
    usage {input, output} (token counts; absent: no usage reported), stop (the stop reason),
    refusal (OpenAI: a refusal message instead of content)."""
    try:
        request = json.loads(request_body or "{}")
    except ValueError:
        request = {}
    model = request.get("model", "unknown")
    usage = spec.get("usage")
    if kind == "openai":
        message = {"role": "assistant", "content": None}
        if "refusal" in spec:
            message["refusal"] = spec["refusal"]
        elif "text" in spec:
            message["content"] = spec["text"]
        else:
            message["content"] = json.dumps(spec.get("answer"))
        body = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 1700000000,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": spec.get("stop", "stop")}],
        }
        if usage is not None:
            body["usage"] = {"prompt_tokens": usage["input"], "completion_tokens": usage["output"],
                             "total_tokens": usage["input"] + usage["output"]}
        return body
    content = []
    if "text" in spec:
        content.append({"type": "text", "text": spec["text"]})
    else:
        tool = (request.get("tool_choice") or {}).get("name", "answer")
        content.append({"type": "tool_use", "id": "toolu_test", "name": tool, "input": spec.get("answer")})
    body = {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": spec.get("stop", "tool_use" if "text" not in spec else "end_turn"),
        "stop_sequence": None,
    }
    if usage is not None:
        body["usage"] = {"input_tokens": usage["input"], "output_tokens": usage["output"]}
    return body


def hang_up(connection):
    """Closes a connection on purpose; the client may have gone already."""
    try:
        connection.shutdown(2)
    except OSError:
        pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length).decode("utf-8", "replace") if length else ""

    def send(self, status, body, headers=None, content_type="application/json"):
        data = body if isinstance(body, bytes) else body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def handle_any(self):
        body = self.read_body()
        path, _, query = self.path.partition("?")
        if path == "/_script":
            with lock:
                script.extend(json.loads(body))
            return self.send(200, "{}")
        if path == "/_requests":
            with lock:
                out = list(recorded)
                recorded.clear()
            return self.send(200, json.dumps(out))
        if path == "/_quit":
            self.send(200, "{}")
            threading.Thread(target=self.server.shutdown, daemon=True).start()
            return
        request = {"method": self.command, "path": path, "query": query,
                   "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body,
                   "client_port": self.client_address[1]}
        with lock:
            recorded.append(request)
            spec = script.pop(0) if script else {"echo": True}
        if spec.get("delay_ms"):
            time.sleep(spec["delay_ms"] / 1000)
        if spec.get("close"):
            self.close_connection = True
            hang_up(self.connection)
            return
        if spec.get("garbage"):
            self.wfile.write(b"this is not HTTP\r\n\r\n")
            self.wfile.flush()
            self.close_connection = True
            hang_up(self.connection)
            return
        headers = dict(spec.get("headers") or {})
        status = spec.get("status", 200)
        content_type = "application/json"
        if "openai" in spec or "anthropic" in spec:
            kind = "openai" if "openai" in spec else "anthropic"
            data = json.dumps(provider_body(kind, spec[kind], body)).encode()
        elif spec.get("echo"):
            data = json.dumps(request).encode()
        elif "json" in spec:
            data = json.dumps(spec["json"]).encode()
        elif "big" in spec:
            data = b"x" * spec["big"]
            content_type = "text/plain"
        else:
            data = spec.get("body", "").encode()
            content_type = spec.get("content_type", "text/plain")
        for i in range(0, spec.get("header_bytes", 0), 30000):  # in headers of 30,000 bytes at most
            headers[f"X-Big-{i // 30000}"] = "h" * min(30000, spec["header_bytes"] - i)
        if spec.get("gzip"):
            data = gzip.compress(data)
            headers["Content-Encoding"] = "gzip"
        if spec.get("truncate"):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data) + 100))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            self.close_connection = True
            hang_up(self.connection)
            return
        self.send(status, data, headers, content_type)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = handle_any


def watch_parent(server, parent):
    deadline = time.monotonic() + lifetime
    while time.monotonic() < deadline and os.getppid() == parent:
        time.sleep(0.2)
    server.shutdown()


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # clients that time out or hang up are what the tests are about: no tracebacks


def serve(handler):
    """Serves `handler` on a free port of 127.0.0.1, printing "PORT PID", until the parent goes away
    or the lifetime ends (also for other local servers of the tests, e.g. openapi/petstore_server.py)."""
    server = Server(("127.0.0.1", 0), handler)
    threading.Thread(target=watch_parent, args=(server, os.getppid()), daemon=True).start()
    print(server.server_address[1], os.getpid(), flush=True)
    server.serve_forever(poll_interval=0.1)


if __name__ == "__main__":
    serve(Handler)
