"""``compactlog records delete-before TOPIC OFFSET``: Kafka's DeleteRecords
(``kafka-delete-records.sh``) on a SEGMENTED topic.

Raises the topic's log start offset to OFFSET: every record below it becomes unreadable
at once and its segments are deleted once wholly below it. LEDGER topics have no offsets
to cut at (``WRONG_TOPIC_KIND``); an offset past the end of the log is
``OFFSET_OUT_OF_RANGE``. Prints the new log start offset, or the topic as JSON.
"""

from __future__ import annotations

import argparse
from typing import Any

from compactlog.cli.common import connect, offset
from compactlog.cli.output import add_json_flag, emit
from compactlog.cli.topics import topic_json


def add_parser(commands: Any) -> None:
    """Register ``records`` and its verbs on the top-level subparsers."""
    records = commands.add_parser("records", help="delete records of a SEGMENTED topic")
    verbs = records.add_subparsers(dest="records_command", metavar="VERB", required=True)
    delete = verbs.add_parser(
        "delete-before",
        help="raise the log start offset: drop every record below OFFSET (DeleteRecords)",
    )
    delete.add_argument("topic", metavar="TOPIC")
    delete.add_argument("before", metavar="OFFSET", type=offset, help="first offset to keep")
    add_json_flag(delete, "print the topic as JSON")
    delete.set_defaults(func=delete_before_cmd)


def delete_before_cmd(args: argparse.Namespace) -> int:
    with connect(args) as client:
        info = client.delete_records(args.topic, args.before)
    start = info.stats.log_start_offset
    emit(
        args,
        topic_json(info),
        f"deleted records of {info.name} before offset {args.before}: log start offset now {start}",
    )
    return 0
