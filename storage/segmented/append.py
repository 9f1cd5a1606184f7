"""The encoding half of a SEGMENTED append: one Publish's records → one packed batch.

Kept apart from ``Log`` (which places the batch: roll, write, flush) so the one rule of
what may be stored sits in one place: every record is checked against
``max.message.bytes`` (Kafka's per-record limit here; sizes are the message bytes
without their id, as ``batch.encode_request`` measures them), and nothing of a request
is stored when one record is over it. The batch layout is drawn in ``storage/batch.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from compactlog.errors import RecordTooLarge
from compactlog.storage import batch
from compactlog.storage.types import MessageId

# The u32 length field of a batch counts the header after it (68 bytes) and the payload.
_MAX_PAYLOAD = 2**32 - 1 - (batch.HEADER_SIZE - 4)


@dataclass(frozen=True)
class AppendResult:
    """Where one Publish went: ``count`` offsets from ``base_offset`` (one batch)."""

    base_offset: int
    count: int
    synced: bool  # True when the batch was fsynced before returning

    @property
    def offsets(self) -> list[int]:
        return list(range(self.base_offset, self.base_offset + self.count))


@dataclass(frozen=True)
class PackedBatch:
    data: bytes
    count: int
    last_offset: int
    max_event_time_ms: int


def pack_request(
    request: bytes,
    base: int,
    now_ms: int,
    max_message_bytes: int,
    topic: str = "",
    partition: int = 0,
) -> PackedBatch:
    """The records of raw ``PublishRequest`` bytes (for ``topic``) as one batch from
    offset ``base``; ``partition`` goes into every id (``NAME-partition-i``)."""
    run = batch.encode_request(request, 0, 0, base, now_ms, partition=partition)
    if run.max_size > max_message_bytes:
        raise RecordTooLarge(
            f"record {run.max_size_index} is {run.max_size} bytes, over "
            f"max.message.bytes={max_message_bytes}; nothing of this batch was stored",
            topic=topic or None,
            limit=max_message_bytes,
            record=run.max_size_index,
            size=run.max_size,
        )
    if len(run.payload) > _MAX_PAYLOAD:
        raise RecordTooLarge(
            f"a batch of {len(run.payload)} bytes is over the {_MAX_PAYLOAD} one batch "
            "can frame; nothing of this batch was stored",
            topic=topic or None,
            limit=_MAX_PAYLOAD,
            size=len(run.payload),
        )
    last = base + run.count - 1
    max_ts = run.max_event_time_ms
    data = b""
    if run.count:
        data = batch.pack(
            run.payload, run.count, MessageId(0, base), MessageId(0, last), now_ms, max_ts
        )
    return PackedBatch(data, run.count, last, max_ts)
