"""Plain text lines on stdin, kafka-console-producer's way: ``produce TOPIC --lines``.

Each line is one record's value, as the bytes stand (no decoding, so any encoding passes),
without its line end (``\\n`` or ``\\r\\n``); an empty line is an empty value, as the console
producer sends it. ``--key-separator SEP`` (the console producer's ``parse.key=true`` with
``key.separator``) splits each line at its first SEP into key and value; a line without
SEP stops the input there with an error naming the line, as ``parse.key`` does. A keyed
line with nothing after SEP is an empty value: on a LEDGER topic that is a tombstone
(Pulsar), so there it is refused unless said in a JSON line (``"tombstone": true``).
"""

from __future__ import annotations

from collections.abc import Callable

from compactlog.cli.json_lines import BadLine
from compactlog.client.types import Record

LineDecoder = Callable[[bytes, int], Record | None]
_SHOWN = 60  # bytes of a bad line quoted in its error


def _shown(line: bytes) -> str:
    text = line[:_SHOWN].decode("utf-8", "replace")
    return repr(text + ("..." if len(line) > _SHOWN else ""))


def text_line_decoder(separator: str | None, ledger: bool) -> LineDecoder:
    """The decoder of ``--lines`` (keyless values) or, with ``separator``, of key-value
    lines; ``ledger``: the topic is a LEDGER topic (empty keyed values are tombstones)."""
    sep = separator.encode("utf-8") if separator is not None else None

    def decode(raw: bytes, lineno: int) -> Record:
        line = raw[:-1] if raw.endswith(b"\r") else raw
        if sep is None:
            return Record(None, line)
        key, found, value = line.partition(sep)
        if not found:
            raise BadLine(f"line {lineno}: no key separator {separator!r} in {_shown(line)}")
        if ledger and not value:
            raise BadLine(
                f"line {lineno}: an empty value on a keyed record is a tombstone on LEDGER "
                f'topics; to delete key {_shown(key)} send a JSON line with "tombstone": true'
            )
        return Record(key, value)

    return decode
