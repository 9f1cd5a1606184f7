"""The one reader of stored batches: cut an id range into responses of spliced payloads.

Both topic kinds hand it checked batches in id order; it trims the batches at the ends
of the range (``batch.select``), splits a batch only where a response would pass its
message count or byte cap, and otherwise passes stored payloads through untouched. A
response is a list of payload slices whose concatenation is the wire encoding of
``ReadResponse`` / ``ConsumeResponse`` (``repeated Message messages = 1``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from compactlog.storage import batch as codec
from compactlog.storage.batch import BatchHeader
from compactlog.storage.types import MessageId

# A response never grows past this unless one message alone does (CONTRACT section 12).
MAX_RESPONSE_BYTES = 4 * 1024 * 1024 - 64 * 1024


@dataclass
class Chunk:
    """One response's worth of messages."""

    parts: list[memoryview] = field(default_factory=list)
    count: int = 0
    size: int = 0
    last_id: MessageId | None = None

    def add(self, payload: memoryview, count: int, last_id: MessageId) -> None:
        self.parts.append(payload)
        self.count += count
        self.size += len(payload)
        self.last_id = last_id

    def to_bytes(self) -> bytes:
        return b"".join(self.parts)


def _cut(payload: memoryview, max_bytes: int, where: str) -> tuple[memoryview, int, MessageId]:
    """The longest prefix of whole records within max_bytes (at least one record)."""
    walked = codec.walk(payload, where)
    n = 1
    while n < len(walked) and walked[n][5] <= max_bytes:
        n += 1
    last = walked[n - 1]
    return payload[: last[5]], n, MessageId(last[0], last[1])


def _without(
    payload: memoryview, skip: Callable[[MessageId], bool], where: str
) -> tuple[list[memoryview], int]:
    """Payload ranges of the records ``skip`` does not name (acknowledged ones), with
    neighbouring records kept as one range."""
    ranges: list[memoryview] = []
    kept = 0
    cur: tuple[int, int] | None = None
    for lid, eid, _flags, _key, s, e in codec.walk(payload, where):
        if skip(MessageId(lid, eid)):
            continue
        kept += 1
        if cur is not None and cur[1] == s:
            cur = (cur[0], e)
            continue
        if cur is not None:
            ranges.append(payload[cur[0] : cur[1]])
        cur = (s, e)
    if cur is not None:
        ranges.append(payload[cur[0] : cur[1]])
    return ranges, kept


# (batch bytes, checked header, the smallest id the view takes from this batch)
ViewBatch = tuple[bytes | memoryview, BatchHeader, MessageId]


def read_chunks(
    batches: Iterable[ViewBatch],
    label: str,
    stop: MessageId,
    per_response: int,
    max_messages: int = 0,
    max_bytes: int = MAX_RESPONSE_BYTES,
    skip: Callable[[MessageId], bool] | None = None,
    whole_to: int = 0,
) -> Iterator[Chunk]:
    """Responses holding the messages of ``batches`` up to ``stop``.

    ``batches`` yields ``(batch bytes, checked header, lower bound)`` in id order: a
    view's batches may reach below the range it covers (the raw batch holding a
    compaction horizon), so each carries the first id the view takes from it. ``label``
    names the topic in errors;
    ``max_messages`` (0 = no limit) caps the total, ``per_response`` and ``max_bytes``
    each response; ``skip`` leaves out individual ids (a subscription's acks). With
    ``whole_to`` past ``per_response``, a response that reaches ``per_response`` inside a
    stored batch takes the rest of that batch, ``whole_to`` messages at most in all: a
    ConsumeStream's whole entries past its permits, as Pulsar's broker dispatches them.
    """
    most = max(per_response, whole_to)
    remaining = max_messages or -1
    chunk = Chunk()
    for data, header, lo in batches:
        if header.first_id > stop:
            break
        where = f"{label} batch {header.first_id}"
        limit = remaining if remaining >= 0 else 1 << 62
        # The batch's records in range, selected once, then cut into responses: a batch
        # that spans several responses is walked once, not once per response.
        view, n, last = codec.select(data, header, lo, stop, limit, where)
        while n and last is not None:
            piece, k, piece_last = _head(view, min(n, most - chunk.count), n, last, where)
            if chunk.size + len(piece) > max_bytes:
                if chunk.count:
                    yield chunk
                    chunk = Chunk()
                    continue
                piece, k, piece_last = _cut(piece, max_bytes, where)
            _add(chunk, piece, k, piece_last, skip, where)
            view = view[len(piece) :]
            n -= k
            remaining -= k
            if chunk.count >= per_response or chunk.size >= max_bytes:
                yield chunk
                chunk = Chunk()
        if remaining == 0:
            break
    if chunk.count or chunk.last_id is not None:
        yield chunk


def _head(
    view: memoryview, k: int, n: int, last: MessageId, where: str
) -> tuple[memoryview, int, MessageId]:
    """The first ``k`` of the ``n`` records of ``view`` (whose last id is ``last``)."""
    if k >= n:
        return view, n, last
    start = codec.skip_records(view, 0, k - 1)
    end = codec.skip_records(view, start, 1)
    lid, eid = codec.walk(view[start:end], where)[0][:2]
    return view[:end], k, MessageId(lid, eid)


def _add(
    chunk: Chunk,
    piece: memoryview,
    count: int,
    last: MessageId,
    skip: Callable[[MessageId], bool] | None,
    where: str,
) -> None:
    if skip is None:
        chunk.add(piece, count, last)
        return
    parts, kept = _without(piece, skip, where)
    for part in parts:
        chunk.parts.append(part)
        chunk.size += len(part)
    chunk.count += kept
    chunk.last_id = last
