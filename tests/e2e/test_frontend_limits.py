#!/usr/bin/env python3
"""Front-end limits end to end (docs/diagnostics.md "Front-end limits (E0003)"): every limit gives
E0003 and exit 1 quickly, never a crash, a hang or a stack overflow."""
import time

from harness import REMITC, Workspace, expect, main, run

HOST = "model llm cost 0.01\n"


def check_e0003(name, text, fragment):
    with Workspace({"host.rmti": HOST, name: text}) as ws:
        start = time.monotonic()
        r = run(REMITC, "check", name, cwd=ws.path, timeout=60)
        elapsed = time.monotonic() - start
        expect(r.code == 1, f"{name}: exit 1", r)
        expect("error[E0003]" in r.err and fragment in r.err, f"{name}: E0003 with '{fragment}'", r)
        expect("Segmentation" not in r.err and "AddressSanitizer" not in r.err, f"{name}: no crash", r)
        return elapsed


def test_fifty_megabyte_file():
    check_e0003("big.rmt", "program p\n" + "# filler line\n" * (50 * 1024 * 1024 // 14), "over the limit of 1048576 bytes")


def test_hundred_thousand_nested_parentheses():
    lines = ["program p", "fn main() {", "  let x = "]
    lines += ["(" * 100] * 1000
    lines += ["1"] + [")" * 100] * 1000 + ["}"]
    check_e0003("parens.rmt", "\n".join(lines) + "\n", "nesting deeper than 128 levels")


def test_hundred_thousand_parentheses_on_one_line():
    check_e0003("line.rmt", "program p\nfn main() {\n  let x = " + "(" * 100000 + "1" + ")" * 100000 + "\n}\n",
                "over the limit of 16384 bytes")


def test_prefix_operator_chain():
    check_e0003("neg.rmt", "program p\nfn main() {\n  let x = " + "- " * 5000 + "1\n}\n", "nesting deeper than 128")


def test_else_if_chain():
    chain = "if a { 1 }" + " else if a { 1 }" * 500 + " else { 2 }"
    check_e0003("chain.rmt", "program p\nfn main() {\n  let x = " + chain + "\n}\n", "nesting deeper than 128")


def test_long_identifier():
    check_e0003("ident.rmt", "program p\nfn main() {\n  let " + "a" * 300 + " = 1\n}\n", "over the limit of 256")


def test_too_many_tokens():
    # ~1.04 million tokens in just under 1 MiB, split over lines of 8 KiB inside parentheses.
    body = "\n".join(["1+" * 4000] * 130)
    check_e0003("tokens.rmt", "program p\nfn main() {\n  let x = (" + body + "1)\n}\n", "more than 1000000 tokens")


def test_nesting_limit_is_not_hit_by_ordinary_programs():
    depth = 40
    text = "program p\nfn main() {\n  let x = " + "[" * depth + "1" + "]" * depth + "\n}\n"
    with Workspace({"host.rmti": HOST, "ok.rmt": text}) as ws:
        r = run(REMITC, "check", "ok.rmt", cwd=ws.path)
        expect(r.code == 0, "40 nested lists are fine", r)


def test_long_alias_chain_in_host_does_not_overflow_the_stack():
    n = 45000  # just under 1 MiB of `type T0 = T1` lines: resolved recursively, on the checker's large stack
    host = "".join(f"type T{i} = T{i + 1}\n" for i in range(n)) + f"type T{n} = Int\nmodel llm\n"
    with Workspace({"host.rmti": host, "ok.rmt": "program p\nfn main() {\n}\n"}) as ws:
        r = run(REMITC, "check", "ok.rmt", cwd=ws.path, timeout=120)
        expect(r.code == 0 and "ok: ok.rmt" in r.out, "a long alias chain checks", r)


def test_type_nesting_through_aliases():
    host = "model llm\ntype A0 = Int\n" + "".join(f"type A{i} = List[A{i - 1}]\n" for i in range(1, 200))
    with Workspace({"host.rmti": host, "ok.rmt": "program p\nfn main() {\n}\n"}) as ws:
        r = run(REMITC, "check", "ok.rmt", cwd=ws.path)
        expect(r.code == 1 and "host.rmti:131:13: error[E0003]: type nesting deeper than 128 levels" in r.err,
               "E0003 at the first alias past the limit", r)
        expect(r.err.count("error[E0003]") == 1, "one error, no cascade", r)


if __name__ == "__main__":
    main(globals())
