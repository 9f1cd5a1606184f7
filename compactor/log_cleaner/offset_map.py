"""SkimpyOffsetMap: key hash → latest offset in a fixed memory budget (Kafka's design).

Each entry is 24 bytes: a 16-byte digest of the key and an 8-byte offset. Two preallocated
buffers hold them (``bytearray`` of hashes, ``array('q')`` of offsets + 1, 0 meaning an
empty slot), so the map never grows past ``log.cleaner.dedupe.buffer.size`` whatever the
key count; it is cleared between passes and the pass stops where it fills.

Open addressing with double hashing over a prime number of slots: the first 8 bytes of the
digest choose the slot, the next 8 the step (each scaled into its range by a multiply and a
shift, ``h * n >> 64``, not a division), and a prime table size makes every probe sequence
visit every slot. Two keys with the same digest would share an entry, as in Kafka:
the digest is taken as the key's identity (for n keys the chance of any collision is about
n² / 2¹²⁹, 10⁻²¹ for a billion keys). The digest is SipHash-2-4's 128-bit output under a
fixed key (``key_digest``; Kafka's map uses MD5, as this one did until SipHash cut the
cleaner's and phase one's hashing to about a fifth: ``_offset_table.h``).

The two-phase compactor's phase one uses the same map with two additions: ``exchange``
(put, returning what the key held, so a caller can keep figures per key) and ``resize``
(rehash into a larger table: its map grows with the key space up to its budget instead
of being allocated whole, as the cleaner's is). Those, and ``get``, hash and probe in a
compiled twin (``_offset_map.c``) when one was built, else in its pure-Python twin
(``_offset_map_py.py``), with identical results.
"""

from __future__ import annotations

import ctypes
import math
import struct
from array import array
from collections.abc import Callable
from typing import Protocol, cast

from compactlog.compactor.log_cleaner import _offset_map_py
from compactlog.compactor.log_cleaner._offset_map_py import FULL, NEW
from compactlog.errors import InvalidConfig
from compactlog.twins import load_twin

__all__ = ["BYTES_PER_ENTRY", "COMPILED", "FULL", "NEW", "SkimpyOffsetMap", "key_digest"]

BYTES_PER_ENTRY = 24
HASH_SIZE = 16
_HALVES = struct.Struct("<QQ")
FIRST_HALF = struct.Struct("<Q")
MIN_FIT_SLOTS = 1021  # a prime; the smallest table ``fit`` makes
START_SHARE = 64  # a growing map starts at this share of the table ``fit`` allows
GROW_LOAD = 0.5  # a growing map grows before its load passes this
GROWTH = 4  # by this many times the table that would just do


class Twin(Protocol):
    """The functions both twins provide (``_offset_map_py`` documents them)."""

    def exchange(
        self, hashes: bytearray, offsets: array[int], key: bytes, value: int, can_add: bool
    ) -> int: ...

    def get(self, hashes: bytearray, offsets: array[int], key: bytes) -> int: ...

    def rehash(
        self,
        old_hashes: bytearray,
        old_offsets: array[int],
        hashes: bytearray,
        offsets: array[int],
    ) -> int: ...

    def digest(self, key: bytes) -> bytes: ...


_module, COMPILED = load_twin("compactlog.compactor.log_cleaner._offset_map", _offset_map_py)
twin = cast(Twin, _module)
key_digest: Callable[[bytes], bytes] = twin.digest  # the 16 bytes the map keeps for a key


def _is_prime(k: int) -> bool:
    if k < 4:
        return k >= 2
    if k % 2 == 0:
        return False
    i = 3
    while i * i <= k:
        if k % i == 0:
            return False
        i += 2
    return True


def _largest_prime_at_most(n: int) -> int:
    while n >= 2 and not _is_prime(n):
        n -= 1
    return max(n, 1)


def _smallest_prime_at_least(n: int) -> int:
    n = max(n, 2)
    while not _is_prime(n):
        n += 1
    return n


class SkimpyOffsetMap:
    """A fixed-size map from key digests to offsets; see the module docstring."""

    def __init__(self, memory_bytes: int, load_factor: float, lazy: bool = False) -> None:
        """``lazy``: start with a small table and let ``fit`` size it for each pass (the
        cleaner's way), instead of taking the whole budget now."""
        if memory_bytes < BYTES_PER_ENTRY:
            raise InvalidConfig(f"log.cleaner.dedupe.buffer.size {memory_bytes} holds no entry")
        self.load_factor = load_factor
        self.budget_slots = _largest_prime_at_most(memory_bytes // BYTES_PER_ENTRY)
        self._allocate(min(self.budget_slots, MIN_FIT_SLOTS) if lazy else self.budget_slots)
        self.fit_slots = self.slots  # where ``make_room`` may grow the table to (``fit``)
        self.size = 0
        self.latest_offset = -1

    def _allocate(self, slots: int) -> None:
        self.slots = slots
        self.max_entries = max(1, int(slots * self.load_factor))
        self._hashes = bytearray(slots * HASH_SIZE)
        self._offsets: array[int] = array("q", [0]) * slots  # one allocation, no copy

    def resize(self, memory_bytes: int) -> bool:
        """Rehash every entry into a table of (about) ``memory_bytes``; False, and no
        change, when that table would not have more slots than this one. While it runs
        both tables exist: the caller's budget must hold the two."""
        slots = _largest_prime_at_most(memory_bytes // BYTES_PER_ENTRY)
        if slots <= self.slots:
            return False
        self._grow(slots)
        return True

    @property
    def memory_bytes(self) -> int:
        return self.slots * BYTES_PER_ENTRY

    @property
    def utilization(self) -> float:
        """Entries over the slots of the whole budget (Kafka's buffer utilization)."""
        return self.size / self.budget_slots

    def clear(self) -> None:
        """Empty the table in place: a slot is empty when its offset is 0, so only the
        offsets are zeroed (a pass over a 128 MiB buffer then writes 43 MiB, not 128, and
        allocates nothing: a worker keeps its map between passes)."""
        if self.size:
            address, slots = self._offsets.buffer_info()
            ctypes.memset(address, 0, slots * self._offsets.itemsize)
        self.size = 0
        self.latest_offset = -1

    def fit(self, entries: int) -> None:
        """Clear the map for a pass of at most ``entries`` keys (the cleaner's dirty section
        has no more keys than offsets). When they could not fill the budget's table, a
        table just large enough for them answers exactly the same (it cannot fill either)
        and is far kinder to the caches than 128 MiB probed at random; otherwise the
        budget's table, cleared in place. Memory never exceeds the budget.

        That table (``fit_slots``) is where the map may grow to, not where it starts,
        when two of it fit the budget (a growth holds both tables for a moment): the map
        then starts at ``1 / START_SHARE`` of it and grows as keys come (``make_room``),
        never past it. A pass of 1M offsets over 100k keys then fills a table of 6.7 MB
        instead of taking and zeroing one of 26.7 MB up front. It fills at the same key
        as the whole table would, since it grows before any key could find it full."""
        slots = self.budget_slots
        if entries < int(slots * self.load_factor):
            want = _smallest_prime_at_least(math.ceil(entries / self.load_factor) + 2)
            slots = min(slots, max(want, MIN_FIT_SLOTS))
        self.fit_slots = slots
        start = slots
        if 2 * slots <= self.budget_slots:
            start = min(slots, _smallest_prime_at_least(max(MIN_FIT_SLOTS, slots // START_SHARE)))
        if not start <= self.slots <= slots:  # else the table there is, cleared in place
            self._hashes = bytearray()  # drop the old table before taking the new one
            self._offsets = array("q")
            self._allocate(start)
            self.size = 0
        self.clear()

    @property
    def fit_bytes(self) -> int:
        """The bytes of the largest table this pass's map may take (``fit``)."""
        return self.fit_slots * BYTES_PER_ENTRY

    def make_room(self, keys: int) -> None:
        """Grow the table, short of ``fit_slots``, so that ``keys`` more keys keep its load
        under ``GROW_LOAD`` (and under the load factor, where new keys are refused): each
        growth takes ``GROWTH`` times the table that would just do, so a pass rehashes
        few keys, and probes stay short."""
        if self.slots >= self.fit_slots:
            return
        load = min(GROW_LOAD, self.load_factor)
        need = self.size + keys
        if need <= int(self.slots * load):
            return
        want = _smallest_prime_at_least(math.ceil(need / load) * GROWTH)
        self._grow(min(self.fit_slots, want))

    def _grow(self, slots: int) -> None:
        old_hashes, old_offsets = self._hashes, self._offsets
        self._allocate(slots)
        self.size = twin.rehash(old_hashes, old_offsets, self._hashes, self._offsets)

    def put_hash(self, digest: bytes, offset: int) -> bool:
        """Map ``digest`` to ``offset``; False (and no change) if the map is full and it is new."""
        self.make_room(1)
        h1, h2 = _HALVES.unpack(digest)
        slots = self.slots
        slot: int = h1 * slots >> 64
        offsets = self._offsets
        stored = offsets[slot]
        if stored and not self._hashes.startswith(digest, slot << 4):
            step = 1 + (h2 * (slots - 1) >> 64)
            hashes = self._hashes
            for _ in range(slots - 1):
                slot += step
                if slot >= slots:
                    slot -= slots
                stored = offsets[slot]
                if not stored or hashes.startswith(digest, slot << 4):
                    break
            else:
                return False
        if not stored:
            if self.size >= self.max_entries:
                return False
            self._hashes[slot << 4 : (slot << 4) + HASH_SIZE] = digest
            self.size += 1
        offsets[slot] = offset + 1
        if offset > self.latest_offset:
            self.latest_offset = offset
        return True

    def get_hash(self, digest: bytes) -> int:
        """The offset mapped to ``digest``, or -1."""
        h1, h2 = _HALVES.unpack(digest)
        slots = self.slots
        slot: int = h1 * slots >> 64
        offsets = self._offsets
        stored = offsets[slot]
        if not stored:
            return -1
        hashes = self._hashes
        if hashes.startswith(digest, slot << 4):
            return stored - 1
        step = 1 + (h2 * (slots - 1) >> 64)
        for _ in range(slots - 1):
            slot += step
            if slot >= slots:
                slot -= slots
            stored = offsets[slot]
            if not stored:
                return -1
            if hashes.startswith(digest, slot << 4):
                return stored - 1
        return -1

    def table(self) -> tuple[bytearray, array[int], int]:
        """(hashes, offsets + 1, slots) for callers that inline the first probe in a hot loop.

        The first probe of ``get_hash``/``put_hash`` is slot ``first 8 digest bytes * slots >> 64``;
        a hit there is ``offsets[slot] != 0 and hashes.startswith(digest, slot * 16)``.
        Anything else must go through the methods.
        """
        return self._hashes, self._offsets, self.slots

    def put(self, key: bytes, offset: int) -> bool:
        return self.put_hash(key_digest(key), offset)

    def get(self, key: bytes) -> int:
        return twin.get(self._hashes, self._offsets, key)

    def exchange(self, key: bytes, offset: int) -> int:
        """Map ``key`` to ``offset`` and return the offset it had: ``NEW`` if none, or
        ``FULL`` (and no change) when it is new and the map is full. (``latest_offset``
        is the cleaner's and is not kept here.)"""
        old = twin.exchange(self._hashes, self._offsets, key, offset, self.size < self.max_entries)
        if old == NEW:
            self.size += 1
        return old
