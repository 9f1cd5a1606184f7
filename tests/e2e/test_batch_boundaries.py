"""Reads that start, stop and page inside stored batches give the answers a
message-at-a-time store gave: every start id (a batch's first, inside, last, one that
compaction removed), every limit, both kinds, Read and Consume."""

from __future__ import annotations

from typing import Any

import pytest

from compactlog.v1 import compactlog_pb2 as pb

Id = tuple[int, int]
KINDS = {"ledger": pb.LEDGER, "segmented": pb.SEGMENTED}
BATCHES = [[(b"k%d" % (i % 4), b"v%d" % i) for i in range(j, j + 5)] for j in (0, 5, 10)]


def _read(stubs: Any, topic: str, start: Id | None, limit: int, compacted: bool) -> list[Id]:
    req = pb.ReadRequest(topic=topic, max_messages=limit, read_compacted=compacted)
    if start is not None:
        req.message_id.ledger_id, req.message_id.entry_id = start
    return [(m.id.ledger_id, m.id.entry_id) for r in stubs.log.Read(req) for m in r.messages]


@pytest.mark.parametrize("kind", KINDS)
def test_every_start_and_limit_inside_and_across_batches(
    shared_server: Any, connect: Any, unique_topic: str, kind: str
) -> None:
    stubs = connect(shared_server.address)
    config = {"min.cleanable.dirty.ratio": "1"} if kind == "segmented" else {}
    stubs.admin.CreateTopic(
        pb.CreateTopicRequest(name=unique_topic, kind=KINDS[kind], config=config)
    )
    ids = [i for pairs in BATCHES for i in stubs.publish(unique_topic, *pairs)]
    for at, start in enumerate(ids):
        for limit in (0, 1, 3, 7):
            want = ids[at:] if not limit else ids[at : at + limit]
            assert _read(stubs, unique_topic, start, limit, False) == want, (start, limit)


def test_compacted_starts_on_removed_ids_read_from_the_next_survivor(
    shared_server: Any, connect: Any, unique_topic: str
) -> None:
    stubs = connect(shared_server.address)
    stubs.admin.CreateTopic(pb.CreateTopicRequest(name=unique_topic))
    ids = [i for pairs in BATCHES for i in stubs.publish(unique_topic, *pairs)]
    stubs.admin.Compact(pb.CompactRequest(topic=unique_topic, wait=True))
    survivors = ids[-4:]  # the last message of each of the four keys
    tail = stubs.publish(unique_topic, (b"k0", b"after"))
    for start in ids:
        for limit in (0, 1, 2):
            want = [i for i in survivors + tail if i >= start]
            want = want[:limit] if limit else want
            assert _read(stubs, unique_topic, start, limit, True) == want, (start, limit)


@pytest.mark.parametrize("kind", KINDS)
def test_consume_pages_through_batches_without_loss_or_repeat(
    shared_server: Any, connect: Any, unique_topic: str, kind: str
) -> None:
    stubs = connect(shared_server.address)
    stubs.admin.CreateTopic(pb.CreateTopicRequest(name=unique_topic, kind=KINDS[kind]))
    ids = [i for pairs in BATCHES for i in stubs.publish(unique_topic, *pairs)]
    got: list[Id] = []
    for _ in range(len(ids)):
        req = pb.ConsumeRequest(topic=unique_topic, subscription="s", max_messages=3)
        resp = stubs.log.Consume(req, timeout=10)
        got += [(m.id.ledger_id, m.id.entry_id) for m in resp.messages]
        if not resp.messages:
            break
    assert got == ids
