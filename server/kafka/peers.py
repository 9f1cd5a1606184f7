"""The other brokers of a sharded server, as this broker asks them (``serve --shards N``).

A request that spans brokers (``spread``) sends each other broker its share as the same
Kafka request and version, over one loopback connection a peer, its ``client_id`` the
mark ``compactlog-shard/<the front's per-run secret>``: a marked request is answered
from the peer's own stores only, never sent on again. With ``--tls-cert`` the connection speaks
TLS, trusting exactly the server's own certificate; with ``--auth-tokens`` the mark
stands for the login (the client's roles were checked by the broker it reached).
Requests on one connection are answered in order, so a lock a peer keeps one request
in flight on it; a connection that fails is dropped and the next request opens a new one.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import ssl
from dataclasses import dataclass, field
from typing import Any

from compactlog.server.kafka.protocol import SIZE, encode_request, read_response

MARK = "compactlog-shard/"
ASK_TIMEOUT_S = 30.0


@dataclass
class _Line:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None


class Peers:
    """Loopback connections to the other brokers: ``addresses`` by node id."""

    def __init__(self, addresses: tuple[tuple[str, int], ...], secret: str) -> None:
        self.addresses = addresses
        self.secret = secret  # never empty from the front; empty: nothing is marked
        self.mark = MARK + secret
        self.tls: ssl.SSLContext | None = None  # the brokers speak TLS (--tls-cert)
        self._lines: dict[int, _Line] = {}
        # each broker's topics as its last Metadata answer showed them, by name: while
        # it restarts, Metadata still lists them (leaderless) so clients wait and retry
        self.shown: dict[int, dict[str, Any]] = {}
        self._ids = itertools.count(1)

    def marked(self, client_id: str | None) -> bool:
        """Whether a request comes from another broker of this server."""
        if not self.secret or client_id is None:
            return False
        return hmac.compare_digest(client_id.encode(), self.mark.encode())

    async def ask(self, node: int, api_key: int, request: Any, version: int) -> Any:
        """Broker ``node``'s response to ``request`` (``OSError`` or ``TimeoutError``
        when it cannot be reached or does not answer in time)."""
        line = self._lines.setdefault(node, _Line())
        async with line.lock:
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
            host, port = self.addresses[node]
            line.reader, line.writer = await asyncio.open_connection(host, port, ssl=self.tls)
        assert line.reader is not None
        correlation_id = next(self._ids) & 0x7FFFFFFF
        line.writer.write(encode_request(request, version, correlation_id, self.mark))
        await line.writer.drain()
        size = SIZE.unpack(await line.reader.readexactly(SIZE.size))[0]
        answered, response = read_response(await line.reader.readexactly(size), api_key, version)
        if answered != correlation_id:
            raise OSError(f"broker {node} answered request {answered}, not {correlation_id}")
        return response

    def _drop(self, line: _Line) -> None:
        if line.writer is not None:
            line.writer.close()
        line.reader = line.writer = None

    def trust(self, cert_pem: bytes) -> None:
        """Speak TLS to the other brokers, trusting exactly this server's certificate
        (they all present it; loopback addresses need not be among its names)."""
        tls = ssl.create_default_context(cadata=cert_pem.decode("ascii"))
        tls.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # the leaf itself is the anchor
        tls.check_hostname = False
        self.tls = tls

    def close(self) -> None:
        for line in self._lines.values():
            self._drop(line)
