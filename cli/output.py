"""How every command prints what it found: ``--output text`` (the default, for people) or
``--output json`` (for programs).

``--output`` is global (it may stand anywhere on the line, like ``--server``); the older
per-command ``--json`` flags mean the same as ``--output json``. A command prints through
``emit``: one JSON object per call in JSON mode (so a listing or a read is JSON lines, one
object per topic or message, ready for ``jq``), its text otherwise. Errors are never
printed here: they stay one line on stderr in either mode.

Messages are printed here too, so ``read`` and any later command that shows messages agree:
text ``ID key=K value=V``, where an absent key or value is ``<null>``, bytes that are not
printable UTF-8 (or that would read like one of these markers) are ``b64:...``, and a
tombstone ends in ``tombstone`` instead of a value, so it never looks like the string
``"null"``. JSON: ``id``, ``key``, ``value`` (``key_b64``/``value_b64`` true when base64),
``tombstone``, ``properties``, ``publish_time_ms``, ``event_time_ms`` — what ``produce``
takes back.
"""

from __future__ import annotations

import argparse
import base64
import json
from collections.abc import Callable, Sequence
from typing import Any

from compactlog.client.types import Message

FORMATS = ("text", "json")
NULL = "<null>"
B64 = "b64:"


def add_output_option(parser: argparse.ArgumentParser) -> None:
    """The global ``--output text|json`` (top-level parser; ``argv`` moves it there)."""
    parser.add_argument(
        "--output",
        choices=FORMATS,
        default=None,
        help="text for people (default) or json for programs: one JSON object per line",
    )


def add_json_flag(parser: argparse.ArgumentParser, what: str = "print JSON") -> None:
    """A command's own ``--json``: the same as ``--output json`` (kept for old scripts)."""
    parser.add_argument("--json", action="store_true", help=f"{what} (same as --output json)")


def wants_json(args: argparse.Namespace) -> bool:
    return getattr(args, "output", None) == "json" or bool(getattr(args, "json", False))


_JSON = json.JSONEncoder(ensure_ascii=False)  # one encoder, not one a call (json.dumps's)


def print_json(data: Any, flush: bool = False) -> None:
    """One compact JSON object on one line (non-ASCII text kept as is)."""
    print(_JSON.encode(data), flush=flush)


def emit(
    args: argparse.Namespace, data: Any, text: str | Callable[[], str], flush: bool = False
) -> None:
    """Print ``data`` as one JSON line in JSON mode, else ``text`` (a string or a maker)."""
    if wants_json(args):
        print_json(data, flush=flush)
    else:
        print(text if isinstance(text, str) else text(), flush=flush)


# -- messages ---------------------------------------------------------------------------


def is_tombstone(msg: Message, ledger: bool = False) -> bool:
    """A keyed message with a null value; on LEDGER topics an empty value too (Pulsar)."""
    if msg.key is None:
        return False
    data = msg.data()
    return data is None or (ledger and data == b"")


def text_field(data: bytes | None) -> str:
    """Printable UTF-8 as is; null as ``<null>``; anything else (or ambiguous) as base64."""
    if data is None:
        return NULL
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    else:
        if text.isprintable() and text != NULL and not text.startswith(B64):
            return text
    return B64 + base64.b64encode(data).decode("ascii")


def format_text(msg: Message, ledger: bool = False) -> str:
    if is_tombstone(msg, ledger):
        return f"{msg.id} key={text_field(msg.key)} tombstone"
    return f"{msg.id} key={text_field(msg.key)} value={text_field(msg.data())}"


def message_json(msg: Message, ledger: bool = False) -> dict[str, Any]:
    """A message as JSON data that ``produce`` accepts back (binary as base64 + flag)."""
    out: dict[str, Any] = {"id": str(msg.id)}
    for name, data in (("key", msg.key), ("value", msg.data())):
        if data is None:
            out[name] = None
            continue
        try:
            out[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            out[name] = base64.b64encode(data).decode("ascii")
            out[f"{name}_b64"] = True
    out["tombstone"] = is_tombstone(msg, ledger)
    out["properties"] = dict(msg.properties)
    out["publish_time_ms"] = msg.publish_time_ms
    out["event_time_ms"] = msg.event_time_ms
    return out


def message_lines(args: argparse.Namespace, messages: Sequence[Message], ledger: bool) -> str:
    """``messages`` as the lines ``print_message`` prints, each ending in a newline: a
    reader's whole response written at once (one write, where Python's stdout may write
    each line by itself: ``PYTHONUNBUFFERED``, as containers often set)."""
    if wants_json(args):
        return "".join([_JSON.encode(message_json(m, ledger)) + "\n" for m in messages])
    return "".join([format_text(m, ledger) + "\n" for m in messages])


def print_message(args: argparse.Namespace, msg: Message, ledger: bool, flush: bool) -> None:
    if wants_json(args):
        print_json(message_json(msg, ledger), flush=flush)
    else:
        print(format_text(msg, ledger), flush=flush)
