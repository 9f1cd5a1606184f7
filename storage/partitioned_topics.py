"""Partitioned-topic metadata: which names are partitioned topics, and how many partitions.

A partitioned topic ``NAME`` holds no data of its own: partition ``i`` is the ordinary
topic ``NAME-partition-i`` (LEDGER or SEGMENTED, in its own store), so the only thing to
keep is the partition count. It lives in one small file at the top of the data dir,
``<data dir>/partitioned-topics.json``, so that any process on that data dir (a shard of
``serve --shards``, a tool) can read it without opening a store::

    {"format": 1,
     "topics": {"prices": {"partitions": 4, "kind": "LEDGER"}, ...}}
    #crc32c:<8 hex digits>

(the checksum trailer of ``storage.segmented.state_file``). Written whole and atomically
(temp file, fsync, rename, directory fsync). A file that fails its checksum or parse
stops the start with one line naming it (``BadStateFile``): losing it would silently
turn partitioned topics into unrelated ones, so it is never set aside nor rebuilt.

A change of several partitions at once is made whole across crashes by the change
itself, kept in the same file before any partition is touched (``"pending"``: ``NAME`` ->
``{"op": "create" | "grow" | "delete", "partitions": N, "kind": K, "config": {...}}``;
a delete removes ``NAME``'s record in that same write). Then the partitions are made or
deleted, and one last write records the new count and drops the change. A crash in
between leaves the change pending, never a count naming a missing partition nor
partitions that no count names: the next start finishes it (rolls it forward,
``server.admin.partitioned_topics``), and ``decided`` is the state it will reach.
"""

from __future__ import annotations

import enum
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path

from compactlog.partitioner import parse_partition_name
from compactlog.storage.segmented import state_file
from compactlog.storage.segmented.state_file import BadStateFile
from compactlog.storage.types import TopicKind

FILE_NAME = "partitioned-topics.json"
FORMAT = 1


@dataclass(frozen=True)
class PartitionedTopic:
    name: str
    partitions: int
    kind: TopicKind


class Op(enum.Enum):
    CREATE = "create"
    GROW = "grow"
    DELETE = "delete"


@dataclass(frozen=True)
class PendingChange:
    """An admin change of ``name`` begun and not finished: ``partitions`` is the count it
    makes (create, grow) or removes (delete); ``config``, new partitions' config."""

    name: str
    op: Op
    partitions: int
    kind: TopicKind
    config: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def outcome(self) -> PartitionedTopic | None:
        """``name``'s record once the change is finished."""
        if self.op is Op.DELETE:
            return None
        return PartitionedTopic(self.name, self.partitions, self.kind)


class PartitionedTopics:
    """The partition counts of a data dir's partitioned topics (thread-safe)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE_NAME
        self._lock = threading.Lock()
        self._topics, self._pending = read(self.path)

    def get(self, name: str) -> PartitionedTopic | None:
        return self._topics.get(name)

    @property
    def empty(self) -> bool:
        """No partitioned topic (the publish path then skips parsing names)."""
        return not self._topics

    def names(self) -> list[str]:
        return sorted(self._topics)

    def partition_of(self, topic: str, parsed: tuple[str, int] | None) -> int | None:
        """The index of ``topic`` when it is a partition of a partitioned topic
        (``parsed``: its name split by ``partitioner.parse_partition_name``)."""
        if parsed is None:
            return None
        parent = self._topics.get(parsed[0])
        if parent is None or parsed[1] >= parent.partitions:
            return None
        return parsed[1]

    def pending(self) -> list[PendingChange]:
        """The changes begun and not finished (a crash or a failure cut them short)."""
        return [self._pending[name] for name in sorted(self._pending)]

    def pending_of(self, name: str) -> PendingChange | None:
        return self._pending.get(name)

    def deleting(self, topic: str) -> PendingChange | None:
        """The pending delete whose partitions include ``topic``, if any: that partition
        is being deleted (the name is parsed only while a change is pending)."""
        if not self._pending:
            return None
        parsed = parse_partition_name(topic)
        if parsed is None:
            return None
        change = self._pending.get(parsed[0])
        if change is None or change.op is not Op.DELETE or parsed[1] >= change.partitions:
            return None
        return change

    def begin(self, change: PendingChange) -> None:
        """Keep ``change`` before any partition is touched (a delete drops the record)."""
        with self._lock:
            topics = dict(self._topics)
            if change.op is Op.DELETE:
                topics.pop(change.name, None)
            self._write(topics, {**self._pending, change.name: change})

    def finish(self, name: str, topic: PartitionedTopic | None) -> None:
        """``name``'s change is over: its record is ``topic`` (None: no record)."""
        with self._lock:
            topics = {k: v for k, v in self._topics.items() if k != name}
            if topic is not None:
                topics[name] = topic
            pending = {k: v for k, v in self._pending.items() if k != name}
            self._write(topics, pending)

    def put(self, topic: PartitionedTopic) -> None:
        self.finish(topic.name, topic)

    def remove(self, name: str) -> None:
        self.finish(name, None)

    def _write(
        self, topics: dict[str, PartitionedTopic], pending: dict[str, PendingChange]
    ) -> None:
        save(self.path, topics, pending)
        self._topics, self._pending = topics, pending


def load(path: Path) -> dict[str, PartitionedTopic]:
    """The file's recorded topics (none when there is no file); ``BadStateFile`` when it
    fails."""
    return read(path)[0]


def decided(path: Path) -> dict[str, PartitionedTopic]:
    """The topics as they are once every pending change is finished."""
    topics, pending = read(path)
    for name, change in pending.items():
        outcome = change.outcome
        if outcome is None:
            topics.pop(name, None)
        else:
            topics[name] = outcome
    return topics


def read(path: Path) -> tuple[dict[str, PartitionedTopic], dict[str, PendingChange]]:
    """The file's topics and pending changes; ``BadStateFile`` when it fails."""
    body = state_file.read(path)
    if body is None:
        return {}, {}
    try:
        data = json.loads(body)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not format {FORMAT}")
        topics = {}
        for name, entry in dict(data["topics"]).items():
            count = _count(name, entry)
            topics[name] = PartitionedTopic(name, count, TopicKind[str(entry["kind"])])
        pending = {}
        for name, entry in dict(data.get("pending", {})).items():
            config = {str(k): str(v) for k, v in dict(entry.get("config", {})).items()}
            kind = TopicKind[str(entry["kind"])]
            op = Op(entry["op"])
            pending[name] = PendingChange(name, op, _count(name, entry), kind, config)
        return topics, pending
    except (ValueError, KeyError, TypeError) as exc:
        raise BadStateFile(path, f"malformed partitioned-topic metadata: {exc}") from None


def _count(name: object, entry: dict[str, object]) -> int:
    count = entry["partitions"]
    if not isinstance(name, str) or not isinstance(count, int) or count < 2:
        raise ValueError(f"bad entry {name!r}")
    return count


def save(
    path: Path,
    topics: dict[str, PartitionedTopic],
    pending: dict[str, PendingChange] | None = None,
) -> None:
    body: dict[str, object] = {
        "format": FORMAT,
        "topics": {
            t.name: {"partitions": t.partitions, "kind": t.kind.name}
            for t in sorted(topics.values(), key=lambda t: t.name)
        },
    }
    if pending:  # absent when none: the file reads as before
        body["pending"] = {
            c.name: {
                "op": c.op.value,
                "partitions": c.partitions,
                "kind": c.kind.name,
                "config": c.config,
            }
            for c in sorted(pending.values(), key=lambda c: c.name)
        }
    state_file.write(path, json.dumps(body, indent=1).encode())


__all__ = [
    "FILE_NAME",
    "BadStateFile",
    "Op",
    "PartitionedTopic",
    "PartitionedTopics",
    "PendingChange",
    "decided",
    "load",
    "read",
]
