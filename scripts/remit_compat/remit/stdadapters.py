"""Helpers prototype adapters use. Trusted host code: they run with the adapter process's rights."""
import json
import os
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

from .rterrors import CapabilityFailed, Timeout


def http_get(url, allow_hosts, timeout=20.0, max_bytes=400_000):
    """HTTPS GET restricted to `allow_hosts`; returns at most `max_bytes` of text."""
    parts = urllib.parse.urlparse(url)
    if parts.scheme != "https" or parts.hostname not in allow_hosts:
        raise CapabilityFailed(f"host {parts.hostname!r} is not in this adapter's allowlist")
    request = urllib.request.Request(url, headers={"User-Agent": "remit-py-adapter/0.1"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.read(max_bytes).decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        raise CapabilityFailed(f"HTTP {e.code} for {url}") from None
    except TimeoutError:
        raise Timeout(f"timeout fetching {url}") from None
    except (urllib.error.URLError, OSError) as e:
        if "timed out" in str(e):
            raise Timeout(f"timeout fetching {url}") from None
        raise CapabilityFailed(f"network error for {url}: {e}") from None


class RootedFiles:
    """File access confined to one directory tree (symlinks resolved before the check)."""

    def __init__(self, root):
        self.root = os.path.realpath(root)

    def resolve(self, rel):
        path = os.path.realpath(os.path.join(self.root, rel))
        if os.path.commonpath([self.root, path]) != self.root:
            raise CapabilityFailed(f"path {rel!r} escapes the allowed root")
        return path

    def list(self, rel):
        folder = self.resolve(rel)
        if not os.path.isdir(folder):
            raise CapabilityFailed(f"{rel!r} is not a directory")
        names = [n for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n))]
        return sorted(os.path.relpath(os.path.join(folder, n), self.root) for n in names)

    def read(self, rel, max_bytes=200_000):
        path = self.resolve(rel)
        if not os.path.isfile(path):
            raise CapabilityFailed(f"no such file {rel!r}")
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(max_bytes)

    def write(self, rel, content):
        path = self.resolve(rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)


class Ledger:
    """An append-only JSON-lines file; appending a key already present returns the earlier record."""

    def __init__(self, path):
        self.path = path

    def append(self, record, key):
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as f:
                for line in f:
                    if not line.strip():
                        continue
                    old = json.loads(line)
                    if old.get("idempotency_key") == key:
                        return {**old, "deduplicated": True}
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        entry = {**record, "idempotency_key": key}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")
        return entry


def run_pytest(cwd, timeout=120.0):
    """Runs pytest in `cwd` (no sandbox). Returns {"passed": bool, "output": last 4000 characters}."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "--no-header", "-p", "no:cacheprovider"]
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Timeout(f"tests timed out after {timeout}s") from None
    return {"passed": proc.returncode == 0, "output": (proc.stdout + proc.stderr)[-4000:]}
