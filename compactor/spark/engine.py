"""Two-phase compaction of a LEDGER topic on Spark (``--engine spark``).

The TwoPhaseCompactor runs in this process (the Spark driver) over the gRPC adapter, as
Pulsar's standalone compactor runs outside the broker: phase one is the distributed
aggregation of ``SparkPhaseOne``; phase two is the compactor's own, streaming the
winners in id order into a new ledger through the server; the server commits
``(ledger, horizon)`` only if the run's base still holds. Sharing the compactor keeps
the result identical, message for message, to the local engine's.

A failure aborts the run's ledger and records the error in the topic's compaction
status; a lost race (``CommitConflict``) is only raised, the winner's status stands. A
driver that dies leaves a ledger the server deletes when its lease lapses, or at its
next start-up.
"""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from compactlog.channels import ChannelSecurity
from compactlog.compactor.spark.phase_one import SparkPhaseOne
from compactlog.compactor.spark.session import spark_session
from compactlog.compactor.two_phase import CompactionResult, FaultHook, TwoPhaseCompactor
from compactlog.compactor.two_phase.faults import fault_from_env
from compactlog.compactor.two_phase.grpc_adapter import GrpcCompactionStorage
from compactlog.errors import CommitConflict, CompactlogError

log = logging.getLogger(__name__)

ENGINE = "spark"


def run_spark_compaction(
    server: str,
    topic: str,
    master: str = "local[*]",
    *,
    spark: SparkSession | None = None,
    fault: FaultHook | None = None,
    lease_ms: int = 0,
    token: str | None = None,
    tls_ca: str | None = None,
) -> CompactionResult:
    """Compact ``topic`` of the server at ``server`` on Spark; return the run's result
    (``committed`` False when there was nothing to do). The server records the run in
    the topic's compaction status (engine ``spark``). ``token`` (an admin's) and
    ``tls_ca`` reach a server with ``--auth-tokens`` and TLS, from driver and executors."""
    session = spark if spark is not None else spark_session(master)
    security = ChannelSecurity.of(token, tls_ca)
    storage = GrpcCompactionStorage(server, engine=ENGINE, lease_ms=lease_ms, security=security)
    compactor = TwoPhaseCompactor(
        storage,
        0,  # no phase-one memory budget: the key table lives on the executors
        fault if fault is not None else fault_from_env(),
        phase_one=SparkPhaseOne(session, server, token, tls_ca),
        engine=ENGINE,
    )
    try:
        return compactor.compact(topic)
    except CommitConflict:
        raise
    except Exception as exc:
        reason = str(exc) if isinstance(exc, CompactlogError) else f"{type(exc).__name__}: {exc}"
        try:
            storage.fail(topic, f"spark compaction failed: {(reason.splitlines() or ['?'])[0]}")
        except CompactlogError:
            log.warning("could not record the failed run of %s", topic, exc_info=True)
        raise
    finally:
        storage.close()
