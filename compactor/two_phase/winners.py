"""What phase one hands phase two: the run's figures and, per segment, its winners.

``selection(storage, index, segment)`` answers a segment's winners as a bitmap (bit =
entry - first_entry, little-endian in each byte), which ``read_entries`` takes.

- ``MapWinners`` (the local engine) holds phase one's offset map, key digest →
  ``position << 1 | live``: an entry wins when the map holds exactly its own position with
  the live bit (keyless entries when ``compaction.retain.null.key``). ``settle`` then picks
  how phase two asks: if one bit per covered entry fits the memory budget beside the map
  (and no keyless entry is retained), the map's live positions become that bitmap in one
  pass over its slots and the map is freed — phase two then reads no key twice; otherwise
  each segment's keys are read again and looked up in the map, so phase two needs nothing
  that grows with the input.
- ``BitmapWinners`` (the Spark engine) holds bitmaps built on the executors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compactlog.compactor.log_cleaner.batch_scan import live_bitmap, winner_bits
from compactlog.compactor.log_cleaner.offset_map import SkimpyOffsetMap
from compactlog.compactor.two_phase.storage import BatchReads, CompactionReads, Segment
from compactlog.storage.codec import HAS_KEY, VALUE_NON_EMPTY


@dataclass
class PhaseOneResult:
    """What phase one found: the run's figures, and its winners through ``selection``."""

    read: int = 0
    kept: int = 0
    tombstones: int = 0
    keyless_dropped: int = 0
    bytes_in: int = 0
    distinct_keys: int = 0
    peak_bytes: int = 0
    covered: int | None = None  # input entries covered; None: all of them

    def selection(self, storage: CompactionReads, index: int, segment: Segment) -> bytearray:
        """The winners of segment ``index`` as a bitmap (bit = entry - first_entry)."""
        raise NotImplementedError


@dataclass
class BitmapWinners(PhaseOneResult):
    """Winners as one bit per input entry, each segment from a byte boundary (Spark)."""

    bits: bytearray = field(default_factory=bytearray)
    bases: list[int] = field(default_factory=list)  # per segment: its first byte in ``bits``

    def selection(self, storage: CompactionReads, index: int, segment: Segment) -> bytearray:
        base = self.bases[index]
        return self.bits[base : base + ((segment.length + 7) >> 3)]


@dataclass
class MapWinners(PhaseOneResult):
    """Winners as the offset map of phase one (the local engine)."""

    offset_map: SkimpyOffsetMap | None = None  # None once ``settle`` made ``bits``
    bits: bytearray | None = None  # one bit per covered position
    positions: list[int] = field(default_factory=list)  # per segment: its first position
    retain_null_key: bool = False
    # The run may keep tombstones (``TombstoneRetention``): a tombstone that is its key's
    # latest message is selected too, and phase two decides whether it stays.
    keep_tombstones: bool = False
    map_bytes: int = 0  # the offset map's table at its largest

    def settle(self, budget_bytes: int, covered: int) -> int:
        """Choose phase two's way (module docstring); the bytes held while choosing."""
        size = (covered + 7) >> 3
        if self.offset_map is None or self.retain_null_key:
            return 0
        if self.offset_map.memory_bytes + size > budget_bytes:
            return 0
        bits = bytearray(size)
        live_bitmap(self.offset_map, bits, self.keep_tombstones)
        self.bits, self.offset_map = bits, None
        return self.map_bytes + size

    def selection(self, storage: CompactionReads, index: int, segment: Segment) -> bytearray:
        if self.bits is not None:
            return _cut(self.bits, self.positions[index], segment.length)
        assert self.offset_map is not None
        get = self.offset_map.get
        bits = bytearray((segment.length + 7) >> 3)
        first = segment.first_entry
        base = self.positions[index] - first  # position of entry e: base + e
        retain = self.retain_null_key
        keep_tombstones = self.keep_tombstones
        if isinstance(storage, BatchReads):  # one call per stored batch
            for at, payload, where in storage.stored_batches(segment):
                winner_bits(
                    self.offset_map, payload, at, first, segment.last_entry, base, retain,
                    keep_tombstones, bits, where,
                )  # fmt: skip
            return bits
        for eid, flags, _size, key in storage.read_keys(segment):
            if flags & HAS_KEY:
                # a live entry (or a tombstone the run may keep) wins if the map holds
                # exactly its own position
                live = 1 if flags & VALUE_NON_EMPTY else 0
                if not (live or keep_tombstones) or get(key) != (base + eid) << 1 | live:  # type: ignore[arg-type]
                    continue
            elif not retain:
                continue
            off = eid - first
            bits[off >> 3] |= 1 << (off & 7)
        return bits


def _cut(bits: bytearray, start: int, length: int) -> bytearray:
    """Bits ``start .. start + length - 1`` of ``bits`` as their own bitmap."""
    window = bits[start >> 3 : ((start + length - 1) >> 3) + 1]
    value = int.from_bytes(window, "little") >> (start & 7)
    value &= (1 << length) - 1
    return bytearray(value.to_bytes((length + 7) >> 3, "little"))
