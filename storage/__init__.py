"""The storage engine: RocksDB ledgers and cursors (LEDGER topics) and segment files
(SEGMENTED topics). It imports neither the server nor the compactor."""

from compactlog._linked import only_as

only_as(__name__, "compactlog.storage")  # see compactlog/_linked.py
