"""``compactlog serve --shards N`` on a data dir of store slots: the front process.

The front holds the data dir's lock (a second server fails as it always did), starts
the shards (``shards.supervisor``), serves the one listening address (``front``) with
health and reflection, and prints the contract's listening line once every shard is
ready. SIGTERM/SIGINT stop the front's port and every shard at once (each shard stops as
a server does: in-flight calls finish, follow streams end); SIGHUP is passed on so the
shards re-read the tokens file. A shard that cannot be kept alive stops the server with
exit 1 and one line naming it. Under partition placement, once the shards are ready, the
front finishes what a crash left: spanning publishes (``front.spanning``) and admin
changes of spread partitioned topics (``front.spread.repair``).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc

from compactlog.errors import CompactlogError
from compactlog.server import heap
from compactlog.server.front import secret as front_secret
from compactlog.server.front.intents import IntentLog
from compactlog.server.front.partitions import PartitionedIndex
from compactlog.server.front.router import FrontHandler, Owners
from compactlog.server.front.secret import from_front
from compactlog.server.front.spanning import Spanning, channel_of
from compactlog.server.front.spread.repair import SpreadRepair
from compactlog.server.kafka.options import KafkaOptions
from compactlog.server.rpc.handlers import add_services
from compactlog.server.security.guard import Guard
from compactlog.server.serving import (
    SERVICES,
    SHUTDOWN_GRACE_S,
    listen_on,
    new_server,
    serve_health_and_reflection,
)
from compactlog.server.shards.kafka_ports import KafkaBrokers
from compactlog.server.shards.supervisor import ShardSpec, ShardSupervisor
from compactlog.storage.config import ServerSettings
from compactlog.storage.slots import Layout, Placement

log = logging.getLogger("compactlog")


def _fail(message: str) -> int:
    print(f"compactlog: error: {' '.join(message.split())}", file=sys.stderr, flush=True)
    return 1


def _front_server(
    owners: Owners, listen: str, guard: Guard, handler: FrontHandler, pool: futures.Executor
) -> tuple[grpc.aio.Server, int]:
    server = new_server(guard.interceptors(), pool)
    add_services(server, handler, list(SERVICES))
    serve_health_and_reflection(server)
    return server, listen_on(server, listen, guard)


def _index(data_dir: Path, layout: Layout) -> PartitionedIndex | None:
    """The partitioned topics the front answers for: only under partition placement
    (under topic placement ``NAME``'s slot holds every partition and answers alone)."""
    if layout.placement is not Placement.PARTITION:
        return None
    return PartitionedIndex.load(data_dir, layout.slots, layout.placement)


def _spanning(
    data_dir: Path, layout: Layout, config: Path | None, owners: Owners
) -> Spanning | None:
    """The intent log of spanning publishes: only under partition placement, where one
    publish can reach several slots (``front.spanning``); as durable as a publish."""
    if layout.placement is not Placement.PARTITION:
        return None
    fsync = ServerSettings.load(config).publish_durability == "fsync"
    intents = IntentLog(data_dir, fsync)
    return Spanning(intents, channel_of(owners.channels, owners.slot_of), owners.front_mark())


def run_front(
    data_dir: Path,
    layout: Layout,
    shards: int,
    listen: str,
    config: Path | None,
    guard: Guard,
    kafka: KafkaOptions | None = None,
) -> int:
    return asyncio.run(
        _serve_front(_FrontSpec(data_dir, layout, shards, listen, config, guard, kafka))
    )


@dataclass(frozen=True)
class _FrontSpec:
    """What ``compactlog serve --shards N`` was asked for."""

    data_dir: Path
    layout: Layout
    shards: int
    listen: str
    config: Path | None
    guard: Guard
    kafka: KafkaOptions | None


def _finish_what_a_crash_left(
    handler: FrontHandler, spanning: Spanning | None
) -> SpreadRepair | None:
    """Under partition placement, started: the redrive of spanning publishes a crash left
    open (at once, then every second) and the repair of spread topics' admin changes a
    crash cut half-way (at once, then every 30 s); the repair, to stop first."""
    if spanning is not None:
        spanning.start()
    if handler.spread is None:
        return None
    repair = SpreadRepair(handler.spread)
    repair.start()
    return repair


def _front_for_brokers(guard: Guard, secret: str | None, listen: str, port: int) -> str:
    """Under partition placement the shards' Kafka brokers make topic changes through
    this front (``shards.kafka_front``): the address they reach it at (loopback for an
    unspecified host); its door lets their calls, marked with the secret, in."""
    if guard.auth is not None:
        guard.auth.trusted = lambda metadata: from_front(metadata, secret)
    host = listen.rpartition(":")[0]
    host = {"0.0.0.0": "127.0.0.1", "[::]": "[::1]", "": "127.0.0.1"}.get(host, host)
    return f"{host}:{port}"


def _on_signals(stop: asyncio.Event, guard: Guard, supervisor: ShardSupervisor) -> None:
    """SIGTERM/SIGINT stop the server; SIGHUP (with tokens) re-reads them, shards too."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def reload() -> None:
        guard.reload()
        supervisor.signal_all(signal.SIGHUP)

    if guard.auth is not None:
        loop.add_signal_handler(signal.SIGHUP, reload)


@dataclass
class _Front:
    """What a started front runs; ``stop`` ends it in the order the shards need."""

    server: grpc.aio.Server
    port: int
    handler: FrontHandler
    supervisor: ShardSupervisor
    owners: Owners
    pool: futures.ThreadPoolExecutor
    spanning: Spanning | None
    brokers: KafkaBrokers | None

    async def stop(self, repair: SpreadRepair | None) -> None:
        if repair is not None:
            await repair.stop()
        # The shards end their follow streams and finish in-flight calls while the front
        # stops accepting, so a follow reader behind the front ends at once, as it would.
        await asyncio.gather(self.server.stop(SHUTDOWN_GRACE_S), self.supervisor.stop())
        self.pool.shutdown(wait=False)
        if self.spanning is not None:
            await self.spanning.stop()
        await self.owners.close()
        if self.brokers is not None:
            self.brokers.close()


async def _start_front(spec: _FrontSpec, on_fatal: Callable[[str], None]) -> _Front:
    """The front's port bound and its shards started (not yet serving); on an error,
    whatever had started is stopped before it is raised."""
    guard, layout, kafka, listen = spec.guard, spec.layout, spec.kafka, spec.listen
    tls_root = guard.options.tls_cert.read_bytes() if guard.options.tls_cert else None
    # Under partition placement a slot answers calls on a spread NAME only from this front.
    # Kafka's brokers mark the requests they send each other with it (kafka.peers).
    spread = layout.placement is Placement.PARTITION
    secret = front_secret.new_secret() if spread or kafka is not None else None
    owners = Owners(layout.slots, tls_root, layout.placement, secret if spread else None)
    pool = futures.ThreadPoolExecutor(4, thread_name_prefix="front")  # ends with the server
    brokers = None if kafka is None else KafkaBrokers.bind(kafka, spec.shards)
    spanning: Spanning | None = None
    supervisor: ShardSupervisor | None = None
    try:
        spanning = _spanning(spec.data_dir, layout, spec.config, owners)
        handler = FrontHandler(owners, _index(spec.data_dir, layout), spanning)
        server, port = _front_server(owners, listen, guard, handler, pool)
        front = _front_for_brokers(guard, secret, listen, port) if spread and brokers else None
        shards = ShardSpec(
            spec.data_dir,
            layout.slots,
            spec.shards,
            spec.config,
            guard.options,
            layout.placement,
            secret,
            kafka=brokers,
            front=front,
        )
        supervisor = ShardSupervisor(shards, owners.update, on_fatal)
        await supervisor.start()
    except CompactlogError:
        if supervisor is not None:
            await supervisor.stop()
        if spanning is not None:
            await spanning.stop()
        if brokers is not None:
            brokers.close()
        raise
    return _Front(server, port, handler, supervisor, owners, pool, spanning, brokers)


async def _serve_front(spec: _FrontSpec) -> int:
    stop = asyncio.Event()
    fatal: list[str] = []

    def on_fatal(message: str) -> None:
        log.error("%s", message)
        fatal.append(message)
        stop.set()

    try:
        front = await _start_front(spec, on_fatal)
    except CompactlogError as exc:
        return _fail(str(exc))
    repair = _finish_what_a_crash_left(front.handler, front.spanning)
    _on_signals(stop, spec.guard, front.supervisor)
    await front.server.start()
    heap.settle()
    if front.brokers is not None:  # before the gRPC line, which says everything is ready
        log.info("kafka: %s", front.brokers.describe())
        print(f"compactlog kafka listening on {front.brokers.bootstrap}", flush=True)
    host = spec.listen.rpartition(":")[0]
    print(f"compactlog listening on {host}:{front.port}", flush=True)
    log.info(
        "serving data dir %s with %d shards over %d slots",
        spec.data_dir,
        spec.shards,
        spec.layout.slots,
    )
    await stop.wait()
    log.info("shutting down")
    await front.stop(repair)
    if fatal:
        return _fail(fatal[0])
    return 0
