"""``compactlog history TOPIC KEY``: every raw message of one key, oldest first
(Log.GetKeyHistory; tombstones print as ``value=null``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from compactlog.cli.common import connect
from compactlog.cli.data import format_text, message_json


def add_parser(commands: Any) -> None:
    history = commands.add_parser(
        "history", help="print every message of one key, oldest first (tombstones included)"
    )
    history.add_argument("topic", metavar="TOPIC")
    history.add_argument("key", metavar="KEY", help="the key, as UTF-8 text")
    history.add_argument("--limit", type=int, default=0, help="at most N messages (0: all)")
    history.add_argument("--json", action="store_true", help="one JSON object per line")
    history.set_defaults(func=history_cmd)


def history_cmd(args: argparse.Namespace) -> int:
    with connect(args) as client:
        messages = client.get_key_history(args.topic, args.key.encode(), max(args.limit, 0))
    for msg in messages:
        print(json.dumps(message_json(msg), ensure_ascii=False) if args.json else format_text(msg))
    return 0
