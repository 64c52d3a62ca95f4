"""Live adapters for refund_bot: an offline stand-in for a small web shop's back office.

`remitvm run examples/refund_bot/refund_bot.rmt --live ...` loads this file through
scripts/remit-py-adapter (docs/adapters.md). Nothing here touches the network:

- crm.customer_by_email / shop.order read an in-memory CRM and order book;
- payments.refund and email.send are the side effects: each is appended to an effects log,
  `.remit-effects.jsonl` next to this file, or the file named by $REMIT_EFFECTS_LOG. A refund is
  de-duplicated on the call's idempotency key, so a resumed run that re-executes the call gets
  the earlier receipt instead of paying twice. The log is also the payment provider's memory:
  an order refunded in an earlier run shows as "refunded" (delete the log to reset the shop);
- `models` answers the Triager and Writer agents with deterministic keyword rules instead of a
  model service. Like a careful model, the triage ignores instructions written inside the ticket.
"""
import datetime
import json
import os
import re

from remit.broker import AdapterResult
from remit.rterrors import CapabilityFailed

CUSTOMERS = [
    {"id": "C-1", "name": "Ada Lovelace", "email": "ada@example.com"},
    {"id": "C-2", "name": "Charles Babbage", "email": "charles@example.com"},
    {"id": "C-9", "name": "Mallory Evans", "email": "mallory@evil.example"},
]

ORDERS = {
    "A-1001": {"customer_id": "C-1", "total": 49.5, "status": "delivered"},  # the broken kettle
    "A-1002": {"customer_id": "C-1", "total": 18.0, "status": "shipped"},
    "A-0990": {"customer_id": "C-1", "total": 12.0, "status": "refunded"},
    "B-2002": {"customer_id": "C-9", "total": 310.0, "status": "paid"},  # what the injection asks for
    "C-3003": {"customer_id": "C-2", "total": 99.0, "status": "paid"},
}

FIRST_RECEIPT = 7731


# ---------------------------------------------------------------------------------------------
# The effects log: one JSON object per line, de-duplicated on the idempotency key.

class EffectsLog:
    def __init__(self, app_dir):
        path = os.environ.get("REMIT_EFFECTS_LOG") or os.path.join(app_dir, ".remit-effects.jsonl")
        if os.path.isdir(path):
            path = os.path.join(path, ".remit-effects.jsonl")
        self.path = path

    def entries(self):
        if not os.path.exists(self.path):
            return []
        with open(self.path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def find(self, key):
        return next((e for e in self.entries() if e.get("idempotency_key") == key), None)

    def append(self, effect, args, result, ctx):
        entry = {"effect": effect, "args": args, "result": result, "run_id": ctx.run_id,
                 "idempotency_key": ctx.idempotency_key,
                 "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")
        return entry


# ---------------------------------------------------------------------------------------------
# The rule-based "model".

ORDER_ID = re.compile(r"\b[A-Z]-\d{4}\b")
INJECTION = re.compile(r"ignore (all |your )?(previous )?(rules|instructions)|system note|to the assistant|"
                       r"assistant:|as an ai", re.I)
INTENT_WORDS = [
    ("refund", ("refund", "money back", "broken", "cracked", "damaged", "return it")),
    ("order_status", ("where is", "status", "tracking", "not arrived", "hasn't arrived", "when will")),
    ("complaint", ("unhappy", "rude", "complain", "terrible", "disappointed")),
]


def sentences(text):
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text or "") if s.strip()]


def triage(ticket):
    """Intent, order id and reason from the ticket, reading only what the customer wrote: sentences
    that address the assistant (prompt injection) are set aside."""
    if not isinstance(ticket, dict):
        ticket = {"subject": "", "body": str(ticket or "")}
    parts = sentences(ticket.get("subject", "")) + sentences(ticket.get("body", ""))
    kept = [s for s in parts if not INJECTION.search(s)]
    ignored = len(parts) - len(kept)
    # Everything after an injected instruction in the same paragraph belongs to it.
    body_kept = []
    for s in sentences(ticket.get("body", "")):
        if INJECTION.search(s):
            break
        body_kept.append(s)
    text = " ".join(sentences(ticket.get("subject", "")) + body_kept)
    lower = text.lower()
    intent = next((name for name, words in INTENT_WORDS if any(w in lower for w in words)), "other")
    match = ORDER_ID.search(text)
    order_id = match.group(0) if match else ""
    cue = next((s for s in body_kept if order_id and order_id in s), None) or (body_kept or kept or [""])[0]
    reason = {"refund": "the customer asks for a refund", "order_status": "the customer asks where an order is",
              "complaint": "the customer complains", "other": "no request found"}[intent]
    reason += f": \"{cue}\"" if cue else ""
    if ignored:
        reason += " (the ticket also holds instructions addressed to the assistant; they were ignored)"
    return {"intent": intent, "order_id": order_id, "reason": reason}


def write_reply(prompt):
    m = re.search(r"reply to (.+?)\. Outcome: (.*)$", prompt or "", re.S)
    name, outcome = (m.group(1).strip(), m.group(2).strip()) if m else ("there", "")
    first = name.split()[0] if name else "there"
    if (r := re.match(r"refunded ([\d.]+) for order (\S+)", outcome)):
        news = f"We have refunded {float(r.group(1)):.2f} for order {r.group(2)}; it should reach you within five working days."
    elif (r := re.match(r"order (\S+) is (\w+)", outcome)):
        news = f"Order {r.group(1)} is currently {r.group(2)}."
    elif (r := re.match(r"order (\S+) was already refunded", outcome)):
        news = f"Order {r.group(1)} has already been refunded, so there is nothing more to do."
    elif outcome.startswith("passed to a person"):
        news = "A member of our support team will get back to you shortly."
    elif outcome.startswith(("refused", "no such order")):
        news = "We could not find that order on your account, so we have not changed anything."
    elif outcome.startswith("no order number"):
        news = "Could you tell us the order number (it looks like A-1234) so we can help?"
    else:
        news = "There is nothing you need to do."
    return f"Dear {first}, thank you for getting in touch. {news}"


def default_for(schema):
    """The simplest value of a JSON Schema (for asks the rules do not know)."""
    if "enum" in schema:
        return schema["enum"][-1]
    kind = schema.get("type")
    if kind == "object":
        return {k: default_for(s) for k, s in schema.get("properties", {}).items()}
    return {"array": [], "string": "", "boolean": False, "integer": 0, "number": 0.0}.get(kind)


def make_adapters(app_dir):
    log = EffectsLog(app_dir)

    def current(order_id):
        """The order as the shop sees it now: refunds recorded in the effects log count."""
        o = ORDERS.get(order_id.strip().upper())
        if o is None:
            return None
        oid = order_id.strip().upper()
        refunded = any(e["effect"] == "payments.refund" and e["args"].get("order_id") == oid for e in log.entries())
        return {"id": oid, **o, **({"status": "refunded"} if refunded else {})}

    def customer_by_email(args, ctx):
        email = args["email"].strip().lower()
        for c in CUSTOMERS:
            if c["email"] == email:
                return AdapterResult(dict(c), meta={"source": "crm"})
        raise CapabilityFailed(f"no customer with email {args['email']!r}")

    def order(args, ctx):
        o = current(args["order_id"])
        if o is None:
            raise CapabilityFailed(f"no order {args['order_id']!r}")
        return AdapterResult(o, meta={"source": "shop"})

    def refund(args, ctx):
        earlier = log.find(ctx.idempotency_key)
        if earlier is not None:  # a resumed run re-executing the same call: same receipt, no second payment
            return AdapterResult(earlier["result"], meta={"deduplicated": True})
        o = current(args["order_id"])
        if o is None:
            raise CapabilityFailed(f"payments: unknown order {args['order_id']!r}")
        if o["status"] == "refunded":
            raise CapabilityFailed(f"payments: order {o['id']} is already refunded")
        if not 0 < args["amount"] <= o["total"]:
            raise CapabilityFailed(f"payments: amount {args['amount']} is not within the order total {o['total']}")
        receipt = f"rf_{FIRST_RECEIPT + sum(1 for e in log.entries() if e['effect'] == 'payments.refund')}"
        log.append("payments.refund", args, receipt, ctx)
        return AdapterResult(receipt, meta={"effects_log": log.path})

    def send(args, ctx):
        if log.find(ctx.idempotency_key) is None:
            log.append("email.send", args, None, ctx)
        return AdapterResult(None, meta={"effects_log": log.path})

    def models(req, ctx):
        if req.get("agent") == "Triager":
            value, rule = triage(req.get("context")), "triage"
        elif req.get("agent") == "Writer" or req.get("type_name") == "Str":
            value, rule = write_reply(req.get("prompt")), "reply"
        else:
            value, rule = default_for(req.get("schema") or {}), "default"
        # Priced like a small hosted model: about 4 characters a token, $3 per million tokens.
        tokens = (len(req.get("rendered_prompt") or "") + len(json.dumps(value))) / 4
        return AdapterResult(value, cost_usd=round(tokens * 3e-6, 6), meta={"model": "rules-v1", "rule": rule})

    return {
        "crm.customer_by_email": customer_by_email,
        "shop.order": order,
        "payments.refund": refund,
        "email.send": send,
        "models": models,
    }
