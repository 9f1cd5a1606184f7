"""The JSON lines ``produce`` reads from stdin, one record a line:

    {"key": "k", "value": "v", "properties": {"a": "b"}, "event_time_ms": 0}
    {"key": "k", "tombstone": true}          # delete key k (or "value": null)

``key``/``value``: a UTF-8 string or null. Binary data: ``"value_b64": "AAEC"`` (the base64
data), or ``"value": "AAEC", "value_b64": true`` (what ``read --output json`` prints), same
for ``key``. A keyed line must say what it sends: a ``value`` (``null`` is a tombstone, said
out loud) or ``"tombstone": true``; a keyed line with neither is an error, so a misspelt
field never deletes a key. ``id`` and ``publish_time_ms`` are ignored, so ``read`` output can
be fed back.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from compactlog.cli.common import INT64_MAX, UsageError
from compactlog.client.types import Record


class BadLine(UsageError):
    """A stdin line that is not a record; the message starts with ``line N:``."""


# Where a plain text line meets the JSON default: the way to send it as it is.
TEXT_HINT = (
    "; to send plain text lines as values, give --lines (key:value lines: --key-separator :)"
)
_IGNORED_FIELDS = frozenset({"id", "publish_time_ms"})
_KNOWN_FIELDS = (
    frozenset({"key", "value", "key_b64", "value_b64", "tombstone", "properties", "event_time_ms"})
    | _IGNORED_FIELDS
)


def _field_bytes(obj: dict[str, Any], name: str, where: str) -> bytes | None:
    """``key`` or ``value`` of one JSON line, with its ``*_b64`` companion applied."""
    b64 = obj.get(f"{name}_b64")
    raw = obj.get(name)
    if isinstance(b64, str):
        if name in obj:
            raise BadLine(f"{where}: give {name!r} or {name + '_b64'!r} data, not both")
        raw, b64 = b64, True
    elif b64 is not None and not isinstance(b64, bool):
        raise BadLine(f"{where}: {name + '_b64'!r} must be base64 text or true/false")
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise BadLine(f"{where}: {name!r} must be a string or null, not {type(raw).__name__}")
    if b64:
        try:
            return base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            raise BadLine(f"{where}: {name!r} is not valid base64") from None
    return raw.encode("utf-8")


def _says_value(obj: dict[str, Any]) -> bool:
    return "value" in obj or isinstance(obj.get("value_b64"), str)


def _value(obj: dict[str, Any], key: bytes | None, where: str) -> bytes | None:
    """The value, with the tombstone rules: explicit, never by omission."""
    tombstone = obj.get("tombstone", False)
    if not isinstance(tombstone, bool):
        raise BadLine(f"{where}: 'tombstone' must be true or false")
    value = _field_bytes(obj, "value", where)
    if tombstone:
        if key is None:
            raise BadLine(f"{where}: a tombstone needs a 'key'")
        if value:
            raise BadLine(f"{where}: a tombstone has no value (drop 'value' or 'tombstone')")
        return value  # None, or b"" as read back from a LEDGER topic
    if key is not None and not _says_value(obj):
        raise BadLine(
            f"{where}: a keyed record needs a 'value' (to delete the key say "
            '"tombstone": true or "value": null)'
        )
    return value


def parse_record(line: str, lineno: int) -> Record:
    """One JSON line → ``Record``; a ``BadLine`` naming the line when it is malformed."""
    where = f"line {lineno}"
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise BadLine(f"{where}: invalid JSON: {exc.msg} (column {exc.colno}){TEXT_HINT}") from None
    if not isinstance(obj, dict):
        raise BadLine(
            f'{where}: expected a JSON object like {{"key": ..., "value": ...}}{TEXT_HINT}'
        )
    unknown = sorted(set(obj) - _KNOWN_FIELDS)
    if unknown:
        raise BadLine(
            f"{where}: unknown field {unknown[0]!r} (known: key, value, "
            "key_b64, value_b64, tombstone, properties, event_time_ms)"
        )
    props = obj.get("properties") or {}
    if not isinstance(props, dict) or not all(isinstance(v, str) for v in props.values()):
        raise BadLine(f"{where}: 'properties' must be an object of string values")
    event_time = obj.get("event_time_ms", 0)
    if event_time is None:
        event_time = 0
    if (
        isinstance(event_time, bool)
        or not isinstance(event_time, int)
        or not 0 <= event_time <= INT64_MAX
    ):
        raise BadLine(f"{where}: 'event_time_ms' must be a whole number in [0, {INT64_MAX}]")
    key = _field_bytes(obj, "key", where)
    return Record(key, _value(obj, key, where), props, event_time)


def decode_line(raw: bytes, lineno: int) -> Record | None:
    """One raw stdin line → a record, or ``None`` for a blank line."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadLine(f"line {lineno}: not UTF-8 text (use key_b64/value_b64)") from None
    return parse_record(line, lineno) if line.strip() else None
