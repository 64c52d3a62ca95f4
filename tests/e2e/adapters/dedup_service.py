"""A pretend external service with real, countable effects that de-duplicates by idempotency key,
as docs/adapters.md recommends and as payment APIs do: the first request with a key decides the
reply (a failure included) and performs the effect; a later request with the same key gets the
same reply and performs nothing. Used by dedup_adapter.py (an adapter process) and by
tests/killtest/app/adapters.py (the same service behind `--live`).

State lives in the directory $REMIT_DEDUP_STATE (created if needed):
  replies.jsonl   one line per key decided: {"key", "resource", "args", "reply"}, fsynced before the
                  reply is sent — so an effect is on record before remitvm can learn of it
  repeats.jsonl   one line per request whose key was already decided: {"key", "resource", "args"}

Behaviour, a pure function of the arguments and of the keys decided so far:
  - an argument value containing "flaky<N>" (N a digit) fails the first N distinct keys sent
    with those same arguments (CapabilityFailed), then succeeds; "broken" always fails;
  - web.fetch(url) returns "page <url>"; any other capability "<resource>:<canonical args>";
  - a model call returns a value shaped by the requested JSON Schema (strings: "answer <n>",
    n the length of the rendered prompt).

$REMIT_DEDUP_DELAY_MS = "N" makes each request take N ms more, so that a test killing its caller at
random moments finds calls in flight (tests/killtest/fleet_killtest.py).

$REMIT_DEDUP_KILL = "N:PHASE" SIGKILLs the process's parent (remitvm) at the N-th request this
process receives: PHASE "before" kills it before anything is decided, "after" once the reply is
on record but before it is sent (the effect happened; remitvm never learns its outcome).
"""
import fcntl
import json
import os
import re
import signal
import time


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _shape(schema, text):
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        return {k: _shape(s, text) for k, s in schema.get("properties", {}).items()}
    return {"array": [], "string": text, "boolean": True, "integer": 1, "number": 1.5}.get(kind)


class Service:
    def __init__(self, state=None):
        self.dir = state or os.environ["REMIT_DEDUP_STATE"]
        os.makedirs(self.dir, exist_ok=True)
        kill = os.environ.get("REMIT_DEDUP_KILL", "")
        self.kill_at, self.kill_phase = (int(kill.split(":")[0]), kill.split(":")[1]) if kill else (0, "")
        self.received = 0
        self.delay = int(os.environ.get("REMIT_DEDUP_DELAY_MS", "0")) / 1000

    def _lines(self, name):
        path = os.path.join(self.dir, name)
        if not os.path.exists(path):
            return []
        with open(path, encoding="utf-8") as f:
            # A line cut short by a crash of this process is not a decision.
            return [json.loads(line) for line in f if line.endswith("\n")]

    def _append(self, name, entry):
        with open(os.path.join(self.dir, name), "a", encoding="utf-8") as f:
            f.write(canonical(entry) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def _maybe_kill(self, phase):
        if self.received == self.kill_at and phase == self.kill_phase:
            os.kill(os.getppid(), signal.SIGKILL)
            os._exit(0)  # nothing more happens: the service saw the request, and that is all

    def _decide(self, resource, args, request, decided):
        text = " ".join(str(v) for v in args.values())
        earlier = sum(1 for d in decided if d["resource"] == resource and d["args"] == args)
        flaky = re.search(r"flaky(\d)", text)
        if "broken" in text or (flaky and earlier < int(flaky.group(1))):
            return {"ok": False, "error": "CapabilityFailed", "message": f"{resource} failed (attempt {earlier + 1})"}
        if request.get("type") == "ask":
            return {"ok": True, "result": _shape(request.get("schema") or {},
                                                 f"answer {len(request.get('rendered_prompt') or '')}")}
        if resource == "web.fetch":
            return {"ok": True, "result": f"page {args.get('url')}"}
        return {"ok": True, "result": f"{resource}:{canonical(args)}"}

    def handle(self, request):
        """The reply (without its id) to one protocol request."""
        self.received += 1
        self._maybe_kill("before")
        resource = request.get("resource") or request.get("model")
        args = request.get("args") if request.get("type") == "call" else {"prompt": request.get("rendered_prompt")}
        key = request["idempotency_key"]
        time.sleep(self.delay)
        # One decision at a time: the adapter processes of many runs (a fleet's workers) share the
        # service, as the clients of a real one do.
        with open(os.path.join(self.dir, "lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            decided = self._lines("replies.jsonl")
            known = next((d for d in decided if d["key"] == key), None)
            if known is not None:
                self._append("repeats.jsonl", {"key": key, "resource": resource, "args": args})
                reply = known["reply"]
            else:
                reply = self._decide(resource, args, request, decided)
                self._append("replies.jsonl", {"key": key, "resource": resource, "args": args, "reply": reply})
        self._maybe_kill("after")
        return reply
