"""Live adapters for the crash-safety harness (`remitvm run ... --live`): the same de-duplicating
service as the adapter process (tests/e2e/adapters/dedup_service.py), behind the live shim."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "e2e", "adapters"))
from dedup_service import Service  # noqa: E402

from remit.rterrors import CapabilityFailed  # noqa: E402


def make_adapters(app_dir):
    service = Service()

    def answer(reply):
        if not reply["ok"]:
            raise CapabilityFailed(reply["message"])
        return reply["result"]

    def capability(name):
        return lambda args, ctx: answer(service.handle(
            {"type": "call", "resource": name, "args": args, "idempotency_key": ctx.idempotency_key}))

    def models(request, ctx):
        return answer(service.handle({"type": "ask", **request, "idempotency_key": ctx.idempotency_key}))

    return {name: capability(name) for name in ("web.fetch", "notes.save", "pay.send")} | {"models": models}
