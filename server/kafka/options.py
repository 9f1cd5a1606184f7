"""``serve --kafka-listen`` / ``--kafka-advertised``: the options and their address check.

Kept apart from the listener so that a server started without ``--kafka-listen`` never
imports the Kafka protocol's types (``kio`` and what it pulls in cost about 0.6 s of
every start-up).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from compactlog.errors import CompactlogError

__all__ = ["KafkaOptions", "split_address"]


@dataclass(frozen=True)
class KafkaOptions:
    """``serve --kafka-listen HOST:PORT [--kafka-advertised HOST:PORT]``."""

    listen: str
    advertised: str | None = None  # None: the listen address (its host name for 0.0.0.0)

    def advertised_address(self, port: int) -> tuple[str, int]:
        """Where Metadata sends clients: ``--kafka-advertised``, else the bound address."""
        if self.advertised is not None:
            return split_address(self.advertised, "--kafka-advertised")
        host = split_address(self.listen, "--kafka-listen")[0]
        return (socket.getfqdn() if host in ("0.0.0.0", "::", "") else host), port


def split_address(address: str, option: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too) as ``(host, port)``; one line when it is not."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise CompactlogError(f"{option} {address!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)
