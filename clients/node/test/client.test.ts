// The tests of remit-client, run by clients/node/run_tests against the packed package installed
// into a scratch project (so they see exactly what a user installs) and the real `remitvm serve`
// ($REMITVM). Compiled with the package's pinned TypeScript in strict mode, so the package's
// types are tested too: a reply field used here that the types do not declare fails the build.

import { strict as assert } from "node:assert";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";

import {
  declaredFields,
  RemitClient,
  RemitError,
  RemitProcessError,
  RemitProtocolError,
  RemitRequestError,
  RemitServerError,
  RemitTimeoutError,
  type CompletedReply,
  type FailedReply,
  type HostCallReply,
  type Outcome,
  type RejectedReply,
  type Reply,
} from "remit-client";

const remitvm = process.env.REMITVM;
if (!remitvm) throw new Error("set REMITVM to the remitvm to test against");

// The programs tests/e2e/test_serve.py runs too, from the repository's one copy (run_tests says where).
const programsPath = process.env.REMIT_SERVE_PROGRAMS;
if (!programsPath) throw new Error("set REMIT_SERVE_PROGRAMS to tests/data/serve_programs.json");
const PROGRAMS = JSON.parse(readFileSync(programsPath, "utf8")) as Record<string, string>;
const HOST = PROGRAMS.host;
const FETCH = PROGRAMS.fetch_or_nothing;
const NOTIFY = PROGRAMS.notify;
const SPIN = PROGRAMS.spin;

const scratch = mkdtempSync(join(tmpdir(), "remit-client-test-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

// Every field of a reply the server printed is one its type declares: the types cover the protocol.
function declared(reply: Reply): void {
  const known = declaredFields[reply.status];
  for (const key of Object.keys(reply)) assert.ok(known.includes(key), `'${reply.status}' has undeclared field '${key}'`);
  if (reply.status === "host-call")
    for (const key of Object.keys(reply.call)) assert.ok(declaredFields.call.includes(key), `call field '${key}'`);
  if (reply.status === "rejected" || reply.status === "failed")
    for (const d of reply.diagnostics)
      for (const key of Object.keys(d)) assert.ok(declaredFields.diagnostic.includes(key), `diagnostic field '${key}'`);
}

function paused(outcome: Outcome): HostCallReply {
  declared(outcome);
  assert.equal(outcome.status, "host-call", JSON.stringify(outcome));
  return outcome as HostCallReply;
}

// A stand-in for remitvm: a Node script that plays a broken server.
function fakeServer(name: string, body: string): string {
  const path = join(scratch, name);
  writeFileSync(path, `#!${process.execPath}\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

async function withClient(fn: (client: RemitClient) => Promise<void>): Promise<void> {
  const client = await RemitClient.start({ remitvm });
  try {
    await fn(client);
  } finally {
    assert.equal(await client.close(), 0, "remitvm serve exits 0 at the end of its input");
  }
}

test("a call pauses, the host performs it, and the run completes with typed fields", () =>
  withClient(async (client) => {
    const pause = paused(
      await client.run({ program: FETCH, host: HOST, grants: [{ name: "web.fetch", mode: "ask" }], inputs: { topic: "tea" } }),
    );
    assert.equal(pause.call.resource, "web.fetch");
    assert.equal(pause.call.kind, "capability");
    assert.equal(pause.call.mode, "ask");
    assert.deepEqual(pause.call.args, { url: "https://example.org/tea" });
    assert.deepEqual(pause.call.arg_tags, { url: ["untrusted"] });
    assert.deepEqual(pause.call.span, { line: 5, col: 14, end_line: 5, end_col: 77 });
    assert.equal(pause.call.returns, "Str");
    const done = await client.perform(pause, "a page about tea", 0.25);
    declared(done);
    assert.equal(done.status, "completed");
    const completed = done as CompletedReply;
    assert.equal(completed.result, "got a page about tea");
    assert.equal(completed.type, "Str");
    assert.deepEqual(completed.result_tags, ["untrusted"]);
    assert.equal(completed.host_calls, 1);
    assert.equal(completed.spent_usd, 0.25);
  }));

test("a program that does not check is rejected with diagnostics and what it requires", () =>
  withClient(async (client) => {
    const r = await client.run({ program: FETCH, host: HOST, inputs: { topic: "tea" } });
    declared(r);
    assert.equal(r.status, "rejected");
    const rejected = r as RejectedReply;
    assert.equal(rejected.stage, "grant");
    assert.equal(rejected.diagnostics[0].code, "E0501");
    assert.equal(rejected.diagnostics[0].line, 5);
    assert.deepEqual(rejected.requires, ["web.fetch"]);
    assert.match(rejected.rendered, /program\.rmt:5:14: error\[E0501\]/);
  }));

test("deny fails the run with R0303; an approval reason forces mode ask", () =>
  withClient(async (client) => {
    const pause = paused(
      await client.run({ program: NOTIFY, host: HOST, grants: [{ name: "mail.send", mode: "allow" }], inputs: { topic: "tea" } }),
    );
    assert.equal(pause.call.mode, "ask");
    assert.deepEqual(pause.call.reasons, ["'body' is untrusted"]);
    const r = await client.deny(pause, "not now");
    declared(r);
    const failed = r as FailedReply;
    assert.equal(failed.status, "failed");
    assert.equal(failed.stage, "denied");
    assert.equal(failed.diagnostics[0].code, "R0303");
    assert.match(failed.diagnostics[0].message, /not now/);
  }));

test("fail is operational: the call's retry pauses again, then its else applies", () =>
  withClient(async (client) => {
    const first = paused(
      await client.run({ program: FETCH, host: HOST, grants: [{ name: "web.fetch" }], inputs: { topic: "tea" } }),
    );
    assert.equal(first.call.attempt, 0);
    const second = paused(await client.fail(first, { error: "Timeout", message: "slow" }));
    assert.equal(second.call.attempt, 1);
    assert.notEqual(second.call.id, first.call.id);
    const done = (await client.fail(second)) as CompletedReply;
    assert.equal(done.status, "completed");
    assert.equal(done.result, "got nothing");
  }));

test("execute runs the host's loop, one handler call per host call", () =>
  withClient(async (client) => {
    const seen: string[] = [];
    const end = await client.execute(
      { program: FETCH, host: HOST, grants: [{ name: "web.fetch", mode: "allow" }], inputs: { topic: "tea" } },
      (call) => {
        seen.push(`${call.resource} ${call.args.url}`);
        return { perform: "hello" };
      },
    );
    assert.equal(end.status, "completed");
    assert.equal((end as CompletedReply).result, "got hello");
    assert.deepEqual(seen, ["web.fetch https://example.org/tea"]);
    // A handler that throws aborts the session and the error reaches the caller.
    await assert.rejects(
      client.execute({ program: FETCH, host: HOST, grants: [{ name: "web.fetch" }], inputs: { topic: "x" } }, () => {
        throw new Error("no network");
      }),
      /no network/,
    );
  }));

test("sessions run side by side and each reply reaches its own request", () =>
  withClient(async (client) => {
    const topics = ["a", "b", "c", "d", "e", "f"];
    const pauses = await Promise.all(
      topics.map((topic) => client.run({ program: FETCH, host: HOST, grants: [{ name: "web.fetch" }], inputs: { topic } })),
    );
    const ends = await Promise.all(pauses.map((p) => client.perform(paused(p), `page ${(p as HostCallReply).call.args.url}`)));
    ends.forEach((end, i) => assert.equal((end as CompletedReply).result, `got page https://example.org/${topics[i]}`));
  }));

test("abort stops a paused session and a running one; an unknown session is a server error", () =>
  withClient(async (client) => {
    const pause = paused(await client.run({ program: FETCH, host: HOST, grants: [{ name: "web.fetch" }], inputs: { topic: "t" } }));
    const aborted = await client.abort(pause);
    assert.equal(aborted.status, "failed");
    assert.equal((aborted as FailedReply).stage, "aborted");
    assert.equal((aborted as FailedReply).diagnostics[0].code, "R0702");

    const running = client.run({ program: SPIN, host: "", session: "spin", limits: { wall_ms: 600_000, steps: 1e12 } });
    const stopped = await client.abort("spin");
    const end = await running;
    assert.equal(end.status, "failed");
    assert.equal((end as FailedReply).stage, "aborted");
    assert.deepEqual(stopped, end, "the abort resolves with the run's last reply");

    await assert.rejects(client.abort("nobody"), (e: unknown) => e instanceof RemitServerError && e.code === "unknown_session");
  }));

test("error replies are RemitServerErrors with their code", () =>
  withClient(async (client) => {
    await assert.rejects(
      client.run({ program: FETCH, host: HOST, limits: { steps: 0 } }),
      (e: unknown) =>
        e instanceof RemitServerError && e.code === "bad_request" && /limits\.steps/.test(e.message) && e instanceof RemitError,
    );
    const pause = paused(
      await client.run({ program: FETCH, host: HOST, session: "busy", grants: [{ name: "web.fetch" }], inputs: { topic: "t" } }),
    );
    await assert.rejects(client.run({ program: FETCH, host: HOST, session: "busy" }), (e: unknown) =>
      e instanceof RemitServerError && e.code === "session_busy");
    const wrong: HostCallReply = { ...pause, call: { ...pause.call, id: pause.call.id + 5 } };
    await assert.rejects(client.perform(wrong, "x"), (e: unknown) => e instanceof RemitServerError && e.code === "wrong_call");
    // The session is still paused at its call.
    assert.equal((await client.perform(pause, "y")).status, "completed");
  }));

test("a request over the server's line limit is refused before it is sent", () =>
  withClient(async (client) => {
    await assert.rejects(client.run({ program: "x".repeat(9 << 20), host: "" }), RemitRequestError);
    // The client still works.
    assert.equal((await client.run({ program: "program p\n\nfn main() -> Int {\n  return 1\n}\n", host: "" })).status, "completed");
  }));

test("a server that dies fails the waiting requests and every later one with RemitProcessError", async () => {
  const client = await RemitClient.start({ remitvm });
  const running = client.run({ program: SPIN, host: "", limits: { wall_ms: 600_000, steps: 1e12 } });
  client.kill();
  await assert.rejects(running, (e: unknown) => e instanceof RemitProcessError && e.signal === "SIGKILL");
  await assert.rejects(client.run({ program: FETCH, host: HOST }), RemitProcessError);
  await client.close();
});

test("a server that exits at once, or cannot be started, is a RemitProcessError", async () => {
  const exits = fakeServer("exits", 'process.stderr.write("remitvm: cannot serve today\\n"); process.exit(3);');
  const client = await RemitClient.start({ remitvm: exits });
  await assert.rejects(
    client.run({ program: FETCH, host: HOST }),
    (e: unknown) => e instanceof RemitProcessError && e.exitCode === 3 && /cannot serve today/.test(e.stderr),
  );
  await assert.rejects(RemitClient.start({ remitvm: join(scratch, "no-such-remitvm") }), RemitProcessError);
});

test("a line that is not a reply is a RemitProtocolError, and the client stops", async () => {
  for (const [name, line] of [
    ["garbage", "this is not json"],
    ["status", '{"status": "sleeping", "id": 1}'],
    ["fields", '{"status": "completed", "id": 1, "session": "s"}'],
  ]) {
    const server = fakeServer(name, `process.stdin.once("data", () => console.log(${JSON.stringify(line)}));`);
    const client = await RemitClient.start({ remitvm: server });
    await assert.rejects(client.run({ program: FETCH, host: HOST }), RemitProtocolError);
    await assert.rejects(client.run({ program: FETCH, host: HOST }), RemitProtocolError);
    await client.close();
  }
});

test("a server that never answers is a RemitTimeoutError, not a hang", async () => {
  const silent = fakeServer("silent", "process.stdin.resume();");
  const client = await RemitClient.start({ remitvm: silent, replyTimeoutMs: 100 });
  await assert.rejects(client.run({ program: FETCH, host: HOST, limits: { wall_ms: 1 } }), RemitTimeoutError);
  client.kill();
  await client.close();
});

test("close kills a server that does not exit after its input ends", async () => {
  const stubborn = fakeServer("stubborn", "process.stdin.resume(); setInterval(() => {}, 1000);");
  const client = await RemitClient.start({ remitvm: stubborn });
  assert.equal(await client.close(100), null);
});
