"""Prototype timing (issue 29): the JVM reader beside the Python source and the raw Read.

The same query as ``compactlog bench spark`` (``count(*)`` and the sum of every value's
length over a LEDGER topic of 1M x 100 B messages, warm ``local[2]`` session), on the
same server and in the same run as the raw gRPC Read floor, the two sources alternating.
Also the Spark JVM's CPU seconds per query, read from /proc (resists the box's load).

    PYTHONPATH=. .venv/bin/python prototypes/spark-jvm/bench.py --records 1000000 --runs 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

JAR = Path(__file__).resolve().parent / "build" / "compactlog-spark.jar"
JVM_FORMAT = "io.compactlog.spark.CompactlogSource"
TOPIC = "spark-read"  # benchmarks/spark_rates.py's


def _stat(pid: int | str) -> tuple[str, int, float]:
    """A process's name, parent and user + system CPU seconds, from /proc."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return stat[stat.index("(") + 1 : stat.rindex(")")], int(fields[1]), cpu


def jvm_cpu_s() -> float:
    """CPU seconds of this driver's child processes named java (Spark's JVM)."""
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            name, parent, cpu = _stat(pid)
        except OSError:
            continue
        if name == "java" and parent == os.getpid():
            total += cpu
    return total


def query(spark: Any, fmt: str, address: str, topic: str) -> tuple[int, int]:
    from pyspark.sql import functions as F

    df = spark.read.format(fmt).option("server", address).option("topic", topic).load()
    row = df.agg(F.count(F.lit(1)), F.sum(F.length("value"))).first()
    return int(row[0]), int(row[1])


def timed(spark: Any, fmt: str, server: Any, records: int) -> tuple[float, float, float]:
    """Wall seconds, Spark JVM and server CPU seconds of one query."""
    cpu, served, t0 = jvm_cpu_s(), _stat(server.pid)[2], time.perf_counter()
    count, size = query(spark, fmt, server.address, TOPIC)
    wall = time.perf_counter() - t0
    if count != records or size != 100 * records:
        raise RuntimeError(f"{fmt}: {count} rows, {size} value bytes")
    return wall, jvm_cpu_s() - cpu, _stat(server.pid)[2] - served


def one_run(
    spark: Any, records: int, requests: list[bytes], run: int, warmups: int
) -> dict[str, Any]:
    from compactlog.bench.procstats import ServerProcess
    from compactlog.bench.rawlog import RawLog, read_request
    from compactlog.bench.spark_rates import create_topic

    keys = ("py", "jvm", "py_cpu", "jvm_cpu", "py_server", "jvm_server", "floor", "floor_server")
    out: dict[str, Any] = {key: [] for key in keys}
    with tempfile.TemporaryDirectory(prefix="compactlog-jvm-") as tmp:
        server = ServerProcess(Path(tmp) / "data")
        try:
            with RawLog(server.address) as log:
                create_topic(log, TOPIC)
                log.publish_stream(requests)
                for _ in range(warmups):  # not timed
                    for fmt in ("compactlog", JVM_FORMAT):
                        query(spark, fmt, server.address, TOPIC)
                order = ["compactlog", JVM_FORMAT] if run % 2 else [JVM_FORMAT, "compactlog"]
                for _ in range(2):
                    req = read_request(TOPIC, compacted=False)
                    served, t0 = _stat(server.pid)[2], time.perf_counter()
                    got = log.read(req, len).messages
                    out["floor"].append(got / (time.perf_counter() - t0))
                    out["floor_server"].append(_stat(server.pid)[2] - served)
                    for fmt in order:
                        wall, cpu, served = timed(spark, fmt, server, records)
                        key = "py" if fmt == "compactlog" else "jvm"
                        out[key].append(wall)
                        out[f"{key}_cpu"].append(cpu)
                        out[f"{key}_server"].append(served)
                    order.reverse()
        finally:
            server.stop()
    out["load"] = os.getloadavg()[0]
    return out


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--warmups", type=int, default=1, help="untimed queries of each source a run")
    args = p.parse_args()
    os.environ["PYSPARK_SUBMIT_ARGS"] = f"--jars {JAR} pyspark-shell"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from compactlog.bench.spark_rates import _requests
    from compactlog.compactor.spark import spark_session

    requests = _requests(args.records)
    spark = spark_session("local[2]")
    spark.sparkContext.setLogLevel("ERROR")
    runs = []
    try:
        for i in range(args.runs):
            runs.append(one_run(spark, args.records, requests, i + 1, args.warmups))
            print(runs[-1], file=sys.stderr, flush=True)
    finally:
        spark.stop()
    n = args.records
    floor = [f for r in runs for f in r["floor"]]
    fm = statistics.median(floor)
    print(f"load average {min(r['load'] for r in runs):.1f}-{max(r['load'] for r in runs):.1f}")
    print(
        f"raw Read floor: median {fm:,.0f} msg/s ({min(floor):,.0f}-{max(floor):,.0f});"
        f" server CPU {_spread([c for r in runs for c in r['floor_server']])}"
    )
    for key, name in (("py", "Python source"), ("jvm", "JVM prototype")):
        walls = [w for r in runs for w in r[key]]
        cpus = [c for r in runs for c in r[f"{key}_cpu"]]
        served = [c for r in runs for c in r[f"{key}_server"]]
        rate = n / statistics.median(walls)
        print(
            f"{name}: median {statistics.median(walls):.3f} s ({min(walls):.3f}-{max(walls):.3f}),"
            f" {rate:,.0f} msg/s, per core vs floor {rate / 2 / fm:.3f}"
            f" ({n / max(walls) / 2 / fm:.3f}-{n / min(walls) / 2 / fm:.3f});"
            f" Spark JVM CPU {_spread(cpus)}, server CPU {_spread(served)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
