"""How the front merges the slots' answers to a Log call on a spread partitioned ``NAME``.

Under partition placement each slot answers a call on ``NAME`` for the partitions it
holds (``front.spread.log``); these pure functions make the slots' answers one answer,
as a single server's ``log.partitioned`` would have given it. Message lists stay wire
bytes where the merge allows (a Read or Consume response is ``repeated Message messages``
in field 1 and nothing else, so responses concatenate and a prefix of whole fields is a
response): the front counts and cuts them with a tag walk, never a parse of the records.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence

from compactlog.storage.key_history import KeyHistory
from compactlog.storage.message_decode import decode_message
from compactlog.storage.protowire import read_varint, skip_field
from compactlog.v1 import compactlog_pb2 as pb

_MESSAGES = (
    1  # field number of ``messages`` in ReadResponse, ConsumeResponse, GetKeyHistoryResponse
)


def message_spans(data: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of each ``messages`` field in a response's bytes, tag included."""
    pos, end = 0, len(data)
    while pos < end:
        start = pos
        tag, pos = read_varint(data, pos, end)
        pos = skip_field(data, pos, end, tag & 7)
        if tag >> 3 == _MESSAGES:
            yield start, pos


def cut(data: bytes, limit: int) -> tuple[bytes, int]:
    """A Read response cut to at most ``limit`` messages (a shared ``max_messages``):
    the bytes to send and how many messages they hold."""
    count = 0
    for _start, end in message_spans(data):
        count += 1
        if count == limit:
            return data[:end], count
    return data, count


def _id_key(msg_id: pb.MessageId) -> tuple[int, int, int]:
    return msg_id.ledger_id, msg_id.entry_id, msg_id.partition


def last_ids(answers: Iterable[bytes]) -> bytes:
    """GetLastMessageId on ``NAME``: every slot's ``partitions`` (sorted by partition);
    ``id`` the greatest of the slots' own ``id``s, as ``MergedLog.last_ids`` picks it."""
    merged = pb.GetLastMessageIdResponse()
    for answer in answers:
        part = pb.GetLastMessageIdResponse.FromString(answer)
        merged.partitions.extend(part.partitions)
        if part.HasField("id") and (
            not merged.HasField("id") or _id_key(part.id) > _id_key(merged.id)
        ):
            merged.id.CopyFrom(part.id)
    merged.partitions.sort(key=lambda i: i.partition)
    return merged.SerializeToString()


def key_history(answers: Sequence[bytes], limit: int) -> bytes:
    """GetKeyHistory on ``NAME``: the slots' records merged by publish time (each
    partition's own order kept), under the same limits a single server applies
    (``KeyHistory.add``: ``max_messages`` and the response byte cap)."""
    parsed = [pb.GetKeyHistoryResponse.FromString(answer) for answer in answers]
    found = KeyHistory(truncated=any(p.truncated for p in parsed))
    records = [[answer[s:e] for s, e in message_spans(answer)] for answer in answers]

    def publish_time(record: bytes) -> int:
        return decode_message(record).publish_time_ms

    for record in heapq.merge(*records, key=publish_time):
        if not found.add(record, limit):
            break
    out = found.to_bytes()
    return out + b"\x10\x01" if found.truncated else out  # field 2, ``truncated``
