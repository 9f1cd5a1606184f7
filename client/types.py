"""Values the client hands back: plain frozen dataclasses, no protobuf in sight.

They mirror the ``compactlog.v1`` messages (CONTRACT §2) so callers can compare,
hash and print them without knowing the wire format; ``_convert`` builds them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from compactlog.client.message import Message
from compactlog.client.message_id import MessageId
from compactlog.records import Record

__all__ = [
    "CompactionProgress",
    "CompactionRun",
    "CompactionState",
    "CompactionStatus",
    "CompactionVerification",
    "Message",
    "MessageId",
    "Record",
    "SubscriptionInfo",
    "SubscriptionTypeName",
    "TopicInfo",
    "TopicKindName",
    "TopicStats",
]

TopicKindName = Literal["ledger", "segmented"]
SubscriptionTypeName = Literal["EXCLUSIVE", "SHARED", "FAILOVER"]
CompactionState = Literal["NOT_RUN", "RUNNING", "SUCCESS", "ERROR", "CANCELLED"]


@dataclass(frozen=True, slots=True)
class TopicStats:
    """Sizes of the raw log and the compacted ledger; ids are ``None`` when the log is empty."""

    entries: int = 0
    bytes: int = 0
    ledgers: int = 0
    segments: int = 0
    first_id: MessageId | None = None
    last_id: MessageId | None = None
    compacted_entries: int = 0
    compacted_bytes: int = 0
    log_start_offset: int = 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic's name, kind, effective config (defaults included) and current stats."""

    name: str
    kind: TopicKindName
    config: Mapping[str, str]
    stats: TopicStats
    offline_reason: str = ""  # non-empty: stored state unreadable, the topic is not served
    partitions: int = 0  # a partitioned topic: its partitions are NAME-partition-0 ..
    overrides: tuple[str, ...] = ()  # the config keys set on the topic; the rest are defaults


@dataclass(frozen=True, slots=True)
class CompactionRun:
    """Figures of one finished compaction run (``removed`` = ``read`` - ``kept``)."""

    read: int = 0
    kept: int = 0
    removed: int = 0
    tombstones: int = 0
    keyless_dropped: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    duration_ms: int = 0
    engine: str = ""


@dataclass(frozen=True, slots=True)
class CompactionStatus:
    """Where a topic's compaction stands; ``last_run`` is ``None`` before the first run."""

    state: CompactionState
    last_error: str = ""
    compacted_ledger_id: int = 0
    horizon: MessageId | None = None
    last_run: CompactionRun | None = None

    @property
    def running(self) -> bool:
        """True while a run is in progress (polling loops wait on this)."""
        return self.state == "RUNNING"


@dataclass(frozen=True, slots=True)
class CompactionProgress:
    """One ``WatchCompaction`` update. ``phase``: phase-one, phase-two, commit (LEDGER),
    cleaning (SEGMENTED), empty when no run is active; ``total`` 0 when not known."""

    state: CompactionState
    phase: str = ""
    done: int = 0
    total: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    elapsed_ms: int = 0

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"


@dataclass(frozen=True, slots=True)
class CompactionVerification:
    """``VerifyCompaction``: the compacted ledger recomputed from the raw history and
    compared message by message; ``digest`` is the hex SHA-256 of the compacted view."""

    ok: bool
    checked: int
    digest: str
    problems: tuple[str, ...] = ()
    horizon: MessageId | None = None
    compacted_ledger_id: int = 0


@dataclass(frozen=True, slots=True)
class SubscriptionInfo:
    """One subscription of a topic: its type, mark-delete position (``None``: nothing
    acknowledged yet) and backlog (messages after it not acknowledged yet)."""

    name: str
    type: SubscriptionTypeName
    mark_delete: MessageId | None
    backlog: int
