"""The damage matrices' common part (CONTRACT section 11): the template data dir, the reads
that judge a damaged copy of it, and the run of a list of cases against real servers.

The bit-flip matrix (``test_corruption_matrix.py``) and the truncation and deletion matrix
(``test_truncation_matrix.py``) differ only in what they do to a file. Every case ends one
of four ways, and never silently:

* ``correct``: every read returns exactly what was acknowledged (the damage hit a cache
  the server rebuilt, a file it set aside, or bytes nothing reads);
* ``data_loss``: the reads that touch the damage fail ``DATA_LOSS``; the rest are right;
* ``offline``: GetTopic marks the topic offline and reading it fails ``DATA_LOSS``;
* ``refused``: the server does not start and says why in one line (no traceback).

``silent`` (a wrong or short answer with OK, a topic gone, any other status) fails the
test. The template has a LEDGER topic (several ledgers, a compacted ledger, its status, a
subscription with acks, some entries only in the RocksDB WAL after a crash) and a
SEGMENTED topic (cleaned segments, cursors, a log start offset, the cleaner checkpoint).
"""

from __future__ import annotations

import random
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import grpc

from compactlog.storage.rocks import RocksDB
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

LED, SEG, SUB = "led", "seg", "sub"
OUTCOMES = ("correct", "data_loss", "offline", "refused")
Template = tuple[Path, dict[str, Any]]


class Damage(Protocol):
    """One case: what kind of file it hits, a name for the report, and the damage."""

    @property
    def kind(self) -> str: ...

    @property
    def label(self) -> str: ...

    def apply(self, data: Path) -> None: ...


# ---- the template ----------------------------------------------------------------------


class Api:
    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.admin = pb_grpc.TopicAdminStub(self.channel)
        self.log = pb_grpc.LogStub(self.channel)

    def publish(self, topic: str, pairs: list[tuple[bytes, bytes | None]]) -> None:
        records = [pb.Record(key=k) if v is None else pb.Record(key=k, value=v) for k, v in pairs]
        self.log.Publish(pb.PublishRequest(topic=topic, records=records), timeout=30)

    def read(
        self, topic: str, compacted: bool = False, start: int | None = None, ts: int | None = None
    ) -> list[bytes]:
        req = pb.ReadRequest(topic=topic, read_compacted=compacted)
        if start is not None:
            req.message_id.entry_id = start
        if ts is not None:
            req.timestamp_ms = ts
        return [m.SerializeToString() for r in self.log.Read(req, timeout=30) for m in r.messages]

    def consume(self, topic: str) -> list[bytes]:
        req = pb.ConsumeRequest(topic=topic, subscription=SUB, max_messages=1000)
        return [m.SerializeToString() for m in self.log.Consume(req, timeout=30).messages]

    def ack(self, topic: str, ledger: int, entry: int) -> None:
        msg_id = pb.MessageId(ledger_id=ledger, entry_id=entry)
        req = pb.AcknowledgeRequest(topic=topic, subscription=SUB, id=msg_id, cumulative=True)
        self.log.Acknowledge(req, timeout=30)

    def status(self, topic: str) -> bytes:
        req = pb.GetCompactionStatusRequest(topic=topic)
        status = self.admin.GetCompactionStatus(req, timeout=30)
        status.last_run.duration_ms = 0
        return bytes(status.SerializeToString())

    def topic(self, name: str) -> pb.TopicInfo:
        return self.admin.GetTopic(pb.GetTopicRequest(name=name), timeout=30)

    def close(self) -> None:
        self.channel.close()


def pairs(start: int, n: int) -> list[tuple[bytes, bytes | None]]:
    """Keys that repeat (so compaction removes some), a tombstone now and then, values
    big enough that the RocksDB table holds several blocks."""
    return [
        (b"k%d" % (i % 13), None if i % 11 == 10 else b"v%d-" % i + random.Random(i).randbytes(150))
        for i in range(start, start + n)
    ]


# Each read of a case, by name: what a correct server answers (filled from the template).
# "seek" holds the publish time the timestamp read starts at (the 30th message's).
READS: dict[str, Callable[[Api, dict[str, Any]], Any]] = {
    "led raw": lambda api, ref: api.read(LED),
    "led compacted": lambda api, ref: api.read(LED, compacted=True),
    "led consume": lambda api, ref: api.consume(LED),
    "led status": lambda api, ref: api.status(LED),
    "seg raw": lambda api, ref: api.read(SEG),
    "seg from an offset": lambda api, ref: api.read(SEG, start=66),
    "seg from a time": lambda api, ref: api.read(SEG, ts=ref["seek"]),
    "seg consume": lambda api, ref: api.consume(SEG),
}


def build_template(root: Path, server_class: Any) -> tuple[Path, dict[str, Any]]:
    data = root / "template"
    srv = server_class(data).start()
    api = Api(srv.address)
    api.admin.CreateTopic(pb.CreateTopicRequest(name=LED, config={"ledger.max.entries": "10"}))
    seg_config = {
        "cleanup.policy": "compact",
        "segment.bytes": "2000",
        "index.interval.bytes": "1",
        "min.cleanable.dirty.ratio": "0.01",
    }
    api.admin.CreateTopic(pb.CreateTopicRequest(name=SEG, kind=pb.SEGMENTED, config=seg_config))
    for i in range(0, 60, 3):
        api.publish(LED, pairs(i, 3))
        api.publish(SEG, pairs(i, 3))
    api.admin.Compact(pb.CompactRequest(topic=LED, wait=True), timeout=60)
    api.admin.Compact(pb.CompactRequest(topic=SEG, wait=True), timeout=60)
    # what comes next stays as written: no background pass may change the reference
    lag = {"min.compaction.lag.ms": "3600000"}
    api.admin.UpdateTopicConfig(pb.UpdateTopicConfigRequest(name=SEG, set=lag), timeout=30)
    for i in range(60, 84, 3):  # sealed segments the cleaner has not rewritten: indexed
        api.publish(LED, pairs(i, 3))
        api.publish(SEG, pairs(i, 3))
    api.consume(LED)
    api.ack(LED, 1, 4)
    api.consume(SEG)
    api.ack(SEG, 0, 40)
    api.admin.DeleteRecords(pb.DeleteRecordsRequest(topic=SEG, before_offset=3), timeout=30)
    api.close()
    assert srv.stop() == 0
    db = RocksDB(data / "ledgers")  # everything so far into an SST file
    db.flush()
    db.close()
    srv = server_class(data).start()
    api = Api(srv.address)
    api.publish(LED, pairs(84, 6))  # acknowledged, so synced: only in the WAL after the kill
    reference: dict[str, Any] = {}
    reference["seek"] = pb.Message.FromString(api.read(SEG)[30]).publish_time_ms
    reference.update({name: read(api, reference) for name, read in READS.items()})
    api.close()
    srv.kill()
    return data, reference


# ---- the files -------------------------------------------------------------------------


# Files the bit-flip matrix leaves out and the truncation matrix takes in: a flip in the
# catalog or RocksDB's small files only repeats what their checksums or parsers already
# show, but a cut or a deletion of them is damage of its own kind.
ALSO_CUT = {
    "ledgers.catalog": "catalog",
    "IDENTITY": "IDENTITY",
    "rocksdict-config.json": "rocksdict-config.json",
    "segments.manifest": "segments.manifest",
}


def kind_of(rel: str, every: bool = False) -> str | None:
    name = rel.rsplit("/", 1)[-1]
    for suffix, kind in ((".sst", "sst"), (".index", "index"), (".timeindex", "timeindex")):
        if name.endswith(suffix):
            return kind
    if name.endswith(".log"):
        return "wal" if rel.startswith("ledgers/") else "segment"
    if name.startswith(("MANIFEST-", "OPTIONS-")):
        return name.split("-")[0].lower()
    known = ("CURRENT", "FORMAT", "cleaner-offset-checkpoint", "topic.json", "cursors.json")
    known += ("cursors.journal",)
    if name in known or name in ("log-start-offset", "recovery-point"):
        return name
    if every:
        return ALSO_CUT.get(name)
    return None  # LOCK files, RocksDB's info LOG, IDENTITY: not read for data


def stored_files(data: Path, every: bool = False) -> Iterator[tuple[str, str, int]]:
    """(kind, path relative to ``data``, size) of the files the server reads data from;
    with ``every``, also the empty ones and the ``ALSO_CUT`` kinds."""
    for path in sorted(data.rglob("*")):
        rel = path.relative_to(data).as_posix()
        kind = kind_of(rel, every)
        if path.is_file() and kind is not None and (every or path.stat().st_size):
            yield kind, rel, path.stat().st_size


def sealed_segments(data: Path) -> list[Path]:
    """The segment files below the active one that hold batches."""
    return [p for p in sorted((data / "segments" / SEG).glob("*.log"))[:-1] if p.stat().st_size]


# ---- running a case --------------------------------------------------------------------


def judge_read(api: Api, name: str, reference: dict[str, Any]) -> str:
    expected = reference[name]
    try:
        got = READS[name](api, reference)
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.DATA_LOSS:
            return "data_loss"
        return f"silent: {name} answered {exc.code().name}: {exc.details()}"
    return "correct" if got == expected else f"silent: {name} answered OK but differently"


def judge_topic(api: Api, topic: str, reference: dict[str, Any]) -> list[str]:
    try:
        info = api.topic(topic)
    except grpc.RpcError as exc:
        return [f"silent: GetTopic {topic} answered {exc.code().name}: {exc.details()}"]
    names = [n for n in READS if n.startswith(topic)]
    if info.offline:
        verdicts = [judge_read(api, n, reference) for n in names]
        return ["offline" if v == "data_loss" else f"silent: offline, yet {v}" for v in verdicts]
    return [judge_read(api, n, reference) for n in names]


def run_case(template: Path, reference: dict[str, Any], case: Damage, root: Path, cls: Any) -> str:
    data = root / f"case-{abs(hash(case.label))}"
    shutil.copytree(template, data)
    try:
        case.apply(data)
        srv = cls(data)
        try:
            srv.start()
        except RuntimeError:
            errors = [line for line in srv.stderr_lines if "Traceback" in line or "error:" in line]
            ok = len(errors) == 1 and "compactlog: error:" in errors[0]
            return "refused" if ok else f"silent: refusal was not one line: {errors[:3]}"
        api = Api(srv.address)
        try:
            verdicts = judge_topic(api, LED, reference) + judge_topic(api, SEG, reference)
        finally:
            api.close()
            srv.kill()
        bad = [v for v in verdicts if v.startswith("silent")]
        if bad:
            return bad[0]
        for outcome in ("offline", "data_loss"):
            if outcome in verdicts:
                return outcome
        return "correct"
    finally:
        shutil.rmtree(data, ignore_errors=True)


def run_matrix(
    title: str, template: Template, cases: Sequence[Damage], root: Path, cls: Any, capsys: Any
) -> Counter[str]:
    """Run every case on its own copy of the template, two at a time; print the count of
    cases per outcome (and per file kind); fail on any silent case. Returns the totals."""
    data, reference = template
    started = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(lambda c: run_case(data, reference, c, root, cls), cases))
    by_kind: dict[str, Counter[str]] = {}
    for case, outcome in zip(cases, outcomes, strict=True):
        by_kind.setdefault(case.kind, Counter())[outcome.split(":")[0]] += 1
    totals = Counter(o.split(":")[0] for o in outcomes)
    with capsys.disabled():
        print(
            f"\n{title}: {len(cases)} cases in {time.monotonic() - started:.1f}s: "
            + ", ".join(f"{o}={totals.get(o, 0)}" for o in (*OUTCOMES, "silent"))
        )
        for kind, counts in sorted(by_kind.items()):
            print(f"  {kind:28} " + ", ".join(f"{o}={n}" for o, n in sorted(counts.items())))
    silent = [f"{c.label}: {o}" for c, o in zip(cases, outcomes, strict=True) if o not in OUTCOMES]
    assert not silent, "silent outcomes:\n" + "\n".join(silent)
    return totals
