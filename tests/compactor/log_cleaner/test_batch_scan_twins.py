"""The per-batch scans' compiled twin against the pure-Python one: for any payload (ids
with gaps, keyless records, tombstones, empty values), any table and any range, the same
answers, byte-identical tables and the same errors for malformed bytes."""

from __future__ import annotations

import os
from array import array
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.compactor.log_cleaner import _batch_scan_py, _offset_map_py, batch_scan
from compactlog.errors import CorruptData
from compactlog.storage import _batch_py, batch
from compactlog.storage.types import Record

compiled = pytest.importorskip("compactlog.compactor.log_cleaner._batch_scan")
TWINS = [_batch_scan_py, compiled]


@pytest.fixture(autouse=True)
def _pure_python_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python twin walks payloads with the storage codec, whose compiled twin reads
    the wire format with the same C (``storage/_wire.h``) as the compiled scans: the
    reference walks with the pure-Python codec, so a fault there cannot agree with
    itself."""
    monkeypatch.setattr(_batch_scan_py, "codec", _batch_py)


KEYS = st.one_of(st.none(), st.sampled_from([b"", b"a", b"b", b"key-1", b"k" * 70]))
VALUES = st.one_of(st.none(), st.sampled_from([b"", b"v", b"value" * 30]))
RECORDS = st.lists(st.tuples(KEYS, VALUES, st.integers(1, 3)), min_size=1, max_size=25)


def payload_of(records: list[tuple[bytes | None, bytes | None, int]], ledger: int) -> bytes:
    """Records with ascending ids and gaps (``step``), as a COMPACTED batch holds them."""
    out = b""
    entry = 0
    for key, value, step in records:
        entry += step
        run = batch.encode_request(
            batch.records_to_request([Record(key, value)]), 0, ledger, entry, 7
        )
        out += run.payload
    return out


def table(slots: int) -> tuple[bytearray, array[int]]:
    return bytearray(16 * slots), array("q", [0]) * slots


def both(name: str, *args: Any) -> Any:
    """Call ``name`` on each twin with its own copy of the table; they must agree
    (``key_digests`` takes no table: its two first arguments are dropped)."""
    tables = [(bytearray(args[0]), array("q", args[1])) for _ in TWINS]
    if name == "key_digests":
        answers = [t.key_digests(*args[2:]) for t in TWINS]
        assert answers[0] == answers[1]
        return answers[0], tables[0]
    answers = [getattr(t, name)(*tables[i], *args[2:]) for i, t in enumerate(TWINS)]
    assert answers[0] == answers[1]
    assert tables[0] == tables[1]
    return answers[0], tables[0]


def test_the_compiled_twin_is_the_one_in_use() -> None:
    if os.environ.get("COMPACTLOG_NO_EXT") == "1":
        assert not batch_scan.COMPILED
    else:
        assert batch_scan.COMPILED and batch_scan.twin is compiled


@settings(max_examples=150)
@given(
    records=RECORDS,
    slots=st.sampled_from([1, 2, 3, 7, 13, 101]),
    start=st.integers(0, 20),
    span=st.integers(0, 80),
    cap=st.integers(0, 30),
)
def test_the_offset_map_and_survivors_agree(
    records: list[tuple[bytes | None, bytes | None, int]],
    slots: int,
    start: int,
    span: int,
    cap: int,
) -> None:
    payload = payload_of(records, 0)
    latest = [bytearray(16) for _ in TWINS]  # offsets start .. start + 127
    tables = [table(slots) for _ in TWINS]
    digests = [t.digest_keys(payload, start, start + span) for t in TWINS]
    assert digests[0] == digests[1]
    near = [t.digest_keys(payload, start, start + span, *tables[i]) for i, t in enumerate(TWINS)]
    assert near == digests  # the table given only has its slots prefetched
    answers = [
        t.map_digests(*tables[i], digests[i], 0, cap, latest[i], start) for i, t in enumerate(TWINS)
    ]
    assert answers[0] == answers[1] and tables[0] == tables[1] and latest[0] == latest[1]
    mapped, size, stop = answers[0]
    assert size <= cap and mapped >= size and (stop == -1 or start <= stop < start + span)
    end = stop if stop >= 0 else start + span
    hashes, offsets = tables[0]
    for expired in (False, True):
        probed, _ = both("survivors", hashes, offsets, payload, expired, bytearray(), 0, 0)
        kept_bytes, kept, *_ = probed
        assert len(kept_bytes) <= len(payload) and kept <= len(records)
        # the bitmap answers for the offsets the map took exactly as the map does
        bitmap, _ = both("survivors", hashes, offsets, payload, expired, latest[0], start, end)
        assert bitmap == probed


@settings(max_examples=150)
@given(
    records=RECORDS,
    slots=st.sampled_from([1, 3, 7, 101]),
    at=st.integers(0, 5),
    first=st.integers(0, 40),
    span=st.integers(0, 40),
    cap=st.integers(0, 30),
    retain=st.booleans(),
    tombstones=st.booleans(),
)
def test_phase_one_exchange_agrees(
    records: list[tuple[bytes | None, bytes | None, int]],
    slots: int,
    at: int,
    first: int,
    span: int,
    cap: int,
    retain: bool,
    tombstones: bool,
) -> None:
    payload = payload_of(records, 3)
    entries = [t.digest_positions(payload) for t in TWINS]
    assert entries[0] == entries[1] and len(entries[0]) == 24 * len(records)
    hashes, offsets = table(slots)
    out, (hashes, offsets) = both(
        "exchange_digested", hashes, offsets, entries[0], at, first, first + span, 10, 0, cap,
        retain,
    )  # fmt: skip
    # a second batch over the same table: updates and FULL from a table in use
    both(
        "exchange_digested", hashes, offsets, entries[0], at, 0, 99, 1000, out[5], cap + 2,
        retain,
    )  # fmt: skip
    bitmaps = [bytearray(1 << 10) for _ in TWINS]
    counts = [
        t.live_bitmap(array("q", offsets), bitmaps[i], tombstones) for i, t in enumerate(TWINS)
    ]
    assert counts[0] == counts[1] and bitmaps[0] == bitmaps[1]


@settings(max_examples=150)
@given(
    records=RECORDS,
    at=st.integers(0, 5),
    first=st.integers(0, 30),
    span=st.integers(0, 30),
    bits=st.binary(min_size=0, max_size=6),
    bits_first=st.integers(0, 8),
    limit=st.integers(1, 30),
)
def test_select_batch_agrees_and_frames_as_frame_messages(
    records: list[tuple[bytes | None, bytes | None, int]],
    at: int,
    first: int,
    span: int,
    bits: bytes,
    bits_first: int,
    limit: int,
) -> None:
    payload = payload_of(records, 5)
    answers = [
        t.select_batch(payload, at, first, first + span, bits, bits_first, limit) for t in TWINS
    ]
    assert answers[0] == answers[1]
    framed, count, nbytes, *_ids, nxt = answers[0]
    walked = batch.walk(payload, "test")
    chosen = [
        batch.record_body(payload, s, e)
        for pos, (*_r, s, e) in enumerate(walked, at)
        if first <= pos <= first + span
        and 0 <= pos - bits_first < 8 * len(bits)
        and bits[(pos - bits_first) >> 3] >> ((pos - bits_first) & 7) & 1
    ][:limit]
    assert framed == batch.frame_messages(chosen) and count == len(chosen)
    assert nbytes == sum(map(len, chosen)) and nxt <= at + len(walked)


@pytest.mark.parametrize("cut", [1, 2, 5])
def test_malformed_payloads_raise_the_same_error(cut: int) -> None:
    payload = payload_of([(b"a", b"1", 1), (b"b", b"2", 1)], 0)[:-cut]
    for call in (
        lambda t: t.survivors(*table(7), payload, False, bytearray(1), 0, 8),
        lambda t: t.unsuperseded(*table(7), payload, True),
        lambda t: t.digest_keys(payload, 0, 10),
        lambda t: t.digest_positions(payload),
        lambda t: t.key_digests(payload),
        lambda t: t.unsuperseded(*table(7), payload, True, bytes(32)),
    ):
        errors = []
        for t in TWINS:
            with pytest.raises(batch.MalformedPayload) as exc:
                call(t)
            errors.append(str(exc.value))
        assert errors[0] == errors[1]


@pytest.mark.parametrize(
    "payload",
    [
        b"\x0a\x03\x12\x02a",  # a key one byte past its message, at the payload's end
        b"\x0a\x03\x12\x02a\x0a\x00",  # ... and into the next record
        b"\x0a\x04\x12\x01a\x1a",  # a value's length missing
        b"\x0a\x0c\x28" + b"\x80" * 9 + b"\x01\x0a",  # a 10-byte varint, then a tag cut
        b"\x0a\x0d\x28" + b"\x80" * 10 + b"\x01\x0a",  # an 11-byte varint
        b"\x0a\x09\x28" + b"\x80" * 8,  # a varint cut by its message's end
        b"\x0a\x0b\x28" + b"\x80" * 7 + b"\x01\x12\x01k",  # 8 bytes, then a key
        b"\x0a\x05\x0a\x03\x08\x80\x01",  # an id's varint past the id's end
    ],
)
def test_edges_of_lengths_and_varints_walk_alike(payload: bytes) -> None:
    for call in (
        lambda t: t.digest_positions(payload),
        lambda t: t.digest_keys(payload, 0, 1 << 40),
        lambda t: t.select_batch(payload, 0, 0, 1 << 40, b"\xff", 0, 9),
    ):
        answers = [_outcome(call, t) for t in TWINS]
        assert answers[0] == answers[1]


def test_many_small_records_walk_alike() -> None:
    """More records than the walks make room for at first (one every 128 bytes, at most
    4096): their tables and entries grow, and every record is still there."""
    payload = wide_payload_of([(b"k%d" % (i % 50), b"v" * (i % 90), 0, None) for i in range(9000)])
    for call in (
        lambda t: t.digest_positions(payload),
        lambda t: t.digest_keys(payload, 0, 1 << 40),
        lambda t: t.survivors(*table(101), payload, -1, bytearray(64), 0, 512),
    ):
        answers = [_outcome(call, t) for t in TWINS]
        assert answers[0] == answers[1]
    assert len(compiled.digest_positions(payload)) == 24 * 9000


def _outcome(call: Any, *args: Any) -> Any:
    """What a call answered, or the text of the MalformedPayload it raised."""
    try:
        return call(*args)
    except batch.MalformedPayload as exc:
        return ("MalformedPayload", str(exc))


# event times whose varints take 1 to 10 bytes (a negative one: 10), and properties, so
# that varint and length fields of every width sit in the middle of a message
EVENT_TIMES = st.sampled_from([0, 1, 127, 128, 1_700_000_000_123, 2**62, -1])
WIDE = st.lists(
    st.tuples(KEYS, VALUES, EVENT_TIMES, st.sampled_from([None, {"p": "q" * 130}])),
    min_size=1,
    max_size=12,
)


def wide_payload_of(records: list[tuple[Any, Any, int, Any]]) -> bytes:
    request = batch.records_to_request([Record(k, v, p, t) for k, v, t, p in records])
    return batch.encode_request(request, 0, 2**40, 2**33, 1_700_000_000_000).payload


# a byte set to any value, or nudged by one (a length one too long or short)
WRITES = st.lists(
    st.tuples(st.integers(0, 10**6), st.integers(0, 255) | st.sampled_from([-1, 256])),
    max_size=4,
)


@given(WIDE, WRITES, st.integers(0, 40))
@settings(max_examples=400, deadline=None)
def test_corrupted_payloads_walk_alike_in_both_twins(
    records: list[tuple[Any, Any, int, Any]], writes: list[tuple[int, int]], cut: int
) -> None:
    """Any byte overwritten (tags, lengths, varints of every width, ids) and any tail cut:
    each walk answers the same, or fails with the same MalformedPayload text, in both
    twins (the compiled walk reads varints and lengths on fast paths of its own)."""
    raw = bytearray(wide_payload_of(records))
    for where, value in writes:
        at = where % len(raw)
        raw[at] = value if 0 <= value < 256 else (raw[at] + (1 if value > 0 else -1)) % 256
    payload = bytes(raw[: max(0, len(raw) - cut)])
    calls = {
        "digest_positions": lambda t: t.digest_positions(payload),
        "digest_keys": lambda t: t.digest_keys(payload, 0, 1 << 40),
        "select_batch": lambda t: t.select_batch(payload, 0, 0, 1 << 40, b"\xff" * 64, 0, 1 << 40),
        "survivors": lambda t: t.survivors(*table(7), payload, -1, bytearray(64), 0, 512),
    }
    for name, call in calls.items():
        answers = [_outcome(call, t) for t in TWINS]
        assert answers[0] == answers[1], name


def test_the_wrapper_names_the_batch_in_corrupt_data() -> None:
    from compactlog.compactor.log_cleaner.offset_map import SkimpyOffsetMap

    m = SkimpyOffsetMap(24 * 101, 0.9)
    with pytest.raises(CorruptData, match="segment 0, byte 72"):
        batch_scan.digest_keys(b"\x0b\x00", 0, 10, "segment 0, byte 72")
    with pytest.raises(CorruptData, match="ledger 3 entry 0"):
        batch_scan.digest_positions(b"\x0b\x00", "ledger 3 entry 0")
    with pytest.raises(CorruptData, match="compacted ledger 9"):
        batch_scan.unsuperseded(m, b"\x0b\x00", False, "compacted ledger 9")


@settings(max_examples=150)
@given(
    records=RECORDS,
    at=st.integers(0, 5),
    first=st.integers(0, 30),
    span=st.integers(0, 30),
    base=st.integers(0, 4),
    retain=st.booleans(),
    tombstones=st.booleans(),
    bits_first=st.integers(0, 8),
)
def test_winner_bits_agree_with_phase_one_map(
    records: list[tuple[bytes | None, bytes | None, int]],
    at: int,
    first: int,
    span: int,
    base: int,
    retain: bool,
    tombstones: bool,
    bits_first: int,
) -> None:
    payload = payload_of(records, 2)
    hashes, offsets = table(101)
    entries = _batch_scan_py.digest_positions(payload)
    _out, (hashes, offsets) = both(
        "exchange_digested", hashes, offsets, entries, at, 0, 99, base, 0, 100, retain
    )
    bitmaps = [bytearray(8) for _ in TWINS]
    counts = [
        t.winner_bits(hashes, offsets, payload, at, first, first + span, base, retain,
                      tombstones, bitmaps[i], bits_first)
        for i, t in enumerate(TWINS)
    ]  # fmt: skip
    assert counts[0] == counts[1] and bitmaps[0] == bitmaps[1]


@settings(max_examples=150)
@given(
    compacted=RECORDS,
    raw=st.lists(st.sampled_from([b"", b"a", b"b", b"key-1"]), max_size=4),
    retain=st.booleans(),
)
def test_unsuperseded_agrees_and_keeps_what_the_rule_keeps(
    compacted: list[tuple[bytes | None, bytes | None, int]], raw: list[bytes], retain: bool
) -> None:
    """A compacted batch merged with a raw part whose keys the table maps: both twins
    keep exactly the live keyed records whose key the raw part lacks, and the keyless
    ones when retained, framed as they were."""
    hashes, offsets = table(13)
    for i, key in enumerate(raw):  # the raw part's keys, as phase one maps them
        _offset_map_py.exchange(hashes, offsets, key, i << 1 | 1, True)
    payload = payload_of(compacted, 2)
    (records, count, fl, fe, ll, le), _ = both("unsuperseded", hashes, offsets, payload, retain)
    walked = batch.walk(payload, "test")
    expected = [
        w
        for w, (key, value, _step) in zip(walked, compacted, strict=True)
        if (key is not None and value and key not in raw) or (key is None and retain)
    ]
    assert count == len(expected)
    assert records == b"".join(payload[w[4] : w[5]] for w in expected)
    if len(expected) == len(walked):  # all kept: the payload itself, the caller has its ids
        assert records is payload and (fl, fe, ll, le) == (0, 0, 0, 0)
    elif expected:
        assert (fl, fe, ll, le) == (*expected[0][:2], *expected[-1][:2])
    # the same over the batch's stored key digests, walked or (LIVE_ONLY) not
    digests, _ = both("key_digests", bytearray(16), array("q", [0]), payload)
    assert digests == b"".join(
        _offset_map_py.digest(w[3]) if w[3] is not None else bytes(16) for w in walked
    )
    live_only = all(key is not None and value for key, value, _step in compacted)
    stored, _ = both("unsuperseded", hashes, offsets, payload, retain, digests, live_only)
    assert stored[1] == count
    assert stored[0] == records and (stored[0] is payload) == (records is payload)
