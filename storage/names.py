"""Topic and subscription names: checked before anything touches disk."""

from __future__ import annotations

import re

from compactlog.errors import InvalidArgument, InvalidTopicName

_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def check_topic_name(name: str) -> str:
    if not _NAME.fullmatch(name) or name in (".", ".."):
        shown = name if len(name) <= 60 else name[:57] + "..."
        raise InvalidTopicName(
            f"invalid topic name {shown!r}: use 1-249 of [A-Za-z0-9._-], not '.' or '..'"
        )
    return name


def check_subscription_name(name: str) -> str:
    if not _NAME.fullmatch(name) or name in (".", ".."):
        raise InvalidArgument(
            f"invalid subscription name {name[:60]!r}: use 1-249 of [A-Za-z0-9._-]"
        )
    return name
