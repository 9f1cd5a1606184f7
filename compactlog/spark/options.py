"""The data source's options, checked once on the driver into frozen values.

Spark hands options over as strings, names lower-cased; every message here uses the
documented spelling (``readCompacted``, ``startingOffsets``...). A bad or missing option
fails the query before any task runs, naming the option.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from compactlog.errors import InvalidArgument
from compactlog.spark.connection import Connection
from compactlog.spark.offsets import EARLIEST, LATEST, SNAPSHOT, Named, OffsetSpec, parse_spec

DEFAULT_ENTRIES_PER_PARTITION = 100_000
_BOOLEANS = {"true": True, "false": False}


def _lowered(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _required(opts: dict[str, str], name: str, what: str) -> str:
    value = opts.get(name.lower(), "").strip()
    if not value:
        raise InvalidArgument(f"the compactlog source needs option {name!r} ({what})")
    return value


def _flag(opts: dict[str, str], name: str) -> bool:
    raw = opts.get(name.lower(), "false").strip().lower()
    if raw not in _BOOLEANS:
        raise InvalidArgument(f"option {name!r} is 'true' or 'false', not {raw!r}")
    return _BOOLEANS[raw]


def _positive(opts: dict[str, str], name: str, default: int) -> int:
    raw = opts.get(name.lower(), str(default)).strip()
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise InvalidArgument(f"option {name!r} is a whole number >= 1, not {raw!r}")
    return value


def connection(opts: Mapping[str, str]) -> Connection:
    """Options ``server``, ``token`` and ``tlsCa``."""
    low = _lowered(opts)
    server = _required(low, "server", "HOST:PORT of a compactlog server")
    return Connection.of(server, low.get("token"), low.get("tlsca"))


def topic_names(text: str) -> tuple[str, ...]:
    """``"a, b,a"`` → ``("a", "b")``: comma-separated, blanks dropped, first order kept."""
    names = [name.strip() for name in text.split(",")]
    return tuple(dict.fromkeys(name for name in names if name))


@dataclass(frozen=True)
class ReadOptions:
    conn: Connection
    topics: tuple[str, ...]
    compacted: bool
    starting: OffsetSpec
    ending: OffsetSpec
    entries_per_partition: int
    # streaming, startingOffsets = "snapshot": the compacted view first, then the log
    snapshot: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool) -> ReadOptions:
        """Batch queries read ``earliest`` → ``latest`` by default; streaming queries
        start at ``latest`` and take no ``endingOffsets`` (Kafka source's rules)."""
        low = _lowered(options)
        topics = topic_names(_required(low, "topic", "a topic name, or names separated by commas"))
        if not topics:
            raise InvalidArgument("option 'topic' names no topic")
        if streaming and low.get("endingoffsets", "").strip():
            raise InvalidArgument("option 'endingOffsets' applies to batch queries only")
        first: Named = LATEST if streaming else EARLIEST
        starting_text = low.get("startingoffsets")
        snapshot = (starting_text or "").strip().lower() == SNAPSHOT
        if snapshot and not streaming:
            raise InvalidArgument(
                f"startingOffsets {SNAPSHOT!r} applies to streaming queries (a batch query "
                "reads the compacted view with readCompacted=true)"
            )
        if snapshot:
            starting_text = EARLIEST
        return cls(
            conn=connection(low),
            topics=topics,
            compacted=_flag(low, "readCompacted"),
            starting=parse_spec("startingOffsets", starting_text, first, topics),
            ending=parse_spec("endingOffsets", low.get("endingoffsets"), LATEST, topics),
            entries_per_partition=_positive(
                low, "entriesPerPartition", DEFAULT_ENTRIES_PER_PARTITION
            ),
            snapshot=snapshot,
        )


@dataclass(frozen=True)
class WriteOptions:
    conn: Connection
    topic: str | None  # None: each row's ``topic`` column names its topic

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        low = _lowered(options)
        topics = topic_names(low.get("topic", ""))
        if len(topics) > 1:
            raise InvalidArgument("option 'topic' of a write names one topic, not several")
        return cls(connection(low), topics[0] if topics else None)
