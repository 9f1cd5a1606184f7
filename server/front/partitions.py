"""The front's index of partitioned topics, for partition placement.

``PartitionedIndex`` tells the front which names are partitioned, how many partitions
they have and which slots hold them (``slots_of_partitions``), so that it can answer a
call on a spread ``NAME`` without asking a shard per call; it also names the
``suspects`` for the repair (``front.spread.repair``). How it is built and kept
current is in docs/architecture.md ("The front room, module by module").
"""

from __future__ import annotations

import threading
from pathlib import Path

from compactlog.storage.partitioned_topics import FILE_NAME, PartitionedTopic, decided
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
        for slot in range(slot_count):  # a change a crash cut short is finished at start
            for name, topic in decided(slot_dir(data_dir, slot) / FILE_NAME).items():
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
