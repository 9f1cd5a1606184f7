"""Pure-Python twin of ``storage/_publish_check.h``: a PublishRequest's bytes checked once.

The server used to parse every publish with protobuf only to refuse a malformed one and
learn its topic, and then walked the same bytes again to encode the records. This walk
does that check without building a message: it refuses what protobuf's parse refuses
(truncated or overlong varints, fields running past their message, field number 0, tags
past 32 bits, text that is not UTF-8 in the topic or a property's name or value) and
the groups (wire types 3 and 4) that protobuf keeps as unknown fields but the batch codec
cannot copy, so a request it passes encodes without an error. It returns the topic (the
last ``topic`` field, as protobuf keeps it). Both twins refuse with the same text.
"""

from __future__ import annotations

from compactlog.storage.protowire import MalformedPayload, read_varint, skip_field

_MAX_TAG = 0xFFFFFFFF


def _field(buf: bytes, p: int, end: int) -> tuple[int, int, int, int]:
    """The field at ``p``: ``(number, wire type, value start, value end)``; a
    length-delimited value starts after its length."""
    tag, p = read_varint(buf, p, end)
    if tag > _MAX_TAG:
        raise MalformedPayload("field tag beyond 32 bits")
    if tag >> 3 == 0:
        raise MalformedPayload("field number 0")
    wire = tag & 7
    if wire == 2:
        n, s = read_varint(buf, p, end)
        if n > end - s:
            raise MalformedPayload("field runs past its message")
        return tag >> 3, wire, s, s + n
    return tag >> 3, wire, p, skip_field(buf, p, end, wire)


def _text(buf: bytes, start: int, end: int, what: str) -> None:
    try:
        str(buf[start:end], "utf-8")
    except UnicodeDecodeError:
        raise MalformedPayload(f"{what} is not UTF-8") from None


def _message(buf: bytes, p: int, end: int, record: int, depth: int) -> None:
    """A Record (depth 1) or one of its property entries (depth 2) in ``buf[p:end]``."""
    while p < end:
        number, wire, s, q = _field(buf, p, end)
        if wire == 2 and depth == 1 and number == 3:
            _message(buf, s, q, record, 2)
        elif wire == 2 and depth == 2 and number in (1, 2):
            _text(buf, s, q, f"record {record}: property {'name' if number == 1 else 'value'}")
        p = q


def check_publish(request: bytes) -> str:
    """The topic of a PublishRequest's wire bytes, once they are checked (see the
    module's docstring); ``MalformedPayload`` says why they are refused."""
    end = len(request)
    topic = b""
    record = 0
    p = 0
    while p < end:
        number, wire, s, q = _field(request, p, end)
        if wire == 2 and number == 1:
            _text(request, s, q, "topic")
            topic = request[s:q]
        elif wire == 2 and number == 2:
            _message(request, s, q, record, 1)
            record += 1
        p = q
    return str(topic, "utf-8")
