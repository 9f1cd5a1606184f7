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
import sys
from pathlib import Path
from typing import IO

from compactlog import malloc_tuning
from compactlog.errors import CompactlogError, StoreLocked
from compactlog.server import heap
from compactlog.server.broker import Broker
from compactlog.server.compaction.cleaner_metrics import export_cleaner_stats
from compactlog.server.kafka.options import KafkaOptions, split_address
from compactlog.server.metrics import Metrics
from compactlog.server.rpc.errors import error_listeners
from compactlog.server.security.guard import Guard, SecurityOptions, check_exposure
from compactlog.server.serving import (  # noqa: F401 - re-exported
    APPEND_THREADS,
    STORAGE_THREADS,
    ServedStore,
    build_server,
    check_listen_address,
)
from compactlog.server.shards.app import run_front
from compactlog.storage import file_limits
from compactlog.storage.config import ServerSettings
from compactlog.storage.slots import Placement, choose_layout

log = logging.getLogger("compactlog")


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


def _log_to_stderr() -> None:
    logging.basicConfig(
        level=os.environ.get("COMPACTLOG_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def _open_broker(data_dir: Path, settings: ServerSettings) -> Broker:
    """The stores opened; any failure raised as a CompactlogError of one line, never a
    traceback (CONTRACT section 11)."""
    try:
        return Broker(data_dir, settings)
    except CompactlogError:
        raise
    except OSError as exc:
        raise CompactlogError(f"cannot open data dir {data_dir}: {exc}") from exc
    except Exception as exc:
        log.debug("start-up failed", exc_info=exc)
        raise CompactlogError(
            f"cannot open data dir {data_dir}: {type(exc).__name__}: {exc}"
        ) from exc


def run(
    data_dir: Path,
    listen: str,
    config: Path | None,
    metrics_listen: str | None,
    security: SecurityOptions | None = None,
    shards: int = 1,
    kafka: KafkaOptions | None = None,
) -> int:
    _log_to_stderr()
    malloc_tuning.keep_freed_memory()  # before the stores open: a Read's bytes reuse pages
    try:
        file_limits.start()  # raise the soft limit to the hard one, or refuse in one line
        guard = Guard.open(security or SecurityOptions(), listen)
        if kafka is not None:
            check_kafka(kafka, security or SecurityOptions(), shards)
        settings = ServerSettings.load(config)
        data_dir.mkdir(parents=True, exist_ok=True)
        lock = lock_data_dir(data_dir)
    except (CompactlogError, file_limits.TooFewFiles) as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot use data dir {data_dir}: {exc.strerror or exc}")
    try:
        layout = choose_layout(data_dir, shards, Placement(settings.shards_placement))
        if layout.sharded and metrics_listen:
            raise CompactlogError("--metrics-listen is not available with store slots (--shards)")
    except CompactlogError as exc:
        lock.close()
        return _fail(str(exc))
    if layout.sharded:
        try:
            return run_front(data_dir, layout, shards, listen, config, guard, kafka)
        finally:
            lock.close()
    if kafka is not None:
        from compactlog.server.kafka.listener import preload_schemas  # only with Kafka

        preload_schemas()  # on its own thread, while the store opens
    try:
        broker = _open_broker(data_dir, settings)
    except CompactlogError as exc:
        return _fail(str(exc))
    try:
        return asyncio.run(_serve(broker, data_dir, listen, settings, metrics_listen, guard, kafka))
    finally:
        lock.close()


def check_kafka(kafka: KafkaOptions, security: SecurityOptions, shards: int) -> None:
    """Refuse, in one line, a Kafka listener this version cannot place or would leave open."""
    split_address(kafka.listen, "--kafka-listen")
    if kafka.advertised is not None:
        split_address(kafka.advertised, "--kafka-advertised")
    check_exposure(kafka.listen, security)


async def _serve(
    broker: Broker,
    data_dir: Path,
    listen: str,
    settings: ServerSettings,
    metrics_listen: str | None,
    guard: Guard,
    kafka: KafkaOptions | None = None,
) -> int:
    loop = asyncio.get_running_loop()
    metrics = Metrics()
    served = ServedStore(broker, settings, guard, metrics)
    try:
        port = served.bind(listen)
        kafka_port = await served.bind_kafka(kafka) if kafka is not None else 0
        if metrics_listen:
            metrics_port = metrics.serve(metrics_listen)
            log.info(
                "metrics on http://%s:%d/metrics", metrics_listen.rpartition(":")[0], metrics_port
            )
    except (CompactlogError, OSError) as exc:
        served.abandon()
        return _fail(str(exc))
    export_cleaner_stats(broker.cleaner.stats, metrics)
    error_listeners.append(lambda method, code: metrics.rpc_errors.labels(method, code).inc())
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if guard.auth is not None:
        loop.add_signal_handler(signal.SIGHUP, guard.reload)
    await served.start()
    heap.settle()
    if kafka is not None:  # before the gRPC line, which says everything is ready
        kafka_host = kafka.listen.rpartition(":")[0]
        print(f"compactlog kafka listening on {kafka_host}:{kafka_port}", flush=True)
    host = listen.rpartition(":")[0]
    print(f"compactlog listening on {host}:{port}", flush=True)
    log.info("serving data dir %s", data_dir.resolve())
    await stop.wait()
    log.info("shutting down")
    await served.stop()
    return 0
