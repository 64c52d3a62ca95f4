"""Runtime error classes an adapter may raise; the shim maps them onto protocol errors.

CapabilityFailed -> "CapabilityFailed", Timeout (and the built-in TimeoutError) -> "Timeout",
ModelOutputInvalid -> "ModelOutputInvalid"; any other RemitRuntimeError -> "CapabilityFailed"
with its code in the message.
"""


class RemitRuntimeError(Exception):
    code = "R0000"
    operational = False

    def __init__(self, message="", span=None, data=None):
        super().__init__(message)
        self.message = message
        self.span = span
        self.data = dict(data or {})

    def render(self):
        return f"runtime error[{self.code}]: {self.message}"


def _error(name, code, operational=False):
    return type(name, (RemitRuntimeError,), {"code": code, "operational": operational, "__module__": __name__})


EvalError = _error("EvalError", "R0101")
ListBoundExceeded = _error("ListBoundExceeded", "R0113")
PolicyViolation = _error("PolicyViolation", "R0301")
ApprovalRequired = _error("ApprovalRequired", "R0302")
NotGranted = _error("NotGranted", "R0303")
BudgetExceeded = _error("BudgetExceeded", "R0401")
CallLimitExceeded = _error("CallLimitExceeded", "R0402")
NonIdempotentRetry = _error("NonIdempotentRetry", "R0405")
CapabilityFailed = _error("CapabilityFailed", "R0501", True)
ModelOutputInvalid = _error("ModelOutputInvalid", "R0502", True)
Timeout = _error("Timeout", "R0503", True)
ReplayDivergence = _error("ReplayDivergence", "R0601")
