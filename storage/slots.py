"""Store slots: how a sharded data dir is cut so that topics can change owner.

A RocksDB is opened for writing by one process only, so the unit of ownership must be a
store, not a topic inside one. A data dir served with ``--shards N`` holds a fixed number
of **store slots**; each slot is a whole ordinary data dir of its own (a RocksDB under
``ledgers/``, segment directories under ``segments/``, its own compaction work dir and
lock). A topic lives in exactly one slot, chosen by a stable hash of its name; shard
``k`` of ``N`` owns the slots ``s`` with ``s % N == k``. Restarting with another ``N``
hands whole slots to other processes: nothing is copied, nothing can be lost or doubled.

```
<data dir>/LOCK.server     the front's lock (one server per data dir)
<data dir>/SLOTS           "8\\n": the slot count, fixed when the layout is made
<data dir>/slots/0/ ... 7/ one ordinary data dir each (ledgers/, segments/, LOCK.server)
<data dir>/front/intents/  the front's intent log of spanning publishes (partition
                           placement only: server/front/intents.py)
```

Placement, fixed per data dir (the ``PLACEMENT`` file; absent means ``topic``):

- ``topic`` (the default): ``slot(NAME) = crc32(NAME) % slots``, and the partitions of a
  partitioned topic (``NAME-partition-i``) live in ``NAME``'s slot: a publish to ``NAME``
  is all-or-nothing across its partitions (CONTRACT section 9) through one store's atomic
  write, and ``NAME``'s record (its partition count) sits beside them. Topics spread over
  the shards; one topic's partitions do not.
- ``partition``: partition ``i`` lives in slot ``(crc32(NAME) + i) % slots``, so the
  partitions of one topic spread evenly over the slots (and so over the shards); every
  slot holding a partition keeps ``NAME``'s record, and the front answers calls on
  ``NAME`` by asking those slots (docs/scaling.md). Other names are placed as under
  ``topic``; partition 0 is always in ``NAME``'s own slot.

A data dir without ``SLOTS`` is the single-store layout of a server without shards (the
store at its root); ``--shards 1`` keeps serving it as it always did.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from compactlog.errors import CompactlogError

SLOT_COUNT = 8  # slots of a new sharded data dir: shards can be any of 1..8
SLOTS_FILE = "SLOTS"
SLOTS_DIR = "slots"
PLACEMENT_FILE = "PLACEMENT"
_PARTITION = re.compile(r"(.+)-partition-(\d{1,9})")


class Placement(Enum):
    """Where partitions go (module docstring); the value is what ``PLACEMENT`` holds."""

    TOPIC = "topic"
    PARTITION = "partition"


def slot_of(topic: str, slots: int, placement: Placement = Placement.TOPIC) -> int:
    """The slot that holds ``topic`` (stable across processes, versions and restarts)."""
    match = _PARTITION.fullmatch(topic)
    if match is None:
        return _hash(topic) % slots
    if placement is Placement.PARTITION:
        return (_hash(match.group(1)) + int(match.group(2))) % slots
    return _hash(match.group(1)) % slots


def slots_of_partitions(name: str, partitions: int, slots: int, placement: Placement) -> list[int]:
    """The slots that hold some partition of ``name`` (``NAME``'s own slot first): the
    slots that keep its record and answer for it."""
    home = _hash(name) % slots
    if placement is Placement.TOPIC:
        return [home]
    return [(home + i) % slots for i in range(min(partitions, slots))]


def _hash(name: str) -> int:
    return zlib.crc32(name.encode("utf-8", "surrogatepass"))


def shard_of(slot: int, shards: int) -> int:
    """The shard that owns ``slot`` when ``shards`` processes serve the data dir."""
    return slot % shards


def slots_of_shard(shard: int, shards: int, slots: int) -> list[int]:
    return [s for s in range(slots) if shard_of(s, shards) == shard]


def slot_dir(data_dir: Path, slot: int) -> Path:
    return data_dir / SLOTS_DIR / str(slot)


@dataclass(frozen=True)
class Layout:
    """What a data dir holds: the single store at its root, or ``slots`` store slots."""

    slots: int  # 0: the single-store layout
    placement: Placement = Placement.TOPIC

    @property
    def sharded(self) -> bool:
        return self.slots > 0


_SINGLE_STORE_MARKS = ("ledgers", "segments")


def read_layout(data_dir: Path) -> Layout | None:
    """The data dir's layout, or None for an empty (new) data dir."""
    path = data_dir / SLOTS_FILE
    if path.exists():
        text = path.read_text(encoding="ascii", errors="replace")
        if not re.fullmatch(r"[1-9][0-9]{0,3}\n", text):
            raise CompactlogError(f"{path}: expected a slot count and a newline, found {text!r}")
        return Layout(int(text), _read_placement(data_dir))
    if any((data_dir / mark).exists() for mark in _SINGLE_STORE_MARKS):
        return Layout(0)
    return None


def _read_placement(data_dir: Path) -> Placement:
    path = data_dir / PLACEMENT_FILE
    if not path.exists():
        return Placement.TOPIC
    text = path.read_text(encoding="ascii", errors="replace")
    for placement in Placement:
        if text == placement.value + "\n":
            return placement
    raise CompactlogError(f"{path}: expected 'topic' or 'partition' and a newline, found {text!r}")


def choose_layout(data_dir: Path, shards: int, placement: Placement = Placement.TOPIC) -> Layout:
    """The layout to serve ``data_dir`` with ``shards`` processes; creates a new sharded
    layout in an empty data dir, its partitions placed by ``placement`` (an existing
    layout keeps its own). Refuses, in one line, what it cannot serve."""
    if shards < 1:
        raise CompactlogError(f"--shards must be at least 1, not {shards}")
    layout = read_layout(data_dir)
    if layout is None:
        if shards == 1:
            return Layout(0)  # a new single-process server: today's layout
        if shards > SLOT_COUNT:
            raise CompactlogError(f"--shards {shards}: at most {SLOT_COUNT} shards")
        for slot in range(SLOT_COUNT):
            slot_dir(data_dir, slot).mkdir(parents=True, exist_ok=True)
        if placement is not Placement.TOPIC:
            _write(data_dir / PLACEMENT_FILE, placement.value + "\n")
        _write(data_dir / SLOTS_FILE, f"{SLOT_COUNT}\n")  # the layout exists once SLOTS does
        return Layout(SLOT_COUNT, placement)
    if not layout.sharded and shards > 1:
        raise CompactlogError(
            f"data dir {data_dir} holds one store (the layout of a server without shards); "
            f"spread it over store slots first with `compactlog migrate --slots {data_dir}`, "
            f"then start with --shards {shards}"
        )
    if layout.sharded and shards > layout.slots:
        raise CompactlogError(
            f"--shards {shards}: data dir {data_dir} has {layout.slots} store slots, "
            f"so at most {layout.slots} shards"
        )
    return layout


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="ascii")
    tmp.replace(path)
