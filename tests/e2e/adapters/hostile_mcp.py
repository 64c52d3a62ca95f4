#!/usr/bin/env python3
"""A small MCP server over stdio that misbehaves on request, for the failure modes of remit's MCP
client (tests/unit/test_mcp_client.cpp, tests/e2e/test_mcp_client.py).

It answers initialize and tools/list like a real server; each tool shows one behaviour, so one
process can be driven through many of them in turn:

  echo(text)            structuredContent {"text": text} and the same as JSON text
  text_json(a)          only text content, a JSON object {"a": a, "extra": true}
  text_plain()          only text content that is not JSON
  is_error()            isError with a text message
  rpc_error()           a JSON-RPC error answer
  bad_json()            a line that is not JSON
  huge()                one line of 65 MiB (over the client's 64 MiB limit)
  deep()                a message nested 600 levels deep
  wrong_id()            an answer to a request nobody sent
  hang()                no answer at all (the server keeps serving other calls)
  slow(ms)              the answer after `ms` milliseconds
  exit_now()            exits with status 3 before answering, after a line on stderr
  surrogate()           text with a lone surrogate escape (\\ud83d)
  ping_first()          asks the client `ping` and answers once the client has answered
  meta()                structuredContent holding the request's _meta and arguments
  get-sum(a, b)         a dashed name; the sum as text
  keywords(limit, type) echoes its arguments (parameters named like Remit keywords)
  image()               only an image block

Flags change the start-up: --hang-init (never answers initialize), --exit-at-start (exits 1 after a
line on stderr), --bad-version (answers initialize with protocol version 1999-01-01), --junk (writes
a line that is not JSON before answering initialize), --no-tools (an empty tool list), --paged
(tools/list in pages of three).
"""
import json
import sys
import threading
import time

ARGS = set(sys.argv[1:])
OUT_LOCK = threading.Lock()


def write(message):
    with OUT_LOCK:
        sys.stdout.write(message if isinstance(message, str) else json.dumps(message))
        sys.stdout.write("\n")
        sys.stdout.flush()


def schema(props=None, required=None):
    return {"type": "object", "properties": props or {}, "required": required or []}


STR = {"type": "string"}
NUM = {"type": "number"}
TOOLS = [
    {"name": "echo", "inputSchema": schema({"text": STR}, ["text"]),
     "outputSchema": schema({"text": STR}, ["text"]), "annotations": {"readOnlyHint": True}},
    {"name": "text_json", "inputSchema": schema({"a": NUM}, ["a"])},
    {"name": "text_plain", "inputSchema": schema()},
    {"name": "is_error", "inputSchema": schema()},
    {"name": "rpc_error", "inputSchema": schema()},
    {"name": "bad_json", "inputSchema": schema()},
    {"name": "huge", "inputSchema": schema()},
    {"name": "deep", "inputSchema": schema()},
    {"name": "wrong_id", "inputSchema": schema()},
    {"name": "hang", "inputSchema": schema()},
    {"name": "slow", "inputSchema": schema({"ms": NUM}, ["ms"])},
    {"name": "exit_now", "inputSchema": schema()},
    {"name": "surrogate", "inputSchema": schema()},
    {"name": "ping_first", "inputSchema": schema()},
    {"name": "meta", "inputSchema": schema({"x": NUM}, ["x"])},
    {"name": "get-sum", "inputSchema": schema({"a": NUM, "b": NUM}, ["a", "b"])},
    {"name": "keywords", "inputSchema": schema({"limit": NUM, "type": STR}, ["limit", "type"])},
    {"name": "image", "inputSchema": schema()},
]

pending_ping = {}


def text(t):
    return {"content": [{"type": "text", "text": t}]}


def call(req_id, name, arguments, meta):
    if name == "echo":
        return {"content": [{"type": "text", "text": json.dumps({"text": arguments.get("text")})}],
                "structuredContent": {"text": arguments.get("text"), "ignored": 1}}
    if name == "text_json":
        return text(json.dumps({"a": arguments.get("a"), "extra": True}))
    if name == "text_plain":
        return text("this is not json")
    if name == "is_error":
        return {"isError": True, "content": [{"type": "text", "text": "the disk is on fire"}]}
    if name == "rpc_error":
        write({"jsonrpc": "2.0", "id": req_id, "error": {"code": -32602, "message": "unknown argument 'z'"}})
        return None
    if name == "bad_json":
        write("{this is not json")
        return None
    if name == "huge":
        with OUT_LOCK:
            chunk = "x" * (1 << 20)
            sys.stdout.write('{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"' % req_id)
            for _ in range(65):
                sys.stdout.write(chunk)
            sys.stdout.write('"}]}}\n')
            sys.stdout.flush()
        return None
    if name == "deep":
        write('{"jsonrpc":"2.0","id":%d,"result":{"structuredContent":%s%s}}' % (req_id, "[" * 600, "]" * 600))
        return None
    if name == "wrong_id":
        write({"jsonrpc": "2.0", "id": req_id + 100, "result": text("for someone else")})
        return None
    if name == "hang":
        return None
    if name == "slow":
        def later():
            time.sleep(arguments.get("ms", 0) / 1000.0)
            write({"jsonrpc": "2.0", "id": req_id, "result": text("late")})
        threading.Thread(target=later, daemon=True).start()
        return None
    if name == "exit_now":
        sys.stderr.write("hostile_mcp: exiting in the middle of a call\n")
        sys.stderr.flush()
        sys.exit(3)
    if name == "surrogate":
        write('{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"cut \\ud83d here"}]}}' % req_id)
        return None
    if name == "ping_first":
        pending_ping["ping-1"] = req_id
        write({"jsonrpc": "2.0", "id": "ping-1", "method": "ping"})
        return None
    if name == "meta":
        return {"content": [], "structuredContent": {"meta": meta, "arguments": arguments}}
    if name == "get-sum":
        return text(json.dumps(arguments.get("a", 0) + arguments.get("b", 0)))
    if name == "keywords":
        return {"content": [], "structuredContent": arguments}
    if name == "image":
        return {"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]}
    write({"jsonrpc": "2.0", "id": req_id, "error": {"code": -32602, "message": "no tool " + name}})
    return None


def main():
    if "--exit-at-start" in ARGS:
        sys.stderr.write("hostile_mcp: cannot open the database\n")
        sys.exit(1)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        method = msg.get("method")
        req_id = msg.get("id")
        if method is None:  # a response (to our ping)
            if req_id in pending_ping:
                write({"jsonrpc": "2.0", "id": pending_ping.pop(req_id), "result": text("pong received")})
            continue
        if req_id is None:  # a notification
            continue
        if method == "initialize":
            if "--hang-init" in ARGS:
                continue
            if "--junk" in ARGS:
                write("Server starting... (not JSON)")
            version = "1999-01-01" if "--bad-version" in ARGS else msg["params"]["protocolVersion"]
            write({"jsonrpc": "2.0", "id": req_id, "result": {
                "protocolVersion": version, "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile-mcp-server", "version": "1.0"}}})
        elif method == "tools/list":
            tools = [] if "--no-tools" in ARGS else TOOLS
            result = {"tools": tools}
            if "--paged" in ARGS:
                start = int(msg.get("params", {}).get("cursor") or 0)
                result = {"tools": tools[start:start + 3]}
                if start + 3 < len(tools):
                    result["nextCursor"] = str(start + 3)
            write({"jsonrpc": "2.0", "id": req_id, "result": result})
        elif method == "tools/call":
            params = msg.get("params", {})
            result = call(req_id, params.get("name"), params.get("arguments") or {}, params.get("_meta"))
            if result is not None:
                write({"jsonrpc": "2.0", "id": req_id, "result": result})
        else:
            write({"jsonrpc": "2.0", "id": req_id, "error": {"code": -32601, "message": "no method " + method}})


main()
