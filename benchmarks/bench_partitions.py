"""Benchmark: PublishStream to a 4-partition topic beside the same stream to one topic.

One server (``fsync`` durability unless ``--durability wal``), both kinds. Each case sends
``--batches`` requests of ``--batch`` keyed records (``--value-bytes`` each) over one
PublishStream, all keys distinct, so the partitioned topic's requests span every
partition (routed by murmur2 on the server, LEDGER parts in one WriteBatch). Printed:
records/s in all and per partition (the partitioned topic's total over its partitions),
beside the one-topic figure: the cost of routing and of writing N parts a request. One
process owns every partition here; spreading partitions over processes is
``serve --shards``' job.

    compactlog bench partitions                       # 200 x 500 records, both kinds
    compactlog bench partitions --batches 50 --kinds ledger
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import grpc

from compactlog.bench.bench_server import start_server
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

KINDS = {"ledger": pb.LEDGER, "segmented": pb.SEGMENTED}


def requests(topic: str, batches: int, batch: int, value: bytes) -> Iterator[pb.PublishRequest]:
    for b in range(batches):
        records = [pb.Record(key=b"key-%d-%d" % (b, i), value=value) for i in range(batch)]
        yield pb.PublishRequest(topic=topic, records=records)


def publish_rate(channel: grpc.Channel, topic: str, args: argparse.Namespace) -> float:
    """Records a second of one PublishStream of the whole workload."""
    log = pb_grpc.LogStub(channel)
    value = b"v" * args.value_bytes
    started = time.perf_counter()
    replies = 0
    for _reply in log.PublishStream(requests(topic, args.batches, args.batch, value)):
        replies += 1
    elapsed = time.perf_counter() - started
    assert replies == args.batches
    return float(args.batches * args.batch) / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compactlog bench partitions", description=__doc__)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--kinds", nargs="+", choices=sorted(KINDS), default=sorted(KINDS))
    parser.add_argument("--durability", choices=("fsync", "wal"), default="fsync")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="compactlog-bench-partitions-"))
    proc: subprocess.Popen[str] | None = None
    try:
        proc, address = start_server(tmp / "data", args.durability)
        print(f"PublishStream, {args.batches} x {args.batch} records of {args.value_bytes} B")
        print(f"{'kind':<10} {'topic':<14} {'records/s':>11} {'per partition':>14}")
        with grpc.insecure_channel(address) as channel:
            admin = pb_grpc.TopicAdminStub(channel)
            for name in args.kinds:
                kind = KINDS[name]
                for parts in (0, args.partitions):
                    topic = f"bench-{name}-{parts}"
                    req = pb.CreateTopicRequest(name=topic, kind=kind, partitions=parts)
                    admin.CreateTopic(req)
                    rate = publish_rate(channel, topic, args)
                    label = f"{parts} partitions" if parts else "one topic"
                    each = rate / max(parts, 1)
                    print(f"{name:<10} {label:<14} {rate:>11,.0f} {each:>14,.0f}")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
