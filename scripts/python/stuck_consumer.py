"""A consumer that is not Antidote's and gets stuck on a poison pill.

Used by the tests of `antidote group rescue`: confluent-kafka (librdkafka)
in a consumer group with auto-commit off. It commits each record it
processes; a record whose value does not decode as UTF-8 JSON fails, and
the consumer seeks back to it and tries again, forever, as many real
consumers do. It prints one JSON line per event on stdout:

  {"ev": "processed", "offset": N}
  {"ev": "stuck", "offset": N}      (once per record it is stuck on)

and leaves the group cleanly on SIGTERM or once it has processed the
record whose value is {"last": true}.

  stuck_consumer.py --brokers HOST:PORT --group G --topic T
"""

import argparse
import json
import signal
import sys

from confluent_kafka import Consumer, TopicPartition


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    args = ap.parse_args()

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))

    c = Consumer({
        "bootstrap.servers": args.brokers,
        "group.id": args.group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 10000,
    })
    c.subscribe([args.topic])
    stuck_on = None

    def say(ev, offset):
        print(json.dumps({"ev": ev, "offset": offset}), flush=True)

    try:
        while not stop:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                print(json.dumps({"ev": "error", "err": str(m.error())}), file=sys.stderr, flush=True)
                continue
            try:
                doc = json.loads(m.value().decode("utf-8"))
            except (UnicodeDecodeError, ValueError, AttributeError):
                if stuck_on != m.offset():
                    stuck_on = m.offset()
                    say("stuck", m.offset())
                # Try again, forever: the group never moves past it.
                c.seek(TopicPartition(m.topic(), m.partition(), m.offset()))
                continue
            c.commit(message=m, asynchronous=False)
            say("processed", m.offset())
            if isinstance(doc, dict) and doc.get("last"):
                break
    finally:
        c.close()


if __name__ == "__main__":
    main()
