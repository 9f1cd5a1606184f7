"""``Message``: one message as read, with pulsar-client's accessors and the older fields.

pulsar-client reads a message through methods (``msg.data()``, ``msg.value()``,
``msg.partition_key()``, ``msg.message_id()``, ``msg.properties()``...); this client's
first callers read fields (``msg.id``, ``msg.key``, ``msg.value``, ``msg.properties``).
Both work. Two names are both: ``value`` and ``properties`` are objects that compare,
hash and behave as the bytes / dict they hold and, called, return it, so ``msg.value ==
b"v"`` and ``msg.value() == b"v"`` hold alike. A null value is ``NULL_VALUE``: it
equals ``None``, is false, and ``msg.value()`` returns ``None``; code written for the
field form tests ``msg.is_tombstone`` or ``msg.data() is None`` rather than ``msg.value
is None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from compactlog.client.message_id import MessageId

__all__ = ["NULL_VALUE", "Message", "Properties", "Value"]


class Value(bytes):
    """A message's value: bytes, and callable as pulsar-client's ``msg.value()``."""

    __slots__ = ()

    def __call__(self) -> bytes:
        return bytes(self)


class _NullValue:
    """A null value (tombstone): equal to ``None``, false, ``()`` gives ``None``."""

    __slots__ = ()

    def __call__(self) -> None:
        return None

    def __eq__(self, other: object) -> bool:
        return other is None or other is self

    def __hash__(self) -> int:
        return hash(None)

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "None"


NULL_VALUE: Final = _NullValue()


class Properties(dict[str, str]):
    """A message's properties: a dict, and callable as ``msg.properties()``."""

    __slots__ = ()

    def __call__(self) -> dict[str, str]:
        return dict(self)


_NO_PROPERTIES: Final = Properties()


@dataclass(frozen=True, slots=True, init=False)
class Message:
    """One message as read. ``key`` is ``None`` when absent (keyless)."""

    id: MessageId
    key: bytes | None
    value: Value | _NullValue
    properties: Properties
    publish_time_ms: int
    event_time_ms: int
    topic: str
    redeliveries: int = field(compare=False)  # a redelivery is the same message

    def __init__(
        self,
        id: MessageId | tuple[int, int],
        key: bytes | None,
        value: bytes | _NullValue | None,
        properties: Mapping[str, str] | None = None,
        publish_time_ms: int = 0,
        event_time_ms: int = 0,
        topic: str = "",
        redeliveries: int = 0,
    ) -> None:
        # Runs once per message read: type checks before calls, no helper on the usual path.
        put = object.__setattr__
        put(self, "id", id if type(id) is MessageId else MessageId.of(id))
        put(self, "key", key)
        if value is None or isinstance(value, _NullValue):
            put(self, "value", NULL_VALUE)
        else:
            put(self, "value", value if type(value) is Value else Value(value))
        put(self, "properties", Properties(properties) if properties else _NO_PROPERTIES)
        put(self, "publish_time_ms", publish_time_ms)
        put(self, "event_time_ms", event_time_ms)
        put(self, "topic", topic)
        put(self, "redeliveries", redeliveries)

    @property
    def is_tombstone(self) -> bool:
        """A keyed record with a null value deletes its key on both topic kinds."""
        return self.key is not None and self.value is NULL_VALUE

    # -- pulsar-client's accessors ---------------------------------------------------------

    def data(self) -> bytes | None:
        """The value's bytes; ``None`` for a null value (a tombstone when keyed)."""
        return self.value()

    def partition_key(self) -> str | None:
        """The key as text (UTF-8, undecodable bytes escaped); ``None`` when keyless."""
        if self.key is None:
            return None
        return self.key.decode("utf-8", errors="surrogateescape")

    def message_id(self) -> MessageId:
        return self.id

    def ordering_key(self) -> str | None:
        """Always ``None``: compactlog has no Key_Shared ordering keys (docs/ecosystem.md)."""
        return None

    def redelivery_count(self) -> int:
        """How many times the subscription gave this message out before (the wire's
        ``Message.redelivery_count``, Pulsar's count); 0 for a reader's messages."""
        return self.redeliveries

    def publish_timestamp(self) -> int:
        """Milliseconds since the epoch when the server stored it."""
        return self.publish_time_ms

    def event_timestamp(self) -> int:
        """The producer's timestamp in milliseconds; the publish time when it gave none."""
        return self.event_time_ms

    def topic_name(self) -> str:
        """The topic this message was read from (as the reader or consumer named it)."""
        return self.topic

    def __reduce__(self) -> tuple[Any, ...]:
        args = (self.id, self.key, self.data(), dict(self.properties))
        times = (self.publish_time_ms, self.event_time_ms)
        return (Message, (*args, *times, self.topic, self.redeliveries))
