"""The Kafka brokers of ``serve --kafka-listen HOST:P --shards N``: one a shard.

Broker ``k`` (shard ``k``, node id ``k``) listens on ``HOST:P+k`` (each on a free port when
``P`` is 0) and is advertised to clients as ``AHOST:AP+k`` with ``--kafka-advertised
AHOST:AP``, else as its own listen address. The front binds every broker's socket before
it starts the shards and keeps them open for its whole life: a shard, and a shard started
again after a crash, serves the socket it inherits (``pass_fds``), so a broker's address
never changes, port 0 is resolved once, no other process can take a port while its shard
restarts, and a client that connects meanwhile waits in the socket's backlog instead of
being refused. Decisions in docs/kafka.md ("With --shards N").
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass

from compactlog.errors import CompactlogError
from compactlog.server.kafka.options import KafkaOptions, split_address

BACKLOG = 1024  # connections waiting while a shard (re)starts


def _bind(host: str, port: int, broker: int) -> socket.socket:
    try:
        family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family, backlog=BACKLOG)
    except OSError as exc:
        raise CompactlogError(
            f"cannot listen on {host}:{port} (Kafka broker {broker}): {exc.strerror or exc}"
        ) from None


def _join(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass
class KafkaBrokers:
    """The front's sockets of the N brokers and the address each is advertised at."""

    sockets: list[socket.socket]
    advertised: list[tuple[str, int]]

    @classmethod
    def bind(cls, options: KafkaOptions, shards: int) -> KafkaBrokers:
        host, port = split_address(options.listen, "--kafka-listen")
        if port and port + shards - 1 > 65535:
            raise CompactlogError(f"--kafka-listen {options.listen}: {shards} ports past it")
        bound: list[socket.socket] = []
        try:
            for k in range(shards):
                bound.append(_bind(host, port + k if port else 0, k))
        except CompactlogError:
            for sock in bound:
                sock.close()
            raise
        advertised = []
        for k, sock in enumerate(bound):
            if options.advertised is None:
                advertised.append(options.advertised_address(sock.getsockname()[1]))
            else:
                ahost, aport = split_address(options.advertised, "--kafka-advertised")
                advertised.append((ahost, aport + k))
        return cls(bound, advertised)

    @property
    def bootstrap(self) -> str:
        """Broker 0's listen address, the one the user gave (its port resolved)."""
        host, port = self.sockets[0].getsockname()[:2]
        return _join(host, port)

    def describe(self) -> str:
        return ", ".join(
            f"broker {k} on {_join(*sock.getsockname()[:2])} as {_join(*self.advertised[k])}"
            for k, sock in enumerate(self.sockets)
        )

    def loopback(self) -> list[tuple[str, int]]:
        """Where a broker reaches each other broker: its listen address (loopback for
        an unspecified host)."""
        found = []
        for sock in self.sockets:
            host, port = sock.getsockname()[:2]
            wildcard = {"0.0.0.0": "127.0.0.1", "::": "::1"}
            found.append((wildcard.get(host, host), port))
        return found

    def argv(self, shard: int) -> list[str]:
        """The shard's arguments: its inherited socket, every broker's advertised address
        and the address other brokers reach it at."""
        brokers = json.dumps([list(address) for address in self.advertised])
        peers = json.dumps([list(address) for address in self.loopback()])
        fd = str(self.sockets[shard].fileno())
        return ["--kafka-fd", fd, "--kafka-brokers", brokers, "--kafka-peers", peers]

    def fds(self, shard: int) -> tuple[int, ...]:
        return (self.sockets[shard].fileno(),)

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


def parse_brokers(text: str) -> tuple[tuple[str, int], ...]:
    """``--kafka-brokers`` as the shard reads it back."""
    return tuple((str(host), int(port)) for host, port in json.loads(text))
