"""What the front checks and learns about the names of spread partitioned topics.

Under partition placement a slot sees only its own part of ``NAME``, so three checks that a
single store makes alone need the front: a topic of its own named like a partition of a
spread ``NAME`` (``NAME-partition-i``, whatever ``i``) is refused, as each store refuses it
for the partitioned topics it holds (checked and made under the front's lock, so no create
or grow of ``NAME`` runs in between); a grow is refused when a topic of its own already has
a new partition's name (each slot of a new partition asked once), before any slot grows;
and a ``NAME`` that ``NAME``'s home slot holds but the index lacks is learnt. The last
happens when the home shard died under a CreateTopic and finished it at its restart (the
call was never answered, so the front never heard): a retry then meets ``ALREADY_EXISTS``
from the home, and the front takes ``NAME`` in and has the repair make the other slots
agree.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import grpc

from compactlog.errors import InvalidTopicName, TopicExists
from compactlog.partitioner import parse_partition_name, partition_name
from compactlog.server.front.partitions import PartitionedIndex
from compactlog.server.front.relay import Ctx, SlotCall
from compactlog.server.rpc.convert import kind_from_pb
from compactlog.storage.partitioned_topics import PartitionedTopic
from compactlog.v1 import compactlog_pb2 as pb

if TYPE_CHECKING:
    from compactlog.server.front.spread.admin import SpreadAdmin, Unary

_GET_TOPIC = "/compactlog.v1.TopicAdmin/GetTopic"
_LIST_TOPICS = "/compactlog.v1.TopicAdmin/ListTopics"


def refuse_a_partition_name(index: PartitionedIndex, name: str) -> None:
    """``INVALID_ARGUMENT`` / ``INVALID_TOPIC_NAME`` for a topic of its own named
    ``NAME-partition-i`` while ``NAME`` is a spread partitioned topic (as
    ``PartitionedNamespace.check_not_a_partition`` refuses it in one store)."""
    parsed = parse_partition_name(name)
    if parsed is None or index.get(parsed[0]) is None:
        return
    base = parsed[0]
    raise InvalidTopicName(
        f"topic name {name!r} is a partition's name of the partitioned topic {base!r}: its "
        f"partitions are made by CreateTopic or AddPartitions of {base!r}, not one by one",
        topic=name,
        partitioned_topic=base,
    )


async def create_plain(
    admin: SpreadAdmin, name: str, request: bytes, context: Ctx, handle: Unary
) -> bytes:
    """A CreateTopic of a topic of its own (``handle``: the front's usual routing). One
    named like a partition (``X-partition-i``) is checked and made under
    ``SpreadAdmin.lock``, so that no create or grow of ``X`` runs between the check
    (``refuse_a_partition_name``) and the make; other names go as they are."""
    if parse_partition_name(name) is None:
        return await handle(request, context)
    async with admin.lock:
        refuse_a_partition_name(admin.index, name)
        return await handle(request, context)


async def refuse_taken_partitions(
    admin: SpreadAdmin, name: str, first: int, total: int, call: SlotCall
) -> None:
    """``ALREADY_EXISTS`` / ``TOPIC_EXISTS`` when a topic of its own holds the name of a
    partition ``first`` .. ``total - 1`` of ``NAME``, so that no slot grows and none takes
    such a topic in. Each slot of a new partition is asked once, whatever the count: its
    ``ListTopics`` of the names starting with ``NAME`` (its record of ``NAME`` among them)."""
    new: dict[int, list[int]] = {}  # slot -> the new partitions it is to hold
    for i in range(first, total):
        new.setdefault(admin.owners.slot_of(partition_name(name, i)), []).append(i)
    request = pb.ListTopicsRequest(prefix=name).SerializeToString()
    slots = sorted(new)
    answers = await asyncio.gather(*(admin.ask(s, _LIST_TOPICS, request, call) for s in slots))
    for slot, answer in zip(slots, answers, strict=True):
        infos = {t.name: t for t in pb.ListTopicsResponse.FromString(answer).topics}
        record = infos.get(name)  # a grow whose end the index never heard made these
        held = record.partitions if record is not None else 0
        for i in new[slot]:
            part = partition_name(name, i)
            if part in infos and i >= held:
                raise TopicExists(
                    f"topic {part!r} already exists as a topic of its own: {name!r} cannot "
                    "take it as a partition (delete it first)",
                    topic=part,
                    partitioned_topic=name,
                )


async def _info(admin: SpreadAdmin, topic: str, call: SlotCall) -> pb.TopicInfo | None:
    """``topic``'s description from its slot; None when it does not exist."""
    request = pb.GetTopicRequest(name=topic).SerializeToString()
    try:
        answer = await admin.ask(admin.owners.slot_of(topic), _GET_TOPIC, request, call)
    except grpc.aio.AioRpcError as exc:
        if exc.code() == grpc.StatusCode.NOT_FOUND:
            return None
        raise
    return pb.TopicInfo.FromString(answer)


async def learn(admin: SpreadAdmin, name: str, call: SlotCall) -> bool:
    """``NAME`` taken into the index (and marked for the repair) when its home slot holds
    it as a partitioned topic the index lacks (module docstring); whether it was."""
    if admin.index.get(name) is not None:
        return False
    try:
        info = await _info(admin, name, call)
    except grpc.aio.AioRpcError:
        return False  # the home is away: the retry answers as the home did
    if info is None or info.partitions < 2:
        return False  # a topic of its own: ALREADY_EXISTS as it is
    admin.index.put(PartitionedTopic(name, info.partitions, kind_from_pb(info.kind)))
    admin.index.suspect(name)
    return True


async def home_decided(admin: SpreadAdmin, name: str, call: SlotCall) -> bool:
    """``NAME``'s home slot, having refused a DeleteTopic, holds no record of it: the
    delete was refused half-way and is decided there (its record is dropped before any
    partition is touched, ``server.admin.partition_changes``)."""
    try:
        return await _info(admin, name, call) is None
    except grpc.aio.AioRpcError:
        return False  # the home is away: nothing known, nothing else asked
