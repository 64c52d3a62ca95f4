#!/usr/bin/env python3
"""The embedding library as a user gets it: installed (`cmake --install` into a scratch prefix),
found with find_package(Remit) and with pkg-config, used by the C++ and the C host of
examples/embed on examples/refund_bot — including the approval of the refund through the API —
and deciding exactly as `remitvm run` does for the same program, policy and answers: the call
events of the three traces agree field by field.

    test_installed.py CMAKE BUILD_DIR SOURCE_DIR"""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

cmake, build, source = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
example = source / "examples" / "refund_bot"
failures = 0


def check(cond, what, detail=""):
    global failures
    print(f"{'ok   ' if cond else 'FAIL '} {what}")
    if not cond:
        failures += 1
        if detail:
            print(detail)


def sh(*argv, **kw):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=600, **kw)


def calls(trace):
    """The decision-relevant fields of each call event, in order."""
    out = []
    for line in pathlib.Path(trace).read_text().splitlines():
        e = json.loads(line)
        if e["event"] != "call":
            continue
        out.append({k: e.get(k) for k in ("resource", "site", "args", "arg_tags", "pc_tags", "status", "result",
                                          "result_tags", "derived_from", "attempt")} |
                   {"reasons": (e.get("approval") or {}).get("reasons")})
    return out


with tempfile.TemporaryDirectory(prefix="remit-embed-") as scratch:
    scratch = pathlib.Path(scratch)
    prefix = scratch / "prefix"
    r = sh(cmake, "--install", build, "--prefix", prefix)
    check(r.returncode == 0, "cmake --install", r.stdout + r.stderr)
    for f in ("include/remit/remit.hpp", "include/remit/remit.h", "lib/cmake/Remit/RemitConfig.cmake",
              "lib/pkgconfig/remit.pc", "bin/remitvm"):
        check((prefix / f).exists(), f"installed {f}")
    libs = list((prefix / "lib").glob("libremit.*"))
    check(bool(libs), "installed libremit", str(list((prefix / "lib").iterdir())))

    hosts = scratch / "hosts"
    r = sh(cmake, "-S", source / "examples" / "embed", "-B", hosts, f"-DCMAKE_PREFIX_PATH={prefix}",
           "-DCMAKE_BUILD_TYPE=Release")
    check(r.returncode == 0, "configure examples/embed against the installed package", r.stdout + r.stderr)
    r = sh(cmake, "--build", hosts, "-j2")
    check(r.returncode == 0, "build the C++ and the C host", r.stdout + r.stderr)
    if r.returncode != 0:
        sys.exit(1)

    # pkg-config, for builds without CMake.
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    flags = sh("pkg-config", "--cflags", "--libs", "remit", env=env)
    check(flags.returncode == 0 and "-lremit" in flags.stdout, "pkg-config remit", flags.stderr)
    if flags.returncode == 0 and shutil.which("cc"):
        r = sh("cc", "-o", scratch / "host_c_pc", source / "examples" / "embed" / "host.c", *flags.stdout.split(),
               f"-Wl,-rpath,{prefix / 'lib'}")
        check(r.returncode == 0, "cc host.c $(pkg-config --cflags --libs remit)", r.stderr)

    env = dict(os.environ, LD_LIBRARY_PATH=str(prefix / "lib"))
    traces = {}
    for name in ("host_cpp", "host_c"):
        state = scratch / f"state-{name}"
        r = sh(hosts / name, example, state, env=env)
        check(r.returncode == 0 and "refunded 49.5 for order A-1001 (rf_7731)" in r.stdout,
              f"{name} runs refund_bot and approves the refund", r.stdout + r.stderr)
        check("approval" in r.stderr, f"{name} was asked for the approval", r.stderr)
        found = list((state / "runs").glob("*.jsonl"))
        check(len(found) == 1, f"{name} wrote one trace")
        if found:
            traces[name] = found[0]
            events = [json.loads(x)["event"] for x in found[0].read_text().splitlines()]
            check(events[0] == "run_start" and events[-1] == "run_end" and "approval_granted" in events,
                  f"{name}'s trace records the run and the approval", str(events))

    # The same program, policy and answers through remitvm: pause, approve, resume.
    state = scratch / "state-cli"
    remitvm = prefix / "bin" / "remitvm"
    r = sh(remitvm, "run", example / "refund_bot.rmt", "--inputs", example / "inputs.json", "--state-dir", state,
           "--json")
    check(r.returncode == 3, "remitvm run pauses for the refund", r.stdout + r.stderr)
    run_id = json.loads(r.stdout)["run_id"] if r.returncode == 3 else ""
    r = sh(remitvm, "approve", run_id, "--state-dir", state, "--by", "operator")
    check(r.returncode == 0, "remitvm approve", r.stderr)
    r = sh(remitvm, "resume", run_id, "--state-dir", state, "--json")
    check(r.returncode == 0, "remitvm resume completes", r.stdout + r.stderr)
    resumed = [p for p in (state / "runs").glob("*.jsonl") if p.stem != run_id]
    if len(resumed) == 1 and traces:
        cli = calls(resumed[0])
        for name, trace in traces.items():
            mine = calls(trace)
            check(mine == cli, f"{name} decides every call as remitvm run does",
                  json.dumps({"embedded": mine, "remitvm": cli}, indent=1))
    else:
        check(False, "the resume wrote its trace")

print(f"{failures} failed")
sys.exit(1 if failures else 0)
