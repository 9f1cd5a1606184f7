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

A message read from the server is built over the response's protobuf: ``messages_of`` makes
one ``Message`` per entry of a response's ``messages`` holding only the repeated field and
its index, and each field is converted on its first use and kept (``data()`` never builds
the id, nor ``message_id()`` the properties). That loop has a compiled twin
(``_messages.c``, beside its pure twin ``_messages_py``; ``compactlog.twins``), as has the
acknowledging side's (``wire_ids``, ``id_lists``: the ids of a consumer's queued acks).
A reader or consumer handing out thousands of messages a response then pays for the
fields its caller reads and for nothing else. A message keeps its response alive while it
lives (as a slice would).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from compactlog.client import _messages_py
from compactlog.client.message_id import MessageId
from compactlog.twins import load_twin

if TYPE_CHECKING:
    from compactlog.v1 import compactlog_pb2 as pb

__all__ = ["NULL_VALUE", "Message", "Properties", "Value", "id_lists", "messages_of", "wire_ids"]


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
# the marker of a lazy slot not converted yet, and those slots (a wire message's fields)
_UNSET: Final[Any] = object()
_LAZY: Final = ("_wire", "_id", "_key", "_value", "_props", "_times")


class Message:
    """One message as read. ``key`` is ``None`` when absent (keyless).

    Built eagerly from its fields (``Message(id, key, value, ...)``), or over a wire
    message (``messages_of``, ``Message.of_wire``) whose fields it converts when first
    asked. The slots in ``_LAZY`` are the wire message and the converted fields; one
    holding ``_UNSET`` is not converted yet (a test of identity: an empty slot's
    AttributeError cost about a microsecond a field)."""

    __slots__ = ("_at", "_batch", "_id", "_key", "_props", "_times", "_topic", "_value", "_wire")

    _batch: Sequence[pb.Message] | None
    _at: int
    _wire: pb.Message
    _topic: str
    _id: MessageId
    _key: bytes | None
    _value: Value | _NullValue
    _props: Properties
    _times: tuple[int, int]

    def __init__(
        self,
        id: MessageId | tuple[int, int],
        key: bytes | None,
        value: bytes | _NullValue | None,
        properties: Mapping[str, str] | None = None,
        publish_time_ms: int = 0,
        event_time_ms: int = 0,
        topic: str = "",
    ) -> None:
        self._batch = None
        self._wire = _UNSET
        self._id = id if type(id) is MessageId else MessageId.of(id)
        self._key = key
        self._value = _value_of(value)
        self._props = Properties(properties) if properties else _NO_PROPERTIES
        self._times = (publish_time_ms, event_time_ms)
        self._topic = topic

    @classmethod
    def of_wire(cls, wire: pb.Message, topic: str = "") -> Message:
        """A message over one wire message, its fields converted when first asked."""
        self = cls.__new__(cls)
        self._batch = None
        self._wire = wire
        self._id = self._key = self._value = self._props = self._times = _UNSET
        self._topic = topic
        return self

    # -- the wire message and its fields, each converted once --------------------------------

    def _pb(self) -> pb.Message:
        wire = self._wire
        if wire is _UNSET:
            assert self._batch is not None
            wire = self._wire = self._batch[self._at]
        return wire

    def response(self) -> Sequence[pb.Message] | None:
        """The response's messages this message was made from (``messages_of``); None for
        one built from its fields or over one wire message."""
        return self._batch

    def wire_id(self) -> pb.MessageId | None:
        """The id as the server sent it, with no conversion (what an ack sends back); None
        for a message built from its fields."""
        if self._batch is None and self._wire is _UNSET:
            return None
        return self._pb().id

    @property
    def id(self) -> MessageId:
        made = self._id
        if made is _UNSET:
            mid = self._pb().id
            made = self._id = MessageId._of_wire(mid.ledger_id, mid.entry_id, mid.partition)
        return made

    @property
    def key(self) -> bytes | None:
        key = self._key
        if key is _UNSET:
            key = self._key = _key_of(self._pb())
        return key

    @property
    def value(self) -> Value | _NullValue:
        value = self._value
        if value is _UNSET:
            data = _value_of_wire(self._pb())
            value = self._value = NULL_VALUE if data is None else Value(data)
        return value

    @property
    def properties(self) -> Properties:
        props = self._props
        if props is _UNSET:
            wire = self._pb().properties
            props = self._props = Properties(wire) if wire else _NO_PROPERTIES
        return props

    @property
    def publish_time_ms(self) -> int:
        return self._time_fields()[0]

    @property
    def event_time_ms(self) -> int:
        return self._time_fields()[1]

    def _time_fields(self) -> tuple[int, int]:
        times = self._times
        if times is _UNSET:
            wire = self._pb()
            times = self._times = (wire.publish_time_ms, wire.event_time_ms)
        return times

    @property
    def topic(self) -> str:
        return self._topic

    @property
    def is_tombstone(self) -> bool:
        """A keyed record with a null value deletes its key on both topic kinds."""
        return self.key is not None and self.value is NULL_VALUE

    # -- pulsar-client's accessors ---------------------------------------------------------

    def data(self) -> bytes | None:
        """The value's bytes; ``None`` for a null value (a tombstone when keyed)."""
        value = self._value
        if value is _UNSET:  # not converted: the wire's bytes, without a Value
            wire = self._wire
            if wire is _UNSET:  # ``_pb`` inlined: once a message read
                wire = self._wire = self._batch[self._at]  # type: ignore[index]
            data: bytes = wire.value  # ``_value_of_wire`` inlined
            return data if data or wire.HasField("value") else None
        return value()

    def partition_key(self) -> str | None:
        """The key as text (UTF-8, undecodable bytes escaped); ``None`` when keyless."""
        key = self._key
        if key is _UNSET:  # ``key`` and ``_pb`` inlined: once a message read
            wire = self._wire
            if wire is _UNSET:
                wire = self._wire = self._batch[self._at]  # type: ignore[index]
            key = wire.key  # ``_key_of`` inlined
            key = self._key = key if key or wire.HasField("key") else None
        if key is None:
            return None
        return key.decode("utf-8", errors="surrogateescape")

    def message_id(self) -> MessageId:
        return self.id

    def ordering_key(self) -> str | None:
        """Always ``None``: compactlog has no Key_Shared ordering keys (docs/ecosystem.md)."""
        return None

    def redelivery_count(self) -> int:
        """How many times the server gave this message out before (the subscription's
        count, Pulsar's ``redeliveryCount``); 0 for a reader's messages."""
        if self._batch is None and self._wire is _UNSET:
            return 0  # built from fields: never delivered
        return self._pb().redelivery_count

    def publish_timestamp(self) -> int:
        """Milliseconds since the epoch when the server stored it."""
        return self.publish_time_ms

    def event_timestamp(self) -> int:
        """The producer's timestamp in milliseconds; the publish time when it gave none."""
        return self.event_time_ms

    def topic_name(self) -> str:
        """The topic this message was read from (as the reader or consumer named it)."""
        return self._topic

    # -- a value: compared, printed and pickled by its fields ------------------------------

    def _fields(self) -> tuple[Any, ...]:
        return (
            self.id,
            self.key,
            self.value,
            self.properties,
            self.publish_time_ms,
            self.event_time_ms,
            self._topic,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # properties are a dict, as before

    def __repr__(self) -> str:
        names = ("id", "key", "value", "properties", "publish_time_ms", "event_time_ms", "topic")
        shown = ", ".join(f"{n}={v!r}" for n, v in zip(names, self._fields(), strict=True))
        return f"Message({shown})"

    def __reduce__(self) -> tuple[Any, ...]:
        args = (self.id, self.key, self.data(), dict(self.properties))
        return (Message, (*args, self.publish_time_ms, self.event_time_ms, self._topic))


def _key_of(wire: pb.Message) -> bytes | None:
    """The wire message's key; None when it has none. Its presence is asked only of an
    empty key (one attribute read where ``HasField`` would be two calls)."""
    key: bytes = wire.key
    return key if key or wire.HasField("key") else None


def _value_of_wire(wire: pb.Message) -> bytes | None:
    """The wire message's value; None when it is null (as ``_key_of``)."""
    value: bytes = wire.value
    return value if value or wire.HasField("value") else None


def _value_of(value: bytes | _NullValue | None) -> Value | _NullValue:
    if value is None or isinstance(value, _NullValue):
        return NULL_VALUE
    return value if type(value) is Value else Value(value)


_twin, COMPILED = load_twin("compactlog.client._messages", _messages_py)
_twin.bind(Message, _UNSET, _LAZY)
_messages_of = _twin.messages_of


_wire_ids = _twin.wire_ids
_id_lists = _twin.id_lists


def wire_ids(queued: Iterable[pb.MessageId | Message]) -> list[pb.MessageId]:
    """The wire id of each message of ``queued`` (one read from the server), a wire id
    kept as it is: the loop that runs once per message acknowledged (``_messages``)."""
    ids: list[pb.MessageId] = _wire_ids(queued)
    return ids


def id_lists(queued: Sequence[pb.MessageId | Message], limit: int) -> list[bytes]:
    """The ids of ``queued`` (as ``wire_ids``) written as AcknowledgeListRequest ``ids``
    bytes, at most ``limit`` a chunk: a run of one response's consecutive messages is
    written from its first and last ids (``_messages``)."""
    chunks: list[bytes] = _id_lists(queued, limit)
    return chunks


def messages_of(batch: Sequence[pb.Message], topic: str = "") -> list[Message]:
    """One ``Message`` per wire message of a response, none of its fields converted yet:
    the one loop of the client that runs once per message read (``_messages``)."""
    made: list[Message] = _messages_of(batch, topic)
    return made
