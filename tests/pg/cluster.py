"""A private PostgreSQL cluster for the tests (tests/README.md, "PostgreSQL"): initdb and pg_ctl in
a temporary directory, listening only on a Unix socket in that directory, torn down after.

    python3 tests/pg/cluster.py start STATE.json [--fsync]    start one; STATE.json records where it is
    python3 tests/pg/cluster.py stop STATE.json     stop it (immediately) and remove its directory
    python3 tests/pg/cluster.py url STATE.json DB   create database DB and print its URL

initdb and postgres refuse to run as root, and CI runs as root: as root, the cluster runs as the
unprivileged user `nobody` (through runuser, else setpriv), and its directory belongs to it.
Other users run it as themselves. fsync is off (-F) unless --fsync (the benchmarks): the tests kill
clients, never the server, and a committed transaction is visible to every other connection
whether or not it reached the disk.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

USER = "remit"


def _bindir():
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(candidate, "initdb")):
            return candidate
    found = shutil.which("initdb")
    if found:
        return os.path.dirname(found)
    sys.exit("cluster.py: initdb not found; run scripts/install-deps (Debian: postgresql)")


def _as_owner(argv):
    """argv run as the cluster's owner: `nobody` when we are root."""
    if os.geteuid() != 0:
        return argv
    if shutil.which("runuser"):
        return ["runuser", "-u", "nobody", "--"] + argv
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"] + argv


def start(state_path, fsync=False):
    bindir = _bindir()
    root = tempfile.mkdtemp(prefix="remit-pg-")
    os.chmod(root, 0o755)
    if os.geteuid() == 0:
        import pwd
        nobody = pwd.getpwnam("nobody")
        os.chown(root, nobody.pw_uid, nobody.pw_gid)
    data = os.path.join(root, "data")
    subprocess.run(_as_owner([os.path.join(bindir, "initdb"), "-D", data, "-U", USER, "-A", "trust", "-E", "UTF8",
                              "--no-sync", "--locale=C"]),
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    options = f"-k {root} -c listen_addresses='' -c max_connections=200" + ("" if fsync else " -F")
    subprocess.run(_as_owner([os.path.join(bindir, "pg_ctl"), "-D", data, "-o", options, "-w", "-t", "60",
                              "-l", os.path.join(root, "log"), "start"]),
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(data, "postmaster.pid")) as f:
        postmaster = int(f.readline())
    with open(state_path, "w") as f:
        json.dump({"dir": root, "bindir": bindir, "postmaster": postmaster, "fsync": fsync}, f)
    print(f"cluster.py: PostgreSQL running in {root}")


def stop(state_path):
    try:
        with open(state_path) as f:
            state = json.load(f)
    except FileNotFoundError:
        return
    data = os.path.join(state["dir"], "data")
    subprocess.run(_as_owner([os.path.join(state["bindir"], "pg_ctl"), "-D", data, "-m", "immediate", "stop"]),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shutil.rmtree(state["dir"], ignore_errors=True)
    os.remove(state_path)


def url(state_path, database):
    """Creates `database` (fresh) in the cluster and returns its URL."""
    with open(state_path) as f:
        state = json.load(f)
    psql = [os.path.join(state["bindir"], "psql"), "-h", state["dir"], "-U", USER, "-d", "postgres", "-q",
            "-v", "ON_ERROR_STOP=1"]
    subprocess.run(psql + ["-c", f'DROP DATABASE IF EXISTS "{database}"', "-c", f'CREATE DATABASE "{database}"'],
                   check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, PGOPTIONS="-c client_min_messages=warning"))
    return f"postgresql://{USER}@/{database}?host={state['dir']}"


if __name__ == "__main__":
    command, path = sys.argv[1], sys.argv[2]
    if command == "start":
        start(path, fsync="--fsync" in sys.argv[3:])
    elif command == "stop":
        stop(path)
    elif command == "url":
        print(url(path, sys.argv[3]))
    else:
        sys.exit(f"usage: {sys.argv[0]} start|stop|url STATE.json [DB]")
