#!/usr/bin/env python3
"""The example apps under examples/ end to end: each checks under its own policy with no
warnings, is canonically formatted, and has a manifest whose bounds, costs, approval sites and
flows match what we worked out by hand (the arithmetic is in the comments). Also: the unsafe
variant of email_assistant is rejected with E0301, the program hash and call-site ids survive
reformatting, the policies are exactly as tight as the bounds, and the early-return rule is what
keeps research_digest within its agent's max_calls. And each example runs --live on its own
adapters.py (offline systems and a rule-based model), with its side effects in REMIT_EFFECTS_LOG."""
import json
import os
import re
import shutil
import subprocess
import sys

from harness import REMIT, REMITC, REMITVM, REPO, Result, Workspace, expect, main, run

# The tools may be given relative to the current directory (REMITC=build/cli/remitc); several
# tests run them from temporary directories.
REMITC, REMIT, REMITVM = (os.path.abspath(t) if os.sep in t else t for t in (REMITC, REMIT, REMITVM))

EXAMPLES = REPO / "examples"
APPS = ["refund_bot", "email_assistant", "research_digest"]
TAGS_NOTE = "the host forbids this flow; it cannot be approved. Use a different source for this value"


def app_file(app, name=None):
    return EXAMPLES / app / (name or f"{app}.rmt")


def rel(app, name=None):
    return f"examples/{app}/{name or app + '.rmt'}"


def line_of(path, snippet, nth=1):
    """1-based line of the nth line containing snippet (the tests pin sites by their text, so a
    comment added above them does not break the test, but a wrong line still does)."""
    hits = [i + 1 for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()) if snippet in line]
    expect(len(hits) >= nth, f"{path.name}: no line {nth} containing {snippet!r}")
    return hits[nth - 1]


def manifest_of(path, cwd=REPO):
    r = run(REMITC, "manifest", path, cwd=cwd)
    expect(r.code == 0, f"manifest {path}", r)
    return json.loads(r.out)


def usd(x):
    return round(x, 6)


def resource_calls(m):
    return {name: r["max_calls"] for name, r in m["resources"].items()}


def site(m, site_id):
    found = [s for s in m["call_sites"] if s["site"] == site_id]
    expect(len(found) == 1, f"exactly one call site {site_id}: {m['call_sites']}")
    return found[0]


def flows(m):
    return {f["sink"]: f for f in m["flows"]}


def sites(*pairs):
    return [{"site": s, "via": v} for s, v in pairs]


# ---------------------------------------------------------------------------------------------
# Every example checks under its policy, with no warnings, and is canonical.

def test_examples_check_under_their_policies():
    for app in APPS:
        r = run(REMITC, "check", rel(app), cwd=REPO)
        expect(r.code == 0, f"{app}: check exit 0", r)
        expect(r.out.rstrip("\n").splitlines()[-1] == f"ok: {rel(app)} (policy {rel(app, 'policy.toml')})",
               f"{app}: ok line names the discovered policy", r)
        expect(r.err == "", f"{app}: no warnings or errors on stderr", r)
        r2 = run(REMITC, "check", rel(app), "--policy", rel(app, "policy.toml"), cwd=REPO)
        expect((r2.code, r2.out) == (r.code, r.out), f"{app}: explicit --policy gives the same result", r2)
        r3 = run(REMIT, "check", rel(app), cwd=REPO)
        expect((r3.code, r3.out, r3.err) == (r.code, r.out, r.err), f"{app}: remit check == remitc check", r3)
        r = run(REMITC, "check", rel(app), "--json", cwd=REPO)
        doc = json.loads(r.out)
        expect(r.code == 0 and doc["ok"] is True and doc["diagnostics"] == [], f"{app}: --json clean", r)
        expect(doc["policy"] == rel(app, "policy.toml"), f"{app}: --json policy path", r)


def test_examples_are_canonically_formatted():
    for app in APPS + ["email_assistant/unsafe_variant"]:
        folder = app.split("/")[0]
        files = [f"{app}.rmt" if "/" in app else f"{app}/{app}.rmt", f"{folder}/host.rmti"]
        r = run(REMITC, "fmt", "--check", *files, cwd=EXAMPLES)
        expect(r.code == 0 and r.out == "", f"{app}: fmt --check", r)


def test_example_folders_are_complete():
    fixture_keys = {"_note", "approve_all", "capabilities", "models", "model"}
    cap_entry_keys = {"args", "output", "error", "error_code", "cost_usd", "repeat"}
    model_entry_keys = {"agent", "match", "output", "answer", "error", "error_code", "cost_usd", "repeat"}
    for app in APPS:
        folder = EXAMPLES / app
        for name in (f"{app}.rmt", "host.rmti", "policy.toml", "inputs.json", "fixtures/run.json", "README.md"):
            expect((folder / name).is_file(), f"{app}: {name} exists")
        m = manifest_of(rel(app))
        inputs = json.loads((folder / "inputs.json").read_text(encoding="utf-8"))
        expect(set(inputs) == set(m["inputs"]), f"{app}: inputs.json gives every main parameter: {inputs}")
        source = app_file(app).read_text(encoding="utf-8")
        tests = re.findall(r'^test "[^"]+" fixtures "([^"]+)" \{', source, re.M)
        expect(len(tests) >= 1, f"{app}: at least one test block with fixtures")
        for fixture in ["fixtures/run.json"] + tests:
            path = folder / fixture
            expect(path.is_file(), f"{app}: fixture {fixture} exists")
            doc = json.loads(path.read_text(encoding="utf-8"))
            expect(set(doc) <= fixture_keys, f"{app}/{fixture}: top-level keys {sorted(doc)}")
            for resource, entries in doc.get("capabilities", {}).items():
                expect(resource in m["uses"], f"{app}/{fixture}: {resource} is in uses")
                for e in entries:
                    expect(set(e) <= cap_entry_keys and ("output" in e) != ("error" in e),
                           f"{app}/{fixture}: capability entry {e}")
            model_entries = doc.get("model", []) + [e for es in doc.get("models", {}).values() for e in es]
            for model in doc.get("models", {}):
                expect(m["resources"].get(model, {}).get("kind") == "model", f"{app}/{fixture}: model {model}")
            for e in model_entries:
                expect(set(e) <= model_entry_keys, f"{app}/{fixture}: model entry {e}")
                expect(e.get("agent") is None or e["agent"] in m["agents"], f"{app}/{fixture}: agent {e}")
        readme = (folder / "README.md").read_text(encoding="utf-8")
        expect(f"remitc check examples/{app}/{app}.rmt" in readme, f"{app}: README shows the check command")


# ---------------------------------------------------------------------------------------------
# refund_bot

def test_refund_bot_manifest():
    path = app_file("refund_bot")
    m = manifest_of(rel("refund_bot"))
    expect(m["program"] == "refund_bot", "program name")
    expect(m["uses"] == ["crm.customer_by_email", "shop.order", "payments.refund", "email.send", "llm"], "uses")
    expect(m["inputs"] == {"ticket": ["untrusted"]}, "the ticket is untrusted")
    # crm.customer_by_email: one lookup                                  = 1
    # llm: Triager.ask ... retry 1 (2) + Writer.ask (1)                   = 3
    # shop.order: retry 1 = 2 in refund() and 2 in status(); they are exclusive arms of one
    #   match, so max(2, 2)                                               = 2
    # payments.refund: once, after the early-return guards                = 1
    # email.send: once                                                    = 1
    expect(resource_calls(m) == {"crm.customer_by_email": 1, "email.send": 1, "llm": 3, "payments.refund": 1,
                                 "shop.order": 2}, f"bounds: {resource_calls(m)}")
    expect(list(m["resources"]) == sorted(m["resources"]), "resources sorted by name")
    expect(m["agents"] == {"Triager": {"model": "llm", "max_calls_declared": 2, "max_calls_worst_case": 2},
                           "Writer": {"model": "llm", "max_calls_declared": 1, "max_calls_worst_case": 1}}, "agents")
    # 3 × 0.015 + 1 × 0.001 + 2 × 0.0005 + 1 × 0.002 + 1 × 0.0002
    #   = 0.045 + 0.001 + 0.001 + 0.002 + 0.0002 = 0.0492
    expect(usd(m["worst_case_cost_usd"]) == 0.0492, f"worst case {m['worst_case_cost_usd']}")
    expect(usd(m["resources"]["llm"]["worst_case_cost"]) == 0.045, "llm cost")
    expect(usd(m["resources"]["shop.order"]["worst_case_cost"]) == 0.001, "shop.order cost")
    expect(m["budget_usd"] == 0.08, "budget")
    crm = m["resources"]["crm.customer_by_email"]
    expect(crm["output_tags"] == ["private"] and crm["clears"] == ["untrusted"] and crm["idempotent"], "crm entry")
    refund = m["resources"]["payments.refund"]
    expect(not refund["idempotent"] and not refund["approval_always"], "refund entry")

    # Sites: fn#k, 0-based per function in pre-order.
    expect([s["site"] for s in m["call_sites"]] ==
           ["main#0", "main#1", "main#2", "main#3", "refund#0", "refund#1", "status#0"], "site ids in line order")
    expect(site(m, "main#0")["line"] == line_of(path, "crm.customer_by_email(ticket.sender)"), "main#0 line")
    t = site(m, "main#1")
    expect((t["resource"], t["agent"], t["retry"], t["fallback"]) == ("llm", "Triager", 1, True), f"main#1: {t}")
    w = site(m, "main#2")
    expect((w["agent"], w["retry"], w["fallback"]) == ("Writer", 0, True), f"main#2: {w}")
    expect(site(m, "main#3")["resource"] == "email.send" and site(m, "main#3")["approval"] == "none", "main#3")
    expect(site(m, "refund#0")["resource"] == "shop.order" and site(m, "refund#0")["retry"] == 1, "refund#0")
    expect(site(m, "status#0")["resource"] == "shop.order", "status#0")

    # The one approval site: the refund, reached only under the match on the model's untrusted
    # intent. Its arguments come from the shop (private, not untrusted), so it is control flow.
    r = site(m, "refund#1")
    expect(r["line"] == line_of(path, "payments.refund(order_id: order.id"), "refund#1 line")
    expect(r["approval"] == "possible", "approval possible")
    expect(r["reasons"] == ["'order_id' may be untrusted (control flow: input 'ticket')",
                            "'amount' may be untrusted (control flow: input 'ticket')"], f"reasons {r['reasons']}")
    expect(m["approval_sites"] == [r], "approval_sites lists exactly the refund")

    f = flows(m)
    expect(sorted(f) == ["crm.customer_by_email.email", "email.send.body", "email.send.subject", "email.send.to",
                         "payments.refund.amount", "payments.refund.order_id", "shop.order.order_id"], f"sinks {sorted(f)}")
    for sink in ("payments.refund.order_id", "payments.refund.amount"):
        expect(f[sink]["tags"] == ["private", "untrusted"] and f[sink]["verdict"] == "requires approval", sink)
        expect(f[sink]["sites"] == sites(("refund#1", "control"), ("refund#1", "data")), f"{sink} sites")
    # The recipient comes from the CRM: private, and never untrusted (not even through control).
    expect(f["email.send.to"] == {"sink": "email.send.to", "tags": ["private"], "verdict": "allowed",
                                  "sites": sites(("main#3", "data"))}, f"email.send.to {f['email.send.to']}")
    expect(f["email.send.body"]["tags"] == ["private", "untrusted"] and f["email.send.body"]["verdict"] == "allowed",
           "email body")
    expect(f["crm.customer_by_email.email"]["sites"] == sites(("main#0", "data")), "crm lookup by the sender")
    expect(f["shop.order.order_id"]["sites"] == sites(("refund#0", "control"), ("refund#0", "data"),
                                                       ("status#0", "control"), ("status#0", "data")), "order lookups")


def test_refund_bot_refunding_the_ticket_order_id_is_E0301():
    """Pass the order id from the model's reading of the ticket straight to the refund."""
    src = app_file("refund_bot").read_text(encoding="utf-8")
    bad = src.replace("payments.refund(order_id: order.id,", "payments.refund(order_id: order_id,")
    expect(bad != src, "the variant differs")
    with Workspace({"host.rmti": app_file("refund_bot", "host.rmti").read_text(encoding="utf-8"),
                    "bad.rmt": bad}) as ws:
        r = run(REMITC, "check", "bad.rmt", "--json", cwd=ws.path)
        expect(r.code == 1, "exit 1", r)
        diags = json.loads(r.out)["diagnostics"]
        expect([d["code"] for d in diags] == ["E0301"], f"exactly E0301: {diags}", r)
        d = diags[0]
        expect(d["line"] == line_of(ws.path / "bad.rmt", "payments.refund(order_id: order_id,"), "line", r)
        expect(d["message"] == "data tagged untrusted flows into 'payments.refund' parameter 'order_id', which "
               "denies it", "message", r)
        expect(d["notes"] == ["'order_id' is untrusted because it derives from input 'ticket'"], "origin", r)


# ---------------------------------------------------------------------------------------------
# email_assistant

def test_email_assistant_manifest():
    path = app_file("email_assistant")
    m = manifest_of(rel("email_assistant"))
    expect(m["inputs"] == {"folder": ["private"]}, "folder input")
    # email.inbox: retry 2                                                = 3
    # llm: Summarizer, 10 mails (List[Mail] max 10) × retry 1 (2)         = 20
    #      Drafter, take(wanted, 3) = 3 replies × retry 1 (2)            = 6   → llm 26
    # contacts.lookup: 3 replies × retry 1 (2)                            = 6
    # email.send: 3 replies × 1 (after two early-return guards)           = 3
    expect(resource_calls(m) == {"contacts.lookup": 6, "email.inbox": 3, "email.send": 3, "llm": 26},
           f"bounds: {resource_calls(m)}")
    expect(m["agents"] == {"Summarizer": {"model": "llm", "max_calls_declared": 20, "max_calls_worst_case": 20},
                           "Drafter": {"model": "llm", "max_calls_declared": 6, "max_calls_worst_case": 6}}, "agents")
    # 3 × 0.0005 + 26 × 0.003 + 6 × 0.0002 + 3 × 0.001
    #   = 0.0015 + 0.078 + 0.0012 + 0.003 = 0.0837
    expect(usd(m["worst_case_cost_usd"]) == 0.0837, f"worst case {m['worst_case_cost_usd']}")
    expect(m["budget_usd"] == 0.15, "budget")
    inbox = m["resources"]["email.inbox"]
    expect(inbox["output_tags"] == ["private", "untrusted"] and inbox["idempotent"], f"inbox {inbox}")

    expect([s["site"] for s in m["call_sites"]] == ["main#0", "main#1", "reply#0", "reply#1", "reply#2"], "sites")
    inbox_line = line_of(path, "email.inbox(folder) retry 2")
    expect(site(m, "main#0")["line"] == inbox_line and site(m, "main#0")["retry"] == 2, "main#0")
    expect(site(m, "main#1")["agent"] == "Summarizer", "main#1")
    expect(site(m, "reply#0")["resource"] == "contacts.lookup", "reply#0")
    expect(site(m, "reply#1")["agent"] == "Drafter", "reply#1")
    send = site(m, "reply#2")
    expect(send["line"] == line_of(path, "email.send(to: contact.email"), "reply#2 line")
    expect(send["approval"] == "possible", "a drafted body needs approval")
    expect(send["reasons"] == [f"'body' may be untrusted (data: email.inbox (line {inbox_line}))"],
           f"reasons {send['reasons']}")
    expect(m["approval_sites"] == [send], "one approval site")

    f = flows(m)
    expect(f["email.send.body"]["verdict"] == "requires approval", "body verdict")
    expect(f["email.send.body"]["sites"] == sites(("reply#2", "control"), ("reply#2", "data")), "body sites")
    # The recipient is the address book's (private) by data; untrusted reaches it only through
    # the loop over untrusted mails, which `deny` does not cover (spec §7): allowed.
    expect(f["email.send.to"]["tags"] == ["private", "untrusted"] and f["email.send.to"]["verdict"] == "allowed",
           f"to {f['email.send.to']}")
    expect(f["email.inbox.folder"] == {"sink": "email.inbox.folder", "tags": ["private"], "verdict": "allowed",
                                       "sites": sites(("main#0", "data"))}, "folder flow")


def test_email_assistant_unsafe_variant_is_the_same_program_but_the_address():
    """Apart from comments and tests, the variant only adds the model call that extracts an address and
    sends to it."""
    def code(name):  # the program without comments and test blocks (the variant carries no tests)
        lines = app_file("email_assistant", name).read_text(encoding="utf-8").splitlines()
        first_test = next((i for i, line in enumerate(lines) if line.startswith('test "')), len(lines))
        return [line for line in lines[:first_test] if not line.lstrip().startswith("#")]
    safe, unsafe = code("email_assistant.rmt"), code("unsafe_variant.rmt")
    removed = [line for line in safe if line not in unsafe]
    added = [line for line in unsafe if line not in safe]
    expect(removed == ['  email.send(to: contact.email, subject: "Re: {it.mail.subject}", body: draft)'],
           f"removed: {removed}")
    expect(len(added) == 2 and "let reply_to = llm.ask(Str," in added[0] and "context: it.mail.body" in added[0]
           and added[1] == '  email.send(to: reply_to, subject: "Re: {it.mail.subject}", body: draft)', f"added: {added}")


def test_email_assistant_unsafe_variant_is_E0301():
    path = app_file("email_assistant", "unsafe_variant.rmt")
    send_line = line_of(path, "email.send(to: reply_to,")
    inbox_line = line_of(path, "email.inbox(folder) retry 2")
    r = run(REMITC, "check", rel("email_assistant", "unsafe_variant.rmt"), cwd=REPO)
    expect(r.code == 1 and r.out == "", "exit 1, nothing on stdout", r)
    header = (f"examples/email_assistant/unsafe_variant.rmt:{send_line}:18: error[E0301]: data tagged untrusted "
              "flows into 'email.send' parameter 'to', which denies it")
    expect(r.err.startswith(header), "E0301 at the send's 'to' argument", r)
    expect(f"  note: 'reply_to' is untrusted because it derives from email.inbox (line {inbox_line})" in r.err,
           "the note names the origin chain", r)
    expect(f"  hint: {TAGS_NOTE}" in r.err, "hint", r)
    expect(r.err.rstrip().endswith("1 error(s) in examples/email_assistant/unsafe_variant.rmt"), "one error", r)
    r = run(REMITC, "check", rel("email_assistant", "unsafe_variant.rmt"), "--json", cwd=REPO)
    doc = json.loads(r.out)
    expect(r.code == 1 and doc["ok"] is False and doc["manifest"] is None, "json envelope", r)
    expect([(d["code"], d["line"], d["col"]) for d in doc["diagnostics"]] == [("E0301", send_line, 18)], "json", r)
    # The safe program and the variant differ only in where the address comes from.
    r = run(REMITC, "diff", rel("email_assistant"), rel("email_assistant", "unsafe_variant.rmt"), cwd=REPO)
    expect(r.code == 1 and "error[E0301]" in r.err, "diff refuses a side that does not check", r)


# ---------------------------------------------------------------------------------------------
# research_digest

def test_research_digest_manifest():
    path = app_file("research_digest")
    m = manifest_of(rel("research_digest"))
    expect(m["uses"] == ["web.search", "web.fetch", "team.post", "llm"], "uses")
    # web.search: retry 1                                                 = 2
    # web.fetch: for h in hits (max 8) limit 5 → 5 iterations × retry 2 (3) = 15
    # llm: Reader per read(): the early-return guard makes the snippet call (1) an alternative
    #      to the rest (retry 1 = 2): max(1, 2) = 2; × 5 iterations           = 10
    #      Editor: retry 1 after the `len(useful) == 0` guard                  = 2   → llm 12
    # team.post: once, after the guard                                    = 1
    expect(resource_calls(m) == {"llm": 12, "team.post": 1, "web.fetch": 15, "web.search": 2},
           f"bounds: {resource_calls(m)}")
    expect(m["agents"] == {"Reader": {"model": "llm", "max_calls_declared": 10, "max_calls_worst_case": 10},
                           "Editor": {"model": "llm", "max_calls_declared": 2, "max_calls_worst_case": 2}}, "agents")
    # 2 × 0.004 + 15 × 0.0005 + 12 × 0.012 + 1 × 0 = 0.008 + 0.0075 + 0.144 = 0.1595
    expect(usd(m["worst_case_cost_usd"]) == 0.1595, f"worst case {m['worst_case_cost_usd']}")
    expect(usd(m["resources"]["web.fetch"]["worst_case_cost"]) == 0.0075, "fetch cost")
    expect(m["resources"]["team.post"]["approval_always"] is True, "team.post is approval always")
    expect(m["budget_usd"] == 0.2, "budget")
    expect([s["site"] for s in m["call_sites"]] == ["main#0", "main#1", "main#2", "read#0", "read#1", "read#2"],
           "sites: the loop's calls live in read(), numbered there")
    fetch = site(m, "read#0")
    expect(fetch["line"] == line_of(path, "web.fetch(h.url)"), "fetch line")
    expect((fetch["retry"], fetch["timeout_s"], fetch["fallback"]) == (2, 10.0, True), f"fetch modifiers {fetch}")
    expect((site(m, "read#1")["agent"], site(m, "read#1")["retry"]) == ("Reader", 0), "snippet Reader")
    expect((site(m, "read#2")["agent"], site(m, "read#2")["retry"]) == ("Reader", 1), "page Reader")
    expect((site(m, "main#1")["agent"], site(m, "main#1")["line"]) ==
           ("Editor", line_of(path, "Editor.ask(")), "Editor site")
    # The one approval site: the host says every post needs a person.
    post = site(m, "main#2")
    expect(post["line"] == line_of(path, "team.post(channel:"), "team.post line")
    expect((post["approval"], post["reasons"]) == ("always", ["host requires approval for every call"]), f"{post}")
    expect(m["approval_sites"] == [post], "approval_sites")
    # No flow into team.post.channel: the post comes after `if len(useful) == 0 { return ... }`,
    # whose condition is untrusted, and code after an early return is not tainted by it.
    expect(m["flows"] == [
        {"sink": "team.post.text", "tags": ["untrusted"], "verdict": "allowed", "sites": sites(("main#2", "data"))},
        {"sink": "web.fetch.url", "tags": ["untrusted"], "verdict": "allowed",
         "sites": sites(("read#0", "control"), ("read#0", "data"))},
        {"sink": "web.search.query", "tags": ["untrusted"], "verdict": "allowed", "sites": sites(("main#0", "data"))},
    ], f"flows {m['flows']}")


def test_research_digest_early_return_rule_matters():
    """Without the `return` in the guard, the snippet call adds to the rest of read(): 1 + 2 = 3
    Reader calls per hit, 15 in all, over max_calls 10; llm 17 × 0.012 + 0.0155 = $0.2195 > $0.2."""
    src = app_file("research_digest").read_text(encoding="utf-8")
    guard = "    return { url: h.url, stance: quick.stance, points: quick.points }\n"
    expect(src.count(guard) == 1, "the guard's return is where we expect it")
    variant = src.replace(guard, "    { url: h.url, stance: quick.stance, points: quick.points }\n")
    with Workspace({"host.rmti": app_file("research_digest", "host.rmti").read_text(encoding="utf-8"),
                    "v.rmt": variant}) as ws:
        r = run(REMITC, "check", "v.rmt", "--json", cwd=ws.path)
        expect(r.code == 1, "the variant does not check", r)
        diags = {d["code"]: d for d in json.loads(r.out)["diagnostics"]}
        expect(sorted(diags) == ["E0403", "E0404"], f"E0403 and E0404: {sorted(diags)}", r)
        expect(diags["E0403"]["message"] == "agent 'Reader' may be called up to 15 times, but its max_calls is 10",
               "E0403 message", r)
        expect(diags["E0404"]["message"] == "worst-case cost $0.2195 exceeds the program budget $0.2000",
               "E0404 message", r)
        expect("llm: 17 × $0.0120" in diags["E0404"]["notes"], "cost breakdown note", r)


# ---------------------------------------------------------------------------------------------
# Policies are exactly as tight as the static bounds.

def copy_app(app, ws):
    for p in (EXAMPLES / app).iterdir():
        if p.is_file():
            shutil.copy(p, ws.path / p.name)


def test_policies_are_tight():
    cases = [
        ("refund_bot", 'max_calls = 2', 'max_calls = 1', "[grant.\"shop.order\"]",
         "program may call 'shop.order' up to 2 time(s), but policy allows 1"),
        ("email_assistant", 'max_calls = 26', 'max_calls = 25', "[grant.llm]",
         "program may call 'llm' up to 26 time(s), but policy allows 25"),
        ("research_digest", 'max_calls = 15', 'max_calls = 14', "[grant.\"web.fetch\"]",
         "program may call 'web.fetch' up to 15 time(s), but policy allows 14"),
    ]
    for app, old, new, table, message in cases:
        with Workspace() as ws:
            copy_app(app, ws)
            policy = ws.read("policy.toml")
            head, tail = policy.split(table, 1)
            expect(old in tail.split("[", 1)[0], f"{app}: {old} under {table}")
            ws.write("policy.toml", head + table + tail.replace(old, new, 1))
            r = run(REMITC, "check", f"{app}.rmt", "--json", cwd=ws.path)
            diags = json.loads(r.out)["diagnostics"]
            expect(r.code == 1 and [(d["code"], d["message"]) for d in diags] == [("E0502", message)],
                   f"{app}: E0502", r)
    # And the budgets: each policy max_usd is above the worst case; one cent less than the
    # worst case is refused.
    for app, worst in (("refund_bot", "0.0492"), ("email_assistant", "0.0837"), ("research_digest", "0.1595")):
        with Workspace() as ws:
            copy_app(app, ws)
            policy = re.sub(r"max_usd = [0-9.]+", "max_usd = 0.04", ws.read("policy.toml"))
            ws.write("policy.toml", policy)
            r = run(REMITC, "check", f"{app}.rmt", cwd=ws.path)
            expect(r.code == 1 and f"error[E0503]: worst-case cost ${worst} exceeds the policy budget $0.0400" in r.err,
                   f"{app}: E0503", r)


# ---------------------------------------------------------------------------------------------
# Reformatting keeps the program hash and the call-site ids.

STRING_OR_COMMENT = re.compile(r'"(?:[^"\\\n]|\\.)*"|#.*$')


def mangle(source, comments):
    """Odd spacing, extra indentation, extra blank lines and (optionally) extra comments, never
    touching string literals or existing comments."""
    out = []
    for line in source.splitlines():
        pieces, pos = [], 0
        for m in STRING_OR_COMMENT.finditer(line):
            pieces.append((True, line[pos:m.start()]))
            pieces.append((False, m.group(0)))
            pos = m.end()
        pieces.append((True, line[pos:]))
        text = "".join(p.replace(" = ", "   =  ").replace(", ", " ,   ").replace(": ", " :  ").replace("(", "( ")
                       if code else p for code, p in pieces)
        if text.strip():
            text = "    " + text.rstrip() + "   "
        if text.strip().startswith("let "):
            out += ["", "  "]
            if comments:
                out.append("      #   a comment the formatter keeps")
        if comments and text.strip().startswith("return "):
            text += "# trailing note"
        out.append(text)
    return "\n".join(out) + "\n\n\n"


def site_ids(m):
    return [(s["site"], s["resource"], s.get("agent")) for s in m["call_sites"]]


def test_program_hash_and_sites_survive_reformatting():
    for app in APPS:
        original_text = app_file(app).read_text(encoding="utf-8")
        original = manifest_of(rel(app))
        expect(re.fullmatch(r"[0-9a-f]{64}", original["program_hash"]) is not None, f"{app}: bare hex hash")
        host = app_file(app, "host.rmti").read_text(encoding="utf-8")
        for comments in (False, True):
            with Workspace({"host.rmti": host}) as ws:
                copy = ws.write("copy.rmt", mangle(original_text, comments))
                expect(copy.read_text(encoding="utf-8") != original_text, f"{app}: the copy really differs")
                before = manifest_of("copy.rmt", cwd=ws.path)
                expect(before["program_hash"] == original["program_hash"], f"{app}: hash ignores layout/comments")
                expect(site_ids(before) == site_ids(original), f"{app}: site ids of the mangled copy")
                r = run(REMITC, "fmt", "--check", "copy.rmt", cwd=ws.path)
                expect(r.code == 1 and r.out == "would reformat copy.rmt\n", f"{app}: the copy is not canonical", r)
                r = run(REMITC, "fmt", "copy.rmt", cwd=ws.path)
                expect(r.code == 0 and r.out == "formatted copy.rmt\n", f"{app}: fmt", r)
                after = manifest_of("copy.rmt", cwd=ws.path)
                expect(after["program_hash"] == original["program_hash"], f"{app}: hash unchanged by fmt")
                expect(site_ids(after) == site_ids(original), f"{app}: call-site ids unchanged by fmt")
                if comments:
                    text = ws.read("copy.rmt")
                    expect("a comment the formatter keeps" in text and "# trailing note" in text,
                           f"{app}: own-line and trailing comments kept\n{text}")
                else:
                    expect(ws.read("copy.rmt") == original_text, f"{app}: fmt restores the canonical text")
                    expect([(s["line"], s["col"]) for s in after["call_sites"]] ==
                           [(s["line"], s["col"]) for s in original["call_sites"]], f"{app}: positions restored")
                r = run(REMITC, "fmt", "--check", "copy.rmt", cwd=ws.path)
                expect(r.code == 0, f"{app}: canonical after fmt", r)


# ---------------------------------------------------------------------------------------------
# Each example runs on its fixtures: it pauses where its README says a person must sign off, and
# with --approve-all completes with the result worked out from the fixtures.

EXPECTED_RUNS = {
    # app: (paused site, paused resource, calls before the pause, result with --approve-all)
    "refund_bot": ("refund#1", "payments.refund", 3, "refunded 49.5 for order A-1001 (rf_7731)"),
    "email_assistant": ("reply#2", "email.send", 7, None),
    "research_digest": ("main#2", "team.post", 12, None),
}


def test_examples_run_on_their_fixtures():
    for app, (paused_site, resource, calls_before, result) in EXPECTED_RUNS.items():
        with Workspace() as ws:
            args = ["run", rel(app), "--inputs", rel(app, "inputs.json"), "--state-dir", ws.path / "state", "--json"]
            r = run(REMITVM, *args, cwd=REPO)
            expect(r.code == 3, f"{app}: pauses for approval", r)
            env = json.loads(r.out)
            expect(env["status"] == "approval_required" and env["pending"]["site"] == paused_site and
                   env["pending"]["resource"] == resource, f"{app}: pending {env}", r)
            expect(f"{calls_before} call(s)" in r.err.splitlines()[-1], f"{app}: calls before the pause", r)
            r = run(REMITVM, *args, "--approve-all", cwd=REPO)
            expect(r.code == 0, f"{app}: completes with --approve-all", r)
            env = json.loads(r.out)
            expect(env["status"] == "completed" and env["calls"] > calls_before, f"{app}: envelope", r)
            if result is not None:
                expect(env["result"] == result, f"{app}: result {env['result']}", r)
            m = manifest_of(rel(app))
            expect(env["spent_usd"] <= m["worst_case_cost_usd"] + 1e-12, f"{app}: spent within the worst case", r)


# ---------------------------------------------------------------------------------------------
# Each example also runs --live on its adapters.py (offline stand-ins for the host's systems and a
# rule-based model): it pauses where its README says, completes with --approve-all with the result
# the rules give, every call in the trace went through the live adapter, and the side effects land
# in the effects log named by REMIT_EFFECTS_LOG.

def run_env(tool, *args, env, cwd=REPO, timeout=120):
    proc = subprocess.run([tool, *map(str, args)], cwd=cwd, capture_output=True, timeout=timeout,
                          env={**os.environ, **env})
    return Result(proc)


def trace_events(state_dir, run_id):
    path = state_dir / "runs" / f"{run_id}.jsonl"
    expect(path.is_file(), f"trace {path} exists")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def effects(path):
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


MAIL_ACTIONS = ["replied to Grace Hopper about m-101", "replied to Barbara Liskov about m-103",
                "not replied to m-104: sender is not in the address book"]
DIGEST_SOURCES = ["https://journal.example/caffeine-memory", "https://lab.example/caffeine-recall",
                  "https://news.example/coffee-myths"]

EXPECTED_LIVE_RUNS = {
    # app: (paused site, paused resource, calls before the pause, calls in all, effects as (effect, key args))
    "refund_bot": ("refund#1", "payments.refund", 3, 6,
                   [("payments.refund", {"order_id": "A-1001", "amount": 49.5}), ("email.send", {"to": "ada@example.com"})]),
    "email_assistant": ("reply#2", "email.send", 8, 13,
                        [("email.send", {"to": "grace@navy.example", "subject": "Re: Compiler review on Thursday?"}),
                         ("email.send", {"to": "barbara@clu.example", "subject": "Re: Draft paper"})]),
    "research_digest": ("main#2", "team.post", 12, 13, [("team.post", {"channel": "research"})]),
}


def check_live_result(app, result):
    if app == "refund_bot":
        expect(result == "refunded 49.5 for order A-1001 (rf_7731)", f"{app}: result {result!r}")
    elif app == "email_assistant":
        expect(result["actions"] == MAIL_ACTIONS, f"{app}: actions {result['actions']}")
        expect([s.split("]")[0] + "]" for s in result["summaries"]] == ["[normal]", "[low]", "[normal]", "[high]", "[normal]"],
               f"{app}: one summary per mail, with urgency: {result['summaries']}")
        expect("not followed" in result["summaries"][3] and "password" not in result["summaries"][3],
               f"{app}: the phishing mail is summarised, its instructions are not: {result['summaries'][3]}")
    else:
        expect(result["question"] == "Does drinking coffee improve short-term memory?", f"{app}: question {result}")
        expect(result["sources"] == DIGEST_SOURCES, f"{app}: sources {result['sources']}")
        expect(result["answer"].startswith("Mostly yes: 2 of 3 sources report a benefit.") and
               "(journal.example)" in result["answer"] and "(news.example)" in result["answer"] and
               "forum.example" not in result["answer"] and "cures" not in result["answer"], f"{app}: answer {result}")


def test_examples_run_live():
    for app, (paused_site, resource, calls_before, calls_total, expected_effects) in EXPECTED_LIVE_RUNS.items():
        expect((EXAMPLES / app / "adapters.py").is_file(), f"{app}: adapters.py exists")
        with Workspace() as ws:
            log = ws.path / "effects.jsonl"
            env = {"REMIT_EFFECTS_LOG": str(log)}
            args = ["run", rel(app), "--inputs", rel(app, "inputs.json"), "--live", "--state-dir", ws.path / "state",
                    "--json"]
            r = run_env(REMITVM, *args, env=env)
            expect(r.code == 3, f"{app}: live run pauses for approval", r)
            env_doc = json.loads(r.out)
            expect(env_doc["status"] == "approval_required" and env_doc["pending"]["site"] == paused_site and
                   env_doc["pending"]["resource"] == resource, f"{app}: pending {env_doc}", r)
            expect(f"{calls_before} call(s), mode live" in r.err.splitlines()[-1], f"{app}: calls before the pause", r)
            expect(effects(log) == [], f"{app}: no side effect before the approval: {effects(log)}")

            r = run_env(REMITVM, *args, "--approve-all", env=env)
            expect(r.code == 0, f"{app}: live run completes with --approve-all", r)
            env_doc = json.loads(r.out)
            expect(env_doc["status"] == "completed" and env_doc["calls"] == calls_total, f"{app}: envelope", r)
            check_live_result(app, env_doc["result"])
            m = manifest_of(rel(app))
            expect(env_doc["spent_usd"] <= m["worst_case_cost_usd"] + 1e-12, f"{app}: spent within the worst case", r)

            events = trace_events(ws.path / "state", env_doc["run_id"])
            calls = [e for e in events if e["event"] == "call"]
            expect(len(calls) == calls_total, f"{app}: {len(calls)} call events", r)
            expect(all(e["adapter"] == "live" for e in calls), f"{app}: every call is live: "
                   f"{sorted({e['adapter'] for e in calls})}")
            models = [e for e in calls if e["resource"] == "llm"]
            expect(models and all(e["meta"].get("model") == "rules-v1" for e in models),
                   f"{app}: the model calls were answered by adapters.py's rules")
            expect(events[-1]["event"] == "run_end" and events[-1]["status"] == "ok", f"{app}: run_end {events[-1]}")

            got = effects(log)
            expect(len(got) == len(expected_effects), f"{app}: effects {got}")
            for entry, (effect, key_args) in zip(got, expected_effects):
                expect(entry["effect"] == effect and all(entry["args"][k] == v for k, v in key_args.items()) and
                       entry["run_id"] == env_doc["run_id"], f"{app}: effect {entry}")
            keys = {e["idempotency_key"] for e in calls}
            expect(all(e["idempotency_key"] in keys for e in got), f"{app}: effects carry the calls' idempotency keys")


def test_refund_bot_live_effects_are_idempotent():
    """The same refund request twice (a resumed run re-executing the call) pays once; a new run
    finds the order already refunded and does not pay again."""
    with Workspace() as ws:
        log = ws.path / "effects.jsonl"
        env = {"REMIT_EFFECTS_LOG": str(log)}
        request = {"type": "call", "resource": "payments.refund", "args": {"order_id": "A-1001", "amount": 49.5},
                   "idempotency_key": "0123456789abcdef0123456789abcdef", "timeout_ms": 30000, "run_id": "r1"}
        lines = "".join(json.dumps({"id": i, **request}) + "\n" for i in (1, 2))
        proc = subprocess.run([sys.executable, str(REPO / "scripts/remit-py-adapter"), "--app-dir",
                               str(EXAMPLES / "refund_bot")], input=lines.encode(), capture_output=True, timeout=60,
                              env={**os.environ, **env})
        replies = [json.loads(line) for line in proc.stdout.decode().splitlines()]
        expect([(r["id"], r["ok"], r["result"]) for r in replies] == [(1, True, "rf_7731"), (2, True, "rf_7731")],
               f"one receipt for one key: {replies}")
        expect(replies[1]["meta"] == {"deduplicated": True}, f"the second reply says so: {replies[1]}")
        expect([e["effect"] for e in effects(log)] == ["payments.refund"], f"one payment: {effects(log)}")

        args = ["run", rel("refund_bot"), "--inputs", rel("refund_bot", "inputs.json"), "--live", "--state-dir",
                ws.path / "state", "--approve-all", "--json"]
        r = run_env(REMITVM, *args, env=env)
        expect(r.code == 0 and json.loads(r.out)["result"] == "order A-1001 was already refunded",
               "the shop remembers the refund", r)
        expect([e["effect"] for e in effects(log)] == ["payments.refund", "email.send"], f"no second payment: {effects(log)}")


if __name__ == "__main__":
    main(globals())
