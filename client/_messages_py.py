"""The per-message loops of the client, the pure twin of ``client/_messages.c``.

``messages_of`` makes one ``Message`` per wire message of a response holding only the
repeated field, its index and the topic, every other field the marker of one not converted
yet (``client.message`` converts each field on first use); ``wire_ids`` reads back the wire
id of each of a consumer's queued acks (a message, or a wire id already), and ``id_lists``
writes them as AcknowledgeList ``ids`` bytes (the compiled twin writes a run of one
response's consecutive messages from its first and last ids). They run once per message
read and once per message acknowledged, so they have a compiled twin; ``bind`` names the
class both twins use (``message.Message``, which imports this module, so it hands itself
over rather than being imported here), its marker and its lazy slots.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from compactlog.v1 import compactlog_pb2 as pb

__all__ = ["bind", "id_lists", "messages_of", "wire_ids"]

_cls: Any = None
_unset: Any = None
_lazy: tuple[str, ...] = ()


def bind(cls: type, unset: object, lazy: tuple[str, ...]) -> None:
    """The class ``messages_of`` builds: one with the slots ``_batch``, ``_at``,
    ``_topic``, ``_wire`` and those named in ``lazy``, each of which a new message holds
    ``unset`` in (the marker of a field not converted yet)."""
    global _cls, _unset, _lazy
    for name in ("_batch", "_at", "_topic", "_wire", *lazy):
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


def wire_ids(items: Iterable[Any]) -> list[Any]:
    """The wire id of each message of ``items`` (its ``_wire``'s, else its response
    entry's); an item that is not a message is a wire id already, and kept."""
    if _cls is None:
        raise RuntimeError("wire_ids before bind")
    cls = _cls
    out: list[Any] = []
    append = out.append
    for item in items:
        if type(item) is not cls:
            append(item)
            continue
        wire = item._wire
        if wire is not _unset:
            append(wire.id)
        elif item._batch is None:
            raise ValueError("a message built from its fields has no wire id")
        else:
            append(item._batch[item._at].id)
    return out


def id_lists(items: Iterable[Any], limit: int) -> list[bytes]:
    """The ids of ``items`` (``wire_ids``) as AcknowledgeListRequest ``ids`` bytes, at most
    ``limit`` ids a chunk."""
    if limit < 1:
        raise ValueError("id_lists: limit >= 1")
    ids = wire_ids(items)
    return [
        pb.AcknowledgeListRequest(ids=ids[at : at + limit]).SerializeToString()
        for at in range(0, len(ids), limit)
    ]
