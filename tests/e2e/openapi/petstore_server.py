#!/usr/bin/env python3
"""A small local Swagger Petstore: a few operations of tests/e2e/openapi/petstore.yaml over real
HTTP/1.1, for the tests of `remitc import openapi` and the `openapi` adapter (tests/e2e/test_openapi.py).

Standard library only. It listens on 127.0.0.1 on a free port and prints "PORT PID" on its first
stdout line (tests/e2e/adapters/fake_http.py's serve); it stops on POST /_quit, when its parent
process goes away, or after 300 s.

    petstore_server.py API_KEY TOKEN

Operations (under /api/v3, as the document's server says), answering as the document says:
  GET    /pet/{petId}          getPetById        api_key header = API_KEY, or Bearer TOKEN
  POST   /pet                  addPet            Bearer TOKEN; a JSON Pet with name and photoUrls
  PUT    /pet                  updatePet         Bearer TOKEN
  GET    /pet/findByStatus     findPetsByStatus  Bearer TOKEN; ?status= required
  GET    /pet/findByTags       findPetsByTags    Bearer TOKEN; ?tags=a&tags=b
  DELETE /pet/{petId}          deletePet         Bearer TOKEN; no content
  GET    /store/inventory      getInventory      api_key header = API_KEY; a map
  GET    /user/login           loginUser         a JSON string
  GET    /user/logout          logoutUser        no content
A refusal is 401 {"code": "unauthorized", "message": …}; an unknown pet 404; a bad body 422.

GET /_requests answers (and forgets) the requests served so far, each
{method, path, query, headers: {lower-case name: value}, body}.
"""
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "adapters"))
from fake_http import serve  # noqa: E402  (the tests' local-server plumbing: free port, parent watch)

API_KEY, TOKEN = sys.argv[1], sys.argv[2]
lock = threading.Lock()
recorded = []
pets = {
    1: {"id": 1, "name": "Rex", "category": {"id": 1, "name": "Dogs"}, "photoUrls": ["https://example.org/rex.png"],
        "tags": [{"id": 1, "name": "good"}], "status": "available"},
    2: {"id": 2, "name": "Tom", "category": {"id": 2, "name": "Cats"}, "photoUrls": [], "tags": [],
        "status": "sold"},
}
next_id = [100]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, value=None, content_type="application/json"):
        data = b"" if value is None else (json.dumps(value).encode() if content_type == "application/json"
                                          else value.encode())
        self.send_response(status)
        if value is not None:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def error(self, status, code, message):
        self.send(status, {"code": code, "message": message})

    def handle_any(self):
        url = urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8", "replace")
        if url.path == "/_requests":
            with lock:
                out = list(recorded)
                recorded.clear()
            return self.send(200, out)
        if url.path == "/_quit":
            self.send(200, {})
            threading.Thread(target=self.server.shutdown, daemon=True).start()
            return
        query = parse_qs(url.query)
        with lock:
            recorded.append({"method": self.command, "path": url.path, "query": query,
                             "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
        if not url.path.startswith("/api/v3/"):
            return self.error(404, "not_found", "no such path")
        route = url.path[len("/api/v3"):]
        bearer = self.headers.get("Authorization") == f"Bearer {TOKEN}"
        keyed = self.headers.get("api_key") == API_KEY

        def pet_id():
            try:
                return int(route.rsplit("/", 1)[1])
            except ValueError:
                return None

        if route.startswith("/pet/") and route.count("/") == 2 and route not in ("/pet/findByStatus",
                                                                                  "/pet/findByTags"):
            if self.command == "GET":
                if not (keyed or bearer):
                    return self.error(401, "unauthorized", "an api_key or a bearer token is needed")
                pid = pet_id()
                if pid is None:
                    return self.error(400, "bad_id", "Invalid ID supplied")
                with lock:
                    pet = pets.get(pid)
                return self.send(200, pet) if pet else self.error(404, "not_found", "Pet not found")
            if self.command == "DELETE":
                if not bearer:
                    return self.error(401, "unauthorized", "a bearer token is needed")
                with lock:
                    pets.pop(pet_id(), None)
                return self.send(200)
        if route == "/pet" and self.command in ("POST", "PUT"):
            if not bearer:
                return self.error(401, "unauthorized", "a bearer token is needed")
            if self.headers.get("Content-Type") != "application/json":
                return self.error(415, "media_type", "send JSON")
            try:
                pet = json.loads(body)
            except ValueError:
                return self.error(400, "bad_json", "Invalid input")
            if not isinstance(pet, dict) or not isinstance(pet.get("name"), str) or \
                    not isinstance(pet.get("photoUrls"), list):
                return self.error(422, "validation", "a pet needs a name and photoUrls")
            with lock:
                if self.command == "POST":
                    pet = {**pet, "id": next_id[0], "status": pet.get("status", "available")}
                    next_id[0] += 1
                elif pet.get("id") not in pets:
                    return self.error(404, "not_found", "Pet not found")
                pets[pet["id"]] = pet
            return self.send(200, pet)
        if route == "/pet/findByStatus" and self.command == "GET":
            if not bearer:
                return self.error(401, "unauthorized", "a bearer token is needed")
            if "status" not in query:
                return self.error(400, "bad_status", "Invalid status value")
            with lock:
                found = [p for p in pets.values() if p.get("status") in query["status"]]
            return self.send(200, found)
        if route == "/pet/findByTags" and self.command == "GET":
            if not bearer:
                return self.error(401, "unauthorized", "a bearer token is needed")
            wanted = set(query.get("tags", []))
            with lock:
                found = [p for p in pets.values() if wanted & {t.get("name") for t in p.get("tags", [])}]
            return self.send(200, found)
        if route == "/store/inventory" and self.command == "GET":
            if not keyed:
                return self.error(401, "unauthorized", "an api_key is needed")
            counts = {}
            with lock:
                for p in pets.values():
                    counts[p.get("status", "unknown")] = counts.get(p.get("status", "unknown"), 0) + 1
            return self.send(200, counts)
        if route == "/user/login" and self.command == "GET":
            return self.send(200, f"logged in user session: {query.get('username', ['?'])[0]}")
        if route == "/user/logout" and self.command == "GET":
            return self.send(200)
        return self.error(404, "not_found", f"no operation {self.command} {route}")

    do_GET = do_POST = do_PUT = do_DELETE = handle_any


if __name__ == "__main__":
    serve(Handler)
