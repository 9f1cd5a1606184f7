"""What the ack timeout (``unacked_messages_timeout_ms``) costs a consumer, and what a slow
application gets back from it, through whichever client is on the path (run it with a
tree's ``PYTHONPATH`` to compare two trees; it uses the public client only):

- ``slow``: ``--slow`` messages in one receiver queue of 1,000, the application taking
  ``--work-ms`` on each and acknowledging it, with a 1 s ack timeout: how many messages it
  received more than once and the highest ``redelivery_count`` seen (a timeout counted
  from the dispatch sends back what still waits unread in the queue; one counted from the
  receive sends back nothing, each being acknowledged within ``--work-ms``);
- ``cpu``: ``receive`` and ``acknowledge`` of each of ``--records`` messages, without and
  with a 30 s ack timeout, in turn: the client process's CPU microseconds a message (its
  threads included) and the server's (``/proc``), figures that resist load.

    PYTHONPATH=TREE .venv/bin/python benchmarks/ack_timeout.py --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from compactlog.bench.bench_server import start_server
from compactlog.bench.procstats import cpu_seconds
from compactlog.client import Client, InitialPosition, Timeout

EARLIEST = InitialPosition.Earliest


def _load(client: Client, topic: str, count: int) -> None:
    client.create_topic(topic)
    producer = client.producer(topic)
    for at in range(0, count, 1000):
        chunk = range(at, min(count, at + 1000))
        producer.send_batch([(b"k%d" % i, b"v" * 100) for i in chunk])


def slow(client: Client, topic: str, count: int, work_ms: float) -> dict[str, int]:
    _load(client, topic, count)
    consumer = client.subscribe(
        topic, "slow", unacked_messages_timeout_ms=1000, initial_position=EARLIEST
    )
    seen: dict[str, int] = {}
    top = 0
    try:
        while True:
            try:
                msg = consumer.receive(3000)
            except Timeout:  # nothing more came back
                break
            key = str(msg.message_id())
            seen[key] = seen.get(key, 0) + 1
            top = max(top, msg.redelivery_count())
            time.sleep(work_ms / 1000)
            consumer.acknowledge(msg)
    finally:
        consumer.close()
    return {
        "messages": len(seen),
        "received_twice": sum(n > 1 for n in seen.values()),
        "max_count": top,
    }


def cpu_us(
    client: Client, topic: str, count: int, timeout_ms: int | None, sub: str, server: int
) -> tuple[float, float]:
    """The client's and the server's (process ``server``) CPU microseconds a message."""
    consumer = client.subscribe(
        topic, sub, unacked_messages_timeout_ms=timeout_ms, initial_position=EARLIEST
    )
    try:
        start, server_start = time.process_time(), cpu_seconds(server)
        for _ in range(count):
            consumer.acknowledge(consumer.receive(10_000))
        consumer.close()
        spent = time.process_time() - start, cpu_seconds(server) - server_start
        return spent[0] / count * 1e6, spent[1] / count * 1e6
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slow", type=int, default=1000)
    parser.add_argument("--work-ms", type=float, default=3.0)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        proc, address = start_server(Path(tmp) / "data", "fsync")
        try:
            with Client(address, timeout=30) as client:
                print(json.dumps({"slow": slow(client, "slow", args.slow, args.work_ms)}))
                _load(client, "cpu", args.records)
                runs: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
                for r in range(args.rounds):
                    for name, timeout in (("off", None), ("on", 30_000)):
                        sub = f"{name}{r}"
                        runs[name].append(
                            cpu_us(client, "cpu", args.records, timeout, sub, proc.pid)
                        )
                for name, got in runs.items():
                    client_us = [round(c, 2) for c, _ in got]
                    server_us = [round(s, 2) for _, s in got]
                    print(json.dumps({"timeout": name, "client_us": client_us,
                                      "server_us": server_us,
                                      "median_client": statistics.median(client_us),
                                      "median_server": statistics.median(server_us)}))  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
