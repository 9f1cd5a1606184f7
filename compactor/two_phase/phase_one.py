"""Phase one: which input entries survive, from keys alone.

Pulsar builds ``key -> latest id`` scanning forward. We scan *backwards* (newest
first), so the first time a key is seen is its latest message: a set of keys seen is
enough, and the winners go into one bitmap (1 bit per input entry, each segment from a
byte boundary), which phase two reads in id order. Memory per distinct key is one set
slot plus the key bytes; a dict of ``key -> id`` would add an int object and a wider
slot.

Memory is estimated as it grows (set table + key objects + bitmaps) and the run fails
with ``PhaseOneMemoryExceeded`` above ``compaction.phase.one.memory.bytes``: larger key
spaces belong to the Spark engine.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from compactlog.compactor.two_phase.storage import CompactionInput, CompactionStorage
from compactlog.errors import ResourceExhausted
from compactlog.storage.codec import HAS_KEY, VALUE_NON_EMPTY

_BYTES_OBJECT = sys.getsizeof(b"")  # header of a bytes object, added to each key's length
_CHECK_EVERY = 4096  # new keys between memory checks


class PhaseOneMemoryExceeded(ResourceExhausted):
    """The key set outgrew ``compaction.phase.one.memory.bytes``."""


@dataclass
class PhaseOneResult:
    bits: bytearray  # one bit per input entry, each segment starting on a byte boundary
    bases: list[int]  # per segment: its first byte in ``bits``
    read: int = 0
    kept: int = 0
    tombstones: int = 0
    keyless_dropped: int = 0
    bytes_in: int = 0
    distinct_keys: int = 0
    peak_bytes: int = 0

    def selection(self, index: int, length: int) -> bytearray:
        """The winners of segment ``index`` as its own bitmap (bit = entry - first_entry)."""
        base = self.bases[index]
        return self.bits[base : base + ((length + 7) >> 3)]

    @property
    def bytes_per_key(self) -> float:
        return self.peak_bytes / self.distinct_keys if self.distinct_keys else 0.0


def find_winners(
    storage: CompactionStorage, inp: CompactionInput, budget_bytes: int
) -> PhaseOneResult:
    """Mark the latest message of every live key (and keyless ones if retained)."""
    segments = inp.segments
    bases = [0]
    for seg in segments:
        bases.append(bases[-1] + ((seg.length + 7) >> 3))
    bits = bytearray(bases.pop())
    result = PhaseOneResult(bits, bases)
    fixed = sys.getsizeof(bits) + sys.getsizeof(bases)
    seen: set[bytes] = set()
    add = seen.add
    key_bytes = 0
    retain = inp.retain_null_key
    read = kept = tombstones = keyless = bytes_in = 0
    next_check = _CHECK_EVERY

    def check() -> None:
        used = fixed + sys.getsizeof(seen) + key_bytes + _BYTES_OBJECT * len(seen)
        result.peak_bytes = max(result.peak_bytes, used)
        if used > budget_bytes:
            raise PhaseOneMemoryExceeded(
                f"compaction of {inp.topic!r}: phase one needs more than "
                f"compaction.phase.one.memory.bytes={budget_bytes} ({len(seen)} distinct keys "
                f"so far, {used} bytes); raise the limit or compact with the Spark engine"
            )

    for seg, base in zip(reversed(segments), reversed(bases), strict=True):
        first = seg.first_entry - (base << 3)  # bit of entry e: e - first
        for eid, flags, size, key in storage.read_keys(seg, reverse=True):
            read += 1
            bytes_in += size
            if not flags & HAS_KEY:
                if retain:
                    off = eid - first
                    bits[off >> 3] |= 1 << (off & 7)
                    kept += 1
                else:
                    keyless += 1
                continue
            live = flags & VALUE_NON_EMPTY
            if not live:
                tombstones += 1
            if key in seen:
                continue
            add(key)  # type: ignore[arg-type]  # HAS_KEY: key is bytes
            key_bytes += len(key)  # type: ignore[arg-type]
            if live:
                off = eid - first
                bits[off >> 3] |= 1 << (off & 7)
                kept += 1
            if len(seen) >= next_check:
                next_check += _CHECK_EVERY
                check()
        check()
    result.read, result.kept, result.tombstones = read, kept, tombstones
    result.keyless_dropped, result.bytes_in, result.distinct_keys = keyless, bytes_in, len(seen)
    check()
    return result
