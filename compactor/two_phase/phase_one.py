"""Phase one: the latest position of every key, in an offset map of 24 bytes an entry.

The run's input (previous compacted ledger, then the raw tail) is numbered by *position*,
0 .. n-1 in input order. Phase one reads keys only, oldest first, and maps each key's
digest to ``position << 1 | live`` (live: the value is non-empty) in a ``SkimpyOffsetMap``
— Kafka's layout, 16 bytes of digest and 8 of position per entry — so a key costs 24
bytes whatever its length. The digest is taken as the key's identity, as Kafka takes it
(two keys with one digest would share an entry; see ``offset_map``).

Storages of stored batches (``BatchReads``: the ledger reads) are read one call per
batch (``batch_scan.digest_positions``, then ``exchange_digested``, both compiled): no
record costs a Python loop step.

Phase two asks ``selection`` for each segment's winners (``winners.MapWinners``): an
entry wins when the map holds exactly its own position, live (or, keyless, when
``compaction.retain.null.key``).

Memory: the map starts at the size the input suggests and doubles (rehashing) as keys
arrive, never past ``compaction.phase.one.memory.bytes`` counting both tables while it
rehashes. When it can grow no more, phase one stops where Kafka's cleaner stops: the
entries before the first key that did not fit are *covered*; the run compacts those, its
horizon is the last covered raw id, and the next run (previous compacted ledger + raw
after that horizon) goes on from there. Only when the map cannot even hold the previous
compacted ledger's keys and one raw entry does the run fail with
``PhaseOneMemoryExceeded``: that key space belongs to the Spark engine.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from itertools import chain

from compactlog.compactor.log_cleaner.batch_scan import (
    COMPILED,
    digest_positions,
    exchange_digested,
)
from compactlog.compactor.log_cleaner.fanout import Fanout
from compactlog.compactor.log_cleaner.offset_map import (
    BYTES_PER_ENTRY,
    FULL,
    NEW,
    SkimpyOffsetMap,
)
from compactlog.compactor.progress import PHASE_ONE, NoControl, Progress, RunControl
from compactlog.compactor.two_phase.storage import (
    BatchReads,
    CompactionInput,
    CompactionReads,
    Segment,
)
from compactlog.compactor.two_phase.winners import BitmapWinners, MapWinners, PhaseOneResult
from compactlog.errors import ResourceExhausted
from compactlog.storage.codec import HAS_KEY, VALUE_NON_EMPTY

__all__ = [
    "BitmapWinners",
    "MapWinners",
    "PhaseOneMemoryExceeded",
    "PhaseOneResult",
    "find_winners",
]

LOAD_FACTOR = 0.9  # Kafka's log.cleaner.io.buffer.load.factor default
INITIAL_TAIL_KEYS = 4096  # room for raw-tail keys before the map first grows
PRIME_GAP = 336  # the widest gap between two primes below 2**32
REPORT_EVERY = 4096  # entries between progress reports and cancel checks
BATCHES_A_UNIT = 8  # stored batches a thread digests at a time (a hand-over costs ~30 us)


MEMORY_KEY = "compaction.phase.one.memory.bytes"


class PhaseOneMemoryExceeded(ResourceExhausted):
    """The offset map cannot hold even the previous compacted ledger's keys. A limit of the
    server's config, not a defect: the reason says so (metadata ``key``, ``limit``)."""

    reason = "INVALID_CONFIG"


class _GrowingMap:
    """A ``SkimpyOffsetMap`` that doubles within a budget; ``peak`` counts both tables
    while it rehashes."""

    def __init__(self, budget_bytes: int, expected_keys: int) -> None:
        self.budget = budget_bytes
        # The map rounds its slots down to a prime: room for the gap keeps the keys expected
        # below its load limit (a map one key short doubles and rehashes at the end).
        wanted = math.ceil(max(expected_keys, 1) / LOAD_FACTOR) + PRIME_GAP
        self.map = SkimpyOffsetMap(
            max(BYTES_PER_ENTRY, min(budget_bytes, wanted * BYTES_PER_ENTRY)), LOAD_FACTOR
        )
        self.peak = self.map.memory_bytes

    def grow(self) -> bool:
        """Double (or take what the budget leaves); False when no larger table fits."""
        current = self.map.memory_bytes
        if not self.map.resize(min(2 * current, self.budget - current)):
            return False
        self.peak = max(self.peak, current + self.map.memory_bytes)
        return True


@dataclass
class _Tally:
    """Phase one's figures so far, and when to report them next."""

    total: int
    read: int = 0
    kept: int = 0
    tombstones: int = 0
    keyless: int = 0
    bytes_in: int = 0
    next_report: int = REPORT_EVERY

    def pace(self, control: RunControl) -> None:
        if self.read >= self.next_report:
            self.next_report = (self.read // REPORT_EVERY + 1) * REPORT_EVERY
            control.report(Progress(PHASE_ONE, self.read, self.total, bytes_read=self.bytes_in))
            control.check()


def _map_batches(
    storage: BatchReads, segments: tuple[Segment, ...], positions: list[int], keys: _GrowingMap,
    retain: bool, t: _Tally, control: RunControl, fan: Fanout,
) -> int | None:  # fmt: skip
    """Every segment, one call per stored batch; the covered position if the map filled.
    The batches are read here and digested on ``fan``'s threads (``_digested``), in runs
    of ``BATCHES_A_UNIT`` (one stream over all segments: no thread waits at a segment's
    end); their digests are mapped here, in order."""
    units = _runs(_stored(storage, segments), 1 if fan.threads == 1 else BATCHES_A_UNIT)
    with closing(fan.ordered(_digested, units)) as digested:
        for index, at, entries in chain.from_iterable(digested):
            seg = segments[index]
            base = positions[index] - seg.first_entry  # position of entry e: base + e
            covered = _put(keys, entries, at, seg, base, retain, t)
            if covered is not None:
                return covered
            t.pace(control)
    return None


def _put(
    keys: _GrowingMap, entries: bytes, at: int, seg: Segment, base: int, retain: bool,
    t: _Tally,
) -> int | None:  # fmt: skip
    """One batch's entries into the map, growing it when full; the covered position when
    it can grow no more."""
    first = max(at, seg.first_entry)
    while True:
        read, kept, tombs, keyless, nbytes, _size, stop = exchange_digested(
            keys.map, entries, at, first, seg.last_entry, base, retain
        )
        t.read += read
        t.kept += kept
        t.tombstones += tombs
        t.keyless += keyless
        t.bytes_in += nbytes
        if stop < 0:
            return None
        if not keys.grow():
            return base + stop
        first = stop


# (segment index, position, payload, where) of a stored batch
Stored = tuple[int, int, memoryview, str]


def _stored(storage: BatchReads, segments: tuple[Segment, ...]) -> Iterator[Stored]:
    for index, seg in enumerate(segments):
        for at, payload, where in storage.stored_batches(seg):
            yield index, at, payload, where


def _runs(batches: Iterator[Stored], n: int) -> Iterator[list[Stored]]:
    """The batches in runs of ``n`` (read in this thread, as the fanout asks for them)."""
    run: list[Stored] = []
    for batch in batches:
        run.append(batch)
        if len(run) == n:
            yield run
            run = []
    if run:
        yield run


def _digested(run: list[Stored]) -> Iterator[tuple[int, int, bytes]]:
    """Each batch's entries (``digest_positions``: size, flags and key digest a record),
    on one of the fanout's threads."""
    for index, at, payload, where in run:
        yield index, at, digest_positions(payload, where)


def _map_entries(
    storage: CompactionReads, seg: Segment, base: int, keys: _GrowingMap, retain: bool,
    t: _Tally, control: RunControl,
) -> int | None:  # fmt: skip
    """One segment, entry by entry (storages without stored batches)."""
    exchange = keys.map.exchange  # resize keeps the object: the bound method stays valid
    for eid, flags, size, key in storage.read_keys(seg):
        if flags & HAS_KEY:
            live = 1 if flags & VALUE_NON_EMPTY else 0
            old = exchange(key, (base + eid) << 1 | live)  # type: ignore[arg-type]
            while old == FULL and keys.grow():
                old = exchange(key, (base + eid) << 1 | live)  # type: ignore[arg-type]
            if old == NEW:
                t.kept += live
            elif old == FULL:
                return base + eid
            else:
                t.kept += live - (old & 1)
            t.tombstones += 1 - live
        elif retain:
            t.kept += 1
        else:
            t.keyless += 1
        t.read += 1
        t.bytes_in += size
        t.pace(control)
    return None


def _map_all(
    storage: CompactionReads,
    inp: CompactionInput,
    positions: list[int],
    keys: _GrowingMap,
    t: _Tally,
    control: RunControl,
    threads: int,
) -> int | None:
    """Every key of the input mapped, stored batches at a time where the storage reads
    them (on ``threads``), else entry by entry; the position the map filled at, or None."""
    retain = inp.retain_null_key
    if isinstance(storage, BatchReads):
        with Fanout(threads if COMPILED else 1) as fan:
            return _map_batches(storage, inp.segments, positions, keys, retain, t, control, fan)
    for seg, base in zip(inp.segments, positions, strict=True):
        base -= seg.first_entry  # position of entry e: base + e
        covered = _map_entries(storage, seg, base, keys, retain, t, control)
        if covered is not None:
            return covered
    return None


def find_winners(
    storage: CompactionReads,
    inp: CompactionInput,
    budget_bytes: int,
    control: RunControl | None = None,
    settle: bool = True,
    threads: int = 1,
    tail_keys: int = INITIAL_TAIL_KEYS,
) -> MapWinners:
    """Map every key of the input to its latest position; stop early if the map fills.
    ``settle=False`` keeps the offset map for the caller (a past view looks keys up in it).
    ``threads``: stored batches are digested on that many (compiled scans only).
    ``tail_keys``: the keys the raw part is expected to add, so that the map starts with
    room for them instead of growing (a rehash each doubling) to fit them."""
    control = control or NoControl()
    segments = inp.segments
    positions = [0]
    for seg in segments:
        positions.append(positions[-1] + seg.length)
    total = positions.pop()
    prefix = segments[0].length if segments and segments[0].compacted else 0
    keys = _GrowingMap(budget_bytes, prefix + min(total - prefix, tail_keys))
    result = MapWinners(
        positions=positions,
        retain_null_key=inp.retain_null_key,
        keep_tombstones=inp.tombstones is not None,
    )
    t = _Tally(total)
    covered = _map_all(storage, inp, positions, keys, t, control, threads)
    if covered is not None and covered <= prefix:
        raise PhaseOneMemoryExceeded(
            f"compaction of {inp.topic!r}: phase one needs more than "
            f"compaction.phase.one.memory.bytes={budget_bytes} for the {keys.map.size} keys "
            "of the compacted ledger and the next raw entry; raise the limit or compact "
            "with the Spark engine",
            topic=inp.topic,
            key=MEMORY_KEY,
            limit=budget_bytes,
        )
    control.report(Progress(PHASE_ONE, t.read, total, bytes_read=t.bytes_in))
    result.read, result.kept, result.tombstones = t.read, t.kept, t.tombstones
    result.keyless_dropped, result.bytes_in = t.keyless, t.bytes_in
    result.distinct_keys, result.peak_bytes = keys.map.size, keys.peak
    result.covered = covered
    result.offset_map = keys.map
    result.map_bytes = keys.map.memory_bytes
    if settle:
        result.peak_bytes = max(keys.peak, result.settle(budget_bytes, covered or total))
    return result
