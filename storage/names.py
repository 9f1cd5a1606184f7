"""Topic and subscription names: checked before anything touches disk."""

from __future__ import annotations

import re

from compactlog.errors import InvalidTopicName, MalformedRequest, ReservedSubscription
from compactlog.storage.cursor import RESERVED_SUBSCRIPTION_PREFIX

_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def check_topic_name(name: str) -> str:
    if not _NAME.fullmatch(name) or name in (".", ".."):
        shown = name if len(name) <= 60 else name[:57] + "..."
        raise InvalidTopicName(
            f"invalid topic name {shown!r}: use 1-249 of [A-Za-z0-9._-], not '.' or '..'",
            topic=shown,
        )
    return name


def check_subscription_name(name: str) -> str:
    if not _NAME.fullmatch(name) or name in (".", ".."):
        raise MalformedRequest(
            f"invalid subscription name {name[:60]!r}: use 1-249 of [A-Za-z0-9._-]",
            subscription=name[:60],
        )
    return name


def check_client_subscription(name: str, topic: str) -> str:
    """A subscription a client names in Consume or Acknowledge: a valid name, and not one
    of the server's own (``__compaction`` ...), which only the server moves."""
    check_subscription_name(name)
    if name.startswith(RESERVED_SUBSCRIPTION_PREFIX):
        raise ReservedSubscription(
            f"subscription {name!r} is the server's own (names beginning with "
            f"{RESERVED_SUBSCRIPTION_PREFIX!r} are reserved)",
            topic=topic,
            subscription=name,
        )
    return name
