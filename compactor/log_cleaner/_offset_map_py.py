"""The offset map's per-key work in pure Python: the twin of ``_offset_map.c``.

Functions over the map's two buffers — ``hashes`` (16 bytes of key digest a slot) and ``offsets``
(``array('q')``, offset + 1 a slot, 0 an empty slot) — so ``offset_map.SkimpyOffsetMap``
owns the memory and either twin does the hashing and probing, with identical results:
slot = first 8 digest bytes (little-endian) h1 scaled into the slots (``h1 * slots >> 64``),
step = 1 + the next 8 scaled into ``slots - 1``; a prime slot count makes every step visit
every slot.

A key's digest is SipHash-2-4 with its 128-bit output under the fixed key ``DIGEST_KEY``
(``_offset_table.h`` says why it replaced MD5); here it is plain integer arithmetic, about
ten microseconds a key: this twin is for machines that could not build the compiled one.
"""

from __future__ import annotations

import struct
from array import array

NEW = -1  # exchange: the key was not in the map (now it is)
FULL = -2  # exchange: the key is new and may not be added, or no slot is free
_QQ = struct.Struct("<QQ")  # a digest's two halves, a SipHash key's two words
_HALVES = _QQ.unpack


DIGEST_KEY = b"compactlog offsm"
_M64 = 0xFFFFFFFFFFFFFFFF


def siphash128(key: bytes, data: bytes) -> bytes:
    """SipHash-2-4 of ``data`` under the 16-byte ``key``, 128-bit output (the two 64-bit
    halves little-endian)."""
    k0, k1 = _HALVES(key)
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D ^ 0xEE
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573
    n = len(data)
    whole = n - n % 8
    words = list(struct.unpack_from(f"<{whole // 8}Q", data)) if whole else []
    words.append(int.from_bytes(data[whole:], "little") | (n & 0xFF) << 56)
    for m in words:
        v3 ^= m
        v0, v1, v2, v3 = _rounds(v0, v1, v2, v3, 2)
        v0 ^= m
    v2 ^= 0xEE
    v0, v1, v2, v3 = _rounds(v0, v1, v2, v3, 4)
    first = v0 ^ v1 ^ v2 ^ v3
    v1 ^= 0xDD
    v0, v1, v2, v3 = _rounds(v0, v1, v2, v3, 4)
    return _QQ.pack(first, v0 ^ v1 ^ v2 ^ v3)


def _rounds(v0: int, v1: int, v2: int, v3: int, n: int) -> tuple[int, int, int, int]:
    """``n`` SipRounds."""
    m = _M64
    for _ in range(n):
        v0 = (v0 + v1) & m
        v1 = ((v1 << 13 | v1 >> 51) & m) ^ v0
        v0 = (v0 << 32 | v0 >> 32) & m
        v2 = (v2 + v3) & m
        v3 = ((v3 << 16 | v3 >> 48) & m) ^ v2
        v0 = (v0 + v3) & m
        v3 = ((v3 << 21 | v3 >> 43) & m) ^ v0
        v2 = (v2 + v1) & m
        v1 = ((v1 << 17 | v1 >> 47) & m) ^ v2
        v2 = (v2 << 32 | v2 >> 32) & m
    return v0, v1, v2, v3


def _find(hashes: bytearray, offsets: array[int], digest: bytes) -> int:
    """The slot holding ``digest`` or the first free one on its probe sequence; -1 if
    every slot is taken by other digests."""
    slots = len(offsets)
    h1, h2 = _HALVES(digest)
    slot: int = h1 * slots >> 64
    if not offsets[slot] or hashes.startswith(digest, slot << 4):
        return slot
    step = 1 + (h2 * (slots - 1) >> 64)
    for _ in range(slots - 1):
        slot += step
        if slot >= slots:
            slot -= slots
        if not offsets[slot] or hashes.startswith(digest, slot << 4):
            return slot
    return -1


def exchange(hashes: bytearray, offsets: array[int], key: bytes, value: int, can_add: bool) -> int:
    """Map ``key`` to ``value``; return its previous value, ``NEW``, or ``FULL`` (no change)
    when it is new and ``can_add`` is false or no slot is free."""
    key_hash = digest(key)
    slot = _find(hashes, offsets, key_hash)
    if slot < 0:
        return FULL
    stored = offsets[slot]
    if not stored:
        if not can_add:
            return FULL
        hashes[slot << 4 : (slot << 4) + 16] = key_hash
    offsets[slot] = value + 1
    return stored - 1 if stored else NEW


def get(hashes: bytearray, offsets: array[int], key: bytes) -> int:
    """The value mapped to ``key``, or -1."""
    slot = _find(hashes, offsets, digest(key))
    return offsets[slot] - 1 if slot >= 0 else -1


def rehash(
    old_hashes: bytearray, old_offsets: array[int], hashes: bytearray, offsets: array[int]
) -> int:
    """Insert every entry of the old table into the new (empty, larger) one; the count."""
    moved = 0
    for slot, stored in enumerate(old_offsets):
        if stored:
            held = bytes(old_hashes[slot << 4 : (slot << 4) + 16])
            at = _find(hashes, offsets, held)
            hashes[at << 4 : (at << 4) + 16] = held
            offsets[at] = stored
            moved += 1
    return moved


def digest(key: bytes) -> bytes:
    """The 16 bytes the map keeps for ``key``: its SipHash-2-4-128 under ``DIGEST_KEY``."""
    return siphash128(DIGEST_KEY, key)
