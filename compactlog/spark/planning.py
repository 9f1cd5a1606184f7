"""From options to read ranges: which topic partitions a query covers, where each
starts and ends, and how a big range is cut into Spark partitions.

A topic read through the ``topic`` option is one topic partition (-1) today; once
``TopicInfo.partitions`` exists and says N > 1, it is partitions 0..N-1, each stored as
the ordinary topic ``NAME-partition-i`` (CONTRACT section 9). The field is looked up
defensively, so this module works with servers before and after partitions.

``earliest``/``latest`` resolve from ``GetTopic``: LEDGER topics start at ``0:0`` (below
every id) and end after the last confirmed id; SEGMENTED topics span
``[log start offset, log end offset)``. Ranges are cut every so many entries
(``sizing``: ``entriesPerPartition``, else the query's entries over the session's cores),
counted and cut by arithmetic on SEGMENTED and single-ledger ranges and by the topic's
ledger layout on ranges over several ledgers (without it, one Spark partition per topic
partition). Every range is read the same way (``ServerCalls.read``), whatever its bounds.

A position of the wrong kind for its topic (an offset on a LEDGER topic, ``3:5`` on a
SEGMENTED one) and a batch start after its end fail the query naming the option; a
SEGMENTED start below the log start is data loss (``lost_data``), Kafka source's
``failOnDataLoss``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from compactlog.errors import InvalidArgument, OffsetOutOfRange
from compactlog.records import MessageId
from compactlog.spark.connection import ServerCalls
from compactlog.spark.offsets import (
    EARLIEST,
    NOT_PARTITIONED,
    BareOffset,
    Bound,
    Offsets,
    OffsetSpec,
    TopicPartition,
)
from compactlog.spark.sizing import Sizing
from compactlog.v1 import compactlog_pb2 as pb

log = logging.getLogger(__name__)

LEDGER_START = MessageId(0, 0)
# (ledger, first entry, last entry) of the ledgers a range spans, in id order
Spans = Sequence[tuple[int, int, int]]


@dataclass(frozen=True)
class LogShape:
    """What planning needs of one topic partition: its kind and its bounds now."""

    segmented: bool
    earliest: MessageId
    latest: MessageId

    @classmethod
    def of(cls, info: pb.TopicInfo) -> LogShape:
        stats = info.stats
        last = stats.last_id if stats.HasField("last_id") else None
        if info.kind == pb.SEGMENTED:
            start = MessageId(0, stats.log_start_offset)
            end = MessageId(0, last.entry_id + 1) if last is not None else start
            return cls(True, start, max(start, end))
        end = MessageId(last.ledger_id, last.entry_id + 1) if last is not None else LEDGER_START
        return cls(False, LEDGER_START, end)

    def resolve(self, bound: Bound, where: str = "a position") -> MessageId:
        """``bound`` as an id of this topic partition; ``InvalidArgument`` starting with
        ``where`` for a position of the other kind of topic."""
        if isinstance(bound, BareOffset):
            if not self.segmented:
                raise InvalidArgument(
                    f"{where}: {bound.offset} is an offset, but the topic is a LEDGER "
                    "topic, whose positions are 'ledger:entry'"
                )
            return MessageId(0, bound.offset)
        if isinstance(bound, MessageId):
            if self.segmented and bound.ledger_id != 0:
                raise InvalidArgument(
                    f"{where}: '{bound}' is not a position of a SEGMENTED topic "
                    "(an offset: 440, or '0:440')"
                )
            return bound
        return self.earliest if bound == EARLIEST else self.latest


@dataclass(frozen=True)
class ReadRange:
    """Messages of one topic partition with ids in ``[start, end)``; ``limit`` (0: none)
    is a safe upper bound on their count where the ids tell it."""

    tp: TopicPartition
    start: MessageId
    end: MessageId
    compacted: bool
    limit: int = 0


def partition_count(info: pb.TopicInfo) -> int:
    """``TopicInfo.partitions`` where the server has it; 0 (not partitioned) before."""
    try:
        return int(getattr(info, "partitions", 0) or 0)
    except (TypeError, ValueError):
        return 0


def discover(calls: ServerCalls, topics: Iterable[str]) -> dict[TopicPartition, LogShape]:
    """Every topic partition of ``topics`` with its shape; ``TopicNotFound`` naming the
    first topic that does not exist."""
    shapes: dict[TopicPartition, LogShape] = {}
    for topic in topics:
        info = calls.topic(topic)
        count = partition_count(info)
        if count <= 1:
            shapes[TopicPartition(topic, NOT_PARTITIONED)] = LogShape.of(info)
            continue
        for index in range(count):
            tp = TopicPartition(topic, index)
            shapes[tp] = LogShape.of(calls.topic(tp.log))
    return shapes


def _where(option: str, tp: TopicPartition) -> str:
    return f"option {option!r}, topic {tp.topic!r}, partition {tp.partition}"


def resolve(spec: OffsetSpec, shapes: Mapping[TopicPartition, LogShape]) -> Offsets:
    return {
        tp: shape.resolve(spec.bound(tp), _where(spec.option, tp)) for tp, shape in shapes.items()
    }


def check_order(starts: Offsets, ends: Offsets, option: str = "startingOffsets") -> None:
    """A batch query's start after its end: ``InvalidArgument`` naming the option (Kafka's
    source refuses it too, where it would read nothing)."""
    for tp, start in starts.items():
        end = ends.get(tp)
        if end is not None and start > end:
            raise InvalidArgument(
                f"{_where(option, tp)}: the start ({start}) is after the end ({end}, "
                "endingOffsets or the latest position)"
            )


def lost_data(
    shapes: Mapping[TopicPartition, LogShape], starts: Offsets, fail_on_data_loss: bool
) -> Offsets:
    """The starts, those below a SEGMENTED log start (removed by retention or
    DeleteRecords) raised to it with a warning; with ``fail_on_data_loss``
    ``OffsetOutOfRange`` naming the topic partition and the offsets instead."""
    out = dict(starts)
    for tp, start in starts.items():
        shape = shapes.get(tp)
        if shape is None or not shape.segmented or start >= shape.earliest:
            continue
        gone = data_loss(tp, start.entry_id, shape.earliest.entry_id, fail_on_data_loss)
        out[tp] = MessageId(0, gone)
    return out


def data_loss(tp: TopicPartition, start: int, log_start: int, fail: bool) -> int:
    """Kafka's ``failOnDataLoss``: raise, or warn and go on from ``log_start``."""
    what = (
        f"topic {tp.topic!r} partition {tp.partition}: offsets {start} to {log_start - 1} "
        f"are gone (retention or DeleteRecords moved the log start to {log_start}); "
        f"the query was to read from offset {start}"
    )
    if fail:
        raise OffsetOutOfRange(
            f"{what}. Some data may have been lost; to read from the log start instead, "
            "set the source option failOnDataLoss to false",
            topic=tp.log,
            offset=start,
            log_start_offset=log_start,
        )
    log.warning("%s; reading from %d (failOnDataLoss is false)", what, log_start)
    return log_start


def plan(
    calls: ServerCalls,
    shapes: Mapping[TopicPartition, LogShape],
    starts: Mapping[TopicPartition, MessageId],
    ends: Mapping[TopicPartition, MessageId],
    compacted: bool,
    sizing: Sizing,
) -> list[ReadRange]:
    """The ranges ``[start, end)`` of every topic partition in ``ends``, cut every
    ``sizing.entries(total)`` entries, ``total`` being what the ranges hold where their
    layout tells it; a topic partition missing from ``starts`` (new since the last
    micro-batch) starts at its earliest."""
    todo: list[tuple[TopicPartition, MessageId, MessageId, Spans | None]] = []
    for tp, end in ends.items():
        shape = shapes[tp]
        start = starts.get(tp, shape.earliest)
        if start < end:
            todo.append((tp, start, end, ledger_spans(calls, tp, shape, start, end)))
    total = sum(entries_in(spans, lo, hi) for _tp, lo, hi, spans in todo if spans)
    size = sizing.entries(total, len(todo))
    ranges: list[ReadRange] = []
    for tp, start, end, spans in todo:
        cuts = cut_many(spans, start, end, size) if spans else []
        for lo, hi in itertools.pairwise([start, *cuts, end]):
            ranges.append(ReadRange(tp, lo, hi, compacted, _limit(shapes[tp], lo, hi)))
    return ranges


def _limit(shape: LogShape, start: MessageId, end: MessageId) -> int:
    """Ids of one ledger (or SEGMENTED offsets) are distinct integers: the range can hold
    no more messages than ``end - start``. Across ledgers nothing is known."""
    if shape.segmented or start.ledger_id == end.ledger_id:
        return end.entry_id - start.entry_id
    return 0


def ledger_spans(
    calls: ServerCalls,
    tp: TopicPartition,
    shape: LogShape,
    start: MessageId,
    end: MessageId,
) -> Spans | None:
    """The ``(ledger, first, last)`` entries the range ``[start, end)`` may hold, in id
    order: by arithmetic on SEGMENTED and single-ledger ranges, else from the topic's
    ledger layout; None where this token may not see the layout."""
    if shape.segmented or start.ledger_id == end.ledger_id:
        return [(start.ledger_id, start.entry_id, end.entry_id - 1)]
    ledgers = calls.ledger_ranges(tp.log)
    if ledgers is None:
        return None
    return sorted((r.ledger_id, r.first_entry, r.last_entry) for r in ledgers)


def _clipped(spans: Spans, start: MessageId, end: MessageId) -> Iterator[tuple[int, int, int]]:
    """``(ledger, lo, hi)``: the entries ``[lo, hi)`` of each span inside ``[start, end)``."""
    for ledger, first, last in spans:
        lo = max(MessageId(ledger, first), start)
        hi = min(MessageId(ledger, last + 1), end)
        if lo < hi:  # else the span lies outside the range (then both ends are in it)
            yield ledger, lo.entry_id, hi.entry_id


def entries_in(spans: Spans, start: MessageId, end: MessageId) -> int:
    """How many entries of ``spans`` lie inside ``[start, end)``."""
    return sum(hi - lo for _ledger, lo, hi in _clipped(spans, start, end))


def cut_many(spans: Spans, start: MessageId, end: MessageId, size: int) -> list[MessageId]:
    """Split points over ledger spans ``(ledger, first, last)`` in id order: a point
    after every ``size`` entries inside ``[start, end)``, never on ``start`` itself."""
    points: list[MessageId] = []
    filled = 0
    for ledger, entry, hi in _clipped(spans, start, end):
        while entry < hi:
            if filled == size:
                points.append(MessageId(ledger, entry))
                filled = 0
            step = min(size - filled, hi - entry)
            entry += step
            filled += step
    return points
