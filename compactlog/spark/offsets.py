"""Offsets in Kafka source's terms: where a read starts and ends in each topic partition.

A position is a ``MessageId`` — ``ledger:entry`` (SEGMENTED: ``0:offset``) — read as the
next message to deliver: a start position is inclusive, an end position exclusive, so a
query reads ``[start, end)`` of every topic partition. Ids only grow, and a start id that
is not stored (between ledgers, removed by compaction or retention) reads from the next
stored one, so any id works as a bound.

``startingOffsets`` / ``endingOffsets`` are ``earliest``, ``latest`` or JSON::

    {"prices": {"-1": "3:120"}, "orders": {"0": "earliest", "1": "5:0"}}

partition ``"-1"`` being a topic that is not partitioned. Topic partitions the JSON does
not name take the option's default (earliest for a start, latest for an end). Kafka's
``-2`` (earliest) and ``-1`` (latest) are accepted as position values too, and on
SEGMENTED topics a bare offset (``{"t": {"-1": 440}}``, a ``BareOffset`` until the topic's
kind is known when the query is planned).

The streaming checkpoint holds the same shape with every position resolved, e.g.
``{"prices": {"-1": "3:121"}}``; ``to_offset``/``from_checkpoint`` convert it.

A streaming query started with ``startingOffsets = "snapshot"`` (snapshot-plus-tail
bootstrap) has a first offset whose positions are the word ``snapshot``
(``snapshot_offset``): the micro-batch that starts there reads the compacted view of
everything before its end, and every batch after it the log from that end on
(``from_checkpoint`` tells the marked topic partitions apart).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, NamedTuple

from compactlog.errors import InvalidArgument
from compactlog.records import MessageId

EARLIEST: Final = "earliest"
LATEST: Final = "latest"
SNAPSHOT: Final = "snapshot"
NOT_PARTITIONED = -1

Named = Literal["earliest", "latest"]


class BareOffset(NamedTuple):
    """A JSON integer position: an offset, valid on SEGMENTED topics only."""

    offset: int


Bound = Named | MessageId | BareOffset
_KAFKA_NAMED: dict[int, Named] = {-2: EARLIEST, -1: LATEST}


class TopicPartition(NamedTuple):
    """A topic as the ``topic`` option names it and a partition index (-1: not
    partitioned). ``log`` is the topic the server stores it as: partition ``i`` of a
    partitioned topic is the ordinary topic ``NAME-partition-i``."""

    topic: str
    partition: int

    @property
    def log(self) -> str:
        if self.partition == NOT_PARTITIONED:
            return self.topic
        return f"{self.topic}-partition-{self.partition}"


def parse_position(text: str) -> MessageId:
    """``"ledger:entry"`` → ``MessageId``; ``InvalidArgument`` otherwise."""
    parts = text.strip().split(":")
    try:
        ledger, entry = (int(p) for p in parts)
    except ValueError:
        raise InvalidArgument(f"{text!r} is not a position (expected 'ledger:entry')") from None
    if ledger < 0 or entry < 0:
        raise InvalidArgument(f"{text!r} is not a position (ids are non-negative)")
    return MessageId(ledger, entry)


def _bound(value: object, where: str) -> Bound:
    if isinstance(value, bool):
        raise InvalidArgument(f"{where}: {value!r} is not a position")
    if isinstance(value, int) and value in _KAFKA_NAMED:
        return _KAFKA_NAMED[value]
    if isinstance(value, int):
        if value < 0:
            raise InvalidArgument(
                f"{where}: {value} is not an offset (-2: earliest, -1: latest, else >= 0)"
            )
        return BareOffset(value)
    if isinstance(value, str):
        if value.strip().lower() in (EARLIEST, LATEST):
            return EARLIEST if value.strip().lower() == EARLIEST else LATEST
        try:
            return parse_position(value)
        except InvalidArgument as exc:
            raise InvalidArgument(f"{where}: {exc}") from None
    raise InvalidArgument(
        f"{where}: {value!r} is not a position (expected 'ledger:entry' or an offset)"
    )


@dataclass(frozen=True)
class OffsetSpec:
    """An offsets option: a default bound and the topic partitions given explicitly;
    ``option`` names it in messages (``startingOffsets``...)."""

    default: Named
    positions: Mapping[TopicPartition, Bound] = field(default_factory=dict)
    option: str = "offsets"

    def bound(self, tp: TopicPartition) -> Bound:
        return self.positions.get(tp, self.default)

    def names(self) -> set[str]:
        return {tp.topic for tp in self.positions}


def parse_spec(option: str, text: str | None, default: Named, topics: Sequence[str]) -> OffsetSpec:
    """The value of option ``option`` (``startingOffsets``...) for a query of ``topics``."""
    if text is None or not text.strip():
        return OffsetSpec(default, option=option)
    word = text.strip().lower()
    if word in (EARLIEST, LATEST):
        return OffsetSpec(EARLIEST if word == EARLIEST else LATEST, option=option)
    try:
        tree = json.loads(text)
    except ValueError:
        raise InvalidArgument(
            f"option {option!r} is 'earliest', 'latest' or JSON "
            f'{{"topic": {{"partition": "ledger:entry"}}}}, not {text!r}'
        ) from None
    if not isinstance(tree, dict):
        raise InvalidArgument(f"option {option!r}: the JSON must be an object of topics")
    positions: dict[TopicPartition, Bound] = {}
    for topic, parts in tree.items():
        if topic not in topics:
            raise InvalidArgument(
                f"option {option!r} names topic {topic!r}, which the 'topic' option does not"
            )
        if not isinstance(parts, dict):
            raise InvalidArgument(
                f"option {option!r}: topic {topic!r} needs an object of partitions"
            )
        for partition, value in parts.items():
            index = _partition(option, topic, partition)
            where = f"option {option!r}, topic {topic!r}, partition {partition}"
            positions[TopicPartition(topic, index)] = _bound(value, where)
    return OffsetSpec(default, positions, option)


def _partition(option: str, topic: str, text: object) -> int:
    try:
        index = int(str(text))
    except ValueError:
        index = -2
    if index < NOT_PARTITIONED:
        raise InvalidArgument(
            f"option {option!r}, topic {topic!r}: partition {text!r} is not an index "
            "(-1 for a topic that is not partitioned)"
        )
    return index


Offsets = dict[TopicPartition, MessageId]


def to_offset(offsets: Mapping[TopicPartition, MessageId]) -> dict[str, dict[str, str]]:
    """Resolved positions as the checkpoint's JSON-ready dict, in a stable order (Spark
    compares offsets by their JSON: equal positions must give equal text)."""
    out: dict[str, dict[str, str]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = str(offsets[tp])
    return out


def snapshot_offset(tps: Iterable[TopicPartition]) -> dict[str, dict[str, str]]:
    """The first offset of a ``snapshot`` query: every topic partition marked."""
    out: dict[str, dict[str, str]] = {}
    for tp in sorted(tps):
        out.setdefault(tp.topic, {})[str(tp.partition)] = SNAPSHOT
    return out


def from_checkpoint(
    offset: Mapping[str, Mapping[str, str]],
) -> tuple[Offsets, frozenset[TopicPartition]]:
    """A streaming offset: the positions, and the topic partitions still at
    ``snapshot`` (their compacted view not read yet)."""
    out: Offsets = {}
    marked: set[TopicPartition] = set()
    for topic, parts in offset.items():
        for partition, text in parts.items():
            tp = TopicPartition(topic, int(partition))
            if text == SNAPSHOT:
                marked.add(tp)
            else:
                out[tp] = parse_position(text)
    return out, frozenset(marked)
