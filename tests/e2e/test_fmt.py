#!/usr/bin/env python3
"""`remitc fmt` end to end: golden pairs, in-place rewriting, --check, idempotency, errors, and
the formatter over every .rmt/.rmti file in the repository (idempotent and never changing what
`remitc check` says)."""
import pathlib
import shutil

from harness import REMIT, REMITC, REPO, Workspace, expect, main, run

GOLDEN = REPO / "tests" / "golden" / "fmt"


def golden_pairs():
    for src in sorted(GOLDEN.glob("*.input.*")):
        ext = src.suffix
        yield src, src.with_name(src.name.replace(".input" + ext, ".expected" + ext))


def test_golden_pairs():
    pairs = list(golden_pairs())
    expect(len(pairs) >= 3, "at least three golden pairs")
    for src, want in pairs:
        with Workspace() as ws:
            target = ws.path / ("case" + src.suffix)
            shutil.copy(src, target)
            r = run(REMITC, "fmt", "--check", target.name, cwd=ws.path)
            original = target.read_text(encoding="utf-8")
            changes = original != want.read_text(encoding="utf-8")
            if changes:
                expect(r.code == 1 and r.out == f"would reformat {target.name}\n", f"{src.name}: --check", r)
                expect(target.read_text(encoding="utf-8") == original, f"{src.name}: --check writes nothing")
            r = run(REMITC, "fmt", target.name, cwd=ws.path)
            expect(r.code == 0, f"{src.name}: fmt exit 0", r)
            expect(r.out == (f"formatted {target.name}\n" if changes else ""), f"{src.name}: formatted line", r)
            got = target.read_text(encoding="utf-8")
            expect(got == want.read_text(encoding="utf-8"), f"{src.name}: output equals {want.name}\n{got}")
            r = run(REMITC, "fmt", target.name, cwd=ws.path)
            expect(r.code == 0 and r.out == "", f"{src.name}: second run changes nothing", r)
            r = run(REMIT, "fmt", "--check", target.name, cwd=ws.path)
            expect(r.code == 0, f"{src.name}: remit fmt --check agrees", r)


def test_syntax_error_leaves_file_alone():
    with Workspace({"bad.rmt": "program p\nfn main() {\n  let = 1\n}\n"}) as ws:
        r = run(REMITC, "fmt", "bad.rmt", cwd=ws.path)
        expect(r.code == 1 and "bad.rmt:3:7: error[E0100]" in r.err, "diagnostic, exit 1", r)
        expect(ws.read("bad.rmt") == "program p\nfn main() {\n  let = 1\n}\n", "file untouched")
        expect(not list(ws.path.glob("*.remit-tmp")), "no temporary file left")


def test_rewrite_keeps_mode_and_symlinks():
    messy = "program p\nfn main() -> Int {\n return 1+2\n}\n"
    with Workspace({"real/prog.rmt": messy}) as ws:
        real = ws.path / "real" / "prog.rmt"
        real.chmod(0o640)
        (ws.path / "link.rmt").symlink_to(real)
        r = run(REMITC, "fmt", "link.rmt", cwd=ws.path)
        expect(r.code == 0 and r.out == "formatted link.rmt\n", "formatted through the link", r)
        expect((ws.path / "link.rmt").is_symlink(), "the link is still a link")
        expect("return 1 + 2" in real.read_text(encoding="utf-8"), "the target was rewritten")
        expect((real.stat().st_mode & 0o777) == 0o640, f"mode kept: {oct(real.stat().st_mode & 0o777)}")


def test_missing_file():
    with Workspace() as ws:
        r = run(REMITC, "fmt", "none.rmt", cwd=ws.path)
        expect(r.code == 2 and "no such file" in r.err, "exit 2", r)


def test_whole_corpus_is_stable():
    files = [p for p in REPO.rglob("*") if p.suffix in (".rmt", ".rmti") and "build" not in p.parts
             and ".git" not in p.parts]
    expect(len(files) >= 10, f"a corpus to format ({len(files)} files)")
    formatted = 0
    for path in files:
        with Workspace() as ws:
            target = ws.path / path.name
            shutil.copy(path, target)
            first = run(REMITC, "fmt", target.name, cwd=ws.path)
            if first.code == 1:
                continue  # a deliberately broken test input
            expect(first.code == 0, f"{path}: fmt", first)
            once = target.read_text(encoding="utf-8")
            again = run(REMITC, "fmt", "--check", target.name, cwd=ws.path)
            expect(again.code == 0, f"{path}: idempotent", again)
            expect(target.read_text(encoding="utf-8") == once, f"{path}: unchanged by the second run")
            formatted += 1
    expect(formatted >= 5, f"formatted {formatted} files")


if __name__ == "__main__":
    main(globals())
