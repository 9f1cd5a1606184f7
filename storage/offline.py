"""Offline topics: topics whose stored state could not be read at start-up.

Start-up never deletes what it could not read (CONTRACT section 11). A topic whose
record, cursors, config or offsets fail validation is kept exactly as it is on disk and
taken offline (Kafka takes partitions of a failed log dir offline the same way): it is
listed and described, with the reason naming the file or key and the problem, and
every other operation on it fails ``DATA_LOSS`` / ``CORRUPT_DATA``. The rest of the data
dir is served as usual. Deleting an offline topic is allowed: it is how an operator
gives up on it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from compactlog.errors import CorruptData
from compactlog.storage.types import TopicKind

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OfflineTopic:
    name: str
    kind: TopicKind
    reason: str  # names the file or key and what is wrong with it

    def error(self) -> CorruptData:
        return CorruptData(f"topic {self.name!r} is offline: {self.reason}", topic=self.name)


def take_offline(
    offline: dict[str, OfflineTopic], name: str, kind: TopicKind, reason: str
) -> OfflineTopic:
    """Record (and log) that ``name`` is offline; the first reason found is kept."""
    found = offline.get(name)
    if found is None:
        found = offline[name] = OfflineTopic(name, kind, reason)
        log.error("topic %r is offline: %s", name, reason)
    return found
