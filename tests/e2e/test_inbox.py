#!/usr/bin/env python3
"""The operators' web inbox over raw HTTP (docs/operators.md, "The web inbox"): `remitvm inbox`'s
flags and keys file; keys and roles (401 without a valid key, 403 for a key without a role and for
a viewer's decision); the login session and its cookie; CSRF tokens and origin checks on every
state-changing request; the security headers on every response; every value escaped; approve and
deny under the key's id, which the run's resume then meets. tests/inbox_browser drives the same
server from a real browser."""
import hashlib
import html
import html.parser
import http.client
import json
import os
import random
import re
import shlex
import subprocess
import time
import urllib.parse

from harness import REMIT, REMITVM, REPO, Workspace, expect, main, run
from test_approvals import HOST, PROGRAM  # the mailer whose send needs approval

FIXTURES = json.dumps({"capabilities": {"crm.lookup": [{"output": "a customer"}] * 4,
                                        "mail.send": [{"output": "m-1"}] * 4}})
POLICY = '[grant."crm.lookup"]\n\n[grant."mail.send"]\n'
XSS = "<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">'&"
TOKENS = {"alice": "tok-alice-approver", "victor": "tok-victor-viewer", "bot": "tok-bot-mcp"}


def keys_file(roles=(("alice", "approver"), ("victor", "viewer"), ("bot", None))):
    keys = []
    for name, role in roles:
        entry = {"id": name, "sha256": hashlib.sha256(TOKENS[name].encode()).hexdigest()}
        if role:
            entry["role"] = role
        keys.append(entry)
    return json.dumps({"keys": keys})


def workspace():
    return Workspace({"host.rmti": HOST, "prog.rmt": PROGRAM, "policy.toml": POLICY, "fixtures/run.json": FIXTURES,
                      "keys.json": keys_file()})


def pause(ws, who="Ada"):
    r = run(REMITVM, "run", "prog.rmt", "-i", f"who={who}", "--state-dir", "st", cwd=ws.path)
    expect(r.code == 3, "the send pauses for approval", r)
    listed = json.loads(run(REMITVM, "approvals", "list", "--json", "--state-dir", "st", cwd=ws.path).out)
    return listed[-1]


class Inbox:
    """`remitvm inbox` on a free port, stopped (SIGTERM) when the block ends; `where`: the flags that
    name its store, `env` added to its environment."""

    def __init__(self, ws, tool=REMITVM, keys="keys.json", where=("--state-dir", "st"), env=None):
        self.proc = subprocess.Popen([tool, "inbox", "--port", "0", "--keys", keys, *where],
                                     cwd=ws.path, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     env=dict(os.environ, **(env or {})))
        line = self.proc.stderr.readline().decode()
        found = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", line)
        expect(found is not None, f"the inbox announces its port: {line!r}")
        self.port = int(found.group(1))

    def request(self, method, path, body=None, headers=None, token=None, cookie=None, form=None):
        headers = dict(headers or {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if cookie:
            headers["Cookie"] = f"remit_inbox={cookie}"
        if form is not None:
            body = urllib.parse.urlencode(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        if method == "POST" and body is None:
            body = ""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=20)
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        text = response.read().decode("utf-8", "replace")
        conn.close()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, text

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        code = self.proc.wait(timeout=20)
        self.proc.stderr.close()
        expect(code == 0, f"SIGTERM stops the inbox with exit 0, not {code}")


def store(ws):
    return json.loads((ws.path / "st/approvals.json").read_text())


def secured(headers, what):
    csp = headers.get("content-security-policy", "")
    expect("script-src 'self'" in csp and "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
           and "unsafe-inline" not in csp and "form-action 'self'" in csp, f"{what}: a strict CSP: {csp!r}")
    expect(headers.get("x-frame-options") == "DENY" and headers.get("x-content-type-options") == "nosniff"
           and headers.get("cache-control") == "no-store" and headers.get("referrer-policy") == "same-origin",
           f"{what}: the other security headers: {headers}")


def test_flags_and_keys_files_are_checked_before_it_listens():
    with workspace() as ws:
        r = run(REMITVM, "inbox", "--state-dir", "st", cwd=ws.path)
        expect(r.code == 2 and "needs --keys" in r.err and "role" in r.err, "no keys file", r)
        ws.write("mcp-only.json", keys_file((("bot", None),)))
        r = run(REMITVM, "inbox", "--keys", "mcp-only.json", cwd=ws.path)
        expect(r.code == 2 and "no key with a role" in r.err, "a file of MCP keys only", r)
        ws.write("bad-role.json", json.dumps({"keys": [{"id": "x", "sha256": "a" * 64, "role": "admin"}]}))
        r = run(REMITVM, "inbox", "--keys", "bad-role.json", cwd=ws.path)
        expect(r.code == 2 and "keys[0].role must be \"approver\" or \"viewer\"" in r.err, "an unknown role", r)
        r = run(REMITVM, "inbox", "--keys", "keys.json", "--port", "99999", cwd=ws.path)
        expect(r.code == 2 and "--port" in r.err, "a bad port", r)
        # The store as every command chooses it (docs/fleet.md): $REMIT_STORE's, never .remit in its
        # place; one that cannot be reached is exit 2 before it listens, naming it without a password.
        r = run(REMITVM, "inbox", "--keys", "keys.json", cwd=ws.path,
                env={"REMIT_STORE": "postgresql://ops:s3cret@127.0.0.1:1/remit"})
        expect(r.code == 2 and "cannot connect to the PostgreSQL store postgresql://ops@127.0.0.1:1/remit" in r.err
               and "$REMIT_STORE" in r.err and "s3cret" not in r.err and "listening" not in r.err,
               "an unreachable $REMIT_STORE", r)
        r = run(REMITVM, "inbox", "--keys", "keys.json", "--state-dir", "st", "--store", "postgresql://ops@/remit",
                cwd=ws.path)
        expect(r.code == 2 and "give one" in r.err, "--store and --state-dir together", r)
        ws.write("st/approvals.json", "{")
        r = run(REMIT, "inbox", "--keys", "keys.json", "--state-dir", "st", cwd=ws.path)
        expect(r.code == 2 and "not a valid approval store" in r.err, "a damaged store, through `remit inbox`", r)
        # The MCP server reads the same file, roles and all.
        r = run(REMITVM, "mcp", "--http", "--keys", "bad-role.json", "--port", "0", cwd=ws.path)
        expect(r.code == 2 and "role" in r.err, "mcp --http checks the role too", r)
        (ws.path / "st/approvals.json").unlink()
        # A port another server holds: exit 1, with what to do; mcp --http says the same.
        with Inbox(ws) as inbox:
            for cmd in (["inbox", "--keys", "keys.json", "--state-dir", "st"], ["mcp", "--http", "--keys", "keys.json"]):
                r = run(REMITVM, *cmd, "--port", str(inbox.port), cwd=ws.path)
                expect(r.code == 1 and r.err.startswith("remitvm: error: ")
                       and f"hint: another server holds port {inbox.port}" in r.err and "--port 0" in r.err,
                       f"{cmd[0]}: a port in use", r)


def test_keys_and_roles():
    with workspace() as ws:
        req = pause(ws)
        digest = req["digest"]
        with Inbox(ws) as inbox:
            status, headers, body = inbox.request("GET", "/")
            expect(status == 401 and headers.get("www-authenticate", "").startswith("Bearer")
                   and 'action="/login"' in body, "no key: 401 and the login form", body)
            secured(headers, "the 401")
            status, _, _ = inbox.request("GET", "/", token="not-a-key")
            expect(status == 401, "a wrong key: 401")
            status, _, body = inbox.request("GET", "/", token=TOKENS["bot"])
            expect(status == 403 and "no role" in body, "an MCP client's key: 403", body)
            status, headers, body = inbox.request("GET", "/", token=TOKENS["victor"])
            expect(status == 200 and digest[:16] in body and "victor (viewer)" in body, "a viewer sees the list")
            secured(headers, "the list")
            status, _, body = inbox.request("GET", f"/requests/{digest}", token=TOKENS["victor"])
            expect(status == 200 and 'id="approve"' not in body and "viewer" in body,
                   "a viewer's request page has no decision forms", body)
            for action in ("approve", "deny"):
                status, headers, _ = inbox.request("POST", f"/requests/{digest}/{action}", token=TOKENS["victor"],
                                                   form={"reason": "x"})
                expect(status == 403, f"a viewer cannot {action}: 403")
                secured(headers, f"a viewer's {action}")
            status, _, _ = inbox.request("POST", f"/requests/{digest}/approve")
            expect(status == 401, "no key cannot approve: 401")
            expect(store(ws)["approved"] == {} and digest in store(ws)["pending"], "nothing was decided")
            status, headers, _ = inbox.request("GET", "/requests/" + "0" * 64, token=TOKENS["alice"])
            expect(status == 404, "an unknown request: 404")
            status, _, _ = inbox.request("GET", "/requests/../../etc/passwd", token=TOKENS["alice"])
            expect(status == 404, "not a digest: 404")
            status, headers, body = inbox.request("GET", "/static/inbox.js")
            expect(status == 200 and headers["content-type"].startswith("text/javascript") and "confirm" in body,
                   "the script is served")
            secured(headers, "the script")
            status, _, _ = inbox.request("DELETE", "/", token=TOKENS["alice"])
            expect(status == 405, "other methods: 405")


def test_login_session_and_csrf():
    with workspace() as ws:
        req = pause(ws)
        digest = req["digest"]
        with Inbox(ws) as inbox:
            status, _, body = inbox.request("POST", "/login", form={"key": "wrong"})
            expect(status == 401 and "not valid" in body, "a wrong key at the login: 401")
            status, _, _ = inbox.request("POST", "/login", form={"key": TOKENS["bot"]})
            expect(status == 403, "an MCP key at the login: 403")
            status, headers, _ = inbox.request("POST", "/login", form={"key": TOKENS["alice"]},
                                               headers={"Origin": "http://evil.example"})
            expect(status == 403 and "set-cookie" not in headers, "a login posted from elsewhere: 403")
            status, headers, _ = inbox.request("POST", "/login", form={"key": TOKENS["alice"]})
            cookie = headers.get("set-cookie", "")
            expect(status == 303 and headers.get("location") == "/" and "HttpOnly" in cookie
                   and "SameSite=Strict" in cookie and "Path=/" in cookie, f"logged in: {headers}")
            sid = cookie.split(";")[0].split("=", 1)[1]
            status, _, body = inbox.request("GET", f"/requests/{digest}", cookie=sid)
            expect(status == 200 and 'id="approve"' in body, "the session sees the request and its forms")
            shown = re.search(r"in a shell: <code>(.*?)</code>", body)
            expect(shown is not None, "the request page says how to continue the run", body)
            resume_line = shlex.split(html.unescape(shown.group(1)))
            csrf = re.search(r'name="csrf" value="([0-9a-f]{64})"', body).group(1)
            path = f"/requests/{digest}/approve"
            status, _, body = inbox.request("POST", path, cookie=sid, form={})
            expect(status == 403 and "CSRF" in body, "a cookie POST without the token: 403", body)
            status, _, _ = inbox.request("POST", path, cookie=sid, form={"csrf": "0" * 64})
            expect(status == 403, "a wrong token: 403")
            status, _, _ = inbox.request("POST", path, cookie=sid, form={"csrf": csrf},
                                         headers={"Origin": f"http://127.0.0.1:{inbox.port + 1}"})
            expect(status == 403, "the right token from another origin (another port): 403")
            status, _, _ = inbox.request("POST", path, cookie=sid, form={"csrf": csrf},
                                         headers={"Sec-Fetch-Site": "cross-site"})
            expect(status == 403, "a request the browser says is cross-site: 403")
            expect(store(ws)["approved"] == {}, "none of those approved anything")
            status, headers, _ = inbox.request("POST", path, cookie=sid, form={"csrf": csrf},
                                               headers={"Origin": f"http://127.0.0.1:{inbox.port}"})
            expect(status == 303 and headers["location"] == f"/?done=approved&request={digest}&run={req['run_id']}",
                   f"approved from the page: {status} {headers}")
            expect(store(ws)["approved"][digest]["by"] == "alice", "under the key's id")
            status, _, body = inbox.request("GET", headers["location"], cookie=sid)
            expect("Approved request" in body and "approved by alice" in body, "the list says so", body)
            status, _, _ = inbox.request("POST", "/logout", cookie=sid, form={})
            expect(status == 403, "logging out needs the token too")
            status, headers, _ = inbox.request("POST", "/logout", cookie=sid, form={"csrf": csrf})
            expect(status == 303 and "Max-Age=0" in headers.get("set-cookie", ""), "logged out")
            status, _, _ = inbox.request("GET", "/", cookie=sid)
            expect(status == 401, "the old cookie is worth nothing")
        # The command the page showed, pasted into a shell in another directory (the state directory
        # in it is absolute).
        expect(resume_line[:3] == ["remitvm", "resume", req["run_id"]]
               and resume_line[3:] == ["--state-dir", str((ws.path / "st").resolve())], f"the command: {resume_line}")
        elsewhere = ws.path / "elsewhere"
        elsewhere.mkdir()
        c = run(REMITVM, *resume_line[1:], cwd=elsewhere)
        expect(c.code == 0 and json.loads(c.out) == "sent m-1", "the pasted command completes the run under alice's "
               "approval", c)


def test_every_value_is_escaped():
    with workspace() as ws:
        req = pause(ws, who=XSS)
        digest = req["digest"]
        # A hand-edited store is as hostile: its strings are escaped too.
        data = store(ws)
        data["pending"]["ab" * 32] = {"resource": "<b>res</b>", "site": "\"><script>x()</script>",
                                      "args": {"<i>k</i>": "</pre><script>y()</script>"}, "program_hash": "",
                                      "reasons": ["<u>why</u>"], "run_id": "<x>", "requested_at": "<y>"}
        (ws.path / "st/approvals.json").write_text(json.dumps(data))
        with Inbox(ws) as inbox:
            for path in ("/", f"/requests/{digest}", "/requests/" + "ab" * 32):
                status, _, body = inbox.request("GET", path, token=TOKENS["alice"])
                expect(status == 200, f"{path}: shown", body)
                for raw in ("<script>window", "<img src", "<b>res", "<script>x()", "<i>k", "</pre><script>",
                            "<u>why", "<x>"):
                    expect(raw not in body, f"{path}: {raw!r} appears escaped, never as markup")
                scripts = re.findall(r"<script[^>]*>", body)
                expect(scripts == ['<script src="/static/inbox.js" defer>'], f"{path}: one script tag: {scripts}")
            _, _, body = inbox.request("GET", f"/requests/{digest}", token=TOKENS["alice"])
            expect("&lt;script&gt;window.__pwned=1&lt;/script&gt;&lt;img src=x onerror=\\&quot;" in body,
                   "the payload is shown as text, whole", body)


class Page(html.parser.HTMLParser):
    """A page as a browser's parser sees it: every element with its attributes, and the text of
    each argument's <h3> name and <pre> value."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.names, self.values, self._in = [], [], [], None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag in ("h3", "pre"):
            self._in = tag
            (self.names if tag == "h3" else self.values).append("")

    def handle_endtag(self, tag):
        if tag == self._in:
            self._in = None

    def handle_data(self, data):
        if self._in == "h3":
            self.names[-1] += data
        elif self._in == "pre":
            self.values[-1] += data


def test_escaping_against_an_html_parser_on_generated_strings():
    """The oracle is Python's HTML parser: for generated strings of markup characters, each shown as
    an argument's name and value (and as the request's resource, site and reason), the parsed page
    has only the template's elements and no event-handler attribute, and the text of each name and
    value is exactly the original (the value as the JSON the page prints)."""
    rng = random.Random(18)
    pieces = ["<", ">", "&", '"', "'", "=", "/", " ", "script", "img", "onerror", "src=x", "<!--", "-->", "]]>",
              "&amp;", "&#60;", "&lt", "\u2028", "\\", "`", "\n", "é", "</pre>", "</h3>", "<svg/onload=x()>", "{{x}}"]
    strings = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))) for _ in range(40)]
    with workspace() as ws:
        pending = {}
        for i, text in enumerate(strings):
            digest = hashlib.sha256(str(i).encode()).hexdigest()
            pending[digest] = {"resource": text, "site": text, "args": {text: text, "n": i}, "program_hash": "",
                               "reasons": [text], "run_id": None, "requested_at": 1.0 + i}
        ws.write("st/approvals.json", json.dumps({"approved": {}, "consumed": {}, "pending": pending}))
        with Inbox(ws) as inbox:
            allowed = {"html", "head", "meta", "title", "link", "script", "body", "header", "a", "span", "form",
                       "input", "button", "main", "p", "h1", "h2", "h3", "code", "dl", "dt", "dd", "ul", "li",
                       "div", "section", "pre", "label", "table", "thead", "tbody", "tr", "th", "td", "ol"}
            status, _, body = inbox.request("GET", "/", token=TOKENS["alice"])
            expect(status == 200, "the list of generated requests is shown")
            listed = Page()
            listed.feed(body)
            for (i, text), digest in zip(enumerate(strings), pending):
                status, _, body = inbox.request("GET", f"/requests/{digest}", token=TOKENS["alice"])
                expect(status == 200, f"request {i} is shown")
                page = Page()
                page.feed(body)
                for parsed in (page, listed):
                    tags = {tag for tag, _ in parsed.tags}
                    expect(tags <= allowed, f"string {i} {text!r}: only the template's elements: {tags - allowed}")
                    handlers = [(tag, name) for tag, attrs in parsed.tags for name in attrs if name.startswith("on")]
                    expect(not handlers, f"string {i} {text!r}: no event handler attribute: {handlers}")
                    scripts = [attrs.get("src") for tag, attrs in parsed.tags if tag == "script"]
                    expect(scripts == ["/static/inbox.js"], f"string {i}: one script, the server's: {scripts}")
                shown = dict(zip(page.names, page.values))
                expect(text in shown and json.loads(shown[text]) == text,
                       f"string {i}: the argument's name and value read back exactly: {text!r} -> {shown}")
                expect(body.count("<h1>") == 1, f"string {i}: one heading")


def test_deny_with_a_reason_fails_the_run_naming_the_key():
    with workspace() as ws:
        req = pause(ws)
        digest = req["digest"]
        with Inbox(ws) as inbox:
            status, _, body = inbox.request("POST", f"/requests/{digest}/deny", token=TOKENS["alice"],
                                            form={"reason": "   "})
            expect(status == 400 and "needs a reason" in body, "a denial without a reason: 400")
            status, headers, _ = inbox.request("POST", f"/requests/{digest}/deny", token=TOKENS["alice"],
                                               form={"reason": "not <our> customer"})
            expect(status == 303 and "done=denied" in headers["location"], "denied with a Bearer key (no CSRF)")
            status, _, body = inbox.request("GET", f"/requests/{digest}", token=TOKENS["alice"])
            expect(status == 404, "no longer pending")
            status, _, body = inbox.request("POST", f"/requests/{digest}/approve", token=TOKENS["alice"])
            expect(status == 409 and "no longer pending" in body, "deciding again: 409", body)
        c = run(REMITVM, "resume", req["run_id"], "--state-dir", "st", cwd=ws.path)
        expect(c.code == 1 and "R0302" in c.err and "denied by alice: not <our> customer" in c.err,
               "the resume fails naming the key and the reason", c)


EFFECTS = REPO / "tests/e2e/adapters/effects_adapter.py"


def outcome_of(inbox, run_id, token):
    """The run's page once the resume has ended: (status, page). The page reloads itself while the
    run goes on; this reads it as often."""
    for _ in range(600):
        status, _, body = inbox.request("GET", f"/runs/{run_id}", token=token)
        found = re.search(r'id="outcome" data-status="([a-z_]+)"', body)
        if found:
            return found.group(1), body
        expect(status == 200 and 'http-equiv="refresh"' in body, f"while the run goes on, its page reloads: {body}")
        time.sleep(0.1)
    expect(False, f"run {run_id} never ended")


def test_continue_the_run_from_the_page():
    """Issue #18, done when: an operator goes from a paused run to a completed one through the page
    alone. After Approve, Continue runs `remitvm resume` as a child of the inbox; the run's page says
    how it ended. The effect is performed once, however often Continue is pressed; a denial fails
    the run, naming the key and the reason; an adapter that cannot start keeps the approval."""
    with workspace() as ws:
        gate = ws.path / "gate"
        adapter = f"python3 {EFFECTS} --log effects.jsonl --gate mail.send:{gate}"
        r = run(REMITVM, "run", "prog.rmt", "-i", "who=Ada", "--adapter", adapter, "--state-dir", "st",
                cwd=ws.path)
        expect(r.code == 3, "paused", r)
        req = json.loads(run(REMITVM, "approvals", "list", "--json", "--state-dir", "st", cwd=ws.path).out)[0]
        run_id, digest = req["run_id"], req["digest"]

        def sends():
            log = ws.path / "effects.jsonl"
            return [json.loads(l) for l in log.read_text().splitlines() if '"mail.send"' in l] if log.exists() else []

        with Inbox(ws) as inbox:
            path = f"/runs/{run_id}/continue"
            status, _, _ = inbox.request("POST", path)
            expect(status == 401, "continuing needs a key: 401")
            status, _, _ = inbox.request("POST", path, token=TOKENS["victor"])
            expect(status == 403, "a viewer cannot continue a run: 403")
            status, _, _ = inbox.request("POST", path, token=TOKENS["alice"], headers={"Origin": "http://evil.example"})
            expect(status == 403, "continuing from another origin: 403")
            status, headers, _ = inbox.request("POST", "/login", form={"key": TOKENS["alice"]})
            sid = headers["set-cookie"].split(";")[0].split("=", 1)[1]
            status, _, body = inbox.request("POST", path, cookie=sid, form={})
            expect(status == 403 and "CSRF" in body, "a session's POST without its token: 403")
            status, _, _ = inbox.request("POST", "/runs/not-a-run/continue", token=TOKENS["alice"])
            expect(status == 404, "not a run id: 404")
            status, _, body = inbox.request("POST", "/runs/20260101-000000-abcdef/continue", token=TOKENS["alice"])
            expect(status == 404 and "no run" in body, "a run the state directory does not have: 404")
            expect(not sends() and not [p for p in (ws.path / "st/runs").glob("*.jsonl") if p.stem != run_id],
                   "none of those ran anything")

            status, headers, _ = inbox.request("POST", f"/requests/{digest}/approve", token=TOKENS["alice"])
            expect(status == 303 and headers["location"].endswith(f"&run={run_id}"), f"approved: {headers}")
            status, _, body = inbox.request("GET", headers["location"], token=TOKENS["alice"])
            expect(f'action="/runs/{run_id}/continue"' in body, "the notice offers to continue the run", body)
            status, _, body = inbox.request("GET", f"/requests/{digest}", token=TOKENS["alice"])
            expect(f'action="/runs/{run_id}/continue"' in body, "so does the approved request's page")
            try:
                status, headers, _ = inbox.request("POST", path, token=TOKENS["alice"])
                expect(status == 303 and headers["location"] == f"/runs/{run_id}", f"continuing: {status} {headers}")
                # The adapter holds the send until the gate opens: the run is going on.
                status, _, body = inbox.request("GET", f"/runs/{run_id}", token=TOKENS["alice"])
                expect(status == 200 and 'id="running"' in body and 'http-equiv="refresh"' in body
                       and "Continued by alice" in body, "the run's page says it is going on, and reloads", body)
                status, _, _ = inbox.request("POST", path, token=TOKENS["alice"])
                expect(status == 303, "pressing Continue again while it runs: the same page, no second resume")
            finally:
                gate.write_text("")
            state, body = outcome_of(inbox, run_id, TOKENS["alice"])
            expect(state == "completed" and "The run completed" in body
                   and "&quot;sent done:mail.send&quot;" in body, "the run completed; its result is shown", body)
            expect(len(sends()) == 1, f"the effect happened once: {sends()}")
            # Continued again (a second click, later): answered from the trace, nothing sent again.
            inbox.request("POST", path, token=TOKENS["alice"])
            state, _ = outcome_of(inbox, run_id, TOKENS["alice"])
            expect(state == "completed" and len(sends()) == 1, f"continuing a completed run sends nothing: {sends()}")
            status, _, body = inbox.request("GET", f"/runs/{run_id}", token=TOKENS["victor"])
            expect(status == 200 and "The run completed" in body and 'id="continue"' not in body,
                   "a viewer sees how the run ended, without the button")

            # Denied, then continued: the run fails naming the key and the reason.
            run(REMITVM, "run", "prog.rmt", "-i", "who=Bob", "--adapter", adapter, "--state-dir", "st", cwd=ws.path)
            second = [q for q in json.loads(run(REMITVM, "approvals", "list", "--json", "--state-dir", "st",
                                                cwd=ws.path).out) if q["status"] == "pending"][0]
            inbox.request("POST", f"/requests/{second['digest']}/deny", token=TOKENS["alice"],
                          form={"reason": "not <our> customer"})
            inbox.request("POST", f"/runs/{second['run_id']}/continue", token=TOKENS["alice"])
            state, body = outcome_of(inbox, second["run_id"], TOKENS["alice"])
            expect(state == "failed" and "R0302" in body and "denied by alice: not &lt;our&gt; customer" in body,
                   "the denied run fails, naming alice and the reason (escaped)", body)
            expect(len(sends()) == 1, "the denied call was not made")

            # An adapter that cannot start any more: the page shows what the resume said, and the
            # approval is kept for the resume after the fix.
            ws.write("ad.py", EFFECTS.read_text())
            run(REMITVM, "run", "prog.rmt", "-i", "who=Cy", "--adapter", "python3 ad.py --log effects.jsonl",
                "--state-dir", "st", cwd=ws.path)
            third = [q for q in json.loads(run(REMITVM, "approvals", "list", "--json", "--state-dir", "st",
                                               cwd=ws.path).out) if q["status"] == "pending"][0]
            inbox.request("POST", f"/requests/{third['digest']}/approve", token=TOKENS["alice"])
            (ws.path / "ad.py").rename(ws.path / "ad.py.off")
            inbox.request("POST", f"/runs/{third['run_id']}/continue", token=TOKENS["alice"])
            state, body = outcome_of(inbox, third["run_id"], TOKENS["alice"])
            expect(state == "stopped" and "exit 2" in body and "did not reach the adapter" in body
                   and "the approval by alice is kept" in body, "the page says the call reached nobody", body)
            listed = json.loads(run(REMITVM, "approvals", "list", "--json", "--state-dir", "st", cwd=ws.path).out)
            expect([q["status"] for q in listed if q["digest"] == third["digest"]] == ["approved"],
                   f"the approval is still there: {listed}")
            (ws.path / "ad.py.off").rename(ws.path / "ad.py")
            inbox.request("POST", f"/runs/{third['run_id']}/continue", token=TOKENS["alice"])
            state, body = outcome_of(inbox, third["run_id"], TOKENS["alice"])
            expect(state == "completed" and len(sends()) == 2, f"fixed, the run completes under that approval: {body}")


if __name__ == "__main__":
    main(globals())
