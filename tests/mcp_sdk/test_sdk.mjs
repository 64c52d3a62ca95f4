// The official MCP TypeScript SDK (pinned in package-lock.json) driving `remitvm mcp` over stdio
// and HTTP: what an SDK client writes, which a scripted client can miss (issue #16). Run as
// `node test_sdk.mjs REMITVM`; prints ok/FAIL per test and exits 1 on a failure.
import { spawn } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
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

async function stdioClient() {
  const client = new Client({ name: "remit-sdk-test", version: "1.0.0" });
  await client.connect(new StdioClientTransport({ command: remitvm, args: ["mcp"], stderr: "pipe" }));
  return client;
}

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
      let aborted = false;
      try {
        await call;
      } catch {
        aborted = true;
      }
      expect(aborted, "the aborted call rejects");
      const { tools } = await client.listTools(undefined, QUICK);
      expect(tools.length === 8, "the next request is answered");
    } finally {
      await client.close();
    }
  },

  async "http: a session, a tool call and 100 calls at once from one client, none refused"() {
    const server = spawn(remitvm, ["mcp", "--http", "--port", "0"], { stdio: ["ignore", "ignore", "pipe"] });
    try {
      const port = await new Promise((resolve, reject) => {
        let seen = "";
        server.stderr.on("data", (chunk) => {
          seen += chunk;
          const found = seen.match(/listening on http:\/\/127\.0\.0\.1:(\d+)\/mcp/);
          if (found) resolve(Number(found[1]));
        });
        server.on("exit", () => reject(new Error("the server ended: " + seen)));
      });
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
};

await runTests(tests);
