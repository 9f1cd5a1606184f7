"""``compactlog admin topics compact | compaction-status | cancel | verify``.

``compact`` starts a run and returns; with ``--wait`` it follows the run through
WatchCompaction, drawing a live progress bar on stderr when that is a terminal (plain
lines otherwise, ``cli.progress``), then prints the final status. ``--dry-run`` prints the
figures a run started now would have (PreviewCompaction) and changes nothing.
``--engine spark`` runs the Spark engine from this process (it drives the server over
gRPC). ``cancel`` stops the active run (CANCELLED: nothing of it becomes visible);
``verify`` recomputes the compacted ledger from the raw history and exits 1 when it differs.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from typing import Any

from compactlog.cli.common import connect, server_address, spark_missing, tls_ca, token
from compactlog.cli.output import add_json_flag, print_json, wants_json
from compactlog.cli.progress import progress_view
from compactlog.client.client import Client
from compactlog.client.types import CompactionRun, CompactionStatus, CompactionVerification
from compactlog.errors import CompactlogError, WrongTopicKind

DEFAULT_SPARK_MASTER = "local[*]"
EXIT_NOT_OK = 1


def add_parser(areas: Any) -> None:
    """Register the compaction verbs under ``admin topics``."""
    topics = areas.add_parser("topics", help="topic administration")
    verbs = topics.add_subparsers(dest="admin_topics_command", metavar="VERB", required=True)

    compact = verbs.add_parser("compact", help="compact a topic now")
    compact.add_argument("topic", metavar="TOPIC")
    compact.add_argument("--wait", action="store_true", help="follow the run until it ends")
    compact.add_argument(
        "--dry-run", action="store_true", help="print what a run would do; change nothing"
    )
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
    add_json_flag(compact, "print the status as JSON")
    compact.set_defaults(func=compact_cmd)

    status = verbs.add_parser(
        "compaction-status", help="state and last run of a topic's compaction"
    )
    status.add_argument("topic", metavar="TOPIC")
    status.add_argument("--wait", action="store_true", help="follow a run in progress")
    add_json_flag(status, "print the status as JSON")
    status.set_defaults(func=status_cmd)

    cancel = verbs.add_parser("cancel", help="stop a topic's compaction in progress")
    cancel.add_argument("topic", metavar="TOPIC")
    add_json_flag(cancel, "print the status as JSON")
    cancel.set_defaults(func=cancel_cmd, wait=False)

    verify = verbs.add_parser(
        "verify", help="recompute a topic's compacted ledger and compare (exit 1 if it differs)"
    )
    verify.add_argument("topic", metavar="TOPIC")
    add_json_flag(verify, "print the result as JSON")
    verify.set_defaults(func=verify_cmd)


def status_json(topic: str, status: CompactionStatus) -> dict[str, Any]:
    data = asdict(status)
    data["horizon"] = None if status.horizon is None else str(status.horizon)
    return {"topic": topic, **data}


def run_figures(run: CompactionRun) -> str:
    return (
        f"read={run.read} kept={run.kept} removed={run.removed} tombstones={run.tombstones} "
        f"keyless_dropped={run.keyless_dropped} bytes_in={run.bytes_in} "
        f"bytes_out={run.bytes_out}"
    )


def format_status(topic: str, status: CompactionStatus) -> str:
    lines = [f"topic:            {topic}", f"state:            {status.state}"]
    if status.compacted_ledger_id:
        lines.append(f"compacted ledger: {status.compacted_ledger_id}")
    if status.horizon is not None:
        lines.append(f"horizon:          {status.horizon}")
    run = status.last_run
    if run is not None:
        lines.append(
            f"last run:         engine={run.engine or '-'} {run_figures(run)} "
            f"duration_ms={run.duration_ms}"
        )
    if status.last_error:
        lines.append(f"last error:       {status.last_error}")
    return "\n".join(lines)


def wait_for(client: Client, topic: str) -> CompactionStatus:
    """Follow the run until it ends; Ctrl-C stops following, not the run."""
    view = progress_view(topic)
    try:
        for update in client.watch_compaction(topic):
            view.update(update)
    except KeyboardInterrupt:
        view.close()
        sys.stderr.write("stopped waiting; the compaction continues on the server\n")
        raise
    view.close()
    return client.compaction_status(topic)


def _report(args: argparse.Namespace, status: CompactionStatus) -> int:
    if wants_json(args):
        print_json(status_json(args.topic, status))
    else:
        print(format_status(args.topic, status))
    if status.state in ("ERROR", "CANCELLED") and args.wait:
        raise_failed(args.topic, status)
    return 0


def raise_failed(topic: str, status: CompactionStatus) -> None:
    """A run that ended in ERROR or CANCELLED fails the command, with the reason."""
    if status.state == "CANCELLED":
        raise CompactlogError(f"compaction of {topic} was cancelled")
    raise CompactlogError(f"compaction of {topic} failed: {status.last_error or 'no reason given'}")


def compact_cmd(args: argparse.Namespace) -> int:
    if args.dry_run:
        return _preview(args)
    if args.engine == "spark":
        return _compact_spark(args)
    with connect(args) as client:
        status = client.compact(args.topic, wait=False)
        if args.wait:
            status = wait_for(client, args.topic)
    return _report(args, status)


def _preview(args: argparse.Namespace) -> int:
    with connect(args) as client:
        run = client.preview_compaction(args.topic)
    if wants_json(args):
        figures = {k: v for k, v in asdict(run).items() if k not in ("duration_ms", "engine")}
        print_json({"topic": args.topic, "dry_run": True, **figures})
    else:
        print(f"topic:    {args.topic}\ndry run:  {run_figures(run)}")
    return 0


def status_cmd(args: argparse.Namespace) -> int:
    with connect(args) as client:
        status = client.compaction_status(args.topic)
        if args.wait and status.running:
            status = wait_for(client, args.topic)
    return _report(args, status)


def cancel_cmd(args: argparse.Namespace) -> int:
    with connect(args) as client:
        status = client.cancel_compaction(args.topic)
    return _report(args, status)


def verification_json(topic: str, v: CompactionVerification) -> dict[str, Any]:
    data = asdict(v)
    data["problems"] = list(v.problems)
    data["horizon"] = None if v.horizon is None else str(v.horizon)
    return {"topic": topic, **data}


def verify_cmd(args: argparse.Namespace) -> int:
    with connect(args) as client:
        v = client.verify_compaction(args.topic)
    if wants_json(args):
        print_json(verification_json(args.topic, v))
    else:
        lines = [
            f"topic:            {args.topic}",
            f"ok:               {'yes' if v.ok else 'NO'}",
            f"checked:          {v.checked} messages",
            f"digest:           {v.digest}",
        ]
        if v.compacted_ledger_id:
            lines.append(f"compacted ledger: {v.compacted_ledger_id}")
        if v.horizon is not None:
            lines.append(f"horizon:          {v.horizon}")
        lines += [f"problem:          {p}" for p in v.problems]
        print("\n".join(lines))
    return 0 if v.ok else EXIT_NOT_OK


def _compact_spark(args: argparse.Namespace) -> int:
    """Run the Spark engine here; it always waits, since the job runs in this process.
    A topic it cannot compact is refused before Spark starts (that takes many seconds)."""
    try:  # the engine's module only: pyspark itself is imported when a run starts
        from compactlog.compactor.spark import run_spark_compaction
    except ImportError as exc:
        return spark_missing(exc)
    address = server_address(args)
    with connect(args) as client:
        if client.get_topic(args.topic).kind == "segmented":  # TopicNotFound, else the kind
            raise WrongTopicKind(
                f"topic {args.topic!r} is SEGMENTED: it is compacted in place by the "
                "LogCleaner, not by the two-phase compactor (use --engine local)",
                topic=args.topic,
                kind="SEGMENTED",
            )
        try:
            run_spark_compaction(
                address, args.topic, args.spark_master, token=token(args), tls_ca=tls_ca(args)
            )
        except ImportError as exc:  # pyspark itself imported lazily inside the engine
            return spark_missing(exc)
        status = client.compaction_status(args.topic)
    args.wait = True
    return _report(args, status)
