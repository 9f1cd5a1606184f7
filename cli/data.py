"""``compactlog produce`` and ``compactlog read``.

produce, one record from flags:
    compactlog produce TOPIC --key K --value V [--property K=V ...] [--event-time-ms MS]
  ``--value`` omitted (with ``--key`` or ``--null-value``) sends a null value: on a keyed
  record that is a tombstone. ``--value ''`` sends an empty value.

produce, JSON lines on stdin (when neither --key, --value nor --null-value is given):
    {"key": "k", "value": "v", "properties": {"a": "b"}, "event_time_ms": 0}
  ``key``/``value``: a UTF-8 string or null; an absent field means null. Binary data:
  ``"value_b64": "AAEC"`` (the base64 data), or ``"value": "AAEC", "value_b64": true``
  (what ``read --json`` prints), same for ``key``. ``id`` and ``publish_time_ms`` are
  ignored, so ``read --json`` output can be fed back. The whole input is validated before
  anything is sent: a bad line (reported with its number) sends nothing. Records then go
  out in batches over one PublishStream; each batch is atomic, the input as a whole is not
  (a server error mid-way leaves the earlier batches published).

read prints ``LEDGER:ENTRY key=K value=V`` per message (``null`` for an absent key or
value; bytes that are not printable UTF-8 as ``b64:...``), or with ``--json`` one object
per line: id, key, value (``key_b64``/``value_b64`` true when base64), properties,
publish_time_ms, event_time_ms.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import datetime
import json
import sys
from collections.abc import Iterator
from typing import IO, Any

from compactlog.cli.common import (
    UsageError,
    connect,
    key_value,
    non_negative_int,
    positive_int,
)
from compactlog.client.types import Message, MessageId, Record

DEFAULT_BATCH_SIZE = 1000
_IGNORED_FIELDS = frozenset({"id", "publish_time_ms"})
_KNOWN_FIELDS = (
    frozenset({"key", "value", "key_b64", "value_b64", "properties", "event_time_ms"})
    | _IGNORED_FIELDS
)


def add_parsers(commands: Any) -> None:
    """Register ``produce`` and ``read`` on the top-level subparsers."""
    produce = commands.add_parser(
        "produce",
        help="publish one record (flags) or JSON lines from stdin",
        description="Publish one record from flags, or JSON lines read from stdin.",
    )
    produce.add_argument("topic", metavar="TOPIC")
    produce.add_argument("--key", metavar="K", default=None, help="record key (UTF-8)")
    value = produce.add_mutually_exclusive_group()
    value.add_argument(
        "--value",
        metavar="V",
        default=None,
        help="record value (UTF-8); omitted with --key means a null value",
    )
    value.add_argument(
        "--null-value", action="store_true", help="send a null value (with --key: a tombstone)"
    )
    produce.add_argument(
        "--property",
        metavar="KEY=VALUE",
        type=key_value,
        action="append",
        default=[],
        help="message property, repeatable (flag mode)",
    )
    produce.add_argument(
        "--event-time-ms",
        metavar="MS",
        type=non_negative_int,
        default=0,
        help="producer timestamp, 0 = publish time (flag mode)",
    )
    produce.add_argument(
        "--batch-size",
        metavar="N",
        type=positive_int,
        default=DEFAULT_BATCH_SIZE,
        help=f"stdin records per request (default {DEFAULT_BATCH_SIZE})",
    )
    produce.set_defaults(func=produce_cmd)

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
    read.add_argument("--json", action="store_true", help="one JSON object per line")
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
    """argparse type for ``--as-of``: LEDGER:ENTRY."""
    ledger, sep, entry = text.strip().partition(":")
    if sep and ledger.isdigit() and entry.isdigit():
        return MessageId(int(ledger), int(entry))
    raise argparse.ArgumentTypeError(f"expected LEDGER:ENTRY (e.g. 1:0), got {text!r}")


def parse_time_ms(text: str) -> int:
    """argparse type for ``--as-of-time``: epoch milliseconds or an ISO 8601 time (UTC
    when it names no zone)."""
    text = text.strip()
    if text.isdigit():
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
    ledger, sep, entry = lowered.partition(":")
    if sep and ledger.isdigit() and entry.isdigit():
        return MessageId(int(ledger), int(entry))
    raise argparse.ArgumentTypeError(
        f"expected earliest, latest or LEDGER:ENTRY (e.g. 1:0), got {text!r}"
    )


# -- produce ----------------------------------------------------------------------------


def _field_bytes(obj: dict[str, Any], name: str, lineno: int) -> bytes | None:
    """``key`` or ``value`` of one JSON line, with its ``*_b64`` companion applied."""
    b64 = obj.get(f"{name}_b64")
    raw = obj.get(name)
    where = f"line {lineno}"
    if isinstance(b64, str):
        if name in obj:
            raise UsageError(f"{where}: give {name!r} or {name + '_b64'!r} data, not both")
        raw, b64 = b64, True
    elif b64 is not None and not isinstance(b64, bool):
        raise UsageError(f"{where}: {name + '_b64'!r} must be base64 text or true/false")
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise UsageError(f"{where}: {name!r} must be a string or null, not {type(raw).__name__}")
    if b64:
        try:
            return base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            raise UsageError(f"{where}: {name!r} is not valid base64") from None
    return raw.encode("utf-8")


def parse_record(line: str, lineno: int) -> Record:
    """One JSON line → ``Record``; a ``UsageError`` naming the line when it is malformed."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UsageError(f"line {lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise UsageError(f'line {lineno}: expected a JSON object like {{"key": ..., "value": ...}}')
    unknown = sorted(set(obj) - _KNOWN_FIELDS)
    if unknown:
        raise UsageError(
            f"line {lineno}: unknown field {unknown[0]!r} (known: key, value, "
            "key_b64, value_b64, properties, event_time_ms)"
        )
    props = obj.get("properties") or {}
    if not isinstance(props, dict) or not all(isinstance(v, str) for v in props.values()):
        raise UsageError(f"line {lineno}: 'properties' must be an object of string values")
    event_time = obj.get("event_time_ms", 0)
    if event_time is None:
        event_time = 0
    if isinstance(event_time, bool) or not isinstance(event_time, int) or event_time < 0:
        raise UsageError(f"line {lineno}: 'event_time_ms' must be a whole number >= 0")
    return Record(
        _field_bytes(obj, "key", lineno), _field_bytes(obj, "value", lineno), props, event_time
    )


def parse_lines(stream: IO[bytes]) -> list[Record]:
    """Every record of the input, all validated before any is sent; blank lines are skipped."""
    records: list[Record] = []
    for lineno, raw in enumerate(stream, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError(f"line {lineno}: not UTF-8 text (use key_b64/value_b64)") from None
        if line.strip():
            records.append(parse_record(line, lineno))
    return records


def _batches(records: list[Record], size: int) -> Iterator[list[Record]]:
    for start in range(0, len(records), size):
        yield records[start : start + size]


def produce_cmd(args: argparse.Namespace) -> int:
    flag_mode = args.key is not None or args.value is not None or args.null_value
    if flag_mode:
        record = Record(args.key, args.value, dict(args.property), args.event_time_ms)
        with connect(args) as client:
            mid = client.producer(args.topic).send(*record)
        print(mid)
        return 0
    if args.property or args.event_time_ms:
        raise UsageError(
            "--property and --event-time-ms go with --key/--value; "
            "on stdin put them in each JSON line"
        )
    if sys.stdin.isatty():
        sys.stderr.write("reading JSON lines from stdin, end with Ctrl-D (or use --key/--value)\n")
    records = parse_lines(sys.stdin.buffer)
    if not records:
        print(f"produced 0 messages to {args.topic} (no input)")
        return 0
    with connect(args) as client:
        producer = client.producer(args.topic)
        ids: list[MessageId] = []
        for batch_ids in producer.send_stream(_batches(records, args.batch_size)):
            ids.extend(batch_ids)
    print(f"produced {len(ids)} messages to {args.topic} ({ids[0]} .. {ids[-1]})")
    return 0


# -- read -------------------------------------------------------------------------------


def _text(data: bytes | None) -> str:
    if data is None:
        return "null"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "b64:" + base64.b64encode(data).decode("ascii")
    return text if text.isprintable() else "b64:" + base64.b64encode(data).decode("ascii")


def format_text(msg: Message) -> str:
    return f"{msg.id} key={_text(msg.key)} value={_text(msg.value)}"


def message_json(msg: Message) -> dict[str, Any]:
    """A message as JSON data that ``produce`` accepts back (binary as base64 + flag)."""
    out: dict[str, Any] = {"id": str(msg.id)}
    for name, data in (("key", msg.key), ("value", msg.value)):
        if data is None:
            out[name] = None
            continue
        try:
            out[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            out[name] = base64.b64encode(data).decode("ascii")
            out[f"{name}_b64"] = True
    out["properties"] = dict(msg.properties)
    out["publish_time_ms"] = msg.publish_time_ms
    out["event_time_ms"] = msg.event_time_ms
    return out


def read_cmd(args: argparse.Namespace) -> int:
    with (
        connect(args) as client,
        client.reader(
            args.topic,
            start=args.start,
            read_compacted=args.compacted,
            follow=args.follow,
            max_messages=args.limit,
            as_of=args.as_of,
            as_of_time_ms=args.as_of_time,
        ) as reader,
    ):
        for count, msg in enumerate(reader, start=1):
            if args.json:
                print(json.dumps(message_json(msg), ensure_ascii=False), flush=args.follow)
            else:
                print(format_text(msg), flush=args.follow)
            if args.limit and count >= args.limit:
                break
    return 0
