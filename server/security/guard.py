"""The listening port's guard: tokens, TLS, and the refusal to expose an open server.

``Guard.open`` checks the ``SecurityOptions`` that ``compactlog serve`` was given before the
server touches its data dir, so every fault is one start-up line naming its file; it builds
the ``AuthInterceptor`` and the TLS credentials. ``Guard.add_port`` binds with TLS or
without, ``Guard.reload`` re-reads the tokens file on SIGHUP. What each check refuses, and
why, is in docs/security.md ("How the server enforces it").
"""

from __future__ import annotations

import ipaddress
import logging
import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc

from compactlog.errors import CompactlogError, InvalidConfig
from compactlog.server.security.auth import AuthInterceptor
from compactlog.server.security.principals import Principals

log = logging.getLogger("compactlog.auth")


@dataclass(frozen=True)
class SecurityOptions:
    auth_tokens: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    insecure: bool = False


def is_loopback(listen: str) -> bool:
    """Whether ``HOST:PORT`` listens on loopback only (an empty host is every interface)."""
    host = listen.rpartition(":")[0].strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost: it may be any interface


def check_exposure(listen: str, options: SecurityOptions) -> None:
    """Refuse an open server beyond loopback; a malformed address is left to the bind check."""
    _host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        return
    if options.auth_tokens is None and not options.insecure and not is_loopback(listen):
        raise CompactlogError(
            f"refusing to listen on {listen} without --auth-tokens: anyone who can reach it "
            "could read, write and delete every topic (give --auth-tokens FILE, or --insecure "
            "if the network itself is trusted)"
        )


def load_tls(cert: Path, key: Path) -> grpc.ServerCredentials:
    """gRPC server credentials from PEM files, checked to be a certificate and its key."""
    pems: list[bytes] = []
    for what, path, marker in (
        ("certificate", cert, b"-----BEGIN CERTIFICATE-----"),
        ("private key", key, b"PRIVATE KEY-----"),
    ):
        try:
            pem = path.read_bytes()
        except OSError as exc:
            raise InvalidConfig(f"TLS {what} file {path}: {exc.strerror or exc}") from None
        if marker not in pem:
            raise InvalidConfig(f"TLS {what} file {path}: no PEM {what} in it")
        pems.append(pem)
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        reason = _TLS_REASONS.get(exc.reason or "", "the PEM data cannot be parsed")
        raise InvalidConfig(
            f"TLS certificate {cert} and key {key} are not a usable pair: {reason}"
        ) from None
    return grpc.ssl_server_credentials([(pems[1], pems[0])])


_TLS_REASONS = {
    "KEY_VALUES_MISMATCH": "the key does not belong to the certificate",
    "EE_KEY_TOO_SMALL": "the key is too small",
    "CA_MD_TOO_WEAK": "the certificate's signature digest is too weak",
}


class Guard:
    """What ``SecurityOptions`` amount to once loaded: interceptors and port credentials."""

    def __init__(
        self,
        options: SecurityOptions,
        auth: AuthInterceptor | None,
        tls: grpc.ServerCredentials | None,
    ) -> None:
        self.options = options
        self.auth = auth
        self.tls = tls

    @classmethod
    def plain(cls) -> Guard:
        """No tokens, no TLS: what a loopback server without options gets."""
        return cls(SecurityOptions(), None, None)

    @classmethod
    def open(cls, options: SecurityOptions, listen: str) -> Guard:
        """Check and load everything; ``CompactlogError`` (one line) on the first fault."""
        if (options.tls_cert is None) != (options.tls_key is None):
            raise CompactlogError("--tls-cert and --tls-key go together: give both or neither")
        check_exposure(listen, options)
        auth = None
        if options.auth_tokens is not None:
            principals = Principals.load(options.auth_tokens)
            auth = AuthInterceptor(principals)
            log.info("auth tokens from %s: %d principals", options.auth_tokens, len(principals))
        tls = None
        if options.tls_cert is not None and options.tls_key is not None:
            tls = load_tls(options.tls_cert, options.tls_key)
        return cls(options, auth, tls)

    def interceptors(self) -> list[grpc.aio.ServerInterceptor]:
        return [self.auth] if self.auth is not None else []

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server side of TLS for a door that is not gRPC (the Kafka listener): the
        same certificate and key, TLS 1.2 or later; None without ``--tls-cert``."""
        cert, key = self.options.tls_cert, self.options.tls_key
        if self.tls is None or cert is None or key is None:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(cert, key)
        return context

    def add_port(self, server: grpc.aio.Server, listen: str) -> int:
        """Bind ``listen`` with TLS when configured; 0 when the address cannot be bound."""
        if self.tls is not None:
            return server.add_secure_port(listen, self.tls)
        return server.add_insecure_port(listen)

    def reload(self) -> None:
        """Re-read the tokens file (SIGHUP); a bad file keeps the principals in force."""
        path = self.options.auth_tokens
        if self.auth is None or path is None:
            log.info("SIGHUP: no --auth-tokens file to reload")
            return
        try:
            principals = Principals.load(path)
        except CompactlogError as exc:
            kept = len(self.auth.principals)
            log.error("auth tokens not reloaded, keeping the %d principals in force: %s", kept, exc)
            return
        self.auth.principals = principals
        log.info("auth tokens reloaded from %s: %d principals", path, len(principals))
