"""The benchmark suite, installed as ``compactlog.bench`` (``compactlog bench ...``).

The same seeded workloads run through both designs, Pulsar-style (LEDGER topics,
TwoPhaseCompactor) and Kafka-style (SEGMENTED topics, LogCleaner), each in a fresh
server process, with the floors (raw RocksDB, sequential file I/O) measured in the same run.
``bench_two_phase.py`` and ``bench_log_cleaner.py`` stay runnable as plain scripts.
"""

from compactlog._linked import only_as

only_as(__name__, "compactlog.bench")  # see compactlog/_linked.py
