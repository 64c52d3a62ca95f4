"""remit_client: run checked Remit programs from Python, through ``remitvm serve`` (docs/serve.md).

The package's entry point: the client (client.py), the protocol's message types and reply
decoder (protocol.py), and the errors it raises (errors.py). Standard library only.
"""

from .client import CallAnswer, RemitClient
from .errors import (
    RemitError,
    RemitProcessError,
    RemitProtocolError,
    RemitRequestError,
    RemitServerError,
    RemitTimeoutError,
)
from .protocol import (
    AbortRequest,
    CompletedReply,
    Deny,
    Diagnostic,
    ErrorDetail,
    ErrorReply,
    Fail,
    FailedReply,
    Final,
    Grant,
    HostCall,
    HostCallReply,
    Limits,
    Outcome,
    Perform,
    RejectedReply,
    Reply,
    ResumeRequest,
    RunRequest,
    Span,
    decode_reply,
    declared_fields,
)

__version__ = "0.1.0"

__all__ = [
    "AbortRequest", "CallAnswer", "CompletedReply", "Deny", "Diagnostic", "ErrorDetail", "ErrorReply", "Fail",
    "FailedReply", "Final", "Grant", "HostCall", "HostCallReply", "Limits", "Outcome", "Perform", "RejectedReply",
    "RemitClient", "RemitError", "RemitProcessError", "RemitProtocolError", "RemitRequestError", "RemitServerError",
    "RemitTimeoutError", "Reply", "ResumeRequest", "RunRequest", "Span", "decode_reply", "declared_fields",
]
