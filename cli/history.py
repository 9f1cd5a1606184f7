"""``compactlog history TOPIC KEY``: every raw message of one key, oldest first
(Log.GetKeyHistory; tombstones print as ``tombstone``, ``cli.output``)."""

from __future__ import annotations

import argparse
from typing import Any

from compactlog.cli.common import connect, non_negative_int
from compactlog.cli.output import add_json_flag, print_message


def add_parser(commands: Any) -> None:
    history = commands.add_parser(
        "history", help="print every message of one key, oldest first (tombstones included)"
    )
    history.add_argument("topic", metavar="TOPIC")
    history.add_argument("key", metavar="KEY", help="the key, as UTF-8 text")
    history.add_argument(
        "--limit", type=non_negative_int, default=0, help="at most N messages (0: all)"
    )
    add_json_flag(history, "one JSON object per line")
    history.set_defaults(func=history_cmd)


def history_cmd(args: argparse.Namespace) -> int:
    with connect(args) as client:
        ledger = client.get_topic(args.topic).kind == "ledger"
        messages = client.get_key_history(args.topic, args.key.encode(), args.limit)
    for msg in messages:
        print_message(args, msg, ledger, flush=False)
    return 0
