"""``compactlog read``: print a topic's messages, raw or compacted, once or following.

Each message is one line: ``LEDGER:ENTRY key=K value=V`` as text, or one JSON object with
``--output json`` (``cli.output`` has both shapes, tombstones marked in each). The topic's
kind is looked up first, since on LEDGER topics an empty value on a keyed message is a
tombstone too.
"""

from __future__ import annotations

import argparse
import datetime
import re
from typing import Any

from compactlog.cli.common import INT64_MAX, UINT64_MAX, connect, non_negative_int
from compactlog.cli.output import add_json_flag, format_text, message_json, print_message
from compactlog.client.types import MessageId

__all__ = ["add_parsers", "format_text", "message_json", "parse_id", "parse_start", "read_cmd"]

_ID = re.compile(r"[0-9]+:[0-9]+")


def add_parsers(commands: Any) -> None:
    """Register ``read`` on the top-level subparsers."""
    read = commands.add_parser("read", help="print messages of a topic")
    read.add_argument("topic", metavar="TOPIC")
    read.add_argument(
        "--compacted", action="store_true", help="read the compacted view (latest value per key)"
    )
    read.add_argument(
        "--from",
        dest="start",
        metavar="earliest|latest|LEDGER:ENTRY",
        type=parse_start,
        default="earliest",
        help="start position, an id is inclusive (default earliest)",
    )
    read.add_argument(
        "--follow", "-f", action="store_true", help="keep reading new messages until interrupted"
    )
    read.add_argument(
        "--limit",
        metavar="N",
        type=non_negative_int,
        default=0,
        help="stop after N messages (0 = no limit)",
    )
    add_json_flag(read, "one JSON object per line")
    past = read.add_mutually_exclusive_group()
    past.add_argument(
        "--as-of",
        metavar="LEDGER:ENTRY",
        type=parse_id,
        default=None,
        help="with --compacted: the compacted view as of this id (LEDGER topics)",
    )
    past.add_argument(
        "--as-of-time",
        metavar="TIME",
        type=parse_time_ms,
        default=None,
        help="with --compacted: as of the last id published at or before TIME "
        "(ISO 8601, e.g. 2026-11-23T21:00:00Z, or epoch milliseconds)",
    )
    read.set_defaults(func=read_cmd)


def parse_id(text: str) -> MessageId:
    """``LEDGER:ENTRY`` (each a uint64) → ``MessageId``; ``ArgumentTypeError`` otherwise."""
    text = text.strip()
    if not _ID.fullmatch(text):
        raise argparse.ArgumentTypeError(f"expected LEDGER:ENTRY (e.g. 1:0), got {text!r}")
    ledger, entry = (int(part) for part in text.split(":"))
    if max(ledger, entry) > UINT64_MAX:
        raise argparse.ArgumentTypeError(
            f"message id {text} is out of range (ledger and entry are at most {UINT64_MAX})"
        )
    return MessageId(ledger, entry)


def parse_time_ms(text: str) -> int:
    """argparse type for ``--as-of-time``: epoch milliseconds or an ISO 8601 time (UTC
    when it names no zone)."""
    text = text.strip()
    if text.isdigit():
        if int(text) > INT64_MAX:
            raise argparse.ArgumentTypeError(f"expected a time <= {INT64_MAX} ms, got {text}")
        return int(text)
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 time or epoch milliseconds, got {text!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return int(when.timestamp() * 1000)


def parse_start(text: str) -> str | MessageId:
    """argparse type for ``--from``: earliest, latest or LEDGER:ENTRY."""
    lowered = text.strip().lower()
    if lowered in ("earliest", "latest"):
        return lowered
    if not _ID.fullmatch(lowered):
        raise argparse.ArgumentTypeError(
            f"expected earliest, latest or LEDGER:ENTRY (e.g. 1:0), got {text!r}"
        )
    return parse_id(lowered)


def read_cmd(args: argparse.Namespace) -> int:
    with connect(args) as client:
        ledger = client.get_topic(args.topic).kind == "ledger"
        with client.reader(
            args.topic,
            start=args.start,
            read_compacted=args.compacted,
            follow=args.follow,
            max_messages=args.limit,
            as_of=args.as_of,
            as_of_time_ms=args.as_of_time,
        ) as reader:
            for count, msg in enumerate(reader, start=1):
                print_message(args, msg, ledger, flush=args.follow)
                if args.limit and count >= args.limit:
                    break
    return 0
