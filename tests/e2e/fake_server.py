"""The scriptable provider server of adapters/fake_http.py on a free port, for the tests whose
model calls go to it (tests/e2e/test_models.py, tests/e2e/test_fleet.py)."""
import json
import pathlib
import subprocess
import urllib.request

ADAPTERS = pathlib.Path(__file__).resolve().parent / "adapters"


class FakeServer:
    """tests/e2e/adapters/fake_http.py on a free port."""

    def __enter__(self):
        self.proc = subprocess.Popen(["python3", str(ADAPTERS / "fake_http.py")], stdout=subprocess.PIPE)
        self.port = int(self.proc.stdout.readline().split()[0])
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait()

    def url(self, path=""):
        return f"http://127.0.0.1:{self.port}{path}"

    def script(self, behaviours):
        request = urllib.request.Request(self.url("/_script"), data=json.dumps(behaviours).encode(), method="POST")
        urllib.request.urlopen(request).read()

    def requests(self):
        return json.loads(urllib.request.urlopen(self.url("/_requests")).read())
