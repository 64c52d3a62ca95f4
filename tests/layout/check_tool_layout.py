#!/usr/bin/env python3
"""The ordered link of the tools (cmake/RemitToolLink.cmake) did what it promises, read from the
linked executable itself:

  - the functions cmake/tools.order lists that the tool has sit together at the front of its text,
    in one run at most half as long again as their own sizes (a listed function of a static archive
    built without a section per function, OpenSSL's, brings its neighbours along; a link that
    ignored the file scatters them over megabytes: 1.4 MB of them over 8 MB);
  - most of the listed names are still in the tool (a file gone stale is said here, not found
    later as lost memory);
  - its relative relocations are packed (DT_RELR) and it requires GLIBC_ABI_DT_RELR, without which
    glibc would refuse to load it;
  - and it runs.

    check_tool_layout.py TOOL... ORDER_FILE
"""
import subprocess
import sys

# Alignment padding, and the unlisted neighbours of listed functions in archives without a section
# per function: 18 % on top of the listed sizes when this was written.
SLACK_FRACTION = 0.5
# At least this share of the listed names must still be functions of the tool.
MIN_FOUND = 0.90


def fail(message: str) -> None:
    print(f"FAIL {message}", file=sys.stderr)
    sys.exit(1)


def main() -> None:
    *tools, order_file = sys.argv[1:]
    listed = [line.strip() for line in open(order_file) if line.strip() and not line.startswith("#")]
    for tool in tools:
        check(tool, order_file, listed)


def check(tool: str, order_file: str, listed: list[str]) -> None:
    symbols = {}
    nm = subprocess.run(["nm", "--defined-only", "-S", tool], capture_output=True, text=True, check=True).stdout
    for line in nm.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwW":
            symbols.setdefault(parts[3], (int(parts[0], 16), int(parts[1], 16)))
    found = [symbols[name] for name in listed if name in symbols]
    if len(found) < MIN_FOUND * len(listed):
        fail(f"only {len(found)} of the {len(listed)} functions {order_file} lists are in {tool}: "
             "run scripts/symbol-order again")
    start = min(address for address, _ in found)
    end = max(address + size for address, size in found)
    total = sum(size for _, size in found)
    if end - start > total * (1 + SLACK_FRACTION) + 4096:
        fail(f"the {len(found)} listed functions ({total} bytes) are spread over {end - start} bytes of "
             f"{tool}: the link did not lay them out first")
    sections = subprocess.run(["readelf", "-SW", tool], capture_output=True, text=True, check=True).stdout
    text_start = next(int(line.split(".text", 1)[1].split()[1], 16) for line in sections.splitlines()
                      if " .text " in line)
    if start - text_start > 4096:
        fail(f"the listed functions begin {start - text_start} bytes into .text, not at its front")
    dynamic = subprocess.run(["readelf", "-dW", tool], capture_output=True, text=True, check=True).stdout
    versions = subprocess.run(["readelf", "-VW", tool], capture_output=True, text=True, check=True).stdout
    if "(RELR)" not in dynamic or "GLIBC_ABI_DT_RELR" not in versions:
        fail(f"{tool} has no packed relative relocations, or lacks the GLIBC_ABI_DT_RELR requirement")
    run = subprocess.run([tool, "--version"], capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"{tool} --version exited {run.returncode}: {run.stderr.strip()}")
    print(f"ok {tool}: {len(found)} of {len(listed)} listed functions, {total} bytes, in {end - start} bytes "
          f"at the front of .text; DT_RELR")


if __name__ == "__main__":
    main()
