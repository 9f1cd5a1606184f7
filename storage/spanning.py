"""Parts of a spanning publish: the front's marker on a part, and what a slot keeps of it.

Under partition placement (``storage/slots.py``) the partitions of one topic live in
several stores, so a publish to ``NAME`` whose records go to several partitions cannot be
one RocksDB write. The front makes it whole across a crash by intent and redo
(``server/front/intents.py``): it records the request's parts durably, then sends each
part to its slot **marked** with the spanning publish's id; a slot stores a marked part at
most once (the part's ids are kept under the id, ``keys.spanning_part_key``, in the same
WriteBatch as its records), so the front can send a part again after a crash, its own or
a shard's, until every part is stored, and gets the first append's ids back.

The marker is one length-delimited field put first in the part's ``PublishRequest`` (a
field the schema does not declare; the batch codec skips every field but ``records`` and
``topic_of`` every field but ``topic``)::

    +------+------+------+--------------------+-------------------------+
    | 0xFA | 0x7F | 0x10 | spanning id  u64 BE | floor  u64 BE           |
    +------+------+------+--------------------+-------------------------+
      tag: field 2047, wire type 2   length 16

``floor``: no spanning publish below this id is still open at the front, so a slot may
forget the parts it keeps below it. Only a call carrying the front's mark may send a
marked part (``server/shards/process.slot_admit``); a server without shards ignores it
as the unknown field it is.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

MARKER_TAG = b"\xfa\x7f\x10"
_IDS = struct.Struct(">QQ")
MARKER_SIZE = len(MARKER_TAG) + _IDS.size
_RUN = struct.Struct(">QQQ")


@dataclass(frozen=True)
class SpanningPart:
    """The marker of one part: the spanning publish's id and the front's floor."""

    txid: int
    floor: int

    def encode(self) -> bytes:
        return MARKER_TAG + _IDS.pack(self.txid, self.floor)


def marker_of(request: bytes) -> SpanningPart | None:
    """The marker a part's request starts with, or None."""
    if len(request) < MARKER_SIZE or not request.startswith(MARKER_TAG):
        return None
    txid, floor = _IDS.unpack_from(request, len(MARKER_TAG))
    return SpanningPart(txid, floor)


def encode_runs(runs: Sequence[tuple[int, int, int]]) -> bytes:
    """A stored part's id runs ``(ledger, first entry, count)``, as a slot keeps them."""
    return b"".join(_RUN.pack(*run) for run in runs)


def decode_runs(data: bytes) -> list[tuple[int, int, int]]:
    if len(data) % _RUN.size:
        raise ValueError(f"spanning part record of {len(data)} bytes is not whole runs")
    return [(int(lid), int(first), int(count)) for lid, first, count in _RUN.iter_unpack(data)]
