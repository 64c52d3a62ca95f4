"""The two broker types adapter code sees: the result wrapper and the per-call context."""
from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass
class AdapterResult:
    """A result with its actual cost (None: the declared cost applies) and free-form trace metadata."""
    value: Any
    cost_usd: Optional[float] = None
    meta: dict = field(default_factory=dict)


@dataclass
class CallContext:
    """`idempotency_key`: 32 hex characters, distinct per attempt, stable across resume; `timeout`: seconds or None."""
    idempotency_key: str
    timeout: Optional[float]
    run_id: str
