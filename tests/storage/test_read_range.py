"""The one reader: responses cut from stored batches hold exactly the view's messages, in
order, within the per-response count and byte caps."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.storage import batch
from compactlog.storage.read_range import read_chunks
from compactlog.storage.types import MessageId, Record


def _batch(ids: list[MessageId], value_size: int) -> bytes:
    """A stored batch of messages with these ids (COMPACTED unless contiguous)."""
    records = [Record(b"k%d" % i.entry_id, b"v" * value_size) for i in ids]
    request = batch.records_to_request(records)
    bodies = []
    for i, msg_id in enumerate(ids):
        run = batch.encode_request(request, 0, msg_id.ledger_id, msg_id.entry_id - i, 7)
        payload = run.payload
        *_rest, s, e = batch.walk(payload, "t")[i]
        bodies.append(batch.record_body(payload, s, e))
    contiguous = all(b.entry_id == a.entry_id + 1 for a, b in itertools.pairwise(ids))
    attributes = 0 if contiguous and len({i.ledger_id for i in ids}) == 1 else batch.COMPACTED
    return batch.pack(batch.frame_messages(bodies), len(ids), ids[0], ids[-1], 7, 7, attributes)


@st.composite
def views(draw: st.DrawFn) -> tuple[list[bytes], list[MessageId]]:
    ids: list[MessageId] = []
    out: list[bytes] = []
    entry = 0
    for _ in range(draw(st.integers(1, 4))):
        size = draw(st.integers(1, 6))
        gaps = draw(st.booleans())
        chunk = []
        for _ in range(size):
            entry += draw(st.integers(1, 3)) if gaps else 1
            chunk.append(MessageId(1, entry))
        ids += chunk
        out.append(_batch(chunk, draw(st.integers(0, 40))))
    return out, ids


@settings(max_examples=150, deadline=None)
@given(
    views(),
    st.integers(0, 30),
    st.integers(0, 30),
    st.integers(1, 5),
    st.integers(0, 8),
    st.integers(60, 400),
    st.sets(st.integers(0, 90)),
)
def test_chunks_hold_the_range_in_order_within_the_caps(
    stored: tuple[list[bytes], list[MessageId]],
    lo: int,
    hi: int,
    per_response: int,
    max_messages: int,
    max_bytes: int,
    acked: set[int],
) -> None:
    data, ids = stored
    start, stop = MessageId(1, lo), MessageId(1, hi)
    headers = [batch.check(d, "t") for d in data]
    view = [(d, h, start) for d, h in zip(data, headers, strict=True)]
    skip = (lambda i: i.entry_id in acked) if acked else None
    chunks = list(read_chunks(view, "t", stop, per_response, max_messages, max_bytes, skip))
    in_range = [i for i in ids if start <= i <= stop]
    looked_at = in_range[:max_messages] if max_messages else in_range
    want = [i for i in looked_at if i.entry_id not in acked]
    got = [MessageId(w[0], w[1]) for c in chunks for w in batch.walk(c.to_bytes(), "t")]
    assert got == want
    for c in chunks:
        assert c.count <= per_response and c.count == len(batch.walk(c.to_bytes(), "t"))
        assert c.size == len(c.to_bytes())
        assert c.size <= max_bytes or c.count == 1  # only a lone message may pass the cap
    if looked_at:
        assert chunks[-1].last_id == looked_at[-1]


def test_a_batch_wholly_in_range_is_passed_through_as_stored() -> None:
    data = _batch([MessageId(3, i) for i in range(5)], 10)
    header = batch.check(data, "t")
    (chunk,) = read_chunks([(data, header, MessageId(0, 0))], "t", MessageId(9, 0), 100)
    assert chunk.parts[0].obj is data and chunk.count == 5


def test_whole_to_carries_a_response_on_to_its_batch_end() -> None:
    """Past ``per_response`` inside a stored batch, a response takes the rest of that
    batch, never more than ``whole_to`` messages (a ConsumeStream's whole entries)."""
    sizes, first, data = (3, 10, 10), 0, []
    for size in sizes:
        data.append(_batch([MessageId(1, first + i) for i in range(size)], 10))
        first += size
    view = [(d, batch.check(d, "t"), MessageId(0, 0)) for d in data]
    stop = MessageId(9, 0)
    counts = [c.count for c in read_chunks(view, "t", stop, 4, whole_to=10)]
    assert counts == [10, 10, 3]  # 3 + 7 of the second (whole_to); its last 3 + 7; 3
    assert [c.count for c in read_chunks(view, "t", stop, 4, whole_to=13)] == [13, 10]
    assert [c.count for c in read_chunks(view, "t", stop, 4)] == [4, 4, 4, 4, 4, 3]
