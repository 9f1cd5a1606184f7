"""Compaction: the Pulsar-style TwoPhaseCompactor (LEDGER topics) and the Kafka-style
LogCleaner (SEGMENTED topics). Both reach storage only through small interfaces."""

from compactlog._linked import only_as

only_as(__name__, "compactlog.compactor")  # see compactlog/_linked.py
