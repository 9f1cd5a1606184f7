"""compactlog: a log store for keyed event streams.

Two designs side by side on the same data: Pulsar-style LEDGER topics (append-only
ledgers, a TwoPhaseCompactor writing a separate compacted ledger) and Kafka-style
SEGMENTED topics (segment files cleaned in place by a LogCleaner).

The distribution installs this one top-level package; ``compactlog.server``,
``compactlog.client``, ``compactlog.compactor`` and ``compactlog.storage`` live in the
repository's top-level folders of the same names.
"""

__version__ = "0.1.0"
