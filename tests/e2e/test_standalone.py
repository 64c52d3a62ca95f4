#!/usr/bin/env python3
"""The repository stands alone: no tracked file cites the working notes the project was started
from, which live outside the repository, so a reader could not follow the citation. Decisions are
cited by the docs/ page that holds them (docs/compatibility.md, docs/architecture.md and the other
pages). Every file `git ls-files` lists in the source directory is read, this one included, so the
names below are assembled from parts rather than written out."""
import subprocess

from harness import REPO, expect, main

NOTES = ["DES" + "IGN", "PROTO" + "TYPE"]
FORBIDDEN = [f"shared/{name}" for name in NOTES] + [f"{name}.md" for name in NOTES] + [
    "shared/" + "spec/",
    "checked-run" + "-rfc",
    "aegis" + "-runtime",
]


def tracked_files():
    proc = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, timeout=60)
    expect(proc.returncode == 0, "git ls-files works in the source directory: "
           + proc.stderr.decode("utf-8", "replace"))
    return [name for name in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if name]


def test_no_tracked_file_cites_the_working_notes():
    files = tracked_files()
    expect(len(files) > 100, f"git ls-files lists the repository ({len(files)} files)")
    found = []
    for name in files:
        for pattern in FORBIDDEN:
            if pattern in name:
                found.append(f"{name}: its path contains {pattern!r}")
        path = REPO / name
        if not path.is_file():
            continue  # deleted in the work tree, not yet committed
        text = path.read_bytes().decode("utf-8", "replace")
        for number, line in enumerate(text.splitlines(), 1):
            if any(pattern in line for pattern in FORBIDDEN):
                found.append(f"{name}:{number}: {line.strip()[:160]}")
    expect(not found, f"{len(found)} citation(s) of notes outside the repository; cite the docs/ page "
           "that holds the decision instead:\n  " + "\n  ".join(found[:50]))


if __name__ == "__main__":
    main(globals())
