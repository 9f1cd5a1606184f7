"""SkimpyOffsetMap: key hash → latest offset in a fixed memory budget (Kafka's design).

Each entry is 24 bytes: a 16-byte MD5 of the key and an 8-byte offset. Two preallocated
buffers hold them (``bytearray`` of hashes, ``array('q')`` of offsets + 1, 0 meaning an
empty slot), so the map never grows past ``log.cleaner.dedupe.buffer.size`` whatever the
key count; it is cleared between passes and the pass stops where it fills.

Open addressing with double hashing over a prime number of slots: the first 8 bytes of the
digest choose the slot, the next 8 the step, and a prime table size makes every probe
sequence visit every slot. Two keys with the same MD5 would share an entry, as in Kafka:
the digest is taken as the key's identity (for n keys the chance of any collision is about
n² / 2¹²⁹, 10⁻²¹ for a billion keys).

The two-phase compactor's phase one uses the same map with two additions: ``exchange``
(put, returning what the key held, so a caller can keep figures per key) and ``resize``
(rehash into a larger table: its map grows with the key space up to its budget instead
of being allocated whole, as the cleaner's is).
"""

from __future__ import annotations

import hashlib
import importlib
import struct
from array import array
from collections.abc import Callable

from compactlog.errors import InvalidConfig

BYTES_PER_ENTRY = 24
HASH_SIZE = 16
NEW = -1  # ``exchange``: the digest was not in the map (now it is)
FULL = -2  # ``exchange``: the digest is new and the map is full (nothing changed)
_HALVES = struct.Struct("<QQ")
FIRST_HALF = struct.Struct("<Q")


def _md5_factory() -> Callable[[bytes], hashlib._Hash]:
    """The fastest MD5 constructor available (the builtin one skips OpenSSL's set-up cost)."""
    try:
        fast: Callable[[bytes], hashlib._Hash] = importlib.import_module("_md5").md5
        return fast
    except ImportError:  # pragma: no cover - CPython always ships it
        return hashlib.md5


md5 = _md5_factory()


def _largest_prime_at_most(n: int) -> int:
    def prime(k: int) -> bool:
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

    while n >= 2 and not prime(n):
        n -= 1
    return max(n, 1)


class SkimpyOffsetMap:
    """A fixed-size map from key digests to offsets; see the module docstring."""

    def __init__(self, memory_bytes: int, load_factor: float) -> None:
        if memory_bytes < BYTES_PER_ENTRY:
            raise InvalidConfig(f"log.cleaner.dedupe.buffer.size {memory_bytes} holds no entry")
        self.load_factor = load_factor
        self._allocate(_largest_prime_at_most(memory_bytes // BYTES_PER_ENTRY))
        self.size = 0
        self.latest_offset = -1

    def _allocate(self, slots: int) -> None:
        self.slots = slots
        self.max_entries = max(1, int(slots * self.load_factor))
        self._step_mod = max(slots - 1, 1)
        self._hashes = bytearray(slots * HASH_SIZE)
        self._offsets: array[int] = array("q", [0]) * slots  # one allocation, no copy

    def resize(self, memory_bytes: int) -> bool:
        """Rehash every entry into a table of (about) ``memory_bytes``; False, and no
        change, when that table would not have more slots than this one. While it runs
        both tables exist: the caller's budget must hold the two."""
        slots = _largest_prime_at_most(memory_bytes // BYTES_PER_ENTRY)
        if slots <= self.slots:
            return False
        old_hashes, old_offsets = self._hashes, self._offsets
        self._allocate(slots)
        self.size = 0
        put = self.put_hash
        for slot, stored in enumerate(old_offsets):
            if stored:
                put(bytes(old_hashes[slot << 4 : (slot << 4) + HASH_SIZE]), stored - 1)
        return True

    @property
    def memory_bytes(self) -> int:
        return self.slots * BYTES_PER_ENTRY

    @property
    def utilization(self) -> float:
        return self.size / self.slots

    def clear(self) -> None:
        if self.size:
            self._hashes = bytearray(self.slots * HASH_SIZE)
            self._offsets = array("q", [0]) * self.slots
        self.size = 0
        self.latest_offset = -1

    def put_hash(self, digest: bytes, offset: int) -> bool:
        """Map ``digest`` to ``offset``; False (and no change) if the map is full and it is new."""
        h1, h2 = _HALVES.unpack(digest)
        slots = self.slots
        slot: int = h1 % slots
        offsets = self._offsets
        stored = offsets[slot]
        if stored and not self._hashes.startswith(digest, slot << 4):
            step = 1 + h2 % self._step_mod
            hashes = self._hashes
            for _ in range(slots - 1):
                slot = (slot + step) % slots
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

    def exchange_hash(self, digest: bytes, offset: int) -> int:
        """Map ``digest`` to ``offset`` and return the offset it had: ``NEW`` if none, or
        ``FULL`` (and no change) when it is new and the map is full."""
        h1, h2 = _HALVES.unpack(digest)
        slots = self.slots
        slot: int = h1 % slots
        offsets, hashes = self._offsets, self._hashes
        stored = offsets[slot]
        if stored and not hashes.startswith(digest, slot << 4):
            step = 1 + h2 % self._step_mod
            for _ in range(slots - 1):
                slot = (slot + step) % slots
                stored = offsets[slot]
                if not stored or hashes.startswith(digest, slot << 4):
                    break
            else:
                return FULL
        if not stored:
            if self.size >= self.max_entries:
                return FULL
            hashes[slot << 4 : (slot << 4) + HASH_SIZE] = digest
            self.size += 1
        offsets[slot] = offset + 1
        if offset > self.latest_offset:
            self.latest_offset = offset
        return stored - 1 if stored else NEW

    def get_hash(self, digest: bytes) -> int:
        """The offset mapped to ``digest``, or -1."""
        h1, h2 = _HALVES.unpack(digest)
        slots = self.slots
        slot: int = h1 % slots
        offsets = self._offsets
        stored = offsets[slot]
        if not stored:
            return -1
        hashes = self._hashes
        if hashes.startswith(digest, slot << 4):
            return stored - 1
        step = 1 + h2 % self._step_mod
        for _ in range(slots - 1):
            slot = (slot + step) % slots
            stored = offsets[slot]
            if not stored:
                return -1
            if hashes.startswith(digest, slot << 4):
                return stored - 1
        return -1

    def table(self) -> tuple[bytearray, array[int], int]:
        """(hashes, offsets + 1, slots) for callers that inline the first probe in a hot loop.

        The first probe of ``get_hash``/``put_hash`` is slot ``first 8 digest bytes % slots``;
        a hit there is ``offsets[slot] != 0 and hashes.startswith(digest, slot * 16)``.
        Anything else must go through the methods.
        """
        return self._hashes, self._offsets, self.slots

    def put(self, key: bytes, offset: int) -> bool:
        return self.put_hash(md5(key).digest(), offset)

    def get(self, key: bytes) -> int:
        return self.get_hash(md5(key).digest())

    def exchange(self, key: bytes, offset: int) -> int:
        return self.exchange_hash(md5(key).digest(), offset)
