"""How many times a subscription gave each message out before: Pulsar's redelivery count.

A message goes out again after a negative acknowledgement, an ack timeout, the close or
silence of the SHARED consumer that held it (all through the dispatcher's due messages),
or when delivery rewinds to the mark-delete position: an EXCLUSIVE or FAILOVER takeover, or
a consumer asking for its unacknowledged messages again. Each time counts one, per
subscription and message, in memory only, as Pulsar's ``InMemoryRedeliveryTracker``: a
restart or a cursor reset (seek) starts every count at 0 again, and an acknowledgement
ends a message's count.

The count travels in ``Message.redelivery_count`` (field 7). Consume responses are stored
records spliced together, so a counted message's record is rewritten with the field
appended (protobuf takes fields in any order) and its length prefix grown; records with
no count pass as stored.
"""

from __future__ import annotations

from collections.abc import Iterable

from compactlog.storage import batch as codec
from compactlog.storage.protowire import put_varint, read_varint
from compactlog.storage.types import MessageId

# Message.redelivery_count = 7, wire type 0 (varint).
_COUNT_TAG = 7 << 3


class RedeliveryCounts:
    """One subscription's counts, and how far a rewind's replay of delivered messages
    reaches (``replay_upto``: ids up to it were given out before the rewind)."""

    def __init__(self) -> None:
        self.counts: dict[MessageId, int] = {}
        self.replay_upto: MessageId | None = None

    def again(self, ids: Iterable[MessageId]) -> None:
        """``ids`` went out again (due messages sent once more)."""
        counts = self.counts
        for msg_id in ids:
            counts[msg_id] = counts.get(msg_id, 0) + 1

    def rewind(self, reached: MessageId | None) -> None:
        """Delivery starts again at the mark-delete position; it had reached ``reached``,
        so every unacknowledged message up to there comes again and counts once more."""
        if reached is not None and (self.replay_upto is None or reached > self.replay_upto):
            self.replay_upto = reached

    def replayed(self, ids: Iterable[MessageId], position: MessageId | None) -> None:
        """The messages of a delivery that read on up to ``position``: those a rewind
        replays count once more; the replay ends once delivery passes its bound."""
        upto = self.replay_upto
        if upto is None:
            return
        self.again(i for i in ids if i <= upto)
        if position is not None and position >= upto:
            self.replay_upto = None

    def acknowledged(self, msg_id: MessageId, cumulative: bool) -> None:
        if not cumulative:
            self.counts.pop(msg_id, None)
            return
        for done in [i for i in self.counts if i <= msg_id]:
            del self.counts[done]

    def forget(self, ids: Iterable[MessageId]) -> None:
        """Messages that no longer exist (compaction or retention removed them)."""
        for msg_id in ids:
            self.counts.pop(msg_id, None)

    def clear(self) -> None:
        """A cursor reset: delivery starts over from the new position, counts at 0."""
        self.counts.clear()
        self.replay_upto = None

    def stamp(self, response: bytes, label: str) -> bytes:
        """``response`` with each counted message's ``redelivery_count`` set."""
        if not self.counts:
            return response
        return with_counts(response, self.counts, label)


def with_counts(response: bytes, counts: dict[MessageId, int], label: str) -> bytes:
    """The spliced message records of ``response``, each one in ``counts`` rewritten with
    field 7 appended (``0x0A len body`` becomes ``0x0A len' body 0x38 count``)."""
    out = bytearray()
    done = 0
    for ledger, entry, _flags, _key, start, end in codec.walk(response, label):
        count = counts.get(MessageId(ledger, entry))
        if not count:
            continue
        _length, body = read_varint(response, start + 1, end)
        field = bytearray((_COUNT_TAG,))
        put_varint(field, count)
        out += response[done:start]
        out.append(response[start])
        put_varint(out, end - body + len(field))
        out += response[body:end]
        out += field
        done = end
    if not done:
        return response
    out += response[done:]
    return bytes(out)
