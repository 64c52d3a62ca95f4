// `remitc lsp` as an editor meets it: driven over stdio by vscode-languageserver-protocol, the LSP
// client library VS Code's own client is built on (pinned in package-lock.json, installed by
// scripts/install-deps). Each test starts a fresh server on files in a temporary directory: open a
// document, edit it to contain an error, see the diagnostic (code and range), fix it, see it clear;
// the diagnostics of every check golden, corpus program and example are `remitc check --json`'s;
// hover, format, go to definition (into host.rmti too), symbols, completion, code lenses; an edited
// host.rmti buffer is what programs are checked against; UTF-8 positions when negotiated; raw
// malformed frames, a huge document and a document that does not parse. Run as
// `node test_lsp.mjs REMITC`; prints ok/FAIL per test and exits 1 on a failure.
import { spawn, spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import lsp from "vscode-languageserver-protocol/node.js";
import { expect, runTests } from "../node_harness.mjs";

const remitc = process.argv[2] && resolve(process.argv[2]);
if (!remitc) {
  console.error("usage: node test_lsp.mjs REMITC");
  process.exit(2);
}
const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const TIMEOUT_MS = 15000;  // a reply that does not come fails the test, never hangs it

function withTimeout(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), TIMEOUT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// A temporary copy of examples/hello (program, host interface, policy).
function helloWorkspace() {
  const dir = mkdtempSync(join(tmpdir(), "remit-lsp-"));
  for (const f of ["hello.rmt", "host.rmti", "policy.toml"]) cpSync(join(root, "examples", "hello", f), join(dir, f));
  return dir;
}

const uriOf = (path) => pathToFileURL(path).href;
const samePath = (uri, path) => fileURLToPath(uri) === resolve(path);

// Positions: UTF-16 code units (JavaScript's own string indexes) or UTF-8 bytes.
function positionAt(text, offset, encoding = "utf-16") {
  const before = text.slice(0, offset);
  const line = before.split("\n").length - 1;
  const lineText = before.slice(before.lastIndexOf("\n") + 1);
  return { line, character: encoding === "utf-8" ? Buffer.byteLength(lineText) : lineText.length };
}
// The position of the `nth` occurrence of `needle` in `text`, `shift` code units into it.
function find(text, needle, shift = 0, nth = 0) {
  let at = -1;
  for (let i = 0; i <= nth; i++) {
    at = text.indexOf(needle, at + 1);
    if (at < 0) throw new Error(`'${needle}' not in the text`);
  }
  return positionAt(text, at + shift);
}
function offsetAt(text, position) {
  const lines = text.split("\n");
  let offset = 0;
  for (let i = 0; i < position.line; i++) offset += lines[i].length + 1;
  return offset + position.character;
}
function applyEdits(text, edits) {
  const sorted = [...edits].sort((a, b) => offsetAt(text, b.range.start) - offsetAt(text, a.range.start));
  for (const e of sorted) text = text.slice(0, offsetAt(text, e.range.start)) + e.newText + text.slice(offsetAt(text, e.range.end));
  return text;
}
// A compiler position (1-based line, 1-based column in code points) as an LSP UTF-16 position.
function fromCompiler(text, line, col) {
  if (!line) return { line: 0, character: 0 };
  const lineText = (text.split("\n")[line - 1] ?? "").replace(/\r$/, "");
  return { line: line - 1, character: Array.from(lineText).slice(0, col - 1).join("").length };
}

class Session {
  static async start(encodings = ["utf-16"]) {
    const s = new Session();
    s.proc = spawn(remitc, ["lsp", "--stdio"], { stdio: ["pipe", "pipe", "pipe"] });
    s.exited = new Promise((done) => s.proc.on("exit", (code) => done(code)));
    s.conn = lsp.createProtocolConnection(new lsp.StreamMessageReader(s.proc.stdout),
                                          new lsp.StreamMessageWriter(s.proc.stdin));
    s.published = new Map();  // uri -> every publishDiagnostics for it, in order
    s.waiters = [];
    s.conn.onNotification(lsp.PublishDiagnosticsNotification.type, (params) => {
      if (!s.published.has(params.uri)) s.published.set(params.uri, []);
      s.published.get(params.uri).push(params);
      s.waiters = s.waiters.filter((w) => !w(params));
    });
    s.conn.listen();
    s.initialized = await withTimeout(s.conn.sendRequest(lsp.InitializeRequest.type, {
      processId: process.pid, rootUri: null, capabilities: { general: { positionEncodings: encodings } },
    }), "initialize");
    await s.conn.sendNotification(lsp.InitializedNotification.type, {});
    return s;
  }

  // The first publication for `uri` (already received or still to come) that `accept` takes.
  diagnostics(uri, accept = () => true) {
    const seen = (this.published.get(uri) ?? []).find(accept);
    if (seen) return Promise.resolve(seen);
    return withTimeout(new Promise((done) => this.waiters.push((p) => {
      if (p.uri !== uri || !accept(p)) return false;
      done(p);
      return true;
    })), `diagnostics for ${uri}`);
  }
  ofVersion(uri, version) { return this.diagnostics(uri, (p) => p.version === version); }

  open(path, text, version = 1) {
    return this.conn.sendNotification(lsp.DidOpenTextDocumentNotification.type,
                                      { textDocument: { uri: uriOf(path), languageId: "remit", version, text } });
  }
  change(path, version, contentChanges) {
    return this.conn.sendNotification(lsp.DidChangeTextDocumentNotification.type,
                                      { textDocument: { uri: uriOf(path), version }, contentChanges });
  }
  request(type, params) { return withTimeout(this.conn.sendRequest(type, params), type.method); }
  at(path, position) { return { textDocument: { uri: uriOf(path) }, position }; }

  async stop() {
    try {
      await withTimeout(this.conn.sendRequest(lsp.ShutdownRequest.type), "shutdown");
      await this.conn.sendNotification(lsp.ExitNotification.type);
      return await withTimeout(this.exited, "exit");
    } finally {
      this.conn.dispose();
      this.proc.kill("SIGKILL");
    }
  }
  kill() {
    this.conn.dispose();
    this.proc.kill("SIGKILL");
  }
}

// `remitc check --json` on files (one process for many), by absolute path.
function checkJson(files, cwd) {
  const run = spawnSync(remitc, ["check", "--json", ...files], { cwd, encoding: "utf8", maxBuffer: 1 << 26 });
  expect(run.stdout.trim() !== "", "remitc check --json printed results", run.stderr);
  const parsed = JSON.parse(run.stdout);
  return Array.isArray(parsed) ? parsed : [parsed];
}

// The LSP diagnostics of a program are exactly `remitc check`'s: same order, codes, messages,
// notes, hints, severities and places (a problem in another file is shown at the program's
// header, its own place given as related information).
function expectSameDiagnostics(published, checked, text, cwd) {
  const got = published.diagnostics, want = checked.diagnostics;
  const summary = { got: got.map((d) => [d.code, d.message]), want: want.map((d) => [d.code, d.message]) };
  expect(got.length === want.length, `${checked.file}: as many diagnostics as remitc check`, summary);
  want.forEach((w, i) => {
    const d = got[i];
    const message = [w.message, ...w.notes.map((n) => "note: " + n), ...(w.hint ? ["hint: " + w.hint] : [])].join("\n");
    expect(d.code === w.code && d.message === message, `${checked.file}: diagnostic ${i}`, { got: d, want: w });
    expect(d.severity === (w.severity === "error" ? 1 : 2), `${checked.file}: severity ${i}`, d);
    expect(d.data.message === w.message && (d.data.hint ?? null) === w.hint &&
           JSON.stringify(d.data.notes) === JSON.stringify(w.notes), `${checked.file}: data ${i}`, d);
    if (w.details !== undefined)
      expect(JSON.stringify(d.data.details) === JSON.stringify(w.details), `${checked.file}: details ${i}`, d);
    const inProgram = resolve(cwd, w.file) === resolve(checked.file);
    const range = inProgram ? d.range : d.relatedInformation?.[0]?.location.range;
    expect(range, `${checked.file}: a range for diagnostic ${i}`, d);
    const sourceText = inProgram ? text : readFileSync(resolve(cwd, w.file), "utf8");
    const start = fromCompiler(sourceText, w.line, w.col), end = fromCompiler(sourceText, w.end_line, w.end_col);
    expect(JSON.stringify(range) === JSON.stringify({ start, end }), `${checked.file}: range of ${w.code}`,
           { got: range, want: { start, end }, w });
    if (!inProgram) expect(samePath(d.relatedInformation[0].location.uri, resolve(cwd, w.file)),
                           `${checked.file}: related file of ${w.code}`, d);
  });
}

// Programs the goldens check with plain `remitc check` (no other flags, nothing removed).
function plainGoldens(dir) {
  return readdirSync(dir).filter((f) => f.endsWith(".rmt")).map((f) => join(dir, f)).filter((path) => {
    const bytes = readFileSync(path);
    try {
      new TextDecoder("utf-8", { fatal: true }).decode(bytes);  // an editor sends text, never invalid UTF-8
    } catch {
      return false;
    }
    const header = bytes.toString("utf8").split("\n").filter((l) => l.startsWith("# golden"));
    return header.every((l) => /^# golden: check( --json)?\s*$/.test(l));
  });
}

const HELLO = readFileSync(join(root, "examples", "hello", "hello.rmt"), "utf8");

// Runs `test` with a server and a fresh copy of examples/hello, and cleans both up.
async function withHello(test) {
  const dir = helloWorkspace();
  const s = await Session.start();
  try {
    await test({ s, dir, file: join(dir, "hello.rmt"), host: join(dir, "host.rmti") });
  } finally {
    s.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}
const HOST = readFileSync(join(root, "examples", "hello", "host.rmti"), "utf8");

const tests = {
  async "open, break, see the diagnostic, fix, see it clear"() {
    await withHello(async ({ s, dir, file }) => {
      const uri = uriOf(file);
      await s.open(file, HELLO);
      expect((await s.ofVersion(uri, 1)).diagnostics.length === 0, "hello checks cleanly");
      // Type a typo: `for site in sites` becomes `for site in sitez`.
      const at = find(HELLO, "in sites {", 3);
      await s.change(file, 2, [{ range: { start: at, end: { line: at.line, character: at.character + 5 } }, text: "sitez" }]);
      const broken = await s.ofVersion(uri, 2);
      const edited = HELLO.replace("in sites {", "in sitez {");
      expect(broken.diagnostics.length === 1, "one diagnostic", broken);
      const d = broken.diagnostics[0];
      expect(d.code === "E0101" && d.message === "unknown variable 'sitez'\nhint: did you mean 'sites'?",
             "E0101 with its hint", d);
      expect(JSON.stringify(d.range) === JSON.stringify({ start: at, end: { line: at.line, character: at.character + 5 } }),
             "the range of the typo", d.range);
      // The same as `remitc check` says of the same text.
      writeFileSync(join(dir, "edited.rmt"), edited);
      expectSameDiagnostics(broken, checkJson([join(dir, "edited.rmt")], dir)[0], edited, dir);
      // Fix it with a whole-text change (the other kind of change a client may send).
      await s.change(file, 3, [{ text: HELLO }]);
      expect((await s.ofVersion(uri, 3)).diagnostics.length === 0, "the diagnostic clears");
      expect(await s.stop() === 0, "exit 0 after shutdown");
    });
  },

  async "diagnostics are remitc check's for every check golden, corpus program and example"() {
    const groups = [plainGoldens(join(root, "tests", "golden", "check")),
                    readdirSync(join(root, "tests", "check")).filter((f) => f.endsWith(".rmt")).map((f) => join(root, "tests", "check", f)),
                    ...readdirSync(join(root, "examples"), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) =>
                      readdirSync(join(root, "examples", e.name)).filter((f) => f.endsWith(".rmt")).map((f) => join(root, "examples", e.name, f)))
                      .filter((files) => files.length > 0)];
    const s = await Session.start();
    try {
      let compared = 0;
      for (const files of groups) {
        const cwd = dirname(files[0]);
        const results = checkJson(files, cwd);
        for (let i = 0; i < files.length; i++) {
          const text = readFileSync(files[i], "utf8");
          await s.open(files[i], text);
          expectSameDiagnostics(await s.ofVersion(uriOf(files[i]), 1), results[i], text, cwd);
          await s.conn.sendNotification(lsp.DidCloseTextDocumentNotification.type, { textDocument: { uri: uriOf(files[i]) } });
          compared += 1;
        }
      }
      expect(compared > 125, "the plain check goldens, the corpus and the examples compared", compared);
    } finally {
      s.kill();
    }
  },

  async "hover shows the type, the static tags and the call bound"() {
    await withHello(async ({ s, file }) => {
      await s.open(file, HELLO);
      const call = await s.request(lsp.HoverRequest.type, s.at(file, find(HELLO, "web.fetch(u)", 4)));
      const text = call.contents.value;
      for (const part of ["capability web.fetch(url: Str deny private) -> Str", "**type** `Str`",
                          "`untrusted` from", "input 'topic'", "web.fetch ≤ 2 · $0.0020",
                          "call site `main#0`: at most 6 attempt(s) in a run"])
        expect(text.includes(part), `hover on web.fetch says ${part}`, text);
      expect(JSON.stringify(call.range.start) === JSON.stringify(find(HELLO, "web.fetch(u)")), "the call's range", call.range);
      const loop = await s.request(lsp.HoverRequest.type, s.at(file, find(HELLO, "for u in take", 1)));
      expect(loop.contents.value.includes("web.fetch ≤ 6 · $0.0060"), "the loop makes at most 6 calls", loop.contents.value);
      const let_ = await s.request(lsp.HoverRequest.type, s.at(file, find(HELLO, "let s =", 4)));
      for (const part of ["let s", "**type** `Summary`", "llm ≤ 2", "agent Summarizer ≤ 2", "`untrusted`"])
        expect(let_.contents.value.includes(part), `hover on s says ${part}`, let_.contents.value);
      const fn = await s.request(lsp.HoverRequest.type, s.at(file, find(HELLO, "fn greet", 4)));
      expect(fn.contents.value.includes("fn greet(topic: Str, s: Summary) -> Str") &&
             fn.contents.value.includes("no host calls"), "hover on a function", fn.contents.value);
      // A guard (an `if` that returns) is analysed like any expression.
      const guard = await s.request(lsp.HoverRequest.type, s.at(file, find(HELLO, "if len(found)", 0)));
      for (const part of ["**type** `Unit`", "`untrusted` from", "**calls (worst case)** no host calls"])
        expect(guard.contents.value.includes(part), `hover on a guard says ${part}`, guard.contents.value);
      const blank = await s.request(lsp.HoverRequest.type, s.at(file, { line: 1, character: 200 }));
      expect(blank === null || blank.contents, "a position past a line's end is answered", blank);
      const indent = await s.request(lsp.HoverRequest.type, s.at(file, find(HELLO, "    return \"Hello!", 1)));
      expect(indent === null, "blank space shows nothing", indent);
    });
  },

  async "format gives remitc fmt's text; a file that does not parse gets a clear error"() {
    await withHello(async ({ s, dir }) => {
      const file = join(dir, "messy.rmt");
      const messy = HELLO.replace("uses web.fetch, llm", "uses web.fetch,   llm").replace(/^  /gm, "      ")
        .replace("return greet(topic, s)", "return greet( topic , s )");
      writeFileSync(file, messy);
      await s.open(file, messy);
      const edits = await s.request(lsp.DocumentFormattingRequest.type,
                                    { textDocument: { uri: uriOf(file) }, options: { tabSize: 2, insertSpaces: true } });
      const formatted = applyEdits(messy, edits);
      const fmt = spawnSync(remitc, ["fmt", file], { encoding: "utf8" });
      expect(fmt.status === 0, "remitc fmt", fmt.stderr);
      expect(formatted === readFileSync(file, "utf8"), "the edits give remitc fmt's text", formatted);
      expect(formatted === HELLO, "which is the example as written");
      await s.change(file, 2, [{ text: formatted }]);
      const none = await s.request(lsp.DocumentFormattingRequest.type,
                                   { textDocument: { uri: uriOf(file) }, options: { tabSize: 2, insertSpaces: true } });
      expect(none.length === 0, "nothing to do on a formatted file", none);
      await s.change(file, 3, [{ text: "program broken\nfn main( {\n" }]);
      let error;
      try {
        await s.request(lsp.DocumentFormattingRequest.type, { textDocument: { uri: uriOf(file) }, options: { tabSize: 2, insertSpaces: true } });
      } catch (e) {
        error = e;
      }
      expect(error && error.code === -32803 && error.message.startsWith("cannot format messy.rmt: it has errors, the first is E0100 at line 2"),
             "a clear error", error && { code: error.code, message: error.message });
    });
  },

  async "go to definition: functions, agents, types, variables, and capabilities and models in host.rmti"() {
    await withHello(async ({ s, file, host }) => {
      await s.open(file, HELLO);
      const go = (needle, shift, nth = 0) => s.request(lsp.DefinitionRequest.type, s.at(file, find(HELLO, needle, shift, nth)));
      const expectAt = (loc, path, text, needle, shift, what) => {
        expect(loc && samePath(loc.uri, path), `${what}: the file`, loc);
        expect(JSON.stringify(loc.range.start) === JSON.stringify(find(text, needle, shift)), `${what}: the place`, loc);
      };
      expectAt(await go("greet(topic, s)", 2), file, HELLO, "fn greet", 3, "a function");
      expectAt(await go("web.fetch(u)", 5), host, HOST, "web.fetch(url", 0, "a capability");
      expectAt(await go("uses web.fetch, llm", 17), host, HOST, "llm cost", 0, "a model in uses");
      expectAt(await go("model: llm", 8), host, HOST, "llm cost", 0, "an agent's model");
      expectAt(await go("Summarizer.ask", 3), file, HELLO, "Summarizer {", 0, "an agent");
      expectAt(await go("ask(Summary", 5), file, HELLO, "Summary = ", 0, "a type");
      expectAt(await go("s: Summary", 5), file, HELLO, "Summary = ", 0, "a type in a signature");
      expectAt(await go("mood: Mood", 7), file, HELLO, "Mood = ", 0, "a type in a type");
      expectAt(await go("in pages", 4), file, HELLO, "pages =", 0, "a variable");
      expectAt(await go("topic}", 1, 0), file, HELLO, "topic: Str", 0, "a parameter in an interpolation");
      expect(await go("len(found)", 1) === null, "a builtin has no definition");
    });
  },

  async "document symbols of a program and of a host interface"() {
    await withHello(async ({ s, file, host }) => {
      await s.open(file, HELLO);
      await s.open(host, HOST);
      const symbols = await s.request(lsp.DocumentSymbolRequest.type, { textDocument: { uri: uriOf(file) } });
      const names = symbols.map((x) => x.name);
      expect(JSON.stringify(names.slice(0, 6)) === JSON.stringify(["hello", "Mood", "Summary", "Summarizer", "main", "greet"]),
             "program, types, agent, functions in order", names);
      expect(names.filter((n) => n.startsWith("test ")).length === 3, "the three tests", names);
      const main = symbols.find((x) => x.name === "main");
      expect(main.kind === lsp.SymbolKind.Function && main.children[0].name === "topic" &&
             main.range.end.line > main.range.start.line, "main spans its body, with its parameter", main);
      const hostSymbols = await s.request(lsp.DocumentSymbolRequest.type, { textDocument: { uri: uriOf(host) } });
      expect(JSON.stringify(hostSymbols.map((x) => [x.name, x.kind])) === JSON.stringify(
               [["topic", lsp.SymbolKind.Variable], ["web.fetch", lsp.SymbolKind.Interface], ["llm", lsp.SymbolKind.Object]]),
             "host symbols", hostSymbols);
      const onCapability = await s.request(lsp.HoverRequest.type, s.at(host, find(HOST, "web.fetch(url", 2)));
      expect(onCapability.contents.value.includes("$0.0010 per call · result tagged untrusted · idempotent"),
             "hover in the host interface", onCapability);
    });
  },

  async "completion: capabilities and models from the host, builtins, keywords"() {
    await withHello(async ({ s, file }) => {
      await s.open(file, HELLO);
      const complete = async (position) =>
        (await s.request(lsp.CompletionRequest.type, s.at(file, position))).items.map((i) => i.label);
      const member = await complete(find(HELLO, "web.fetch(u)", 4));
      expect(JSON.stringify(member) === JSON.stringify(["fetch"]), "after web.", member);
      const ask = await complete(find(HELLO, "Summarizer.ask", 11));
      expect(JSON.stringify(ask) === JSON.stringify(["ask"]), "after an agent", ask);
      const anywhere = await complete(find(HELLO, "  return greet", 2));
      for (const label of ["web.fetch", "llm", "len", "take", "range", "let", "for", "match", "Summarizer", "greet", "Summary", "Str"])
        expect(anywhere.includes(label), `offers ${label}`, anywhere);
      const uses = await complete(find(HELLO, "uses web.fetch, llm", 19));
      expect(JSON.stringify(uses.sort()) === JSON.stringify(["llm", "web.fetch"]), "in uses: the host's resources", uses);
      // While the program does not parse, the host's names are still offered.
      await s.change(file, 2, [{ text: "program p\nuses \nfn main( {\n" }]);
      const broken = await complete({ line: 1, character: 5 });
      expect(JSON.stringify(broken.sort()) === JSON.stringify(["llm", "web.fetch"]), "from the host despite errors", broken);
    });
  },

  async "a code lens over each function with its worst-case calls and cost"() {
    await withHello(async ({ s, file }) => {
      await s.open(file, HELLO);
      const lenses = await s.request(lsp.CodeLensRequest.type, { textDocument: { uri: uriOf(file) } });
      const titles = Object.fromEntries(lenses.map((l) => [l.range.start.line, l.command.title]));
      expect(titles[find(HELLO, "fn main").line] ===
             "worst case: llm ≤ 2, web.fetch ≤ 6 (agent Summarizer ≤ 2) · $0.0260 (budget $0.1000)", "main", titles);
      expect(titles[find(HELLO, "fn greet").line] === "worst case: no host calls", "greet", titles);
    });
  },

  async "programs are checked against the host.rmti buffer while it is open"() {
    await withHello(async ({ s, file, host }) => {
      const uri = uriOf(file), hostUri = uriOf(host);
      await s.open(file, HELLO);
      await s.ofVersion(uri, 1);
      await s.open(host, HOST);
      expect((await s.ofVersion(hostUri, 1)).diagnostics.length === 0, "the host checks");
      // Unsaved: web.fetch costs 10 cents a call, so 6 calls break the budget.
      await s.change(host, 2, [{ text: HOST.replace("cost 0.001", "cost 0.1") }]);
      const over = await s.diagnostics(uri, (p) => p.diagnostics.some((d) => d.code === "E0404"));
      expect(over.diagnostics.find((d) => d.code === "E0404").message.startsWith("worst-case cost $0.6200 exceeds the program budget $0.1000"),
             "E0404 from the buffer's cost", over);
      // A syntax error in the host: shown in host.rmti, and on the program, pointing there.
      await s.change(host, 3, [{ text: HOST.replace("model llm cost 0.01", "model llm cost") }]);
      const hostDiags = await s.ofVersion(hostUri, 3);
      expect(hostDiags.diagnostics.length === 1 && hostDiags.diagnostics[0].code === "E0100", "the host's own error", hostDiags);
      const onProgram = await s.diagnostics(uri, (p) => p.diagnostics.some((d) => d.code === "E0100"));
      const related = onProgram.diagnostics[0].relatedInformation[0];
      expect(related.location.uri === hostUri && JSON.stringify(related.location.range) === JSON.stringify(hostDiags.diagnostics[0].range),
             "the program's copy points into host.rmti", onProgram);
      // Closing the host without saving: the file on disk is the host again.
      await s.conn.sendNotification(lsp.DidCloseTextDocumentNotification.type, { textDocument: { uri: hostUri } });
      await s.diagnostics(uri, (p) => p.diagnostics.length === 0);
      const hostCleared = await s.diagnostics(hostUri, (p) => p.diagnostics.length === 0);
      expect(hostCleared, "the host's diagnostics are cleared");
    });
  },

  async "positions in UTF-8 when the client offers it, UTF-16 otherwise"() {
    const dir = helloWorkspace(), file = join(dir, "wide.rmt");
    const text = 'program wide\n\nfn main() -> Str {\n  return "h\u00e9llo \u{1F600} " + missing\n}\n';
    const col = (encoding) => positionAt(text, text.indexOf("missing"), encoding);
    for (const [offered, chosen] of [[["utf-8", "utf-16"], "utf-8"], [["utf-16"], "utf-16"], [undefined, "utf-16"]]) {
      const s = await Session.start(offered);
      try {
        expect(s.initialized.capabilities.positionEncoding === chosen, `negotiates ${chosen}`, s.initialized.capabilities);
        await s.open(file, text);
        const d = (await s.ofVersion(uriOf(file), 1)).diagnostics.find((x) => x.code === "E0101");
        const start = col(chosen);
        expect(JSON.stringify(d.range) === JSON.stringify({ start, end: { line: start.line, character: start.character + 7 } }),
               `the range in ${chosen}`, d.range);
        const hover = await s.request(lsp.HoverRequest.type, s.at(file, { line: start.line, character: start.character + 2 }));
        expect(hover === null || !hover.contents.value.includes("Str + "), "hover at a position in that encoding", hover);
      } finally {
        s.kill();
      }
    }
    rmSync(dir, { recursive: true, force: true });
  },

  async "robust: malformed frames and JSON, unknown methods, a huge document, a document that does not parse"() {
    const dir = helloWorkspace();
    const proc = spawn(remitc, ["lsp"], { stdio: ["pipe", "pipe", "pipe"] });
    const exited = new Promise((done) => proc.on("exit", (code) => done(code)));
    // A small reader of frames on the raw output.
    let buffer = Buffer.alloc(0);
    const messages = [];
    let wake = () => {};
    proc.stdout.on("data", (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const end = buffer.indexOf("\r\n\r\n");
        if (end < 0) break;
        const length = Number(/Content-Length: (\d+)/.exec(buffer.subarray(0, end).toString())[1]);
        if (buffer.length < end + 4 + length) break;
        messages.push(JSON.parse(buffer.subarray(end + 4, end + 4 + length).toString()));
        buffer = buffer.subarray(end + 4 + length);
      }
      wake();
    });
    const until = (accept, what) => withTimeout(new Promise((done) => {
      const check = () => {
        const m = messages.find(accept);
        if (m) done(m);
      };
      wake = check;
      check();
    }), what);
    const frame = (body) => `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    const send = (object) => proc.stdin.write(frame(JSON.stringify(object)));
    try {
      proc.stdin.write("Content-Type: text/plain\r\n\r\n");                 // no Content-Length
      proc.stdin.write(frame("{this is not json"));
      proc.stdin.write(frame('{"jsonrpc":"2.0","id":41,"method":tru}'));   // the id is still named
      proc.stdin.write(frame("[".repeat(100000)));                          // nested far too deep
      proc.stdin.write("Content-Length: 12\r\n\r\n" + "{}".repeat(3) + "Content-Length: x\r\n\r\n");
      send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { capabilities: {} } });
      const init = await until((m) => m.id === 1, "initialize after garbage");
      expect(init.result.capabilities.positionEncoding === "utf-16", "initialized", init);
      const parseErrors = messages.filter((m) => m.error && m.error.code === -32700);
      expect(parseErrors.length >= 4, "parse errors for the bad frames", messages);
      expect(parseErrors.some((m) => m.id === 41), "the broken request's id is named", parseErrors);
      send({ jsonrpc: "2.0", method: "initialized", params: {} });
      send({ jsonrpc: "2.0", id: 2, method: "remit/noSuchMethod", params: {} });
      expect((await until((m) => m.id === 2, "unknown method")).error.code === -32601, "method not found");
      send({ jsonrpc: "2.0", id: 3, method: "textDocument/hover", params: { textDocument: { uri: "file:///nowhere.rmt" }, position: { line: 0, character: 0 } } });
      expect((await until((m) => m.id === 3, "hover on a closed document")).error.code === -32602, "invalid params");
      // A document of 3 MiB: over the compiler's limit, reported as E0003, and the server answers on.
      const huge = join(dir, "huge.rmt"), hugeUri = uriOf(huge);
      send({ jsonrpc: "2.0", method: "textDocument/didOpen", params: { textDocument: { uri: hugeUri, languageId: "remit", version: 1,
             text: "program huge\n" + "# filler line of a huge document\n".repeat(100000) } } });
      const big = await until((m) => m.method === "textDocument/publishDiagnostics" && m.params.uri === hugeUri, "huge diagnostics");
      expect(big.params.diagnostics[0].code === "E0003" && big.params.diagnostics[0].message.includes("over the limit"),
             "E0003 for a huge document", big.params.diagnostics);
      // A document that does not parse: its errors, no hover, its symbols so far, and no crash.
      const bad = join(dir, "bad.rmt"), badUri = uriOf(bad);
      send({ jsonrpc: "2.0", method: "textDocument/didOpen", params: { textDocument: { uri: badUri, languageId: "remit", version: 1,
             text: "program bad\nuses web.fetch\n\nfn helper() -> Int {\n  return 1\n}\n\nfn main( {\n  let x = \n" } } });
      const badDiags = await until((m) => m.method === "textDocument/publishDiagnostics" && m.params.uri === badUri, "bad diagnostics");
      expect(badDiags.params.diagnostics.length > 0 && badDiags.params.diagnostics.every((d) => d.code === "E0100"),
             "syntax errors", badDiags.params.diagnostics);
      send({ jsonrpc: "2.0", id: 4, method: "textDocument/hover", params: { textDocument: { uri: badUri }, position: { line: 4, character: 9 } } });
      expect((await until((m) => m.id === 4, "hover on a broken document")).result === null, "no hover");
      send({ jsonrpc: "2.0", id: 5, method: "textDocument/documentSymbol", params: { textDocument: { uri: badUri } } });
      const symbols = (await until((m) => m.id === 5, "symbols of a broken document")).result.map((x) => x.name);
      expect(JSON.stringify(symbols) === JSON.stringify(["bad", "helper"]), "the symbols that parsed", symbols);
      send({ jsonrpc: "2.0", id: 6, method: "textDocument/codeLens", params: { textDocument: { uri: badUri } } });
      expect((await until((m) => m.id === 6, "lenses of a broken document")).result.length === 0, "no lenses");
      // Positions far outside the document are clamped.
      send({ jsonrpc: "2.0", id: 7, method: "textDocument/definition", params: { textDocument: { uri: badUri }, position: { line: 99999, character: 99999 } } });
      expect("result" in await until((m) => m.id === 7, "definition far away"), "answered");
      send({ jsonrpc: "2.0", id: 8, method: "shutdown" });
      await until((m) => m.id === 8, "shutdown");
      send({ jsonrpc: "2.0", method: "exit" });
      expect(await withTimeout(exited, "exit") === 0, "exit 0");
    } finally {
      proc.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    }
  },

  async "exit without shutdown ends the server with 1; so does the end of its input"() {
    const s = await Session.start();
    await s.conn.sendNotification(lsp.ExitNotification.type);
    expect(await withTimeout(s.exited, "exit") === 1, "exit 1 without shutdown");
    s.kill();
    const t = await Session.start();
    t.proc.stdin.end();
    expect(await withTimeout(t.exited, "end of input") === 1, "exit 1 at the end of input");
    t.kill();
  },
};

await runTests(tests);
