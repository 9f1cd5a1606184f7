"""SASL on the Kafka listener: PLAIN and OAUTHBEARER over the ``--auth-tokens`` principals.

With ``--auth-tokens`` a connection logs in before any request but ApiVersions:
SaslHandshake (17) names the mechanism, SaslAuthenticate (36) carries its bytes. PLAIN is
``authzid NUL username NUL password`` (the principal's name and its token); OAUTHBEARER is
RFC 7628's client response, ``n,,^Aauth=Bearer <token>^A^A``. The token is kept for the
connection's life and checked again on every request (``access``), so a SIGHUP that drops
it ends what the connection may do at once, as it does for gRPC calls. The ``Door`` is the
security room's check, handed in by the wiring: this room does not import that room.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

from compactlog.errors import CompactlogError, Unauthenticated
from compactlog.server.kafka import access
from compactlog.server.kafka.errors import ErrorCode
from compactlog.server.kafka.protocol import make, response_module

log = logging.getLogger("compactlog.kafka")

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
# Advertised in ApiVersions only when the listener requires SASL. After a v0 handshake
# the client sends its SASL bytes raw (a size, then the bytes: no request header), and a
# v0 login that fails closes the connection, as Kafka's brokers do; librdkafka before 2.x
# needs v0 listed to try SASL at all, though it then speaks v1 (SaslAuthenticate).
VERSIONS: dict[int, tuple[int, int]] = {SASL_HANDSHAKE: (0, 1), SASL_AUTHENTICATE: (0, 2)}
MECHANISMS = ("PLAIN", "OAUTHBEARER")


class Door(Protocol):
    """What the listener asks of ``--auth-tokens`` (``server.security.auth``)."""

    def principal_name(self, token: str) -> str | None: ...

    def check_call(self, call: str, token: str | None) -> CompactlogError | None: ...


class LoginFailed(Exception):
    """SaslAuthenticate's bytes do not log anyone in; the message says why."""


def plain_login(auth: bytes) -> tuple[str, str]:
    """PLAIN's ``(username, password)`` (RFC 4616)."""
    parts = auth.split(b"\0")
    if len(parts) != 3:
        raise LoginFailed("PLAIN: expected authzid NUL username NUL password")
    try:
        authzid, user, password = (p.decode() for p in parts)
    except UnicodeDecodeError:
        raise LoginFailed("PLAIN: the username and password must be UTF-8") from None
    if authzid and authzid != user:
        raise LoginFailed("PLAIN: an authorization id other than the username is not served")
    return user, password


def oauthbearer_token(auth: bytes) -> str:
    """The bearer token of OAUTHBEARER's client response (RFC 7628 section 3.1)."""
    try:
        text = auth.decode()
    except UnicodeDecodeError:
        raise LoginFailed("OAUTHBEARER: the client response must be UTF-8") from None
    gs2, _, pairs = text.partition("\x01")
    if not gs2.startswith(("n,", "y,")):
        raise LoginFailed("OAUTHBEARER: the client response has no GS2 header")
    for pair in pairs.split("\x01"):
        key, _, value = pair.partition("=")
        if key == "auth":
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    raise LoginFailed("OAUTHBEARER: no 'auth=Bearer <token>' in the client response")


@dataclass
class Session:
    """One connection's login: the mechanism its handshake chose, then its token."""

    door: Door
    peer: Any = None
    mechanism: str | None = None
    token: str | None = None  # set once SaslAuthenticate succeeded
    raw: bool = False  # a v0 handshake: the next frame is the raw SASL bytes

    def refused(self, api_key: int) -> tuple[ErrorCode, str] | None:
        """Why this connection may not send ``api_key`` now (None: it may)."""
        if api_key in access.OPEN:
            return None
        if self.token is None:
            return ErrorCode.sasl_authentication_failed, "log in first: SASL PLAIN or OAUTHBEARER"
        call, code = access.call_of(api_key)
        error = self.door.check_call(call, self.token)
        if error is None:
            return None
        if isinstance(error, Unauthenticated):  # the token was dropped by a reload
            return ErrorCode.sasl_authentication_failed, str(error)
        return code, str(error)

    def handshake(self, request: Any, version: int) -> Any:
        module = response_module(SASL_HANDSHAKE, version)
        code = ErrorCode.none
        if request.mechanism in MECHANISMS:
            self.mechanism = request.mechanism  # a new handshake starts a new login
            self.token = None
            self.raw = version == 0
        else:
            log.info("kafka: %s asked for SASL mechanism %r", self.peer, request.mechanism)
            code = ErrorCode.unsupported_sasl_mechanism
        return make(module.SaslHandshakeResponse, error_code=code, mechanisms=MECHANISMS)

    def authenticate(self, request: Any, version: int) -> Any:
        module = response_module(SASL_AUTHENTICATE, version)
        code, message = ErrorCode.none, None
        if self.mechanism is None:
            code, message = ErrorCode.illegal_sasl_state, "send SaslHandshake first"
        else:
            try:
                name = self._login(self.mechanism, request.auth_bytes)
                log.debug("kafka: %s logged in as %r (%s)", self.peer, name, self.mechanism)
            except LoginFailed as exc:
                log.debug("kafka: SASL login from %s failed: %s", self.peer, exc)  # as gRPC
                code, message = ErrorCode.sasl_authentication_failed, str(exc)
        self.mechanism = None  # one SaslAuthenticate a handshake
        return make(
            module.SaslAuthenticateResponse, error_code=code, error_message=message, auth_bytes=b""
        )

    def raw_login(self, auth: bytes) -> None:
        """The raw SASL bytes after a v0 handshake; ``LoginFailed`` when they fail."""
        assert self.mechanism is not None
        mechanism, self.mechanism, self.raw = self.mechanism, None, False
        name = self._login(mechanism, auth)
        log.debug("kafka: %s logged in as %r (%s, raw)", self.peer, name, mechanism)

    def _login(self, mechanism: str, auth: bytes) -> str:
        if mechanism == "PLAIN":
            user, token = plain_login(auth)
            name = self.door.principal_name(token)
            if name is None or name != user:
                raise LoginFailed(f"PLAIN: wrong username or token for {user!r}")
        else:
            token = oauthbearer_token(auth)
            found = self.door.principal_name(token)
            if found is None:
                raise LoginFailed("OAUTHBEARER: the token is not valid on this server")
            name = found
        self.token = token
        return name
