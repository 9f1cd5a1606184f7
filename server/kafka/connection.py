"""One Kafka client connection: frames in, answers out, in request order.

Each request is read whole (its ``size`` bounded by ``MAX_REQUEST_BYTES``), answered, and
only then is the next one read, as a Kafka broker mutes a connection while one of its
requests is in flight; what happens to one connection never touches another. How each
fault is answered is in docs/kafka.md ("Inside the listener").
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque

from compactlog.server.kafka import access, api_versions, sasl
from compactlog.server.kafka.errors import ErrorCode
from compactlog.server.kafka.fetch_ahead import READ_AHEAD, ReadAhead
from compactlog.server.kafka.protocol import (
    HEAD,
    SIZE,
    BadFrame,
    Frame,
    bare_error,
    encode_frame,
    error_response,
    load_response,
    read_request,
)
from compactlog.server.kafka.spread import handle
from compactlog.server.kafka.topics import KafkaContext

log = logging.getLogger("compactlog.kafka")

MAX_REQUEST_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default
MIN_REQUEST_BYTES = HEAD.size + 2  # api key, version, correlation id, client id length
PRODUCE = 0
MAX_PIPELINED = 64  # produces read ahead of their answers, at most


async def answer(ctx: KafkaContext, frame: bytes, session: sasl.Session | None) -> Frame | None:
    """The response frame to a request frame, in pieces (None: an acks=0 produce).
    ``session``: this connection's SASL login, when the listener requires one."""
    api_key, version, correlation_id = HEAD.unpack_from(frame)
    if session is not None and api_key in sasl.VERSIONS:
        return login(session, frame, api_key, version, correlation_id)
    versions = api_versions.SUPPORTED.get(api_key)
    if versions is None or not versions[0] <= version <= versions[1]:
        return unsupported(api_key, version, correlation_id)
    header, request = read_request(frame, api_key, version)
    forwarded = ctx.peers is not None and ctx.peers.marked(header.client_id)
    # A request another broker of this server sent on carries its mark, not a login:
    # the client's roles were checked by the broker it reached (kafka.peers).
    if session is not None and not forwarded and (refused := session.refused(api_key)):
        code, message = refused
        log.info("kafka: api %d from %s refused: %s", api_key, session.peer, message)
        response = access.refusal(api_key, version, request, code, message)
        return None if response is None else encode_frame(correlation_id, response)
    try:
        response = await handle(ctx, api_key, request, version, forwarded)
    except Exception as exc:
        log.error("kafka: api %d v%d failed", api_key, version, exc_info=exc)
        response = error_response(load_response(api_key, version), ErrorCode.unknown_server_error)
    return None if response is None else encode_frame(correlation_id, response)


def login(
    session: sasl.Session, frame: bytes, api_key: int, version: int, correlation_id: int
) -> Frame:
    """SaslHandshake or SaslAuthenticate, answered by the connection's ``session``."""
    low, high = sasl.VERSIONS[api_key]
    if not low <= version <= high:
        return unsupported(api_key, version, correlation_id)
    _header, request = read_request(frame, api_key, version)
    if api_key == sasl.SASL_HANDSHAKE:
        return encode_frame(correlation_id, session.handshake(request, version))
    return encode_frame(correlation_id, session.authenticate(request, version))


def unsupported(api_key: int, version: int, correlation_id: int) -> Frame:
    log.info("kafka: api %d v%d is not served: answered UNSUPPORTED_VERSION", api_key, version)
    if api_key == api_versions.API_VERSIONS:
        return encode_frame(correlation_id, api_versions.unsupported(version))
    try:
        cls = load_response(api_key, version)
    except Exception:  # an API or version kio does not know either
        return [bare_error(correlation_id)]
    return encode_frame(correlation_id, error_response(cls, ErrorCode.unsupported_version))


class Connection:
    """Serves one client's stream until it closes, sends a bad frame, or the listener
    stops.

    Produce requests are pipelined: each is handed to its logs' writers as it comes and
    the next frame is read while it waits to be durable (librdkafka sends many small
    produces without waiting), so a writer takes several in one group. Answers still go
    out in request order (``_send``); any other request waits until every earlier one is
    answered before it starts, and is answered before the next frame is read."""

    def __init__(
        self, ctx: KafkaContext, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.ctx = ctx
        self.reader = reader
        self.writer = writer
        self.peer = writer.get_extra_info("peername")
        self.session = None if ctx.door is None else sasl.Session(ctx.door, self.peer)
        self._reading = False  # a frame read, its answer not queued yet
        self._answers: deque[asyncio.Future[Frame | None]] = deque()  # in request order
        self._more = asyncio.Event()  # an answer was queued
        self._sent = asyncio.Event()  # every answer queued has been sent
        self.ahead = ReadAhead()  # its Fetch read-ahead, seen by its requests' handlers

    @property
    def busy(self) -> bool:
        """A request is being answered (a stop lets it finish)."""
        return self._reading or bool(self._answers)

    async def serve(self) -> None:
        READ_AHEAD.set(self.ahead)  # this connection's task, and its answers' (copies)
        sender = asyncio.create_task(self._send())
        try:
            while not sender.done():
                frame = await self._read_frame()
                if frame is None:
                    return
                self._reading = True
                pipelined = self._pipelined(frame)
                if not pipelined and self._answers:
                    await asyncio.wait(list(self._answers))
                answer_of = self._answer(frame)
                self._answers.append(answer_of)
                self._reading = False
                self._sent.clear()
                self._more.set()
                if not pipelined or len(self._answers) > MAX_PIPELINED:
                    await asyncio.wait([answer_of])
        except BadFrame as exc:
            log.warning("kafka: closing connection from %s: %s", self.peer, exc)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away
        finally:
            self._reading = False
            await self._close(sender)

    def _pipelined(self, frame: bytes) -> bool:
        if self.session is not None and self.session.raw:
            return False  # raw SASL bytes: no request header
        return bool(HEAD.unpack_from(frame)[0] == PRODUCE)

    def _answer(self, frame: bytes) -> asyncio.Future[Frame | None]:
        if self.session is not None and self.session.raw:
            done: asyncio.Future[Frame | None] = asyncio.get_running_loop().create_future()
            done.set_result(self._raw_login(self.session, frame))  # BadFrame: closed
            return done
        return asyncio.ensure_future(answer(self.ctx, frame, self.session))

    async def _send(self) -> None:
        """Answers, in request order, as each is ready; a bad frame ends the connection."""
        while True:
            if not self._answers:
                self._sent.set()
                self._more.clear()
                await self._more.wait()
                continue
            try:
                response = await self._answers[0]
                if response is not None:
                    self._write(response)
                    await self.writer.drain()
                    self.ahead.sent()  # a Fetch's read-ahead starts once its answer is out
            except BadFrame as exc:
                log.warning("kafka: closing connection from %s: %s", self.peer, exc)
                self.writer.close()
                return
            except ConnectionError:
                return  # the client went away
            finally:
                self._answers.popleft()

    async def _close(self, sender: asyncio.Task[None]) -> None:
        """Send the answers of what was read (unless the client went away), then close."""
        try:
            if self._answers and not sender.done():
                sent = asyncio.ensure_future(self._sent.wait())
                await asyncio.wait([sent, sender], return_when=asyncio.FIRST_COMPLETED)
                sent.cancel()
        finally:
            sender.cancel()
            for pending in self._answers:
                pending.cancel()
            self.ahead.close()
            self.writer.close()

    def _write(self, frame: Frame) -> None:
        """A frame's pieces, each handed to the transport as it is: a Fetch's records
        are not joined to the rest, and as views the transport copies only what the
        socket does not take at once (a ``bytes`` it would slice, a copy, then copy)."""
        for piece in frame:
            self.writer.write(memoryview(piece))

    def _raw_login(self, session: sasl.Session, auth: bytes) -> Frame:
        """After a v0 SaslHandshake: an empty frame when the raw bytes log in; else the
        connection is closed (Kafka's v0 answer to a failed login)."""
        try:
            session.raw_login(auth)
        except sasl.LoginFailed as exc:
            raise BadFrame(f"SASL login failed: {exc}") from None
        return [SIZE.pack(0)]

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
