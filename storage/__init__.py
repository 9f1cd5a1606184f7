"""The storage engine: RocksDB ledgers and cursors (LEDGER topics) and segment files
(SEGMENTED topics). It imports neither the server nor the compactor."""
