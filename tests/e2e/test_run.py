#!/usr/bin/env python3
"""`remitvm run` / `remit run` of pure programs, `remitc build`, `remitc dis` and `remitc manifest
PROG.rbc` end to end (docs/compatibility.md, docs/language.md): every construct of the language
computes the prototype's values (printed as the prototype prints them), inputs are parsed by type
and tagged per the host, runtime errors carry code, line and column, limits stop runaway work with
R0701, and a .rbc runs exactly like its source while a damaged one is refused with exit 2."""
import json

from harness import REMIT, REMITC, REMITVM, Workspace, expect, main, run

HOST = """input secret tags private
model llm cost 0.01
"""

# One program that touches every construct: the expected result below was worked out by hand
# with the prototype's rules (docs/language.md "Decisions where the spec is silent").
EVERYTHING = """program everything

type Point = { x: Int, y: Float }

fn area(p: Point, scale: Int) -> Float {
  return p.x * p.y * scale
}

fn classify(n: Int) -> Str {
  if n < 0 {
    return "negative"
  } else if n == 0 {
    return "zero"
  }
  return "positive"
}

fn main(name: Str, count: Int) -> { greeting: Str, total: Int, evens: List[Int] max 10, kinds: List[Str] max 3, area: Float, first_big: Int, words: Str, mod: Int, div: Float, state: Str, floats: Str, last: Int } {
  var total = 0
  for i in range(10) {
    total = total + i * count
  }
  let evens = for i in range(10) if i % 2 == 0 { i * i }
  let kinds = for n in [-3, 0, 7] { classify(n) }
  var first_big = -1
  for e in evens {
    if e > 10 {
      first_big = e
      break
    }
  }
  let words = join(split("a,b,,c", ","), "|")
  let state = match kinds[0] {
    "negative" => "neg"
    "zero" => "zero"
    _ => "pos"
  }
  var acc = []
  for k in range(4) {
    acc = acc + [k]
  }
  return {
    greeting: "hello {name}!",
    total: total,
    evens: evens,
    kinds: kinds,
    area: area({ x: 3, y: 1.5 }, scale: 2),
    first_big: first_big,
    words: words,
    mod: -7 % 3,
    div: 7 / 2,
    state: state,
    floats: "{0.1 + 0.2} {10000000000000000.0} {0.00001} {2.0}",
    last: acc[-1]
  }
}
"""

EXPECTED = {
    "greeting": "hello Ada!",
    "total": 135,
    "evens": [0, 4, 16, 36, 64],
    "kinds": ["negative", "zero", "positive"],
    "area": 9.0,
    "first_big": 16,
    "words": "a|b||c",
    "mod": 2,
    "div": 3.5,
    "state": "neg",
    "floats": "0.30000000000000004 1e+16 1e-05 2.0",
    "last": 3,
}


def workspace(program, policy=""):
    return Workspace({"host.rmti": HOST, "prog.rmt": program, "policy.toml": policy})


def test_every_construct_computes_the_prototypes_values():
    ws = workspace(EVERYTHING)
    r = run(REMITVM, "run", "prog.rmt", "-i", "name=Ada", "-i", "count=3", cwd=ws.path)
    expect(r.code == 0, "run succeeds", r)
    expect(json.loads(r.out) == EXPECTED, "the result", r)
    # Printed as the prototype prints it: indent 2, floats as Python's repr.
    expect('"area": 9.0,' in r.out and '"div": 3.5,' in r.out, "Python-style JSON", r)


def test_build_then_run_the_rbc_gives_the_same_result():
    ws = workspace(EVERYTHING)
    b = run(REMITC, "build", "prog.rmt", cwd=ws.path)
    expect(b.code == 0 and "wrote prog.rbc" in b.out and "program hash " in b.out, "build", b)
    r = run(REMITVM, "run", "prog.rbc", "-i", "name=Ada", "-i", "count=3", cwd=ws.path)
    expect(r.code == 0 and json.loads(r.out) == EXPECTED, "the .rbc runs like its source", r)
    m = run(REMITC, "manifest", "prog.rbc", cwd=ws.path)
    m2 = run(REMITC, "manifest", "prog.rmt", cwd=ws.path)
    expect(m.code == 0 and m.out == m2.out, "the stored manifest is the source's", m)
    o = run(REMITC, "build", "prog.rmt", "-o", "out/x.rbc", cwd=ws.path)
    expect(o.code == 2, "-o into a missing directory is an I/O error", o)
    ws.write("out/.keep", "")
    o = run(REMITC, "build", "prog.rmt", "-o", "out/x.rbc", cwd=ws.path)
    expect(o.code == 0 and (ws.path / "out/x.rbc").exists(), "-o OUT", o)


def test_remit_front_end_build_and_run():
    ws = workspace(EVERYTHING)
    b = run(REMIT, "build", "prog.rmt", cwd=ws.path)
    expect(b.code == 0 and "wrote build/everything.rbc" in b.out and "wrote build/everything.manifest.json" in b.out,
           "remit build --out DIR (default build)", b)
    r = run(REMIT, "run", "prog.rmt", "--input", "name=Ada", "-i", "count=3", "--json", cwd=ws.path)
    expect(r.code == 0, "remit run", r)
    env = json.loads(r.out)
    expect(env["status"] == "completed" and env["result"] == EXPECTED and env["calls"] == 0, "envelope", r)
    expect(set(env) == {"status", "run_id", "result", "result_tags", "spent_usd", "calls"}, "envelope keys", r)


def test_inputs_are_typed_and_tagged():
    prog = """program tagged
fn main(secret: Str, n: Int, xs: List[Int] max 3) -> Str {
  return "{secret}:{n + len(xs)}"
}
"""
    ws = workspace(prog)
    r = run(REMITVM, "run", "prog.rmt", "-i", "secret=s3", "-i", "n=2", "-i", "xs=[1,2]", "--json", cwd=ws.path)
    env = json.loads(r.out)
    expect(env["result"] == "s3:4", "value", r)
    # `secret` is declared `tags private` by the host; undeclared inputs are untrusted.
    expect(env["result_tags"] == ["private", "untrusted"], "tags per the host's input lines", r)
    ws.write("inputs.json", json.dumps({"secret": "a", "n": 1, "xs": []}))
    r = run(REMITVM, "run", "prog.rmt", "--inputs", "inputs.json", cwd=ws.path)
    expect(r.code == 0 and json.loads(r.out) == "a:1", "--inputs FILE", r)
    for args, what in [
        (["-i", "secret=a", "-i", "n=x", "-i", "xs=[]"], "n"),
        (["-i", "secret=a", "-i", "n=1", "-i", "xs=[1,2,3,4]"], "xs"),
        (["-i", "secret=a", "-i", "n=1"], "xs"),
        (["-i", "secret=a", "-i", "n=1", "-i", "xs=[]", "-i", "bogus=1"], "bogus"),
        (["-i", "secret=a", "-i", "n=1.5", "-i", "xs=[]"], "n"),
    ]:
        r = run(REMITVM, "run", "prog.rmt", *args, cwd=ws.path)
        expect(r.code == 2 and f"'{what}'" in r.err, f"a bad input is a usage error naming {what}", r)


def test_runtime_errors_have_code_line_and_column():
    prog = """program boom
fn main(i: Int) -> Int {
  let xs = [1, 2, 3]
  return xs[i]
}
"""
    ws = workspace(prog)
    r = run(REMITVM, "run", "prog.rmt", "-i", "i=5", cwd=ws.path)
    expect(r.code == 1, "exit 1", r)
    expect("prog.rmt:4:10: runtime error[R0101]: index 5 is out of range for a list of length 3" in r.err,
           "rendered like the prototype", r)
    expect("   4 |   return xs[i]" in r.err, "with the source line", r)
    r = run(REMITVM, "run", "prog.rmt", "-i", "i=5", "--json", cwd=ws.path)
    env = json.loads(r.out)
    expect(env["status"] == "failed" and env["error"]["code"] == "R0101" and env["error"]["line"] == 4
           and env["error"]["col"] == 10 and env["error"]["name"] == "EvalError", "failed envelope", r)
    r = run(REMITVM, "run", "prog.rmt", "-i", "i=-3", cwd=ws.path)
    expect(r.code == 0 and r.out.strip() == "1", "negative indices count from the end", r)


def test_overflow_and_division_by_zero():
    prog = """program arith
fn main(a: Int, b: Int) -> Int {
  return a * b + a % b
}
"""
    ws = workspace(prog)
    r = run(REMITVM, "run", "prog.rmt", "-i", "a=9223372036854775807", "-i", "b=2", "--json", cwd=ws.path)
    env = json.loads(r.out)
    expect(env["error"]["code"] == "R0101" and "overflow" in env["error"]["message"], "64-bit overflow", r)
    r = run(REMITVM, "run", "prog.rmt", "-i", "a=1", "-i", "b=0", "--json", cwd=ws.path)
    env = json.loads(r.out)
    expect(env["error"]["code"] == "R0101" and "zero" in env["error"]["message"], "division by zero", r)


def test_var_bound_is_checked_at_run_time():
    prog = """program bound
fn main(n: Int) -> Int {
  var xs: List[Int] max 3 = []
  for i in range(10) if i < n {
    xs = xs + [i]
  }
  return len(xs)
}
"""
    ws = workspace(prog)
    r = run(REMITVM, "run", "prog.rmt", "-i", "n=3", cwd=ws.path)
    expect(r.code == 0 and r.out.strip() == "3", "within the bound", r)
    r = run(REMITVM, "run", "prog.rmt", "-i", "n=4", "--json", cwd=ws.path)
    expect(r.code == 1 and json.loads(r.out)["error"]["code"] == "R0113", "R0113 past the bound", r)


LOOP = """program loop
fn main() -> Int {
  var total = 0
  for i in range(10000000) {
    total = total + i % 7
  }
  return total
}
"""


def test_limits_stop_runaway_work():
    ws = workspace(LOOP)
    r = run(REMITVM, "run", "prog.rmt", "--max-steps", "1000", "--json", cwd=ws.path)
    env = json.loads(r.out)
    expect(r.code == 1 and env["error"]["code"] == "R0701" and env["error"]["details"]["limit"] == "steps",
           "the step limit", r)
    # [limits] in the policy, overridden by a flag.
    ws.write("policy.toml", "[limits]\nmax_steps = 500\n")
    r = run(REMITVM, "run", "prog.rmt", "--json", cwd=ws.path)
    expect(json.loads(r.out)["error"]["details"] == {"limit": "steps", "value": 500}, "policy limits", r)
    r = run(REMITVM, "run", "prog.rmt", "--max-steps", "1000000000", "--max-wall-ms", "1", "--json", cwd=ws.path)
    env = json.loads(r.out)
    expect(env["error"]["code"] == "R0701" and env["error"]["details"]["limit"] == "wall_ms", "wall time", r)
    for flag in ["--max-steps", "--max-memory", "--max-wall-ms"]:
        r = run(REMITVM, "run", "prog.rmt", flag, "zero", cwd=ws.path)
        expect(r.code == 2 and flag in r.err, f"a bad {flag} is a usage error", r)


def test_ten_million_iterations_in_bounded_memory():
    # The loop builds no list (range loops count), so 16 MiB of memory is plenty.
    ws = workspace(LOOP)
    # The wall-time limit is raised too: this test is about memory, and sanitizer builds are slow.
    r = run(REMITVM, "run", "prog.rmt", "--max-memory", str(16 << 20), "--max-steps", "1000000000",
            "--max-wall-ms", "600000", cwd=ws.path, timeout=600)
    expect(r.code == 0 and r.out.strip() == str(sum(i % 7 for i in range(10000000))), "the sum", r)


def test_a_growing_list_hits_the_memory_limit():
    prog = """program grow
fn main() -> Int {
  var xs = []
  for i in range(100000000) {
    xs = xs + ["item {i}"]
  }
  return len(xs)
}
"""
    ws = workspace(prog)
    r = run(REMITVM, "run", "prog.rmt", "--max-memory", str(8 << 20), "--max-steps", "100000000000",
            "--max-wall-ms", "600000", "--json", cwd=ws.path, timeout=600)
    env = json.loads(r.out)
    expect(r.code == 1 and env["error"]["code"] == "R0701" and "memory" in env["error"]["message"],
           "R0701 names the memory limit", r)


def test_a_run_needs_a_policy_or_allow_all():
    ws = Workspace({"host.rmti": HOST, "prog.rmt": "program p\nfn main() -> Int {\n  return 1\n}\n"})
    r = run(REMITVM, "run", "prog.rmt", cwd=ws.path)
    expect(r.code == 2 and "--policy or --allow-all" in r.err, "no policy", r)
    r = run(REMITVM, "run", "prog.rmt", "--allow-all", cwd=ws.path)
    expect(r.code == 0 and r.out.strip() == "1", "--allow-all", r)


def test_a_program_that_does_not_check_is_refused():
    ws = workspace("program p\nfn main() -> Int {\n  return \"x\"\n}\n")
    r = run(REMITVM, "run", "prog.rmt", cwd=ws.path)
    expect(r.code == 1 and "refusing to run a program with errors" in r.err and "E0109" in r.err, "text", r)
    r = run(REMITVM, "run", "prog.rmt", "--json", cwd=ws.path)
    env = json.loads(r.out)
    expect(r.code == 1 and env["status"] == "rejected" and env["diagnostics"][0]["code"] == "E0109", "json", r)


def test_damaged_rbc_files_are_refused_cleanly():
    ws = workspace(EVERYTHING)
    expect(run(REMITC, "build", "prog.rmt", cwd=ws.path).code == 0, "build")
    data = (ws.path / "prog.rbc").read_bytes()
    cases = {
        "empty.rbc": b"",
        "magic.rbc": b"XXXX" + data[4:],
        "truncated.rbc": data[: len(data) // 2],
        "flipped.rbc": data[:-20] + bytes([data[-20] ^ 0xFF]) + data[-19:],
        "text.rbc": b"program p\n",
    }
    for name, content in cases.items():
        ws.write(name, content)
        for tool, args in [(REMITVM, ["run", name, "--allow-all"]), (REMITC, ["dis", name]),
                           (REMITC, ["manifest", name])]:
            r = run(tool, *args, cwd=ws.path)
            expect(r.code == 2 and "not a valid .rbc file" in r.err, f"{name}: exit 2 with a message", r)
            expect("Traceback" not in r.err and "terminate" not in r.err, "no crash", r)


def test_rbc_for_another_host_is_refused():
    ws = workspace(EVERYTHING)
    expect(run(REMITC, "build", "prog.rmt", cwd=ws.path).code == 0, "build")
    ws.write("host.rmti", HOST + "input other tags private\n")
    r = run(REMITVM, "run", "prog.rbc", "-i", "name=A", "-i", "count=1", cwd=ws.path)
    expect(r.code == 1 and "another host interface" in r.err, "host hash mismatch", r)


def test_disassembly_shows_instructions_with_source_lines():
    ws = workspace(EVERYTHING)
    r = run(REMITC, "dis", "prog.rmt", cwd=ws.path)
    expect(r.code == 0, "dis of source", r)
    expect("FORPREP" in r.out and "GETFIELD" in r.out, "opcodes", r)
    expect("  return p.x * p.y * scale" in r.out, "source lines", r)
    expect(run(REMITC, "build", "prog.rmt", cwd=ws.path).code == 0, "build")
    r2 = run(REMITC, "dis", "prog.rbc", cwd=ws.path)
    expect(r2.code == 0 and r2.out == r.out, "dis of the .rbc is the same listing", r2)
    # EVERYTHING's functions are small leaves, compiled in place (docs/bytecode.md "Inlined calls");
    # a function that calls another stays a CALL, and the listing shows it.
    calls = workspace("program calls\n\nfn inc(n: Int) -> Int {\n  return n + 1\n}\n\n"
                      "fn twice(n: Int) -> Int {\n  return inc(inc(n))\n}\n\n"
                      "fn main(count: Int) -> Int {\n  return twice(count)\n}\n")
    r3 = run(REMITC, "dis", "prog.rmt", cwd=calls.path)
    expect(r3.code == 0 and "  CALL " in r3.out and "  return inc(inc(n))" in r3.out, "a CALL", r3)


if __name__ == "__main__":
    main(globals())
