"""RocksDB key layout of the ledger store (all integers big-endian, so byte order is
numeric order and one ledger is one contiguous key range).

::

    b"\\x00format"                        -> b"2"          format version (1: one entry a message)
    b"\\x00next_ledger"                   -> u64           next ledger id (store-wide, from 1)
    b"T" topic                           -> JSON          kind, overrides, ledger ids, incarnation
    b"L" ledger_id:u64                   -> ledger meta   see codec.LedgerMeta
    b"E" ledger_id:u64 first_entry:u64   -> batch         storage/batch.py, keyed by its first entry
    b"D" ledger_id:u64 position:u64      -> key digests   of the compacted ledger batch at
                                                          E ledger position, written with it
                                                          (storage/compacted_digests.py)
    b"C" topic 0x00 subscription         -> JSON          cursor head: mark-delete, delivered,
                                                          properties (storage/cursor.py)
    b"A" topic 0x00 subscription 0x00 ledger_id:u64 entry_id:u64
                                         -> ledger_id:u64 entry_id:u64
                                                          one range of individually acked ids
                                                          beyond mark-delete: start -> end
    b"S" topic                           -> JSON          compaction status and last run
    b"B" set_aside_ms:u64 original key   -> value         a value that failed validation, kept
    b"\\x00key_index"                    -> b"1"          raw ledgers carry a key index (below)
    b"X" ledger_id:u64 0x00 first_entry:u64
                                         -> index block   the key index of the batch at
                                                          E ledger first_entry (written with it)
    b"X" ledger_id:u64 0x01 run_first:u64 hash:u32 entry:u64
                                         -> index chunk   a merged run of a ledger's key index,
                                                          sorted; the key names its last entry
    b"P" spanning_id:u64 topic           -> id runs       a part of a spanning publish stored
                                                          here (storage/spanning.py), written
                                                          with its records; forgotten below
                                                          the front's floor

A batch holds consecutive entries of one ledger; the batch holding entry ``e`` is the
last key at or before ``E ledger e`` (a seek-for-prev). In a compacted ledger the key's
entry part is the position of the batch's first message in that ledger (0, 1, ...), and
the messages keep their original ids inside the batch.
"""

from __future__ import annotations

import struct

FORMAT_KEY = b"\x00format"
FORMAT_VERSION = b"2"
LEGACY_FORMAT_VERSION = b"1"
NEXT_LEDGER_KEY = b"\x00next_ledger"

U64 = struct.Struct(">Q")
_LEDGER = struct.Struct(">cQ")
_ENTRY = struct.Struct(">cQQ")
_entry_unpack = _ENTRY.unpack
_ID = struct.Struct(">QQ")

MAX_ID = 2**64 - 1


def topic_key(topic: str) -> bytes:
    return b"T" + topic.encode()


def topic_range() -> tuple[bytes, bytes]:
    return b"T", b"U"


def ledger_meta_key(ledger_id: int) -> bytes:
    return _LEDGER.pack(b"L", ledger_id)


def ledger_meta_range() -> tuple[bytes, bytes]:
    return b"L", b"M"


def ledger_id_of_meta_key(key: bytes) -> int:
    return int(_LEDGER.unpack(key)[1])


def entry_key(ledger_id: int, entry_id: int) -> bytes:
    return _ENTRY.pack(b"E", ledger_id, entry_id)


def entry_ids(key: bytes) -> tuple[int, int]:
    _, ledger_id, entry_id = _entry_unpack(key)
    return ledger_id, entry_id


def ledger_range(ledger_id: int) -> tuple[bytes, bytes]:
    """The batch range of one ledger, for scans and delete_range."""
    return (
        _ENTRY.pack(b"E", ledger_id, 0),
        _LEDGER.pack(b"E", ledger_id + 1) if ledger_id < MAX_ID else b"F",
    )


def digest_key(ledger_id: int, position: int) -> bytes:
    """The key digests of the compacted ledger batch at ``E ledger position``."""
    return _ENTRY.pack(b"D", ledger_id, position)


def digest_range(ledger_id: int) -> tuple[bytes, bytes]:
    """Every digest record of one ledger (deleted with the ledger)."""
    end = _LEDGER.pack(b"D", ledger_id + 1) if ledger_id < MAX_ID else b"E"
    return _ENTRY.pack(b"D", ledger_id, 0), end


def digest_all() -> tuple[bytes, bytes]:
    return b"D", b"E"


KEY_INDEX_KEY = b"\x00key_index"
KEY_INDEX_VERSION = b"1"
_X_LEDGER = struct.Struct(">cQ")
_X_BLOCK = struct.Struct(">cQBQ")
_X_CHUNK = struct.Struct(">cQBQIQ")
INDEX_BLOCK, INDEX_RUN = 0, 1


def key_index_range(ledger_id: int) -> tuple[bytes, bytes]:
    """Every key index record of one ledger (deleted with the ledger)."""
    end = _X_LEDGER.pack(b"X", ledger_id + 1) if ledger_id < MAX_ID else b"Y"
    return _X_LEDGER.pack(b"X", ledger_id), end


def key_index_all() -> tuple[bytes, bytes]:
    return b"X", b"Y"


def index_block_key(ledger_id: int, first_entry: int) -> bytes:
    return _X_BLOCK.pack(b"X", ledger_id, INDEX_BLOCK, first_entry)


def index_run_prefix(ledger_id: int, run_first: int) -> bytes:
    return _X_BLOCK.pack(b"X", ledger_id, INDEX_RUN, run_first)


def index_chunk_key(ledger_id: int, run_first: int, last_hash: int, last_entry: int) -> bytes:
    return _X_CHUNK.pack(b"X", ledger_id, INDEX_RUN, run_first, last_hash, last_entry)


def parse_index_key(key: bytes) -> tuple[int, int, int]:
    """``(ledger id, INDEX_BLOCK or INDEX_RUN, first entry or run_first)`` of an X key."""
    _x, ledger_id, level, first = _X_BLOCK.unpack_from(key)
    return ledger_id, level, first


def spanning_part_key(txid: int, topic: str) -> bytes:
    return U64.pack(txid).join((b"P", topic.encode()))


def spanning_parts_below(floor: int) -> tuple[bytes, bytes]:
    """The kept parts of every spanning publish below ``floor`` (to forget them)."""
    return b"P", b"P" + U64.pack(floor)


LEGACY_KEY_BLOCK_PREFIX = b"K"  # format 1 only: per-batch key blocks


def cursor_key(topic: str, subscription: str) -> bytes:
    return b"C" + topic.encode() + b"\x00" + subscription.encode()


def cursor_range(topic: str) -> tuple[bytes, bytes]:
    prefix = b"C" + topic.encode() + b"\x00"
    return prefix, prefix[:-1] + b"\x01"


def ack_range_prefix(topic: str, subscription: str) -> bytes:
    return b"A" + topic.encode() + b"\x00" + subscription.encode() + b"\x00"


def ack_range_key(topic: str, subscription: str, start_ledger: int, start_entry: int) -> bytes:
    return ack_range_prefix(topic, subscription) + _ID.pack(start_ledger, start_entry)


def ack_range_value(end_ledger: int, end_entry: int) -> bytes:
    return _ID.pack(end_ledger, end_entry)


def ack_range_range(topic: str) -> tuple[bytes, bytes]:
    """Every ack range of every subscription of ``topic``."""
    prefix = b"A" + topic.encode() + b"\x00"
    return prefix, prefix[:-1] + b"\x01"


def ack_ranges_all() -> tuple[bytes, bytes]:
    return b"A", b"B"


def parse_ack_range(key: bytes, value: bytes) -> tuple[str, str, tuple[int, int], tuple[int, int]]:
    """``(topic, subscription, (start ledger, entry), (end ledger, entry))`` of one record."""
    topic, subscription = key[1:-17].split(b"\x00", 1)
    start = _ID.unpack(key[-16:])
    end = _ID.unpack(value)
    return topic.decode(), subscription.decode(), start, end


def status_key(topic: str) -> bytes:
    return b"S" + topic.encode()


def bad_key(original: bytes, set_aside_ms: int) -> bytes:
    """Where a value that failed validation is kept (never read by the server)."""
    return b"B" + U64.pack(set_aside_ms) + original
