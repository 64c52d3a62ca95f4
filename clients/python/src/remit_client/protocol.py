"""The messages of ``remitvm serve`` (docs/serve.md in the Remit repository), one dataclass each.

Requests (``RunRequest``, ``ResumeRequest``, ``AbortRequest`` and their parts) turn into the JSON
the server reads with ``to_json``; ``decode_reply`` turns a line the server printed into one of the
reply classes, checking every field against its annotation, and raises ``RemitProtocolError`` for a
line that is not a reply. Field names are the protocol's own. A reply keeps the whole object it was
read from in ``raw``, so fields a newer server adds are not lost. ``client.py`` uses both halves.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Optional, Union

from .errors import RemitProtocolError

#: Any JSON value: inputs, arguments and results are made of these.
JsonValue = Any
#: A request's id, echoed in its reply.
RequestId = Union[str, int]

GrantMode = Literal["ask", "allow"]
RejectStage = Literal["parse", "typecheck", "grant", "bounds", "flow", "expected-type"]
FailStage = Literal["evaluate", "limit", "denied", "aborted"]
ErrorCode = Literal[
    "bad_request", "unknown_session", "session_busy", "wrong_call", "not_paused", "too_many_sessions", "host_error"
]


def _without_none(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


# ---------------------------------------------------------------- requests


@dataclass
class Grant:
    """One grant: a capability or model the host interface declares, with a policy grant's settings."""

    name: str
    mode: Optional[GrantMode] = None  # "ask" (the default: a person decides) or "allow"
    max_calls: Optional[int] = None
    arg_prefix: Optional[Dict[str, List[str]]] = None
    arg_one_of: Optional[Dict[str, List[JsonValue]]] = None
    arg_max: Optional[Dict[str, float]] = None
    approve: Optional[Dict[str, List[str]]] = None
    approval: Optional[Literal["always"]] = None

    def to_json(self) -> Dict[str, Any]:
        return _without_none(dataclasses.asdict(self))


@dataclass
class Limits:
    """The limits of one run, each a positive integer (docs/serve.md, "Limits")."""

    steps: Optional[int] = None
    wall_ms: Optional[int] = None
    host_calls: Optional[int] = None
    result_bytes: Optional[int] = None
    memory: Optional[int] = None

    def to_json(self) -> Dict[str, Any]:
        return _without_none(dataclasses.asdict(self))


@dataclass
class RunRequest:
    """``run``: check ``program`` against ``host`` and ``grants``, then run it."""

    session: str
    program: str  # the server also accepts its older name "source"; this client sends "program"
    host: str
    grants: Optional[List[Grant]] = None
    budget: Optional[float] = None
    inputs: Optional[Dict[str, JsonValue]] = None
    limits: Optional[Limits] = None
    expected_type: Optional[str] = None
    max_diagnostics: Optional[int] = None
    strict_flows: Optional[bool] = None
    id: Optional[RequestId] = None

    def to_json(self) -> Dict[str, Any]:
        out = {"type": "run", **{k: getattr(self, k) for k in ("id", "session", "program", "host")}}
        out["grants"] = [g.to_json() for g in self.grants] if self.grants is not None else None
        out["limits"] = self.limits.to_json() if self.limits is not None else None
        for k in ("budget", "inputs", "expected_type", "max_diagnostics", "strict_flows"):
            out[k] = getattr(self, k)
        return _without_none(out)


@dataclass
class Perform:
    """The host performed the call: its result (None for Unit) and, optionally, what it cost."""

    result: JsonValue
    cost_usd: Optional[float] = None

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"result": self.result}
        if self.cost_usd is not None:
            out["cost_usd"] = self.cost_usd
        return out


@dataclass
class Deny:
    """The host refuses the call: the run fails with R0303."""

    reason: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        return _without_none(dataclasses.asdict(self))


@dataclass
class Fail:
    """The call was attempted and failed: operational, so the call's retry and else apply."""

    error: Optional[Literal["CapabilityFailed", "Timeout"]] = None
    message: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        return _without_none(dataclasses.asdict(self))


@dataclass
class ResumeRequest:
    """``resume``: answers the call a session is paused at with one of Perform, Deny and Fail."""

    session: str
    call: int
    answer: Union[Perform, Deny, Fail]
    id: Optional[RequestId] = None

    def to_json(self) -> Dict[str, Any]:
        key = {Perform: "perform", Deny: "deny", Fail: "fail"}[type(self.answer)]
        return _without_none({"type": "resume", "id": self.id, "session": self.session, "call": self.call,
                              key: self.answer.to_json()})


@dataclass
class AbortRequest:
    """``abort``: stops a session wherever it is."""

    session: str
    id: Optional[RequestId] = None

    def to_json(self) -> Dict[str, Any]:
        return _without_none({"type": "abort", "id": self.id, "session": self.session})


Request = Union[RunRequest, ResumeRequest, AbortRequest]


# ---------------------------------------------------------------- replies


@dataclass
class Span:
    """A position in ``program.rmt``: 1-based lines and columns, the end exclusive."""

    line: int
    col: int
    end_line: int
    end_col: int


@dataclass
class Diagnostic:
    """One diagnostic, in the JSON shape of ``remitc check --json``."""

    code: str
    severity: Literal["error", "warning"]
    message: str
    file: str  # program.rmt, host.rmti, expected_type or grants
    line: Optional[int]  # None when the diagnostic has no position
    col: Optional[int]
    end_line: Optional[int]
    end_col: Optional[int]
    hint: Optional[str]
    notes: List[str]
    details: JsonValue = None


@dataclass
class HostCall:
    """The call a run is paused at."""

    id: int  # the call's number in its session; a resume names it
    kind: Literal["capability", "model", "agent"]
    resource: str  # the capability, or the model the call is granted under
    site: str  # the call-site id, fn#k, as in the manifest
    span: Optional[Span]
    mode: GrantMode
    reasons: List[str]  # why the call needs approval
    args: Dict[str, JsonValue]
    arg_tags: Dict[str, List[str]]
    pc_tags: List[str]
    attempt: int  # 0-based; a retry pauses again with attempt + 1 and a new id
    returns: str  # the declared return type, or the requested type of a model call
    result_tags: List[str]  # the tags the result will carry
    agent: Optional[str] = None  # an agent call's agent
    system: Optional[str] = None  # an agent call's system prompt
    schema: JsonValue = None  # a model call's requested type as JSON Schema


@dataclass
class _Envelope:
    """The fields every reply carries: the session it is about, the request's id echoed, the
    status that names the reply's class (each class narrows it to its own value) and, in ``raw``,
    the whole object it was read from. Keyword-only (Python 3.10+), so each reply's own required
    fields come first in its constructor without clashing with these defaults."""

    session: str = field(kw_only=True)
    id: Optional[RequestId] = field(default=None, kw_only=True)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False, kw_only=True)
    status: str = field(default="", kw_only=True)


@dataclass
class RejectedReply(_Envelope):
    """The program does not run: nothing ran and no host call was made."""

    stage: RejectStage
    diagnostics: List[Diagnostic]
    rendered: str  # the diagnostics as remitc check prints them
    requires: List[str]  # every capability and model the program needs
    status: Literal["rejected"] = field(default="rejected", kw_only=True)


@dataclass
class HostCallReply(_Envelope):
    """The run is paused at a host call: perform, deny or fail it."""

    call: HostCall
    status: Literal["host-call"] = field(default="host-call", kw_only=True)


@dataclass
class CompletedReply(_Envelope):
    """The run finished with main's value."""

    result: JsonValue
    type: str  # main's static type
    result_tags: List[str]  # the result's deep tags
    tags: List[str]  # the same list under its older name
    host_calls: int
    steps: int
    spent_usd: float
    status: Literal["completed"] = field(default="completed", kw_only=True)


@dataclass
class FailedReply(_Envelope):
    """The run failed: one runtime diagnostic."""

    stage: FailStage
    diagnostics: List[Diagnostic]
    rendered: str
    host_calls: int
    status: Literal["failed"] = field(default="failed", kw_only=True)


@dataclass
class ErrorDetail:
    code: ErrorCode
    message: str


@dataclass
class ErrorReply(_Envelope):
    """The request could not be served. The client raises it as RemitServerError."""

    error: ErrorDetail
    session: Optional[str] = field(default=None, kw_only=True)  # none when the request named none
    status: Literal["error"] = field(default="error", kw_only=True)


#: What a run or resume answers: a pause, or the end of the session.
Outcome = Union[RejectedReply, HostCallReply, CompletedReply, FailedReply]
#: The end of a run.
Final = Union[RejectedReply, CompletedReply, FailedReply]
Reply = Union[Outcome, ErrorReply]

REPLY_TYPES: Dict[str, type] = {
    "rejected": RejectedReply,
    "host-call": HostCallReply,
    "completed": CompletedReply,
    "failed": FailedReply,
    "error": ErrorReply,
}


# ---------------------------------------------------------------- decoding


class _Malformed(Exception):
    pass


def _decode(value: Any, hint: Any, where: str) -> Any:
    """``value`` as ``hint`` (an annotation), or _Malformed naming ``where``."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return value
    if origin is Union:
        if value is None and type(None) in args:
            return None
        for option in args:
            if option is type(None):
                continue
            try:
                return _decode(value, option, where)
            except _Malformed:
                pass
        raise _Malformed(where)
    if origin is Literal:
        # Any string passes, so a value a newer server adds does not break an older client.
        if not isinstance(value, type(args[0])):
            raise _Malformed(where)
        return value
    if origin in (list, List):
        if not isinstance(value, list):
            raise _Malformed(where)
        return [_decode(v, args[0], where) for v in value]
    if origin in (dict, Dict):
        if not isinstance(value, dict):
            raise _Malformed(where)
        return {k: _decode(v, args[1], where) for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return _from_json(hint, value, where)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _Malformed(where)
        return float(value)
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Malformed(where)
        return value
    if not isinstance(value, hint):
        raise _Malformed(where)
    return value


def _from_json(cls: Any, obj: Any, where: str) -> Any:
    if not isinstance(obj, dict):
        raise _Malformed(where)
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        if f.name == "raw":
            values["raw"] = obj
            continue
        if f.name not in obj:
            has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            if has_default:
                continue
            raise _Malformed(f"{where} has no '{f.name}'")
        values[f.name] = _decode(obj[f.name], hints[f.name], f"{where} has a malformed '{f.name}'")
    return cls(**values)


def decode_reply(line: Union[str, bytes]) -> Reply:
    """A line printed by ``remitvm serve`` as a reply object; RemitProtocolError if it is not one."""
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    try:
        obj = json.loads(text)
    except ValueError:
        raise RemitProtocolError("the server printed a line that is not JSON", text) from None
    if not isinstance(obj, dict):
        raise RemitProtocolError("the server printed a line that is not a JSON object", text)
    cls = REPLY_TYPES.get(obj.get("status")) if isinstance(obj.get("status"), str) else None
    if cls is None:
        raise RemitProtocolError(f"the server printed a reply with an unknown status {json.dumps(obj.get('status'))}",
                                 text)
    try:
        return _from_json(cls, obj, f"the server's '{obj['status']}' reply")
    except _Malformed as e:
        raise RemitProtocolError(str(e), text) from None


def declared_fields(cls: type) -> List[str]:
    """The protocol fields a message class declares (for tests holding the types to the server)."""
    return [f.name for f in dataclasses.fields(cls) if f.name != "raw"]
