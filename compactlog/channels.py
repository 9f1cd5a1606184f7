"""Opening a gRPC channel to a compactlog server, with its token and TLS trust.

Every caller over the wire — the client library, the CLI, the Spark engine's driver and
executors — opens its channels here, so a server started with ``--auth-tokens`` and
``--tls-cert`` is reached the same way from all of them (CONTRACT section 10).

``ChannelSecurity`` holds the bearer token and the CA certificates (PEM bytes, read once
from the file, so the value pickles to Spark executors that may not see the file). The
token travels as ``authorization: Bearer <token>`` metadata on every call through a
client interceptor: gRPC's own call credentials refuse plaintext channels, and a token
on a loopback server without TLS is a configuration the server allows.
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import grpc

from compactlog.errors import InvalidArgument

ChannelOptions = Sequence[tuple[str, Any]]


@dataclass(frozen=True)
class ChannelSecurity:
    """A bearer token (or None) and the CA certificates to trust (None: no TLS)."""

    token: str | None = None
    ca_pem: bytes | None = None

    def __repr__(self) -> str:  # never print the token
        token = "set" if self.token else "none"
        return f"ChannelSecurity(token={token}, tls={self.ca_pem is not None})"

    @classmethod
    def of(
        cls, token: str | None = None, tls_ca: str | os.PathLike[str] | None = None
    ) -> ChannelSecurity:
        """From a token and a CA file path; ``InvalidArgument`` naming the file if unusable.
        The token is stripped (a token file's trailing newline is no part of it)."""
        return cls((token or "").strip() or None, read_ca(tls_ca) if tls_ca else None)


def open_aio_channel(
    address: str, security: ChannelSecurity | None = None, options: ChannelOptions = ()
) -> grpc.aio.Channel:
    """An asyncio channel to ``address``, TLS when the security has a CA. The token does
    not ride on it: asyncio callers pass ``bearer_metadata(security)`` with each call."""
    security = security or ChannelSecurity()
    if security.ca_pem is not None:
        creds = grpc.ssl_channel_credentials(root_certificates=security.ca_pem)
        return grpc.aio.secure_channel(address, creds, options=list(options))
    return grpc.aio.insecure_channel(address, options=list(options))


def bearer_metadata(security: ChannelSecurity | None) -> tuple[tuple[str, str], ...]:
    """The call metadata that carries the token (empty without one)."""
    if security is None or not security.token:
        return ()
    return (("authorization", f"Bearer {security.token}"),)


def read_ca(path: str | os.PathLike[str]) -> bytes:
    """The PEM certificates of ``path``, checked to be loadable as trust anchors."""
    try:
        with open(path, "rb") as handle:
            pem = handle.read()
    except OSError as exc:
        raise InvalidArgument(f"TLS CA file {os.fspath(path)}: {exc.strerror or exc}") from None
    try:
        ssl.create_default_context(cadata=pem.decode("ascii"))
    except (ssl.SSLError, ValueError, UnicodeDecodeError):
        raise InvalidArgument(
            f"TLS CA file {os.fspath(path)}: not a PEM certificate (-----BEGIN CERTIFICATE-----)"
        ) from None
    return pem


def open_channel(
    address: str, security: ChannelSecurity | None = None, options: ChannelOptions = ()
) -> grpc.Channel:
    """A channel to ``address``: TLS when the security has a CA, the token on every call."""
    security = security or ChannelSecurity()
    if security.ca_pem is not None:
        creds = grpc.ssl_channel_credentials(root_certificates=security.ca_pem)
        channel = grpc.secure_channel(address, creds, options=list(options))
    else:
        channel = grpc.insecure_channel(address, options=list(options))
    if security.token:
        return grpc.intercept_channel(channel, BearerToken(security.token))
    return channel


class _CallDetails(NamedTuple):
    method: str
    timeout: float | None
    metadata: tuple[tuple[str, str | bytes], ...] | None
    credentials: grpc.CallCredentials | None
    wait_for_ready: bool | None
    compression: grpc.Compression | None


class _Details(_CallDetails, grpc.ClientCallDetails):
    """grpc.ClientCallDetails is an empty interface; this is a concrete one."""


class BearerToken(
    grpc.UnaryUnaryClientInterceptor,  # type: ignore[type-arg]
    grpc.UnaryStreamClientInterceptor,  # type: ignore[type-arg]
    grpc.StreamUnaryClientInterceptor,  # type: ignore[type-arg]
    grpc.StreamStreamClientInterceptor,  # type: ignore[type-arg]
):
    """Adds ``authorization: Bearer <token>`` to the metadata of every call."""

    def __init__(self, token: str) -> None:
        self._entry = ("authorization", f"Bearer {token}")

    def _with_token(self, details: Any) -> _Details:
        metadata = (*(details.metadata or ()), self._entry)
        return _Details(
            details.method,
            details.timeout,
            metadata,
            details.credentials,
            getattr(details, "wait_for_ready", None),
            getattr(details, "compression", None),
        )

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return continuation(self._with_token(details), request)

    def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return continuation(self._with_token(details), request)

    def intercept_stream_unary(
        self, continuation: Callable[..., Any], details: Any, requests: Any
    ) -> Any:
        return continuation(self._with_token(details), requests)

    def intercept_stream_stream(
        self, continuation: Callable[..., Any], details: Any, requests: Any
    ) -> Any:
        return continuation(self._with_token(details), requests)


# Calls that change nothing, so a call that never reached a server (UNAVAILABLE) may be
# sent again: gRPC's own retry, configured by the service config below, not a loop of
# ours. A Read is retried only before its first response (gRPC's rule for streams).
IDEMPOTENT_CALLS: dict[str, tuple[str, ...]] = {
    "compactlog.v1.TopicAdmin": (
        "GetTopic",
        "ListTopics",
        "GetCompactionStatus",
        "WatchCompaction",
        "PreviewCompaction",
        "VerifyCompaction",
        "ListSubscriptions",
        "GetPartitionMap",
    ),
    "compactlog.v1.Log": ("Read", "GetLastMessageId", "GetKeyHistory"),
}


def retry_service_config(max_attempts: int = 4) -> str:
    """The ``grpc.service_config`` (JSON) that retries idempotent calls on UNAVAILABLE:
    up to ``max_attempts`` tries, 0.1 s backoff doubling to 2 s. Deadlines stay the
    caller's (each call's ``timeout``), and cover the retries too."""
    names = [
        {"service": service, "method": method}
        for service, methods in IDEMPOTENT_CALLS.items()
        for method in methods
    ]
    policy = {
        "maxAttempts": max_attempts,
        "initialBackoff": "0.1s",
        "maxBackoff": "2s",
        "backoffMultiplier": 2,
        "retryableStatusCodes": ["UNAVAILABLE"],
    }
    return json.dumps({"methodConfig": [{"name": names, "retryPolicy": policy}]})


def client_channel_options() -> list[tuple[str, object]]:
    """The client's channel options (sync and asyncio alike): read responses bounded by
    the server, not the client; idempotent calls retried (``retry_service_config``); and
    a lost server tried again every 0.1 s doubling to 2 s (gRPC's own reconnect backoff
    grows to 2 minutes), so a consumer waiting out a restart sees it back within 2 s, as
    pulsar-client's reconnect does. The connect timeout (``min_reconnect_backoff_ms``)
    stays gRPC's 20 s: a slow handshake is not a lost server."""
    return [
        ("grpc.max_receive_message_length", -1),
        ("grpc.max_send_message_length", -1),
        ("grpc.enable_retries", 1),
        ("grpc.service_config", retry_service_config()),
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 2000),
    ]
