"""The offset map's per-key work in pure Python: the twin of ``_offset_map.c``.

Functions over the map's two buffers — ``hashes`` (16 bytes of MD5 a slot) and ``offsets``
(``array('q')``, offset + 1 a slot, 0 an empty slot) — so ``offset_map.SkimpyOffsetMap``
owns the memory and either twin does the hashing and probing, with identical results:
slot = first 8 digest bytes (little-endian) mod slots, step = 1 + next 8 mod (slots - 1).
"""

from __future__ import annotations

import hashlib
import importlib
import struct
from array import array
from collections.abc import Callable

NEW = -1  # exchange: the key was not in the map (now it is)
FULL = -2  # exchange: the key is new and may not be added, or no slot is free
_HALVES = struct.Struct("<QQ").unpack


def _md5_factory() -> Callable[[bytes], hashlib._Hash]:
    """The fastest MD5 constructor available (the builtin one skips OpenSSL's set-up cost)."""
    try:
        fast: Callable[[bytes], hashlib._Hash] = importlib.import_module("_md5").md5
        return fast
    except ImportError:  # pragma: no cover - CPython always ships it
        return hashlib.md5


md5 = _md5_factory()


def _find(hashes: bytearray, offsets: array[int], digest: bytes) -> int:
    """The slot holding ``digest`` or the first free one on its probe sequence; -1 if
    every slot is taken by other digests."""
    slots = len(offsets)
    h1, h2 = _HALVES(digest)
    slot: int = h1 % slots
    if not offsets[slot] or hashes.startswith(digest, slot << 4):
        return slot
    step = 1 + h2 % max(slots - 1, 1)
    for _ in range(slots - 1):
        slot = (slot + step) % slots
        if not offsets[slot] or hashes.startswith(digest, slot << 4):
            return slot
    return -1


def exchange(hashes: bytearray, offsets: array[int], key: bytes, value: int, can_add: bool) -> int:
    """Map ``key`` to ``value``; return its previous value, ``NEW``, or ``FULL`` (no change)
    when it is new and ``can_add`` is false or no slot is free."""
    digest = md5(key).digest()
    slot = _find(hashes, offsets, digest)
    if slot < 0:
        return FULL
    stored = offsets[slot]
    if not stored:
        if not can_add:
            return FULL
        hashes[slot << 4 : (slot << 4) + 16] = digest
    offsets[slot] = value + 1
    return stored - 1 if stored else NEW


def get(hashes: bytearray, offsets: array[int], key: bytes) -> int:
    """The value mapped to ``key``, or -1."""
    slot = _find(hashes, offsets, md5(key).digest())
    return offsets[slot] - 1 if slot >= 0 else -1


def rehash(
    old_hashes: bytearray, old_offsets: array[int], hashes: bytearray, offsets: array[int]
) -> int:
    """Insert every entry of the old table into the new (empty, larger) one; the count."""
    moved = 0
    for slot, stored in enumerate(old_offsets):
        if stored:
            digest = bytes(old_hashes[slot << 4 : (slot << 4) + 16])
            at = _find(hashes, offsets, digest)
            hashes[at << 4 : (at << 4) + 16] = digest
            offsets[at] = stored
            moved += 1
    return moved


def digest(key: bytes) -> bytes:
    """The MD5 of a key (as the map computes it)."""
    return md5(key).digest()
