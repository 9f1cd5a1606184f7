"""The bytes of the PublishStream requests ``send_async`` builds, a message at a time.

A queued message is written straight into its request's bytes (``Pending.add``), so it
costs no protobuf object and no tuple; the request goes to gRPC as those bytes
(``ClientLog.PublishStreamEncoded``). The compiled twin ``_publish.c`` does the
per-message work; ``_publish_py`` behaves identically (``compactlog.twins``). A message
with properties or an event time is serialized by protobuf first (``encoded``): rarer,
and its map is protobuf's to encode.
"""

from __future__ import annotations

from typing import Any

from compactlog.client import _convert as cv
from compactlog.client import _publish_py
from compactlog.twins import load_twin

__all__ = [
    "CLOSED",
    "COMPILED",
    "CROWDED",
    "WAKE",
    "Pending",
    "call_back",
    "call_back_ids",
    "encoded",
    "request_head",
]

twin, COMPILED = load_twin("compactlog.client._publish", _publish_py)
Pending: Any = twin.Pending
call_back = twin.call_back
call_back_ids = twin.call_back_ids
WAKE: int = twin.WAKE
CROWDED: int = twin.CROWDED
CLOSED: int = twin.CLOSED


def request_head(topic: str) -> bytes:
    """``PublishRequest.topic``: what every request's bytes begin with."""
    name = topic.encode()
    return b"\x0a" + _publish_py.varint(len(name)) + name


def encoded(record: cv.RecordLike) -> bytes:
    """Any record ``publish_request`` takes as a serialized ``Record``."""
    return cv.record_to_pb(record).SerializeToString()
