"""The front's index of partitioned topics, for partition placement.

Under partition placement the front answers every call on a partitioned ``NAME`` by
asking the slots that hold its partitions (``slots_of_partitions``), so it must know which
names are partitioned and how many partitions they have without asking a shard per call.
Each slot holding a partition keeps ``NAME``'s record in its own
``partitioned-topics.json``; the front reads them all at start (the union: a crash in the
middle of a create can leave the record in some slots only, and those still answer for
what they hold) and keeps the index current as CreateTopic, AddPartitions and DeleteTopic
pass through it. It also names the topics whose slots may disagree (``suspects``: a
change of them failed half-way), for the repair's next pass (``front.spread.repair``).
Under topic placement the index is not used: ``NAME``'s slot answers.
"""

from __future__ import annotations

import threading
from pathlib import Path

from compactlog.storage.partitioned_topics import FILE_NAME, PartitionedTopic, load
from compactlog.storage.slots import Placement, slot_dir, slots_of_partitions


class PartitionedIndex:
    """Partitioned topic name -> its record (the greatest count any slot holds)."""

    def __init__(self, slot_count: int, placement: Placement) -> None:
        self.slot_count = slot_count
        self.placement = placement
        self._topics: dict[str, PartitionedTopic] = {}
        self._suspects: set[str] = set()  # names a failed change may have left half-way
        self._lock = threading.Lock()

    @classmethod
    def load(cls, data_dir: Path, slot_count: int, placement: Placement) -> PartitionedIndex:
        index = cls(slot_count, placement)
        for slot in range(slot_count):
            for name, topic in load(slot_dir(data_dir, slot) / FILE_NAME).items():
                held = index._topics.get(name)
                if held is None or topic.partitions > held.partitions:
                    index._topics[name] = topic
        return index

    @property
    def spread(self) -> bool:
        return self.placement is Placement.PARTITION

    def get(self, name: str) -> PartitionedTopic | None:
        return self._topics.get(name)

    def put(self, topic: PartitionedTopic) -> None:
        with self._lock:
            self._topics[topic.name] = topic

    def remove(self, name: str) -> None:
        with self._lock:
            self._topics.pop(name, None)
            self._suspects.discard(name)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._topics)

    def suspect(self, name: str) -> None:
        """``name``'s slots may disagree (a change of it failed): the repair looks again."""
        with self._lock:
            self._suspects.add(name)

    def cleared(self, name: str) -> None:
        """``name``'s slots were found to agree."""
        with self._lock:
            self._suspects.discard(name)

    def suspects(self) -> list[str]:
        with self._lock:
            return sorted(self._suspects)

    def slots(self, name: str, partitions: int) -> list[int]:
        """The slots holding some partition of ``name`` (``NAME``'s own slot first)."""
        return slots_of_partitions(name, partitions, self.slot_count, self.placement)
