"""The options of the ledger store and of every table file written here (``storage.rocks``
opens the store with them; ``storage.rocks_secondary`` writes SSTs with ``table_options``).
The WAL's recovery mode is the operator's (``ledger.wal.recovery.mode``); an open that
takes a crash's unsynced tail (``storage.wal_tail``) asks for RocksDB's tolerant mode.
"""

from __future__ import annotations

from rocksdict import DBCompressionType, DBRecoveryMode, Options

from compactlog.errors import StorageError
from compactlog.storage import file_limits

WAL_RECOVERY_MODES = ("absolute-consistency", "point-in-time")
# Not an operator's choice: an open that drops a crash's torn last record asks for it.
TOLERATE_TAIL = "tolerate-tail"


def table_options() -> Options:
    """Options of every table file written here: the store's own (its flushes and
    compactions) and a compaction worker's SSTs. Blocks are LZ4-compressed: every raw
    Read and both phases of a run decompress each block they read, and LZ4 does that
    several times faster than RocksDB's default Snappy at about the same size (a
    worker's run spent an eighth of its CPU in Snappy). Files written before keep their
    own compression: a table names it, so a store of both reads as one."""
    opts = Options(raw_mode=True)
    opts.set_compression_type(DBCompressionType.lz4())
    return opts


def store_options(wal_recovery: str) -> Options:
    """The store's options, its WAL replayed in ``wal_recovery`` mode."""
    if wal_recovery not in (*WAL_RECOVERY_MODES, TOLERATE_TAIL):
        raise StorageError(f"unknown WAL recovery mode {wal_recovery!r}")
    opts = table_options()
    opts.create_if_missing(True)
    opts.set_max_background_jobs(2)
    opts.increase_parallelism(2)
    opts.set_paranoid_checks(True)
    if file_limits.BUDGET is not file_limits.UNLIMITED:  # a server: its share of the limit
        opts.set_max_open_files(file_limits.BUDGET.table_files)
    modes = {
        "absolute-consistency": DBRecoveryMode.absolute_consistency,
        "point-in-time": DBRecoveryMode.point_in_time,
        TOLERATE_TAIL: DBRecoveryMode.tolerate_corrupted_tail_records,
    }
    opts.set_wal_recovery_mode(modes[wal_recovery]())
    return opts
