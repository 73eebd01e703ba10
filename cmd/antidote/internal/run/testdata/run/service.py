"""A record service for the antidote run tests, standard library only.

POST /records takes one record: the JSON body {"id": N, "kind": K,
"key_hex": ..., "header_hex": ...}. By kind it answers:

  ok                 200
  transient          503 to the first two tries, then 200
  retry-after        429 with Retry-After: 1 to the first try, then 200
  permanent          422
  verdict-permanent  200 with Antidote-Outcome: permanent

It checks that the Antidote-Key and Antidote-Header headers decode to the
bytes the body names (400 otherwise) and records every try.
GET /stats returns what it saw. It prints its port on the first line.
"""

import json
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
tries = {}      # id -> [Antidote-Attempt of each try]
accepted = {}   # id -> times answered 2xx without a verdict
rejected = {}   # id -> the status or verdict of the final refusal
mismatch = []   # ids whose headers did not decode to the body's bytes
places = {}     # id -> "topic/partition/offset"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, headers=(), body=b""):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path != "/stats":
            return self.reply(404)
        with lock:
            body = json.dumps({"tries": tries, "accepted": accepted, "rejected": rejected,
                               "mismatch": mismatch, "places": places}).encode()
        self.reply(200, [("Content-Type", "application/json")], body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        rec = json.loads(self.rfile.read(n))
        rid = str(rec["id"])
        key = self.headers.get("Antidote-Key")
        key_ok = key is not None and urllib.parse.unquote_to_bytes(key).hex() == rec["key_hex"]
        hdrs = self.headers.get_all("Antidote-Header") or []
        want = "trace=" + rec["header_hex"]
        got = []
        for h in hdrs:
            name, _, value = h.partition("=")
            got.append(urllib.parse.unquote_to_bytes(name).decode() + "=" + urllib.parse.unquote_to_bytes(value).hex())
        with lock:
            attempt = int(self.headers.get("Antidote-Attempt", "0"))
            tries.setdefault(rid, []).append(attempt)
            places[rid] = "%s/%s/%s" % (self.headers.get("Antidote-Topic"), self.headers.get("Antidote-Partition"),
                                        self.headers.get("Antidote-Offset"))
            n_tries = len(tries[rid])
            if not key_ok or want not in got or self.headers.get("Content-Type") != "application/json":
                mismatch.append(rid)
                rejected[rid] = 400
                return self.reply(400, body=b"headers do not match the body")
            kind = rec["kind"]
            if kind == "transient" and n_tries <= 2:
                return self.reply(503, body=b"busy")
            if kind == "retry-after" and n_tries == 1:
                return self.reply(429, [("Retry-After", "1")])
            if kind == "permanent":
                rejected[rid] = 422
                return self.reply(422, body=b"amount must be positive")
            if kind == "verdict-permanent":
                rejected[rid] = "verdict"
                return self.reply(200, [("Antidote-Outcome", "permanent")], b"unknown customer")
            accepted[rid] = accepted.get(rid, 0) + 1
        self.reply(200)


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
