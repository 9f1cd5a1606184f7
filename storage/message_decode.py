"""A stored message record decoded into a ``StoredMessage``: the codec's one reader of the
record's fields (layout in ``storage.batch``'s docstring).

Not a hot path: reads send stored bytes as they are; this serves tools, tests, key
history and the few places that need a message's fields as Python values.
"""

from __future__ import annotations

from collections.abc import Iterator

from compactlog.storage.protowire import read_varint
from compactlog.storage.types import MessageId, StoredMessage


def _signed(n: int) -> int:
    return n - 2**64 if n >= 2**63 else n


def _fields(buf: bytes, p: int, end: int) -> Iterator[tuple[int, int | bytes]]:
    while p < end:
        tag, p = read_varint(buf, p, end)
        if tag & 7 == 0:
            value, p = read_varint(buf, p, end)
            yield tag >> 3, value
        else:
            n, p = read_varint(buf, p, end)
            yield tag >> 3, bytes(buf[p : p + n])
            p += n


def decode_message(record: bytes) -> StoredMessage:
    """One message record (tag and length included) as a domain message. Not a hot path:
    reads send stored bytes as they are; this serves tools, tests and key history."""
    n, p = read_varint(record, 1, len(record))
    ledger_id = entry_id = publish = event = 0
    key: bytes | None = None
    value: bytes | None = None
    props: dict[str, str] = {}
    for field, data in _fields(record, p, p + n):
        if field == 1 and isinstance(data, bytes):
            for f, v in _fields(data, 0, len(data)):
                if f == 1 and isinstance(v, int):
                    ledger_id = v
                elif f == 2 and isinstance(v, int):
                    entry_id = v
        elif field == 2 and isinstance(data, bytes):
            key = data
        elif field == 3 and isinstance(data, bytes):
            value = data
        elif field == 4 and isinstance(data, bytes):
            entry = dict(_fields(data, 0, len(data)))
            k, v = entry.get(1, b""), entry.get(2, b"")
            if isinstance(k, bytes) and isinstance(v, bytes):
                props[k.decode()] = v.decode()
        elif field == 5 and isinstance(data, int):
            publish = _signed(data)
        elif field == 6 and isinstance(data, int):
            event = _signed(data)
    return StoredMessage(MessageId(ledger_id, entry_id), key, value, props, publish, event)
