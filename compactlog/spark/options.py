"""The data source's options, checked once on the driver into frozen values.

Spark hands options over as strings, names case-insensitive; every message here uses the
documented spelling (``readCompacted``, ``startingOffsets``...). A bad or missing option
fails the query before any task runs, naming the option, and so does an unknown one
(with the list of known ones): a misspelt ``readCompacted`` would otherwise read the raw
log without a word. Batch reads are checked as Kafka's source checks them: no ``latest``
start and no ``earliest`` end, also per topic partition in the JSON.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from compactlog.errors import InvalidArgument
from compactlog.spark.connection import Connection
from compactlog.spark.offsets import EARLIEST, LATEST, SNAPSHOT, Named, OffsetSpec, parse_spec
from compactlog.spark.sizing import Sizing, known_cores

_BOOLEANS = {"true": True, "false": False}
_CONNECTION = ("server", "token", "tlsCa")
READ_OPTIONS = (
    "topic",
    "readCompacted",
    "startingOffsets",
    "endingOffsets",
    "failOnDataLoss",
    "entriesPerPartition",
    "minPartitions",
    *_CONNECTION,
)
# Spark hands a streaming sink its checkpointLocation among the options
WRITE_OPTIONS = ("topic", "checkpointLocation", *_CONNECTION)
# what a Kafka source user may type, and ours
_KAFKA_NAMES = {
    "subscribe": "topic",
    "assign": "topic",
    "kafka.bootstrap.servers": "server",
    "includeheaders": "properties (a column always there)",
}


def _lowered(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def check_known(opts: Mapping[str, str], known: tuple[str, ...], what: str) -> None:
    """``InvalidArgument`` naming the first option not in ``known`` and listing them."""
    by_lower = {name.lower(): name for name in known}
    for name in sorted(opts):
        if name.lower() in by_lower:
            continue
        hint = _KAFKA_NAMES.get(name.lower())
        close = difflib.get_close_matches(name.lower(), by_lower, n=1)
        if hint:
            instead = f" (Kafka's source name; compactlog's is {hint!r})"
        elif close:
            instead = f" (did you mean {by_lower[close[0]]!r}?)"
        else:
            instead = ""
        raise InvalidArgument(
            f"unknown option {name!r} for a compactlog {what}{instead}; "
            f"known options: {', '.join(known)}"
        )


def _required(opts: dict[str, str], name: str, what: str) -> str:
    value = opts.get(name.lower(), "").strip()
    if not value:
        raise InvalidArgument(f"the compactlog source needs option {name!r} ({what})")
    return value


def _flag(opts: dict[str, str], name: str, default: bool = False) -> bool:
    raw = opts.get(name.lower(), str(default)).strip().lower()
    if raw not in _BOOLEANS:
        raise InvalidArgument(f"option {name!r} is 'true' or 'false', not {raw!r}")
    return _BOOLEANS[raw]


def _positive(opts: dict[str, str], name: str) -> int | None:
    """A whole number >= 1, or None where the option is not given."""
    raw = opts.get(name.lower())
    if raw is None:
        return None
    raw = raw.strip()
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
    # how big a range one Spark partition reads: the option, else one range a core;
    # finer where minPartitions asks for more
    sizing: Sizing
    # streaming, startingOffsets = "snapshot": the compacted view first, then the log
    snapshot: bool = False
    # a start removed by retention: fail (Kafka's default), or read from the log start
    fail_on_data_loss: bool = True

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool, cores: int = 0) -> ReadOptions:
        """Batch queries read ``earliest`` → ``latest`` by default; streaming queries
        start at ``latest`` and take no ``endingOffsets`` (Kafka source's rules).
        ``cores``: the session's ``defaultParallelism`` (0: unknown, this machine's)."""
        check_known(options, READ_OPTIONS, "stream" if streaming else "read")
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
        starting = parse_spec("startingOffsets", starting_text, first, topics)
        ending = parse_spec("endingOffsets", low.get("endingoffsets"), LATEST, topics)
        if not streaming:
            check_batch_bounds(starting, ending)
        return cls(
            conn=connection(low),
            topics=topics,
            compacted=_flag(low, "readCompacted"),
            starting=starting,
            ending=ending,
            sizing=Sizing(
                known_cores(cores),
                _positive(low, "entriesPerPartition"),
                min_partitions=_positive(low, "minPartitions"),
            ),
            snapshot=snapshot,
            fail_on_data_loss=_flag(low, "failOnDataLoss", default=True),
        )


def check_batch_bounds(starting: OffsetSpec, ending: OffsetSpec) -> None:
    """Kafka's batch rules: a batch query cannot start at ``latest`` (it would read
    nothing) nor end at ``earliest``, as a default or for one topic partition."""
    for spec, wrong, role in ((starting, LATEST, "start"), (ending, EARLIEST, "end")):
        if spec.default == wrong:
            raise InvalidArgument(
                f"option {spec.option!r} can't be {wrong!r} for a batch query "
                f"(it would read nothing; Kafka's source refuses it too)"
            )
        for tp, bound in spec.positions.items():
            if bound == wrong:
                raise InvalidArgument(
                    f"option {spec.option!r}: the {role} of topic {tp.topic!r} partition "
                    f"{tp.partition} can't be {wrong!r} for a batch query"
                )


@dataclass(frozen=True)
class WriteOptions:
    conn: Connection
    topic: str | None  # None: each row's ``topic`` column names its topic

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        check_known(options, WRITE_OPTIONS, "write")
        low = _lowered(options)
        topics = topic_names(low.get("topic", ""))
        if len(topics) > 1:
            raise InvalidArgument("option 'topic' of a write names one topic, not several")
        return cls(connection(low), topics[0] if topics else None)
