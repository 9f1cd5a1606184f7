"""A LEDGER publish spanning slots is whole across crashes (partition placement).

``serve --shards 2`` with ``shards.placement = "partition"``: a publish to ``NAME`` whose
records go to partitions held by both shards is recorded in the front's intent log before
any part is sent, and each part is stored at most once (``server/front/spanning.py``,
``storage/spanning.py``). The front is crashed at the steps that matter
(``COMPACTLOG_FRONT_CRASH_AT``) and a shard is killed; after a restart every record of the
publish is stored, once.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator

import grpc
import pytest

from compactlog.partitioner import partition_for_key
from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess, Stubs
from tests.e2e.shards import alive, shard_pids, wait_for
from tests.e2e.test_spread_publish import PARTITIONS, SPREAD_CONFIG, create_spread, keyed

pytestmark = pytest.mark.slow

RECORDS = keyed(range(40))


def by_partition(api: Stubs, name: str) -> dict[int, list[bytes]]:
    """The keys each partition holds, in its order (read as a topic alone)."""
    out = {}
    for p in range(PARTITIONS):
        request = pb.ReadRequest(topic=f"{name}-partition-{p}", position=pb.EARLIEST)
        out[p] = [m.key for r in api.log.Read(request, timeout=30) for m in r.messages]
    return out


def expected(records: list[pb.Record], times: int = 1) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for _ in range(times):
        for record in records:
            out[partition_for_key(record.key, PARTITIONS)].append(record.key)
    return out


def crash_front_at(srv: ServerProcess, point: str) -> None:
    """Restart ``srv`` with the crash point set; create the topic; publish across every
    partition; the front dies at ``point`` (exit 137) and takes its shards along."""
    srv.restart({"COMPACTLOG_FRONT_CRASH_AT": point})
    api = create_spread(srv, {"prices": pb.LEDGER})
    pids = shard_pids(srv)
    with pytest.raises(grpc.RpcError) as failed:
        api.log.Publish(pb.PublishRequest(topic="prices", records=RECORDS), timeout=30)
    assert failed.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    api.close()
    assert srv.wait(30) == 137
    assert any(f"crash injected at {point}" in line for line in srv.stderr_lines)
    wait_for(lambda: not any(alive(p) for p in pids), timeout=15)


def restarted_holds(srv: ServerProcess, want: dict[int, list[bytes]]) -> Stubs:
    """Start ``srv`` again (no crash point) and wait for its redrive to make ``want``
    whole; stubs on it."""
    srv.start()
    api = Stubs(srv.address)
    deadline = time.monotonic() + 20
    while by_partition(api, "prices") != want and time.monotonic() < deadline:
        time.sleep(0.2)
    assert by_partition(api, "prices") == want
    return api


@pytest.mark.parametrize("point", ["after_intent", "after_first_part"])
def test_a_front_crash_mid_publish_stores_it_whole_once(
    server_factory: Callable[..., ServerProcess], point: str
) -> None:
    """``after_intent``: nothing was sent, the restarted front sends every part;
    ``after_first_part``: one part was stored, the restarted front sends all four and
    the stored one is not stored again."""
    srv = server_factory(config=SPREAD_CONFIG, extra_args=["--shards", "2"])
    crash_front_at(srv, point)
    api = restarted_holds(srv, expected(RECORDS))
    # The redrive left nothing open: a later publish lands after it, once.
    api.log.Publish(pb.PublishRequest(topic="prices", records=RECORDS), timeout=30)
    assert by_partition(api, "prices") == expected(RECORDS, times=2)
    intents = srv.data_dir / "front" / "intents"
    assert intents.is_dir()
    api.close()
    srv.stop()


def test_a_killed_shard_is_waited_for(
    server_factory: Callable[..., ServerProcess],
) -> None:
    """A publish spanning both shards while one was just killed: the front retries its
    part until the supervisor has started the shard again, and the publish succeeds
    whole; its reply's ids are the ones stored. (The first publish leaves the
    partitions' limits in the front's cache, so the second one's check asks no slot:
    a check that cannot reach a slot fails the call before anything is recorded.)"""
    srv = server_factory(config=SPREAD_CONFIG, extra_args=["--shards", "2"])
    api = create_spread(srv, {"prices": pb.LEDGER})
    api.log.Publish(pb.PublishRequest(topic="prices", records=RECORDS), timeout=30)
    os.kill(shard_pids(srv)[0], signal.SIGKILL)
    reply = api.log.Publish(pb.PublishRequest(topic="prices", records=RECORDS), timeout=30)
    assert [i.partition for i in reply.ids] == [
        partition_for_key(r.key, PARTITIONS) for r in RECORDS
    ]
    assert by_partition(api, "prices") == expected(RECORDS, times=2)
    assert srv.logged("restarted as pid")
    api.close()
    srv.stop()


def test_a_marked_part_from_a_caller_is_refused(
    server_factory: Callable[..., ServerProcess],
) -> None:
    """Only the front may send a marked part: a caller reaching a slot's own port with
    one is refused (INVALID_ARGUMENT), nothing stored."""
    from compactlog.storage.spanning import SpanningPart

    srv = server_factory(config=SPREAD_CONFIG, extra_args=["--shards", "2"])
    api = create_spread(srv, {"prices": pb.LEDGER})
    entry = api.admin.GetPartitionMap(pb.GetPartitionMapRequest(topic="prices"), timeout=30)
    owner = entry.partitions[0]
    slot = Stubs(owner.address)
    part = pb.PublishRequest(topic=owner.topic, records=RECORDS[:1]).SerializeToString()
    publish = slot.channel.unary_unary("/compactlog.v1.Log/Publish")
    with pytest.raises(grpc.RpcError) as refused:
        publish(SpanningPart(1, 1).encode() + part, timeout=30)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    assert by_partition(api, "prices") == expected([])
    slot.close()
    api.close()
    srv.stop()


def test_a_stream_cut_by_a_killed_shard_leaves_each_request_whole_or_absent(
    server_factory: Callable[..., ServerProcess],
) -> None:
    """A PublishStream of requests each spanning both shards; a shard is killed in the
    middle. The stream ends with an error; what it had recorded but not finished is the
    redriver's once the shard is back. Every request ends up stored whole, once, or not
    at all, and the ones answered before the kill are all there."""
    srv = server_factory(config=SPREAD_CONFIG, extra_args=["--shards", "2"])
    api = create_spread(srv, {"prices": pb.LEDGER})
    api.log.Publish(pb.PublishRequest(topic="prices", records=RECORDS), timeout=30)  # limits
    requests = [
        pb.PublishRequest(
            topic="prices", records=[pb.Record(key=b"r%d-k%d" % (i, j)) for j in range(8)]
        )
        for i in range(300)
    ]

    def slowly() -> Iterator[pb.PublishRequest]:
        for request in requests:
            time.sleep(0.003)
            yield request

    answered = 0
    with pytest.raises(grpc.RpcError):
        for _reply in api.log.PublishStream(slowly(), timeout=60):
            answered += 1
            if answered == 20:
                os.kill(shard_pids(srv)[0], signal.SIGKILL)
    assert 20 <= answered < len(requests)

    def stored() -> Counter[bytes]:
        keys = [k for p in by_partition(api, "prices").values() for k in p]
        return Counter(k.split(b"-")[0] for k in keys if k.startswith(b"r"))

    wait_for(lambda: any("restarted as pid" in line for line in srv.stderr_lines))
    last: Counter[bytes] = Counter()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # until the redrive has nothing left to do
        now = stored()
        if now == last and all(n == 8 for n in now.values()):
            break
        last = now
        time.sleep(1.0)
    counts = stored()
    assert all(n == 8 for n in counts.values()), counts  # whole, each record once
    assert all(counts[b"r%d" % i] == 8 for i in range(answered))  # answered: stored
    api.close()
    srv.stop()
