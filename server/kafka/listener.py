"""The Kafka listener: an asyncio server on the gRPC server's event loop.

``KafkaListener.bind`` checks and binds the address (port 0 picks one) before the server
says it is ready; ``start`` serves once every API version's ``kio`` types are loaded
(``preload_schemas``, on a thread since start-up began), so no client's first request
pays for loading them; ``stop`` stops accepting, ends waiting fetches (the topic signals are
stopped by the caller first), lets answers under way finish for a grace period, then
closes what is left.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import socket
import ssl
import time

from compactlog.errors import CompactlogError
from compactlog.server.kafka import sasl
from compactlog.server.kafka.api_versions import API_VERSIONS, SUPPORTED
from compactlog.server.kafka.connection import Connection
from compactlog.server.kafka.options import split_address
from compactlog.server.kafka.protocol import start_preload
from compactlog.server.kafka.topics import KafkaContext

log = logging.getLogger("compactlog.kafka")

TLS_HANDSHAKE_S = 10.0  # a client that opens the port and never finishes TLS is dropped


def preload_schemas() -> concurrent.futures.Future[int]:
    """Start loading (once a process) the types a client's first requests need: every
    ApiVersions version (a client's first request, at its own version), the highest
    version of every other API served, SASL's included (what librdkafka and aiokafka
    negotiate), and the versions the librdkafka releases below send (``first_versions``);
    the future of how many versions were loaded. All 133 versions would cost seconds of
    start-up for versions few clients ask for."""
    return start_preload(first_versions())


# The versions below our highest that current librdkafka (2.16, its debug=protocol log)
# sends for these APIs: FindCoordinator, JoinGroup, Heartbeat, LeaveGroup, SyncGroup,
# CreateTopics.
LIBRDKAFKA_FIRST = {10: 2, 11: 5, 12: 3, 13: 1, 14: 3, 19: 4}
# The versions Debian's kcat 1.7 (librdkafka 2.0) sends (its debug=protocol log): Produce,
# Fetch, ListOffsets, Metadata; loaded too, so a kcat read on a fresh server does not
# import them on its ListOffsets and first Fetch (2-4 ms each on the 2-core VM).
KCAT_FIRST = {0: 7, 1: 11, 2: 2, 3: 4}


def first_versions() -> dict[int, set[int]]:
    """API key -> the versions loaded ahead: the highest of each API served, down to what
    librdkafka sends where it sends less, kcat's, and every ApiVersions version."""
    served = {**SUPPORTED, **sasl.VERSIONS}
    loaded = {}
    for key, (low, high) in served.items():
        versions = set(range(max(low, min(LIBRDKAFKA_FIRST.get(key, high), high)), high + 1))
        kcat = KCAT_FIRST.get(key, high)
        loaded[key] = versions | ({kcat} if low <= kcat <= high else set())
    low, high = SUPPORTED[API_VERSIONS]
    return {**loaded, API_VERSIONS: set(range(low, high + 1))}


class KafkaListener:
    def __init__(self, ctx: KafkaContext) -> None:
        self.ctx = ctx
        self.server: asyncio.Server | None = None
        self.port = 0
        self._open: dict[asyncio.Task[None], Connection] = {}
        self._stopping = False

    async def bind(self, listen: str, tls: ssl.SSLContext | None = None) -> int:
        """Listen on ``listen`` (with ``tls``: SSL, or SASL_SSL when the context has a
        door); the bound port. ``CompactlogError`` when it cannot."""
        host, port = split_address(listen, "--kafka-listen")
        try:
            self.server = await asyncio.start_server(
                self._accept,
                host,
                port,
                reuse_address=True,
                start_serving=False,
                ssl=tls,
                ssl_handshake_timeout=None if tls is None else TLS_HANDSHAKE_S,
            )
        except OSError as exc:
            raise CompactlogError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
        self.port = self.server.sockets[0].getsockname()[1]
        return self.port

    async def adopt(self, sock: socket.socket, tls: ssl.SSLContext | None = None) -> int:
        """Serve ``sock``, a socket bound and listening already (a shard's, bound by the
        front); its port."""
        self.server = await asyncio.start_server(
            self._accept,
            sock=sock,
            start_serving=False,
            ssl=tls,
            ssl_handshake_timeout=None if tls is None else TLS_HANDSHAKE_S,
        )
        self.port = sock.getsockname()[1]
        return self.port

    async def start(self) -> None:
        assert self.server is not None, "bind first"
        began = time.monotonic()
        versions = await asyncio.wrap_future(preload_schemas())
        log.debug(
            "kafka: %d API versions loaded (waited %.3f s)", versions, time.monotonic() - began
        )
        await self.server.start_serving()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._open[task] = Connection(self.ctx, reader, writer)
        try:
            await self._open[task].serve()
        except asyncio.CancelledError:
            # ``stop`` ended the connection; asyncio's stream callback would log a
            # cancelled handler task as an error in every shutdown's log.
            if not self._stopping:
                raise
        finally:
            del self._open[task]

    async def stop(self, grace_s: float) -> None:
        if self.server is None:
            return
        self._stopping = True
        self.server.close()
        self.ctx.groups.stop()  # waiting joins and syncs answer NOT_COORDINATOR
        for task, connection in list(self._open.items()):
            if not connection.busy:  # waiting for a next request that will not be read
                task.cancel()
        if self._open:
            _done, pending = await asyncio.wait(set(self._open), timeout=grace_s)
            for task in pending:
                task.cancel()
        await self.server.wait_closed()
