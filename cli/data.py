"""``compactlog read``: print a topic's messages, raw or compacted, once or following.

Each message is one line: ``LEDGER:ENTRY key=K value=V`` as text, or one JSON object with
``--output json`` (``cli.output`` has both shapes, tombstones marked in each). The topic's
kind is looked up first, since on LEDGER topics an empty value on a keyed message is a
tombstone too.
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
from typing import Any, cast

from compactlog.cli.common import (
    EXIT_INTERRUPTED,
    UINT64_MAX,
    UsageError,
    connect,
    non_negative_int,
    offset,
    timestamp_ms,
)
from compactlog.cli.interrupts import first_interrupt_stops
from compactlog.cli.output import (
    add_json_flag,
    format_text,
    message_json,
    message_lines,
)
from compactlog.client.client import Client
from compactlog.client.reader import Reader, StartLike
from compactlog.client.types import MessageId, TopicInfo

__all__ = [
    "add_parsers",
    "format_text",
    "message_json",
    "parse_id",
    "parse_start",
    "read_cmd",
    "resolve_start",
]

_ID = re.compile(r"[0-9]+:[0-9]+")


def add_parsers(commands: Any) -> None:
    """Register ``read`` on the top-level subparsers."""
    read = commands.add_parser("read", help="print messages of a topic")
    read.add_argument("topic", metavar="TOPIC")
    read.add_argument(
        "--compacted", action="store_true", help="read the compacted view (latest value per key)"
    )
    start = read.add_mutually_exclusive_group()
    start.add_argument(
        "--from",
        dest="start",
        metavar="earliest|latest|LEDGER:ENTRY|OFFSET",
        type=parse_start,
        default="earliest",
        help="start position, an id is inclusive; a bare OFFSET on SEGMENTED topics "
        "(default earliest)",
    )
    start.add_argument(
        "--from-beginning",
        dest="start",
        action="store_const",
        const="earliest",
        help="= --from earliest (kafka-console-consumer's name)",
    )
    read.add_argument(
        "--follow", "-f", action="store_true", help="keep reading new messages until interrupted"
    )
    read.add_argument(
        "--limit",
        "--max-messages",
        dest="limit",
        metavar="N",
        type=non_negative_int,
        default=0,
        help="stop after N messages (0 = no limit; --max-messages is kafka-console-consumer's "
        "name)",
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
        type=timestamp_ms,
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
    return MessageId(partition=0, ledger_id=ledger, entry_id=entry)


def parse_start(text: str) -> str | MessageId | int:
    """argparse type for ``--from``: earliest, latest, LEDGER:ENTRY, or a bare offset
    (an ``int``: SEGMENTED topics only, checked once the topic's kind is known)."""
    lowered = text.strip().lower()
    if lowered in ("earliest", "latest"):
        return lowered
    if lowered.isdigit():
        return offset(lowered)
    if not _ID.fullmatch(lowered):
        raise argparse.ArgumentTypeError(
            f"expected earliest, latest, LEDGER:ENTRY (e.g. 1:0) or, on a SEGMENTED topic, "
            f"an offset (e.g. 445), got {text!r}"
        )
    return parse_id(lowered)


def resolve_start(info: TopicInfo, start: str | MessageId | int, option: str) -> StartLike:
    """A bare offset made the id ``0:OFFSET`` of a SEGMENTED topic; refused elsewhere."""
    if isinstance(start, str):
        return cast(StartLike, start)  # earliest or latest: parse_start let nothing else by
    if isinstance(start, MessageId):
        return start
    if info.kind != "segmented":
        raise UsageError(
            f"{option} {start}: a bare offset is a SEGMENTED topic's; {info.name} is a "
            f"LEDGER topic, give LEDGER:ENTRY (e.g. 1:0) or earliest/latest"
        )
    if info.partitions:
        raise UsageError(
            f"{option} {start}: {info.name} has {info.partitions} partitions, each with its "
            f"own offsets: read {info.name}-partition-N from an offset"
        )
    return MessageId(partition=0, ledger_id=0, entry_id=start)


def read_cmd(args: argparse.Namespace) -> int:
    """Print the messages; Ctrl-C ends the read (exit 130) through ``cli.interrupts``:
    the stream is cancelled from a helper thread, never interrupted by an exception."""
    stop = threading.Event()
    readers: list[Reader] = []

    def cancel() -> None:
        for reader in readers:
            reader.close()

    with first_interrupt_stops(stop, cancel), connect(args) as client:
        info = client.get_topic(args.topic)
        if not stop.is_set():
            start = resolve_start(info, args.start, "--from")
            _print_messages(args, client, start, info.kind == "ledger", readers, stop)
    if stop.is_set():
        sys.stderr.write("\n")
        return EXIT_INTERRUPTED
    return 0


def _print_messages(
    args: argparse.Namespace,
    client: Client,
    start: StartLike,
    ledger: bool,
    readers: list[Reader],
    stop: threading.Event,
) -> None:
    with client.reader(
        args.topic,
        start=start,
        read_compacted=args.compacted,
        follow=args.follow,
        max_messages=args.limit,
        as_of=args.as_of,
        as_of_time_ms=args.as_of_time,
    ) as reader:
        readers.append(reader)
        if stop.is_set():  # the interrupt came while the stream opened
            reader.close()
        printed = 0
        for batch in reader.batches():  # a response at a time, written at once
            if args.limit:
                batch = batch[: args.limit - printed]
            sys.stdout.write(message_lines(args, batch, ledger))
            sys.stdout.flush()  # what came is shown now (--follow), not when a buffer fills
            printed += len(batch)
            if (args.limit and printed >= args.limit) or stop.is_set():
                break
