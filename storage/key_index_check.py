"""``compactlog check``'s part for the key index (``storage/key_index.py``): every raw
ledger's index holds exactly one entry per keyed message of the ledger, ``(key hash,
entry id)``, whether in per-batch blocks or merged runs; nothing else has an index."""

from __future__ import annotations

from collections import Counter
from typing import Protocol

from compactlog.errors import CorruptData
from compactlog.storage import key_index, keys
from compactlog.storage.codec import ROLE_RAW, LedgerMeta
from compactlog.storage.ledger_scans import ledgers_under
from compactlog.storage.rocks_reads import RocksReads


class Report(Protocol):
    def problem(self, where: str, what: str) -> None: ...
    def note(self, where: str, what: str) -> None: ...
    def count(self, what: str, n: int = 1) -> None: ...


def _stored(db: RocksReads, ledger_id: int, where: str, report: Report) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    for key, value in db.scan(*keys.key_index_range(ledger_id)):
        report.count("key index records")
        _lid, level, first = keys.parse_index_key(key)
        block = level == keys.INDEX_BLOCK
        if not value or len(value) % (key_index.HASH if block else key_index.ENTRY):
            report.problem(
                f"{where} key index {key[9:].hex()}", f"{len(value)} bytes is no entry list"
            )
            continue
        found += key_index.entries_of(key_index.block_entries(value, first) if block else value)
    return sorted(found)


def check_ledger_index(
    db: RocksReads,
    meta: LedgerMeta,
    expected: list[tuple[int, int]] | None,
    report: Report,
) -> None:
    """Compare a ledger's index with the entries its batches hold (``expected``; None
    when the batches could not be read, which is reported already)."""
    lid = meta.ledger_id
    where = f"topic {meta.topic!r} ledger {lid}"
    try:
        found = _stored(db, lid, where, report)
    except CorruptData as exc:
        report.problem(f"{where} key index", str(exc))
        return
    if meta.role != ROLE_RAW:
        if found:
            report.problem(f"{where} key index", "a compacted ledger has a key index")
        return
    if expected is None or found == expected:
        return
    have, want = Counter(found), Counter(expected)
    missing, extra = sum((want - have).values()), sum((have - want).values())
    report.problem(
        f"{where} key index",
        f"{missing} keyed message(s) missing from it, {extra} entr(ies) naming no such message",
    )


def check_stray_indexes(db: RocksReads, metas: dict[int, LedgerMeta], report: Report) -> None:
    """Key index records of ledgers that have no meta."""
    ledger_of = keys.parse_index_key
    for lid in ledgers_under(
        db, keys.key_index_all(), lambda k: ledger_of(k)[0], keys.key_index_range
    ):
        if lid not in metas:
            report.problem(f"ledger {lid}", "key index records stored without a ledger meta")
