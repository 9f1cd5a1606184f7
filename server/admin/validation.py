"""A TopicAdmin change checked whole and not made: the validate-only mark of a call.

Kafka's CreateTopics and CreatePartitions take ``validate_only``: the answer the change
would get, nothing changed. Under partition placement such a change spans several slots
and the front's own checks (``server.front.spread``), so a Kafka broker validates it by
making the very front call the change makes, marked with ``VALIDATE_ONLY_KEY`` in its
metadata: the front runs its usual path and passes the mark on to each slot, whose
CreateTopic and AddPartitions then run every check of the change and create nothing.
The proto has no such field (gRPC callers have no validate-only calls); the mark is
metadata between the server's own processes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

VALIDATE_ONLY_KEY = "x-compactlog-validate-only"
VALIDATE_ONLY = ((VALIDATE_ONLY_KEY, "1"),)


def validate_only(metadata: Iterable[tuple[str, Any]] | None) -> bool:
    """Whether a call's ``metadata`` asks for its change checked, not made."""
    return any(key == VALIDATE_ONLY_KEY for key, _value in metadata or ())
