"""``compactlog produce``: one record from flags, or lines streamed from stdin.

One record from flags:
    compactlog produce TOPIC --key K --value V [--property K=V ...] [--event-time-ms MS]
    compactlog produce TOPIC --key K --tombstone        # delete key K
    compactlog produce TOPIC --value V                  # a keyless message
A tombstone is never sent by omission: ``--key`` needs ``--value``, ``--tombstone`` or
``--null-value``. On a LEDGER topic an empty value on a keyed record is a tombstone too
(Pulsar), so ``--key K --value ''`` there is refused unless ``--tombstone`` says so.

JSON lines on stdin (no ``--key``/``--value``/``--tombstone``/``--null-value``): see
``cli.json_lines`` for the line format and ``cli.stdin_batches`` for how lines become
batches. ``--lines`` reads plain text instead, one value a line, and ``--key-separator SEP``
key-value lines (kafka-console-producer's habits, ``cli.text_lines``). Lines go out over
one PublishStream as they arrive, so ``tail -f | compactlog produce T`` delivers each line
at once; each batch is atomic, the input as a whole is not.

Ctrl-C while streaming is the Kafka console producer's close, not an abort: reading stops,
the batches already sent get their replies (within ``--timeout``) and are counted in the
summary, and the command exits 130. A second Ctrl-C leaves at once, and the summary then
counts only the batches acknowledged so far.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

from compactlog.cli.common import (
    EXIT_INTERRUPTED,
    UsageError,
    connect,
    key_value,
    positive_int,
    timestamp_ms,
)
from compactlog.cli.interrupts import first_interrupt_stops
from compactlog.cli.json_lines import BadLine, decode_line
from compactlog.cli.output import emit, print_json, wants_json
from compactlog.cli.stdin_batches import LineDecoder, record_batches
from compactlog.cli.text_lines import text_line_decoder
from compactlog.client.client import Client
from compactlog.client.types import MessageId, Record

DEFAULT_BATCH_SIZE = 1000
DEFAULT_BATCH_BYTES = 1 << 20


def add_parser(commands: Any) -> None:
    """Register ``produce`` on the top-level subparsers."""
    produce = commands.add_parser(
        "produce",
        help="publish one record (flags) or JSON lines streamed from stdin",
        description="Publish one record from flags, or JSON lines read from stdin as they come.",
    )
    produce.add_argument("topic", metavar="TOPIC")
    produce.add_argument("--key", metavar="K", default=None, help="record key (UTF-8)")
    value = produce.add_mutually_exclusive_group()
    value.add_argument("--value", metavar="V", default=None, help="record value (UTF-8)")
    value.add_argument(
        "--tombstone", action="store_true", help="delete --key: send it with a null value"
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
        metavar="TIME",
        type=timestamp_ms,
        default=0,
        help="producer timestamp (epoch ms or ISO 8601), 0 = publish time (flag mode)",
    )
    produce.add_argument(
        "--lines",
        action="store_true",
        help="stdin is plain text, each line one value (kafka-console-producer), not JSON",
    )
    produce.add_argument(
        "--key-separator",
        metavar="SEP",
        default=None,
        help="with --lines (implied): split each line at its first SEP into key and value "
        "(kafka-console-producer's parse.key and key.separator)",
    )
    produce.add_argument(
        "--batch-size",
        metavar="N",
        type=positive_int,
        default=DEFAULT_BATCH_SIZE,
        help=f"most stdin records per request (default {DEFAULT_BATCH_SIZE})",
    )
    produce.add_argument(
        "--batch-bytes",
        metavar="N",
        type=positive_int,
        default=DEFAULT_BATCH_BYTES,
        help=f"most stdin bytes per request (default {DEFAULT_BATCH_BYTES})",
    )
    produce.set_defaults(func=produce_cmd)


def _flag_record(args: argparse.Namespace) -> Record:
    """The one record the flags describe, refusing a tombstone nobody asked for."""
    if args.tombstone and args.key is None:
        raise UsageError("--tombstone needs --key K (the key to delete)")
    if args.key is not None and args.value is None and not (args.tombstone or args.null_value):
        raise UsageError("--key needs --value V (or --tombstone to delete the key)")
    return Record(args.key, args.value, dict(args.property), args.event_time_ms)


def _refuse_silent_ledger_tombstone(client: Client, args: argparse.Namespace) -> None:
    if args.key is None or args.value != "":
        return
    if client.get_topic(args.topic).kind == "ledger":
        raise UsageError(
            f"an empty value on a keyed record is a tombstone on LEDGER topic {args.topic} "
            "(Pulsar): give --tombstone to delete the key"
        )


def produce_cmd(args: argparse.Namespace) -> int:
    text = args.lines or args.key_separator is not None
    flags = args.key is not None or args.value is not None or args.tombstone or args.null_value
    if text and flags:
        raise UsageError("--lines and --key-separator read stdin; --key/--value send one record")
    if args.key_separator == "":
        raise UsageError("--key-separator needs at least one character")
    if flags:
        return _produce_one(args)
    if args.property or args.event_time_ms:
        raise UsageError(
            "--property and --event-time-ms go with --key/--value; "
            "on stdin put them in each JSON line"
        )
    if sys.stdin.isatty():
        what = "lines" if text else "JSON lines"
        sys.stderr.write(f"reading {what} from stdin, end with Ctrl-D (or use --key/--value)\n")
    return _produce_stream(args, text)


def _produce_one(args: argparse.Namespace) -> int:
    record = _flag_record(args)
    with connect(args) as client:
        _refuse_silent_ledger_tombstone(client, args)
        mid = client.producer(args.topic).send(*record)
    tombstone = record.key is not None and record.value is None
    emit(args, {"topic": args.topic, "id": str(mid), "tombstone": tombstone}, str(mid))
    return 0


def _decoder(client: Client, args: argparse.Namespace, text: bool) -> LineDecoder:
    """JSON lines, or plain text lines (``--lines``; keyed with ``--key-separator``,
    where a LEDGER topic's kind matters: an empty value is a tombstone there)."""
    if not text:
        return decode_line
    ledger = args.key_separator is not None and client.get_topic(args.topic).kind == "ledger"
    return text_line_decoder(args.key_separator, ledger)


def _produce_stream(args: argparse.Namespace, text: bool) -> int:
    ids: list[MessageId] = []
    stop = threading.Event()
    try:
        with first_interrupt_stops(stop), connect(args) as client:
            decode = _decoder(client, args, text)
            batches = record_batches(
                sys.stdin.buffer, args.batch_size, args.batch_bytes, stop, decode
            )
            for batch_ids in client.producer(args.topic).send_stream(batches):
                ids.extend(batch_ids)
    except BadLine as exc:  # what came before the bad line is published
        raise BadLine(f"{exc}; {_summary(args.topic, ids)} before it") from None
    except KeyboardInterrupt:
        sys.stderr.write(f"\n{_summary(args.topic, ids)} before the second interrupt")
        raise
    if stop.is_set():
        sys.stderr.write(f"\n{_summary(args.topic, ids)} before the interrupt\n")
        return EXIT_INTERRUPTED
    if wants_json(args):
        first, last = (str(ids[0]), str(ids[-1])) if ids else (None, None)
        print_json({"topic": args.topic, "produced": len(ids), "first_id": first, "last_id": last})
    elif ids:
        print(f"{_summary(args.topic, ids)} ({ids[0]} .. {ids[-1]})")
    else:
        print(f"produced 0 messages to {args.topic} (no input)")
    return 0


def _summary(topic: str, ids: list[MessageId]) -> str:
    return f"produced {len(ids)} message{'' if len(ids) == 1 else 's'} to {topic}"
