// The operators' web inbox (`remitvm inbox`, docs/operators.md) in a real browser: headless
// Chromium (the system's, never a downloaded one) driven by puppeteer-core, pinned in
// package-lock.json and installed by scripts/install-deps. ctest's "e2e: inbox_browser" runs it:
//
//   node test_inbox.mjs REMITVM [--screenshots DIR]
//
// An operator goes from a paused run to a completed one through the page alone: the page lists
// the request, the operator logs in, opens it, clicks Approve, then Continue, and the run's page
// shows it completed, with its effect performed once (the adapter counts effects). Also: a denial,
// continued, fails the run with R0302 naming the denier and the reason; an XSS payload in an
// untrusted argument, and another in a denial's reason, run nothing (page-side probes: a global the
// payload would set, and CSP violation events); the CSP itself blocks an inline script; missing or
// wrong keys get 401; a viewer cannot approve; a cross-site form POST and a same-origin POST without
// the CSRF token are refused. With --screenshots, the list, a request page and a continued run's
// page are saved as PNG (docs/images/ holds the ones docs/operators.md shows).
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync, rmSync, existsSync, mkdirSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import puppeteer from "puppeteer-core";

const remitvm = resolve(process.argv[2] ?? "../../build/release/cli/remitvm");
const shotsAt = process.argv.indexOf("--screenshots");
const screenshots = shotsAt > 0 ? resolve(process.argv[shotsAt + 1]) : null;
if (screenshots) mkdirSync(screenshots, { recursive: true });
const chromium = process.env.REMIT_CHROMIUM ?? "/usr/bin/chromium";

let failures = 0;
function check(condition, message, detail) {
  if (condition) return;
  failures += 1;
  console.log(`FAIL  ${message}${detail === undefined ? "" : `\n      ${typeof detail === "string" ? detail : JSON.stringify(detail)}`}`);
}

const HOST = `input who tags untrusted

capability crm.lookup(id: Str) -> Str
  tags untrusted
  cost 0.001

capability mail.send(to: Str, body: Str approve untrusted) -> Str
  cost 0.002
`;

// The body holds the (untrusted) name and derives from the lookup.
const PROGRAM = `program mailer
uses crm.lookup, mail.send

fn main(who: Str) -> Str {
  let note = crm.lookup(id: who)
  let id = mail.send(to: "ops@example.com", body: "about " + who + ": " + note)
  return "sent " + id
}
`;

const POLICY = '[grant."crm.lookup"]\nmax_calls = 1\n\n[grant."mail.send"]\nmax_calls = 1\n';

// An adapter with countable effects: each call it performs is a line of effects.jsonl.
const ADAPTER = new URL("../e2e/adapters/effects_adapter.py", import.meta.url).pathname;

const XSS = `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">`;
const TOKENS = { alice: "tok-alice-7f3a9c", victor: "tok-victor-51be20", bot: "tok-bot-9d0e44" };
const sha256 = (s) => createHash("sha256").update(s).digest("hex");

const work = mkdtempSync(join(tmpdir(), "remit-inbox-browser-"));
const write = (name, text) => writeFileSync(join(work, name), text);
write("host.rmti", HOST);
write("mailer.rmt", PROGRAM);
write("policy.toml", POLICY);
write("keys.json", JSON.stringify({ keys: [
  { id: "alice", sha256: sha256(TOKENS.alice), role: "approver" },
  { id: "victor", sha256: sha256(TOKENS.victor), role: "viewer" },
  { id: "bot", sha256: sha256(TOKENS.bot) },
] }));

function remit(...args) {
  const r = spawnSync(remitvm, args, { cwd: work, encoding: "utf8", timeout: 60_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}
const store = () => JSON.parse(readFileSync(join(work, "st/approvals.json"), "utf8"));
const effects = () => (existsSync(join(work, "effects.jsonl")) ? readFileSync(join(work, "effects.jsonl"), "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)).filter((e) => e.resource === "mail.send") : []);

// Runs the program for `who` until it pauses; returns {run_id, digest}.
function pause(who) {
  const r = remit("run", "mailer.rmt", "-i", `who=${who}`, "--adapter", `python3 ${ADAPTER} --log effects.jsonl`, "--state-dir", "st", "--json");
  check(r.code === 3, `the run for ${JSON.stringify(who)} pauses for approval`, r);
  const envelope = JSON.parse(r.out);
  return { run_id: envelope.run_id, digest: envelope.pending.digest };
}

// The page of a run continued from the inbox reloads itself until the run ends; waits for that.
async function waitForOutcome(page) {
  for (let i = 0; i < 600; i++) {
    const outcome = await page.$eval("#outcome", (el) => el.dataset.status).catch(() => null);
    if (outcome) return outcome;
    await new Promise((done) => setTimeout(done, 100));
  }
  throw new Error(`the run's page never showed how the run ended: ${page.url()}`);
}

// The inbox on a free port.
async function startInbox() {
  const proc = spawn(remitvm, ["inbox", "--port", "0", "--keys", "keys.json", "--state-dir", "st"], { cwd: work, stdio: ["ignore", "ignore", "pipe"] });
  let text = "";
  const port = await new Promise((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`the inbox did not start: ${text}`)), 20_000);
    proc.stderr.on("data", (chunk) => {
      text += chunk;
      const found = /listening on http:\/\/127\.0\.0\.1:(\d+)\//.exec(text);
      if (found) { clearTimeout(timer); done(Number(found[1])); }
    });
    proc.on("exit", (code) => fail(new Error(`the inbox exited with ${code}: ${text}`)));
  });
  return { proc, port, base: `http://127.0.0.1:${port}` };
}

// A page on another origin (another port of the same host: same site, so a SameSite=Strict cookie
// still goes with its requests) whose form posts to the inbox without a CSRF token.
async function startAttacker(target) {
  const server = createServer((req, res) => {
    res.writeHead(200, { "Content-Type": "text/html" });
    res.end(`<!doctype html><title>win a prize</title><form method="post" action="${target}">` +
            `<input type="hidden" name="reason" value="x"><button id="go">Claim</button></form>`);
  });
  await new Promise((done) => server.listen(0, "127.0.0.1", done));
  return { server, url: `http://127.0.0.1:${server.address().port}/` };
}

let inbox, attacker, browser;
const profile = mkdtempSync(join(tmpdir(), "remit-inbox-chromium-"));
try {
  const first = pause(XSS);
  inbox = await startInbox();
  const { base } = inbox;

  // --- keys, over plain HTTP -------------------------------------------------------------------
  const get = (path, token) => fetch(base + path, { headers: token ? { Authorization: `Bearer ${token}` } : {}, redirect: "manual" });
  check((await get("/")).status === 401, "no key: 401");
  check((await get("/", "not-a-key")).status === 401, "a wrong key: 401");
  check((await get("/", TOKENS.bot)).status === 403, "a key without a role (an MCP client's): 403");
  check((await get("/", TOKENS.victor)).status === 200, "a viewer's key sees the list");
  const viewerPost = await fetch(`${base}/requests/${first.digest}/approve`, { method: "POST", headers: { Authorization: `Bearer ${TOKENS.victor}` }, body: "", redirect: "manual" });
  check(viewerPost.status === 403, "a viewer's key cannot approve: 403", viewerPost.status);
  check(!store().approved[first.digest], "nothing was approved by the viewer");

  // --- the browser ---------------------------------------------------------------------------
  browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    userDataDir: profile,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync"],
  });
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 860 });
  // Probes installed before any page script: CSP violations, and the dialogs the page asks.
  await page.evaluateOnNewDocument(() => {
    window.__violations = [];
    document.addEventListener("securitypolicyviolation", (e) => {
      window.__violations.push({ directive: e.violatedDirective, blocked: e.blockedURI, sample: e.sample });
    });
  });
  const dialogs = [];
  page.on("dialog", async (dialog) => { dialogs.push(dialog.message()); await dialog.accept(); });
  const pageErrors = [];
  page.on("pageerror", (error) => pageErrors.push(String(error)));

  // Not logged in: the login page, answered 401.
  let response = await page.goto(base + "/");
  check(response.status() === 401, "the page without a key: 401", response.status());
  await page.type("#key", "wrong-key");
  [response] = await Promise.all([page.waitForNavigation(), page.click("form.login button")]);
  check(response.status() === 401, "a wrong key at the login: 401", [response.status(), await page.content()]);
  await page.type("#key", TOKENS.alice);
  [response] = await Promise.all([page.waitForNavigation(), page.click("form.login button")]);
  check(response.status() === 200 && page.url() === base + "/", "logged in, on the list", page.url());
  const cookies = await page.cookies();
  const session = cookies.find((c) => c.name === "remit_inbox");
  check(session && session.httpOnly && session.sameSite === "Strict", "the session cookie is HttpOnly, SameSite=Strict", cookies);
  check(await page.evaluate(() => document.cookie) === "", "no script can read the session cookie");
  const rows = await page.$$eval("#requests tbody tr", (trs) => trs.map((tr) => tr.dataset.digest));
  check(rows.length === 1 && rows[0] === first.digest, "the page lists the paused run's request", rows);
  if (screenshots) await page.screenshot({ path: join(screenshots, "inbox-list.png"), fullPage: true });

  // The request, with the payload in its arguments: shown as text, never run.
  [response] = await Promise.all([page.waitForNavigation(), page.click(`a[href="/requests/${first.digest}"]`)]);
  check(response.status() === 200, "the request page opens");
  const shown = await page.$eval("#arguments", (el) => el.textContent);
  check(shown.includes(JSON.stringify(`about ${XSS}: customer of ${XSS}`)), "the untrusted argument is shown whole, as text (JSON)", shown);
  const probe = await page.evaluate(() => ({
    pwned: window.__pwned,
    images: document.querySelectorAll("img").length,
    scripts: [...document.scripts].map((s) => s.src || "(inline)"),
    violations: window.__violations,
  }));
  check(probe.pwned === undefined, "the payload set nothing", probe);
  check(probe.images === 0, "no <img> came out of the payload", probe);
  check(probe.scripts.length === 1 && probe.scripts[0] === base + "/static/inbox.js", "the only script is the server's", probe);
  check(probe.violations.length === 0, "no CSP violation: nothing in the page even tried to run", probe);
  const details = await page.$eval("main", (el) => el.textContent);
  for (const expected of ["'body' is untrusted", "crm.lookup", "Calls, at most", "mail.send.body", "The program's worst-case cost"])
    check(details.includes(expected), `the request page shows ${JSON.stringify(expected)}`);
  if (screenshots) await page.screenshot({ path: join(screenshots, "inbox-request.png"), fullPage: true });

  // The CSP holds on its own: an inline script added to the page is blocked and reported.
  const inline = await page.evaluate(async () => {
    const s = document.createElement("script");
    s.textContent = "window.__inline = 1";
    document.body.appendChild(s);
    await new Promise((r) => setTimeout(r, 50));
    return { ran: window.__inline, violations: window.__violations.map((v) => v.directive) };
  });
  check(inline.ran === undefined && inline.violations.some((d) => d.startsWith("script-src")), "the CSP blocks inline script", inline);

  // A same-origin POST without the CSRF token (the cookie goes with it): refused.
  const noToken = await page.evaluate(async (url) => (await fetch(url, { method: "POST", body: "", credentials: "same-origin", redirect: "manual" })).status,
    `/requests/${first.digest}/approve`);
  check(noToken === 403, "a POST without the CSRF token: 403", noToken);

  // Approve: the page asks first, then lists the request as approved by alice.
  [response] = await Promise.all([page.waitForNavigation(), page.click("#approve")]);
  check(dialogs.length === 1 && dialogs[0].includes("Approve mail.send"), "the page asks before approving", dialogs);
  check(response.status() === 200 && (await page.$eval("#notice", (el) => el.textContent)).includes("Approved"), "approved, says the list");
  check((await page.$eval("#requests tbody tr", (el) => el.textContent)).includes("approved by alice"), "the row says who approved it");
  check(store().approved[first.digest]?.by === "alice", "the store holds alice's approval", store().approved);
  // Continue, from the same notice: the inbox resumes the run, and its page says how it ended.
  [response] = await Promise.all([page.waitForNavigation(), page.click("#continue")]);
  check(response.status() === 200 && page.url() === `${base}/runs/${first.run_id}`, "Continue opens the run's page", page.url());
  check(await waitForOutcome(page) === "completed", "the run completed", await page.content());
  check((await page.$eval("#result", (el) => el.textContent)).includes(JSON.stringify("sent done:mail.send")), "its result is shown");
  check(effects().length === 1, "the effect happened once", effects());
  if (screenshots) await page.screenshot({ path: join(screenshots, "inbox-run.png"), fullPage: true });
  await page.goto(base + "/");
  check(await page.$("#requests") === null, "nothing is pending any more");

  // Deny with a reason (one more payload), then Continue: the run fails with R0302 naming alice
  // and the reason, shown as text.
  const second = pause("Bob");
  const reason = `<img src=x onerror="window.__pwned=3">not our customer`;
  await page.goto(`${base}/requests/${second.digest}`);
  await page.type("#reason", reason);
  [response] = await Promise.all([page.waitForNavigation(), page.click("#deny")]);
  check(response.status() === 200 && (await page.$eval("#notice", (el) => el.textContent)).includes("Denied"), "denied, says the list");
  await Promise.all([page.waitForNavigation(), page.click("#continue")]);
  check(await waitForOutcome(page) === "failed", "the denied run failed", await page.content());
  const failed = await page.$eval("#outcome", (el) => el.textContent);
  check(failed.includes("R0302") && failed.includes(`denied by alice: ${reason}`), "the page names the denier and the reason, as text", failed);
  const probe2 = await page.evaluate(() => ({ pwned: window.__pwned, images: document.querySelectorAll("img").length }));
  check(probe2.pwned === undefined && probe2.images === 0, "the reason's payload ran nothing", probe2);
  check(effects().length === 1, "the denied call was not made", effects());

  // A form on another origin posting to the inbox, with the operator's cookie: refused.
  const third = pause("Carol");
  attacker = await startAttacker(`${base}/requests/${third.digest}/approve`);
  await page.goto(attacker.url);
  [response] = await Promise.all([page.waitForNavigation(), page.click("#go")]);
  check(response.status() === 403, "a cross-site POST is refused: 403", response.status());
  check(!store().approved[third.digest] && store().pending[third.digest], "and approved nothing", store());

  // A viewer, in a fresh browser context: sees the request, has no decision forms.
  const context = await browser.createBrowserContext();
  const viewer = await context.newPage();
  await viewer.goto(base + "/login");
  await viewer.type("#key", TOKENS.victor);
  await Promise.all([viewer.waitForNavigation(), viewer.click("form.login button")]);
  await viewer.goto(`${base}/requests/${third.digest}`);
  check(await viewer.$("#approve") === null && await viewer.$("#viewer") !== null, "a viewer's page has no Approve button");
  await context.close();

  check(pageErrors.length === 0, "no script error on any page", pageErrors);
} catch (error) {
  failures += 1;
  console.log(`FAIL  ${error.stack ?? error}`);
} finally {
  if (browser) await browser.close();
  if (attacker) attacker.server.close();
  if (inbox && inbox.proc.exitCode === null) {
    const exited = new Promise((done) => inbox.proc.on("exit", done));
    inbox.proc.kill("SIGTERM");
    await exited;
  }
  rmSync(profile, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
}
console.log(failures ? `${failures} check(s) failed` : "ok    the inbox in Chromium: list, login, request, approve, deny, XSS, CSP, CSRF, roles");
process.exit(failures ? 1 : 0);
