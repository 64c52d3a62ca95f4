// The official MCP TypeScript SDK (pinned in package-lock.json) driving `remitvm mcp` over stdio
// and HTTP: what an SDK client writes, which a scripted client can miss (issue #16), and, in
// `--approvals operator` mode, an SDK client that asks its user through MCP elicitation. Run as
// `node test_sdk.mjs REMITVM`; prints ok/FAIL per test and exits 1 on a failure.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { expect, runTests } from "../node_harness.mjs";

const remitvm = process.argv[2];
if (!remitvm) {
  console.error("usage: node test_sdk.mjs REMITVM");
  process.exit(2);
}

const HOST = `capability expenses.get(id: Str) -> Float
  tags untrusted
  idempotent

input id tags untrusted
`;
const NOTE = 'program note\nuses expenses.get\n\nfn main(id: Str) -> Float {\n  return expenses.get(id)\n}\n';
const FIXTURES = { capabilities: { "expenses.get": [{ output: 12.5, repeat: true }] } };
const SPIN =
  "program spin\n\nfn main() -> Int {\n  var n = 0\n  for i in range(1000000) {\n" +
  "    for j in range(1000000) {\n      n = n + len(str(j) + str(i))\n    }\n  }\n  return n\n}\n";
// A request the server does not answer fails here quickly instead of at the SDK's 60 s default.
const QUICK = { timeout: 15000 };

const text = (result) => JSON.parse(result.content[0].text);

// Whether `promise` rejects (an aborted call does).
async function rejects(promise) {
  try {
    await promise;
    return false;
  } catch {
    return true;
  }
}

// Waits up to `ms` for `condition()` to hold.
async function eventually(condition, ms = 5000) {
  for (let waited = 0; !condition() && waited < ms; waited += 50) await new Promise((r) => setTimeout(r, 50));
  return condition();
}

async function stdioClient() {
  const client = new Client({ name: "remit-sdk-test", version: "1.0.0" });
  await client.connect(new StdioClientTransport({ command: remitvm, args: ["mcp"], stderr: "pipe" }));
  return client;
}

// Starts `remitvm ARGS --http --port 0` and resolves with the server process and its port.
async function httpServer(args = []) {
  const server = spawn(remitvm, ["mcp", "--http", "--port", "0", ...args], { stdio: ["ignore", "ignore", "pipe"] });
  const port = await new Promise((resolve, reject) => {
    let seen = "";
    server.stderr.on("data", (chunk) => {
      seen += chunk;
      const found = seen.match(/listening on http:\/\/127\.0\.0\.1:(\d+)\/mcp/);
      if (found) resolve(Number(found[1]));
    });
    server.on("exit", () => reject(new Error("the server ended: " + seen)));
  });
  return { server, port };
}

// ---------------------------------------------------------------- asking the user (elicitation)

// A call that needs a person's approval: the note read from a file is untrusted, and mail.send's
// body asks for approval when it receives untrusted data. mail.send has one fixture entry, not
// repeated: a second send would find none and fail, so "sent m-1" means it ran exactly once.
const MAIL_HOST = `capability files.read(path: Str) -> Str
  tags untrusted
  idempotent

capability mail.send(to: Str deny untrusted, body: Str approve untrusted) -> Str

input path tags untrusted
`;
const FORWARD = `program forward
uses files.read, mail.send

fn main(path: Str) -> Str {
  let text = files.read(path)
  let receipt = mail.send(to: "ops@example.com", body: text)
  return "sent {receipt}"
}
`;
const MAIL_FIXTURES = { capabilities: {
  "files.read": [{ args: { path: "notes.txt" }, output: "disk 91% full" }],
  "mail.send": [{ output: "m-1" }] } };
const MAIL_RUN = { program: FORWARD, host: MAIL_HOST, fixtures: MAIL_FIXTURES, inputs: { path: "notes.txt" } };

// The user's side: answers each elicitation/create with the next of `answers` (an object, or a
// function of the request and its `extra`), and keeps what it was asked.
function user(answers) {
  const asked = [];
  const handler = async (request, extra) => {
    asked.push({ params: request.params, extra });
    const answer = answers[Math.min(asked.length, answers.length) - 1];
    return typeof answer === "function" ? answer(request, extra) : answer;
  };
  return { asked, handler };
}

// An answer that never comes: it waits until the server withdraws the question
// (notifications/cancelled, which aborts the handler's signal); `withdrawn()` says whether it did.
function neverAnswers() {
  let withdrawn = false;
  const answer = (request, extra) => new Promise((resolve) => {
    extra.signal.addEventListener("abort", () => { withdrawn = true; resolve(CANCEL); });
  });
  return { answer, withdrawn: () => withdrawn };
}

const APPROVE = { action: "accept", content: { decision: "approve" } };
const DENY = { action: "accept", content: { decision: "deny", reason: "not on a Friday" } };
const DECLINE = { action: "decline" };
const CANCEL = { action: "cancel" };

// A client that can be asked (or, with `elicits` false, one that did not declare it).
function operatorClient(theUser, elicits = true) {
  const client = new Client({ name: "remit-sdk-test", version: "1.0.0" },
                            { capabilities: elicits ? { elicitation: {} } : {} });
  if (elicits) client.setRequestHandler(ElicitRequestSchema, theUser.handler);
  return client;
}

function stateDir() {
  return fs.mkdtempSync(path.join(os.tmpdir(), "remit-sdk-state-"));
}

function store(dir) {
  const file = path.join(dir, "approvals.json");
  return fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, "utf8")) : {};
}

// The question is clear and follows MCP's rules: the message names the resource, the site, every
// argument in full and the reasons; the schema is a flat object of primitive properties with a
// required approve/deny choice and an optional reason.
function checkQuestion(params) {
  expect(params.mode === undefined || params.mode === "form", "a form", params);
  for (const words of ["mail.send", "main#1", "line 6", "\"body\": \"disk 91% full\"", "\"to\": \"ops@example.com\"",
                       "'body' is untrusted"])
    expect(params.message.includes(words), `the message says ${words}`, params.message);
  const schema = params.requestedSchema;
  expect(schema.type === "object" && JSON.stringify(schema.required) === '["decision"]', "decision required", schema);
  for (const [name, property] of Object.entries(schema.properties))
    expect(["string", "number", "integer", "boolean"].includes(property.type) && !("properties" in property) &&
           !("items" in property), `property ${name} is primitive`, property);
  expect(JSON.stringify(schema.properties.decision.enum) === '["approve","deny"]', "approve or deny", schema);
  expect(schema.properties.reason.type === "string", "an optional reason", schema);
}

// The same checks over both transports: `connect(client, args)` connects the client to a server
// started with `args` and returns a function that stops it.
function elicitationTests(transport, connect) {
  const operator = (dir, more = []) => ["--approvals", "operator", "--state-dir", dir, ...more];
  const run = async (theUser, { elicits = true, tool = "remit_run", more = [], dir = stateDir() } = {}) => {
    const client = operatorClient(theUser, elicits);
    const stop = await connect(client, operator(dir, more));
    try {
      const result = text(await client.callTool({ name: tool, arguments: MAIL_RUN }, undefined, QUICK));
      return { result, dir, client, stop };
    } catch (error) {
      await stop();
      throw error;
    }
  };
  return {
    async [`${transport}: operator mode asks the user; approve performs the call exactly once`]() {
      const theUser = user([APPROVE]);
      const { result, dir, stop } = await run(theUser);
      try {
        expect(theUser.asked.length === 1, "asked once", theUser.asked.length);
        checkQuestion(theUser.asked[0].params);
        expect(result.status === "completed" && result.result === "sent m-1", "the run completed", result);
        const sends = result.calls.filter((c) => c.resource === "mail.send");
        expect(sends.length === 1 && sends[0].status === "ok" && sends[0].approval_needed === true,
               "one mail.send, approved", result.calls);
        const consumed = Object.values(store(dir).consumed ?? {});
        expect(consumed.length === 1 && consumed[0].by.startsWith("user via MCP elicitation"),
               "the approval is recorded once, naming the channel", store(dir));
      } finally {
        await stop();
      }
    },

    async [`${transport}: deny with a reason refuses the call as the operator's deny does`]() {
      const theUser = user([DENY]);
      const { result, dir, stop } = await run(theUser);
      try {
        expect(result.status === "failed" && result.error.code === "R0302", "R0302", result);
        expect(/denied by user via MCP elicitation.*: not on a Friday; the call was not made/.test(result.error.message),
               "names the denier and the reason", result.error);
        expect(!result.calls.some((c) => c.resource === "mail.send"), "mail.send never ran", result.calls);
        const refused = Object.values(store(dir).refused ?? {});
        expect(refused.length === 1 && refused[0].reason === "not on a Friday", "recorded as a denial", store(dir));
      } finally {
        await stop();
      }
    },

    async [`${transport}: decline refuses the call too`]() {
      const { result, stop } = await run(user([DECLINE]));
      try {
        expect(result.status === "failed" && result.error.code === "R0302" &&
               result.error.message.includes("declined"), "R0302, declined", result);
      } finally {
        await stop();
      }
    },

    async [`${transport}: cancel leaves the run paused; resuming asks again`]() {
      const theUser = user([CANCEL, APPROVE]);
      const { result, client, stop } = await run(theUser);
      try {
        expect(result.status === "approval_required" && result.elicitation?.outcome === "cancel" &&
               result.approver === "operator", "paused, and says the user did not decide", result);
        const done = text(await client.callTool({ name: "remit_resume",
          arguments: { run_token: result.run_token, approve: true } }, undefined, QUICK));
        expect(theUser.asked.length === 2, "asked again", theUser.asked.length);
        expect(done.status === "completed" && done.result === "sent m-1", "then approved and done", done);
      } finally {
        await stop();
      }
    },

    async [`${transport}: no answer in time leaves the run paused and withdraws the question`]() {
      const silent = neverAnswers();
      const { result, stop } = await run(user([silent.answer]), { more: ["--elicitation-timeout", "1"] });
      try {
        expect(result.status === "approval_required" && result.elicitation?.outcome === "timeout",
               "paused after the timeout", result);
        expect(await eventually(silent.withdrawn),
               "the client was told the question is withdrawn (notifications/cancelled)");
      } finally {
        await stop();
      }
    },

    async [`${transport}: a client without elicitation is never asked; the operator decides`]() {
      const { result, stop } = await run(user([APPROVE]), { elicits: false });
      try {
        expect(result.status === "approval_required" && result.approver === "operator" &&
               !("elicitation" in result) && result.next.includes("remitvm approve"), "paused as before", result);
      } finally {
        await stop();
      }
    },

    async [`${transport}: remit_run_fixtures asks the user too, and refuses what nobody approved`]() {
      const approved = await run(user([APPROVE]), { tool: "remit_run_fixtures" });
      try {
        expect(approved.result.ok === true && approved.result.result === "sent m-1", "approved", approved.result);
      } finally {
        await approved.stop();
      }
      const unasked = await run(user([APPROVE]), { tool: "remit_run_fixtures", elicits: false });
      try {
        expect(unasked.result.ok === false && unasked.result.runtime_error.includes("R0302") &&
               unasked.result.next.includes("remit_run"), "refused, never granted automatically", unasked.result);
      } finally {
        await unasked.stop();
      }
    },

    async [`${transport}: cancelling the call while the user is asked aborts it and withdraws the question`]() {
      const silent = neverAnswers();
      const theUser = user([silent.answer]);
      const client = operatorClient(theUser);
      const stop = await connect(client, operator(stateDir()));
      try {
        const controller = new AbortController();
        const call = client.callTool({ name: "remit_run", arguments: MAIL_RUN }, undefined,
                                     { signal: controller.signal, timeout: 60000 });
        expect(await eventually(() => theUser.asked.length === 1), "the user is being asked");
        controller.abort("the user pressed stop");
        expect(await rejects(call), "the aborted call rejects");
        expect(await eventually(silent.withdrawn), "the question was withdrawn");
        const { tools } = await client.listTools(undefined, QUICK);
        expect(tools.length === 8, "the server goes on");
      } finally {
        await stop();
      }
    },
  };
}

const stdioConnect = async (client, args) => {
  await client.connect(new StdioClientTransport({ command: remitvm, args: ["mcp", ...args], stderr: "pipe" }));
  return () => client.close();
};

const httpConnect = async (client, args) => {
  const { server, port } = await httpServer(args);
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)));
  } catch (error) {
    server.kill("SIGTERM");
    throw error;
  }
  return async () => {
    await client.close();
    server.kill("SIGTERM");
  };
};

const tests = {
  async "stdio: the handshake, the tools and their truthful annotations"() {
    const client = await stdioClient();
    try {
      const { tools } = await client.listTools(undefined, QUICK);
      expect(tools.length === 8, "eight tools", tools.map((t) => t.name));
      const resume = tools.find((t) => t.name === "remit_resume");
      expect(resume.annotations.destructiveHint === true && resume.annotations.readOnlyHint === false,
             "remit_resume is not read-only", resume.annotations);
      const check = await client.callTool({ name: "remit_check", arguments: { program: NOTE, host: HOST } },
                                          undefined, QUICK);
      expect(text(check).ok === true, "remit_check", check);
    } finally {
      await client.close();
    }
  },

  async "stdio: a string cut inside an emoji (a lone surrogate) is answered, as U+FFFD"() {
    const client = await stdioClient();
    try {
      const cut = "🍵".slice(0, 1);  // what JavaScript leaves when a string is cut mid-emoji
      const program = `program p\n\nfn main() -> Str {\n  return "tea ${cut}"\n}\n`;
      const result = await client.callTool({ name: "remit_format", arguments: { program } }, undefined, QUICK);
      expect(text(result).program.includes("tea \ufffd"), "formatted with U+FFFD", result);
    } finally {
      await client.close();
    }
  },

  async "stdio: fixtures and inputs as objects, as the Inspector sends them"() {
    const client = await stdioClient();
    try {
      const result = await client.callTool({ name: "remit_run_fixtures", arguments: {
        program: NOTE, host: HOST, fixtures: FIXTURES, inputs: { id: "X" } } }, undefined, QUICK);
      expect(text(result).ok === true && text(result).result === 12.5, "ran on the objects", result);
    } finally {
      await client.close();
    }
  },

  async "stdio: aborting a call sends notifications/cancelled, and the server goes on at once"() {
    const client = await stdioClient();
    try {
      const controller = new AbortController();
      const call = client.callTool({ name: "remit_run_fixtures", arguments: { program: SPIN, host: "", fixtures: {} } },
                                   undefined, { signal: controller.signal, timeout: 60000 });
      setTimeout(() => controller.abort("the user pressed stop"), 100);
      expect(await rejects(call), "the aborted call rejects");
      const { tools } = await client.listTools(undefined, QUICK);
      expect(tools.length === 8, "the next request is answered");
    } finally {
      await client.close();
    }
  },

  async "http: a session, a tool call and 100 calls at once from one client, none refused"() {
    const { server, port } = await httpServer();
    try {
      const client = new Client({ name: "remit-sdk-test", version: "1.0.0" });
      await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)));
      const one = await client.callTool({ name: "remit_check", arguments: { program: NOTE, host: HOST } },
                                        undefined, QUICK);
      expect(text(one).ok === true, "remit_check over HTTP", one);
      const results = await Promise.allSettled(Array.from({ length: 100 }, () =>
        client.callTool({ name: "remit_check", arguments: { program: NOTE, host: HOST } }, undefined, QUICK)));
      const refused = results.filter((r) => r.status !== "fulfilled");
      expect(refused.length === 0, "every one of 100 concurrent calls answered",
             refused.slice(0, 3).map((r) => String(r.reason)));
      await client.close();
    } finally {
      server.kill("SIGTERM");
    }
  },

  ...elicitationTests("stdio", stdioConnect),
  ...elicitationTests("http", httpConnect),
};

await runTests(tests);
