"""A server on the pure-Python twin of the batch codec (what an install without a C
compiler runs) serves the same answers, and its data dir reads the same on the compiled
twin: both write the same bytes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from compactlog.storage import batch
from compactlog.v1 import compactlog_pb2 as pb

Api = Any
PAIRS = [(b"a", b"1"), (None, b"keyless"), (b"b", b""), (b"a", b"2"), (b"c", None), (b"b", b"3")]


def _round_trip(api: Api, topic: str, kind: pb.TopicKind.ValueType) -> tuple[Any, ...]:
    config = {"cleanup.policy": "compact"} if kind == pb.SEGMENTED else {}
    api.admin.CreateTopic(pb.CreateTopicRequest(name=topic, kind=kind, config=config))
    ids = api.publish(topic, *PAIRS) + api.publish(topic, (b"d", b"4"))
    api.compact(topic)
    return ids, api.read(topic, compacted=False), api.read(topic)


@pytest.mark.skipif(not batch.COMPILED, reason="compares the two twins: needs the compiled one")
def test_pure_python_twin_serves_and_stores_the_same(
    server_factory: Any, ledger_api: Callable[[str], Api]
) -> None:
    pure = server_factory().restart({"COMPACTLOG_NO_EXT": "1"})
    compiled = server_factory()
    kinds = {"ledger": pb.LEDGER, "segmented": pb.SEGMENTED}
    got = {
        (name, twin): _round_trip(ledger_api(srv.address), name, kind)
        for name, kind in kinds.items()
        for twin, srv in (("pure", pure), ("compiled", compiled))
    }
    for name in kinds:
        assert got[(name, "pure")][1:] == got[(name, "compiled")][1:]
        assert [i[1] for i in got[(name, "pure")][0]] == [i[1] for i in got[(name, "compiled")][0]]
    pure.restart({"COMPACTLOG_NO_EXT": "0"})  # the pure twin's data dir on the compiled twin
    api = ledger_api(pure.address)
    for name in kinds:
        assert (api.read(name, compacted=False), api.read(name)) == got[(name, "pure")][1:]
