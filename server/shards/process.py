"""A shard of ``compactlog serve --shards N``: one process serving some store slots.

Started by the front (``server/shards/supervisor.py``) with its slots, the data dir and the
front's secret, a shard dies with the front, opens a ``Broker`` over each slot it serves,
serves each slot on its own loopback port with the main address's tokens and TLS, and
prints its slots' addresses on one stdout line once ready. Its command line and start-up
steps are in docs/architecture.md ("Shards", "Process life").
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING

from compactlog import malloc_tuning
from compactlog.compactor.worker_os import die_with_parent
from compactlog.errors import CompactlogError, MalformedRequest, NotOwner
from compactlog.server import heap
from compactlog.server.app import lock_data_dir
from compactlog.server.broker import Broker
from compactlog.server.front.secret import SECRET_ENV, from_front
from compactlog.server.rpc.handlers import Admit, Metadata
from compactlog.server.rpc.wire_peek import topic_of
from compactlog.server.security.guard import Guard, SecurityOptions
from compactlog.server.serving import SHUTDOWN_GRACE_S, ServedStore
from compactlog.storage import file_limits
from compactlog.storage.config import ServerSettings
from compactlog.storage.slots import Placement, slot_dir, slot_of
from compactlog.storage.spanning import marker_of
from compactlog.v1 import compactlog_pb2 as pb

if TYPE_CHECKING:  # imported where used: a shard without Kafka never loads kio
    from compactlog.server.shards.kafka_broker import ShardBroker

log = logging.getLogger("compactlog.shard")

SHARD_LISTEN = "127.0.0.1:0"


def slot_admit(
    slot: int,
    slots: int,
    placement: Placement = Placement.TOPIC,
    secret: str | None = None,
    partitioned: Callable[[str], bool] = lambda _name: False,
) -> Admit:
    """Refuse a request whose topic lives in another slot (``NOT_OWNER``, retriable): a
    client with a stale map must not create or miss a topic in the wrong store.

    Under partition placement a slot holds some partitions of a spread ``NAME`` and
    answers a call on ``NAME`` for those only, so only the front may ask it (the front
    merges every slot's part): a call from the front (``front.secret``) is admitted for
    any name; one without the mark on a partitioned ``NAME`` this slot keeps a record of
    (``partitioned``), or creating one, is refused."""
    spread = placement is Placement.PARTITION

    def admit(data: bytes, message: str, metadata: Metadata) -> CompactlogError | None:
        topic = topic_of(data)
        if spread and from_front(metadata, secret):
            return None
        if message == "PublishRequest" and marker_of(data) is not None:
            return MalformedRequest(
                "a publish marked as part of a spanning publish comes from the server's front only",
                request=message,
            )
        if topic is None:
            return None
        home = slot_of(topic, slots, placement)
        if home != slot:
            return NotOwner(
                f"topic {topic} lives in store slot {home}, not in slot {slot} served here: "
                "ask GetPartitionMap for its owner",
                topic=topic,
                slot=home,
            )
        if spread and (partitioned(topic) or _creates_partitioned(data, message)):
            return NotOwner(
                f"topic {topic}'s partitions span several shards: call the server's main address",
                topic=topic,
                slot=home,
            )
        return None

    return admit


def _creates_partitioned(data: bytes, message: str) -> bool:
    """A CreateTopic of a partitioned topic (a request that does not parse is left to
    the parser's own refusal)."""
    if message != "CreateTopicRequest":
        return False
    try:
        return pb.CreateTopicRequest.FromString(data).partitions >= 2
    except Exception:
        return False


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="compactlog-shard")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--slots", required=True, help="comma-separated slot numbers")
    parser.add_argument("--slot-count", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--shard", type=int, default=0)
    parser.add_argument(
        "--placement", choices=[p.value for p in Placement], default=Placement.TOPIC.value
    )
    parser.add_argument("--config", default=None)
    parser.add_argument("--auth-tokens", default=None)
    parser.add_argument("--tls-cert", default=None)
    parser.add_argument("--tls-key", default=None)
    parser.add_argument("--kafka-fd", type=int, default=None, help="the broker's socket")
    parser.add_argument("--kafka-brokers", default=None, help="JSON [[host, port], ...]")
    parser.add_argument("--kafka-peers", default=None, help="JSON [[host, port], ...]")
    parser.add_argument("--front", default=None, help="the front's address (topic changes)")
    return parser.parse_args(argv)


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    die_with_parent(args.parent_pid)
    logging.basicConfig(
        level=os.environ.get("COMPACTLOG_LOG_LEVEL", "INFO"),
        format=f"%(asctime)s %(levelname)s shard-{args.shard} %(name)s: %(message)s",
        stream=sys.stderr,
    )
    malloc_tuning.keep_freed_memory()  # as ``compactlog serve`` (server.app.run)
    slots = [int(s) for s in args.slots.split(",") if s]
    security = SecurityOptions(
        auth_tokens=_path(args.auth_tokens),
        tls_cert=_path(args.tls_cert),
        tls_key=_path(args.tls_key),
    )
    data_dir = Path(args.data_dir)
    placement = Placement(args.placement)
    secret = os.environ.pop(SECRET_ENV, None)  # the front's mark; not passed on further
    kafka = _kafka_broker(args, secret)
    locks: list[IO[str]] = []
    brokers: dict[int, Broker] = {}
    try:
        file_limits.start()
        guard = Guard.open(security, SHARD_LISTEN)
        if guard.auth is not None and placement is Placement.PARTITION and secret:
            guard.auth.trusted = lambda metadata: from_front(metadata, secret)
        # every shard's workers would take the same last cores: no own cores with shards
        settings = dataclasses.replace(
            ServerSettings.load(_path(args.config)), compaction_worker_own_cores=False
        )
        for slot in slots:
            home = slot_dir(data_dir, slot)
            locks.append(lock_data_dir(home))
            brokers[slot] = Broker(home, settings, holds=_holds(slot, args.slot_count, placement))
    except Exception as exc:  # one line for the front to report, never a traceback
        for broker in brokers.values():
            broker.close()
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"compactlog: error: shard {args.shard}: {message}", file=sys.stderr, flush=True)
        return 1
    try:
        admits = {
            slot: slot_admit(slot, args.slot_count, placement, secret, _has_record(broker))
            for slot, broker in brokers.items()
        }
        spread = placement is Placement.PARTITION  # admission reads the front's mark
        return asyncio.run(_serve(brokers, settings, guard, admits, spread, kafka))
    finally:
        for lock in locks:
            lock.close()


def _kafka_broker(args: argparse.Namespace, secret: str | None) -> ShardBroker | None:
    """This shard's Kafka broker (``--kafka-fd``), its types loading from now on."""
    if args.kafka_fd is None:
        return None
    from compactlog.server.kafka.listener import preload_schemas  # only with Kafka
    from compactlog.server.kafka.peers import Peers
    from compactlog.server.shards.kafka_broker import ShardBroker
    from compactlog.server.shards.kafka_ports import parse_brokers

    preload_schemas()
    brokers = parse_brokers(args.kafka_brokers)
    peers = Peers(parse_brokers(args.kafka_peers), secret or "")
    placement = Placement(args.placement)
    return ShardBroker(
        args.kafka_fd, args.shard, brokers, peers, args.slot_count, placement, args.front
    )


def _holds(slot: int, slot_count: int, placement: Placement) -> Callable[[str], bool]:
    """Which topic names the slot's store holds (its Broker serves local partitions)."""
    return lambda name: slot_of(name, slot_count, placement) == slot


def _has_record(broker: Broker) -> Callable[[str], bool]:
    return lambda name: broker.partitioned.get(name) is not None


async def _serve(
    brokers: dict[int, Broker],
    settings: ServerSettings,
    guard: Guard,
    admits: dict[int, Admit],
    admit_metadata: bool,
    kafka: ShardBroker | None = None,
) -> int:
    loop = asyncio.get_running_loop()
    served: dict[int, ServedStore] = {}
    try:
        for slot, broker in brokers.items():
            store = ServedStore(
                broker, settings, guard, admit=admits[slot], admit_metadata=admit_metadata
            )
            served[slot] = store
            store.bind(SHARD_LISTEN)
    except CompactlogError as exc:
        for store in served.values():
            store.abandon()
        print(f"compactlog: error: {exc}", file=sys.stderr, flush=True)
        return 1
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if guard.auth is not None:
        loop.add_signal_handler(signal.SIGHUP, guard.reload)
    listener = None if kafka is None else await kafka.listen(served, guard)
    for store in served.values():  # one worker pool a slot: each starts with its first run
        await store.start(warm_workers=len(served) == 1)
    if listener is not None and kafka is not None:
        await listener.start()
        await kafka.peers.announce(kafka.cluster.node_id)  # the other brokers may ask now
    heap.settle()
    addresses = {str(slot): f"127.0.0.1:{store.port}" for slot, store in served.items()}
    print(json.dumps({"slots": addresses}), flush=True)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # nobody reads the pipe any more
    await stop.wait()
    if listener is not None and kafka is not None:  # its answers finish on open stores
        kafka.peers.withdraw()  # other brokers stop asking: they answer for its parts
        for store in served.values():
            if store.signals is not None:
                store.signals.stop()  # waiting fetches answer now
        await listener.stop(SHUTDOWN_GRACE_S)
        kafka.peers.close()
        if kafka.front is not None:
            await kafka.front.close()
    await asyncio.gather(*(store.stop() for store in served.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
