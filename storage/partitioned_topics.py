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

Order of writes, so that a crash never leaves a count naming a missing partition:
create and AddPartitions create the partition topics first, then record the new count;
delete removes the record first, then the partitions. A crash in between leaves
ordinary ``NAME-partition-i`` topics that no count names; a grow's are taken in at the
next start (``server.admin.partitioned_topics``), a delete's stay listed and deletable.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

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


class PartitionedTopics:
    """The partition counts of a data dir's partitioned topics (thread-safe)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE_NAME
        self._lock = threading.Lock()
        self._topics = load(self.path)

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

    def put(self, topic: PartitionedTopic) -> None:
        with self._lock:
            topics = {**self._topics, topic.name: topic}
            save(self.path, topics)
            self._topics = topics

    def remove(self, name: str) -> None:
        with self._lock:
            topics = {k: v for k, v in self._topics.items() if k != name}
            save(self.path, topics)
            self._topics = topics


def load(path: Path) -> dict[str, PartitionedTopic]:
    """The file's topics (none when there is no file); ``BadStateFile`` when it fails."""
    body = state_file.read(path)
    if body is None:
        return {}
    try:
        data = json.loads(body)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not format {FORMAT}")
        out = {}
        for name, entry in dict(data["topics"]).items():
            count = entry["partitions"]
            if not isinstance(name, str) or not isinstance(count, int) or count < 2:
                raise ValueError(f"bad entry {name!r}")
            out[name] = PartitionedTopic(name, count, TopicKind[str(entry["kind"])])
        return out
    except (ValueError, KeyError, TypeError) as exc:
        raise BadStateFile(path, f"malformed partitioned-topic metadata: {exc}") from None


def save(path: Path, topics: dict[str, PartitionedTopic]) -> None:
    body = {
        "format": FORMAT,
        "topics": {
            t.name: {"partitions": t.partitions, "kind": t.kind.name}
            for t in sorted(topics.values(), key=lambda t: t.name)
        },
    }
    state_file.write(path, json.dumps(body, indent=1).encode())


__all__ = ["FILE_NAME", "BadStateFile", "PartitionedTopic", "PartitionedTopics", "load"]
