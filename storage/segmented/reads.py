"""Reads across the segments of one log: stored batches spliced, trimmed only at the ends.

A read of offsets ``[start, end)`` finds the segment holding ``start`` (bisect over base
offsets), the batch holding it (offset index), and from there hands out every batch's
payload as it is stored; only the first and last batch of the range are cut down by
``batch.select``. Every batch passes ``batch.check`` on the way (``scan.iter_batches``).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence

from compactlog.storage.batch import select
from compactlog.storage.segmented.segment import LogSegment
from compactlog.storage.types import MessageId, StoredMessage
from compactlog.v1.compactlog_pb2 import ReadResponse

# (payload bytes of whole message records, how many, offset of the last)
Selected = tuple[memoryview, int, int]


def select_range(
    segments: Sequence[LogSegment],
    bases: Sequence[int],
    active_size: int,
    start: int,
    end: int,
    limit: int,
) -> Iterator[Selected]:
    """Records with ``start <= offset < end``, at most ``limit``, batch by batch.

    ``segments``/``bases`` are one snapshot of the log and ``active_size`` the size of its
    last segment taken with it: bytes past it may be an append still in progress.
    """
    lo, hi = MessageId(0, start), MessageId(0, end - 1)
    last_seg = segments[-1]
    for seg in segments[max(bisect.bisect_right(bases, start) - 1, 0) :]:
        if seg.base_offset >= end or limit <= 0:
            return
        stop = active_size if seg is last_seg else seg.size
        for buf, p, header, pos in seg.batches(seg.position_of(start, stop), stop):
            if header.last_id < lo:
                continue
            if header.first_id > hi:
                return
            part, n, last = select(buf, header, lo, hi, limit, f"{seg.where}, byte {pos}", p)
            if n and last is not None:
                yield part, n, last.entry_id
                limit -= n
                if limit <= 0:
                    return


def take_bytes(
    selected: Iterator[Selected], max_bytes: int
) -> tuple[list[memoryview | bytes], int, int | None]:
    """Payload pieces up to ``max_bytes`` in all; a first piece larger than that comes
    alone (a reader must always make progress)."""
    chunks: list[memoryview | bytes] = []
    count = size = 0
    last: int | None = None
    for part, n, got in selected:
        if chunks and size + len(part) > max_bytes:
            break
        chunks.append(part)
        count += n
        size += len(part)
        last = got
        if size >= max_bytes:
            break
    return chunks, count, last


def decode(selected: Iterator[Selected]) -> list[StoredMessage]:
    """Domain messages of the selected records (tools, tests, the server's older paths).

    The selected bytes are a ``ReadResponse``'s by construction, so protobuf's parser
    (compiled) decodes them in one call; the domain objects are built from its fields.
    """
    data = b"".join(part for part, _n, _last in selected)
    out: list[StoredMessage] = []
    append = out.append
    for msg in ReadResponse.FromString(data).messages:
        mid = msg.id
        append(
            StoredMessage(
                MessageId(mid.ledger_id, mid.entry_id),
                msg.key if msg.HasField("key") else None,
                msg.value if msg.HasField("value") else None,
                dict(msg.properties),
                msg.publish_time_ms,
                msg.event_time_ms,
            )
        )
    return out
