"""The bytes of the PublishStream requests ``send_async`` builds, a message at a time.

A queued message is written straight into its request's bytes (``append``), so it costs
no protobuf object and no tuple; the request goes to gRPC as those bytes
(``ClientLog.PublishStreamEncoded``). The compiled twin ``_publish.c`` does the
per-message work; ``_publish_py`` behaves identically (``compactlog.twins``). A message
with properties or an event time is encoded by protobuf (``append_record``): rarer, and
its map is protobuf's to encode.
"""

from __future__ import annotations

from compactlog.client import _convert as cv
from compactlog.client import _publish_py
from compactlog.twins import load_twin

__all__ = ["COMPILED", "append", "append_record", "call_back", "request_head"]

twin, COMPILED = load_twin("compactlog.client._publish", _publish_py)
append = twin.append
call_back = twin.call_back


def request_head(topic: str) -> bytes:
    """``PublishRequest.topic``: what every request's bytes begin with."""
    name = topic.encode()
    return b"\x0a" + _publish_py.varint(len(name)) + name


def append_record(buf: bytearray, record: cv.RecordLike) -> None:
    """Add one ``PublishRequest.records`` entry of any record ``publish_request`` takes."""
    data = cv.record_to_pb(record).SerializeToString()
    buf += b"\x12" + _publish_py.varint(len(data)) + data
