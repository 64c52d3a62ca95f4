#!/usr/bin/env python3
"""A misbehaving-on-request adapter process for tests/unit/test_process_adapter.cpp.

Process-level flags (argv):
  --count-file F    append one line to F each time the process starts
  --die-first N     if F then has exactly 1 line, exit with status N before reading anything
  --die-always N    exit with status N at start, without reading stdin
  --never-read      never read stdin; sleep for a minute
  --one-shot        exit after the first reply
  --reply-unread    write a reply with id 1 at start, without reading the request
Per-request behaviour comes from `args` of a call (all optional):
  sleep_ms          sleep before replying
  raw               write this line instead of a reply ("{id}" is replaced by the request id)
  raw_latin1        the same, but encoded as Latin-1 (to send bytes that are not UTF-8)
  huge              write a line of this many bytes (no newline until the end)
  stale             write a reply with id - 1 (result "stale") before the real one
  fail              reply ok: false with error = fail and message "failed on purpose"
  stderr            write this text to stderr
  exit              exit with this status instead of replying
  child_pid_file    start `sleep 60` and write its pid to this file first
Otherwise the reply's result echoes the request plus "pid" and "fds" (this process's open fds).
"""
import json
import os
import subprocess
import sys
import time

argv = sys.argv[1:]


def flag(name):
    return name in argv


def value(name):
    return argv[argv.index(name) + 1] if name in argv else None


count_file = value("--count-file")
if count_file:
    with open(count_file, "a") as f:
        f.write("start\n")
    with open(count_file) as f:
        starts = len(f.readlines())
    if value("--die-first") is not None and starts == 1:
        sys.exit(int(value("--die-first")))
if value("--die-always") is not None:
    sys.exit(int(value("--die-always")))
if flag("--never-read"):
    time.sleep(60)
    sys.exit(0)
out = sys.stdout.buffer
if flag("--reply-unread"):
    out.write(b'{"id": 1, "ok": true, "result": "unread"}\n')
    out.flush()
    time.sleep(60)


def send(obj):
    out.write(json.dumps(obj).encode() + b"\n")
    out.flush()


for line in sys.stdin.buffer:
    req = json.loads(line)
    rid = req["id"]
    args = req.get("args") or {}
    if "child_pid_file" in args:
        child = subprocess.Popen(["sleep", "60"])
        with open(args["child_pid_file"], "w") as f:
            f.write(str(child.pid))
    if "stderr" in args:
        sys.stderr.write(args["stderr"])
        sys.stderr.flush()
    if "sleep_ms" in args:
        time.sleep(args["sleep_ms"] / 1000.0)
    if "exit" in args:
        sys.exit(args["exit"])
    if "stale" in args:
        send({"id": rid - 1, "ok": True, "result": "stale"})
    if "raw" in args or "raw_latin1" in args:
        text = args.get("raw", args.get("raw_latin1")).replace("{id}", str(rid))
        out.write(text.encode("utf-8" if "raw" in args else "latin-1") + b"\n")
        out.flush()
    elif "huge" in args:
        chunk = b"x" * (1 << 20)
        left = args["huge"]
        while left > 0:
            out.write(chunk[:left])
            left -= len(chunk)
        out.write(b"\n")
        out.flush()
    elif "fail" in args:
        send({"id": rid, "ok": False, "error": args["fail"], "message": "failed on purpose"})
    else:
        send({"id": rid, "ok": True, "result": {**req, "pid": os.getpid(), "fds": sorted(int(x) for x in os.listdir("/proc/self/fd"))},
              "cost_usd": 0.25, "meta": {"adapter": "fake"}})
    if flag("--one-shot"):
        sys.exit(0)
