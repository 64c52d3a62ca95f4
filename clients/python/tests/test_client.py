"""The tests of remit_client, run by clients/python/run_tests against the package installed from
the source tree into a scratch virtual environment (so they see exactly what a user installs) and
the real ``remitvm serve`` ($REMITVM). Every reply is also held to its type: a field the server
prints that the reply's dataclass does not declare fails the test.
"""

import json
import dataclasses
import os
import shutil
import stat
import sys
import tempfile
import threading
import unittest

import remit_client
from remit_client import (
    CompletedReply,
    Deny,
    FailedReply,
    HostCallReply,
    Perform,
    RejectedReply,
    RemitClient,
    RemitError,
    RemitProcessError,
    RemitProtocolError,
    RemitRequestError,
    RemitServerError,
    RemitTimeoutError,
    declared_fields,
)
from remit_client.protocol import REPLY_TYPES, Diagnostic, ErrorDetail, ErrorReply, HostCall, decode_reply

REMITVM = os.environ.get("REMITVM")

# The programs tests/e2e/test_serve.py runs too, from the repository's one copy (run_tests says where).
with open(os.environ["REMIT_SERVE_PROGRAMS"], encoding="utf-8") as _f:
    PROGRAMS = json.load(_f)
HOST, FETCH, NOTIFY, SPIN = PROGRAMS["host"], PROGRAMS["fetch_or_nothing"], PROGRAMS["notify"], PROGRAMS["spin"]

ONE = "program p\n\nfn main() -> Int {\n  return 1\n}\n"


def declared(reply):
    """Every field the server printed is one the reply's type declares."""
    raw = reply.raw
    known = declared_fields(REPLY_TYPES[raw["status"]])
    for key in raw:
        assert key in known, f"'{raw['status']}' has undeclared field '{key}'"
    if raw["status"] == "host-call":
        for key in raw["call"]:
            assert key in declared_fields(HostCall), f"call field '{key}'"
    for d in raw.get("diagnostics", []):
        for key in d:
            assert key in declared_fields(Diagnostic), f"diagnostic field '{key}'"
    return reply


class ServerTest(unittest.TestCase):
    def setUp(self):
        self.client = RemitClient.start(REMITVM)

    def tearDown(self):
        self.assertEqual(self.client.close(), 0, "remitvm serve exits 0 at the end of its input")

    def paused(self, outcome):
        declared(outcome)
        self.assertIsInstance(outcome, HostCallReply, outcome)
        return outcome

    def test_installed_from_the_package_not_the_tree(self):
        self.assertIn("site-packages", remit_client.__file__)

    def test_pause_perform_complete(self):
        pause = self.paused(self.client.run(FETCH, HOST, grants=[{"name": "web.fetch", "mode": "ask"}],
                                            inputs={"topic": "tea"}))
        call = pause.call
        self.assertEqual((call.resource, call.kind, call.mode), ("web.fetch", "capability", "ask"))
        self.assertEqual(call.args, {"url": "https://example.org/tea"})
        self.assertEqual(call.arg_tags, {"url": ["untrusted"]})
        self.assertEqual((call.span.line, call.span.col), (5, 14))
        self.assertEqual(call.returns, "Str")
        done = declared(self.client.perform(pause, "a page about tea", cost_usd=0.25))
        self.assertIsInstance(done, CompletedReply)
        self.assertEqual(done.result, "got a page about tea")
        self.assertEqual(done.type, "Str")
        self.assertEqual(done.result_tags, ["untrusted"])
        self.assertEqual(done.host_calls, 1)
        self.assertEqual(done.spent_usd, 0.25)

    def test_rejected(self):
        r = declared(self.client.run(FETCH, HOST, inputs={"topic": "tea"}))
        self.assertIsInstance(r, RejectedReply)
        self.assertEqual(r.stage, "grant")
        self.assertEqual((r.diagnostics[0].code, r.diagnostics[0].line), ("E0501", 5))
        self.assertEqual(r.requires, ["web.fetch"])
        self.assertIn("program.rmt:5:14: error[E0501]", r.rendered)

    def test_deny_and_approval_reasons(self):
        pause = self.paused(self.client.run(NOTIFY, HOST, grants=[remit_client.Grant("mail.send", mode="allow")],
                                            inputs={"topic": "tea"}))
        self.assertEqual(pause.call.mode, "ask")
        self.assertEqual(pause.call.reasons, ["'body' is untrusted"])
        r = declared(self.client.deny(pause, "not now"))
        self.assertIsInstance(r, FailedReply)
        self.assertEqual((r.stage, r.diagnostics[0].code), ("denied", "R0303"))
        self.assertIn("not now", r.diagnostics[0].message)

    def test_fail_is_operational(self):
        first = self.paused(self.client.run(FETCH, HOST, grants=[{"name": "web.fetch"}], inputs={"topic": "t"}))
        second = self.paused(self.client.fail(first, "Timeout", "slow"))
        self.assertEqual((first.call.attempt, second.call.attempt), (0, 1))
        self.assertNotEqual(first.call.id, second.call.id)
        done = self.client.fail(second)
        self.assertIsInstance(done, CompletedReply)
        self.assertEqual(done.result, "got nothing")

    def test_execute(self):
        seen = []

        def on_call(call, pause):
            seen.append((call.resource, call.args["url"]))
            return Perform("hello")

        end = self.client.execute(FETCH, HOST, on_call, grants=[{"name": "web.fetch", "mode": "allow"}],
                                  inputs={"topic": "tea"})
        self.assertIsInstance(end, CompletedReply)
        self.assertEqual(end.result, "got hello")
        self.assertEqual(seen, [("web.fetch", "https://example.org/tea")])
        end = self.client.execute(FETCH, HOST, lambda c, p: Deny("no"), grants=[{"name": "web.fetch"}],
                                  inputs={"topic": "x"})
        self.assertEqual(end.stage, "denied")

        def broken(call, pause):
            raise ValueError("no network")

        with self.assertRaisesRegex(ValueError, "no network"):
            self.client.execute(FETCH, HOST, broken, grants=[{"name": "web.fetch"}], inputs={"topic": "x"})

    def test_sessions_from_several_threads(self):
        results = {}

        def one(topic):
            pause = self.client.run(FETCH, HOST, grants=[{"name": "web.fetch"}], inputs={"topic": topic})
            results[topic] = self.client.perform(pause, f"page {pause.call.args['url']}").result

        threads = [threading.Thread(target=one, args=(t,)) for t in "abcdef"]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(results, {t: f"got page https://example.org/{t}" for t in "abcdef"})

    def test_abort(self):
        pause = self.paused(self.client.run(FETCH, HOST, grants=[{"name": "web.fetch"}], inputs={"topic": "t"}))
        aborted = declared(self.client.abort(pause))
        self.assertEqual((aborted.stage, aborted.diagnostics[0].code), ("aborted", "R0702"))

        ends = []
        runner = threading.Thread(target=lambda: ends.append(
            self.client.run(SPIN, "", session="spin", limits={"wall_ms": 600000, "steps": 10 ** 12})))
        runner.start()
        stopped = None
        while stopped is None:  # the run may not have reached the server yet
            try:
                stopped = self.client.abort("spin")
            except RemitServerError as e:
                self.assertEqual(e.code, "unknown_session")
        runner.join()
        self.assertEqual(ends[0].stage, "aborted")
        self.assertEqual(stopped, ends[0], "the abort returns the run's last reply")

        with self.assertRaises(RemitServerError) as e:
            self.client.abort("nobody")
        self.assertEqual(e.exception.code, "unknown_session")

    def test_error_replies(self):
        with self.assertRaises(RemitServerError) as e:
            self.client.run(FETCH, HOST, limits={"steps": 0})
        self.assertEqual(e.exception.code, "bad_request")
        self.assertIn("limits.steps", str(e.exception))
        self.assertIsInstance(e.exception, RemitError)
        pause = self.paused(self.client.run(FETCH, HOST, session="busy", grants=[{"name": "web.fetch"}],
                                            inputs={"topic": "t"}))
        with self.assertRaises(RemitServerError) as e:
            self.client.run(FETCH, HOST, session="busy")
        self.assertEqual(e.exception.code, "session_busy")
        wrong = HostCallReply(session=pause.session, call=HostCall(**{**pause.call.__dict__, "id": pause.call.id + 5}))
        with self.assertRaises(RemitServerError) as e:
            self.client.perform(wrong, "x")
        self.assertEqual(e.exception.code, "wrong_call")
        self.assertIsInstance(self.client.perform(pause, "y"), CompletedReply)  # still paused at its call

    def test_request_over_the_line_limit(self):
        with self.assertRaises(RemitRequestError):
            self.client.run("x" * (9 << 20), "")
        self.assertIsInstance(self.client.run(ONE, ""), CompletedReply)


class BrokenServerTest(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.mkdtemp(prefix="remit-client-test-")

    def tearDown(self):
        shutil.rmtree(self.scratch, ignore_errors=True)

    def fake_server(self, name, body):
        """A stand-in for remitvm: a Python script that plays a broken server."""
        path = os.path.join(self.scratch, name)
        with open(path, "w") as f:
            f.write(f"#!{sys.executable}\nimport sys\n{body}\n")
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
        return path

    def test_killed_server(self):
        client = RemitClient.start(REMITVM)
        errors = []

        def spin():
            try:
                client.run(SPIN, "", limits={"wall_ms": 600000, "steps": 10 ** 12})
            except RemitError as e:
                errors.append(e)

        runner = threading.Thread(target=spin)
        runner.start()
        while runner.is_alive() and not client._waiters:  # the run is on its way
            runner.join(0.01)
        client.kill()
        runner.join()
        self.assertIsInstance(errors[0], RemitProcessError)
        self.assertEqual(errors[0].exit_code, -9)
        with self.assertRaises(RemitProcessError):
            client.run(ONE, "")
        client.close()

    def test_exits_at_once_or_cannot_start(self):
        exits = self.fake_server("exits", 'sys.stderr.write("remitvm: cannot serve today\\n"); sys.exit(3)')
        client = RemitClient.start(exits)
        with self.assertRaises(RemitProcessError) as e:
            client.run(ONE, "")
        self.assertEqual(e.exception.exit_code, 3)
        self.assertIn("cannot serve today", e.exception.stderr)
        client.close()
        with self.assertRaises(RemitProcessError):
            RemitClient.start(os.path.join(self.scratch, "no-such-remitvm"))

    def test_malformed_lines(self):
        for name, line in [("garbage", "this is not json"), ("status", '{"status": "sleeping", "id": 1}'),
                           ("fields", '{"status": "completed", "id": 1, "session": "s"}'),
                           ("types", '{"status": "error", "id": 1, "error": {"code": 7, "message": "m"}}')]:
            server = self.fake_server(name, f"sys.stdin.readline(); print({line!r}, flush=True); sys.stdin.read()")
            client = RemitClient.start(server)
            with self.assertRaises(RemitProtocolError):
                client.run(ONE, "")
            with self.assertRaises(RemitProtocolError):
                client.run(ONE, "")
            client.close()

    def test_silent_server_times_out(self):
        silent = self.fake_server("silent", "sys.stdin.read()")
        client = RemitClient.start(silent, reply_timeout_s=0.1)
        with self.assertRaises(RemitTimeoutError):
            client.run(ONE, "", limits={"wall_ms": 1})
        client.kill()
        client.close()

    def test_close_kills_a_server_that_does_not_exit(self):
        stubborn = self.fake_server("stubborn", "import time\nsys.stdin.read()\ntime.sleep(600)")
        client = RemitClient.start(stubborn)
        self.assertEqual(client.close(timeout_s=0.1), -9)


class EnvelopeTest(unittest.TestCase):
    """The envelope (session, id, raw, status) is declared once, for every reply class."""

    def test_every_reply_shares_the_envelope(self):
        from remit_client import protocol

        envelope = {f.name for f in dataclasses.fields(protocol._Envelope)}
        self.assertEqual(envelope, {"session", "id", "raw", "status"})
        for status, cls in REPLY_TYPES.items():
            self.assertTrue(issubclass(cls, protocol._Envelope), cls.__name__)
            own = {f.name for f in dataclasses.fields(cls) if f.name in cls.__dict__.get("__annotations__", {})}
            # A class narrows status (and ErrorReply makes session optional); it repeats nothing else.
            self.assertLessEqual(own & envelope, {"status", "session"} if cls is ErrorReply else {"status"}, cls.__name__)
            self.assertEqual(cls.__dataclass_fields__["status"].default, status)

    def test_envelope_fields_are_keywords_after_the_reply_own(self):
        reply = CompletedReply(1, "Int", [], [], 0, 1, 0.0, session="s", id=7)
        self.assertEqual((reply.session, reply.id, reply.status, reply.raw), ("s", 7, "completed", {}))
        with self.assertRaises(TypeError):
            CompletedReply(1, "Int", [], [], 0, 1, 0.0)  # session is required
        self.assertIsNone(ErrorReply(error=ErrorDetail("bad_request", "m")).session)
        self.assertEqual(decode_reply('{"status": "error", "error": {"code": "bad_request", "message": "m"}}').status,
                         "error")


if __name__ == "__main__":
    if not REMITVM:
        sys.exit("set REMITVM to the remitvm to test against")
    unittest.main(verbosity=2)
