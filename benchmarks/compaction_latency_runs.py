"""The measurements of ``compactlog bench compaction-latency``, each beside its floor.

Per design, in a fresh ``compactlog serve``: publish N records to a big topic, time
unary Publish on a probe topic of the same kind at idle, then again while a
PreviewCompaction of the big topic runs (it reads what a run reads, in a worker too), and
again while one ``Compact(wait=true)`` of it runs (the same loop, on the same
connection), and take the run's figures; LEDGER then once more while a
VerifyCompaction checks what the run wrote. LEDGER then reopens the stopped server's store for the
phase timings the run recorded and the two-phase RocksDB floor on the very same data.
Results are flat ``Sample`` dicts (``<kind>.<metric>``, ``floor.<...>``), and each
run's Publish round trips (``Calls``: ``<kind>.idle_ms``, ``<kind>.during_ms``), which the
report also pools over the runs: a run of under a second gives a few hundred calls, so
its p99 is one of its slowest handful.
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import grpc

from compactlog.bench.floors import file_floors, io_floor_rates, two_phase_floor
from compactlog.bench.procstats import ServerProcess
from compactlog.bench.rawlog import RawLog, acked, publish_request
from compactlog.bench.summary import percentile
from compactlog.bench.workloads import Workload, segmented_compact_config
from compactlog.compactor.worker_cores import CoreSplit, confine_threads
from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_store import LedgerStore
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

KINDS = ("ledger", "segmented")
TOPIC, PROBE = "compaction-latency", "compaction-latency-probe"
PROBE_REQUEST = publish_request(PROBE, [(b"probe", b"p" * 100)])
VALUE_BYTES = 100
PER_REQUEST = 1000
Sample = dict[str, float]
Calls = dict[str, list[float]]  # <kind>.idle_ms / .during_ms / .preview_ms [/ .verify_ms]
T = TypeVar("T")


class LatencyBenchError(RuntimeError):
    """A run that cannot give honest figures (a server failed, a run errored...)."""


@dataclasses.dataclass(frozen=True)
class Settings:
    """What one invocation measures; ``--quick`` shrinks every size."""

    records: int = 1_000_000  # sized for 2 cores; 3,000,000 is the figure
    keys: int = 100_000
    runs: int = 3
    kinds: tuple[str, ...] = KINDS
    idle_calls: int = 2000
    warmup: int = 200
    workdir: Path | None = None

    @property
    def workload(self) -> Workload:
        return Workload("latency-100B", self.records, self.keys, value_bytes=VALUE_BYTES)


QUICK = {"records": 20_000, "keys": 2000, "runs": 1, "idle_calls": 200, "warmup": 20}


def step(what: str) -> None:
    sys.stderr.write(f"compaction-latency: {what}\n")
    sys.stderr.flush()


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise LatencyBenchError(what)


def requests(s: Settings) -> Iterator[bytes]:
    """The big topic's PublishRequests, made as they are sent (3M records never sit in
    the client's memory): key ``i * 7919 mod keys``, a distinct 100 B value per record."""
    filler = b"v" * VALUE_BYTES
    for start in range(0, s.records, PER_REQUEST):
        chunk = range(start, min(s.records, start + PER_REQUEST))
        yield publish_request(
            TOPIC, [(b"key-%08d" % (i * 7919 % s.keys), b"%010d" % i + filler[10:]) for i in chunk]
        )


def _during(log: RawLog, rpc: Callable[[], T]) -> tuple[list[float], T, float]:
    """Unary Publish round trips, back to back, while ``rpc`` (a Compact(wait=true), a
    PreviewCompaction) runs on a thread; with its answer and its wall time."""
    done: list[T] = []
    runner = threading.Thread(target=lambda: done.append(rpc()))
    lat: list[float] = []
    call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = log.channel.unary_unary(
        "/compactlog.v1.Log/Publish"
    )
    started = time.perf_counter()
    runner.start()
    while runner.is_alive():
        t = time.perf_counter()
        call(PROBE_REQUEST, timeout=log.timeout)
        lat.append((time.perf_counter() - t) * 1000)
    runner.join()
    _check(bool(done), "the call did not answer")
    return lat, done[0], time.perf_counter() - started


@contextlib.contextmanager
def off_the_worker_cores() -> Iterator[None]:
    """The probe stands in for a client on another machine: it keeps off the cores the
    server's compaction worker runs on (``compaction.worker.own.cores``, the default), at
    idle and during the run alike, and gets its cores back after."""
    defaults = ServerSettings()  # the server's own: no --config
    split = CoreSplit.plan(defaults.worker_processes * defaults.worker_threads)
    if split is None:
        yield
        return
    confine_threads(split.server)
    try:
        yield
    finally:
        confine_threads(split.usable)


def measure_server(kind: str, s: Settings, tmp: Path, calls: Calls) -> Sample:
    """One design's figures; its round trips go into ``calls``."""
    data_dir = tmp / f"{kind}-data"
    proc = ServerProcess(data_dir)
    m: Sample = {}
    try:
        with off_the_worker_cores(), RawLog(proc.address) as log:
            admin = pb_grpc.TopicAdminStub(log.channel)
            config = segmented_compact_config(s.workload) if kind == "segmented" else {}
            for name, cfg in ((TOPIC, config), (PROBE, {})):
                admin.CreateTopic(pb.CreateTopicRequest(
                    name=name, kind=pb.TopicKind.Value(kind.upper()),
                    config={k: str(v) for k, v in cfg.items()}))  # fmt: skip
            step(f"{kind}: publishing {s.records:,} records")
            seconds, replies = log.publish_stream(requests(s))
            _check(acked(replies) == s.records, f"{kind}: not every record was acknowledged")
            m[f"{kind}.publish_rps"] = s.records / seconds
            step(f"{kind}: unary Publish at idle")
            idle = log.unary_ms(PROBE_REQUEST, s.idle_calls, s.warmup)
            step(f"{kind}: reading the topic's own files (floors)")
            m.update(_own_file_floors(kind, data_dir, tmp))
            step(f"{kind}: unary Publish during PreviewCompaction")
            preview_req = pb.PreviewCompactionRequest(topic=TOPIC)
            previewing, preview, preview_wall = _during(
                log, lambda: admin.PreviewCompaction(preview_req, timeout=log.timeout)
            )
            step(f"{kind}: unary Publish during Compact")
            compact_req = pb.CompactRequest(topic=TOPIC, wait=True)
            during, status, wall = _during(
                log, lambda: admin.Compact(compact_req, timeout=log.timeout)
            )
            if kind == "ledger":  # SEGMENTED topics keep no raw history to verify against
                step(f"{kind}: unary Publish during VerifyCompaction")
                verify_req = pb.VerifyCompactionRequest(topic=TOPIC)
                calls[f"{kind}.verify_ms"], verified, m[f"{kind}.verify_s"] = _during(
                    log, lambda: admin.VerifyCompaction(verify_req, timeout=log.timeout)
                )
                _check(verified.ok, f"{kind}: the verification failed: {verified.problems}")
    except Exception as exc:
        raise LatencyBenchError(f"{kind}: {exc}; server log: {proc.tail()}") from exc
    finally:
        proc.stop()
    _check(
        status.state == pb.CompactionStatus.SUCCESS,
        f"{kind}: compaction ended {status.state}: {status.last_error}",
    )
    run = status.last_run
    seconds = max(run.duration_ms, 1) / 1000
    calls[f"{kind}.idle_ms"], calls[f"{kind}.during_ms"] = idle, during
    calls[f"{kind}.preview_ms"] = previewing
    _check(preview.read == run.read, f"{kind}: the preview read {preview.read}, the run {run.read}")
    m.update({
        f"{kind}.idle_p50_ms": statistics.median(idle),
        f"{kind}.idle_p99_ms": percentile(idle, 0.99),
        f"{kind}.during_p50_ms": statistics.median(during),
        f"{kind}.during_p99_ms": percentile(during, 0.99),
        f"{kind}.during_max_ms": max(during),
        f"{kind}.during_calls": len(during),
        f"{kind}.preview_p99_ms": percentile(previewing, 0.99),
        f"{kind}.preview_s": preview_wall,
        f"{kind}.compaction_s": seconds,
        f"{kind}.compaction_wall_s": wall,
        f"{kind}.compaction_read": run.read,
        f"{kind}.compaction_kept": run.kept,
        f"{kind}.compaction_bytes_in": run.bytes_in,
        f"{kind}.compaction_mbps": run.bytes_in / 1e6 / seconds,
    })  # fmt: skip
    _check(run.read >= s.records * 0.5, f"{kind}: the run read {run.read} records")
    if kind == "ledger":
        m.update(_ledger_figures(data_dir, run.kept, run.bytes_in))
    return m


def topic_files(kind: str, data_dir: Path) -> list[Path]:
    """The files the run reads: the big topic's segments, or the ledger store's RocksDB
    files (SST and WAL: the probe topic's few entries are noise in them)."""
    if kind == "segmented":
        return sorted(
            p for p in (data_dir / "segments").rglob("*.log") if "probe" not in p.parent.name
        )
    root = data_dir / "ledgers"
    return sorted(p for p in root.iterdir() if p.suffix in (".sst", ".log"))


def _own_file_floors(kind: str, data_dir: Path, tmp: Path) -> Sample:
    """``floors.file_floors`` over the files the run is about to read, in MB/s."""
    rates = file_floors(topic_files(kind, data_dir), tmp)
    return {
        f"{kind}.files_mb": rates["bytes"] / 1e6,
        f"{kind}.floor_warm_read_mbps": rates["warm_read_bps"] / 1e6,
        f"{kind}.floor_cold_read_mbps": rates["cold_read_bps"] / 1e6,
        f"{kind}.floor_copy_mbps": rates["copy_bps"] / 1e6,
    }


def _ledger_figures(data_dir: Path, kept: int, bytes_in: int) -> Sample:
    """Phase timings the run recorded, and the two-phase RocksDB floor on the same data
    (the stopped server's store, reopened here)."""
    store = LedgerStore(data_dir / "ledgers", ServerSettings(publish_durability="wal"))
    try:
        status = store.get_status(TOPIC) or {}
        last = status.get("last_run")
        _check(isinstance(last, dict), "ledger: no last run recorded")
        assert isinstance(last, dict)
        keys_s, scan_s, write_s = two_phase_floor(store, TOPIC, kept)
    finally:
        store.close()
    phase_two_s = max(int(last["phase_two_ms"]), 1) / 1000
    return {
        "ledger.phase_one_s": max(int(last["phase_one_ms"]), 1) / 1000,
        "ledger.phase_two_s": phase_two_s,
        "ledger.phase_two_mbps": bytes_in / 1e6 / phase_two_s,
        "floor.two_phase_s": keys_s + scan_s + write_s,
    }


def one_run(s: Settings, run: int) -> tuple[Sample, Calls]:
    """The sequential-read floor on a file the size of the topic, then each design."""
    with tempfile.TemporaryDirectory(prefix="compactlog-latency-", dir=s.workdir) as t:
        tmp = Path(t)
        step(f"run {run}/{s.runs}: sequential-file floor")
        nbytes = s.records * (VALUE_BYTES + len(b"key-00000000"))
        rates = io_floor_rates(tmp, max(nbytes, 16 << 20))
        m: Sample = {"floor.file_read_mbps": rates["file_read_bps"] / 1e6}
        calls: Calls = {}
        for kind in s.kinds:
            step(f"run {run}/{s.runs}: {kind}")
            m.update(measure_server(kind, s, tmp, calls))
    return m, calls
