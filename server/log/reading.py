"""The one read path: Read, Consume and follow over a ``TopicLog``, either kind.

Responses are the stored batches' payloads spliced together (``storage.read_range``):
a batch's payload is already the wire encoding of ``ReadResponse.messages`` (and of
``ConsumeResponse.messages``), so no message is decoded or re-encoded;
``read.batch.max.messages`` and 4 MiB (or the client's smaller ``max_bytes``) cap each
response; only a message alone may be larger. Everything here is synchronous
and steps one response at a time: the asyncio service runs each step in its executor
and waits for new data between steps (``server.log.waiting``) without holding a thread.
"""

from __future__ import annotations

from collections.abc import Iterator

from compactlog.errors import MalformedRequest, MessageTooLargeForReader
from compactlog.server.rpc.convert import start_position
from compactlog.storage import batch as codec
from compactlog.storage.cursor import Cursor
from compactlog.storage.read_range import MAX_RESPONSE_BYTES, Chunk, read_chunks
from compactlog.storage.topic_log import ReadableLog, TopicLog
from compactlog.storage.types import MessageId
from compactlog.v1 import compactlog_pb2 as pb

Response = tuple[bytes, int]  # response bytes, message count

# One executor step of a Read gathers responses up to this many bytes, so that a read of
# many small responses does not pay a thread hand-off for each (still bounded memory).
STEP_BYTES = 2 * 1024 * 1024


def as_of_point(req: pb.ReadRequest) -> tuple[MessageId | None, int | None] | None:
    """A Read of the past: ``(as_of, as_of_time_ms)`` (None: a Read of the present).
    ``as_of`` reads the compacted view, so it needs ``read_compacted``; the view is fixed,
    so a ``follow`` has nothing to wait for."""
    has_id, has_time = req.HasField("as_of"), req.HasField("as_of_time_ms")
    if not has_id and not has_time:
        return None
    field = "as_of" if has_id else "as_of_time_ms"
    if not req.read_compacted:
        raise MalformedRequest(
            f"{field} reads the compacted view of the past: set read_compacted",
            request="ReadRequest",
            field=field,
            topic=req.topic,
        )
    if req.follow:
        raise MalformedRequest(
            f"{field} reads a view that no longer changes: follow does not apply",
            request="ReadRequest",
            field="follow",
            topic=req.topic,
        )
    if has_id:
        return MessageId(req.as_of.ledger_id, req.as_of.entry_id), None
    return None, req.as_of_time_ms


def start_of(log: ReadableLog, req: pb.ReadRequest) -> MessageId:
    which = req.WhichOneof("start")
    if which == "message_id":
        return log.check_start(MessageId(req.message_id.ledger_id, req.message_id.entry_id))
    if which == "timestamp_ms":
        return log.at_time(req.timestamp_ms)
    if which == "position" and start_position(req.position) == pb.LATEST:
        return log.latest()
    return log.earliest()


class ReadSession:
    """One Read call's position in a topic's raw or compacted view."""

    def __init__(self, log: ReadableLog, req: pb.ReadRequest, per_response: int) -> None:
        self.log = log
        self.compacted = req.read_compacted
        self.per_response = per_response
        self.max_bytes = response_cap(req.max_bytes)
        self.remaining = req.max_messages or -1
        self.position = start_of(log, req)
        self._chunks: Iterator[Chunk] | None = None
        self._stop: MessageId | None = None
        self._failed: Exception | None = None

    @property
    def done(self) -> bool:
        return self.remaining == 0

    def cap(self, remaining: int) -> None:
        """Lower what this session may still return (a merged read's shared
        ``max_messages``): the responses under way were cut for the old limit, so they
        are dropped and the next step resumes at ``position``."""
        if self.remaining < 0 or remaining < self.remaining:
            self.remaining = remaining
            self._chunks = None

    def steps(self, max_bytes: int = STEP_BYTES) -> list[Response]:
        """The next responses, up to about ``max_bytes`` in all; empty once the view is
        read up to what is visible now. A response that fails (a corrupt batch, a message
        over the client's ``max_bytes``) fails the next call, after the ones before it
        were handed out."""
        if self._failed is not None:
            raise self._failed
        out: list[Response] = []
        size = 0
        while size < max_bytes:
            try:
                response = self.step()
            except Exception as exc:
                if not out:
                    raise
                self._failed = exc
                break
            if response is None:
                break
            out.append(response)
            size += len(response[0])
        return out

    def step(self) -> Response | None:
        """The next response, or None once the view is read up to what is visible now."""
        while not self.done:
            if self._chunks is None:
                stop = self.log.visible_end()
                if stop is None or self.position > stop:
                    return None
                self._stop = stop
                batches = self.log.batches(self.position, stop, self.compacted)
                limit = max(self.remaining, 0)
                label = f"topic {self.log.name!r}"
                self._chunks = read_chunks(
                    batches, label, stop, self.per_response, limit, self.max_bytes
                )
            chunk = next(self._chunks, None)
            if chunk is None:
                assert self._stop is not None
                self.position = max(self.position, self._stop.next())
                self._chunks = None
                continue
            if chunk.last_id is not None:
                self.position = max(self.position, chunk.last_id.next())
            if chunk.count:
                check_size(chunk, self.max_bytes, f"topic {self.log.name!r}")
                self.remaining -= chunk.count
                return chunk.to_bytes(), chunk.count
        return None


def consume_step(
    log: TopicLog,
    cursor: Cursor,
    after: MessageId | None,
    limit: int,
    compacted: bool,
    max_bytes: int = MAX_RESPONSE_BYTES,
    ahead: int = 0,
    ahead_bytes: int = 0,
    whole_to: int = 0,
) -> tuple[list[tuple[Response, MessageId]], MessageId | None]:
    """The next unacknowledged messages after ``after`` (None: from the start), one
    response's worth, and up to ``ahead`` more responses (``ahead_bytes`` in all at most)
    read in the same scan: each with the position delivery reaches with it; ``whole_to``
    as ``read_chunks`` (a response cut at ``limit`` only at a stored batch's end). None of them
    when there are no messages now: then the position delivery reaches all the same.

    Nothing here moves the cursor: the caller records the position once a response is
    handed out (``TopicLog.delivered``), so a Consume that fails on the way moves nothing.
    Only individually acknowledged records are cut out of the stored payloads; the
    position moves past everything looked at. A response after the first that fails
    (a message over ``max_bytes``, a corrupt batch) is left for the step that reaches it."""
    label = f"topic {log.name!r}"
    while True:
        start = MessageId(0, 0) if after is None else after.next()
        stop = log.visible_end()
        if stop is None or start > stop:
            return [], after
        skip = cursor.is_acked if cursor.acked else None
        chunks = read_chunks(
            log.batches(start, stop, compacted), label, stop, limit, max_bytes=max_bytes,
            skip=skip, whole_to=whole_to,
        )  # fmt: skip
        out, looked, after = _gather(chunks, after, (ahead, ahead_bytes), max_bytes, label)
        if out or not looked:
            return out, after if out else stop
        # every record looked at was acknowledged: look on from there


def _gather(
    chunks: Iterator[Chunk],
    after: MessageId | None,
    ahead: tuple[int, int],
    max_bytes: int,
    label: str,
) -> tuple[list[tuple[Response, MessageId]], bool, MessageId | None]:
    """``consume_step``'s responses from one scan, until ``ahead`` (responses beyond the
    first, their bytes) is reached; whether any record was looked at, and the position
    reached."""
    out: list[tuple[Response, MessageId]] = []
    looked, size = False, 0
    while True:
        try:
            chunk = next(chunks, None)
        except Exception:
            if not out:
                raise
            break  # read ahead into a failure: its own step raises it
        if chunk is None or chunk.last_id is None:
            break
        looked = True
        if chunk.count:
            if out and chunk.size > max_bytes and max_bytes < MAX_RESPONSE_BYTES:
                break  # its step raises MESSAGE_TOO_LARGE, after these are handed out
            check_size(chunk, max_bytes, label)
            data = chunk.to_bytes()
            out.append(((data, chunk.count), chunk.last_id))
            size += len(data)
        after = chunk.last_id
        if out and (len(out) > ahead[0] or size >= ahead[1]):
            break
    return out, looked, after


def redelivery_step(
    log: TopicLog,
    cursor: Cursor,
    ids: list[MessageId],
    limit: int,
    compacted: bool,
    max_bytes: int = MAX_RESPONSE_BYTES,
) -> tuple[Response | None, set[MessageId], MessageId]:
    """The messages of ``ids`` (sorted; due again: an ack timeout ran out, a negative
    acknowledgement) not acknowledged since, one response's worth: ``(response, the ids
    it holds, the id the scan reached)``. An id up to that point that is not in the
    response no longer exists (compaction, retention) or was acknowledged."""
    wanted = set(ids)

    def skip(msg_id: MessageId) -> bool:
        return msg_id not in wanted or cursor.is_acked(msg_id)

    label = f"topic {log.name!r}"
    batches = log.batches(ids[0], ids[-1], compacted)
    for chunk in read_chunks(batches, label, ids[-1], limit, max_bytes=max_bytes, skip=skip):
        if chunk.count and chunk.last_id is not None:
            check_size(chunk, max_bytes, label)
            data = chunk.to_bytes()
            return (data, chunk.count), set(message_ids(data, label)), chunk.last_id
    return None, set(), ids[-1]


def message_ids(response: bytes, label: str) -> list[MessageId]:
    """The ids of the messages of a response (spliced stored records)."""
    return [MessageId(w[0], w[1]) for w in codec.walk(response, label)]


def response_cap(requested: int) -> int:
    """The byte cap of a response: 4 MiB (``MAX_RESPONSE_BYTES``), or less when the
    client says it takes less (``max_bytes``, e.g. its gRPC receive limit)."""
    return min(requested, MAX_RESPONSE_BYTES) if requested else MAX_RESPONSE_BYTES


def check_size(chunk: Chunk, max_bytes: int, label: str) -> None:
    """A response passes its cap only when one message alone does; refused when the
    client asked for less (it could not take it), before anything moves."""
    if chunk.size > max_bytes and max_bytes < MAX_RESPONSE_BYTES:
        raise MessageTooLargeForReader(
            f"message {chunk.last_id} of {label} is {chunk.size} bytes, more than the "
            f"max_bytes {max_bytes} this reader accepts",
            limit=max_bytes,
        )
