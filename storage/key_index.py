"""The key index of LEDGER topics: where every raw message of a key is, without a scan.

An index entry is 16 bytes, ``key_hash(key)`` and the entry id (two big-endian u64), so
entries sort by hash, then by id. The append path writes the index as one **block per
stored batch** (``X ledger 0x00 first_entry``), the batch codec's compiled twin emitting
it while it encodes the records (``EncodedRun.index_block``), in the same WriteBatch as
the batch: one extra put per batch, never one per record, and the index can never
disagree with the ledger after a crash. A publish of 1,000 records pays for one 16 KB
value, not 1,000 RocksDB keys (a put per record costs more than the whole publish).

Blocks are unsorted and a lookup reads every block of a ledger, so the ``KeyIndexer``
(``storage/key_indexer.py``) merges them off the publish path into sorted **runs**:
chunks of ``CHUNK_ENTRIES`` entries keyed by the run's first entry and the chunk's last
``(hash, entry)`` (``X ledger 0x01 run_first hash entry``). A lookup seeks each run
straight to the chunk that may hold the hash. Runs merge as a binary counter (a new run
absorbs the newest runs not more than twice its size), and a sealed ledger ends as one
run; so a lookup costs, per ledger of the topic, one seek per run (a handful) plus at
most ``BLOCKS_BEFORE_MERGE`` small blocks of the current ledger, plus one batch read per
message of the key: proportional to the key's history, not to the topic.

A merge is one atomic write (new chunks in, the blocks and runs it replaced out); it is
not synced, and needs not be: after a crash the blocks or the older runs are still there.
Everything of a ledger's index lies in ``X ledger ...`` and goes with the ledger
(retention, topic delete, orphan collection). Hashes collide; readers compare the key of
the message they fetch, so a collision costs a read, never a wrong answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from compactlog.storage import batch as codec
from compactlog.storage import keys
from compactlog.storage.rocks import Batch, RocksReads

ENTRY = 16
CHUNK_ENTRIES = 256
BLOCKS_BEFORE_MERGE = 16
_U64 = keys.U64


def key_hash(key: bytes) -> int:
    return int(codec.codec.key_hash(key))


def entries_of(block: bytes) -> list[tuple[int, int]]:
    """``(hash, entry id)`` of every entry of a block or chunk."""
    return [
        (_U64.unpack_from(block, p)[0], _U64.unpack_from(block, p + 8)[0])
        for p in range(0, len(block) - len(block) % ENTRY, ENTRY)
    ]


def block_of(walked: Iterable[codec.Walked]) -> bytes:
    """The index block of a batch's walked records (backfill and ``compactlog check``:
    the append path gets the same bytes from the encoder)."""
    return b"".join(
        _U64.pack(key_hash(k)) + _U64.pack(entry) for _l, entry, _f, k, _s, _e in walked if k is not None
    )


def _hits(block: bytes, wanted: bytes) -> list[int]:
    """Entry ids of the entries of ``block`` whose hash is ``wanted`` (8 bytes)."""
    out: list[int] = []
    i = block.find(wanted)
    while i >= 0:
        if i % ENTRY == 0:
            out.append(_U64.unpack_from(block, i + 8)[0])
            i = block.find(wanted, i + ENTRY)
        else:
            i = block.find(wanted, i + 1)
    return out


def lookup(db: RocksReads, ledger_id: int, hashed: int) -> list[int]:
    """Entry ids of ``ledger_id`` whose key hashes to ``hashed``, ascending (collisions
    included). One iterator: the ledger's index is seen in one state, merges or not."""
    begin, end = keys.key_index_range(ledger_id)
    seeker = db.seeker(end)
    wanted = _U64.pack(hashed)
    hits: list[int] = []
    run_from = keys.index_run_prefix(ledger_id, 0)
    for key, value in seeker.scan_from(begin):
        if key[9] != keys.INDEX_BLOCK:
            break
        hits += _hits(value, wanted)
    while True:
        first = next(seeker.scan_from(run_from), None)
        if first is None:
            break
        run_first = keys.parse_index_key(first[0])[2]
        prefix = keys.index_run_prefix(ledger_id, run_first)
        for key, value in seeker.scan_from(prefix + wanted + bytes(8)):
            if not key.startswith(prefix):
                break
            hits += _hits(value, wanted)
            if key[18:26] != wanted:  # this chunk ends past the hash: no later one has it
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
    parts = [value for key in blocks if (value := db.get(key)) is not None]
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
        end = keys.index_run_prefix(ledger_id, run.first + 1) if run.first < keys.MAX_ID else (
            keys.key_index_range(ledger_id)[1]
        )
        parts += [value for _key, value in db.scan(prefix, end)]
        batch.delete_range(prefix, end)
    for key in blocks:
        batch.delete(key)
    merged = codec.codec.sort_index(b"".join(parts))
    run_first = min(firsts)
    for chunk in _chunks(merged):
        last_hash, last_entry = _U64.unpack_from(chunk, len(chunk) - ENTRY)[0], _U64.unpack_from(
            chunk, len(chunk) - 8
        )[0]
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


def ledger_entries(db: RocksReads, ledger_id: int) -> list[tuple[int, int]]:
    """Every index entry of a ledger, sorted (``compactlog check``)."""
    found: list[tuple[int, int]] = []
    for _key, value in db.scan(*keys.key_index_range(ledger_id)):
        found += entries_of(value)
    return sorted(found)
