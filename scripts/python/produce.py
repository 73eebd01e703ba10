#!/usr/bin/env python3
"""A foreign producer for the schema-registry integration tests.

Confluent's Python client (confluent-kafka) and its schema-registry
serializers write records the way a Python service would. The Go tests
drive it through internal/srtest: one JSON command per line on stdin, one
JSON answer per line on stdout, so that one process (and its serializers'
caches of registered schema ids) lives across a registry outage.

    produce.py --brokers HOST:PORT --registry URL

Command (one line):
    {"format": "avro" | "json" | "protobuf",
     "schema": "<Avro or JSON Schema text>",        (avro, json)
     "proto": "<module>:<Message>",                  (protobuf: a generated module on --proto-path)
     "topic": "t", "partition": 0,
     "records": [{...}, ...],                        (dicts; protobuf: the message's fields)
     "register_only": false}                         (true: serialize, produce nothing)

Answer: {"ids": [schema id of each record]} or {"error": "..."}.
"""

import argparse
import importlib
import json
import sys

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.serialization import MessageField, SerializationContext


def serializer_for(cmd, registry, cache):
    fmt = cmd["format"]
    key = (fmt, cmd.get("schema") or cmd.get("proto"))
    if key in cache:
        return cache[key]
    if fmt == "avro":
        from confluent_kafka.schema_registry.avro import AvroSerializer

        s = AvroSerializer(registry, cmd["schema"])
    elif fmt == "json":
        from confluent_kafka.schema_registry.json_schema import JSONSerializer

        s = JSONSerializer(cmd["schema"], registry)
    elif fmt == "protobuf":
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

        module, _, name = cmd["proto"].partition(":")
        msg_type = getattr(importlib.import_module(module), name)
        s = ProtobufSerializer(msg_type, registry, {"use.deprecated.format": False})
    else:
        raise ValueError("unknown format %r" % fmt)
    cache[key] = (s, msg_type if fmt == "protobuf" else None)
    return cache[key]


def run(cmd, producer, registry, cache):
    ser, msg_type = serializer_for(cmd, registry, cache)
    ctx = SerializationContext(cmd["topic"], MessageField.VALUE)
    ids, errors = [], []

    def delivered(err, _msg):
        if err is not None:
            errors.append(str(err))

    for rec in cmd["records"]:
        if cmd["format"] == "protobuf":
            from google.protobuf import json_format

            rec = json_format.ParseDict(rec, msg_type())
        data = ser(rec, ctx)
        ids.append(int.from_bytes(data[1:5], "big"))
        if not cmd.get("register_only"):
            producer.produce(cmd["topic"], value=data, partition=cmd.get("partition", 0), on_delivery=delivered)
    if producer.flush(60) != 0:
        raise RuntimeError("records not delivered within 60s")
    if errors:
        raise RuntimeError("delivery failed: " + errors[0])
    return {"ids": ids}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--registry", required=True)
    ap.add_argument("--proto-path", default="", help="folder of generated protobuf modules")
    args = ap.parse_args()
    if args.proto_path:
        sys.path.insert(0, args.proto_path)
    registry = SchemaRegistryClient({"url": args.registry})
    producer = Producer({"bootstrap.servers": args.brokers, "linger.ms": 0, "acks": "all"})
    cache = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            out = run(json.loads(line), producer, registry, cache)
        except Exception as e:  # the test reads the error; the process goes on
            out = {"error": "%s: %s" % (type(e).__name__, e)}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
