"""The write-site fault harness's lab (``test_write_sites.py``): one capability-less
``compactlog serve`` on a small tmpfs, what it acknowledged, and the checks every case ends
with.

``Lab`` keeps a model of every acknowledged write (the values published per topic, the
last message acknowledged per subscription) and reads it back on demand; ``refused`` turns
a failed call into (reason, metadata) and counts any INTERNAL; ``ballast`` fills the disk
to an exact number of free pages (tmpfs allocates whole pages, so "room for this write and
not the next" is a page count).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import SmallDisk, Stubs

PAGE = 4096
CODES = {"DISK_FULL": "RESOURCE_EXHAUSTED", "STORAGE_UNAVAILABLE": "UNAVAILABLE"}
ERRNO = {"DISK_FULL": "ENOSPC", "STORAGE_UNAVAILABLE": "EACCES"}
SUB = "sub"


def records(tag: str, keys: range, size: int) -> list[pb.Record]:
    return [pb.Record(key=b"k%d" % k, value=f"{tag}-{k}-".encode().ljust(size, b"v")) for k in keys]


class Refused(Exception):
    """A call the server refused: its status code name, reason and metadata."""

    def __init__(self, code: str, reason: str, metadata: dict[str, str], details: str) -> None:
        super().__init__(f"{code} {reason} {metadata}: {details}")
        self.code, self.reason, self.metadata, self.details = code, reason, metadata, details


class Lab:
    """The server, its disk and what it acknowledged."""

    def __init__(self, srv: Any, disk: SmallDisk) -> None:
        self.srv = srv
        self.disk = disk
        self.api = Stubs(srv.address)
        self.acked: dict[str, list[tuple[bytes, bytes]]] = {}
        self.compacting: set[str] = set()
        self.last_ack: dict[str, tuple[int, int]] = {}
        self.starts: dict[str, int] = {}  # log start offsets DeleteRecords/retention moved
        self.internal = 0  # refusals that said INTERNAL
        self.lost = 0  # reads that missed (or added to) what was acknowledged

    # ---- calls -------------------------------------------------------------------------
    def call(self, fn: Callable[[], Any]) -> Any:
        """``fn()``; a refusal as ``Refused`` (an INTERNAL one counted)."""
        try:
            return fn()
        except grpc.RpcError as err:
            status = rpc_status.from_call(err)  # type: ignore[arg-type]
            assert status is not None, err.details()
            info = error_details_pb2.ErrorInfo()
            assert status.details[0].Unpack(info)
            if err.code() == grpc.StatusCode.INTERNAL or info.reason == "INTERNAL":
                self.internal += 1
            details = str(err.details())
            raise Refused(err.code().name, info.reason, dict(info.metadata), details) from None

    def create(self, name: str, kind: int, **config: str) -> None:
        cfg = {k.replace("_", "."): v for k, v in config.items()}
        request = pb.CreateTopicRequest(name=name, kind=kind, config=cfg)
        self.call(lambda: self.api.admin.CreateTopic(request, timeout=30))
        self.acked[name] = []
        if cfg.get("cleanup.policy") == "compact":
            self.compacting.add(name)

    def publish(self, topic: str, batch: list[pb.Record]) -> None:
        request = pb.PublishRequest(topic=topic, records=batch)
        self.call(lambda: self.api.log.Publish(request, timeout=30))
        self.acked[topic] += [(r.key, r.value) for r in batch]

    def drop_before(self, topic: str, info: pb.TopicInfo) -> None:
        """DeleteRecords or retention answered ``info``: what lies below its log start is
        no longer expected (a topic these cases never compact: offset = position)."""
        start = info.stats.log_start_offset
        del self.acked[topic][: start - self.starts.get(topic, 0)]
        self.starts[topic] = start

    def delete_records(self, topic: str, before: int) -> None:
        request = pb.DeleteRecordsRequest(topic=topic, before_offset=before)
        self.drop_before(topic, self.call(lambda: self.api.admin.DeleteRecords(request)))

    def enforce_retention(self, topic: str) -> None:
        request = pb.EnforceRetentionRequest(topic=topic)
        self.drop_before(topic, self.call(lambda: self.api.admin.EnforceRetention(request)))

    def compact(self, topic: str) -> pb.CompactionStatus:
        request = pb.CompactRequest(topic=topic, wait=True)
        return self.call(lambda: self.api.admin.Compact(request, timeout=60))

    def compact_status(self, topic: str) -> pb.CompactionStatus:
        request = pb.GetCompactionStatusRequest(topic=topic)
        return self.api.admin.GetCompactionStatus(request, timeout=30)

    def consume(self, topic: str, redeliver: bool = False) -> list[pb.Message]:
        request = pb.ConsumeRequest(
            topic=topic, subscription=SUB, max_messages=1000, redeliver_unacknowledged=redeliver
        )
        return list(self.call(lambda: self.api.log.Consume(request, timeout=30)).messages)

    def ack(self, topic: str, message: pb.Message) -> None:
        request = pb.AcknowledgeRequest(
            topic=topic, subscription=SUB, id=message.id, cumulative=True
        )
        self.call(lambda: self.api.log.Acknowledge(request, timeout=30))
        self.last_ack[topic] = (message.id.ledger_id, message.id.entry_id)

    def ack_list(self, topic: str, messages: list[pb.Message]) -> None:
        """Individual acks of ``messages`` in one AcknowledgeList (one cursor write)."""
        request = pb.AcknowledgeListRequest(
            topic=topic, subscription=SUB, ids=[m.id for m in messages]
        )
        self.call(lambda: self.api.log.AcknowledgeList(request, timeout=30))

    def until_refused(self, fn: Callable[[], object], limit: int = 400) -> Refused:
        """Call ``fn`` until the server refuses it (every success is acknowledged and in
        the model); the refusal."""
        for _ in range(limit):
            try:
                fn()
            except Refused as refusal:
                return refusal
        raise AssertionError(f"{limit} calls and no refusal")

    def once_back(self, fn: Callable[[], Any], timeout: float = 10.0) -> Any:
        """``fn()`` as a client retries a retriable refusal: until the server has seen
        that the cause is gone (it probes at most twice a second), without a restart."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return fn()
            except Refused as refusal:
                if refusal.reason not in CODES or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    # ---- checks ------------------------------------------------------------------------
    def values(self, topic: str) -> list[tuple[bytes, bytes]]:
        request = pb.ReadRequest(topic=topic, position=pb.EARLIEST)
        replies = self.call(lambda: list(self.api.log.Read(request, timeout=60)))
        return [(m.key, m.value) for r in replies for m in r.messages]

    def verify(self, topic: str) -> None:
        """Everything acknowledged reads back, and nothing else (a compacting topic: the
        latest value of every key)."""
        got, want = self.values(topic), self.acked[topic]
        if topic in self.compacting:
            got, want = sorted(dict(got).items()), sorted(dict(want).items())  # type: ignore[assignment]
        self.lost += got != want
        assert got == want, f"{topic}: read {len(got)} records, {len(want)} acknowledged"

    def verify_all(self) -> None:
        for topic in self.acked:
            self.verify(topic)

    def verify_acks(self) -> None:
        """Each subscription redelivers exactly what follows its last acknowledged message."""
        for topic, last in self.last_ack.items():
            message = self.consume(topic, redeliver=True)[0]
            first = (message.id.ledger_id, message.id.entry_id)
            self.lost += first <= last
            assert first > last, f"{topic}: acked {last} came again as {first}"
            self.ack(topic, message)

    def expect(self, refusal: Refused, reason: str, under: Path) -> None:
        """A refusal with its reason, errno and a path below ``under``."""
        assert (refusal.code, refusal.reason) == (CODES[reason], reason), refusal
        assert refusal.metadata.get("errno") == ERRNO[reason], refusal
        assert refusal.metadata.get("path", "").startswith(str(under)), refusal

    def ack_refused_on_full_disk(self, ack: Callable[[], object], under: Path) -> str:
        """The disk filled to its last page: ``ack`` (each call a new ack, which fits in
        the store's last page until one needs a new one) is refused DISK_FULL naming a
        path below ``under``, and taken again once the room is back."""
        self.ballast(0)
        self.expect(self.until_refused(ack), "DISK_FULL", under)
        self.lighten()
        self.once_back(ack)
        return "refused"

    def ack_lists(self, topic: str, kind: int) -> Callable[[], object]:
        """A new topic of ``kind`` with 480 messages, and an AcknowledgeList of the next
        four of them at each call: more lists than one page of a cursor store holds."""
        self.create(topic, kind)
        for n in range(60):
            self.publish(topic, records(f"l{n}", range(8), 10))
        messages = self.consume(topic)
        lists = iter([messages[at : at + 4] for at in range(0, len(messages), 4)])
        return lambda: self.ack_list(topic, next(lists))

    def mark(self) -> int:
        return len(self.srv.stderr_lines)

    def logged(self, since: int, *words: str, timeout: float = 5.0) -> str:
        """The first server log line after ``since`` holding every one of ``words``."""
        deadline = time.monotonic() + timeout
        while True:
            for line in self.srv.stderr_lines[since:]:
                if all(w in line for w in words):
                    return str(line)
            assert time.monotonic() < deadline, f"no log line with {words}"
            time.sleep(0.05)

    # ---- faults ------------------------------------------------------------------------
    def ballast(self, pages: int = 0) -> None:
        """Fill the disk so that exactly ``pages`` pages stay free."""
        with open(self.disk.filler, "ab", buffering=0) as fh:
            while self.disk.available() > pages * PAGE:
                try:
                    fh.write(b"\0" * PAGE)
                except OSError:
                    break
        assert self.disk.available() <= pages * PAGE

    def lighten(self) -> None:
        self.disk.free()

    def close(self) -> None:
        self.api.close()


def blocker(path: Path) -> Path:
    """A read-only file where the server writes its temporary ``path``: its write fails
    EACCES for a server without CAP_DAC_OVERRIDE, while the directory stays writable."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(b"")
    os.chmod(tmp, 0o444)
    return tmp


@dataclass(frozen=True)
class Case:
    """One write site under one fault; ``run`` returns the outcome."""

    site: str
    fault: str
    run: Callable[[Lab], str]


def create_refused(lab: Lab, name: str, kind: int, reason: str, under: Path) -> None:
    refusal = lab.until_refused(lambda: lab.create(f"{name}{time.monotonic_ns()}", kind))
    lab.expect(refusal, reason, under)
    listed = {t.name for t in lab.api.admin.ListTopics(pb.ListTopicsRequest()).topics}
    assert listed == set(lab.acked), "a refused create left a topic"
