"""gRPC helpers for the Spark engine's tests (the session itself: ``spark`` in
tests/conftest.py, one for the whole run)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from compactlog.compactor.two_phase.grpc_adapter import open_channel
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

pyspark = pytest.importorskip("pyspark")

Row = tuple[int, int, bytes | None, bytes | None, dict[str, str], int, int]


class Api:
    """Raw stubs of one server: admin, log and the compaction engine."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.channel = open_channel(address)
        self.admin = pb_grpc.TopicAdminStub(self.channel)
        self.log = pb_grpc.LogStub(self.channel)
        self.engine = pb_grpc.CompactionEngineStub(self.channel)

    def create(self, topic: str, kind: int = pb.LEDGER, **config: str) -> None:
        cfg = {k.replace("_", "."): v for k, v in config.items()}
        self.admin.CreateTopic(pb.CreateTopicRequest(name=topic, kind=kind, config=cfg))

    def publish(self, topic: str, records: Sequence[pb.Record]) -> None:
        for i in range(0, len(records), 5000):
            self.log.Publish(pb.PublishRequest(topic=topic, records=records[i : i + 5000]))

    def read(self, topic: str, compacted: bool) -> list[Row]:
        req = pb.ReadRequest(topic=topic, read_compacted=compacted)
        return [as_row(m) for r in self.log.Read(req, timeout=60) for m in r.messages]

    def layout(self, topic: str) -> pb.TopicLayout:
        return self.engine.GetTopicLayout(pb.GetTopicLayoutRequest(topic=topic))

    def compacted_entries(self, topic: str) -> list[bytes]:
        """The current compacted ledger's entries, byte for byte."""
        lay = self.layout(topic)
        if not lay.compacted_ledger_id:
            return []
        meta = [r for r in lay.compacted_view if r.compacted]
        if not meta:
            return []
        req = pb.ReadEntriesRequest(topic=topic, range=meta[0])
        return [e for b in self.engine.ReadEntries(req) for e in b.entries]

    def status(self, topic: str) -> pb.CompactionStatus:
        return self.admin.GetCompactionStatus(pb.GetCompactionStatusRequest(topic=topic))

    def close(self) -> None:
        self.channel.close()


def as_row(m: pb.Message) -> Row:
    return (
        m.id.ledger_id,
        m.id.entry_id,
        m.key if m.HasField("key") else None,
        m.value if m.HasField("value") else None,
        dict(m.properties),
        m.publish_time_ms,
        m.event_time_ms,
    )


@pytest.fixture
def api() -> Iterator[object]:
    made: list[Api] = []

    def make(address: str) -> Api:
        made.append(Api(address))
        return made[-1]

    yield make
    for a in made:
        a.close()
