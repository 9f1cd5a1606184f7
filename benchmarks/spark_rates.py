"""``compactlog bench spark``: the Spark source beside raw gRPC, same server, same run.

The ``compactlog`` data source carries the data pipeline; what Spark and the source cost
on top of the wire is what this suite measures. One Spark session (``--master``, default
``local[2]``) serves every run, so start-up is timed once and apart. Each run starts a
fresh ``compactlog serve`` (fsync durability), loads a LEDGER topic of ``--records``
100 B messages (100k keys at most) with the raw-bytes PublishStream of ``rawlog``, then
times on the same topic and server:

1. raw gRPC Read, each response parsed (``ReadResponse.FromString``) and its messages
   counted: the read floor (one reader, one core);
2. ``spark.read.format("compactlog")`` of the whole topic with ``count(*)`` and the sum
   of every value's length, so every row reaches Spark: the first query warms the
   session, the second is timed. That is the JVM reader where ``register`` could build
   it (docs/spark.md), else the Python source. The source plans its Spark partitions
   itself (about one range a core); with ``--entries-per-partition N`` each run also
   times the same query with that option, in alternating order, so two plans are
   compared in the same run;
3. with the JVM reader, the same query through the Python source
   (``format("compactlog-python")``), warmed and timed the same way;
4. the same query over a Python data source that costs nothing (``spark_replay``): the
   batches the source built for this topic, recorded before the run's queries and handed
   to Spark memory-mapped. No Python data source can read faster than that: it is what
   Spark itself costs to take these columns from a Python worker.

The ratio per Spark core is the Spark rate divided by the cores of ``--master`` and by
the read floor. Each timed query's CPU seconds are taken too, over this process's tree
(the driver, Spark's JVM and its Python workers, on a local master: all of Spark's
work), which a loaded box inflates less than the wall time. Goal (issue 29): >= 0.5.
Figures are medians of ``--runs`` runs; the report gives the box's load average while
Spark read (the floor shares the box).

    compactlog bench spark                          # 1,000,000 messages, local[2], 3 runs
    compactlog bench spark --quick                  # 20,000 messages, one run
    compactlog bench spark --records 500000 --runs 5 --json spark.json
    compactlog bench spark --entries-per-partition 100000   # beside the former fixed cut
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from compactlog.bench import spark_replay
from compactlog.bench.procstats import ServerProcess, tree_cpu_seconds
from compactlog.bench.rawlog import RawLog, publish_request, read_request
from compactlog.bench.summary import (
    Target,
    aggregate,
    envelope,
    print_report,
    ratio_spread,
    targets_markdown,
)
from compactlog.spark import PYTHON_NAME
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

TOPIC = "spark-read"
VALUE = b"v" * 100
GOAL = 0.5
READ_FLOOR = "raw gRPC Read, responses parsed, same server"
REPLAY = "a Python data source costing nothing: the same batches, memory-mapped"
JVM_SCAN = "compactlog JVM scan"  # in the plan of a read the JVM reader serves
Sample = dict[str, float]


@dataclasses.dataclass(frozen=True)
class Settings:
    records: int = 1_000_000
    runs: int = 3
    master: str = "local[2]"
    workdir: Path | None = None
    entries_per_partition: int | None = None  # also time a read with this fixed cut


QUICK = {"records": 20_000, "runs": 1}


def cores(master: str) -> int:
    """Spark's task slots for a ``local[N]`` / ``local[*]`` / ``local`` master."""
    match = re.fullmatch(r"local(?:\[(\d+|\*)\])?", master)
    if match is None:
        raise SystemExit(f"compactlog bench spark: --master must be local[N], got {master!r}")
    n = match.group(1)
    return 1 if n is None else (os.cpu_count() or 1) if n == "*" else int(n)


def _requests(records: int) -> list[bytes]:
    keys = [b"k%d" % (j % 100_000) for j in range(records)]
    return [
        publish_request(TOPIC, [(k, VALUE) for k in keys[i : i + 1000]])
        for i in range(0, records, 1000)
    ]


def spark_count(
    spark: Any, address: str, entries: int | None = None, name: str = "compactlog"
) -> int:
    """One batch query of the whole topic: rows counted, every value's length summed;
    ``entries``: the source's ``entriesPerPartition`` (None: its own plan); ``name``: the
    source's name (``PYTHON_NAME``: the Python source beside the JVM reader)."""
    return _count(_reader(spark, address, entries, name).load())


def _reader(spark: Any, address: str, entries: int | None, name: str) -> Any:
    reader = spark.read.format(name).option("server", address).option("topic", TOPIC)
    if entries is not None:
        reader = reader.option("entriesPerPartition", str(entries))
    return reader


def jvm_reader(spark: Any, address: str) -> bool:
    """Whether ``format("compactlog")`` reads through the JVM reader in ``spark``."""
    df = _reader(spark, address, None, "compactlog").load()
    return JVM_SCAN in str(df._jdf.queryExecution().executedPlan().toString())


def replay_count(spark: Any, path: Path) -> int:
    """The same query over the recorded batches (``spark_replay``)."""
    return _count(spark.read.format(spark_replay.NAME).option("path", str(path)).load())


def _count(df: Any) -> int:
    from pyspark.sql import functions as F

    row = df.agg(F.count(F.lit(1)), F.sum(F.length("value"))).first()
    if int(row[1]) != int(row[0]) * len(VALUE):
        raise RuntimeError(f"value lengths summed to {row[1]} over {row[0]} rows")
    return int(row[0])


def create_topic(log: RawLog, topic: str) -> None:
    """The LEDGER topic, created over the raw log's channel."""
    pb_grpc.TopicAdminStub(log.channel).CreateTopic(pb.CreateTopicRequest(name=topic), timeout=60)


def _timed(count: int, work: Any) -> float:
    started = time.perf_counter()
    got = work()
    seconds = time.perf_counter() - started
    if got != count:
        raise RuntimeError(f"expected {count} messages, got {got}")
    return count / seconds


def one_run(s: Settings, run: int, spark: Any, requests: list[bytes]) -> Sample:
    """A fresh server: the read floor, then a warm-up and a timed Spark query."""
    with tempfile.TemporaryDirectory(prefix="compactlog-spark-", dir=s.workdir) as tmp:
        server = ServerProcess(Path(tmp) / "data")
        try:
            with RawLog(server.address) as log:
                create_topic(log, TOPIC)
                print(f"run {run}: load, raw read, Spark warm-up, Spark read", file=sys.stderr)
                log.publish_stream(requests)
                req = read_request(TOPIC, compacted=False)
                m: Sample = {"raw_read_mps": _timed(s.records, lambda: log.read(req, len).messages)}
                replay = Path(tmp) / "replay"
                spark_replay.register(spark)
                options = {"server": server.address, "topic": TOPIC}
                schema = spark.read.format("compactlog").options(**options).load().schema
                recorded = spark_replay.record(options, cores(s.master), schema, replay)
                if recorded != s.records:
                    raise RuntimeError(f"recorded {recorded} rows, expected {s.records}")
                jvm = jvm_reader(spark, server.address)
                started = time.perf_counter()
                spark_count(spark, server.address)
                if jvm:
                    spark_count(spark, server.address, name=PYTHON_NAME)
                replay_count(spark, replay)
                m["spark_first_s"] = time.perf_counter() - started
                m.update(spark_reads(s, run, spark, server.address, replay, jvm))
        finally:
            server.stop()
    for path in ("spark_read", "spark_fixed", "spark_python", "spark_replay"):
        if f"{path}_mps" in m:
            m[f"{path}.ratio"] = m[f"{path}_mps"] / m["raw_read_mps"]
            m[f"{path}.per_core_ratio"] = m[f"{path}.ratio"] / cores(s.master)
    m["spark_read.replay_ratio"] = m["spark_read_mps"] / m["spark_replay_mps"]
    if "spark_python_mps" in m:
        m["spark_read.python_ratio"] = m["spark_read_mps"] / m["spark_python_mps"]
    return m


def spark_reads(s: Settings, run: int, spark: Any, address: str, replay: Path, jvm: bool) -> Sample:
    """The timed queries of a run: the source's own plan, the recorded batches replayed,
    with ``jvm`` the Python source beside the JVM reader and, with
    ``entries_per_partition``, the fixed cut, in an order turned round run by run."""
    queries: dict[str, Any] = {
        "spark_read_mps": lambda: spark_count(spark, address),
        "spark_replay_mps": lambda: replay_count(spark, replay),
    }
    if jvm:
        queries["spark_python_mps"] = lambda: spark_count(spark, address, name=PYTHON_NAME)
    if (entries := s.entries_per_partition) is not None:
        queries["spark_fixed_mps"] = lambda: spark_count(spark, address, entries)
    order = list(queries) if run % 2 else list(reversed(queries))
    m: Sample = {"load_avg": os.getloadavg()[0]}
    for key in order:
        cpu = tree_cpu_seconds(os.getpid())
        m[key] = _timed(s.records, queries[key])
        m[key.replace("_mps", "_cpu_s")] = tree_cpu_seconds(os.getpid()) - cpu
    m["load_avg"] = max(m["load_avg"], os.getloadavg()[0])
    return m


def rows(
    results: dict[str, dict[str, Any]], master: str, entries: int | None = None
) -> list[Target]:
    """The source's own plan; with ``entries``, the same read cut every that many; the
    Python source where ``compactlog`` was the JVM reader; then the costless Python
    source and the read beside it (and beside the Python source)."""
    paths = {"spark_read": f"spark.read.format('compactlog'), {master}, warm"}
    if entries is not None and "spark_fixed_mps" in results:
        paths["spark_fixed"] = f"the same, entriesPerPartition={entries}"
    if "spark_python_mps" in results:
        paths["spark_python"] = f"the Python source, format('{PYTHON_NAME}'), {master}, warm"
    out = []
    for path, name in paths.items():
        per_core = results[f"{path}.per_core_ratio"]["median"]
        out.append(Target(
            name, "ledger", results[f"{path}_mps"]["median"], "msg/s",
            f">= {GOAL} x floor per core", per_core >= GOAL,
            results["raw_read_mps"]["median"], READ_FLOOR, per_core,
            "median of the runs' figure / cores / floor",
        ))  # fmt: skip
    replay = results["spark_replay_mps"]["median"]
    out.append(Target(
        REPLAY, "ledger", replay, "msg/s", "none (Spark's own floor)", None,
        results["raw_read_mps"]["median"], READ_FLOOR,
        results["spark_replay.per_core_ratio"]["median"],
        "median of the runs' figure / cores / floor",
    ))  # fmt: skip
    out.append(Target(
        "spark.read.format('compactlog') beside the costless Python source", "ledger",
        results["spark_read_mps"]["median"], "msg/s", "none (what the source adds)", None,
        replay, "the costless Python source, same run",
        results["spark_read.replay_ratio"]["median"], "median of the runs' ratios",
    ))  # fmt: skip
    if "spark_python_mps" in results:
        out.append(Target(
            "spark.read.format('compactlog') beside the Python source", "ledger",
            results["spark_read_mps"]["median"], "msg/s", "none (what the JVM reader adds)",
            None, results["spark_python_mps"]["median"], "the Python source, same run",
            results["spark_read.python_ratio"]["median"], "median of the runs' ratios",
        ))  # fmt: skip
    return out


def run(s: Settings) -> dict[str, Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from compactlog.compactor.spark import spark_session

    started, t0 = dt.datetime.now(), time.perf_counter()
    requests = _requests(s.records)
    spark = spark_session(s.master)
    spark.sparkContext.setLogLevel("ERROR")
    start_s = time.perf_counter() - t0
    try:
        samples = [one_run(s, i + 1, spark, requests) for i in range(s.runs)]
    finally:
        spark.stop()
    results = {key: aggregate([m[key] for m in samples]) for key in samples[0]}
    return envelope(
        "compactlog bench spark",
        s,
        started,
        t0,
        spark_start_s=start_s,
        results=results,
        rows=[dataclasses.asdict(r) for r in rows(results, s.master, s.entries_per_partition)],
    )


def markdown(report: dict[str, Any]) -> str:
    s, m, res = report["settings"], report["machine"], report["results"]
    spread = ratio_spread(res, digits=3)
    load = res["load_avg"]["samples"]
    head = (
        f"{s['records']:,} LEDGER messages x 100 B, median of {s['runs']} run(s), one "
        f"server per run (fsync durability), Spark {s['master']}. {m['cpu_model']}, "
        f"{m['cores']} cores, load average {min(load):.1f}-{max(load):.1f} while Spark "
        f"read. Spark start-up {report['spark_start_s']:.1f} s; first query "
        f"of each run (not timed in the figure) {res['spark_first_s']['median']:.1f} s."
    )
    table = targets_markdown([Target(**r) for r in report["rows"]], first_header="Spark path")
    cpu = ", ".join(
        f"{key.removesuffix('_cpu_s')} {res[key]['median']:.2f} s"
        for key in ("spark_read_cpu_s", "spark_python_cpu_s", "spark_replay_cpu_s")
        if key in res
    )
    return (
        f"{head}\n\n{table}\n\nPer-run ratios (min-max): {spread}.\n\n"
        f"CPU seconds a timed query, this process's tree (driver, Spark JVM, Python "
        f"workers), medians: {cpu}."
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="compactlog bench spark",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="20,000 messages, one run")
    p.add_argument("--records", type=int, help="messages per run (default 1,000,000)")
    p.add_argument("--runs", type=int, help="runs to take the median over (default 3)")
    p.add_argument("--master", help="Spark master, local[N] (default local[2])")
    p.add_argument("--workdir", type=Path, help="where data dirs go (default: system temp)")
    p.add_argument(
        "--entries-per-partition",
        type=int,
        help="also time the read with this entriesPerPartition (e.g. 100000, the former default)",
    )
    p.add_argument("--json", type=Path, help="also write the report as JSON here")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    names = ("records", "runs", "master", "workdir", "entries_per_partition")
    given = {k: v for k in names if (v := getattr(args, k)) is not None}
    s = Settings(**{**(QUICK if args.quick else {}), **given})
    if s.records < 1 or s.runs < 1 or (s.entries_per_partition or 1) < 1:
        raise SystemExit(
            "compactlog bench spark: --records, --runs and --entries-per-partition must be positive"
        )
    cores(s.master)
    report = run(s)
    print_report("compactlog bench spark", argv, report, markdown, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
