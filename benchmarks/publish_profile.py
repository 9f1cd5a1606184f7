"""PublishStream at a fresh server or group-commit floor, with a profiler attached.

A helper for looking inside the publish path, not a benchmark: it starts ``compactlog
serve`` (LEDGER topics, default fsync durability) or the group-commit floor of
``bench dataplane`` (``dataplane_floor --publish group-commit``), builds the dataplane's
requests (1000 x 100 B records each), starts the given tool with ``{pid}`` replaced by
the process id, waits for it to attach, publishes ``--streams`` streams of ``--records``
records one after the other (a topic each), then stops the tool with SIGINT (what
``py-spy record`` and ``perf stat`` end on). The figures it prints are perturbed by the
tool; take throughput from ``compactlog bench dataplane``.

    python -m compactlog.bench.publish_profile server -- \\
        py-spy record --pid {pid} --rate 1000 --threads --gil --format raw --output gil.txt
    python -m compactlog.bench.publish_profile floor -- \\
        perf stat -e syscalls:sys_enter_fdatasync,context-switches,task-clock -p {pid}
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compactlog.bench.dataplane_floor import FloorProcess
from compactlog.bench.dataplane_runs import TOPIC, Settings
from compactlog.bench.procstats import ListeningProcess, ServerProcess
from compactlog.bench.rawlog import RawLog, publish_request
from compactlog.bench.workloads import batches
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc


def publish(proc: ListeningProcess, target: str, s: Settings, streams: int) -> float:
    """Every stream's requests built first, then published; returns the seconds taken."""
    names = [f"{TOPIC}-{i}" for i in range(streams)]
    with RawLog(proc.address) as log:
        if target == "server":
            admin = pb_grpc.TopicAdminStub(log.channel)
            for name in names:
                admin.CreateTopic(pb.CreateTopicRequest(name=name, kind=pb.TopicKind.LEDGER))
        requests = [[publish_request(n, b) for b in batches(s.workload, s.seed)] for n in names]
        started = time.perf_counter()
        for name, stream in zip(names, requests, strict=True):
            seconds, replies = log.publish_stream(stream)
            if len(replies) != len(stream):
                raise RuntimeError(f"{name}: {len(replies)} replies to {len(stream)} requests")
            print(f"{target} {name}: {s.records / seconds:,.0f} records/s (perturbed)")
        return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("target", choices=("server", "floor"))
    p.add_argument("--streams", type=int, default=3, help="streams published (default 3)")
    p.add_argument("--records", type=int, default=1_000_000, help="records a stream (1M)")
    p.add_argument("--attach-s", type=float, default=1.5, help="wait for the tool (1.5 s)")
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        p.error("give the tool's command after --, {pid} standing for the process id")
    cut = argv.index("--")
    args, tool = p.parse_args(argv[:cut]), argv[cut + 1 :]
    with tempfile.TemporaryDirectory(prefix="compactlog-profile-") as t:
        proc: ListeningProcess
        if args.target == "server":
            proc = ServerProcess(Path(t) / "server-data")
        else:
            proc = FloorProcess(Path(t) / "floor-data", publish="group-commit")
        try:
            spy = subprocess.Popen([a.replace("{pid}", str(proc.pid)) for a in tool])
            time.sleep(args.attach_s)
            window = publish(proc, args.target, Settings(records=args.records), args.streams)
            print(f"publish window {window:.2f} s")
            spy.send_signal(signal.SIGINT)
            spy.wait()
        finally:
            proc.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
