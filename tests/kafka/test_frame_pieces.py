"""A Fetch answer's frame in pieces (``protocol.encode_frame``): kio encodes everything
but a large records field, which goes into the frame as the very object the conversion
made, so a Fetch's records reach the socket without a copy in the listener.

For each Fetch version the listener serves, the pieces joined are exactly kio's own
encoding of the same response, and read back to the same records; the records piece is
the conversion's view itself; small answers stay one piece; and the compiled
conversion's answer is a view of its own block, not a ``bytes`` copy.
"""

from __future__ import annotations

import importlib
import io
import os
import struct
from typing import Any

import pytest

from compactlog.server.kafka import _records_py, api_versions, fetch, protocol
from compactlog.server.kafka.fetch_read import Read, Wanted
from compactlog.storage import batch
from compactlog.v1 import compactlog_pb2 as pb

LOW, HIGH = api_versions.SUPPORTED[fetch.FETCH]


def kio_frame(correlation_id: int, response: Any) -> bytes:
    """The frame as kio alone writes it, into one buffer."""
    out = io.BytesIO()
    header_cls = response.__header_schema__
    protocol._writer(header_cls)(out, header_cls(correlation_id=correlation_id))
    protocol._writer(type(response))(out, response)
    body = out.getvalue()
    return struct.pack(">i", len(body)) + body


@pytest.mark.parametrize("version", range(LOW, HIGH + 1))
@pytest.mark.parametrize("size", [0, 100, protocol.SPLICE_BYTES, 1 << 17])
def test_a_fetch_frame_is_kios_encoding_with_the_records_spliced_in(
    version: int, size: int
) -> None:
    data = memoryview(os.urandom(size))
    wanted = [Wanted("t", 0, 5, 1 << 20), Wanted("t", 1, 0, 1 << 20), Wanted("u", 0, 0, 9)]
    reads = [Read(records=data, high_watermark=9, log_start=0, next_offset=9), Read(), Read()]
    response = fetch._response(version, wanted, reads)
    pieces = protocol.encode_frame(42, response)
    framed = b"".join(pieces)
    assert framed == kio_frame(42, response)
    correlation_id, back = protocol.read_response(framed[4:], fetch.FETCH, version)
    assert correlation_id == 42
    assert back.responses[0].partitions[0].records == bytes(data)
    spliced = [piece for piece in pieces if piece is data]
    assert len(spliced) == (1 if size >= protocol.SPLICE_BYTES else 0)
    assert len(pieces) <= 3  # around the one records piece: what comes before and after


def test_a_small_answer_is_one_piece() -> None:
    response = api_versions.unsupported(3)
    pieces = protocol.encode_frame(7, response)
    assert len(pieces) == 1 and bytes(pieces[0]) == kio_frame(7, response)
    assert protocol.encode(7, response) == bytes(pieces[0])


def test_the_compiled_conversion_answers_a_view_of_its_own_block() -> None:
    compiled = importlib.import_module("compactlog.server.kafka._records")
    raw = pb.PublishRequest(records=[pb.Record(key=b"k", value=b"v" * 50)]).SerializeToString()
    payload = batch.encode_request(raw, 0, 0, 3, 7).payload
    data, used, last = compiled.fetched_batches([payload], 0, 1 << 20, True)
    assert (used, last) == (1, 3) and isinstance(data, memoryview) and data.readonly
    assert not isinstance(data.obj, bytes | bytearray)  # the twin's block, lent
    assert data == _records_py.fetched_batches([payload], 0, 1 << 20, True)[0]
    again = compiled.fetched_batches([payload], 0, 1 << 20, True)[0]
    assert again == data and again.obj is not data.obj
    empty = compiled.fetched_batches([payload], 4, 1 << 20, True)[0]
    assert isinstance(empty, memoryview) and empty == b""


def test_a_block_is_reused_only_once_its_answer_is_gone() -> None:
    """The twin keeps the blocks of answers dropped for the next conversions: an answer
    still held keeps its bytes whatever is converted after it."""
    compiled = importlib.import_module("compactlog.server.kafka._records")

    def payload(fill: bytes) -> bytes:
        raw = pb.PublishRequest(records=[pb.Record(value=fill * 3000)]).SerializeToString()
        return batch.encode_request(raw, 0, 0, 0, 7).payload

    payloads = [payload(bytes([c])) for c in b"abcdefgh"]
    want = [_records_py.fetched_batches([p], 0, 1 << 20, True)[0] for p in payloads]
    held = []
    for round_ in range(3):  # answers dropped between rounds: their blocks come back
        got = [compiled.fetched_batches([p], 0, 1 << 20, True)[0] for p in payloads]
        assert got == want
        held.append(got[round_])
        del got
        assert held == [want[i] for i in range(round_ + 1)]
