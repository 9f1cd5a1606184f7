"""``MessageId`` as pulsar-client has it (CONTRACT section 13):
``MessageId(partition=-1, ledger_id=-1, entry_id=-1, batch_index=-1)``, the METHODS
``ledger_id()``, ``entry_id()``, ``partition()``, ``batch_index()``, ``MessageId.earliest`` /
``MessageId.latest``, ``serialize()`` / ``MessageId.deserialize(bytes)``, and ``str(id)`` =
``"ledger:entry"`` (``"ledger:entry:partition"`` for a partition above 0) read back by
``MessageId.parse``.

It is the client's own class, not the shared ``compactlog.records.MessageId`` the server and
storage use: pulsar-client's accessors are methods, the shared pair's are fields, so one
cannot be the other. ``_convert`` turns the wire's ids into these; ``MessageId.of`` takes a
shared id or a plain pair. It stays a ``(ledger_id, entry_id)`` tuple underneath, so the
CLI's and older callers' habits keep working: ids order by ledger, then entry (as within one
partition; ids of different partitions have no order of their own), unpack as the pair, and
an id with no partition index (0, or Pulsar's -1 for "not partitioned": the wire says 0 for
both) and no batch index equals and hashes like the plain pair.

``serialize()`` layout, 25 bytes, big-endian (version 1, without ``batch_index``, 21 bytes,
is still read)::

    version (u8, 2) | ledger_id (i64) | entry_id (i64) | partition (i32) | batch_index (i32)

signed as in Pulsar, so ``earliest`` (-1:-1) and ``latest`` (2^63-1:2^63-1) round-trip.
"""

from __future__ import annotations

import struct
from typing import Any, ClassVar

from compactlog.errors import InvalidArgument

__all__ = ["MessageId"]

_LAYOUT_V1 = struct.Struct(">Bqqi")
_LAYOUT = struct.Struct(">Bqqii")
_VERSION = 2
_I64_MAX = 2**63 - 1


class MessageId(tuple[int, int]):
    """A message's position: ``(ledger_id, entry_id)`` with its partition and batch index."""

    earliest: ClassVar[MessageId]
    """The start of a topic, for ``create_reader`` (pulsar-client's ``MessageId.earliest``)."""
    latest: ClassVar[MessageId]
    """After the last message at the time of the call (``MessageId.latest``)."""

    # Class defaults serve the common id (partition 0, no batch): no per-id dict on reads.
    _partition: int = 0
    _batch_index: int = -1

    def __new__(
        cls, partition: int = -1, ledger_id: int = -1, entry_id: int = -1, batch_index: int = -1
    ) -> MessageId:
        if hasattr(partition, "__iter__"):
            # Rebuilt from its items, as a tuple is (``dataclasses.asdict``, ``astuple``):
            # the pair, partition 0.
            return cls.of(tuple(partition))
        self = cls._of_wire(int(ledger_id), int(entry_id), partition)
        if batch_index != -1:
            self._batch_index = int(batch_index)
        return self

    @classmethod
    def _of_wire(cls, ledger_id: int, entry_id: int, partition: int) -> MessageId:
        """The fast constructor ``_convert`` uses once per message read."""
        self: MessageId = tuple.__new__(cls, (ledger_id, entry_id))
        if partition:
            self._partition = partition
        return self

    @classmethod
    def of(cls, mid: tuple[int, int]) -> MessageId:
        """This class for a shared ``records.MessageId`` or a plain ``(ledger, entry)`` pair;
        an instance is returned as is."""
        if isinstance(mid, MessageId):
            return mid
        ledger, entry = mid
        return cls._of_wire(ledger, entry, 0)

    # -- pulsar-client's accessors -------------------------------------------------------

    def ledger_id(self) -> int:
        return self[0]

    def entry_id(self) -> int:
        return self[1]

    def partition(self) -> int:
        """The partition index; 0 (or -1 as given) when the topic is not partitioned."""
        return self._partition

    def batch_index(self) -> int:
        """-1: compactlog stores no batches of several messages under one id."""
        return self._batch_index

    # -- equality: no partition index (0 or negative) and no batch = the plain pair ------

    def _extra(self) -> tuple[int, int]:
        return (max(self._partition, 0), self._batch_index)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MessageId):
            return tuple.__eq__(self, other) and self._extra() == other._extra()
        if isinstance(other, tuple):
            return self._extra() == (0, -1) and tuple.__eq__(self, other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        pair = (self.ledger_id(), self.entry_id())
        extra = self._extra()
        return hash(pair) if extra == (0, -1) else hash((*pair, *extra))

    def __repr__(self) -> str:
        batch = f", batch_index={self._batch_index}" if self._batch_index != -1 else ""
        return (
            f"MessageId(partition={self._partition}, ledger_id={self.ledger_id()}, "
            f"entry_id={self.entry_id()}{batch})"
        )

    def __str__(self) -> str:
        if self._partition > 0:
            return f"{self.ledger_id()}:{self.entry_id()}:{self._partition}"
        return f"{self.ledger_id()}:{self.entry_id()}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (MessageId, (self._partition, self.ledger_id(), self.entry_id(), self._batch_index))

    def next(self) -> MessageId:
        """The smallest id after this one in the same partition."""
        return MessageId._of_wire(self.ledger_id(), self.entry_id() + 1, self._partition)

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
        partition = numbers[2] if len(numbers) == 3 else 0
        return cls._of_wire(numbers[0], numbers[1], partition)

    def serialize(self) -> bytes:
        """Bytes that ``MessageId.deserialize`` turns back into this id (layout above)."""
        try:
            return _LAYOUT.pack(
                _VERSION, self.ledger_id(), self.entry_id(), self._partition, self._batch_index
            )
        except struct.error:
            raise InvalidArgument(f"message id {self} is out of range to serialize") from None

    @classmethod
    def deserialize(cls, data: bytes) -> MessageId:
        """The id ``serialize()`` wrote; ``InvalidArgument`` for anything else."""
        data = bytes(data)
        if len(data) == _LAYOUT.size and data[0] == _VERSION:
            _, ledger, entry, partition, batch = _LAYOUT.unpack(data)
            return cls(partition, ledger, entry, batch)
        if len(data) == _LAYOUT_V1.size and data[0] == 1:
            _, ledger, entry, partition = _LAYOUT_V1.unpack(data)
            return cls(partition, ledger, entry)
        raise InvalidArgument(f"not a serialized compactlog message id: {data!r}")


MessageId.earliest = MessageId(-1, -1, -1)
MessageId.latest = MessageId(-1, _I64_MAX, _I64_MAX)
