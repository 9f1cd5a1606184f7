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

A partitioned topic (``TopicInfo.partitions``) is compacted partition by partition, in
parallel: one driver thread (one compactor, one gRPC adapter) a partition, all sharing
the Spark session, which schedules their jobs side by side. Each partition commits on
its own; the result folds the partitions' figures (the first failure is raised once
every partition has finished).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor, wait

from pyspark.sql import SparkSession

from compactlog.channels import ChannelSecurity
from compactlog.compactor.spark.phase_one import SparkPhaseOne
from compactlog.compactor.spark.session import spark_session
from compactlog.compactor.two_phase import (
    CompactionResult,
    CompactionRun,
    FaultHook,
    TwoPhaseCompactor,
)
from compactlog.compactor.two_phase.faults import fault_from_env
from compactlog.compactor.two_phase.grpc_adapter import GrpcCompactionStorage, open_channel
from compactlog.errors import CommitConflict, CompactlogError
from compactlog.partitioner import partition_name
from compactlog.rpc_errors import translate_errors
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

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
    names = _partitions(server, topic, security)
    if not names:
        return _compact_one(session, server, topic, security, fault, lease_ms, token, tls_ca)
    with ThreadPoolExecutor(len(names), thread_name_prefix="spark-compaction") as pool:
        futures = [
            pool.submit(
                _compact_one, session, server, name, security, fault, lease_ms, token, tls_ca
            )
            for name in names
        ]
        wait(futures)
    return _fold([f.result() for f in futures])


def _partitions(server: str, topic: str, security: ChannelSecurity) -> list[str]:
    """``NAME-partition-i`` of a partitioned topic, else none."""
    channel = open_channel(server, security)
    try:
        with translate_errors("GetTopic", server):
            info = pb_grpc.TopicAdminStub(channel).GetTopic(
                pb.GetTopicRequest(name=topic), timeout=30
            )
    finally:
        channel.close()
    return [partition_name(topic, i) for i in range(info.partitions)]


_SUMMED = ("read", "kept", "removed", "tombstones", "keyless_dropped", "bytes_in", "bytes_out")


def _fold(results: list[CompactionResult]) -> CompactionResult:
    """One result for the partitions' runs: figures summed, the longest duration."""
    runs = [r.run for r in results]
    summed = {name: sum(getattr(run, name) for run in runs) for name in _SUMMED}
    run = CompactionRun(
        **summed, duration_ms=max((r.duration_ms for r in runs), default=0), engine=ENGINE
    )
    committed = any(r.committed for r in results)
    return CompactionResult(run, None, None, committed=committed)


def _compact_one(
    session: SparkSession,
    server: str,
    topic: str,
    security: ChannelSecurity,
    fault: FaultHook | None,
    lease_ms: int,
    token: str | None,
    tls_ca: str | None,
) -> CompactionResult:
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
