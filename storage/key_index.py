"""The key index of LEDGER topics: where every raw message of a key is, without a scan.

A key's index hash is FNV-1a 64 folded to 32 bits, never 0 (``key_hash``). The append
path writes the index as one **block per stored batch** (``X ledger 0x00 first_entry``):
the hash of each record in order, 4 bytes each, 0 for a keyless record, emitted by the
batch codec's compiled twin while it encodes the records (``EncodedRun.index_block``)
and put in the same WriteBatch as the batch: one extra put per batch (4 bytes a record
beside about 110 for the message), never one per record, and the index can never
disagree with the ledger after a crash. A RocksDB key per record would cost more than
the whole publish path spends on a record.

Blocks are in id order, so a lookup would read every block of a ledger; the
``KeyIndexer`` (``storage/key_indexer.py``) merges them off the publish path into sorted
**runs** of entries ``(hash u32, entry id u64)``, 12 bytes, in chunks of
``CHUNK_ENTRIES`` keyed by the run's first entry and the chunk's last entry
(``X ledger 0x01 run_first hash entry``). A lookup seeks each run straight to the chunk
that may hold the hash. Blocks merge once ``BLOCKS_BEFORE_MERGE`` have gathered or the
ledger is sealed; a new run absorbs the newest runs up to twice its size (a binary
counter), and a sealed ledger ends as one run. So a lookup costs, per ledger of the
topic, one seek per run (one, once sealed) plus the current ledger's few unmerged
blocks, plus one batch read per message of the key: it follows the key's history, not
the topic's size.

A merge is one atomic write (new chunks in, the blocks and runs it replaced out); it is
not synced, and need not be: after a crash the blocks or the older runs are still there.
Everything of a ledger's index lies in ``X ledger ...`` and goes with the ledger
(retention, topic delete, orphan collection). Hashes collide (32 bits); readers compare
the key of each message they fetch, so a collision costs a read, never a wrong answer.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from compactlog.storage import batch as codec
from compactlog.storage import keys
from compactlog.storage.rocks import Batch, RocksDB
from compactlog.storage.rocks_reads import RocksReads

HASH = 4  # a block: one u32 hash a record
ENTRY = 12  # a run: hash u32, entry id u64
CHUNK_ENTRIES = 512
BLOCKS_BEFORE_MERGE = 64
_U32 = struct.Struct(">I")
_U64 = keys.U64


def key_hash(key: bytes) -> int:
    return int(codec.codec.key_hash(key))


def entries_of(run: bytes) -> list[tuple[int, int]]:
    """``(hash, entry id)`` of every entry of a run chunk."""
    return [
        (_U32.unpack_from(run, p)[0], _U64.unpack_from(run, p + HASH)[0])
        for p in range(0, len(run) - len(run) % ENTRY, ENTRY)
    ]


def block_entries(block: bytes, first_entry: int) -> bytes:
    """A batch's index block as run entries (keyless records have none)."""
    return bytes(codec.codec.block_entries(block, first_entry))


def block_of(walked: Iterable[codec.Walked]) -> bytes:
    """The index block of a batch's walked records (backfill and ``compactlog check``:
    the append path gets the same bytes from the encoder)."""
    hashes = [key_hash(k) if k is not None else 0 for *_i, k, _s, _e in walked]
    return b"".join(_U32.pack(h) for h in hashes) if any(hashes) else b""


def _hits(data: bytes, wanted: bytes, step: int) -> list[int]:
    """Offsets (in ``step``s) of the aligned places where ``data`` holds ``wanted``."""
    out: list[int] = []
    i = data.find(wanted)
    while i >= 0:
        if i % step == 0:
            out.append(i // step)
            i = data.find(wanted, i + step)
        else:
            i = data.find(wanted, i + 1)
    return out


def lookup(db: RocksReads, ledger_id: int, hashed: int) -> list[int]:
    """Entry ids of ``ledger_id`` whose key hashes to ``hashed``, ascending (collisions
    included). One iterator: the ledger's index is seen in one state, merges or not."""
    begin, end = keys.key_index_range(ledger_id)
    seeker = db.seeker(end)
    wanted = _U32.pack(hashed)
    hits: list[int] = []
    run_from = keys.index_run_prefix(ledger_id, 0)
    for key, value in seeker.scan_from(begin):
        if key[9] != keys.INDEX_BLOCK:
            break
        first = keys.parse_index_key(key)[2]
        hits += [first + i for i in _hits(value, wanted, HASH)]
    while True:
        head = next(seeker.scan_from(run_from), None)
        if head is None:
            break
        run_first = keys.parse_index_key(head[0])[2]
        prefix = keys.index_run_prefix(ledger_id, run_first)
        for key, value in seeker.scan_from(prefix + wanted):
            if not key.startswith(prefix):
                break
            hits += [
                _U64.unpack_from(value, i * ENTRY + HASH)[0] for i in _hits(value, wanted, ENTRY)
            ]
            if key[18:22] != wanted:  # this chunk ends past the hash: no later one has it
                break
        if run_first == keys.MAX_ID:
            break
        run_from = keys.index_run_prefix(ledger_id, run_first + 1)
    return sorted(set(hits))


# ---- merging (the KeyIndexer's work) ----------------------------------------------------


@dataclass
class Run:
    first: int  # the run's first entry id (its key prefix)
    chunks: int  # its size, in chunks


@dataclass
class LedgerIndex:
    """The shape of one ledger's index: block keys and runs, oldest first."""

    blocks: list[bytes]
    runs: list[Run]


def shape(db: RocksReads, ledger_id: int) -> LedgerIndex:
    found = LedgerIndex([], [])
    for key in db.scan_keys(*keys.key_index_range(ledger_id)):
        _lid, level, first = keys.parse_index_key(key)
        if level == keys.INDEX_BLOCK:
            found.blocks.append(key)
        elif found.runs and found.runs[-1].first == first:
            found.runs[-1].chunks += 1
        else:
            found.runs.append(Run(first, 1))
    return found


def _chunks(entries: bytes) -> Iterator[bytes]:
    size = CHUNK_ENTRIES * ENTRY
    for p in range(0, len(entries), size):
        yield entries[p : p + size]


def plan_merge(db: RocksReads, ledger_id: int, sealed: bool) -> Batch | None:
    """The write that merges what is due in one ledger's index, or None.

    Due: ``BLOCKS_BEFORE_MERGE`` blocks (any, once the ledger is sealed) become a run,
    which absorbs the newest runs up to twice its size; a sealed ledger ends as one run.
    """
    found = shape(db, ledger_id)
    blocks = found.blocks if len(found.blocks) >= BLOCKS_BEFORE_MERGE or sealed else []
    if not blocks and not (sealed and len(found.runs) > 1):
        return None
    parts = [
        block_entries(value, keys.parse_index_key(key)[2])
        for key in blocks
        if (value := db.get(key)) is not None
    ]
    size = max(1, sum(len(p) for p in parts) // (CHUNK_ENTRIES * ENTRY))
    runs = list(found.runs)
    taken: list[Run] = []
    while runs and (sealed or runs[-1].chunks <= 2 * size):
        run = runs.pop()
        taken.append(run)
        size += run.chunks
    batch = Batch()
    firsts = [keys.parse_index_key(key)[2] for key in blocks] + [run.first for run in taken]
    for run in taken:
        prefix = keys.index_run_prefix(ledger_id, run.first)
        end = (
            keys.index_run_prefix(ledger_id, run.first + 1)
            if run.first < keys.MAX_ID
            else (keys.key_index_range(ledger_id)[1])
        )
        parts += [value for _key, value in db.scan(prefix, end)]
        batch.delete_range(prefix, end)
    for key in blocks:
        batch.delete(key)
    merged = codec.codec.sort_index(b"".join(parts))
    run_first = min(firsts)
    for chunk in _chunks(merged):
        last = len(chunk) - ENTRY
        last_hash, last_entry = (
            _U32.unpack_from(chunk, last)[0],
            _U64.unpack_from(chunk, last + HASH)[0],
        )
        batch.put(keys.index_chunk_key(ledger_id, run_first, last_hash, last_entry), chunk)
    return batch


# ---- building an index for ledgers written before it existed ----------------------------


def backfill(db: RocksReads, ledger_ids: Iterable[int], out: Batch) -> int:
    """Index blocks for every batch of raw ledgers written without them; batches that
    fail their check are left for readers to report. Returns the blocks written."""
    written = 0
    for lid in ledger_ids:
        for key, data in db.scan(*keys.ledger_range(lid)):
            first = keys.entry_ids(key)[1]
            where = f"ledger {lid} entry {first}"
            try:
                header = codec.check(data, where)
                block = block_of(codec.walk(codec.payload_of(data, header), where))
            except Exception:  # damaged: readers and `compactlog check` name it
                continue
            if block:
                out.put(keys.index_block_key(lid, first), block)
                written += 1
    return written


def build_missing(db: RocksDB, raw_ledgers: Iterable[int]) -> int:
    """A store written before the key index existed gets one, once, at start-up (the
    ``\\x00key_index`` key says it has one); returns the blocks written."""
    if db.get(keys.KEY_INDEX_KEY) == keys.KEY_INDEX_VERSION:
        return 0
    batch = Batch()
    written = backfill(db, raw_ledgers, batch)
    batch.put(keys.KEY_INDEX_KEY, keys.KEY_INDEX_VERSION)
    db.write(batch, sync=True)
    return written
