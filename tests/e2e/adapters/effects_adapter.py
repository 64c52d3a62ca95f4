#!/usr/bin/env python3
"""An adapter process with real, countable effects, for the tests that must see an effect performed
once: resume and replay (test_resume.py), approvals (test_approvals.py) and the web inbox in a
browser (tests/inbox_browser).

Every call is an effect appended to the JSON-lines log named by --log: {"resource", "args", "key"}.
An effect whose idempotency key is already in the log is not performed again; a line
{"dedup": KEY} is appended instead, so a test can see both that it happened and that it was
recognised. The result of `crm.lookup(id)` is "customer of <id>"; every other call returns
"done:<resource>".

  --log F              the effects log (required)
  --kill-once R:M      after performing the call to resource R for the first time, if marker
                       file M does not exist: create M, then SIGKILL the parent (remitvm) before
                       replying — the crash window between an effect and its record
  --hold R:SECONDS     before replying to a call to R, sleep (to keep a run busy)
  --gate R:FILE        before replying to a call to R, wait until FILE exists (to keep a run busy
                       until the test has seen what it wants to see while it is)
"""
import json
import os
import signal
import sys
import time

argv = sys.argv[1:]


def value(name):
    return argv[argv.index(name) + 1] if name in argv else None


log = value("--log")
kill_once = value("--kill-once")
hold = value("--hold")
gate = value("--gate")


def performed_keys():
    if not os.path.exists(log):
        return set()
    with open(log) as f:
        return {json.loads(line).get("key") for line in f if line.strip()}


def append(entry):
    with open(log, "a") as f:
        f.write(json.dumps(entry, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


for line in sys.stdin:
    req = json.loads(line)
    resource = req.get("resource") or req.get("model")
    key = req["idempotency_key"]
    if key in performed_keys():
        append({"dedup": key})
    else:
        append({"resource": resource, "args": req.get("args"), "key": key})
    if hold and hold.split(":")[0] == resource:
        time.sleep(float(hold.split(":")[1]))
    if gate and gate.split(":", 1)[0] == resource:
        while not os.path.exists(gate.split(":", 1)[1]):
            time.sleep(0.02)
    if kill_once:
        target, marker = kill_once.split(":", 1)
        if target == resource and not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getppid(), signal.SIGKILL)
            sys.exit(0)
    args = req.get("args") or {}
    result = f"customer of {args.get('id')}" if resource == "crm.lookup" else f"done:{resource}"
    sys.stdout.write(json.dumps({"id": req["id"], "ok": True, "result": result}) + "\n")
    sys.stdout.flush()
