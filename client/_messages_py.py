"""The read side's per-message work, the pure twin of ``client/_messages.c``.

``messages_of`` makes one ``Message`` per wire message of a response holding only the
repeated field, its index and the topic (``client.message`` converts each field on first
use). It is the one loop of the client that runs once per message read, so it has a
compiled twin; ``bind`` names the class both twins build (``message.Message``, which
imports this module, so it hands itself over rather than being imported here).

``Receiver`` is a consumer's ``receive`` in its usual case, a call per message: while the
buffer holds more than ``low_water`` messages and no ack failure waits, the next one is
popped; anything else goes to the consumer's own ``receive`` (``slow``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Receiver", "bind", "messages_of"]

_cls: Any = None


def bind(cls: type) -> None:
    """The class ``messages_of`` builds: one with the slots ``_batch``, ``_at``, ``_topic``."""
    global _cls
    for name in ("_batch", "_at", "_topic"):
        if type(cls.__dict__.get(name)).__name__ != "member_descriptor":
            raise TypeError(f"{cls.__name__} has no slot {name}")
    _cls = cls


def messages_of(batch: Sequence[Any], topic: str) -> list[Any]:
    """One message per entry of ``batch``, none of its fields converted."""
    if _cls is None:
        raise RuntimeError("messages_of before bind")
    new = _cls.__new__
    cls = _cls
    out: list[Any] = []
    append = out.append
    for at in range(len(batch)):
        msg = new(cls)
        msg._batch = batch
        msg._at = at
        msg._topic = topic
        append(msg)
    return out


class Receiver:
    """``Receiver(buffer, acks, slow, low_water)``: called as the consumer's ``receive``."""

    __slots__ = ("_acks", "_buffer", "_slow", "low_water")

    def __init__(
        self, buffer: deque[Any], acks: Any, slow: Callable[..., Any], low_water: int
    ) -> None:
        self._buffer = buffer
        self._acks = acks
        self._slow = slow
        self.low_water = low_water

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._acks.failure is None and len(self._buffer) > self.low_water:
            return self._buffer.popleft()
        return self._slow(*args, **kwargs)
