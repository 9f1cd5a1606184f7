"""The server's CPU per published record: a steadier A/B figure than wall clock on a
shared machine.

Starts ``compactlog serve`` (the code on ``PYTHONPATH``, default fsync durability) ``--runs``
times; each run publishes the dataplane's ``uniform-100B`` workload (200k x 100 B, 1000 a
request) on one PublishStream and counts the CPU the server process spent, over all its
threads (``/proc/PID/task/*/schedstat``, nanoseconds), during the publish and until
``--after`` seconds later (work that follows a burst, such as key index merges). To
compare two versions, point the server at each checkout in turn (interleaved when the
machine is shared):

    python -m compactlog.bench.publish_cpu --runs 6 --server-path /path/to/old
    python -m compactlog.bench.publish_cpu --runs 6 --server-path /path/to/new
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import grpc

from compactlog.bench.bench_server import start_server
from compactlog.bench.rawlog import RawLog, publish_request
from compactlog.bench.workloads import PROFILES, batches
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc


def server_cpu_s(pid: int) -> float:
    """CPU seconds of every live thread of a process."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as fh:
                total += int(fh.read().split()[0])
        except OSError:  # the thread ended meanwhile
            pass
    return total / 1e9


def one_run(requests: list[bytes], records: int, after_s: float) -> tuple[float, float, float]:
    """(records/s, CPU µs per record during the publish, and until ``after_s`` later)."""
    root = Path(tempfile.mkdtemp(prefix="compactlog-publish-cpu-"))
    proc, address = start_server(root / "data", "fsync")
    try:
        channel = grpc.insecure_channel(address)
        pb_grpc.TopicAdminStub(channel).CreateTopic(pb.CreateTopicRequest(name="t"))
        channel.close()
        with RawLog(address) as log:
            log.publish_stream(requests[:20])  # warm up
            before = server_cpu_s(proc.pid)
            seconds, _replies = log.publish_stream(requests)
            during = server_cpu_s(proc.pid)
            time.sleep(after_s)
            later = server_cpu_s(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(root, ignore_errors=True)
    per = 1e6 / records
    return records / seconds, (during - before) * per, (later - before) * per


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", type=int, default=6)
    p.add_argument("--after", type=float, default=1.5, help="seconds counted after the publish")
    p.add_argument("--server-path", help="PYTHONPATH of the server (another checkout)")
    args = p.parse_args(argv)
    if args.server_path:
        os.environ["PYTHONPATH"] = args.server_path  # the server subprocess inherits it
    workload = next(w for w in PROFILES["default"] if w.name == "uniform-100B")
    chunks = batches(workload, 42)
    requests = [publish_request("t", chunk) for chunk in chunks]
    records = sum(len(chunk) for chunk in chunks)
    runs = [one_run(requests, records, args.after) for _ in range(args.runs)]
    for rps, during, later in runs:
        print(f"{rps:12,.0f} records/s  {during:.3f} µs/record  {later:.3f} with what follows")
    print(
        f"median: {statistics.median(r[0] for r in runs):,.0f} records/s, "
        f"{statistics.median(r[1] for r in runs):.3f} µs/record during the publish, "
        f"{statistics.median(r[2] for r in runs):.3f} including the next {args.after:g} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
