"""``compactlog admin topics compact | compaction-status``.

``compact`` starts a run and returns; with ``--wait`` it polls GetCompactionStatus until the
run ends, drawing a progress bar on stderr when that is a terminal. The server reports no
fraction done, so the bar shows activity and elapsed time rather than a percentage.
``--engine spark`` runs the Spark engine from this process (it drives the server over gRPC).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from typing import IO, Any

from compactlog.cli.common import connect, server_address, spark_missing, tls_ca, token
from compactlog.client.client import Client
from compactlog.client.types import CompactionStatus
from compactlog.errors import CompactlogError

POLL_INTERVAL_S = 0.2
DEFAULT_SPARK_MASTER = "local[*]"


def add_parser(areas: Any) -> None:
    """Register ``topics compact`` and ``topics compaction-status`` under ``admin``."""
    topics = areas.add_parser("topics", help="topic administration")
    verbs = topics.add_subparsers(dest="admin_topics_command", metavar="VERB", required=True)

    compact = verbs.add_parser("compact", help="compact a topic now")
    compact.add_argument("topic", metavar="TOPIC")
    compact.add_argument("--wait", action="store_true", help="wait until the run has finished")
    compact.add_argument(
        "--engine",
        choices=("local", "spark"),
        default="local",
        help="local: in the server (default); spark: a Spark job run from here",
    )
    compact.add_argument(
        "--spark-master",
        metavar="URL",
        default=DEFAULT_SPARK_MASTER,
        help=f"Spark master for --engine spark (default {DEFAULT_SPARK_MASTER})",
    )
    compact.add_argument("--json", action="store_true", help="print the status as JSON")
    compact.set_defaults(func=compact_cmd)

    status = verbs.add_parser(
        "compaction-status", help="state and last run of a topic's compaction"
    )
    status.add_argument("topic", metavar="TOPIC")
    status.add_argument("--wait", action="store_true", help="wait while a run is in progress")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(func=status_cmd)


def status_json(topic: str, status: CompactionStatus) -> dict[str, Any]:
    data = asdict(status)
    data["horizon"] = None if status.horizon is None else str(status.horizon)
    return {"topic": topic, **data}


def format_status(topic: str, status: CompactionStatus) -> str:
    lines = [f"topic:            {topic}", f"state:            {status.state}"]
    if status.compacted_ledger_id:
        lines.append(f"compacted ledger: {status.compacted_ledger_id}")
    if status.horizon is not None:
        lines.append(f"horizon:          {status.horizon}")
    run = status.last_run
    if run is not None:
        lines.append(
            f"last run:         engine={run.engine or '-'} read={run.read} kept={run.kept} "
            f"removed={run.removed} tombstones={run.tombstones} "
            f"keyless_dropped={run.keyless_dropped} bytes_in={run.bytes_in} "
            f"bytes_out={run.bytes_out} duration_ms={run.duration_ms}"
        )
    if status.last_error:
        lines.append(f"last error:       {status.last_error}")
    return "\n".join(lines)


class ProgressBar:
    """An indeterminate bar with elapsed time, redrawn in place; silent when not a terminal."""

    WIDTH = 24

    def __init__(self, label: str, stream: IO[str] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty()
        self.label = label
        self.started = time.monotonic()
        self.tick = 0

    def update(self, state: str) -> None:
        if not self.enabled:
            return
        pos = self.tick % (2 * (self.WIDTH - 4))
        pos = pos if pos < self.WIDTH - 4 else 2 * (self.WIDTH - 4) - pos
        bar = " " * pos + "####" + " " * (self.WIDTH - 4 - pos)
        elapsed = time.monotonic() - self.started
        self.stream.write(f"\r{self.label} [{bar}] {state} {elapsed:5.1f}s")
        self.stream.flush()
        self.tick += 1

    def finish(self) -> None:
        if self.enabled:
            self.stream.write("\r\033[K")
            self.stream.flush()


def wait_for(client: Client, topic: str, status: CompactionStatus) -> CompactionStatus:
    """Poll until the run is no longer RUNNING; Ctrl-C stops waiting, not the run."""
    bar = ProgressBar(f"compacting {topic}")
    try:
        while status.running:
            bar.update(status.state)
            time.sleep(POLL_INTERVAL_S)
            status = client.compaction_status(topic)
    except KeyboardInterrupt:
        bar.finish()
        sys.stderr.write("stopped waiting; the compaction continues on the server\n")
        raise
    bar.finish()
    return status


def _report(args: argparse.Namespace, status: CompactionStatus) -> int:
    if args.json:
        print(json.dumps(status_json(args.topic, status)))
    else:
        print(format_status(args.topic, status))
    if status.state == "ERROR" and args.wait:
        raise_failed(args.topic, status)
    return 0


def raise_failed(topic: str, status: CompactionStatus) -> None:
    """A run that ended in ERROR fails the command, with the server's reason."""
    raise CompactlogError(f"compaction of {topic} failed: {status.last_error or 'no reason given'}")


def compact_cmd(args: argparse.Namespace) -> int:
    if args.engine == "spark":
        return _compact_spark(args)
    with connect(args) as client:
        status = client.compact(args.topic, wait=False)
        if args.wait:
            status = wait_for(client, args.topic, status)
    return _report(args, status)


def status_cmd(args: argparse.Namespace) -> int:
    with connect(args) as client:
        status = client.compaction_status(args.topic)
        if args.wait:
            status = wait_for(client, args.topic, status)
    return _report(args, status)


def _compact_spark(args: argparse.Namespace) -> int:
    """Run the Spark engine here; it always waits, since the job runs in this process."""
    try:
        from compactlog.compactor.spark import run_spark_compaction
    except ImportError as exc:
        return spark_missing(exc)
    address = server_address(args)
    with connect(args) as client:
        client.get_topic(args.topic)  # fail fast with TopicNotFound before starting Spark
        try:
            run_spark_compaction(
                address, args.topic, args.spark_master, token=token(args), tls_ca=tls_ca(args)
            )
        except ImportError as exc:  # pyspark itself imported lazily inside the engine
            return spark_missing(exc)
        status = client.compaction_status(args.topic)
    args.wait = True
    return _report(args, status)
