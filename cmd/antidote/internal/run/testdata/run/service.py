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

POST /batch takes many records in the JSON of the batching HTTP sink and
answers {"results": [...]}, one per record, with the same kinds (a
retry-after record asks for 1000 ms; a permanent or verdict-permanent one
is refused as permanent). A record of kind "batch-breaker" makes the service
refuse with 400 any request that holds it beside others; alone, it is
refused as permanent.
GET /stats returns what it saw. It prints its port on the first line.
"""

import base64
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
batches = []    # the record count of each /batch request


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
                               "mismatch": mismatch, "places": places,
                               "batches": batches}).encode()
        self.reply(200, [("Content-Type", "application/json")], body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        if self.path == "/batch":
            return self.batch(json.loads(self.rfile.read(n)))
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


    def batch(self, req):
        records = req["records"]
        with lock:
            batches.append(len(records))
            kinds = [r["value"]["kind"] for r in records]
            if "batch-breaker" in kinds and len(records) > 1:
                return self.reply(400, body=b"a record of this batch cannot be read")
            results = []
            for r in records:
                v = r["value"]
                rid = str(v["id"])
                key = base64.b64decode(r["key_base64"]) if r["key_base64"] is not None else None
                hdrs = [(h["name"], base64.b64decode(h["value_base64"]).hex()) for h in r["headers"]]
                tries.setdefault(rid, []).append(r["attempt"])
                places[rid] = "%s/%s/%s" % (r["topic"], r["partition"], r["offset"])
                n_tries = len(tries[rid])
                if key is None or key.hex() != v["key_hex"] or ("trace", v["header_hex"]) not in hdrs:
                    mismatch.append(rid)
                    rejected[rid] = "mismatch"
                    results.append({"outcome": "permanent", "error": "key or headers do not match the value"})
                    continue
                kind = v["kind"]
                if kind == "transient" and n_tries <= 2:
                    results.append({"outcome": "transient", "error": "busy"})
                elif kind == "retry-after" and n_tries == 1:
                    results.append({"outcome": "transient", "error": "slow down", "retry_after_ms": 1000})
                elif kind in ("permanent", "verdict-permanent", "batch-breaker"):
                    rejected[rid] = kind
                    results.append({"outcome": "permanent", "error": "amount must be positive"})
                else:
                    accepted[rid] = accepted.get(rid, 0) + 1
                    results.append({"outcome": "processed"})
        body = json.dumps({"results": results}).encode()
        self.reply(200, [("Content-Type", "application/json")], body)


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
