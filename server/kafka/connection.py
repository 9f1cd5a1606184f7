"""One Kafka client connection: frames in, answers out, in request order.

Each request is read whole (its ``size`` bounded by ``MAX_REQUEST_BYTES``), answered, and
only then is the next one read, as a Kafka broker mutes a connection while one of its
requests is in flight; what happens to one connection never touches another. How each
fault is answered is in docs/kafka.md ("Inside the listener").
"""

from __future__ import annotations

import asyncio
import logging

from compactlog.server.kafka import access, api_versions, sasl
from compactlog.server.kafka.errors import ErrorCode
from compactlog.server.kafka.handlers import HANDLERS
from compactlog.server.kafka.protocol import (
    HEAD,
    SIZE,
    BadFrame,
    bare_error,
    encode,
    error_response,
    load_response,
    read_request,
)
from compactlog.server.kafka.topics import KafkaContext

log = logging.getLogger("compactlog.kafka")

MAX_REQUEST_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default
MIN_REQUEST_BYTES = HEAD.size + 2  # api key, version, correlation id, client id length


async def answer(ctx: KafkaContext, frame: bytes, session: sasl.Session | None) -> bytes | None:
    """The response frame to a request frame (None: an acks=0 produce). ``session``:
    this connection's SASL login, when the listener requires one."""
    api_key, version, correlation_id = HEAD.unpack_from(frame)
    if session is not None and api_key in sasl.VERSIONS:
        return login(session, frame, api_key, version, correlation_id)
    versions = api_versions.SUPPORTED.get(api_key)
    if versions is None or not versions[0] <= version <= versions[1]:
        return unsupported(api_key, version, correlation_id)
    request = read_request(frame, api_key, version)
    if session is not None and (refused := session.refused(api_key)) is not None:
        code, message = refused
        log.info("kafka: api %d from %s refused: %s", api_key, session.peer, message)
        response = access.refusal(api_key, version, request, code, message)
        return None if response is None else encode(correlation_id, response)
    try:
        response = await HANDLERS[api_key](ctx, request, version)
    except Exception as exc:
        log.error("kafka: api %d v%d failed", api_key, version, exc_info=exc)
        response = error_response(load_response(api_key, version), ErrorCode.unknown_server_error)
    return None if response is None else encode(correlation_id, response)


def login(
    session: sasl.Session, frame: bytes, api_key: int, version: int, correlation_id: int
) -> bytes:
    """SaslHandshake or SaslAuthenticate, answered by the connection's ``session``."""
    low, high = sasl.VERSIONS[api_key]
    if not low <= version <= high:
        return unsupported(api_key, version, correlation_id)
    request = read_request(frame, api_key, version)
    if api_key == sasl.SASL_HANDSHAKE:
        return encode(correlation_id, session.handshake(request, version))
    return encode(correlation_id, session.authenticate(request, version))


def unsupported(api_key: int, version: int, correlation_id: int) -> bytes:
    log.info("kafka: api %d v%d is not served: answered UNSUPPORTED_VERSION", api_key, version)
    if api_key == api_versions.API_VERSIONS:
        return encode(correlation_id, api_versions.unsupported(version))
    try:
        cls = load_response(api_key, version)
    except Exception:  # an API or version kio does not know either
        return bare_error(correlation_id)
    return encode(correlation_id, error_response(cls, ErrorCode.unsupported_version))


class Connection:
    """Serves one client's stream until it closes, sends a bad frame, or the listener
    stops."""

    def __init__(
        self, ctx: KafkaContext, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.ctx = ctx
        self.reader = reader
        self.writer = writer
        self.peer = writer.get_extra_info("peername")
        self.busy = False  # a request is being answered (a stop lets it finish)
        self.session = None if ctx.door is None else sasl.Session(ctx.door, self.peer)

    async def serve(self) -> None:
        try:
            while True:
                frame = await self._read_frame()
                if frame is None:
                    return
                self.busy = True
                response: bytes | None
                if self.session is not None and self.session.raw:
                    response = self._raw_login(self.session, frame)
                else:
                    response = await answer(self.ctx, frame, self.session)
                if response is not None:
                    self.writer.write(response)
                    await self.writer.drain()
                self.busy = False
        except BadFrame as exc:
            log.warning("kafka: closing connection from %s: %s", self.peer, exc)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away
        finally:
            self.writer.close()

    def _raw_login(self, session: sasl.Session, auth: bytes) -> bytes:
        """After a v0 SaslHandshake: an empty frame when the raw bytes log in; else the
        connection is closed (Kafka's v0 answer to a failed login)."""
        try:
            session.raw_login(auth)
        except sasl.LoginFailed as exc:
            raise BadFrame(f"SASL login failed: {exc}") from None
        return SIZE.pack(0)

    async def _read_frame(self) -> bytes | None:
        try:
            head = await self.reader.readexactly(SIZE.size)
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise BadFrame("connection closed inside a size field") from None
            return None  # a clean close between requests
        (size,) = SIZE.unpack(head)
        raw = self.session is not None and self.session.raw  # SASL bytes, no header
        if not (1 if raw else MIN_REQUEST_BYTES) <= size <= MAX_REQUEST_BYTES:
            raise BadFrame(
                f"request size {size} outside {MIN_REQUEST_BYTES}..{MAX_REQUEST_BYTES} bytes"
            )
        return await self.reader.readexactly(size)
