"""One store served on one gRPC port: what ``serve`` runs once, and a shard once per slot.

``ServedStore`` owns what serving a ``Broker`` takes besides the broker: the Log
service's executors, the topic signals that wake waiting readers, the gRPC server and
the ledger retention check. ``start`` binds and starts everything, ``stop`` is the
contract's orderly shutdown (stop accepting, end waits, let in-flight calls finish,
close the store).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Sequence
from concurrent import futures
from typing import TYPE_CHECKING

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from compactlog.errors import CompactlogError
from compactlog.server.admin.partitioned_topics import PartitionedNamespace
from compactlog.server.admin.service import TopicAdminService
from compactlog.server.admin.subscriptions import SubscriptionAdmin
from compactlog.server.broker import Broker
from compactlog.server.compaction.engine_runs import make_outside_runs
from compactlog.server.compaction.engine_service import CompactionEngineService
from compactlog.server.log.publishing import Publishing
from compactlog.server.log.service import LogService, log_handler
from compactlog.server.log.waiting import TopicSignals
from compactlog.server.metrics import Metrics
from compactlog.server.periodic import Periodic
from compactlog.server.rpc.handlers import Admit, AdmitInterceptor, add_services, service_handler
from compactlog.server.rpc.reflection import enable_server_reflection
from compactlog.server.security.guard import Guard
from compactlog.storage.config import ServerSettings
from compactlog.v1 import compactlog_pb2 as pb

if TYPE_CHECKING:  # imported where used: a server without --kafka-listen never loads kio
    from compactlog.server.kafka.listener import KafkaListener
    from compactlog.server.kafka.options import KafkaOptions
    from compactlog.server.kafka.topics import Cluster, KafkaContext, Store

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
SHUTDOWN_GRACE_S = 10.0
RPC_THREADS = 64  # synchronous (admin, engine) calls at once
STORAGE_THREADS = 8  # the Log service's read, consume and ack steps at once
APPEND_THREADS = 4  # its appends, apart: a publish never waits behind woken readers
MAX_CONCURRENT_RPCS = 20_000  # past this a new call gets RESOURCE_EXHAUSTED at once

log = logging.getLogger(__name__)


def build_server(
    broker: Broker,
    signals: TopicSignals,
    executors: tuple[futures.Executor, futures.Executor, futures.ThreadPoolExecutor],
    settings: ServerSettings,
    metrics: Metrics,
    listen: str,
    guard: Guard | None = None,
    admit: Admit | None = None,
    admit_metadata: bool = False,
) -> tuple[grpc.aio.Server, int]:
    from compactlog.server.compaction.service import make_compactions

    guard = guard or Guard.plain()
    # Only an admission that reads the call's metadata pays for the interceptor's step.
    admitting = [AdmitInterceptor()] if admit is not None and admit_metadata else []
    # the synchronous handlers' pool is executors[2], owned by the caller
    server = new_server([*guard.interceptors(), *admitting], executors[2])
    batch = settings.read_batch_max_messages
    storage, appends, _rpc = executors
    service = LogService(broker, metrics, storage, signals, batch, appends)
    # A slot under partition placement stores the front's marked parts of a spanning
    # publish at most once (storage/spanning.py); admission keeps them to the front.
    service.spanning = admit is not None and admit_metadata
    add_services(server, log_handler(service, admit), ["Log"])
    compactions = make_compactions(broker, settings, metrics)
    stopping = signals.stopping.is_set
    broker.on_delete(service.dispatchers.forget)
    subscriptions = SubscriptionAdmin(broker, service.dispatchers, signals.notify)
    admin = TopicAdminService(broker, compactions, subscriptions)
    engine = CompactionEngineService(make_outside_runs(broker, compactions), compactions)
    add_services(
        server, service_handler("TopicAdmin", admin, stopping, admit=admit), ["TopicAdmin"]
    )
    engines = service_handler("CompactionEngine", engine, stopping, admit=admit)
    add_services(server, engines, ["CompactionEngine"])
    serve_health_and_reflection(server)
    return server, listen_on(server, listen, guard)


SERVICES = ("Log", "TopicAdmin", "CompactionEngine")


def new_server(
    interceptors: Sequence[grpc.aio.ServerInterceptor], pool: futures.Executor
) -> grpc.aio.Server:
    """A server (or a sharded front) with the contract's message and call limits."""
    return grpc.aio.server(
        interceptors=interceptors,
        migration_thread_pool=pool,
        maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS,
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ],
    )


def serve_health_and_reflection(server: grpc.aio.Server) -> None:
    """The health service (every service SERVING) and reflection (v1 and v1alpha)."""
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = [pb.DESCRIPTOR.services_by_name[name].full_name for name in SERVICES]
    enable_server_reflection([*names, health.SERVICE_NAME], server)
    for name in ["", *names]:
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)


def listen_on(server: grpc.aio.Server, listen: str, guard: Guard) -> int:
    """Add the guarded port ``listen`` to ``server`` (the served store's, and the front's
    of ``--shards``); the bound port, or one line when it cannot be bound."""
    check_listen_address(listen)
    try:
        port = guard.add_port(server, listen)
    except RuntimeError:
        port = 0
    if port == 0:
        raise CompactlogError(f"cannot listen on {listen}: address in use or invalid")
    return port


def check_listen_address(listen: str) -> None:
    """Refuse a taken or malformed address ourselves, in one line: gRPC's own bind failure
    also prints a multi-line C-core log to stderr."""
    host, sep, port_text = listen.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise CompactlogError(f"cannot listen on {listen!r}: expected HOST:PORT")
    host = host.strip("[]") or "0.0.0.0"
    try:
        infos = socket.getaddrinfo(host, int(port_text), type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise CompactlogError(f"cannot listen on {listen}: {exc.strerror}") from None
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise CompactlogError(f"cannot listen on {listen}: {exc.strerror}") from None


class ServedStore:
    """A broker behind a gRPC port (see the module docstring)."""

    def __init__(
        self,
        broker: Broker,
        settings: ServerSettings,
        guard: Guard,
        metrics: Metrics | None = None,
        admit: Admit | None = None,
        admit_metadata: bool = False,
    ) -> None:
        self.broker = broker
        PartitionedNamespace(broker).finish_pending()  # what a crash cut short, finished
        self.settings = settings
        self.guard = guard
        self.metrics = metrics or Metrics()
        self.admit = admit
        self.admit_metadata = admit_metadata  # admit reads the metadata (the front's mark)
        self.signals: TopicSignals | None = None
        self.server: grpc.aio.Server | None = None
        self.port = 0
        self.kafka: KafkaListener | None = None  # --kafka-listen (server/kafka)
        self._storage = futures.ThreadPoolExecutor(STORAGE_THREADS, thread_name_prefix="storage")
        self._appends = futures.ThreadPoolExecutor(APPEND_THREADS, thread_name_prefix="append")
        self._rpc = futures.ThreadPoolExecutor(RPC_THREADS, thread_name_prefix="rpc")
        self._retention = Periodic(
            "ledger-retention",
            settings.log_retention_check_interval_ms / 1000.0,
            self._enforce_retention,
        )

    def _enforce_retention(self) -> None:
        ledgers = self.broker.ledgers
        for name in ledgers.topic_names():
            ledgers.enforce_retention(name)

    def bind(self, listen: str) -> int:
        """Build the gRPC server on ``listen`` (in the running loop); the bound port.
        ``CompactlogError`` when the address cannot be used."""
        loop = asyncio.get_running_loop()
        self.signals = TopicSignals(loop)
        self.broker.on_change(self.signals.notify)
        self.server, self.port = build_server(
            self.broker,
            self.signals,
            (self._storage, self._appends, self._rpc),
            self.settings,
            self.metrics,
            listen,
            self.guard,
            self.admit,
            self.admit_metadata,
        )
        return self.port

    async def bind_kafka(self, options: KafkaOptions) -> int:
        """Bind the Kafka listener (after ``bind``): the same broker, executors and topic
        signals as the Log service. The bound port; ``CompactlogError`` when it cannot."""
        from compactlog.server.kafka.listener import KafkaListener
        from compactlog.server.kafka.topics import Cluster

        assert self.signals is not None, "bind first"
        self.kafka = KafkaListener(self.kafka_context(Cluster.alone("", 0)))
        port = await self.kafka.bind(options.listen, self.guard.ssl_context())
        self.kafka.ctx.cluster = Cluster.alone(*options.advertised_address(port))
        return port

    def kafka_store(self) -> Store:
        """This store as the Kafka listener serves it (after ``bind``): its broker, its
        own writers of produces and the Log service's topic signals."""
        from compactlog.server.kafka.topics import Store

        assert self.signals is not None, "bind first"
        writers = Publishing(self.broker, self.metrics, self._appends).writers
        return Store(self.broker, writers, self.signals)

    def kafka_context(
        self, cluster: Cluster, stores: dict[int, Store] | None = None
    ) -> KafkaContext:
        """A Kafka listener's context on this store's executors, over this store alone
        or over ``stores`` (a shard's slots, by slot)."""
        from compactlog.server.kafka.topics import KafkaContext

        stores = {0: self.kafka_store()} if stores is None else stores
        ctx = KafkaContext(stores, self._storage, self._appends, cluster)
        ctx.door = self.guard.auth  # --auth-tokens: SASL with the same tokens and roles
        return ctx

    async def start(self, warm_workers: bool = True) -> None:
        """Serve; ``warm_workers``: start the compaction workers now (a shard holding
        several slots leaves them to the first run of each slot's store, as before)."""
        assert self.server is not None, "bind first"
        await self.server.start()
        if self.kafka is not None:
            await self.kafka.start()
        self.broker.start(warm_workers)
        self._retention.start()

    async def stop(self) -> None:
        """Stop accepting, end follow streams and waits, let in-flight calls finish, close."""
        if self.signals is not None:
            self.signals.stop()
        stopping = []
        if self.server is not None:
            stopping.append(self.server.stop(SHUTDOWN_GRACE_S))
        if self.kafka is not None:
            stopping.append(self.kafka.stop(SHUTDOWN_GRACE_S))
        await asyncio.gather(*stopping)
        self._retention.stop()
        loop = asyncio.get_running_loop()
        # a synchronous handler still running past the grace ends before its store closes
        await loop.run_in_executor(None, self._rpc.shutdown)
        await loop.run_in_executor(None, self.broker.close)
        self._storage.shutdown(wait=True)
        self._appends.shutdown(wait=True)

    def abandon(self) -> None:
        """Close the store after a failed ``bind`` (nothing was started)."""
        if self.kafka is not None and self.kafka.server is not None:
            self.kafka.server.close()
        self.broker.close()
        self._storage.shutdown(wait=False)
        self._appends.shutdown(wait=False)
        self._rpc.shutdown(wait=False)
