"""Where a reader (``TopicReader``, ``AsyncReader``) starts and whether it has more to read.

A reader's start follows pulsar-client: ``MessageId.earliest``, ``MessageId.latest``, an id
(inclusive or not), or, after a seek, a publish time. ``has_message_available`` compares
each partition's last id with a mark: the last id read there, or before any, where the
start leaves that partition. Ids of different partitions have no order, so a partitioned
topic is judged partition by partition; a plain topic is partition 0. A ``latest`` start
of a plain topic is fixed as the reader opens, just after the last message; a partitioned
topic's stays ``latest`` (one id cannot start every partition) and the server resolves it
per partition, with the marks taken from the last ids just before. A seek of a
partitioned topic to a time starts every partition at that time (``AtTime``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from compactlog.client._convert import id_from_pb
from compactlog.client.message import Message
from compactlog.client.message_id import MessageId
from compactlog.client.reader import StartLike
from compactlog.v1 import compactlog_pb2 as pb

__all__ = [
    "AtTime",
    "LastPosition",
    "Marks",
    "ReaderStart",
    "id_start",
    "mark_read",
    "more_to_read",
    "position_from_pb",
    "start_of",
    "time_start",
]


class LastPosition(NamedTuple):
    """What ``Client.last_position`` answers: the topic's last id (``None``: no message)
    and, for a partitioned topic, the last id of each partition that has one (``id`` is
    then only the greatest of them)."""

    id: MessageId | None
    partitions: tuple[MessageId, ...] = ()

    def lasts(self) -> tuple[MessageId, ...]:
        """Each partition's last id (a plain topic's is partition 0's)."""
        if self.partitions:
            return self.partitions
        return () if self.id is None else (self.id,)


def position_from_pb(resp: pb.GetLastMessageIdResponse) -> LastPosition:
    """A GetLastMessageId answer."""
    last = id_from_pb(resp.id) if resp.HasField("id") else None
    return LastPosition(last, tuple(id_from_pb(mid) for mid in resp.partitions))


@dataclass(frozen=True)
class AtTime:
    """A start at the first message published at or after ``ms`` (epoch ms), in every
    partition: the server resolves it per partition."""

    ms: int


# Per partition index: the id after which (or, when the flag says inclusive, at which)
# there is more to read there. A partition with no mark is read from its earliest.
Marks = dict[int, tuple[MessageId, bool]]


class ReaderStart(NamedTuple):
    """Where a stream opens (``skip``: the start id the server sends and the reader drops)
    and the marks ``has_message_available`` starts from."""

    start: StartLike | AtTime
    skip: MessageId | None
    marks: Marks


def _index(mid: MessageId) -> int:
    return max(mid.partition(), 0)


def start_of(start_message_id: MessageId | tuple[int, int]) -> StartLike:
    """The Read start for a pulsar-client start id."""
    mid = MessageId.of(start_message_id)
    if mid == MessageId.earliest:
        return "earliest"
    if mid == MessageId.latest:
        return "latest"
    return mid


def id_start(start: StartLike, inclusive: bool, position: LastPosition | None) -> ReaderStart:
    """The stream start for a start id. ``position`` (the topic's last ids now) is needed
    only for ``"latest"``: a plain topic's opens just after its last message (the earliest
    of an empty one), so the stream and ``has_message_available`` agree on where reading
    began and a message published while the stream opens is read, not skipped."""
    if start == "earliest":
        return ReaderStart("earliest", None, {})
    if start == "latest":
        assert position is not None
        marks = {_index(last): (last, False) for last in position.lasts()}
        if position.partitions:
            return ReaderStart("latest", None, marks)
        if position.id is None:
            return ReaderStart("earliest", None, {})
        return ReaderStart(position.id, position.id, marks)
    mid = MessageId.of(start) if isinstance(start, tuple) else start
    assert isinstance(mid, MessageId)
    return ReaderStart(mid, None if inclusive else mid, {_index(mid): (mid, inclusive)})


def time_start(ms: int, firsts: Mapping[int, MessageId], position: LastPosition) -> ReaderStart:
    """The start a seek to publish time ``ms`` resolves to, from the first message at or
    after it in each partition that has one (``firsts``, by index; a plain topic is 0) and
    the last ids before the seek looked. A plain topic opens at its first such message, or
    just after its last (so what is published later is read), or at the earliest when
    empty; a partitioned topic opens every partition at the time itself."""
    marks: Marks = {}
    for last in position.lasts():
        index = _index(last)
        first = firsts.get(index)
        marks[index] = (last, False) if first is None else (first, True)
    if position.partitions:
        return ReaderStart(AtTime(ms), None, marks)
    first = firsts.get(0)
    if first is not None:
        return ReaderStart(first, None, marks)
    if position.id is not None:
        return ReaderStart(position.id, position.id, marks)
    return ReaderStart("earliest", None, marks)


def mark_read(marks: Marks, batch: Sequence[Message]) -> None:
    """Record a response's messages as read. A Read response holds one partition's
    messages (the server reads partitions in turns), so its last id is that partition's
    mark; a response that mixed them is walked whole."""
    last = batch[-1].id
    if _index(batch[0].id) != _index(last):
        for msg in batch:
            marks[_index(msg.id)] = (msg.id, False)
    else:
        marks[_index(last)] = (last, False)


def more_to_read(position: LastPosition, marks: Marks) -> bool:
    """``has_message_available`` once every message read ahead is handed out: whether
    some partition's last id lies past its mark."""
    for last in position.lasts():
        mark = marks.get(_index(last))
        if mark is None:
            return True
        at, inclusive = mark
        if tuple(last) > tuple(at) or (inclusive and tuple(last) == tuple(at)):
            return True
    return False
