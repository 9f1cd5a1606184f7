"""The comparison of a LEDGER store's catalog (``ledger_catalog``) with the store itself,
shared by the start-up check and ``compactlog check``.

Each fact is one the store can only lose to damage: a topic's record; a ledger id below
the store's allocator (ids are never reused); a ledger of a topic at or after the topic's
oldest one (retention deletes oldest first and never the current ledger, so anything
later that vanished from the record was lost); a ledger's entry count, which only grows,
and its entries. Each costs a point read or one seek, never a scan of the entries.
"""

from __future__ import annotations

from compactlog.storage import keys
from compactlog.storage.codec import LedgerMeta
from compactlog.storage.ledger_topic import LedgerTopic
from compactlog.storage.rocks import RocksDB


def stored_topics(db: RocksDB) -> set[str]:
    """The names of every topic record in ``db``, readable or not."""
    begin, end = keys.topic_range()
    return {key[1:].decode(errors="replace") for key in db.scan_keys(begin, end)}


def stored_next_ledger(db: RocksDB) -> int:
    """The first ledger id the store has not allocated, by its allocator or its metas."""
    raw = db.get(keys.NEXT_LEDGER_KEY)
    allocator = keys.U64.unpack(raw)[0] if raw is not None and len(raw) == keys.U64.size else 1
    last = db.last_key(*keys.ledger_meta_range())
    return max(allocator, keys.ledger_id_of_meta_key(last) + 1 if last is not None else 1)


def lost_from(
    db: RocksDB, names: set[str], ledgers: dict[str, dict[int, int]], nxt: int
) -> list[str]:
    """What the catalog (``names``, ``ledgers``, next ledger id ``nxt``) lists and ``db``
    lacks, one phrase each."""
    present = stored_topics(db)
    lost = [f"topic {name}" for name in sorted(names - present)]
    have = stored_next_ledger(db)
    if have < nxt:
        lost.append(f"ledgers {have} to {nxt - 1} (ids allocated, unknown to the store)")
    for name in sorted(set(ledgers) & present):
        lost += _lost_ledgers(db, name, ledgers[name])
    return lost


def _lost_ledgers(db: RocksDB, name: str, counts: dict[int, int]) -> list[str]:
    try:
        record = db.get(keys.topic_key(name))
        listed = LedgerTopic.parse_record(record)[1] if record is not None else []
    except ValueError:
        return []  # a malformed record takes the topic offline at load
    if not listed:
        return []
    lost = []
    for lid, count in sorted(counts.items()):
        if lid < listed[0]:
            continue  # retention deleted it
        if lid not in listed:
            lost.append(f"ledger {lid} of topic {name}")
            continue
        raw = db.get(keys.ledger_meta_key(lid))
        try:
            held = LedgerMeta.decode(lid, raw).entries if raw is not None else None
        except Exception:
            held = None  # a malformed or missing meta takes the topic offline at load
        if held is not None and held < count:
            lost.append(f"entries {held} to {count - 1} of ledger {lid} of topic {name}")
        elif count and db.last_key(*keys.ledger_range(lid)) is None:
            lost.append(f"the {count} entries of ledger {lid} of topic {name}")
    return lost
