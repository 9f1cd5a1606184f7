"""The Spark engine beside the local engine, on a real server.

Part 1, for each size: the same topic loaded twice; the local engine (``Compact`` with
wait, in the server) and the Spark engine (``run_spark_compaction`` on ``--master``) each
compact one copy. Spark's start-up (session + data source registration) is timed apart
from the job.

Part 2: a second server whose phase-one budget is small
(``compaction.phase.one.memory.bytes``); for growing key spaces the local engine runs
until it fails with PhaseOneMemoryExceeded, and the Spark engine compacts that same topic
(its key table lives on the executors; the driver holds one bit per input entry).

    .venv/bin/python benchmarks/bench_spark.py --messages 1000000
    .venv/bin/python benchmarks/bench_spark.py --messages 1000000 5000000 --master local[2]
    .venv/bin/python benchmarks/bench_spark.py --messages 200000 --budget 1048576 \\
        --key-spaces 10000 50000 200000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import grpc

from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

BATCH = 5000


class Server:
    """``compactlog serve`` on a temporary data dir and a free port."""

    def __init__(self, data_dir: Path, config: str = "") -> None:
        cfg = data_dir.parent / f"{data_dir.name}.toml"
        cfg.write_text(config)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "compactlog", "serve", "--data-dir", str(data_dir),
             "--listen", "127.0.0.1:0", "--config", str(cfg)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("compactlog listening on "):
            raise SystemExit("the server did not start")
        self.address = line.split()[-1]
        self.channel = grpc.insecure_channel(self.address)
        self.admin = pb_grpc.TopicAdminStub(self.channel)
        self.log = pb_grpc.LogStub(self.channel)

    def load(self, topic: str, messages: int, keys: int, value_bytes: int) -> float:
        self.admin.CreateTopic(pb.CreateTopicRequest(name=topic))
        pad = b"x" * value_bytes
        started = time.perf_counter()

        def batches() -> Iterator[pb.PublishRequest]:
            for lo in range(0, messages, BATCH):
                hi = min(lo + BATCH, messages)
                yield pb.PublishRequest(
                    topic=topic,
                    records=[
                        pb.Record(key=b"key-%09d" % (i * 7919 % keys), value=pad)
                        for i in range(lo, hi)
                    ],
                )

        for _ in self.log.PublishStream(batches()):
            pass
        return time.perf_counter() - started

    def compact_local(self, topic: str) -> tuple[float, pb.CompactionStatus]:
        started = time.perf_counter()
        status = self.admin.Compact(pb.CompactRequest(topic=topic, wait=True), timeout=3600)
        return time.perf_counter() - started, status

    def close(self) -> None:
        self.channel.close()
        self.proc.terminate()
        self.proc.wait(60)


def spark_start(master: str) -> tuple[object, float]:
    from compactlog.compactor.spark import spark_session

    started = time.perf_counter()
    spark = spark_session(master)
    spark.sparkContext.setLogLevel("ERROR")  # type: ignore[attr-defined]
    spark.range(1).count()  # type: ignore[attr-defined]  # JVM and a Python-free job ready
    return spark, time.perf_counter() - started


def compact_spark(spark: object, server: Server, topic: str) -> tuple[float, object]:
    from compactlog.compactor.spark import run_spark_compaction

    started = time.perf_counter()
    result = run_spark_compaction(server.address, topic, spark=spark)
    return time.perf_counter() - started, result


def part_one(args: argparse.Namespace, work: Path, spark: object) -> None:
    server = Server(work / "sizes")
    try:
        print(f"\n{'messages':>10} {'keys':>9} {'load s':>8} {'local s':>8} {'spark s':>8} "
              f"{'kept':>9}  local/spark msg/s")  # fmt: skip
        for n in args.messages:
            keys = args.keys or max(1, n // 10)
            load = server.load(f"local-{n}", n, keys, args.value_bytes)
            server.load(f"spark-{n}", n, keys, args.value_bytes)
            local_s, status = server.compact_local(f"local-{n}")
            if status.state != pb.CompactionStatus.SUCCESS:
                print(f"{n:>10} local engine failed: {status.last_error}")
                continue
            spark_s, result = compact_spark(spark, server, f"spark-{n}")
            kept = result.run.kept  # type: ignore[attr-defined]
            assert kept == status.last_run.kept, "engines disagree"
            print(f"{n:>10} {keys:>9} {load:>8.1f} {local_s:>8.1f} {spark_s:>8.1f} {kept:>9}  "
                  f"{n / local_s:,.0f} / {n / spark_s:,.0f}")  # fmt: skip
    finally:
        server.close()


def part_two(args: argparse.Namespace, work: Path, spark: object) -> None:
    config = f'"compaction.phase.one.memory.bytes" = {args.budget}\n'
    server = Server(work / "budget", config)
    print(f"\nlocal engine with compaction.phase.one.memory.bytes={args.budget}")
    print(f"{'keys':>9} {'messages':>9} {'local':>40} {'spark':>16}")
    try:
        for keys in args.key_spaces:
            n = max(keys, args.budget_messages)
            topic = f"keys-{keys}"
            server.load(topic, n, keys, args.value_bytes)
            local_s, status = server.compact_local(topic)
            ok = status.state == pb.CompactionStatus.SUCCESS
            local = f"{local_s:.1f} s" if ok else "FAILED: phase-one budget exceeded"
            spark_col = "-"
            if not ok:
                spark_s, result = compact_spark(spark, server, topic)
                spark_col = f"{spark_s:.1f} s, kept {result.run.kept}"  # type: ignore[attr-defined]
            print(f"{keys:>9} {n:>9} {local:>40} {spark_col:>16}")
            if not ok:
                break
    finally:
        server.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--keys", type=int, default=0, help="key space (default messages/10)")
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--budget", type=int, default=4 * 1024 * 1024,
                        help="phase-one budget of the local engine in part 2 (bytes)")  # fmt: skip
    parser.add_argument("--key-spaces", type=int, nargs="+",
                        default=[10_000, 30_000, 100_000, 300_000])  # fmt: skip
    parser.add_argument("--budget-messages", type=int, default=300_000)
    parser.add_argument("--skip-sizes", action="store_true", help="only part 2")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
        spark, start_s = spark_start(args.master)
        print(f"Spark start-up ({args.master}): {start_s:.1f} s (not in the job times below)")
        if not args.skip_sizes:
            part_one(args, Path(tmp), spark)
        part_two(args, Path(tmp), spark)
        spark.stop()  # type: ignore[attr-defined]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
