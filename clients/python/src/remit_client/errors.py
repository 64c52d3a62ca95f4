"""The errors ``remit_client`` raises: every way a request can fail is one of these classes, so a
host can tell a refused request from a dead server from a garbled line, and none of them is a hang.
``client.py`` raises them; ``protocol.py`` raises RemitProtocolError.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from .protocol import ErrorReply


class RemitError(Exception):
    """The base class of every error this package raises."""


class RemitServerError(RemitError):
    """The server answered the request with an ``error`` reply (docs/serve.md, "Errors").

    ``code`` is ``bad_request``, ``unknown_session``, ``session_busy``, ``wrong_call``,
    ``not_paused``, ``too_many_sessions`` or ``host_error``; ``reply`` is the ErrorReply.
    """

    def __init__(self, reply: "ErrorReply"):
        super().__init__(f"{reply.error.code}: {reply.error.message}")
        self.code = reply.error.code
        self.reply = reply


class RemitProcessError(RemitError):
    """``remitvm serve`` could not be started, or exited while requests were waiting.

    ``exit_code`` is its exit code (negative: the signal that killed it; None: it never started);
    ``stderr`` the last 4 KiB it wrote on stderr.
    """

    def __init__(self, message: str, exit_code: Optional[int] = None, stderr: str = ""):
        super().__init__(message)
        self.exit_code = exit_code
        self.stderr = stderr


class RemitProtocolError(RemitError):
    """The server printed a line that is not a reply of the protocol; the client stops the server.

    ``line`` is the offending line, cut to 200 characters.
    """

    def __init__(self, message: str, line: str):
        super().__init__(message)
        self.line = line if len(line) <= 200 else line[:200] + "…"


class RemitTimeoutError(RemitError):
    """No reply within the request's timeout; the client aborts the session."""

    def __init__(self, message: str, timeout_s: float):
        super().__init__(message)
        self.timeout_s = timeout_s


class RemitRequestError(RemitError):
    """The request was refused before it was sent: too large, or the client is closed."""
