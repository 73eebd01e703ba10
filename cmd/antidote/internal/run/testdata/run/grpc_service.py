"""A gRPC record service for the antidote run tests: it implements
antidote.sink.v1.Sink from the published proto (grpc/antidote/sink/v1/sink_pb2.py,
generated from proto/antidote/sink/v1/sink.proto) with grpcio.

Each record's value is the JSON {"id": N, "kind": K, "key_hex": ...,
"header_hex": ...}. By kind, Handle answers (and HandleBatch gives the same
code in the record's Result):

  ok                 OK
  duplicate          ALREADY_EXISTS (processed: a duplicate)
  transient          UNAVAILABLE to the first two tries, then OK
  retry-after        RESOURCE_EXHAUSTED with a google.rpc.RetryInfo of 1s
                     to the first try (retry_after_ms 1000 in a batch), then OK
  permanent          INVALID_ARGUMENT "amount must be positive"
  batch-breaker      HandleBatch with other records: the whole call
                     INVALID_ARGUMENT; alone, or in Handle, as permanent

A record whose key or headers do not decode to the bytes its value names is
refused as permanent and counted as a mismatch; a call without the metadata
"authorization: Bearer test-token" is UNAUTHENTICATED. It prints "GRPC_PORT
HTTP_PORT" on its first line; GET /stats on the HTTP port returns what it saw.
"""

import json
import os
import sys
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "grpc"))
from antidote.sink.v1 import sink_pb2  # noqa: E402

lock = threading.Lock()
tries = {}      # id -> [attempt of each try]
accepted = {}   # id -> times settled as processed
rejected = {}   # id -> the code of the refusal
mismatch = []   # ids whose key or headers did not match
batches = []    # the record count of each HandleBatch call
unauthenticated = [0]


def verdict(rec):
    """The code, message and retry delay (ms) for one record, counting the try."""
    v = json.loads(rec.value)
    rid = str(v["id"])
    key_ok = rec.HasField("key") and rec.key.hex() == v["key_hex"]
    hdrs = [(h.name, h.value.hex()) for h in rec.headers if h.HasField("value")]
    tries.setdefault(rid, []).append(rec.attempt)
    n = len(tries[rid])
    if not key_ok or (b"trace", v["header_hex"]) not in hdrs or rec.content_type != "application/json":
        mismatch.append(rid)
        rejected[rid] = "mismatch"
        return code_pb2.INVALID_ARGUMENT, "key or headers do not match the value", 0
    kind = v["kind"]
    if kind == "transient" and n <= 2:
        return code_pb2.UNAVAILABLE, "busy", 0
    if kind == "retry-after" and n == 1:
        return code_pb2.RESOURCE_EXHAUSTED, "slow down", 1000
    if kind in ("permanent", "batch-breaker"):
        rejected[rid] = kind
        return code_pb2.INVALID_ARGUMENT, "amount must be positive", 0
    accepted[rid] = accepted.get(rid, 0) + 1
    if kind == "duplicate":
        return code_pb2.ALREADY_EXISTS, "seen before", 0
    return code_pb2.OK, "", 0


def authorized(context):
    md = dict(context.invocation_metadata())
    if md.get("authorization") != "Bearer test-token":
        with lock:
            unauthenticated[0] += 1
        context.abort(grpc.StatusCode.UNAUTHENTICATED, "no token")


def abort(context, code, message, delay_ms):
    details = []
    if delay_ms:
        info = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=delay_ms // 1000))
        detail = any_pb2.Any()
        detail.Pack(info)
        details.append(detail)
    context.abort_with_status(rpc_status.to_status(status_pb2.Status(code=code, message=message, details=details)))


def handle(request, context):
    authorized(context)
    with lock:
        code, message, delay = verdict(request.record)
    if code != code_pb2.OK:
        abort(context, code, message, delay)
    return sink_pb2.HandleResponse()


def handle_batch(request, context):
    authorized(context)
    with lock:
        batches.append(len(request.records))
        kinds = [json.loads(r.value)["kind"] for r in request.records]
        if "batch-breaker" in kinds and len(request.records) > 1:
            abort(context, code_pb2.INVALID_ARGUMENT, "a record of this batch cannot be read", 0)
        results = []
        for r in request.records:
            code, message, delay = verdict(r)
            results.append(sink_pb2.Result(code=code, message=message, retry_after_ms=delay))
    return sink_pb2.HandleBatchResponse(results=results)


class Stats(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        with lock:
            body = json.dumps({"tries": tries, "accepted": accepted, "rejected": rejected, "mismatch": mismatch,
                               "batches": batches, "unauthenticated": unauthenticated[0]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    handlers = {
        "Handle": grpc.unary_unary_rpc_method_handler(
            handle, request_deserializer=sink_pb2.HandleRequest.FromString,
            response_serializer=sink_pb2.HandleResponse.SerializeToString),
        "HandleBatch": grpc.unary_unary_rpc_method_handler(
            handle_batch, request_deserializer=sink_pb2.HandleBatchRequest.FromString,
            response_serializer=sink_pb2.HandleBatchResponse.SerializeToString),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("antidote.sink.v1.Sink", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    stats = ThreadingHTTPServer(("127.0.0.1", 0), Stats)
    stats.daemon_threads = True
    threading.Thread(target=stats.serve_forever, daemon=True).start()
    print(port, stats.server_address[1], flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
