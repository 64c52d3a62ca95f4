#!/usr/bin/env python3
"""Signed artifacts end to end (docs/bytecode.md "Signatures", docs/policy.md "[artifacts]"):
`remitc keygen` makes a key pair, `remitc build --sign` signs a .rbc, and a host that trusts a
directory of public keys (`--trust KEYS_DIR`, or `[artifacts] trust` in its policy) runs only what
one of them signed: an unsigned file, another builder's, or one changed after signing is refused
with exit 1 before anything runs, while the trusted one runs, pauses, resumes and is traced with
its signer. Keys made by the openssl command line work the same; `dis` and `manifest` name the
signer; bad keys and trust directories are clear errors that print no key material. OpenSSL's
libcrypto is loaded only for signature work, and without it signature commands say what to install
while unsigned artifacts still run."""
import json
import os
import shutil
import subprocess

from harness import REMIT, REMITC, REMITVM, Workspace, expect, main, read_trace, run

HOST = """input who tags untrusted

capability ops.note(text: Str) -> Str
  cost 0.001
"""

PROGRAM = """program noter
uses ops.note

fn main(who: Str) -> Str {
  let id = ops.note(text: "hello " + who)
  return "noted " + id
}
"""

FIXTURES = json.dumps({"capabilities": {"ops.note": [{"output": "n-1"}, {"output": "n-2"}]}})

POLICY = """[grant."ops.note"]
max_calls = 1
"""


def workspace(policy=POLICY):
    ws = Workspace({"host.rmti": HOST, "prog.rmt": PROGRAM, "policy.toml": policy,
                    "fixtures/run.json": FIXTURES})
    k = run(REMITC, "keygen", "builder.pem", cwd=ws.path)
    expect(k.code == 0 and "wrote builder.pem" in k.out and "wrote builder.pub.pem" in k.out, "keygen", k)
    (ws.path / "keys").mkdir()
    shutil.copy(ws.path / "builder.pub.pem", ws.path / "keys/builder.pub.pem")
    return ws


def signer_of(ws, key="builder.pub.pem"):
    """The signer name for a public key file, worked out independently with the openssl command
    line: "ed25519:" and the raw key's hex (the last 32 bytes of its DER form)."""
    der = subprocess.run(["openssl", "pkey", "-pubin", "-in", str(ws.path / key), "-outform", "DER"],
                         capture_output=True, check=True).stdout
    return "ed25519:" + der[-32:].hex()


def test_keygen_writes_a_private_key_only_its_owner_can_read_and_never_overwrites():
    with workspace() as ws:
        mode = os.stat(ws.path / "builder.pem").st_mode & 0o777
        expect(mode == 0o600, f"the private key is mode 600, not {oct(mode)}")
        k = run(REMITC, "keygen", "builder.pem", cwd=ws.path)
        expect(k.code == 2 and "already exists" in k.err, "an existing key is never overwritten", k)
        k = run(REMITC, "keygen", "noext", cwd=ws.path)
        expect(k.code == 2 and "KEY.pem" in k.err, "keygen wants a .pem name", k)


def test_a_signed_artifact_runs_where_its_key_is_trusted():
    with workspace() as ws:
        b = run(REMITC, "build", "prog.rmt", "--sign", "builder.pem", cwd=ws.path)
        expect(b.code == 0 and f"signed by {signer_of(ws)}" in b.out, "build --sign names the signer", b)
        r = run(REMITVM, "run", "prog.rbc", "--trust", "keys", "-i", "who=Ada", cwd=ws.path)
        expect(r.code == 0 and json.loads(r.out) == "noted n-1", "the trusted artifact runs", r)
        # The trace says who vouched for the code that ran.
        runs = sorted((ws.path / ".remit/runs").glob("*.jsonl"))
        start = read_trace(runs[-1])[0]
        expect(start["signer"] == signer_of(ws) and start["trusted_key"] == "builder",
               f"run_start records the signer and the trusted key: {start}")
        # dis and manifest show the signer; an unsigned file says so.
        d = run(REMITC, "dis", "prog.rbc", cwd=ws.path)
        expect(d.code == 0 and f"; signed by     {signer_of(ws)}" in d.out, "dis shows the signer", d)
        m = run(REMITC, "manifest", "prog.rbc", cwd=ws.path)
        expect(m.code == 0 and json.loads(m.out)["signer"] == signer_of(ws), "manifest shows the signer", m)
        run(REMITC, "build", "prog.rmt", "-o", "plain.rbc", cwd=ws.path)
        d = run(REMITC, "dis", "plain.rbc", cwd=ws.path)
        expect(d.code == 0 and "signed by" not in d.out, "dis of an unsigned file has no signer line", d)
        m = run(REMITC, "manifest", "plain.rbc", cwd=ws.path)
        m2 = run(REMITC, "manifest", "prog.rmt", cwd=ws.path)
        expect(m.out == m2.out, "an unsigned file's manifest is its source's", m)
        # Without a trust directory a signed file runs like any other (the host did not ask).
        r = run(REMITVM, "run", "prog.rbc", "-i", "who=Ada", cwd=ws.path)
        expect(r.code == 0, "no --trust: the signature is checked but any signer is fine", r)


def test_unsigned_unknown_and_changed_artifacts_are_refused_before_anything_runs():
    with workspace() as ws:
        run(REMITC, "build", "prog.rmt", "-o", "plain.rbc", cwd=ws.path)
        r = run(REMITVM, "run", "plain.rbc", "--trust", "keys", "-i", "who=Ada", cwd=ws.path)
        expect(r.code == 1 and "refusing to run plain.rbc: it is not signed" in r.err and "--sign" in r.err,
               "unsigned: exit 1 with a hint", r)
        expect(not (ws.path / ".remit/runs").exists(), "nothing ran: no trace", r)

        run(REMITC, "keygen", "stranger.pem", cwd=ws.path)
        run(REMITC, "build", "prog.rmt", "--sign", "stranger.pem", "-o", "other.rbc", cwd=ws.path)
        r = run(REMITVM, "run", "other.rbc", "--trust", "keys", "-i", "who=Ada", cwd=ws.path)
        expect(r.code == 1 and f"signed by {signer_of(ws, 'stranger.pub.pem')}" in r.err
               and "not one of the 1 key(s) trusted in keys" in r.err, "unknown signer: exit 1", r)

        run(REMITC, "build", "prog.rmt", "--sign", "builder.pem", cwd=ws.path)
        data = bytearray((ws.path / "prog.rbc").read_bytes())
        for position in (30, len(data) // 2, len(data) - 120, len(data) - 1):
            changed = bytearray(data)
            changed[position] ^= 0x20
            ws.write("changed.rbc", bytes(changed))
            r = run(REMITVM, "run", "changed.rbc", "--trust", "keys", "-i", "who=Ada", cwd=ws.path)
            expect(r.code == 1 and "refusing to run changed.rbc" in r.err, f"a byte changed at {position}", r)
            r = run(REMITVM, "run", "changed.rbc", "-i", "who=Ada", cwd=ws.path)
            expect(r.code in (1, 2) and "noted" not in r.out, f"without --trust too (byte {position})", r)
        expect(not (ws.path / ".remit/runs").exists(), "nothing ran", r)


def test_the_policy_names_the_trust_directory_relative_to_itself():
    with workspace(POLICY + '\n[artifacts]\ntrust = "keys"\n') as ws:
        run(REMITC, "build", "prog.rmt", "-o", "plain.rbc", cwd=ws.path)
        run(REMITC, "build", "prog.rmt", "--sign", "builder.pem", cwd=ws.path)
        elsewhere = ws.path / "elsewhere"
        elsewhere.mkdir()
        r = run(REMITVM, "run", ws.path / "plain.rbc", "-i", "who=Ada", cwd=elsewhere)
        expect(r.code == 1 and "it is not signed" in r.err, "the policy's trust applies", r)
        r = run(REMITVM, "run", ws.path / "prog.rbc", "-i", "who=Ada", cwd=elsewhere)
        expect(r.code == 0 and json.loads(r.out) == "noted n-1", "from another directory, keys/ is the policy's", r)
        # --trust replaces the policy's directory.
        (ws.path / "other-keys").mkdir()
        run(REMITC, "keygen", "other.pem", cwd=ws.path)
        shutil.copy(ws.path / "other.pub.pem", ws.path / "other-keys/other.pub.pem")
        r = run(REMITVM, "run", "prog.rbc", "--trust", "other-keys", "-i", "who=Ada", cwd=ws.path)
        expect(r.code == 1 and "not one of the 1 key(s) trusted in other-keys" in r.err, "--trust wins", r)
        # Source is checked here, so the artifact rule does not apply to it.
        r = run(REMITVM, "run", "prog.rmt", "-i", "who=Ada", cwd=ws.path)
        expect(r.code == 0, "a .rmt runs under a policy with [artifacts] trust", r)
        r = run(REMITVM, "run", "prog.rmt", "--trust", "keys", "-i", "who=Ada", cwd=ws.path)
        expect(r.code == 2 and "--trust checks the signatures of .rbc artifacts" in r.err, "--trust with source", r)
    with workspace(POLICY + '\n[artifacts]\ntrust = 7\n') as ws:
        run(REMITC, "build", "prog.rmt", "--sign", "builder.pem", cwd=ws.path)
        r = run(REMITVM, "run", "prog.rbc", "-i", "who=Ada", cwd=ws.path)
        expect(r.code == 1 and "E0504" in r.err and "trust in [artifacts] must be a directory path" in r.err,
               "a wrong [artifacts] trust is an E0504", r)
    with workspace(POLICY + '\n[artifacts]\ntrusted = "keys"\n') as ws:
        r = run(REMITC, "check", "prog.rmt", cwd=ws.path)
        expect(r.code == 1 and "did you mean 'trust'" in r.err, "a misspelt key is caught", r)


def test_a_paused_signed_run_resumes_under_the_same_trust():
    with workspace('[grant."ops.note"]\nmax_calls = 1\napproval = "always"\n') as ws:
        run(REMITC, "build", "prog.rmt", "--sign", "builder.pem", cwd=ws.path)
        r = run(REMITVM, "run", "prog.rbc", "--trust", "keys", "-i", "who=Ada", cwd=ws.path)
        expect(r.code == 3, "the call pauses for approval", r)
        run_id = sorted((ws.path / ".remit/runs").glob("*.jsonl"))[-1].stem
        a = run(REMITVM, "approve", run_id, "--by", "ops", cwd=ws.path)
        expect(a.code == 0, "approve", a)
        # The file is swapped for another builder's build of the same program: refused.
        run(REMITC, "keygen", "stranger.pem", cwd=ws.path)
        shutil.copy(ws.path / "prog.rbc", ws.path / "good.rbc")
        run(REMITC, "build", "prog.rmt", "--sign", "stranger.pem", cwd=ws.path)
        r = run(REMITVM, "resume", run_id, "--trust", "keys", cwd=ws.path)
        expect(r.code == 1 and "refusing to run" in r.err, "resume checks the trust again", r)
        shutil.copy(ws.path / "good.rbc", ws.path / "prog.rbc")
        r = run(REMITVM, "resume", run_id, "--trust", "keys", cwd=ws.path)
        expect(r.code == 0 and json.loads(r.out) == "noted n-1", "the trusted file resumes", r)


def test_keys_made_with_openssl_work_and_bad_keys_are_clear_errors():
    with workspace() as ws:
        subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(ws.path / "o.pem")], check=True)
        subprocess.run(["openssl", "pkey", "-in", str(ws.path / "o.pem"), "-pubout", "-out",
                        str(ws.path / "keys/o.pem")], check=True)
        os.chmod(ws.path / "o.pem", 0o644)
        b = run(REMITC, "build", "prog.rmt", "--sign", "o.pem", cwd=ws.path)
        expect(b.code == 0 and "can be read by other users" in b.err, "an openssl key signs, with a warning", b)
        r = run(REMITVM, "run", "prog.rbc", "--trust", "keys", "-i", "who=Ada", cwd=ws.path)
        expect(r.code == 0, "an openssl public key in the trust directory is trusted as 'o'", r)

        subprocess.run(["openssl", "genpkey", "-algorithm", "rsa", "-pkeyopt", "rsa_keygen_bits:1024", "-out",
                        str(ws.path / "rsa.pem")], check=True, capture_output=True)
        b = run(REMITC, "build", "prog.rmt", "--sign", "rsa.pem", "-o", "x.rbc", cwd=ws.path)
        expect(b.code == 2 and "Ed25519" in b.err and not (ws.path / "x.rbc").exists(), "an RSA key is refused", b)
        subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-aes256", "-pass", "pass:secret", "-out",
                        str(ws.path / "enc.pem")], check=True)
        b = run(REMITC, "build", "prog.rmt", "--sign", "enc.pem", "-o", "x.rbc", cwd=ws.path, stdin=b"")
        expect(b.code == 2 and "encrypted" in b.err, "an encrypted key is refused, without a prompt", b)
        b = run(REMITC, "build", "prog.rmt", "--sign", "builder.pub.pem", "-o", "x.rbc", cwd=ws.path)
        expect(b.code == 2 and "holds a public key" in b.err, "a public key cannot sign", b)

        shutil.copy(ws.path / "builder.pem", ws.path / "keys/leaked.pem")
        r = run(REMITVM, "run", "prog.rbc", "--trust", "keys", "-i", "who=Ada", cwd=ws.path)
        secret = (ws.path / "builder.pem").read_text()
        expect(r.code == 2 and "leaked.pem" in r.err and "holds a private key" in r.err, "a private key in keys/", r)
        expect(secret.splitlines()[1] not in r.err + r.out, "no key material in the message", r)
        os.remove(ws.path / "keys/leaked.pem")
        r = run(REMITVM, "run", "prog.rbc", "--trust", "nowhere", "-i", "who=Ada", cwd=ws.path)
        expect(r.code == 2 and "no such trust directory: nowhere" in r.err, "a missing trust directory", r)


def test_remit_front_end_builds_signed_artifacts():
    with workspace() as ws:
        b = run(REMIT, "build", "prog.rmt", "--sign", "builder.pem", cwd=ws.path)
        expect(b.code == 0 and "signed by ed25519:" in b.out, "remit build --sign", b)
        r = run(REMIT, "run", "build/noter.rbc", "--trust", "keys", "--policy", "policy.toml",
                "--fixtures", "fixtures/run.json", "-i", "who=Ada", cwd=ws.path)
        expect(r.code == 0, "remit run --trust", r)


def test_only_signature_work_loads_libcrypto():
    """The dynamic loader's own log (LD_DEBUG=files) shows libcrypto.so.3 opened for a signed file
    and never for an unsigned one: the tools do not link it, and nothing else loads it."""
    with workspace() as ws:
        run(REMITC, "build", "prog.rmt", "-o", "plain.rbc", cwd=ws.path)
        run(REMITC, "build", "prog.rmt", "--sign", "builder.pem", "-o", "signed.rbc", cwd=ws.path)
        debug = {"LD_DEBUG": "files"}
        r = run(REMITVM, "run", "plain.rbc", "-i", "who=Ada", cwd=ws.path, env=debug)
        expect(r.code == 0 and "libcrypto" not in r.err, "an unsigned run never loads libcrypto", r)
        d = run(REMITC, "dis", "signed.rbc", cwd=ws.path, env=debug)
        expect(d.code == 0 and "file=libcrypto.so.3" in d.err, "checking a signature loads it", d)


def libcrypto_paths():
    """The files the dynamic loader would open for libcrypto.so.3 (ldconfig's cache), resolved."""
    listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    paths = {os.path.realpath(line.split("=>")[-1].strip()) for line in listing.splitlines()
             if line.strip().startswith("libcrypto.so.3 ") and "x86-64" in line}
    return sorted(p for p in paths if os.path.exists(p))


def test_without_libcrypto_signatures_are_clear_errors_and_unsigned_artifacts_still_run():
    """The tools load OpenSSL's libcrypto only to sign or check a signature (bytecode/signature.cpp).
    Hidden in a private mount namespace (an empty file bind-mounted over it, which needs root), every
    signature command says what to install instead of crashing, and an unsigned artifact runs: the
    tools do not link it. Skipped where namespaces or mounts are not allowed."""
    libs = libcrypto_paths()
    if os.geteuid() != 0 or not shutil.which("unshare") or not libs or \
            subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        print("skipped: needs root, unshare and libcrypto.so.3 to hide")
        return
    with workspace() as ws:
        b = run(REMITC, "build", "prog.rmt", "--sign", "builder.pem", cwd=ws.path)
        expect(b.code == 0, "signed with libcrypto present", b)
        b = run(REMITC, "build", "prog.rmt", "-o", "plain.rbc", cwd=ws.path)
        expect(b.code == 0, "an unsigned build", b)
        hide = "".join(f"mount --bind /dev/null {lib} && " for lib in libs) + 'exec "$@"'

        def without_libcrypto(tool, *args):
            return run("unshare", "-m", "sh", "-c", hide, "sh", tool, *args, cwd=ws.path)

        install = "install the libssl3 package"
        k = without_libcrypto(REMITC, "keygen", "other.pem")
        expect(k.code == 2 and install in k.err and not (ws.path / "other.pem").exists(),
               "keygen says what to install", k)
        b = without_libcrypto(REMITC, "build", "prog.rmt", "--sign", "builder.pem", "-o", "x.rbc")
        expect(b.code == 2 and install in b.err and "builder.pem" in b.err and not (ws.path / "x.rbc").exists(),
               "build --sign says what to install and writes nothing", b)
        r = without_libcrypto(REMITVM, "run", "prog.rbc", "--trust", "keys", "-i", "who=Ada")
        expect(r.code == 2 and install in r.err and "keys" in r.err, "--trust says what to install", r)
        d = without_libcrypto(REMITC, "dis", "prog.rbc")
        expect(d.code == 2 and install in d.err and "signature cannot be checked" in d.err
               and "rebuild it" not in d.err, "a signed file's signature cannot be checked", d)
        r = without_libcrypto(REMITVM, "run", "plain.rbc", "-i", "who=Ada")
        expect(r.code == 0 and json.loads(r.out) == "noted n-1", "an unsigned artifact runs without libcrypto", r)


if __name__ == "__main__":
    main(globals())
