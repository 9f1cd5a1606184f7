"""Compaction: the Pulsar-style TwoPhaseCompactor (LEDGER topics) and the Kafka-style
LogCleaner (SEGMENTED topics). Both reach storage only through small interfaces."""
