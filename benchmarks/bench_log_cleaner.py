"""Benchmark: one LogCleaner pass over a SEGMENTED topic, beside the sequential I/O floor.

Writes N records of about 100 bytes (key + value) over K keys into a fresh topic, rolls, and
times ``LogCleaner.clean_now`` (map build + rewrite + swap). The floor is a plain
sequential write and read of the same number of bytes in the same run: the cleaner cannot
beat reading its input once and writing its output once.

    .venv/bin/python benchmarks/bench_log_cleaner.py --records 1000000 --keys 100000 --runs 3
    .venv/bin/python benchmarks/bench_log_cleaner.py --threads 1,2,4,8   # a pass's threads
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from compactlog.bench.floors import io_floor
from compactlog.compactor.log_cleaner import LogCleaner
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import SegmentedLogManager
from compactlog.storage.types import Record


def fill(manager: SegmentedLogManager, topic: str, records: int, keys: int, size: int) -> None:
    batch: list[Record] = []
    for i in range(records):
        key = b"key-%08d" % (i % keys)
        batch.append(Record(key, b"v" * (size - len(key))))
        if len(batch) == 1000:
            manager.append(topic, batch)
            batch = []
    if batch:
        manager.append(topic, batch)
    manager.get_log(topic).roll()


def one_run(args: argparse.Namespace, base: Path, threads: int) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(dir=base))
    settings = ServerSettings(
        topic_defaults={},
        log_cleaner_threads=1,
        log_cleaner_dedupe_buffer_size=args.buffer,
        compaction_worker_threads=threads,
    )
    manager = SegmentedLogManager(root, settings, start_threads=False)
    cleaner = LogCleaner(manager, settings)
    manager.create_topic(
        "bench",
        {
            "cleanup.policy": "compact",
            "segment.bytes": str(args.segment_bytes),
            "retention.ms": "-1",
        },
    )
    t0 = time.perf_counter()
    fill(manager, "bench", args.records, args.keys, args.record_size)
    fill_s = time.perf_counter() - t0
    log_bytes = manager.stats("bench").bytes
    t0 = time.perf_counter()
    result = cleaner.clean_now("bench")
    clean_s = time.perf_counter() - t0
    assert result.error is None, result.error
    assert result.kept == min(args.keys, args.records), result
    write_s, read_s = io_floor(root, log_bytes)
    manager.close()
    shutil.rmtree(root)
    return {
        "append_rps": args.records / fill_s,
        "clean_rps": args.records / clean_s,
        "clean_mbps": log_bytes / 1e6 / clean_s,
        "clean_s": clean_s,
        "write_mbps": log_bytes / 1e6 / write_s,
        "read_mbps": log_bytes / 1e6 / read_s,
        "log_mb": log_bytes / 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--record-size", type=int, default=100, help="key + value bytes")
    parser.add_argument("--segment-bytes", type=int, default=64 * 1024 * 1024)
    parser.add_argument("--buffer", type=int, default=128 * 1024 * 1024, help="dedupe buffer bytes")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--threads",
        default="1",
        help="comma-separated thread counts of a pass (compaction.worker.threads), each "
        "timed on its own copy of the data",
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to put the data (default: tmp)"
    )
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    base = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        runs = [[one_run(args, base, t) for t in threads] for _ in range(args.runs)]
    finally:
        shutil.rmtree(base, ignore_errors=True)

    def med(key: str, i: int | None = None) -> float:
        return statistics.median(
            r[j][key] for r in runs for j in range(len(threads)) if i in (None, j)
        )

    print(
        f"LogCleaner pass: {args.records:,} records of {args.record_size} B, {args.keys:,} keys, "
        f"{med('log_mb'):.1f} MB of segments, median of {args.runs} runs"
    )
    print(f"{'measure':<38}{'records/s':>14}{'MB/s':>10}{'/ read floor':>14}")
    for i, t in enumerate(threads):
        label = f"cleaner pass, {t} thread{'s' if t > 1 else ''} (map + rewrite)"
        mbps = med("clean_mbps", i)
        print(f"{label:<38}{med('clean_rps', i):>14,.0f}{mbps:>10.1f}"
              f"{mbps / med('read_mbps'):>14.3f}")  # fmt: skip
    print(f"{'append (1000-record batches)':<38}{med('append_rps'):>14,.0f}")
    print(f"{'floor: sequential write + fsync':<38}{'':>14}{med('write_mbps'):>10.1f}")
    print(f"{'floor: sequential read':<38}{'':>14}{med('read_mbps'):>10.1f}")


if __name__ == "__main__":
    main()
