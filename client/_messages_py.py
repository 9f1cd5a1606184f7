"""The read side's per-message loop, the pure twin of ``client/_messages.c``.

``messages_of`` makes one ``Message`` per wire message of a response holding only the
repeated field, its index and the topic, every other field the marker of one not converted
yet (``client.message`` converts each field on first use). It is the one loop of the
client that runs once per message read, so it has a compiled twin; ``bind`` names the
class both twins build (``message.Message``, which imports this module, so it hands
itself over rather than being imported here), its marker and its lazy slots.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["bind", "messages_of"]

_cls: Any = None
_unset: Any = None
_lazy: tuple[str, ...] = ()


def bind(cls: type, unset: object, lazy: tuple[str, ...]) -> None:
    """The class ``messages_of`` builds: one with the slots ``_batch``, ``_at``,
    ``_topic`` and those named in ``lazy``, each of which a new message holds ``unset``
    in (the marker of a field not converted yet)."""
    global _cls, _unset, _lazy
    for name in ("_batch", "_at", "_topic", *lazy):
        if type(cls.__dict__.get(name)).__name__ != "member_descriptor":
            raise TypeError(f"{cls.__name__} has no slot {name}")
    _cls, _unset, _lazy = cls, unset, tuple(lazy)


def messages_of(batch: Sequence[Any], topic: str) -> list[Any]:
    """One message per entry of ``batch``, none of its fields converted."""
    if _cls is None:
        raise RuntimeError("messages_of before bind")
    new = _cls.__new__
    cls, unset, lazy = _cls, _unset, _lazy
    out: list[Any] = []
    append = out.append
    for at in range(len(batch)):
        msg = new(cls)
        msg._batch = batch
        msg._at = at
        msg._topic = topic
        for name in lazy:
            setattr(msg, name, unset)
        append(msg)
    return out
