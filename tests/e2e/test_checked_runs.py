#!/usr/bin/env python3
"""Programs that check build and run, through `remitvm run` and `remitvm serve` alike; programs
that would show a value the type system hides are rejected by the checker; and `run --json`
answers with JSON whatever stops a program (docs/language.md, decisions 15 and 50).

Each case was once a divergence between the type checker, the code generator and the prototype."""
import json

from harness import REMITVM, LineServer, Workspace, expect, main, run

# Assigning a `for` to a var compiled its destination through a pointer into the table of locals,
# which the loop variable moved: "register 64173 is outside the frame".
REASSIGNED_BY_A_LOOP = """program r

fn main() -> Float {
  var v = [{a: {b: 1.0}}]
  v = for x in [true] { {a: {b: 1234.5678}} }
  return v[0].a.b
}
"""

# A loop over [] has a Never variable and its list fits every list type.
EMPTY_LOOPS = """program e

fn names() -> List[Str] {
  return for x in [] { x }
}

fn main() -> Int {
  let v: List[Str] = for x in [] { x }
  let w: List[Int] = for x in [1, 2] { break }
  let n = if len(v) == 0 { 1 } else { return -1 }
  return len(v) + len(w) + len(names()) + n
}
"""

# A block whose first statement may return early still has the value of its last expression.
EARLY_RETURN_IN_A_VALUE = """program er

fn pick(c: Bool, d: Bool) -> Int {
  let x = if d {
    if c {
      return 1
    }
    5
  } else {
    6
  }
  return x
}

fn main() -> Int {
  return pick(false, true) * 100 + pick(true, true) * 10 + pick(false, false)
}
"""

# The value of an `if` without `else` would be the branch's in the prototype and Unit here.
VALUELESS = """program u

fn main(c: Bool) -> Str {
  return str(if c { 5 })
}
"""


def run_json(source, *flags):
    with Workspace({"p.rmt": source, "host.rmti": ""}) as ws:
        r = run(REMITVM, "run", "p.rmt", "--allow-all", "--json", *flags, cwd=ws.path)
        try:
            return r, json.loads(r.out)
        except ValueError:
            raise AssertionError(f"run --json printed no JSON\n{r!r}")


class Serve(LineServer):
    def __init__(self):
        super().__init__([REMITVM, "serve"])

    def run(self, source, inputs=None):
        self.send_line(json.dumps({"type": "run", "session": "s", "program": source, "host": "",
                                   "inputs": inputs or {}}))
        return json.loads(self.next_line())


def test_a_var_reassigned_by_a_loop_runs():
    r, out = run_json(REASSIGNED_BY_A_LOOP)
    expect(r.code == 0 and out["status"] == "completed" and out["result"] == 1234.5678, "run", r)
    with Serve() as s:
        reply = s.run(REASSIGNED_BY_A_LOOP)
        expect(reply["status"] == "completed" and reply["result"] == 1234.5678, "serve", reply)


def test_loops_over_empty_lists_fit_every_list_type():
    r, out = run_json(EMPTY_LOOPS)
    expect(r.code == 0 and out["result"] == 1, "run", r)
    with Serve() as s:
        reply = s.run(EMPTY_LOOPS)
        expect(reply["status"] == "completed" and reply["result"] == 1, "serve", reply)


def test_a_block_with_an_early_return_keeps_its_value():
    r, out = run_json(EARLY_RETURN_IN_A_VALUE)
    expect(r.code == 0 and out["result"] == 516, "run", r)
    with Serve() as s:
        reply = s.run(EARLY_RETURN_IN_A_VALUE)
        expect(reply["status"] == "completed" and reply["result"] == 516, "serve", reply)


def test_a_valueless_if_cannot_be_observed():
    r, out = run_json(VALUELESS, "-i", "c=true")
    expect(r.code == 1 and out["status"] == "rejected", "run refuses it", r)
    d = out["diagnostics"][0]
    expect(d["code"] == "E0103" and (d["line"], d["col"]) == (4, 14) and "no 'else'" in d["message"],
           "E0103 at the if", r)
    with Serve() as s:
        reply = s.run(VALUELESS, {"c": True})
        expect(reply["status"] == "rejected" and reply["diagnostics"][0]["code"] == "E0103", "serve rejects it",
               reply)


def test_run_json_prints_json_when_the_bytecode_cannot_be_built():
    # A list literal longer than the bytecode format allows checks, but cannot be compiled: E0003.
    # Newlines inside [ ] keep every line under the front end's limit.
    items = ",\n".join(", ".join(["1"] * 1000) for _ in range(70))
    r, out = run_json(f"program big\n\nfn main() -> Int {{\n  return len([{items}])\n}}\n")
    expect(r.code == 1 and out["status"] == "rejected", "rejected, as JSON", r)
    expect(out["diagnostics"][0]["code"] == "E0003" and "65,535" in out["diagnostics"][0]["message"], "E0003", r)


if __name__ == "__main__":
    main(globals())
