#!/usr/bin/env python3
"""Every example of the AI guide (docs/ai-guide.md) checks and runs.

An example is a section of the guide (a `##` or `###` heading) holding a fenced block tagged
`remit program`; the same section gives its `remit host`, and optionally `toml policy`,
`json fixtures`, `json inputs` and `json result` blocks. Each program is checked with `remitc
check` (no warnings either) and run with `remitvm run --fixtures --inputs --approve-all --json`
(under its policy, or --allow-all), which must complete with the documented result; programs with
test blocks also pass `remitvm test`. The untagged `remit` blocks (cheat sheet, host sample) must
at least parse."""
import json
import re

from harness import REMITC, REMITVM, REPO, Workspace, expect, main, run

GUIDE = REPO / "docs" / "ai-guide.md"
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```\s*$", re.S | re.M)


def sections():
    """(heading, {tag: text}) for each section of the guide."""
    text = GUIDE.read_text(encoding="utf-8")
    out = []
    # Split at headings outside code blocks: blocks never contain lines starting with "## ".
    parts = re.split(r"^(#{2,3} .*)$", text, flags=re.M)
    for i in range(1, len(parts), 2):
        blocks = {}
        untagged = []
        for info, body in FENCE.findall(parts[i + 1]):
            info = info.strip()
            if info in ("remit program", "remit host", "toml policy", "json fixtures", "json inputs", "json result"):
                expect(info not in blocks, f"{parts[i]}: two '{info}' blocks")
                blocks[info] = body
            elif info == "remit":
                untagged.append(body)
        out.append((parts[i], blocks, untagged))
    return out


def examples():
    return [(h, b) for h, b, _ in sections() if "remit program" in b]


def test_the_guide_has_at_least_six_examples_and_a_skeleton():
    found = examples()
    expect(len(found) >= 7, f"expected a skeleton and six examples, found {len(found)}")
    expect(any(h.startswith("## Skeleton") for h, _ in found), "the skeleton is checked too")
    for heading, blocks in found:
        expect("remit host" in blocks, f"{heading}: no host interface")
        expect("json result" in blocks, f"{heading}: no documented result")


def run_example(heading, blocks):
    program = blocks["remit program"]
    name = re.search(r"^program (\w+)", program, re.M).group(1)
    with Workspace({f"{name}.rmt": program, "host.rmti": blocks["remit host"],
                    "fixtures.json": blocks.get("json fixtures", "{}"),
                    "inputs.json": blocks.get("json inputs", "{}")}) as ws:
        check = ["check", f"{name}.rmt", "--host", "host.rmti"]
        policy = []
        if "toml policy" in blocks:
            ws.write("policy.toml", blocks["toml policy"])
            policy = ["--policy", "policy.toml"]
        r = run(REMITC, *check, *policy, cwd=ws.path)
        expect(r.code == 0, f"{heading}: does not check", r)
        expect("warning[" not in r.err, f"{heading}: has warnings", r)
        r = run(REMITVM, "run", f"{name}.rmt", "--host", "host.rmti", *(policy or ["--allow-all"]),
                "--fixtures", "fixtures.json", "--inputs", "inputs.json", "--approve-all", "--json", cwd=ws.path)
        expect(r.code == 0, f"{heading}: the run does not complete", r)
        envelope = json.loads(r.out)
        expect(envelope["status"] == "completed", f"{heading}: status", r)
        expect(envelope["result"] == json.loads(blocks["json result"]),
               f"{heading}: result {envelope['result']!r} is not the documented one", r)
        if re.search(r"^test ", program, re.M):
            r = run(REMITVM, "test", f"{name}.rmt", "--host", "host.rmti", cwd=ws.path)
            expect(r.code == 0 and " 0 failed" in r.out, f"{heading}: its tests fail", r)
        return r


def test_every_example_checks_and_runs():
    for heading, blocks in examples():
        run_example(heading, blocks)


def test_example_hosts_and_untagged_blocks_parse():
    # Untagged `remit` blocks are either a host interface sample or a program fragment: each must
    # at least be accepted by the formatter's parser (fmt --check parses without checking).
    for heading, blocks, untagged in sections():
        for i, body in enumerate(untagged):
            is_host = re.search(r"^program ", body, re.M) is None
            fname = f"block{i}.rmti" if is_host else f"block{i}.rmt"
            with Workspace({fname: body}) as ws:
                r = run(REMITC, "fmt", "--check", fname, cwd=ws.path)
                expect(r.code in (0, 1) and "error[" not in r.err, f"{heading}: block {i} does not parse", r)


def test_the_pay_invoice_example_needs_approval():
    # The guide says the payment is an approval site; the manifest agrees.
    blocks = dict(examples())
    heading = next(h for h in blocks if "pay_invoice" in h)
    b = blocks[heading]
    with Workspace({"pay.rmt": b["remit program"], "host.rmti": b["remit host"]}) as ws:
        r = run(REMITC, "check", "pay.rmt", "--host", "host.rmti", cwd=ws.path)
        expect(r.code == 0, "checks", r)
        expect("approval possible payments.pay at line 11: 'amount' may be untrusted (data:" in r.out,
               "the summary line the guide quotes", r)


if __name__ == "__main__":
    main(globals())
