"""What a consumer's acknowledgements need between the caller and the server, with no I/O.

Acknowledging returns once the ack is queued, as in pulsar-client: waiting for the server's
group commit (a WAL fsync, some milliseconds) on every cumulative ack stalled the receive
loop. Queued acks go out as pulsar-client's core groups them (``ackGroupingTimeMs`` 100,
``ackGroupingMaxSize`` 1000): ``GROUP_S`` after the first of a group (``due``), or once
``GROUP_MAX`` acks are queued (``full``), or at once when the consumer flushes (before a
seek, redelivery, negative ack or close). ``AckQueue`` holds what waits:
queued cumulative acks collapse to the highest of each partition (a lower one changes
nothing), and an individual ack at or before it goes with it. The individual acks left go
as ``AcknowledgeList`` requests of up to ``LIST_MAX`` ids (``list_requests``; Pulsar's
CommandAck with a list of ids), each stored by the server in one cursor write; a server that
refuses one (an id it never gave: the whole list is refused, nothing stored) is sent that
list's ids one ``Acknowledge`` each, so every ack gets its own answer, and a server without
the method (``UNIMPLEMENTED``) is sent one ``Acknowledge`` per id from then on. The
consumer's sender (``client.ack_sender``, a thread, or ``client.aio.ack_task``, a task) sends
one ``take()`` at a time, its requests together (the server stores them with one group
commit), and the next only once the last is answered, so acks reach the server in the order
they were made. A failure the server answers is kept here
and raised by the consumer's next call; it is never dropped. An ack that could not reach the
server (``ServerUnreachable``, ``ShuttingDown``) is queued again and tried on the next ack or
flush; should the restarted server answer it ``NotDelivered`` (a crash forgets how far it had
delivered), the message comes again, as every unacknowledged one does after a restart, and
that answer is not a failure.

``GivenIds`` is what lets an ack of an id this consumer was never given fail at once, as
before (CONTRACT section 6): the highest id of each partition the consumer received. A
response is one step per log, each in id order (``server.log.consuming``), so a response of
one partition is summed up by its last message and only a partitioned topic's mixed response
is read message by message, and that only when an ack needs it. A ``Message`` of one of the
last responses the consumer was given (``gave``) needs no check at all, and is queued as
it is: its id is written into the AcknowledgeList request on the sender's thread (a run of
one response's consecutive messages from its first and last ids, ``message.id_lists``), so
an ack of such a message costs the caller no conversion (``AckQueue.put``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from compactlog.client.message import Message, id_lists, wire_ids
from compactlog.errors import CompactlogError, NotDelivered, ShuttingDown, Unimplemented
from compactlog.rpc_errors import ServerUnreachable
from compactlog.v1 import compactlog_pb2 as pb

__all__ = [
    "GROUP_MAX",
    "GROUP_S",
    "LIST_MAX",
    "AckQueue",
    "Failed",
    "GivenIds",
    "Queued",
    "list_requests",
    "lost",
    "refused_lists",
]

# Queued acks are sent this long after the first of them at the latest (pulsar-client's
# ackGroupingTimeMs, 100 ms), or as soon as this many acks are queued (its
# ackGroupingMaxSize): each request is a synced cursor write on the server.
GROUP_S = 0.1
GROUP_MAX = 1000
# Ids of one AcknowledgeList request at most (about 12 bytes each on the wire): a group that
# grew while the last one was being answered goes as several requests, sent together.
LIST_MAX = 1000

Key = tuple[int, int]  # (ledger, entry) within one partition
# Mixed responses (several partitions) kept unread at most: past it they are summed up now.
MAX_UNREAD = 16
# The last responses given whose messages are acked without a check (``GivenIds.gave``).
KEEP_GIVEN = 16


def _key(mid: pb.MessageId) -> Key:
    return (mid.ledger_id, mid.entry_id)


def _wire(message: Message) -> pb.MessageId:
    """The wire id of a message ``GivenIds.gave`` (one read from the server has one)."""
    wire = message.wire_id()
    assert wire is not None
    return wire


# An individual ack queued: a wire id, or a message ``GivenIds.gave`` (its id read when sent).
Queued = pb.MessageId | Message


def list_requests(
    topic: str, subscription: str, queued: Sequence[Queued]
) -> list[pb.AcknowledgeListRequest]:
    """The individual acks of ``queued`` as AcknowledgeList requests of ``LIST_MAX`` at
    most, their ids written as wire bytes in one compiled call (``message.id_lists``)."""
    reqs = []
    for chunk in id_lists(queued, LIST_MAX):
        req = pb.AcknowledgeListRequest(topic=topic, subscription=subscription)
        req.MergeFromString(chunk)
        reqs.append(req)
    return reqs


# Acks the server did not store: (id, cumulative, why).
Failed = list[tuple[pb.MessageId, bool, CompactlogError]]


def refused_lists(
    answers: Sequence[tuple[pb.AcknowledgeListRequest, CompactlogError]],
) -> tuple[Failed, list[pb.MessageId], bool]:
    """What the AcknowledgeList requests that failed leave to do: the acks that could not
    reach the server (``lost``: queued again), the ids to send one ``Acknowledge`` each
    (the server refused their list, or has no such method), and whether it has none
    (``UNIMPLEMENTED``: one Acknowledge an id from then on)."""
    failed: Failed = []
    singles: list[pb.MessageId] = []
    unimplemented = False
    for req, error in answers:
        unimplemented = unimplemented or isinstance(error, Unimplemented)
        if lost(error):
            failed.extend((mid, False, error) for mid in req.ids)
        else:
            singles.extend(req.ids)
    return failed, singles, unimplemented


def lost(exc: CompactlogError) -> bool:
    """A failure that says nothing of the acks themselves: they never reached a server
    able to store them, and are queued again (``AckQueue.answered``)."""
    return isinstance(exc, ServerUnreachable | ShuttingDown)


class GivenIds:
    """The highest id of each partition a consumer was given."""

    def __init__(self, topic: str, subscription: str) -> None:
        self._topic = topic
        self._subscription = subscription
        self._top: dict[int, Key] = {}
        self._unread: list[Sequence[pb.Message]] = []
        # The last responses given, by identity (held, so that no other takes their id).
        self._batches: dict[int, Sequence[pb.Message]] = {}

    def add(self, batch: Sequence[pb.Message]) -> None:
        """A response's messages, given to the consumer."""
        if not batch:
            return
        batches = self._batches
        batches[id(batch)] = batch
        if len(batches) > KEEP_GIVEN:
            del batches[next(iter(batches))]
        last = batch[-1].id
        if batch[0].id.partition == last.partition:  # one log's step: in id order
            self._raise(last.partition, _key(last))
            return
        self._unread.append(batch)
        if len(self._unread) > MAX_UNREAD:
            self._read_unread()

    def _raise(self, partition: int, key: Key) -> None:
        top = self._top.get(partition)
        if top is None or key > top:
            self._top[partition] = key

    def _read_unread(self) -> None:
        for batch in self._unread:
            for message in batch:
                mid = message.id
                self._raise(mid.partition, _key(mid))
        self._unread.clear()

    def gave(self, message: Message) -> bool:
        """``message`` was made from one of the last responses this consumer was given
        (``messages_of``): its id is at or before the highest given, with no look at it."""
        return id(message.response()) in self._batches

    def check(self, mid: pb.MessageId) -> None:
        """``NotDelivered`` for an id after every one this consumer was given."""
        key = _key(mid)
        top = self._top.get(mid.partition)
        if top is not None and key <= top:
            return
        if self._unread:
            self._read_unread()
            top = self._top.get(mid.partition)
            if top is not None and key <= top:
                return
        given = "nothing" if top is None else f"up to {top[0]}:{top[1]}"
        raise NotDelivered(
            f"message {key[0]}:{key[1]} was never given to this consumer of subscription"
            f" {self._subscription!r} of {self._topic} (it was given {given})",
            topic=self._topic,
            subscription=self._subscription,
            message_id=f"{key[0]}:{key[1]}",
        )


class AckQueue:
    """Acks waiting to be sent, and the first failure the server answered for one."""

    def __init__(self) -> None:
        self._cumulative: dict[int, pb.MessageId] = {}  # by partition: the highest
        # In the order made; a consumer's own message (``GivenIds.gave``) by identity, its
        # wire id read by ``take``.
        self._single: dict[tuple[int, Key] | int, Queued] = {}
        self.failure: CompactlogError | None = None
        # Why acks are queued again: the server could not be reached (tried again later).
        self.lost: CompactlogError | None = None
        # Acks queued again after a loss, and those of them in the batch being sent.
        self._again: set[tuple[int, Key]] = set()
        self._again_sent: set[tuple[int, Key]] = set()
        self.due = 0.0  # when what is queued goes at the latest (``time.monotonic``)

    def __bool__(self) -> bool:
        return bool(self._cumulative or self._single)

    def full(self) -> bool:
        """``GROUP_MAX`` acks are queued: they go now."""
        return len(self._cumulative) + len(self._single) >= GROUP_MAX

    def put(self, mid: Queued, cumulative: bool) -> None:
        """Queue an ack: a wire id, or a message ``GivenIds.gave`` (sent by its wire id)."""
        if not (self._cumulative or self._single):  # the first of a group
            self.due = time.monotonic() + GROUP_S
        if type(mid) is Message:
            if not cumulative:  # the usual ack of each message: no conversion here
                self._single.setdefault(id(mid), mid)
                return
            mid = _wire(mid)
        assert isinstance(mid, pb.MessageId)
        if cumulative:
            queued = self._cumulative.get(mid.partition)
            if queued is None or _key(mid) > _key(queued):  # an earlier one changes nothing
                self._cumulative[mid.partition] = mid
        else:
            self._single.setdefault((mid.partition, _key(mid)), mid)

    def take(self) -> tuple[list[pb.MessageId], list[Queued]]:
        """What is queued, emptied: (cumulative acks, individual acks not covered by one,
        a consumer's messages among them as they are: ``list_requests`` reads their ids)."""
        cumulative, single = self._cumulative, self._single
        self._cumulative, self._single = {}, {}
        self._again_sent, self._again = self._again, set()
        if not cumulative:
            return [], list(single.values())
        covered = {p: _key(mid) for p, mid in cumulative.items()}
        ids = wire_ids(single.values())
        left: list[Queued] = [
            i for i in ids if i.partition not in covered or _key(i) > covered[i.partition]
        ]
        return list(cumulative.values()), left

    def answered(self, mid: pb.MessageId, cumulative: bool, exc: CompactlogError) -> None:
        """An ack that failed: one that never reached the server (or found it shutting
        down) is queued again for the next try, any other failure kept to be raised."""
        where = (mid.partition, _key(mid))
        if lost(exc):
            self.put(mid, cumulative)
            self._again.add(where)
            self.lost = exc
        elif isinstance(exc, NotDelivered) and where in self._again_sent:
            pass  # a server restarted since forgot the delivery: the message comes again
        elif self.failure is None:
            self.failure = exc

    def raise_failure(self) -> None:
        """Raise the failure kept (once: it is then forgotten)."""
        exc, self.failure = self.failure, None
        if exc is not None:
            raise exc

    def check(self) -> None:
        """After a flush: the failure kept, else why acks are still queued."""
        self.raise_failure()
        if self.lost is not None and self:
            raise self.lost
