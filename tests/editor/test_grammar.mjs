// The TextMate grammar of editors/vscode (syntaxes/remit.tmLanguage.json) run by VS Code's own
// tokenizer, vscode-textmate with the Oniguruma regular expressions of vscode-oniguruma (pinned in
// package-lock.json, installed by scripts/install-deps). Checks that every program and host
// interface under examples/ and tests/golden/ is tokenised with no character left to the root
// scope alone, that the examples (valid programs) meet no `invalid` scope and leave no string or
// interpolation open at the end of a line, that the keyword and builtin lists match the compiler's
// tables, a few pinned scopes, and that the extension ships the protocol library the server is
// tested with. Run as `node test_grammar.mjs`; prints ok/FAIL per test.
import { readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { spawnSync } from "node:child_process";
import textmate from "vscode-textmate";
import oniguruma from "vscode-oniguruma";
import { expect, runTests } from "../node_harness.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");
const extension = join(root, "editors", "vscode");
const grammarPath = join(extension, "syntaxes", "remit.tmLanguage.json");

const wasm = readFileSync(join(here, "node_modules", "vscode-oniguruma", "release", "onig.wasm"));
await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
const registry = new textmate.Registry({
  onigLib: Promise.resolve({
    createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
    createOnigString: (s) => new oniguruma.OnigString(s),
  }),
  loadGrammar: async (scopeName) =>
    scopeName === "source.remit" ? textmate.parseRawGrammar(readFileSync(grammarPath, "utf8"), grammarPath) : null,
});
const grammar = await registry.loadGrammar("source.remit");

// Every line of `text` as [{text, scopes}] tokens, and the rule stack after each line.
function tokenize(text) {
  let stack = textmate.INITIAL;
  const lines = [];
  for (const line of text.split(/\r?\n/)) {
    const result = grammar.tokenizeLine(line, stack);
    lines.push({
      line,
      tokens: result.tokens.map((t) => ({ text: line.slice(t.startIndex, t.endIndex), scopes: t.scopes })),
      openAfter: result.ruleStack.depth,
    });
    stack = result.ruleStack;
  }
  return lines;
}

// The scopes of the first token whose text is `word` on the first line holding it.
function scopesOf(text, word, nth = 0) {
  for (const { tokens } of tokenize(text)) {
    const found = tokens.filter((t) => t.text === word);
    if (found.length > nth) return found[nth].scopes;
  }
  throw new Error(`no token '${word}' in ${JSON.stringify(text)}`);
}

function filesUnder(dir, extensions) {
  const out = [];
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (entry === "node_modules" || entry.startsWith(".")) continue;
    if (statSync(path).isDirectory()) out.push(...filesUnder(path, extensions));
    else if (extensions.some((e) => entry.endsWith(e))) out.push(path);
  }
  return out.sort();
}

// Characters that only the root scope covers: text the grammar did not match.
function unmatched(lines) {
  const bad = [];
  lines.forEach(({ line, tokens }, i) => {
    for (const t of tokens)
      if (t.scopes.length === 1 && t.text.trim() !== "") bad.push(`line ${i + 1}: '${t.text}' in ${line}`);
  });
  return bad;
}

const tests = {
  "every example and golden program is tokenised without unmatched text"() {
    const files = [...filesUnder(join(root, "examples"), [".rmt", ".rmti"]),
                   ...filesUnder(join(root, "tests", "golden"), [".rmt", ".rmti"])];
    expect(files.length > 100, "the examples and goldens are found", files.length);
    const problems = [];
    for (const file of files) {
      const bad = unmatched(tokenize(readFileSync(file, "utf8")));
      if (bad.length) problems.push(`${relative(root, file)}: ${bad.slice(0, 3).join("; ")}`);
    }
    expect(problems.length === 0, "no unmatched text", problems.slice(0, 10));
  },

  "the examples are valid Remit: no invalid scope, nothing left open at a line's end"() {
    const files = filesUnder(join(root, "examples"), [".rmt", ".rmti"]);
    expect(files.length >= 8, "the examples are found", files.length);
    for (const file of files) {
      tokenize(readFileSync(file, "utf8")).forEach(({ line, tokens, openAfter }, i) => {
        const invalid = tokens.filter((t) => t.scopes.some((s) => s.startsWith("invalid")));
        expect(invalid.length === 0, `${relative(root, file)}:${i + 1} has an invalid token`, { line, invalid });
        expect(openAfter === 1, `${relative(root, file)}:${i + 1} leaves a rule open`, line);
      });
    }
  },

  "keywords, strings with interpolation, comments and tags have their scopes"() {
    const has = (scopes, scope, what) => expect(scopes.includes(scope), `${what}: ${scope}`, scopes);
    has(scopesOf("program hello", "program"), "keyword.other.program.remit", "program");
    has(scopesOf("program hello", "hello"), "entity.name.namespace.remit", "a program's name");
    has(scopesOf("fn main(topic: Str) -> Str {", "main"), "entity.name.function.remit", "a function's name");
    has(scopesOf("fn main(topic: Str) -> Str {", "Str"), "support.type.primitive.remit", "Str");
    has(scopesOf("  if not found and ok {", "if"), "keyword.control.remit", "if");
    has(scopesOf("  if not found and ok {", "and"), "keyword.operator.logical.remit", "and");
    has(scopesOf("  let s = web.fetch(u) retry 1 else \"\"", "retry"), "keyword.control.remit", "retry");
    has(scopesOf("  let s = web.fetch(u) retry 1 else \"\"", "let"), "storage.type.remit", "let");
    has(scopesOf("  let s = web.fetch(u) retry 1 else \"\"", "1"), "constant.numeric.remit", "a number");
    has(scopesOf("  x.ask(T, p) timeout 500ms", "500ms"), "constant.numeric.remit", "a duration");
    has(scopesOf("  let m = max(a, b)", "max"), "support.function.builtin.remit", "max(...) is the builtin");
    has(scopesOf("type L = List[Str] max 5", "max"), "keyword.other.remit", "List max N is the keyword");
    has(scopesOf("  let ok = true", "true"), "constant.language.boolean.remit", "true");
    // Comments, and a # inside a string that is not one.
    has(scopesOf("# a comment", "# a comment"), "comment.line.number-sign.remit", "a comment");
    const hash = scopesOf('  let s = "#1"  # note', '#1');
    expect(!hash.some((s) => s.startsWith("comment")), "a # in a string is no comment", hash);
    // Strings and interpolation.
    const url = '  "https://{site}/{topic}"';
    has(scopesOf(url, "https://"), "string.quoted.double.remit", "string text");
    has(scopesOf(url, "{"), "punctuation.section.interpolation.begin.remit", "an interpolation's brace");
    const site = scopesOf(url, "site");
    has(site, "meta.interpolation.remit", "inside the interpolation");
    has(site, "variable.other.remit", "a name in an interpolation");
    has(scopesOf('  "a \\{ b \\n"', "\\{"), "constant.character.escape.remit", "an escape");
    // A record inside an interpolation: its closing brace does not end the interpolation.
    has(scopesOf('  "{ {a: 1}.a }"', "a", 1), "meta.interpolation.remit", "after a nested record");
    // An unterminated string ends at its line.
    const after = tokenize('let s = "open\nlet t = 1');
    has(after[1].tokens.find((t) => t.text === "let").scopes, "storage.type.remit", "the line after an unclosed string");
    // Tags in a host interface.
    const cap = "capability web.fetch(url: Str deny private) -> Str";
    has(scopesOf(cap, "web.fetch"), "entity.name.function.remit", "a capability's name");
    has(scopesOf(cap, "deny"), "keyword.other.tags.remit", "deny");
    has(scopesOf(cap, "private"), "entity.name.tag.remit", "a denied tag");
    has(scopesOf("  tags untrusted, private", "private"), "entity.name.tag.remit", "a tags line");
    has(scopesOf("input topic tags untrusted", "untrusted"), "entity.name.tag.remit", "an input's tags");
    has(scopesOf("capability a.b(x: Str approve (private, secret))", "secret"), "entity.name.tag.remit",
        "approve (A, B)");
    has(scopesOf("  clears untrusted", "untrusted"), "entity.name.tag.remit", "clears");
  },

  "the grammar knows every keyword of compiler/token.h and every builtin of runtime/builtins.def"() {
    const tokenH = readFileSync(join(root, "compiler", "token.h"), "utf8");
    const block = tokenH.slice(tokenH.indexOf("#define REMIT_KEYWORDS"), tokenH.indexOf("// Longest spellings first"));
    const keywords = [...block.matchAll(/X\(\w+, "(\w+)"\)/g)].map((m) => m[1]);
    expect(keywords.length > 30, "keywords read from compiler/token.h", keywords.length);
    for (const k of keywords) {
      const scopes = scopesOf(k, k);
      expect(scopes.some((s) => /^(keyword|storage|constant\.language)\./.test(s)), `keyword '${k}'`, scopes);
    }
    const builtins = [...readFileSync(join(root, "runtime", "builtins.def"), "utf8").matchAll(/^BUILTIN\(\s*\w+,\s*"(\w+)"/gm)]
      .map((m) => m[1]);
    expect(builtins.length > 20, "builtins read from runtime/builtins.def", builtins.length);
    for (const b of builtins)
      expect(scopesOf(`${b}(x)`, b).includes("support.function.builtin.remit"), `builtin '${b}'`);
    const notBuiltin = scopesOf("lengths(x)", "lengths");
    expect(!notBuiltin.includes("support.function.builtin.remit"), "a longer name is no builtin", notBuiltin);
  },

  "the extension declares the language, grammar and client it ships"() {
    const manifest = JSON.parse(readFileSync(join(extension, "package.json"), "utf8"));
    const language = manifest.contributes.languages.find((l) => l.id === "remit");
    expect(language && language.extensions.includes(".rmt") && language.extensions.includes(".rmti"),
           "the remit language covers .rmt and .rmti", language);
    const declared = manifest.contributes.grammars.find((g) => g.language === "remit");
    expect(declared.scopeName === "source.remit" && join(extension, declared.path) === grammarPath,
           "the grammar is the one tested", declared);
    JSON.parse(readFileSync(join(extension, language.configuration), "utf8"));
    const check = spawnSync(process.execPath, ["--check", join(extension, manifest.main)], { encoding: "utf8" });
    expect(check.status === 0, "extension.js is valid JavaScript", check.stderr);
    // The client the extension ships speaks through the protocol library test_lsp.mjs drives the
    // server with: both lockfiles pin the same version of it and of vscode-jsonrpc.
    const locked = (path) => JSON.parse(readFileSync(path, "utf8")).packages;
    const shipped = locked(join(extension, "package-lock.json")), tested = locked(join(here, "package-lock.json"));
    expect(shipped["node_modules/vscode-languageclient"]?.version === manifest.dependencies["vscode-languageclient"],
           "the extension's lockfile pins its client", shipped["node_modules/vscode-languageclient"]);
    for (const p of ["vscode-languageserver-protocol", "vscode-jsonrpc"])
      expect(shipped[`node_modules/${p}`]?.version === tested[`node_modules/${p}`]?.version,
             `the extension ships the ${p} the server is tested with`,
             { shipped: shipped[`node_modules/${p}`]?.version, tested: tested[`node_modules/${p}`]?.version });
  },
};

await runTests(tests);
