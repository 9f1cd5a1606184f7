"""One workload through one strategy, end to end, in a fresh server process.

Pulsar-style = a LEDGER topic compacted by the TwoPhaseCompactor; Kafka-style = a
SEGMENTED topic with ``cleanup.policy=compact`` and small segments, cleaned by one
LogCleaner pass. Both go through ``compactlog serve`` and the client library, as a user
would, and the same steps are timed on both:

    start server -> unary Publish at idle (probe topic) -> PublishStream the workload
    -> raw read of everything (latest view the slow way) -> Compact(wait=true) while a
    producer thread times unary Publish -> compacted read (latest view the fast way)
    -> stop server -> LEDGER only: the two-phase floor on the same RocksDB, in-process.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from compactlog.bench.floors import two_phase_floor
from compactlog.bench.procstats import (
    RssSampler,
    ServerProcess,
    disk_bytes,
    peak_rss_bytes,
    reset_peak_rss,
    written_bytes,
)
from compactlog.bench.summary import percentile
from compactlog.bench.workloads import (
    View,
    Workload,
    batches,
    fold,
    pairs,
    segment_bytes_for,
    segmented_compact_config,
)
from compactlog.client import Client
from compactlog.client.types import TopicStats
from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_store import LedgerStore

STRATEGIES: dict[str, str] = {
    "ledger": "Pulsar-style (LEDGER, TwoPhaseCompactor)",
    "segmented": "Kafka-style (SEGMENTED, LogCleaner)",
}
TOPIC = "bench"
PROBE_TOPIC = "bench-probe"


class BenchError(RuntimeError):
    """A run that cannot produce honest figures (server failed, compaction errored...)."""


@dataclass
class StrategyResult:
    """Figures of one (workload, strategy) run, the view it left, and the latency trace."""

    metrics: dict[str, float]
    view: View
    trace: list[tuple[float, float]] = field(default_factory=list)
    """(seconds since Compact was sent, unary Publish latency in ms)."""


def _rpc_roundtrip_ms(address: str, count: int) -> list[float]:
    """Unary gRPC round trips with no storage work (Health.Check): the transport's floor."""
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        req = health_pb2.HealthCheckRequest()
        stub.Check(req)  # connect first
        out = []
        for _ in range(count):
            t = time.perf_counter()
            stub.Check(req)
            out.append((time.perf_counter() - t) * 1000)
    return out


def _unary_latencies(client: Client, count: int) -> list[float]:
    producer = client.producer(PROBE_TOPIC)
    out = []
    for i in range(count):
        t = time.perf_counter()
        producer.send(b"probe-%d" % (i % 100), b"p" * 100)
        out.append((time.perf_counter() - t) * 1000)
    return out


class _Prober:
    """A producer thread timing unary Publish until stopped (always at least one sample)."""

    def __init__(self, client: Client) -> None:
        self.producer = client.producer(PROBE_TOPIC)
        self.samples: list[tuple[float, float]] = []
        self.stop = threading.Event()
        self.started = threading.Event()
        self.t0 = 0.0
        self.thread = threading.Thread(target=self._run, name="bench-probe", daemon=True)

    def _run(self) -> None:
        i = 0
        while True:
            t = time.perf_counter()
            self.started.set()
            self.producer.send(b"probe-%d" % (i % 100), b"p" * 100)
            end = time.perf_counter()
            self.samples.append((t - self.t0, (end - t) * 1000))
            i += 1
            if self.stop.is_set():
                return
            time.sleep(0.001)  # a paced producer, not a flood that starves the compaction


def _logical(stats: TopicStats) -> int:
    return stats.bytes + stats.compacted_bytes


def run_strategy(
    kind: str,
    workload: Workload,
    seed: int,
    workdir: Path,
    durability: str = "fsync",
    unary_samples: int = 200,
    step: Callable[[str], None] = lambda _label: None,
) -> StrategyResult:
    """Run ``workload`` on a ``kind`` topic in a fresh server under ``workdir``: publish,
    raw read, compaction (probed by unary publishes), compacted read, in that order."""
    data_dir = workdir / f"{kind}-data"
    data = batches(workload, seed)
    payload = sum(len(k or b"") + len(v or b"") for b in data for k, v in b)
    m: dict[str, float] = {"payload_bytes": payload}
    step("starting server")
    proc = ServerProcess(data_dir, durability)
    try:
        with RssSampler(proc.pid) as rss, Client(proc.address, timeout=600) as client:
            if kind == "segmented":
                m["segment_bytes"] = segment_bytes_for(workload)
            config = segmented_compact_config(workload) if kind == "segmented" else {}
            client.create_topic(TOPIC, kind, config)
            client.create_topic(PROBE_TOPIC, kind, {})
            m["rss_idle_bytes"] = rss.sample()
            step("unary Publish at idle")
            _measure_idle(client, proc.address, unary_samples, m)
            step("publishing")
            _publish(client, proc, rss, data, workload, kind, m)
            del data
            m["logical_before_bytes"] = _logical(client.get_topic(TOPIC).stats)
            m["disk_before_bytes"] = disk_bytes(data_dir)
            step("raw read")
            raw_view = _timed_read(client, False, "raw_read", m)
            step("compacting")
            samples = _compact(client, proc, rss, kind, m)
            m["logical_after_bytes"] = _logical(client.get_topic(TOPIC).stats)
            m["disk_after_bytes"] = disk_bytes(data_dir)
            step("compacted read")
            view = _timed_read(client, True, "compacted_read", m)
            m["rss_hwm_bytes"] = peak_rss_bytes(proc.pid)
    except Exception as exc:
        raise BenchError(f"{kind}: {exc}; server log: {proc.tail()}") from exc
    finally:
        proc.stop()
    if raw_view != view:
        raise BenchError(f"{kind}: the compacted view differs from the raw history's")
    _derived(m, view, workload, payload)
    if kind == "ledger":
        step("two-phase floor")
        m.update(_ledger_floor(data_dir, int(m["compaction_kept"])))
        m["compaction_floor_ratio"] = m["compaction_server_s"] / m["two_phase_floor_s"]
    return StrategyResult(m, view, samples)


def _measure_idle(client: Client, address: str, samples: int, m: dict[str, float]) -> None:
    m["rpc_roundtrip_p50_ms"] = statistics.median(_rpc_roundtrip_ms(address, samples))
    idle = _unary_latencies(client, samples)
    m["unary_idle_p50_ms"] = statistics.median(idle)
    m["unary_idle_p99_ms"] = percentile(idle, 0.99)


def _publish(
    client: Client,
    proc: ServerProcess,
    rss: RssSampler,
    data: list[list[tuple[bytes | None, bytes | None]]],
    workload: Workload,
    kind: str,
    m: dict[str, float],
) -> None:
    w0, t0 = written_bytes(proc.pid), time.perf_counter()
    acked = sum(len(ids) for ids in client.producer(TOPIC).send_stream(data))
    t1 = time.perf_counter()
    if acked != workload.records:
        raise BenchError(f"{kind}: {acked} of {workload.records} records acknowledged")
    m["publish_s"] = t1 - t0
    m["publish_rps"] = workload.records / (t1 - t0)
    m["publish_mbps"] = m["payload_bytes"] / 1e6 / (t1 - t0)
    m["publish_written_bytes"] = written_bytes(proc.pid) - w0
    m["rss_peak_publish_bytes"] = rss.peak_between(t0, t1)


def _timed_read(client: Client, compacted: bool, name: str, m: dict[str, float]) -> View:
    """Timed: the read alone. Folding into a view (a digest per value) is client work
    common to both strategies, so it runs after the clock stops."""
    t0 = time.perf_counter()
    got = list(pairs(client.reader(TOPIC, read_compacted=compacted)))
    t1 = time.perf_counter()
    view, count, nbytes = fold(got)
    m[f"{name}_s"] = t1 - t0
    m[f"{name}_messages"] = count
    m[f"{name}_bytes"] = nbytes
    m[f"{name}_rps"] = count / (t1 - t0)
    return view


def _compact(
    client: Client, proc: ServerProcess, rss: RssSampler, kind: str, m: dict[str, float]
) -> list[tuple[float, float]]:
    """One ``Compact(wait=true)`` with unary publishes probing the tail meanwhile; the
    probes' (time, ms)."""
    reset_peak_rss(proc.pid)
    prober = _Prober(client)
    w0 = written_bytes(proc.pid)
    prober.t0 = t0 = time.perf_counter()
    prober.thread.start()
    prober.started.wait()
    status = client.compact(TOPIC, wait=True)
    t1 = time.perf_counter()
    prober.stop.set()
    prober.thread.join()
    if status.state != "SUCCESS" or status.last_run is None:
        raise BenchError(f"{kind}: compaction ended {status.state}: {status.last_error}")
    run = status.last_run
    server_s = max(run.duration_ms, 1) / 1000
    m.update(
        compaction_s=t1 - t0,
        compaction_server_s=server_s,
        compaction_rps=run.read / server_s,
        compaction_mbps=run.bytes_in / 1e6 / server_s,
        compaction_read=run.read,
        compaction_kept=run.kept,
        compaction_removed=run.removed,
        compaction_bytes_in=run.bytes_in,
        compaction_bytes_out=run.bytes_out,
        # includes the probe producer's few small records written meanwhile
        compaction_written_bytes=written_bytes(proc.pid) - w0,
        rss_peak_compaction_bytes=max(rss.peak_between(t0, t1), peak_rss_bytes(proc.pid)),
    )
    during = [ms for _t, ms in prober.samples]
    m["compaction_p50_ms"] = statistics.median(during)
    m["compaction_p99_ms"] = percentile(during, 0.99)
    m["compaction_probes"] = len(during)
    return prober.samples


def _derived(m: dict[str, float], view: View, workload: Workload, payload: int) -> None:
    """Space and write amplification, and the compacted view's read speed-up."""
    live = sum(len(k) + workload.value_bytes for k in view) or 1
    m["live_bytes"] = live
    m["space_amp_before"] = m["disk_before_bytes"] / live
    m["space_amp_after"] = m["disk_after_bytes"] / live
    m["write_amp"] = (m["publish_written_bytes"] + m["compaction_written_bytes"]) / payload
    m["latest_view_read_speedup"] = m["raw_read_s"] / m["compacted_read_s"]


def _ledger_floor(data_dir: Path, winners: int) -> dict[str, float]:
    """The two-phase floor on the server's own RocksDB, reopened in-process after it stopped."""
    store = LedgerStore(
        data_dir / "ledgers", ServerSettings(publish_durability="wal", topic_defaults={})
    )
    try:
        keys_s, scan_s, write_s = two_phase_floor(store, TOPIC, winners)
    finally:
        store.close()
    return {
        "two_phase_floor_s": keys_s + scan_s + write_s,
        "floor_key_scan_s": keys_s,
        "floor_entry_scan_s": scan_s,
        "floor_winner_write_s": write_s,
    }
