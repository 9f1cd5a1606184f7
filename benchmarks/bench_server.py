"""Server throughput and latency (issue 2) beside raw RocksDB, measured in the same run.

Through a real ``compactlog serve`` process on loopback, from one client:

- PublishStream with ``--batch`` records of ``--value-bytes`` per request (target
  >= 300,000 records/s for 1000 x 100 B), floor: a batched raw RocksDB write of the
  same records (one put each, no encoding, no RPC);
- Read of the whole topic (target >= 300,000 messages/s for 1M), floor: a raw RocksDB
  scan of the same entries;
- unary Publish of one record on an idle server, p50/p99 (target p50 <= 2 ms), floor: one synced
  RocksDB write (the default durability fsyncs before acknowledging).

Medians of ``--runs`` runs; each figure with its ratio to its floor.

    .venv/bin/python benchmarks/bench_server.py                     # 1M records, 5 runs
    .venv/bin/python benchmarks/bench_server.py --records 100000 --runs 1
"""

from __future__ import annotations

import argparse
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

from compactlog.storage.rocks import Batch, RocksDB
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

KEY = struct.Struct(">cQQ")


def start_server(data_dir: Path, durability: str) -> tuple[subprocess.Popen[str], str]:
    config = data_dir.parent / f"{data_dir.name}.toml"
    config.write_text(f'"publish.durability" = "{durability}"\n')
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "compactlog",
            "serve",
            "--data-dir",
            str(data_dir),
            "--listen",
            "127.0.0.1:0",
            "--config",
            str(config),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("compactlog listening on "):
            return proc, line.split()[-1]
    raise SystemExit("server did not start")


def rocksdb_floor(path: Path, records: int, batch: int, value_bytes: int) -> dict[str, float]:
    db = RocksDB(path)
    value = b"v" * value_bytes
    started = time.perf_counter()
    for first in range(0, records, batch):
        b = Batch()
        put = b.put_many
        for i in range(first, min(first + batch, records)):
            put(KEY.pack(b"E", 1, i), value)
        b.ops = 1
        db.write(b)
    db.sync_wal()
    write_s = time.perf_counter() - started
    started = time.perf_counter()
    n = sum(1 for _ in db.scan(KEY.pack(b"E", 1, 0), KEY.pack(b"E", 2, 0)))
    scan_s = time.perf_counter() - started
    assert n == records
    lat = []
    for _ in range(200):
        t = time.perf_counter()
        db.write(_single(value), sync=True)
        lat.append(time.perf_counter() - t)
    db.close()
    return {
        "write_rps": records / write_s,
        "scan_rps": records / scan_s,
        "sync_write_p50_ms": statistics.median(lat) * 1000,
    }


def _single(value: bytes) -> Batch:
    b = Batch()
    b.put(b"probe", value)
    return b


def server_run(
    address: str, records: int, batch: int, value_bytes: int, unary: int
) -> dict[str, float]:
    channel = grpc.insecure_channel(
        address, options=[("grpc.max_receive_message_length", 64 << 20)]
    )
    admin, log = pb_grpc.TopicAdminStub(channel), pb_grpc.LogStub(channel)
    value = b"v" * value_bytes
    # Unary latency first, on an idle store: after a million-record load RocksDB's own
    # flushes and compactions share the 2 cores and the disk, which is a different figure.
    admin.CreateTopic(pb.CreateTopicRequest(name="unary"))
    one = pb.PublishRequest(topic="unary", records=[pb.Record(key=b"k", value=value)])
    lat = []
    for _ in range(unary):
        t = time.perf_counter()
        log.Publish(one)
        lat.append(time.perf_counter() - t)
    lat.sort()
    admin.CreateTopic(pb.CreateTopicRequest(name="bench"))
    requests = [
        pb.PublishRequest(
            topic="bench",
            records=[
                pb.Record(key=b"key-%07d" % ((first + j) % 100_000), value=value)
                for j in range(min(batch, records - first))
            ],
        )
        for first in range(0, records, batch)
    ]
    started = time.perf_counter()
    acked = sum(len(r.ids) for r in log.PublishStream(iter(requests)))
    publish_s = time.perf_counter() - started
    assert acked == records
    started = time.perf_counter()
    read = sum(len(r.messages) for r in log.Read(pb.ReadRequest(topic="bench")))
    read_s = time.perf_counter() - started
    assert read == records
    channel.close()
    return {
        "publish_rps": records / publish_s,
        "read_rps": records / read_s,
        "unary_p50_ms": lat[len(lat) // 2] * 1000,
        "unary_p99_ms": lat[int(len(lat) * 0.99)] * 1000,
    }


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value > 10 else f"{value:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--unary", type=int, default=2000, help="unary Publish calls timed")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--durability", choices=["fsync", "wal"], default="fsync")
    args = parser.parse_args(argv)
    floors: list[dict[str, float]] = []
    figures: list[dict[str, float]] = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="compactlog-bench-") as tmp:
            floors.append(
                rocksdb_floor(Path(tmp) / "raw", args.records, args.batch, args.value_bytes)
            )
            proc, address = start_server(Path(tmp) / "data", args.durability)
            try:
                figures.append(
                    server_run(address, args.records, args.batch, args.value_bytes, args.unary)
                )
            finally:
                proc.terminate()
                proc.wait(60)
        print(f"run {run + 1}/{args.runs} done", file=sys.stderr)

    def med(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    def spread(rows: list[dict[str, float]], key: str) -> str:
        vals = [r[key] for r in rows]
        return (
            f"{min(vals):,.0f}-{max(vals):,.0f}"
            if vals[0] > 10
            else f"{min(vals):.2f}-{max(vals):.2f}"
        )

    rows = [
        (
            "PublishStream records/s",
            "publish_rps",
            ">= 300,000",
            "raw RocksDB batched write/s",
            "write_rps",
        ),
        ("Read messages/s", "read_rps", ">= 300,000", "raw RocksDB scan/s", "scan_rps"),
        (
            "unary Publish p50 ms",
            "unary_p50_ms",
            "<= 2",
            "synced RocksDB write p50 ms",
            "sync_write_p50_ms",
        ),
        (
            "unary Publish p99 ms",
            "unary_p99_ms",
            "",
            "synced RocksDB write p50 ms",
            "sync_write_p50_ms",
        ),
    ]
    print(
        f"\n{args.records:,} records x {args.value_bytes} B, {args.batch}/request, "
        f"durability={args.durability}, median of {args.runs} run(s)\n"
    )
    print("| figure | median | spread | target | floor | floor median | ratio to floor |")
    print("|---|---|---|---|---|---|---|")
    for label, key, target, floor_label, floor_key in rows:
        value, floor = med(figures, key), med(floors, floor_key)
        shown, floor_shown = _fmt(value), _fmt(floor)
        print(
            f"| {label} | {shown} | {spread(figures, key)} | {target} | {floor_label} | "
            f"{floor_shown} | {value / floor:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
