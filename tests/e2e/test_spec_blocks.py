#!/usr/bin/env python3
"""Every Remit code block of the language spec (docs/spec/remit-language-v0.1.md) parses.

Host-interface blocks are checked as .rmti files as they are. Program blocks in the spec are
schematic — `<name>` placeholders and `...` elisions — so each is instantiated by a fixed,
documented substitution (placeholders become names, `...` is dropped) and wrapped in a program
header where it has none; the rest of the text is parsed exactly as written."""
import re

from harness import REMITC, REPO, Workspace, expect, main, run

SPEC = REPO / "docs" / "spec" / "remit-language-v0.1.md"
HOST = "model llm cost 0.01\ncapability a.b(x: Str)\n"


def blocks():
    text = SPEC.read_text(encoding="utf-8")
    return re.findall(r"```remit\n(.*?)```", text, re.S)


def instantiate(block):
    out = []
    for line in block.splitlines():
        if re.match(r"^\s*type \.\.\.", line):
            continue  # the schematic "type ... fn ... agent ... test ..." line
        line = line.replace('"..."', '"text"')
        line = re.sub(r"<number>", "1", line)
        line = re.sub(r"<resource>", "a.b", line)
        line = re.sub(r"<(\w+)>", r"\1", line)
        line = re.sub(r",\s*\.\.\.", "", line)
        line = line.replace("...", "\n")
        out.append(line)
    text = "\n".join(out) + "\n"
    if not re.match(r"\s*(#.*\n\s*)*program ", text):
        text = "program spec_block\n" + text
    return text


def is_host(block):
    return re.search(r"^\s*(capability|model|input)\b", block, re.M) is not None


def test_spec_has_code_blocks():
    expect(len(blocks()) >= 3, "the spec has its three remit blocks")


def test_every_block_parses():
    for i, block in enumerate(blocks()):
        with Workspace({"host.rmti": HOST}) as ws:
            if is_host(block):
                ws.write("block.rmti", block)
                r = run(REMITC, "fmt", "--check", "block.rmti", cwd=ws.path)
                expect(r.code in (0, 1) and "error[" not in r.err, f"block {i} (host) parses", r)
            else:
                ws.write("block.rmt", instantiate(block))
                r = run(REMITC, "fmt", "--check", "block.rmt", cwd=ws.path)
                expect(r.code in (0, 1) and "error[" not in r.err, f"block {i} parses:\n{instantiate(block)}", r)


if __name__ == "__main__":
    main(globals())
