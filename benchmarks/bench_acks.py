"""Benchmark: single (non-cumulative) acks on a durable subscription, both topic kinds,
beside the floor of one durable write per ack.

A subscription is given N messages, then acknowledges them one at a time in a pattern:

- ``holes``: every id but the first, then the first. The individually acknowledged set
  grows to N - 1 before the mark-delete position can move: the case that was quadratic
  when the whole set was rewritten on every ack (6,000 acks took 10-40 s in storage and
  21-30 s through the server before ack ranges, depending on the machine's load).
- ``in-order``: each ack moves the mark-delete position by one.
- ``odd-even``: the odd ids (N / 2 separate ranges), then the even ones (each closes a
  hole and the mark-delete position sweeps on).
- ``random``: a seeded shuffle.

Figures: total seconds, microseconds per ack over the first and the last tenth of the
acks (equal when an ack's cost does not grow with the set), and the bytes the cursor
occupies on disk at the end. The floor is one durable write of the same kind per ack,
measured in the same run: a synced RocksDB put (LEDGER, ``fsync`` durability) or an
fsynced append to a file (SEGMENTED).

    .venv/bin/python benchmarks/bench_acks.py                      # 6,000 and 60,000
    .venv/bin/python benchmarks/bench_acks.py --acks 6000 --patterns holes --kinds ledger
    .venv/bin/python benchmarks/bench_acks.py --durability wal --no-fsync   # CPU cost only
    .venv/bin/python benchmarks/bench_acks.py --through-server --acks 6000 --patterns holes
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import grpc

from compactlog.bench.bench_server import start_server
from compactlog.storage import keys
from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.rocks import Batch, RocksDB
from compactlog.storage.segmented import SegmentedLogManager
from compactlog.storage.segmented.topic_log import SegmentedTopicLog
from compactlog.storage.types import MessageId, Record
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

PATTERNS = ("holes", "in-order", "odd-even", "random")
KINDS = ("ledger", "segmented")


def order(pattern: str, n: int) -> list[int]:
    if pattern == "holes":
        return [*range(1, n), 0]
    if pattern == "in-order":
        return list(range(n))
    if pattern == "odd-even":
        return [*range(1, n, 2), *range(0, n, 2)]
    shuffled = list(range(n))
    random.Random(7).shuffle(shuffled)
    return shuffled


def _records(n: int) -> list[list[Record]]:
    return [
        [Record(b"k%d" % j, b"v") for j in range(i, min(n, i + 1000))] for i in range(0, n, 1000)
    ]


def ledger_run(root: Path, n: int, pattern: str, durability: str) -> tuple[list[float], int]:
    settings = ServerSettings(publish_durability=durability)
    store = LedgerStore(root / "ledgers", settings)
    try:
        store.create_topic("t", {"ledger.max.entries": "1000000"})
        ids: list[MessageId] = []
        for batch in _records(n):
            ids += store.append("t", batch)
        cursor = store.open_cursor("t", "s")
        cursor.deliver(ids[-1])
        times = []
        for i in order(pattern, n):
            t0 = time.perf_counter()
            store.acknowledge("t", "s", ids[i], cumulative=False)
            times.append(time.perf_counter() - t0)
        assert cursor.mark_delete == ids[-1] and not cursor.acked
        size = sum(len(k) + len(v) for k, v in store.db.scan(b"C", b"D"))
        size += sum(len(k) + len(v) for k, v in store.db.scan(*keys.ack_ranges_all()))
        return times, size
    finally:
        store.close()


def segmented_run(root: Path, n: int, pattern: str, _durability: str) -> tuple[list[float], int]:
    manager = SegmentedLogManager(root / "segments", ServerSettings(), start_threads=False)
    try:
        manager.create_topic("t", {"retention.ms": "-1"})
        for batch in _records(n):
            manager.append("t", batch)
        log = SegmentedTopicLog(manager, "t")
        cursor = log.open_cursor("s", latest=False)
        log.delivered(cursor, MessageId(0, n - 1))
        times = []
        for i in order(pattern, n):
            t0 = time.perf_counter()
            log.acknowledge("s", MessageId(0, i), cumulative=False)
            times.append(time.perf_counter() - t0)
        assert cursor.mark_delete == MessageId(0, n - 1) and not cursor.acked
        folder = root / "segments" / "t"
        size = sum((folder / f).stat().st_size for f in ("cursors.json", "cursors.journal"))
        return times, size
    finally:
        manager.close()


def server_run(root: Path, n: int, pattern: str, durability: str, kind: str) -> list[float]:
    """The same through a real server process: Acknowledge calls over gRPC, one at a time."""
    proc, address = start_server(root / "data", durability)
    try:
        with grpc.insecure_channel(address) as channel:
            admin, log = pb_grpc.TopicAdminStub(channel), pb_grpc.LogStub(channel)
            pb_kind = pb.LEDGER if kind == "ledger" else pb.SEGMENTED
            admin.CreateTopic(pb.CreateTopicRequest(name="t", kind=pb_kind))
            for batch in _records(n):
                records = [pb.Record(key=r.key, value=r.value) for r in batch]
                log.Publish(pb.PublishRequest(topic="t", records=records))
            got = log.Consume(pb.ConsumeRequest(topic="t", subscription="s", max_messages=n))
            ids = [m.id for m in got.messages]
            assert len(ids) == n
            times = []
            for i in order(pattern, n):
                req = pb.AcknowledgeRequest(topic="t", subscription="s", id=ids[i])
                t0 = time.perf_counter()
                log.Acknowledge(req)
                times.append(time.perf_counter() - t0)
            return times
    finally:
        proc.terminate()
        proc.wait()


def floor(root: Path, kind: str, n: int) -> float:
    """Seconds per durable write: what one ack cannot go below."""
    count = min(n, 2000)
    if kind == "ledger":
        db = RocksDB(root / "floor")
        t0 = time.perf_counter()
        for i in range(count):
            batch = Batch()
            batch.put(b"A%016d" % i, b"0" * 16)
            db.write(batch, sync=True)
        spent = time.perf_counter() - t0
        db.close()
        return spent / count
    path = root / "floor.journal"
    t0 = time.perf_counter()
    for i in range(count):
        with open(path, "ab") as fh:
            fh.write(b'%08x {"s":"s","r":[[0,%d,0,%d]]}\n' % (i, i, i))
            fh.flush()
            os.fsync(fh.fileno())
    return (time.perf_counter() - t0) / count


RUNS: dict[str, Callable[[Path, int, str, str], tuple[list[float], int]]] = {
    "ledger": ledger_run,
    "segmented": segmented_run,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--acks", type=int, nargs="+", default=[6000, 60000])
    parser.add_argument("--patterns", nargs="+", choices=PATTERNS, default=list(PATTERNS))
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument(
        "--durability",
        choices=("fsync", "wal"),
        default="fsync",
        help="LEDGER publish.durability (acks follow it); SEGMENTED acks always fsync",
    )
    parser.add_argument(
        "--no-fsync",
        action="store_true",
        help="make os.fsync a no-op (with --durability wal: the CPU cost of an ack alone)",
    )
    parser.add_argument(
        "--through-server",
        action="store_true",
        help="ack over gRPC against a `compactlog serve` process (default: storage directly)",
    )
    parser.add_argument("--dir", type=Path, default=None, help="where to put the data")
    args = parser.parse_args()
    if args.no_fsync:
        os.fsync = lambda fd: None
    base = Path(tempfile.mkdtemp(dir=args.dir))
    header = (
        f"{'kind':<10}{'pattern':<10}{'acks':>8}{'total s':>10}{'us/ack':>9}"
        f"{'first 10%':>11}{'last 10%':>10}{'floor us':>10}{'cursor B':>10}"
    )
    fsync = "no fsync" if args.no_fsync else "fsync"
    where = "through a server process" if args.through_server else "in storage"
    print(f"single acks {where}, LEDGER durability {args.durability}, SEGMENTED {fsync}")
    print(header)
    try:
        for kind in args.kinds:
            floor_s = floor(Path(tempfile.mkdtemp(dir=base)), kind, max(args.acks))
            if args.no_fsync or (kind == "ledger" and args.durability == "wal"):
                floor_s = 0.0
            for n in args.acks:
                for pattern in args.patterns:
                    root = Path(tempfile.mkdtemp(dir=base))
                    if args.through_server:
                        times, size = server_run(root, n, pattern, args.durability, kind), 0
                    else:
                        times, size = RUNS[kind](root, n, pattern, args.durability)
                    shutil.rmtree(root, ignore_errors=True)
                    tenth = max(1, n // 10)
                    first = sum(times[:tenth]) / tenth * 1e6
                    last = sum(times[-tenth:]) / tenth * 1e6
                    total = sum(times)
                    print(
                        f"{kind:<10}{pattern:<10}{n:>8,}{total:>10.2f}{total / n * 1e6:>9.0f}"
                        f"{first:>11.0f}{last:>10.0f}{floor_s * 1e6:>10.0f}{size:>10,}",
                        flush=True,
                    )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
