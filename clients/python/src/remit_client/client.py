"""RemitClient: one ``remitvm serve`` process and the requests in flight to it.

It starts the server, writes each request as one line, and a reader thread matches each reply to
its request by id. Every failure — an ``error`` reply, a server that exits, a line that is not a
reply, a reply that never comes — is raised as a typed error (errors.py), never a hang. The
message types are protocol.py's. Thread-safe: several threads may drive sessions of one client.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Union

from .errors import (
    RemitError,
    RemitProcessError,
    RemitRequestError,
    RemitServerError,
    RemitTimeoutError,
)
from .protocol import (
    AbortRequest,
    Deny,
    ErrorReply,
    Fail,
    Final,
    Grant,
    HostCall,
    HostCallReply,
    JsonValue,
    Limits,
    Outcome,
    Perform,
    Reply,
    Request,
    ResumeRequest,
    RunRequest,
    decode_reply,
)

# The server's limits (docs/serve.md): a longer request line is refused unread.
MAX_REQUEST_BYTES = 8 << 20
DEFAULT_WALL_MS = 5000
STDERR_KEPT = 4096

#: What a handler given to execute() answers for a host call.
CallAnswer = Union[Perform, Deny, Fail]


class _Waiter:
    __slots__ = ("session", "kind", "future")

    def __init__(self, session: str, kind: str):
        self.session = session
        self.kind = kind
        self.future: Future = Future()


class RemitClient:
    """A ``remitvm serve`` process. Use ``RemitClient.start()``, ideally in a ``with`` block."""

    def __init__(self, process: subprocess.Popen, reply_timeout_s: float):
        self._process = process
        self._reply_timeout_s = reply_timeout_s
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._waiters: Dict[int, _Waiter] = {}
        # Aborts sent while the session's run or resume was being processed: that request's reply
        # answers them too (the server then sends no reply of the abort's own).
        self._aborts: Dict[str, Set[int]] = {}
        self._wall_ms: Dict[str, int] = {}
        self._ids = itertools.count(1)
        self._sessions = itertools.count(1)
        self._stderr_tail = b""
        self._failure: Optional[RemitError] = None
        self._stderr_thread = threading.Thread(target=self._read_stderr, name="remit-client-stderr", daemon=True)
        self._stderr_thread.start()
        self._reader = threading.Thread(target=self._read_stdout, name="remit-client-reader", daemon=True)
        self._reader.start()

    @classmethod
    def start(cls, remitvm: Optional[str] = None, *, env: Optional[Mapping[str, str]] = None,
              cwd: Optional[str] = None, reply_timeout_s: float = 30.0) -> "RemitClient":
        """Starts ``remitvm serve``: ``remitvm`` is a path or a name on PATH (default: $REMITVM, else
        ``remitvm``). ``reply_timeout_s`` is how long to wait for each reply beyond the run's own
        wall limit; a request still unanswered then raises RemitTimeoutError and its session is aborted."""
        program = remitvm or os.environ.get("REMITVM") or "remitvm"
        try:
            process = subprocess.Popen([program, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, env=dict(env) if env is not None else None, cwd=cwd)
        except OSError as e:
            raise RemitProcessError(f"remitvm serve could not be started ({program}): {e.strerror or e}") from None
        return cls(process, reply_timeout_s)

    def __enter__(self) -> "RemitClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------ requests

    def run(self, program: str, host: str, *, grants: Optional[Sequence[Union[Grant, Mapping[str, Any]]]] = None,
            budget: Optional[float] = None, inputs: Optional[Mapping[str, JsonValue]] = None,
            limits: Optional[Union[Limits, Mapping[str, int]]] = None, expected_type: Optional[str] = None,
            max_diagnostics: Optional[int] = None, strict_flows: Optional[bool] = None,
            session: Optional[str] = None) -> Outcome:
        """Checks and starts a program: a pause at its first host call (HostCallReply), or its end
        (RejectedReply, CompletedReply, FailedReply). A session id is made up unless given."""
        session = session or f"remit-client-{os.getpid()}-{next(self._sessions)}"
        grant_list = None if grants is None else [g if isinstance(g, Grant) else Grant(**g) for g in grants]
        limit_set = limits if isinstance(limits, Limits) or limits is None else Limits(**limits)
        request = RunRequest(session=session, program=program, host=host, grants=grant_list, budget=budget,
                             inputs=dict(inputs) if inputs is not None else None, limits=limit_set,
                             expected_type=expected_type, max_diagnostics=max_diagnostics, strict_flows=strict_flows)
        wall = (limit_set.wall_ms if limit_set and limit_set.wall_ms else None) or DEFAULT_WALL_MS
        with self._lock:
            self._wall_ms[session] = wall
        return self._send(request, wall)

    def perform(self, pause: HostCallReply, result: JsonValue, cost_usd: Optional[float] = None) -> Outcome:
        """Answers the pause with the call's result (None for Unit) and, optionally, its cost."""
        return self._resume(pause, Perform(result, cost_usd))

    def deny(self, pause: HostCallReply, reason: Optional[str] = None) -> Outcome:
        """Refuses the call: the run fails with R0303 (stage ``denied``)."""
        return self._resume(pause, Deny(reason))

    def fail(self, pause: HostCallReply, error: Optional[str] = None, message: Optional[str] = None) -> Outcome:
        """Reports the call as attempted and failed (``CapabilityFailed`` or ``Timeout``): operational,
        so the call's retry and else apply."""
        return self._resume(pause, Fail(error, message))  # type: ignore[arg-type]

    def abort(self, session: Union[str, HostCallReply]) -> Final:
        """Stops a session wherever it is. Returns the session's last reply: FailedReply with stage
        ``aborted``, or the run's own ending if it ended before the abort reached it. A session that
        is not running raises RemitServerError (``unknown_session``)."""
        name = session if isinstance(session, str) else session.session
        return self._send(AbortRequest(session=name), 0)

    def execute(self, program: str, host: str, on_call: Callable[[HostCall, HostCallReply], CallAnswer],
                **options: Any) -> Final:
        """Runs a program to its end, asking ``on_call`` to answer each host call with a Perform,
        Deny or Fail; the usual loop of a host. A handler that raises aborts the session and the
        exception propagates. ``options`` are run()'s."""
        outcome = self.run(program, host, **options)
        while isinstance(outcome, HostCallReply):
            pause = outcome
            try:
                answer = on_call(pause.call, pause)
            except BaseException:
                try:
                    self.abort(pause)
                except RemitError:
                    pass
                raise
            outcome = self._resume(pause, answer)
        return outcome

    def close(self, timeout_s: float = 30.0) -> Optional[int]:
        """Ends the server: closes its input, so paused sessions end (stage ``aborted``) and running
        ones finish, and waits for it to exit (killing it after ``timeout_s``). Returns its exit code."""
        with self._write_lock:
            try:
                if self._process.stdin and not self._process.stdin.closed:
                    self._process.stdin.close()
            except OSError:
                pass
        try:
            code = self._process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._process.kill()
            code = self._process.wait()
        self._reader.join()
        self._stderr_thread.join()
        for stream in (self._process.stdout, self._process.stderr):
            if stream is not None:
                stream.close()
        return code

    def kill(self) -> None:
        """Stops the server at once; waiting requests fail with RemitProcessError."""
        self._process.kill()

    @property
    def pid(self) -> int:
        return self._process.pid

    # ------------------------------------------------------------ plumbing

    def _resume(self, pause: HostCallReply, answer: CallAnswer) -> Outcome:
        if not isinstance(answer, (Perform, Deny, Fail)):
            raise TypeError("a call is answered with Perform(result), Deny(reason) or Fail(error, message)")
        with self._lock:
            wall = self._wall_ms.get(pause.session, DEFAULT_WALL_MS)
        return self._send(ResumeRequest(session=pause.session, call=pause.call.id, answer=answer), wall)

    def _send(self, request: Request, wall_ms: int) -> Any:
        request_id = next(self._ids)
        request.id = request_id
        line = (json.dumps(request.to_json(), ensure_ascii=False) + "\n").encode("utf-8")
        if len(line) > MAX_REQUEST_BYTES:
            raise RemitRequestError(f"the request is {len(line)} bytes, over the server's limit of {MAX_REQUEST_BYTES}")
        kind = {RunRequest: "run", ResumeRequest: "resume", AbortRequest: "abort"}[type(request)]
        waiter = _Waiter(request.session, kind)
        with self._lock:
            if self._failure is not None:
                raise self._failure
            self._waiters[request_id] = waiter
            if kind == "abort" and any(w.session == request.session and w.kind != "abort"
                                       for w in self._waiters.values()):
                self._aborts.setdefault(request.session, set()).add(request_id)
        self._write(line)
        timeout = self._reply_timeout_s + wall_ms / 1000.0
        try:
            reply = waiter.future.result(timeout)
        except FutureTimeout:
            with self._lock:
                self._waiters.pop(request_id, None)
            if kind != "abort":
                self._write((json.dumps({"type": "abort", "session": request.session}) + "\n").encode())
            raise RemitTimeoutError(f"no reply to this {kind} within {timeout:g} s; the session was aborted",
                                    timeout) from None
        if isinstance(reply, ErrorReply):
            raise RemitServerError(reply)
        return reply

    def _write(self, line: bytes) -> None:
        with self._write_lock:
            try:
                assert self._process.stdin is not None
                self._process.stdin.write(line)
                self._process.stdin.flush()
            except (OSError, ValueError):
                pass  # the server is gone: the reader reports it to every waiting request

    def _read_stdout(self) -> None:
        assert self._process.stdout is not None
        for raw in self._process.stdout:
            if not raw.strip():
                continue
            try:
                reply = decode_reply(raw.rstrip(b"\r\n"))
            except RemitError as e:
                # The stream can no longer be trusted to pair replies with requests: stop here.
                self._fail_all(e)
                self._process.kill()
                break
            self._deliver(reply)
        code = self._process.wait()
        self._stderr_thread.join(5)
        tail = self._stderr_tail.decode("utf-8", "replace")
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        last = tail.strip().splitlines()[-1] if tail.strip() else ""
        self._fail_all(RemitProcessError(f"remitvm serve {how} before answering" + (f": {last}" if last else ""),
                                         code, tail))

    def _read_stderr(self) -> None:
        assert self._process.stderr is not None
        for chunk in iter(lambda: self._process.stderr.read1(4096), b""):  # type: ignore[union-attr]
            self._stderr_tail = (self._stderr_tail + chunk)[-STDERR_KEPT:]

    def _deliver(self, reply: Reply) -> None:
        resolved: List[Future] = []
        with self._lock:
            waiter = self._waiters.pop(reply.id, None) if isinstance(reply.id, int) else None
            if waiter is not None:
                resolved.append(waiter.future)
                if waiter.kind == "abort":
                    self._aborts.get(waiter.session, set()).discard(reply.id)  # type: ignore[arg-type]
            ended = not isinstance(reply, (HostCallReply, ErrorReply))
            extra: List[Future] = []
            if ended:
                # The session has ended: its last reply also answers the aborts sent while it ran.
                for abort_id in self._aborts.pop(reply.session, set()):
                    other = self._waiters.pop(abort_id, None)
                    if other is not None:
                        extra.append(other.future)
                self._wall_ms.pop(reply.session, None)
        for future in resolved + extra:
            if not future.done():
                future.set_result(reply)

    def _fail_all(self, error: RemitError) -> None:
        with self._lock:
            if self._failure is None:
                self._failure = error
            waiting = list(self._waiters.values())
            self._waiters.clear()
            self._aborts.clear()
            failure = self._failure
        for waiter in waiting:
            if not waiter.future.done():
                waiter.future.set_exception(failure)
