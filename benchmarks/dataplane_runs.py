"""The measurements of ``compactlog bench dataplane``, each beside its floor.

Each function starts the process it measures (``compactlog serve`` through
``ServerProcess``, the bare gRPC floor through ``FloorProcess``) and drives it with the
same raw-bytes client (``rawlog``), so a figure and its floor differ only by the server.
Results are flat ``Sample`` dicts, ``<kind>.<metric>`` and ``floor.<...>``, that the
report takes medians of.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from compactlog.bench.dataplane_floor import FloorProcess
from compactlog.bench.procstats import (
    RssSampler,
    ServerProcess,
    peak_rss_bytes,
    reset_peak_rss,
    tree_cpu_seconds,
)
from compactlog.bench.rawlog import (
    FrameWriter,
    RawLog,
    ReadFigures,
    Sink,
    acked,
    publish_request,
    read_request,
    write_frames,
)
from compactlog.bench.summary import percentile
from compactlog.bench.workloads import (
    Workload,
    expected_view,
    segmented_compact_config,
)
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

KINDS = ("ledger", "segmented")
TOPIC, PROBE, BIG = "dataplane", "dataplane-probe", "dataplane-memory"
PAGE = 4096  # VmRSS moves by pages: growth below one page reads as one page
UNARY_RECORD = (b"probe", b"p" * 100)
Sample = dict[str, float]


class DataplaneError(RuntimeError):
    """A run that cannot give honest figures (a server failed, a count is wrong...)."""


@dataclasses.dataclass(frozen=True)
class Settings:
    """What one invocation measures; ``--quick`` shrinks every size."""

    records: int = 200_000
    runs: int = 3
    kinds: tuple[str, ...] = KINDS
    unary: int = 2000
    warmup: int = 200
    memory_mb: float = 100.0
    memory_value_bytes: int = 1000
    seed: int = 42
    workdir: Path | None = None

    @property
    def workload(self) -> Workload:
        """100 B values, one key per ten records (the suite's ``uniform-100B`` shape)."""
        return Workload("dataplane-100B", self.records, max(1, self.records // 10))


QUICK = {"records": 5000, "runs": 1, "unary": 200, "warmup": 20, "memory_mb": 5.0}


def step(what: str) -> None:
    sys.stderr.write(f"dataplane: {what}\n")
    sys.stderr.flush()


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise DataplaneError(what)


def _timed_read(log: RawLog, compacted: bool, sink: Sink) -> ReadFigures:
    return log.read(read_request(TOPIC, compacted), sink)


def _create_topic(log: RawLog, name: str, kind: str, config: dict[str, object]) -> None:
    admin = pb_grpc.TopicAdminStub(log.channel)
    cfg = {k: str(v) for k, v in config.items()}
    admin.CreateTopic(
        pb.CreateTopicRequest(name=name, kind=pb.TopicKind.Value(kind.upper()), config=cfg)
    )


def _compact(log: RawLog, kind: str, pid: int) -> Sample:
    """``Compact(wait=true)`` of the whole topic (LEDGER: a two-phase run; SEGMENTED: a
    cleaner pass), timed by the client as a user waits for it, the run's own duration as
    the server reports it (``last_run.duration_ms``), and the CPU seconds the server and
    its compaction workers spent meanwhile (``pid``'s process tree): a figure the load of
    other processes on the machine stretches far less than the clock."""
    cpu, started = tree_cpu_seconds(pid), time.perf_counter()
    status = pb_grpc.TopicAdminStub(log.channel).Compact(
        pb.CompactRequest(topic=TOPIC, wait=True), timeout=log.timeout
    )
    seconds, cpu = time.perf_counter() - started, tree_cpu_seconds(pid) - cpu
    _check(status.state == pb.CompactionStatus.SUCCESS, f"Compact ended: {status.last_error}")
    return {
        f"{kind}.compaction_s": seconds,
        f"{kind}.compaction_run_s": status.last_run.duration_ms / 1000,
        f"{kind}.compaction_cpu_s": cpu,
    }


def _delete_topic(log: RawLog, name: str) -> None:
    admin = pb_grpc.TopicAdminStub(log.channel)
    admin.DeleteTopic(pb.DeleteTopicRequest(name=name), timeout=log.timeout)


def _publish(log: RawLog, kind: str, what: str, s: Settings, requests: list[bytes]) -> Sample:
    """One PublishStream of every request into ``TOPIC``: ``<kind>.<what>_rps`` and the
    share of replies that say their records were synced.

    The goal's figure (``publish``) goes into a topic of the default config, as the floor
    writes: a SEGMENTED topic then rolls once a GiB (Kafka's ``segment.bytes``), never in
    a run. The cleaner pass needs closed segments, so SEGMENTED publishes again into
    ``segmented_compact_config``'s ~20 small ones (``publish_rolling``): each roll syncs
    the sealed segment, its indexes, the manifest and the recovery point, a cost a user
    who sets a small ``segment.bytes`` pays, shown in its own row."""
    seconds, replies = log.publish_stream(requests)
    _check(acked(replies) == s.records, f"{kind}: not every record was acknowledged")
    synced = sum(pb.PublishResponse.FromString(r).synced for r in replies)
    return {
        f"{kind}.{what}_rps": s.records / seconds,
        f"{kind}.{what}_synced_share": synced / len(replies),
    }


def _latency(prefix: str, lat: list[float]) -> Sample:
    return {f"{prefix}.p50_ms": statistics.median(lat), f"{prefix}.p99_ms": percentile(lat, 0.99)}


def measure_server(kind: str, s: Settings, requests: list[bytes], tmp: Path) -> Sample:
    """The real server (fresh process, default durability): unary latency, publish, raw
    read, Compact, compacted read. The reads' responses go to ``<kind>-*.frames``."""
    proc = ServerProcess(tmp / f"{kind}-data")
    m: Sample = {}
    try:
        with RawLog(proc.address) as log:
            _create_topic(log, TOPIC, kind, {})
            _create_topic(log, PROBE, kind, {})
            unary = publish_request(PROBE, [UNARY_RECORD])
            m.update(_latency(f"{kind}.unary", log.unary_ms(unary, s.unary, s.warmup)))
            m.update(_publish(log, kind, "publish", s, requests))
            if kind == "segmented":  # again, into the small segments the cleaner needs
                _delete_topic(log, TOPIC)
                _create_topic(log, TOPIC, kind, segmented_compact_config(s.workload))
                m.update(_publish(log, kind, "publish_rolling", s, requests))
            for compacted in (False, True):
                if compacted:
                    m.update(_compact(log, kind, proc.pid))
                view = "compacted" if compacted else "raw"
                frames: list[bytes] = []
                cpu = tree_cpu_seconds(proc.pid)
                fig = _timed_read(log, compacted, frames.append)
                m[f"{kind}.{view}_read_server_cpu_s"] = tree_cpu_seconds(proc.pid) - cpu
                write_frames(tmp / f"{kind}-{view}.frames", frames)
                m[f"{kind}.{view}_read_mps"] = fig.messages / fig.seconds
                m[f"{kind}.{view}_read_s"] = fig.seconds
                m[f"{kind}.{view}_read_messages"] = fig.messages
    except Exception as exc:
        raise DataplaneError(f"{kind}: {exc}; server log: {proc.tail()}") from exc
    finally:
        proc.stop()
    _check(m[f"{kind}.raw_read_messages"] == s.records, f"{kind}: raw read count")
    keys = len(expected_view(s.workload, s.seed))
    got = m[f"{kind}.compacted_read_messages"]
    # The active segment is never cleaned (Kafka), so SEGMENTED may keep a few more.
    _check(
        got == keys if kind == "ledger" else keys <= got < s.records,
        f"{kind}: compacted read gave {got:.0f} messages for {keys} keys",
    )
    return m


def measure_floor_writes(floor: FloorProcess, s: Settings, requests: list[bytes]) -> Sample:
    """The floor's PublishStream and unary echo, through the same client code."""
    with RawLog(floor.address) as log:
        lat = log.unary_ms(publish_request(PROBE, [UNARY_RECORD]), s.unary, s.warmup)
        seconds, replies = log.publish_stream(requests)
    _check(len(replies) == len(requests), "floor: a PublishStream reply is missing")
    return {"floor.publish_rps": s.records / seconds, **_latency("floor.echo", lat)}


def measure_floor_group_commit(s: Settings, requests: list[bytes], tmp: Path) -> Sample:
    """The group-commit floor (a fresh process and data dir, as the server gets): the
    same PublishStream, and the floor's own counts of requests stored and WAL fsyncs."""
    floor = FloorProcess(tmp / "floor-group-commit-data", publish="group-commit")
    try:
        with RawLog(floor.address) as log:
            lat = log.unary_ms(publish_request(PROBE, [UNARY_RECORD]), s.unary, s.warmup)
            before = floor.stats()  # the unary calls' synced puts, not the stream's
            seconds, replies = log.publish_stream(requests)
        stats = {k: v - before[k] for k, v in floor.stats().items()}
    finally:
        floor.stop()
    _check(len(replies) == len(requests), "group-commit floor: a reply is missing")
    _check(stats["requests"] == len(requests), "group-commit floor: a request was not stored")
    return {
        **_latency("floor.synced_unary", lat),
        "floor.group_commit.publish_rps": s.records / seconds,
        "floor.group_commit.publish_records": s.records,
        "floor.group_commit.requests": stats["requests"],
        "floor.group_commit.syncs": stats["syncs"],
    }


def measure_floor_reads(floor: FloorProcess, kind: str, m: Sample, tmp: Path) -> Sample:
    """The floor replaying the real server's own Read responses for ``kind``, from memory."""
    out: Sample = {}
    with RawLog(floor.address) as log:
        for view in ("raw", "compacted"):
            path = tmp / f"{kind}-{view}.frames"
            floor.load(path, "memory")
            frames: list[bytes] = []
            fig = _timed_read(log, view == "compacted", frames.append)
            _check(fig.messages == m[f"{kind}.{view}_read_messages"], "floor: read count")
            out[f"floor.{kind}.{view}_read_mps"] = fig.messages / fig.seconds
            del frames
            path.unlink()
    floor.load(Path("/dev/null"), "memory")  # drop the frames before the next kind
    return out


def one_run(s: Settings, run: int, requests: list[bytes]) -> Sample:
    """Both publish floors, then each kind's real server followed by the floor's replay
    of its reads: interleaved, so drift of the machine hits figure and floor alike."""
    with tempfile.TemporaryDirectory(prefix="compactlog-dataplane-", dir=s.workdir) as t:
        tmp = Path(t)
        step(f"run {run}/{s.runs}: group-commit floor publish")
        m = measure_floor_group_commit(s, requests, tmp)
        step(f"run {run}/{s.runs}: floor publish (synced puts) and echo")
        floor = FloorProcess(tmp / "floor-data")
        try:
            m.update(measure_floor_writes(floor, s, requests))
            for kind in s.kinds:
                step(f"run {run}/{s.runs}: {kind} server")
                m.update(measure_server(kind, s, requests, tmp))
                step(f"run {run}/{s.runs}: floor reads of the {kind} responses")
                m.update(measure_floor_reads(floor, kind, m, tmp))
        finally:
            floor.stop()
    return m


def big_topic_records(s: Settings) -> int:
    """Records of about ``memory_mb`` of keys and values."""
    return max(1, int(s.memory_mb * 1e6) // (s.memory_value_bytes + len(b"key-00000000")))


def big_topic(s: Settings) -> Iterator[bytes]:
    """The ``BIG`` topic's requests, generated as they are sent, so that a 1 GB topic never
    sits in the client's memory."""
    record = s.memory_value_bytes + len(b"key-00000000")
    total = big_topic_records(s)
    per = max(1, 512_000 // record)  # requests under the default max.message.bytes
    filler = b"m" * s.memory_value_bytes
    for start in range(0, total, per):
        chunk = range(start, min(total, start + per))
        yield publish_request(BIG, [(b"key-%08d" % i, b"%010d" % i + filler[10:]) for i in chunk])


def rss_growth(pid: int, log: RawLog, sink: Sink) -> tuple[int, ReadFigures]:
    """Peak RSS above the RSS at the start, over one whole read of ``BIG``: sampled on a
    thread, and the kernel's high-water mark where it can be reset."""
    with RssSampler(pid, interval=0.01) as rss:
        hwm = reset_peak_rss(pid)
        before = rss.sample()
        t0 = time.perf_counter()
        fig = log.read(read_request(BIG, False), sink)
        t1 = time.perf_counter()
        peak = max(rss.peak_between(t0, t1), rss.sample(), peak_rss_bytes(pid) if hwm else 0)
    return max(PAGE, peak - before), fig


def measure_memory(kind: str, s: Settings, tmp: Path) -> Sample:
    """RSS growth of a fresh real server reading ``BIG`` end to end, then of the floor
    streaming the same responses from the capture file."""
    proc = ServerProcess(tmp / f"{kind}-memory-data")
    capture = tmp / f"{kind}-memory.frames"
    try:
        with RawLog(proc.address) as log:
            _create_topic(log, BIG, kind, {})
            _seconds, replies = log.publish_stream(big_topic(s))
            _check(acked(replies) == big_topic_records(s), "not every record was acknowledged")
            writer = FrameWriter(capture)
            try:
                growth, fig = rss_growth(proc.pid, log, writer)
            finally:
                writer.close()
    except Exception as exc:
        raise DataplaneError(f"{kind} memory: {exc}; server log: {proc.tail()}") from exc
    finally:
        proc.stop()
    floor = FloorProcess(tmp / f"{kind}-memory-floor")
    try:
        floor.load(capture, "file")
        with RawLog(floor.address) as log:
            floor_growth, floor_fig = rss_growth(floor.pid, log, lambda _raw: None)
    finally:
        floor.stop()
        capture.unlink()
    _check(fig.messages == big_topic_records(s), f"{kind} memory: read count")
    _check(floor_fig.messages == fig.messages, f"{kind} memory: floor read count")
    return {
        f"{kind}.read_rss_growth_mb": growth / 1e6,
        f"floor.{kind}.read_rss_growth_mb": floor_growth / 1e6,
        f"{kind}.memory_topic_mb": s.memory_mb,
        f"{kind}.memory_messages": fig.messages,
    }
