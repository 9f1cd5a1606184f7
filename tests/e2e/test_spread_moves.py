"""Partition placement (``shards.placement = "partition"``) across restarts with another
shard count: a partitioned LEDGER and a partitioned SEGMENTED topic published through the
Python client keep every message, id and compaction status over ``--shards 2 → 1 → 2 → 4``
(test_shards.py does the same for the default topic placement)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from compactlog.client import Client, Message, Producer
from compactlog.errors import CompactlogError
from compactlog.partitioner import partition_for_key, partition_name
from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.e2e.shards import Api, alive, free_port, shard_pids, wait_for

PLACEMENT = '"shards.placement" = "partition"\n'
PARTITIONS = 4
NAMES = {"orders": "ledger", "events": "segmented"}


def _two_keys_a_partition() -> list[bytes]:
    """Eight keys, two routed to each partition (murmur2), so every partition holds data."""
    chosen: list[bytes] = []
    for i in range(1000):
        key = b"k%d" % i
        if [partition_for_key(k, PARTITIONS) for k in chosen].count(
            partition_for_key(key, PARTITIONS)
        ) < 2:
            chosen.append(key)
    return chosen


KEYS = _two_keys_a_partition()

# (partition, ledger id, entry id) -> value, in publish order
Stored = dict[tuple[int, int, int], bytes]


def spread_server(
    server_factory: Callable[..., ServerProcess], shards: int, data_dir: Path, *args: str
) -> ServerProcess:
    """``serve --shards N`` with partition placement on ``data_dir``."""
    return server_factory(
        config=PLACEMENT, extra_args=["--shards", str(shards), *args], data_dir=data_dir
    )


def publish_round(client: Client, name: str, round_: int, into: Stored) -> None:
    """One message a key by ``send`` (each on one partition: straight to its owner), then
    one ``send_batch`` over every key (across partitions: the front splits it)."""
    producer = client.producer(name)
    singles = [(key, b"%s-r%d-one-%s" % (name.encode(), round_, key)) for key in KEYS]
    for key, value in singles:
        mid = producer.send(key, value)
        assert mid.partition() == partition_for_key(key, PARTITIONS)
        into[(mid.partition(), mid[0], mid[1])] = value
    batch = [(key, b"%s-r%d-all-%s" % (name.encode(), round_, key)) for key in KEYS]
    ids = producer.send_batch(batch)
    for (key, value), mid in zip(batch, ids, strict=True):
        assert mid.partition() == partition_for_key(key, PARTITIONS)
        into[(mid.partition(), mid[0], mid[1])] = value
    producer.close()


def read_back(api: Api, name: str, compacted: bool = False) -> list[pb.Message]:
    request = pb.ReadRequest(topic=name, read_compacted=compacted)
    return [m for r in api.log.Read(request, timeout=30) for m in r.messages]


def assert_exactly_once(messages: list[pb.Message], expected: Stored) -> None:
    """Every expected message once, with its id, and each partition in publish order."""
    got = [((m.id.partition, m.id.ledger_id, m.id.entry_id), m.value) for m in messages]
    assert len(got) == len(expected)
    assert dict(got) == expected
    for partition in range(PARTITIONS):
        mine = [v for (p, _l, _e), v in got if p == partition]
        assert mine == [v for (p, _l, _e), v in expected.items() if p == partition]


def assert_compacted_partitions(api: Api, view: Stored) -> None:
    """``orders`` was compacted once: every partition says SUCCESS, and the compacted view
    is ``view`` (one message a key up to the horizon, every message after it)."""
    request = pb.GetCompactionStatusRequest(topic="orders")
    status = api.admin.GetCompactionStatus(request, timeout=30)
    assert status.state == pb.CompactionStatus.SUCCESS
    assert len(status.partitions) == PARTITIONS
    assert all(p.state == pb.CompactionStatus.SUCCESS for p in status.partitions)
    assert_exactly_once(read_back(api, "orders", compacted=True), view)


def test_restarts_with_another_shard_count_keep_spread_partitions(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    data_dir = tmp_path / "spread"
    srv = spread_server(server_factory, 2, data_dir)
    stored: dict[str, Stored] = {name: {} for name in NAMES}
    with Client(srv.address) as client:
        for name, kind in NAMES.items():
            client.create_topic(name, kind, partitions=PARTITIONS)
            publish_round(client, name, 0, stored[name])
    api = Api(srv.address)
    compacted = api.admin.Compact(pb.CompactRequest(topic="orders", wait=True), timeout=60)
    assert compacted.state == pb.CompactionStatus.SUCCESS
    winners = read_back(api, "orders", compacted=True)
    assert sorted(m.key for m in winners) == sorted(KEYS)  # one message a key
    view = {(m.id.partition, m.id.ledger_id, m.id.entry_id): m.value for m in winners}
    api.close()
    for round_, shards in enumerate((1, 2, 4), start=1):
        pids = shard_pids(srv)
        assert srv.stop() == 0
        assert not any(alive(p) for p in pids)
        srv = spread_server(server_factory, shards, data_dir)
        assert len(shard_pids(srv)) == shards
        api = Api(srv.address)
        for name in NAMES:
            assert_exactly_once(read_back(api, name), stored[name])
        assert_compacted_partitions(api, view)
        with Client(srv.address) as client:
            for name in NAMES:
                publish_round(client, name, round_, stored[name])
        view.update((i, v) for i, v in stored["orders"].items() if b"-r%d-" % round_ in v)
        for name in NAMES:
            assert_exactly_once(read_back(api, name), stored[name])
        api.close()


def partition_owners(api: Api, name: str) -> list[str]:
    request = pb.GetPartitionMapRequest(topic=name)
    return [e.address for e in api.admin.GetPartitionMap(request, timeout=30).partitions]


def assert_direct(owners: list[str], name: str, expected: Stored) -> None:
    """Each partition read at its owner's own address (the front out of the path)."""
    for partition, address in enumerate(owners):
        direct = Api(address)
        messages = read_back(direct, partition_name(name, partition))
        direct.close()
        assert [m.value for m in messages] == [
            v for (p, _l, _e), v in expected.items() if p == partition
        ]


def send_each_key(producer: Producer, round_: int, into: Stored) -> None:
    for key in KEYS:
        value = b"mover-r%d-%s" % (round_, key)
        mid = producer.send(key, value)
        assert mid.partition() == partition_for_key(key, PARTITIONS)
        into[(mid.partition(), mid[0], mid[1])] = value


@contextlib.contextmanager
def front_stopped(srv: ServerProcess) -> Iterator[None]:
    """The front process stopped (SIGSTOP), its shards still serving their addresses."""
    assert srv.proc is not None
    os.kill(srv.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)


def test_the_client_sends_to_a_partitions_owner_and_follows_it_when_moved(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    data_dir, listen = tmp_path / "moving", f"127.0.0.1:{free_port()}"
    srv = spread_server(server_factory, 2, data_dir, "--listen", listen)
    stored: Stored = {}
    with Client(srv.address, timeout=10) as client:
        client.create_topic("mover", partitions=PARTITIONS)
        api = Api(srv.address)
        owners = partition_owners(api, "mover")
        assert len(set(owners)) == PARTITIONS and srv.address not in owners
        producer = client.producer("mover")
        send_each_key(producer, 0, stored)  # learns each partition's owner
        with front_stopped(srv):  # what reaches a partition goes straight to its owner
            send_each_key(producer, 1, stored)
            assert_direct(owners, "mover", stored)
        api.close()
        assert srv.stop() == 0
        srv = spread_server(server_factory, 4, data_dir, "--listen", listen)
        api = Api(srv.address)
        moved = partition_owners(api, "mover")
        assert not set(moved) & set(owners)  # every partition has a new owner address
        send_each_key(producer, 2, stored)  # old owners gone: map asked again, retried once
        assert set(moved) <= set(client._routes.addresses())
        assert_direct(moved, "mover", stored)
        assert_exactly_once(read_back(api, "mover"), stored)
        api.close()


class Follower:
    """A client's follow Read of ``NAME`` in a thread: the messages seen and how it ended."""

    def __init__(self, client: Client, name: str) -> None:
        self.reader = client.reader(name, follow=True)
        self.seen: list[Message] = []
        self.ended: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for message in self.reader:
                self.seen.append(message)
        except CompactlogError as exc:
            self.ended = exc

    def values(self) -> list[bytes]:
        return [m.value for m in self.seen if m.value is not None]


def test_a_shard_killed_under_a_follow_of_name_loses_nothing(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    srv = spread_server(server_factory, 2, tmp_path / "killed")
    stored: Stored = {}
    with Client(srv.address, timeout=10) as client:
        client.create_topic("mover", partitions=PARTITIONS)
        producer = client.producer("mover")
        send_each_key(producer, 0, stored)
        follower = Follower(client, "mover")
        wait_for(lambda: len(follower.seen) == len(KEYS))
        victim = shard_pids(srv)[0]
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: any("restarted as pid" in line for line in srv.stderr_lines))
        send_each_key(producer, 1, stored)  # the restarted shard's slots: followed
        # The follow either ended with a retryable error or saw the new messages.
        wait_for(lambda: not follower.thread.is_alive() or len(follower.seen) == len(stored))
        if follower.thread.is_alive():
            assert sorted(follower.values()) == sorted(stored.values())
        else:
            assert isinstance(follower.ended, CompactlogError) and follower.ended.retriable
            assert set(follower.values()) <= set(stored.values())
        follower.reader.close()
        follower.thread.join(timeout=10)
        again = client.reader("mover")  # reconnected: every message once
        read = [(m.id.partition(), m.id[0], m.id[1]) for m in again]
        assert len(read) == len(stored) and set(read) == set(stored)
        assert all(v is not None for v in stored.values())
