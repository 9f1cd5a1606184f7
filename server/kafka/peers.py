"""The other brokers of a sharded server, as this broker asks them (``serve --shards N``).

A request that spans brokers (``spread``) sends each other broker its share as the same
Kafka request and version, over one loopback connection a peer, its ``client_id`` the
mark ``compactlog-shard/<the front's per-run secret>``: a marked request is answered
from the peer's own stores only, never sent on again. With ``--tls-cert`` the connection speaks
TLS, trusting exactly the server's own certificate; with ``--auth-tokens`` the mark
stands for the login (the client's roles were checked by the broker it reached).
Requests on one connection are answered in order, so a lock a peer keeps one request
in flight on it; a connection that fails is dropped and the next request opens a new one.

A broker's port outlives it (the front holds the socket, so a client waits in the backlog
while a shard restarts), so a connect to a down broker is never refused. Each serving
broker therefore holds a beacon, an abstract Unix socket named from the per-run secret
and its node id, which the kernel removes the moment the process dies. A connection to a
peer starts with a watch on the peer's beacon: refused, the peer is down or not serving
yet, answered at once; accepted, the watch stays open beside the connection and ends
the moment the peer dies, which fails the request in flight at once even when the peer
died between the watch and the connect (whose connect then sat in the front's backlog).
Only a peer that serves and then goes silent (stopped) costs the bounded wait,
``ASK_TIMEOUT_S``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import ssl
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from compactlog.server.kafka.errors import log
from compactlog.server.kafka.protocol import SIZE, encode_request, read_response

T = TypeVar("T")
MARK = "compactlog-shard/"
# a peer that accepted the request but does not answer (stopped): under the clients'
# own request timeouts (librdkafka 30 s for admin calls, kafka-python 30 s), so that
# the other parts of a split request reach the client with the silent part's error
ASK_TIMEOUT_S = 15.0
# how a peer that cannot be reached fails (``Peers.ask``); anything else is a defect
PEER_FAILURES = (OSError, EOFError, TimeoutError)
# what a broken kept connection shows (the peer died since): asked again afresh, once
_BROKEN = (ConnectionError, asyncio.IncompleteReadError)


@dataclass
class _Line:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    watch: asyncio.StreamReader | None = None  # the peer's beacon: EOF when it dies
    watching: asyncio.StreamWriter | None = None


class Peers:
    """Loopback connections to the other brokers: ``addresses`` by node id."""

    def __init__(self, addresses: tuple[tuple[str, int], ...], secret: str) -> None:
        self.addresses = addresses
        self.secret = secret  # never empty from the front; empty: nothing is marked
        self.mark = MARK + secret
        self.tls: ssl.SSLContext | None = None  # the brokers speak TLS (--tls-cert)
        self._lines: dict[int, _Line] = {}
        # each broker's topics' partition counts as its last Metadata answer showed
        # them, by name: while it restarts, Metadata still lists them (``leaderless``)
        self.shown: dict[int, dict[str, int]] = {}
        self._ids = itertools.count(1)
        self._beacon: asyncio.Server | None = None

    def marked(self, client_id: str | None) -> bool:
        """Whether a request comes from another broker of this server."""
        if not self.secret or client_id is None:
            return False
        return hmac.compare_digest(client_id.encode(), self.mark.encode())

    async def ask(self, node: int, api_key: int, request: Any, version: int) -> Any:
        """Broker ``node``'s response to ``request``: ``ConnectionRefusedError`` at once
        when it does not serve (down, restarting), another ``OSError``, ``EOFError`` or
        ``TimeoutError`` when it fails or does not answer in time."""
        line = self._lines.setdefault(node, _Line())
        async with line.lock:
            kept = line.writer is not None
            try:
                return await self._timed(line, node, api_key, request, version)
            except _BROKEN:
                if not kept:
                    raise
            # the kept connection was to a process that has died since: a fresh one
            return await self._timed(line, node, api_key, request, version)

    async def _timed(self, line: _Line, node: int, api_key: int, request: Any, version: int) -> Any:
        try:
            return await asyncio.wait_for(
                self._exchange(line, node, api_key, request, version), ASK_TIMEOUT_S
            )
        except BaseException:
            self._drop(line)
            raise

    async def _exchange(
        self, line: _Line, node: int, api_key: int, request: Any, version: int
    ) -> Any:
        if line.writer is None:
            line.watch, line.watching = await self._watch(node)
            host, port = self.addresses[node]
            line.reader, line.writer = await self._unless_gone(
                line, asyncio.open_connection(host, port, ssl=self.tls)
            )
        assert line.writer is not None
        correlation_id = next(self._ids) & 0x7FFFFFFF
        line.writer.write(encode_request(request, version, correlation_id, self.mark))
        await self._unless_gone(line, line.writer.drain())
        frame = await self._unless_gone(line, _read_frame(line))
        answered, response = read_response(frame, api_key, version)
        if answered != correlation_id:
            raise OSError(f"broker {node} answered request {answered}, not {correlation_id}")
        return response

    async def _unless_gone(self, line: _Line, step: Awaitable[T]) -> T:
        """``step``'s result, or ``ConnectionResetError`` as soon as the peer dies."""
        if line.watch is None:  # no beacons (no front)
            return await step
        done = asyncio.ensure_future(step)
        gone = asyncio.ensure_future(line.watch.read(1))
        try:
            await asyncio.wait((done, gone), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (gone, done):
                if task.done() and not task.cancelled():
                    task.exception()  # seen here (the result below), never logged as lost
                else:
                    task.cancel()
        if done.done() and not done.cancelled():
            return done.result()
        raise ConnectionResetError("stopped serving (down or restarting)")

    def _beacon_name(self, node: int) -> str:
        digest = hashlib.sha256(self.mark.encode()).hexdigest()[:32]
        return f"\0compactlog-kafka/{digest}/{node}"

    async def announce(self, node: int) -> None:
        """Hold this broker's beacon (it serves now) until ``withdraw`` or its death."""
        if not self.secret:  # no front: no peers to tell
            return
        try:
            self._beacon = await asyncio.start_unix_server(_watched, path=self._beacon_name(node))
        except OSError as exc:  # peers then wait ASK_TIMEOUT_S for it while it is down
            log.warning("kafka: broker %d cannot hold its beacon: %s", node, exc)

    def withdraw(self) -> None:
        """Stop saying this broker serves (it is stopping)."""
        if self._beacon is not None:
            self._beacon.close()
            self._beacon = None

    async def _watch(
        self, node: int
    ) -> tuple[asyncio.StreamReader | None, asyncio.StreamWriter | None]:
        """A watch on broker ``node``'s beacon; ``ConnectionRefusedError`` when it does
        not serve."""
        if not self.secret:
            return None, None
        try:
            return await asyncio.open_unix_connection(path=self._beacon_name(node))
        except (ConnectionRefusedError, FileNotFoundError):
            raise ConnectionRefusedError("not serving (down or restarting)") from None

    async def serving(self, node: int) -> bool:
        """Whether broker ``node`` serves now (its beacon is held); True without beacons."""
        try:
            _reader, writer = await self._watch(node)
        except ConnectionRefusedError:
            return False
        if writer is not None:
            writer.close()
        return True

    def _drop(self, line: _Line) -> None:
        for writer in (line.writer, line.watching):
            if writer is not None:
                writer.close()
        line.reader = line.writer = line.watch = line.watching = None

    def trust(self, cert_pem: bytes) -> None:
        """Speak TLS to the other brokers, trusting exactly this server's certificate
        (they all present it; loopback addresses need not be among its names)."""
        tls = ssl.create_default_context(cadata=cert_pem.decode("ascii"))
        tls.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # the leaf itself is the anchor
        tls.check_hostname = False
        self.tls = tls

    def close(self) -> None:
        self.withdraw()
        for line in self._lines.values():
            self._drop(line)


async def _read_frame(line: _Line) -> bytes:
    assert line.reader is not None
    size = SIZE.unpack(await line.reader.readexactly(SIZE.size))[0]
    return await line.reader.readexactly(size)


async def _watched(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A peer's watch on this broker's beacon: held open until the peer drops it (or
    this process dies, which ends it for the peer)."""
    try:
        await reader.read()
    finally:
        writer.close()
