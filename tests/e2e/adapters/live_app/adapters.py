"""A tiny prototype-style adapters.py for the --live shim tests (imports as the prototype's examples do)."""
import os

from remit.broker import AdapterResult
from remit.models import render_prompt
from remit.rterrors import CapabilityFailed, PolicyViolation
from remit.stdadapters import Ledger, RootedFiles


def make_adapters(app_dir):
    files = RootedFiles(app_dir)
    ledger_path = os.environ.get("LIVE_APP_LEDGER")

    def echo(args, ctx):
        return {"args": args, "key": ctx.idempotency_key, "timeout": ctx.timeout, "run_id": ctx.run_id}

    def noisy(args, ctx):
        print("this goes to stderr, not to the protocol")
        os.system("echo 'and so does a subprocess'")
        return "quiet"

    def post(args, ctx):
        if not ledger_path:
            raise CapabilityFailed("LIVE_APP_LEDGER is not set")
        return Ledger(ledger_path).append({"type": "post", **args}, ctx.idempotency_key)

    def llm(req, ctx):
        return AdapterResult({"prompt": render_prompt(req), "rendered": req["rendered_prompt"], "agent": req["agent"],
                              "type_name": req["type_name"]}, 0.01, {"adapter": "test-model"})

    return {
        "notes.echo": echo,
        "notes.priced": lambda a, c: AdapterResult([1, 2, 3], cost_usd=0.5, meta={"source": "test"}),
        "notes.fail": lambda a, c: (_ for _ in ()).throw(CapabilityFailed("nope")),
        "notes.boom": lambda a, c: {}["missing"],
        "notes.slow": lambda a, c: (_ for _ in ()).throw(TimeoutError()),
        "notes.denied": lambda a, c: (_ for _ in ()).throw(PolicyViolation("not here")),
        "notes.set": lambda a, c: {1, 2},
        "notes.noisy": noisy,
        "notes.read": lambda a, c: files.read(a["path"]),
        "ledger.post": post,
        "llm": llm,
    }
