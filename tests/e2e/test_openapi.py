#!/usr/bin/env python3
"""OpenAPI services as capabilities (docs/import.md "OpenAPI", docs/adapters.md "OpenAPI services as
capabilities"), against the public Swagger Petstore 3 document (tests/e2e/openapi/petstore.yaml, and
the same as JSON) and a small local Petstore implementing a few of its operations over real HTTP
(tests/e2e/openapi/petstore_server.py): `remitc import openapi` drafts a host interface that formats
and checks, a program written against it runs through `remitvm run --adapter openapi…` with path,
query, header and body parameters and credentials from the environment, a non-idempotent operation
pauses for approval and is performed once after it, the run resumes with the adapter it recorded
(which names the credentials' variables, never their values) and replays without the service; an
HTTP error is an operational failure the program's `else` handles; bad documents, base URLs and
unset variables are refused before anything runs."""
import json
import shutil
import subprocess
import sys

from harness import REMITC, REMITVM, REPO, Workspace, expect, main, read_trace, run, run_vm_json as run_json

DOCS = REPO / "tests" / "e2e" / "openapi"
API_KEY, TOKEN = "key-7d41c0ffee", "token-93b1deadbeef"
ENV = {"PET_KEY": API_KEY, "PET_TOKEN": TOKEN}


class Petstore:
    """The local Petstore, on a free port; stopped when the `with` block ends."""

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, str(DOCS / "petstore_server.py"), API_KEY, TOKEN],
                                     stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline().split()[0])
        self.base = f"http://127.0.0.1:{self.port}/api/v3"
        return self

    def requests(self):
        """The requests served since the last call, as the server recorded them."""
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/_requests", timeout=10) as r:
            return json.loads(r.read())

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


ADOPT = """program adopt
uses pets.getPetById, pets.findPetsByStatus, pets.findPetsByTags, pets.addPet, pets.getInventory

fn main(name: Str) -> Str {
  let rex = pets.getPetById(1)
  let missing = pets.getPetById(404) retry 1 else { name: "nobody", photoUrls: [] }
  let available = pets.findPetsByStatus("available")
  let good = pets.findPetsByTags(["good", "a&b c"])
  let added = pets.addPet({ name: name, photoUrls: ["https://example.org/{name}.png"] })
  let inventory = pets.getInventory()
  return "{rex.name}, {missing.name}, {len(available)} available, {len(good)} good, added {added.name}; {inventory}"
}
"""

ADOPT_POLICY = """[grant."pets.getPetById"]
[grant."pets.findPetsByStatus"]
[grant."pets.findPetsByTags"]
[grant."pets.getInventory"]
[grant."pets.addPet"]
max_calls = 1
"""


UPLOAD = """openapi: 3.1.0
info: {title: Files, version: '2'}
servers: [{url: 'https://files.example.com/v1'}]
components:
  securitySchemes:
    key: {type: apiKey, in: header, name: X-Key}
security: [{key: []}]
paths:
  /files/{id}:
    get:
      operationId: getFile
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {'200': {description: the file, content: {text/plain: {}}}}
  /files:
    post:
      operationId: upload
      requestBody:
        required: true
        content: {multipart/form-data: {schema: {type: object, properties: {file: {type: string}}}}}
      responses: {'201': {description: stored}}
"""


def imported(ws, name="petstore.yaml"):
    shutil.copy(DOCS / name, ws.path / name)
    result = run(REMITC, "import", "openapi", name, "--as", "pets", "-o", "host.rmti", cwd=ws.path)
    expect(result.code == 0, "import succeeds", result)
    return result, ws.read("host.rmti")


def test_import_drafts_a_host_interface_from_yaml_and_json_alike():
    with Workspace() as ws:
        result, host = imported(ws)
        expect("imported 19 of 19 operation(s) from 'Swagger Petstore - OpenAPI 3.0' as pets.* into host.rmti"
               in result.err, "the summary counts the operations", result)
        expect(result.out == "", "with -o nothing goes to stdout", result)
        for line in ["capability pets.getPetById(petId: Int) -> Pet\n  idempotent\n",
                     "capability pets.addPet(body: Pet) -> Pet\n",
                     'capability pets.findPetsByStatus(status: "available" | "pending" | "sold") -> List[Pet]\n',
                     "capability pets.findPetsByTags(tags_: List[Str]) -> List[Pet]\n",  # tags is a keyword
                     "capability pets.deletePet(petId: Int) -> Unit\n",
                     "capability pets.getInventory() -> Str\n",
                     "capability pets.loginUser() -> Str\n",
                     "type Pet = { name: Str, photoUrls: List[Str] }\n",
                     "# GET /pet/{petId}\n",
                     "# credentials: api_key (an API key in the header 'api_key') or petstore_auth (oauth2)\n",
                     "# changes the service's state: consider `approval always`\n",
                     "# optional, never sent (Remit parameters are all required): api_key (string)\n",
                     "# its optional request body (application/octet-stream) is never sent\n",
                     "# TODO(operator): this is a draft."]:
            expect(line in host, f"the draft has {line!r}", host)
        expect("a map (an object with free-form keys); typed Str" in host, "the inventory map is noted", host)
        fmt = run(REMITC, "fmt", "--check", "host.rmti", cwd=ws.path)
        expect(fmt.code == 0, "the draft is formatted", fmt)
        shutil.copy(DOCS / "petstore.json", ws.path / "petstore.json")
        from_json = run(REMITC, "import", "openapi", "petstore.json", "--as", "pets", cwd=ws.path)
        expect(from_json.code == 0, "the JSON document imports", from_json)
        expect(from_json.out == host.replace("petstore.yaml", "petstore.json"), "to the same draft", from_json)


def test_a_program_runs_against_the_service_with_an_approval_and_resumes_and_replays():
    with Workspace({"adopt.rmt": ADOPT, "policy.toml": ADOPT_POLICY}) as ws, Petstore() as pets:
        _, host = imported(ws)
        # The operator follows the TODO: answers are untrusted, adding a pet needs a person.
        host = host.replace("capability pets.addPet(body: Pet) -> Pet\n",
                            "capability pets.addPet(body: Pet) -> Pet\n  approval always\n")
        ws.write("host.rmti", host)
        checked = run(REMITC, "check", "adopt.rmt", cwd=ws.path)
        expect(checked.code == 0, "a program written against the draft checks", checked)

        adapter = "openapi.pets:petstore.yaml auth.api_key=PET_KEY auth.petstore_auth=PET_TOKEN"
        flags = ["--adapter", adapter, "--base-url", pets.base, "--state-dir", "st"]
        first, paused = run_json("run", "adopt.rmt", "-i", "name=Bella", *flags, cwd=ws.path, env=ENV)
        expect(first.code == 3 and paused["status"] == "approval_required", "adding a pet pauses", first)
        expect(paused["pending"]["resource"] == "pets.addPet", "at addPet", paused)
        expect(paused["pending"]["args"] == {"body": {"name": "Bella", "photoUrls": ["https://example.org/Bella.png"]}},
               "the approver sees the body", paused)
        seen = pets.requests()
        expect([(r["method"], r["path"]) for r in seen] ==
               [("GET", "/api/v3/pet/1"), ("GET", "/api/v3/pet/404"), ("GET", "/api/v3/pet/404"),
                ("GET", "/api/v3/pet/findByStatus"), ("GET", "/api/v3/pet/findByTags")],
               "the reads happened, the write did not", seen)
        expect(seen[0]["headers"].get("api_key") == API_KEY and "authorization" not in seen[0]["headers"],
               "getPetById used the first scheme it can: the API key header", seen[0])
        expect(seen[3]["query"] == {"status": ["available"]} and seen[3]["headers"]["authorization"] == f"Bearer {TOKEN}",
               "findPetsByStatus sent its query parameter and the bearer token", seen[3])
        expect(seen[4]["query"] == {"tags": ["good", "a&b c"]}, "tags_ went as the list query parameter tags", seen[4])

        run_id = paused["run_id"]
        start = read_trace(ws.path / "st" / "runs" / f"{run_id}.jsonl")[0]
        expect(start["adapters"] == [{"kind": "openapi", "document": str(ws.path / "petstore.yaml"), "namespace": "pets",
                                      "base_url": pets.base,
                                      "auth": {"api_key": "PET_KEY", "petstore_auth": "PET_TOKEN"}}],
               "run_start records the adapter with the variables' names", start)
        for f in (ws.path / "st").rglob("*"):
            if f.is_file():
                text = f.read_text(encoding="utf-8", errors="replace")
                expect(API_KEY not in text and TOKEN not in text, f"no credential in {f}")

        approved = run(REMITVM, "approve", paused["pending"]["digest"], "--state-dir", "st", cwd=ws.path)
        expect(approved.code == 0, "approve", approved)
        # Resumed from elsewhere without adapter flags: the recorded adapter is opened again.
        second, done = run_json("resume", run_id, "--state-dir", str(ws.path / "st"), cwd=DOCS, env=ENV)
        expect(second.code == 0 and done["status"] == "completed", "the resume completes", second)
        expect(done["result"] == 'Rex, nobody, 1 available, 1 good, added Bella; {"available": 2, "sold": 1}',
               "the result holds every answer", done)
        seen = pets.requests()
        posts = [r for r in seen if r["method"] == "POST"]
        expect(len(posts) == 1 and json.loads(posts[0]["body"]) == {"name": "Bella",
                                                                   "photoUrls": ["https://example.org/Bella.png"]},
               "the pet was added exactly once", seen)
        expect(posts[0]["headers"]["authorization"] == f"Bearer {TOKEN}" and posts[0]["headers"].get("idempotency-key"),
               "with the token and an idempotency key", posts[0])
        expect(not any(r["path"] in ("/api/v3/pet/1", "/api/v3/pet/findByStatus") for r in seen),
               "the reads were not repeated by the resume", seen)
        events = [e for trace in (ws.path / "st" / "runs").glob("*.jsonl") for e in read_trace(trace)
                  if e["event"] == "call" and not e.get("replayed")]
        adds = [e for e in events if e["resource"] == "pets.addPet"]
        expect(len(adds) == 1 and adds[0]["adapter"] == "openapi" and
               adds[0]["meta"] == {"operation": "addPet", "method": "POST", "path": "/pet", "status": 200},
               "the trace names the operation", adds)
        failed = [e for e in events if e["status"] == "error"]
        expect(len(failed) == 2 and "HTTP 404 from GET /pet/{petId}: Pet not found" in failed[0]["error"]["message"],
               "a 404 is an operational failure with the service's message", failed)

    # The service is gone: the run replays from its trace.
        replayed = run(REMITVM, "replay", done["run_id"], "--state-dir", "st", cwd=ws.path)
        expect(replayed.code == 0 and "replay ok" in replayed.err, "the run replays without the service", replayed)


def test_refusals_before_anything_runs():
    program = "program p\nuses pets.getPetById\n\nfn main() -> Str {\n  return pets.getPetById(1).name\n}\n"
    with Workspace({"p.rmt": program, "policy.toml": '[grant."pets.getPetById"]\n'}) as ws, Petstore() as pets:
        imported(ws)
        cases = [
            (["--adapter", "openapi.pets:petstore.yaml auth.api_key=PET_KEY", "--base-url", pets.base], {"PET_KEY": None},
             "the environment variable PET_KEY (auth.api_key) is not set"),
            (["--adapter", "openapi.pets:petstore.yaml"], {}, "names no absolute server URL (its first is '/api/v3'); "
                                                              "give the service's base URL with --base-url URL"),
            (["--adapter", "openapi.pets:petstore.yaml", "--base-url", "ftp://example.org"], {},
             "the base URL 'ftp://example.org' is not an http:// or https:// URL"),
            (["--adapter", "openapi.pets:petstore.yaml auth.nope=PET_KEY", "--base-url", pets.base], ENV,
             "has no security scheme 'nope' (it has 'api_key', 'petstore_auth')"),
            (["--adapter", "openapi.pets:nothing.yaml", "--base-url", pets.base], {}, "no such file"),
            (["--adapter", "openapi.pets:p.rmt", "--base-url", pets.base], {}, "p.rmt is not an OpenAPI document"),
            (["--adapter", "openapi.pets:petstore.yaml colour=blue", "--base-url", pets.base], {},
             "only base_url=URL and auth.SCHEME=NAME may follow"),
            (["--base-url", pets.base], {}, "--base-url is for an --adapter openapi:"),
        ]
        for flags, env, message in cases:
            result = run(REMITVM, "run", "p.rmt", *flags, "--state-dir", "st", cwd=ws.path, env=env)
            expect(result.code == 2 and message in result.err, f"refused: {message}", result)
        expect(pets.requests() == [], "the service heard nothing")

        # Without credentials the service refuses, and the message says which scheme to configure.
        result, out = run_json("run", "p.rmt", "--adapter", "openapi.pets:petstore.yaml", "--base-url", pets.base,
                               "--state-dir", "st", cwd=ws.path)
        expect(result.code == 1 and out["status"] == "failed", "the call fails", result)
        expect("HTTP 401 from GET /pet/{petId}: an api_key or a bearer token is needed (the operation wants "
               "credentials for 'api_key'; configure them with auth.api_key=ENV_VAR on the adapter)"
               in out["error"]["message"], "naming the scheme", out)


def test_import_refuses_what_is_not_an_openapi_3_document():
    with Workspace({"swagger.yaml": "swagger: '2.0'\npaths: {}\n", "broken.yaml": "openapi: 3.0.0\npaths: [1, 2\n",
                    "empty.json": '{"openapi": "3.0.0", "paths": {}}'}) as ws:
        for name, code, message in [
            ("swagger.yaml", 1, "swagger.yaml is a Swagger 2.0 document; only OpenAPI 3 is read"),
            ("broken.yaml", 1, "invalid YAML in broken.yaml at line"),
            ("empty.json", 1, "empty.json describes no operation that can be imported"),
            ("missing.yaml", 1, "no such file"),
        ]:
            result = run(REMITC, "import", "openapi", name, cwd=ws.path)
            expect(result.code == code and message in result.err and result.out == "", f"{name}: {message}", result)
        # An operation no call could be sent to is left out, said at the top and in the summary.
        ws.write("upload.yaml", UPLOAD)
        upload = run(REMITC, "import", "openapi", "upload.yaml", cwd=ws.path)
        expect(upload.code == 0 and "capability files.getFile(id: Str) -> Str\n  idempotent\n" in upload.out,
               "the readable operation is imported", upload)
        expect("# NOT IMPORTED: 'upload': its request body is multipart/form-data, not JSON\n" in upload.out and
               "not imported: 'upload': its request body is multipart/form-data, not JSON" in upload.err,
               "the upload is not", upload)
        expect('--adapter "openapi.files:upload.yaml auth.key=VARIABLE" --base-url https://files.example.com/v1\n'
               in upload.out, "the header gives the flag, with the document's server URL", upload)
        ws.write("files.rmti", upload.out)
        fmt = run(REMITC, "fmt", "--check", "files.rmti", cwd=ws.path)
        expect(fmt.code == 0, "that draft is formatted too", fmt)
        shutil.copy(DOCS / "petstore.yaml", ws.path / "petstore.yaml")
        bad_ns = run(REMITC, "import", "openapi", "petstore.yaml", "--as", "fn", cwd=ws.path)
        expect(bad_ns.code == 2 and "--as 'fn' is not a namespace" in bad_ns.err, "a keyword is no namespace", bad_ns)
        default_ns = run(REMITC, "import", "openapi", "petstore.yaml", cwd=ws.path)
        expect("capability swagger_petstore_openapi_3_0.getPetById(" in default_ns.out,
               "the namespace defaults to one made from the title", default_ns)


if __name__ == "__main__":
    main(globals())
