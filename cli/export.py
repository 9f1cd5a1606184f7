"""``compactlog export TOPIC [--compacted] --format parquet PATH``: a topic to files
through Spark (the ``compactlog`` data source), run from this process.

``--compacted`` writes the latest value of every key (see ``compactor.spark.export``);
without it, every message of the raw log.
"""

from __future__ import annotations

import argparse
from typing import Any

from compactlog.cli.common import connect, server_address, spark_missing, tls_ca, token
from compactlog.cli.output import emit
from compactlog.errors import CompactlogError

DEFAULT_SPARK_MASTER = "local[*]"


def add_parser(commands: Any) -> None:
    export = commands.add_parser("export", help="write a topic to files through Spark")
    export.add_argument("topic", metavar="TOPIC")
    export.add_argument("path", metavar="PATH", help="output directory")
    export.add_argument(
        "--compacted",
        action="store_true",
        help="the latest value of every key instead of the raw log",
    )
    export.add_argument(
        "--format", choices=("parquet",), default="parquet", help="output format (default parquet)"
    )
    export.add_argument("--overwrite", action="store_true", help="replace PATH if it exists")
    export.add_argument(
        "--spark-master",
        metavar="URL",
        default=DEFAULT_SPARK_MASTER,
        help=f"Spark master (default {DEFAULT_SPARK_MASTER})",
    )
    export.set_defaults(func=export_cmd)


def export_cmd(args: argparse.Namespace) -> int:
    with connect(args) as client:
        client.get_topic(args.topic)  # TopicNotFound as one line, before Spark starts
    try:
        from compactlog.compactor.spark import export_topic, spark_session

        session = spark_session(args.spark_master)
    except ImportError as exc:
        return spark_missing(exc)
    try:
        rows = export_topic(
            session,
            server_address(args),
            args.topic,
            args.path,
            compacted=args.compacted,
            fmt=args.format,
            overwrite=args.overwrite,
            token=token(args),
            tls_ca=tls_ca(args),
        )
    except CompactlogError:
        raise
    except Exception as exc:  # Spark's own errors (path exists, executor failure, ...)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CompactlogError(f"export of {args.topic} failed: {first}") from None
    view = "latest value per key" if args.compacted else "raw log"
    emit(
        args,
        {"topic": args.topic, "rows": rows, "compacted": args.compacted, "path": args.path},
        f"exported {rows} rows of {args.topic} ({view}) to {args.path} as {args.format}",
    )
    return 0
