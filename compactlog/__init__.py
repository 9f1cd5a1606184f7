"""compactlog: a log store for keyed event streams.

Two designs side by side on the same data: Pulsar-style LEDGER topics (append-only
ledgers, a TwoPhaseCompactor writing a separate compacted ledger) and Kafka-style
SEGMENTED topics (segment files cleaned in place by a LogCleaner).

The distribution installs this one top-level package; ``compactlog.server``,
``compactlog.client``, ``compactlog.compactor`` and ``compactlog.storage`` live in the
repository's top-level folders of the same names.

Importing it turns gRPC's fork handlers off (``GRPC_ENABLE_FORK_SUPPORT=false``) unless
the environment says otherwise; off is gRPC Python's documented default. Since grpcio
1.80 the C core runs its handlers anyway: on a ``fork()`` it restarts its poller thread
in the child, ``subprocess`` closes the child's descriptors before ``exec``, and the
poller aborts the child on EBADF (grpc/grpc#43055). Every ``Popen`` with a
``preexec_fn`` forks that way (without one, CPython uses vfork, which runs no handlers).
PySpark starts its Java gateway so, and a Spark driver that had spoken to a server lost
its gateway in CI; with a busy channel, 5 to 10 children in 300 died
(tests/test_grpc_fork.py). compactlog never uses gRPC in a forked child: its workers and
shards are fresh interpreters, and Spark forks its Python workers from a daemon that does
not import gRPC. gRPC reads the variable when it is first imported, so a program that
imports ``grpc`` before compactlog keeps the handlers; ``compactor.spark.session``
launches a gateway that died that way again.
"""

import os

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

__version__ = "0.1.0"
