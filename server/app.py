"""``compactlog serve``: open the data dir, start gRPC, print the listening line, stop
cleanly on SIGTERM/SIGINT (stop accepting, let in-flight calls finish, flush, close).

The server is ``grpc.aio``: the Log service (the data plane) is async, so follow
readers, long-polling consumers and publishes waiting for their group commit hold no
thread; the admin and engine services are synchronous and run in the migration thread
pool. Storage work of the Log service runs in its own executor.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import signal
import socket
import sys
from concurrent import futures
from pathlib import Path
from typing import IO

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from compactlog.errors import CompactlogError, StoreLocked
from compactlog.server.admin_service import TopicAdminService
from compactlog.server.broker import Broker
from compactlog.server.cleaner_metrics import export_cleaner_stats
from compactlog.server.engine_service import CompactionEngineService
from compactlog.server.errors import error_listeners
from compactlog.server.handlers import service_handler
from compactlog.server.log_service import LogService, log_handler
from compactlog.server.metrics import Metrics
from compactlog.server.outside_runs import make_outside_runs
from compactlog.server.periodic import Periodic
from compactlog.server.reflection import enable_server_reflection
from compactlog.server.security import Guard, SecurityOptions
from compactlog.server.subscription_admin import SubscriptionAdmin
from compactlog.server.waiting import TopicSignals
from compactlog.storage.config import ServerSettings
from compactlog.v1 import compactlog_pb2 as pb

log = logging.getLogger("compactlog")

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
SHUTDOWN_GRACE_S = 10.0
RPC_THREADS = 64  # synchronous (admin, engine) calls at once
STORAGE_THREADS = 8  # the Log service's read, consume and ack steps at once
APPEND_THREADS = 4  # its appends, apart: a publish never waits behind woken readers
MAX_CONCURRENT_RPCS = 20_000  # past this a new call gets RESOURCE_EXHAUSTED at once


def _fail(message: str) -> int:
    print(f"compactlog: error: {' '.join(message.split())}", file=sys.stderr, flush=True)
    return 1


def lock_data_dir(data_dir: Path) -> IO[str]:
    """Hold an exclusive lock on the data dir for the life of the process."""
    handle = open(data_dir / "LOCK.server", "a+")  # noqa: SIM115 - held until exit
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        owner = handle.read().strip() or "another process"
        handle.close()
        raise StoreLocked(
            f"data dir {data_dir} is in use by another compactlog server ({owner})"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}")
    handle.flush()
    return handle


def build_server(
    broker: Broker,
    signals: TopicSignals,
    executors: tuple[futures.Executor, futures.Executor],
    settings: ServerSettings,
    metrics: Metrics,
    listen: str,
    guard: Guard | None = None,
) -> tuple[grpc.aio.Server, int]:
    from compactlog.server.compaction_service import make_compactions

    guard = guard or Guard.plain()
    server = grpc.aio.server(
        interceptors=guard.interceptors(),
        migration_thread_pool=futures.ThreadPoolExecutor(RPC_THREADS, thread_name_prefix="rpc"),
        maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS,
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ],
    )
    batch = settings.read_batch_max_messages
    storage, appends = executors
    service = LogService(broker, metrics, storage, signals, batch, appends)
    server.add_generic_rpc_handlers((log_handler(service),))
    compactions = make_compactions(broker, settings, metrics)
    stopping = signals.stopping.is_set
    broker.on_delete(service.dispatchers.forget)
    subscriptions = SubscriptionAdmin(broker, service.dispatchers, signals.notify)
    admin = TopicAdminService(broker, compactions, subscriptions)
    engine = CompactionEngineService(make_outside_runs(broker, compactions), compactions)
    server.add_generic_rpc_handlers(
        (
            service_handler("TopicAdmin", admin, stopping),
            service_handler("CompactionEngine", engine, stopping),
        )
    )
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = [
        pb.DESCRIPTOR.services_by_name["Log"].full_name,
        pb.DESCRIPTOR.services_by_name["TopicAdmin"].full_name,
        pb.DESCRIPTOR.services_by_name["CompactionEngine"].full_name,
        health.SERVICE_NAME,
    ]
    enable_server_reflection(names, server)  # v1 and v1alpha
    for name in ["", *names[:3]]:
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    check_listen_address(listen)
    try:
        port = guard.add_port(server, listen)
    except RuntimeError:
        port = 0
    if port == 0:
        raise CompactlogError(f"cannot listen on {listen}: address in use or invalid")
    return server, port


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


def run(
    data_dir: Path,
    listen: str,
    config: Path | None,
    metrics_listen: str | None,
    security: SecurityOptions | None = None,
) -> int:
    logging.basicConfig(
        level=os.environ.get("COMPACTLOG_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        guard = Guard.open(security or SecurityOptions(), listen)
        settings = ServerSettings.load(config)
        data_dir.mkdir(parents=True, exist_ok=True)
        lock = lock_data_dir(data_dir)
    except CompactlogError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot use data dir {data_dir}: {exc.strerror or exc}")
    try:
        broker = Broker(data_dir, settings)
    except CompactlogError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot open data dir {data_dir}: {exc}")
    except Exception as exc:  # one line, never a traceback (CONTRACT section 11)
        log.debug("start-up failed", exc_info=exc)
        return _fail(f"cannot open data dir {data_dir}: {type(exc).__name__}: {exc}")
    try:
        return asyncio.run(_serve(broker, data_dir, listen, settings, metrics_listen, guard))
    finally:
        lock.close()


async def _serve(
    broker: Broker,
    data_dir: Path,
    listen: str,
    settings: ServerSettings,
    metrics_listen: str | None,
    guard: Guard,
) -> int:
    loop = asyncio.get_running_loop()
    metrics = Metrics()
    signals = TopicSignals(loop)
    broker.on_change(signals.notify)
    executor = futures.ThreadPoolExecutor(STORAGE_THREADS, thread_name_prefix="storage")
    appends = futures.ThreadPoolExecutor(APPEND_THREADS, thread_name_prefix="append")
    try:
        server, port = build_server(
            broker, signals, (executor, appends), settings, metrics, listen, guard
        )
        if metrics_listen:
            metrics_port = metrics.serve(metrics_listen)
            log.info(
                "metrics on http://%s:%d/metrics", metrics_listen.rpartition(":")[0], metrics_port
            )
    except (CompactlogError, OSError) as exc:
        broker.close()
        return _fail(str(exc))
    export_cleaner_stats(broker.cleaner.stats, metrics)
    error_listeners.append(lambda method, code: metrics.rpc_errors.labels(method, code).inc())

    def enforce_retention() -> None:
        for name in broker.ledgers.topic_names():
            broker.ledgers.enforce_retention(name)

    retention = Periodic(
        "ledger-retention", settings.log_retention_check_interval_ms / 1000.0, enforce_retention
    )
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if guard.auth is not None:
        loop.add_signal_handler(signal.SIGHUP, guard.reload)
    await server.start()
    broker.start()
    retention.start()
    host = listen.rpartition(":")[0]
    print(f"compactlog listening on {host}:{port}", flush=True)
    log.info("serving data dir %s", data_dir.resolve())
    await stop.wait()
    log.info("shutting down")
    signals.stop()  # follow streams and Consume waits end, in-flight calls finish
    await server.stop(SHUTDOWN_GRACE_S)
    retention.stop()
    await loop.run_in_executor(None, broker.close)
    executor.shutdown(wait=True)
    appends.shutdown(wait=True)
    return 0
