#!/usr/bin/env python3
"""The configure-time layer check (cmake/RemitLayers.cmake) passes on the tree as it is and fails,
naming the link, when a lower layer links a higher one: run as
`check_layers.py CMAKE SOURCE_DIR`. Each case configures the tree (no tests, no benchmarks) in a
scratch directory."""
import subprocess
import sys
import tempfile

cmake, source = sys.argv[1], sys.argv[2]


def configure(*extra):
    with tempfile.TemporaryDirectory(prefix="remit-layers-") as build:
        return subprocess.run([cmake, "-S", source, "-B", build, "-G", "Ninja", "-DREMIT_BUILD_TESTS=OFF",
                               "-DREMIT_BUILD_BENCH=OFF", *extra], capture_output=True, text=True, timeout=300)


failures = 0
cases = 0
for extra, what in [((), "the tree as it is"), (("-DREMIT_BUILD_CLI=OFF",), "the library alone (REMIT_BUILD_CLI=OFF)")]:
    cases += 1
    r = configure(*extra)
    if r.returncode != 0:
        print(f"FAIL  {what} does not configure:\n{r.stdout}\n{r.stderr}")
        failures += 1
    else:
        print(f"ok    {what} passes the layer check")
for link, words in [("remit_vm:remit_compiler", "remit_vm (layer 2) links remit_compiler (layer 2)"),
                    ("remit_runtime:remit_broker", "remit_runtime (layer 0) links remit_broker (layer 3)"),
                    ("remit_broker:remit_session", "remit_broker (layer 3) links remit_session (layer 4)"),
                    ("remit_session:remit_mcp", "remit_session (layer 4) links remit_mcp (layer 5)"),
                    ("remit_mcp:remit_cli", "remit_mcp (layer 5) links remit_cli (layer 6)")]:
    cases += 1
    r = configure(f"-DREMIT_FORBIDDEN_LINK={link}")
    if r.returncode == 0 or "layer check" not in r.stderr or words not in r.stderr:
        print(f"FAIL  a forbidden link {link} was not refused:\n{r.stderr}")
        failures += 1
    else:
        print(f"ok    {link} is refused at configure time")
print(f"{cases - failures} passed, {failures} failed")
sys.exit(1 if failures else 0)
