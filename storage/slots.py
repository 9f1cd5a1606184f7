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
```

Placement: ``slot(NAME) = crc32(NAME) % slots``, and the partitions of a partitioned topic
(``NAME-partition-i``) live in ``NAME``'s slot: a publish to ``NAME`` is all-or-nothing
across its partitions (CONTRACT section 9), which one store's atomic write gives and two
processes could not, and ``NAME``'s own record (its partition count) sits beside them.
Topics spread over the shards; one topic's partitions do not (docs/scaling.md says what
spreading them would take).

A data dir without ``SLOTS`` is the single-store layout of a server without shards (the
store at its root); ``--shards 1`` keeps serving it as it always did.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from pathlib import Path

from compactlog.errors import CompactlogError

SLOT_COUNT = 8  # slots of a new sharded data dir: shards can be any of 1..8
SLOTS_FILE = "SLOTS"
SLOTS_DIR = "slots"
_PARTITION = re.compile(r"(.+)-partition-(\d{1,9})")


def slot_of(topic: str, slots: int) -> int:
    """The slot that holds ``topic`` (stable across processes, versions and restarts)."""
    match = _PARTITION.fullmatch(topic)
    home = match.group(1) if match is not None else topic
    return zlib.crc32(home.encode("utf-8", "surrogatepass")) % slots


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
        return Layout(int(text))
    if any((data_dir / mark).exists() for mark in _SINGLE_STORE_MARKS):
        return Layout(0)
    return None


def choose_layout(data_dir: Path, shards: int) -> Layout:
    """The layout to serve ``data_dir`` with ``shards`` processes; creates a new sharded
    layout in an empty data dir. Refuses, in one line, what it cannot serve."""
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
        tmp = data_dir / (SLOTS_FILE + ".tmp")
        tmp.write_text(f"{SLOT_COUNT}\n", encoding="ascii")
        tmp.replace(data_dir / SLOTS_FILE)  # the layout exists once this name does
        return Layout(SLOT_COUNT)
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
