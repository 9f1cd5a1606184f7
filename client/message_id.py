"""``MessageId`` as pulsar-client users know it: ``ledger_id``, ``entry_id``, ``partition``,
``MessageId.earliest`` / ``MessageId.latest``, ``serialize()`` / ``deserialize()``, and
``str(id)`` = ``"ledger:entry"`` (``"ledger:entry:partition"`` for a partition other than
0) read back by ``MessageId.parse``.

It is the shared ``compactlog.records.MessageId`` (a ``(ledger_id, entry_id)`` tuple, as
the CLI, the storage engine and older callers use it) with the partition index beside it
(CONTRACT section 9): an id of partition 0 is equal to, hashes like and unpacks like the
plain pair, and ids of other partitions differ from it. Ids order by ledger, then entry,
as within one partition; ids of different partitions have no order of their own.

``serialize()`` layout, 21 bytes, big-endian::

    version (u8, 1) | ledger_id (i64) | entry_id (i64) | partition (i32)

signed as in Pulsar, so ``earliest`` (-1:-1) and ``latest`` (2^63-1:2^63-1) round-trip.
"""

from __future__ import annotations

import struct
from typing import Any, ClassVar

from compactlog import records
from compactlog.errors import InvalidArgument

__all__ = ["MessageId"]

_LAYOUT = struct.Struct(">BqqI")
_VERSION = 1
_I64 = (-(2**63), 2**63 - 1)
_I32 = (-(2**31), 2**31 - 1)


class MessageId(records.MessageId):
    """A message's position: ``(ledger_id, entry_id)`` plus ``partition`` (0 if none)."""

    earliest: ClassVar[MessageId]
    """The start of a topic, for ``create_reader`` (pulsar-client's ``MessageId.earliest``)."""
    latest: ClassVar[MessageId]
    """After the last message at the time of the call (``MessageId.latest``)."""

    partition: int = 0  # an instance sets its own; this default serves tuple-level copies

    def __new__(cls, ledger_id: int, entry_id: int, partition: int = 0) -> MessageId:
        self: MessageId = tuple.__new__(cls, (ledger_id, entry_id))
        if partition:  # partition 0 is the class default: no per-id dict on the read path
            self.partition = partition
        return self

    @classmethod
    def of(cls, mid: records.MessageId | tuple[int, int]) -> MessageId:
        """This class for a plain ``(ledger, entry)`` pair; an instance is returned as is."""
        if isinstance(mid, MessageId):
            return mid
        ledger, entry = mid
        return cls(ledger, entry)

    # -- equality: the partition counts, a plain pair is an id of partition 0 ----------

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MessageId):
            return tuple.__eq__(self, other) and self.partition == other.partition
        if isinstance(other, tuple):
            return self.partition == 0 and tuple.__eq__(self, other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        pair = (self.ledger_id, self.entry_id)
        return hash(pair) if self.partition == 0 else hash((*pair, self.partition))

    def __repr__(self) -> str:
        part = f", partition={self.partition}" if self.partition else ""
        return f"MessageId(ledger_id={self.ledger_id}, entry_id={self.entry_id}{part})"

    def __str__(self) -> str:
        if self.partition:
            return f"{self.ledger_id}:{self.entry_id}:{self.partition}"
        return f"{self.ledger_id}:{self.entry_id}"

    def _replace(self, **changes: int) -> MessageId:
        fields = {"ledger_id": self.ledger_id, "entry_id": self.entry_id}
        fields["partition"] = self.partition
        fields.update(changes)
        return MessageId(**fields)

    def __reduce__(self) -> tuple[Any, ...]:
        return (MessageId, (self.ledger_id, self.entry_id, self.partition))

    def next(self) -> MessageId:
        """The smallest id after this one in the same partition."""
        return MessageId(self.ledger_id, self.entry_id + 1, self.partition)

    # -- text and bytes ------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> MessageId:
        """``"ledger:entry"`` or ``"ledger:entry:partition"``, as ``str(id)`` writes it."""
        parts = text.strip().split(":")
        try:
            if len(parts) not in (2, 3):
                raise ValueError
            numbers = [int(p) for p in parts]
        except ValueError:
            raise InvalidArgument(
                f"a message id is LEDGER:ENTRY or LEDGER:ENTRY:PARTITION, not {text!r}"
            ) from None
        return cls(*numbers)

    def serialize(self) -> bytes:
        """Bytes that ``MessageId.deserialize`` turns back into this id (layout above)."""
        try:
            return _LAYOUT.pack(
                _VERSION, self.ledger_id, self.entry_id, self.partition & 0xFFFFFFFF
            )
        except struct.error:
            raise InvalidArgument(f"message id {self} is out of range to serialize") from None

    @classmethod
    def deserialize(cls, data: bytes) -> MessageId:
        """The id ``serialize()`` wrote; ``InvalidArgument`` for anything else."""
        if len(data) != _LAYOUT.size or data[0] != _VERSION:
            raise InvalidArgument(f"not a serialized compactlog message id: {bytes(data)!r}")
        _, ledger, entry, partition = _LAYOUT.unpack(data)
        if partition >= 2**31:
            partition -= 2**32
        return cls(ledger, entry, partition)


MessageId.earliest = MessageId(-1, -1)
MessageId.latest = MessageId(_I64[1], _I64[1])
