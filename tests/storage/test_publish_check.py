"""The publish check (``check_publish`` in both codec twins, ``batch.publish_topic``).

It replaced a protobuf parse of every publish, so it is held to that parse: whatever
protobuf refuses it refuses, whatever it passes encodes without an error and names the
topic protobuf reads; the compiled and the pure twin give the same topic or the same
refusal text for any bytes.
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import Any

import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.errors import MalformedRequest
from compactlog.storage import _batch_py, batch
from compactlog.v1 import compactlog_pb2 as pb
from tests.storage.test_batch_codec import (
    RECORDS,
    WIRE_BYTES,
    _compiled_twin,
    _len_field,
    _request,
    _scalar_field,
    _to_pb,
    _varint,
)

PY = _batch_py
MANY = settings(max_examples=300, deadline=None)
# Bytes that are sometimes UTF-8 and sometimes almost: surrogates, overlong forms, code
# points past U+10FFFF, truncated sequences.
TEXTISH = (
    st.text(max_size=8).map(str.encode)
    | st.binary(max_size=8)
    | st.sampled_from(
        [
            *(b"\xed\xa0\x80", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf4\x90\x80\x80", b"\xc2"),
            *(b"\xf0\x8f\xbf\xbf", b"\xe2\x82", b"\xf5\x80\x80\x80", b"\xef\xbf\xbf"),
            b"\xf4\x8f\xbf\xbf",
        ]
    )
    | st.tuples(st.text(max_size=9), st.binary(max_size=3)).map(lambda t: t[0].encode() + t[1])
)


def _entry(name: bytes, value: bytes) -> bytes:
    return _len_field(1, name) + _len_field(2, value)


@st.composite
def near_requests(draw: st.DrawFn) -> bytes:
    """PublishRequests whose topic and property texts may not be UTF-8, with unknown and
    odd fields (groups, field 0, wide tags) and noise among them."""
    parts: list[bytes] = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.integers(0, 5))
        if kind == 0:
            parts.append(_len_field(1, draw(TEXTISH)))
        elif kind == 1:
            entries = draw(st.lists(st.tuples(TEXTISH, TEXTISH).map(lambda e: _entry(*e))))
            rec = _to_pb(draw(RECORDS)).SerializeToString()
            parts.append(_len_field(2, rec + b"".join(_len_field(3, e) for e in entries)))
        elif kind == 2:
            parts.append(_request([draw(RECORDS)], draw(st.text(max_size=4))))
        elif kind == 3:
            field = draw(st.sampled_from([0, 1, 2, 3, 2**29 - 1, 2**29, 2**32 + 2]))
            wire = draw(st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7]))
            parts.append(_varint(field << 3 | wire) + draw(st.binary(max_size=3)))
        elif kind == 4:
            parts.append(_scalar_field(draw(st.integers(1, 9)), 0, draw(st.integers(0, 2**64 - 1))))
        else:
            parts.append(draw(WIRE_BYTES))
    return b"".join(parts)


def _outcome(twin: ModuleType, raw: bytes) -> tuple[str, Any]:
    try:
        return "ok", twin.check_publish(raw)
    except PY.MalformedPayload as exc:
        return "malformed", str(exc)


@pytest.fixture(scope="module")
def compiled() -> ModuleType:
    return _compiled_twin()


def _held_to_protobuf(compiled: ModuleType, raw: bytes) -> None:
    got = _outcome(compiled, raw)
    assert got == _outcome(PY, raw)
    try:
        parsed = pb.PublishRequest.FromString(raw)
    except DecodeError:
        assert got[0] == "malformed", raw
        with pytest.raises(MalformedRequest, match=r"^malformed publish request: "):
            batch.publish_topic(raw)
        return
    if got[0] == "ok":
        assert got[1] == parsed.topic
        run = batch.encode_request(raw, 0, 1, 0, 5)  # what it passes encodes
        assert run.count == len(parsed.records) and run.next_pos == len(raw)
    else:  # stricter only where the codec could not copy the request
        assert "wire type 3" in got[1] or "wire type 4" in got[1], got


@MANY
@given(near_requests())
def test_the_check_refuses_what_protobuf_refuses(compiled: ModuleType, raw: bytes) -> None:
    _held_to_protobuf(compiled, raw)


@MANY
@given(WIRE_BYTES)
def test_any_bytes_are_judged_alike(compiled: ModuleType, raw: bytes) -> None:
    _held_to_protobuf(compiled, raw)


@settings(max_examples=100, deadline=None)
@given(st.lists(RECORDS, max_size=6), st.text(max_size=12))
def test_a_well_formed_request_names_its_topic(
    compiled: ModuleType, recs: list[Any], topic: str
) -> None:
    raw = _request(recs, topic)
    assert compiled.check_publish(raw) == PY.check_publish(raw) == topic
    assert compiled.check_publish(memoryview(raw)) == topic


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (_len_field(1, b"t\xff"), "topic is not UTF-8"),
        (
            _len_field(2, b"") + _len_field(2, _len_field(3, _entry(b"\xed\xa0\x80", b"v"))),
            "record 1: property name is not UTF-8",
        ),
        (
            _len_field(2, _len_field(3, _entry(b"n", b"\xc0\xaf"))),
            "record 0: property value is not UTF-8",
        ),
        (b"\x02\x00", "field number 0"),
        (b"\x80\x80\x80\x80\x80\x01\x00", "field tag beyond 32 bits"),
        (_len_field(2, b"\x0a\x05ab"), "field runs past its message"),
        (b"\x1b\x08\x01\x1c", "unsupported wire type 3"),
        (b"\x20" + b"\x80" * 10 + b"\x00", "truncated or overlong varint"),
    ],
)
def test_each_refusal_says_why(compiled: ModuleType, raw: bytes, why: str) -> None:
    assert _outcome(compiled, raw) == _outcome(PY, raw) == ("malformed", why)
    with pytest.raises(
        MalformedRequest, match=f"^malformed publish request: {re.escape(why)}$"
    ) as err:
        batch.publish_topic(raw)
    assert err.value.reason == "MALFORMED_REQUEST"
