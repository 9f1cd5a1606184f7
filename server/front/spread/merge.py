"""The front's merges of the slots' answers on a spread partitioned topic.

Each slot holding partitions of ``NAME`` answers for its own only; the front
(``front.spread.admin``) folds their ``TopicInfo`` and ``CompactionStatus`` answers here
into the one answer a single store would give, so a client cannot tell where the
partitions are, and builds ``GetPartitionMap`` from the index. Pure functions over protobuf
messages, unit-tested without a server; each fold is described in docs/architecture.md
("The front room, module by module").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from compactlog.errors import CompactlogError
from compactlog.partitioner import partition_name
from compactlog.server.admin.partitioned_compaction import aggregate
from compactlog.storage.slots import Placement, slot_of
from compactlog.v1 import compactlog_pb2 as pb

_SUMMED_STATS = ("entries", "bytes", "ledgers", "segments", "compacted_entries", "compacted_bytes")


def merge_topic_infos(infos: Sequence[pb.TopicInfo], partitions: int) -> pb.TopicInfo:
    """One ``TopicInfo`` of ``NAME`` from its slots' answers, ``NAME``'s own slot first
    (its config is partition 0's). First/last ids are per partition, so left unset, as a
    single store leaves them (``PartitionedNamespace.describe``)."""
    if not infos:
        raise CompactlogError("no slot answered for the partitioned topic")
    first = infos[0]
    out = pb.TopicInfo(name=first.name, kind=first.kind, partitions=partitions)
    out.config.update(first.config)
    out.config_overrides.extend(first.config_overrides)
    for field in _SUMMED_STATS:
        setattr(out.stats, field, sum(getattr(info.stats, field) for info in infos))
    reasons = [info.offline_reason for info in infos if info.offline_reason]
    out.offline_reason = "; ".join(reasons)
    out.offline = any(info.offline for info in infos)
    return out


def merge_topic_lists(
    answers: Sequence[pb.ListTopicsResponse],
    order: Callable[[str, int], Sequence[int]] | None = None,
    slots: Sequence[int] = (),
) -> pb.ListTopicsResponse:
    """Every slot's list (``answers[k]`` from ``slots[k]``) as one, by name. Without
    ``order`` (topic placement) a name is in one slot only; with it, the entries of one
    name (a spread partitioned topic) are merged by ``merge_topic_infos``, in the order
    ``order(name, partitions)`` gives the slots (``PartitionedIndex.slots``)."""
    by_name: dict[str, list[tuple[int, pb.TopicInfo]]] = {}
    for k, answer in enumerate(answers):
        slot = slots[k] if k < len(slots) else k
        for info in answer.topics:
            by_name.setdefault(info.name, []).append((slot, info))
    merged = pb.ListTopicsResponse()
    for name in sorted(by_name):
        entries = by_name[name]
        if order is None or len(entries) == 1:
            merged.topics.extend(info for _, info in entries)
            continue
        partitions = max(info.partitions for _, info in entries)
        rank = {slot: i for i, slot in enumerate(order(name, partitions))}
        entries.sort(key=lambda entry: rank.get(entry[0], len(rank)))
        merged.topics.append(merge_topic_infos([info for _, info in entries], partitions))
    return merged


def partitions_in_slot(
    name: str, partitions: int, slot: int, slot_count: int, placement: Placement
) -> list[int]:
    """The indices of ``name``'s partitions that ``slot`` holds, in order (the order of
    the ``partitions`` a slot's ``CompactionStatus`` lists)."""
    return [
        i
        for i in range(partitions)
        if slot_of(partition_name(name, i), slot_count, placement) == slot
    ]


def merge_compaction(
    answers: Mapping[int, pb.CompactionStatus],
    name: str,
    partitions: int,
    slot_count: int,
    placement: Placement,
) -> pb.CompactionStatus:
    """The aggregate status of ``name`` from its slots' aggregates (slot -> answer):
    each slot's partition statuses are given their indices, all are sorted by index and
    folded by ``admin.partitioned_compaction.aggregate`` (its ``last_error`` names the true
    indices, also when a slot without the record gave no answer)."""
    indexed: list[tuple[int, pb.CompactionStatus]] = []
    for slot, answer in answers.items():
        held = partitions_in_slot(name, partitions, slot, slot_count, placement)
        statuses = list(answer.partitions)
        if not statuses and len(held) == 1:  # a slot may answer one partition plainly
            statuses = [answer]
        if len(statuses) != len(held):
            raise CompactlogError(
                f"slot {slot} answered {len(statuses)} partition statuses of {name!r}, "
                f"it holds {len(held)}"
            )
        indexed.extend(zip(held, statuses, strict=True))
    indexed.sort(key=lambda entry: entry[0])
    return aggregate([status for _, status in indexed], [i for i, _ in indexed])


def partition_map(
    name: str, partitions: int, address_of: Callable[[str], str]
) -> pb.GetPartitionMapResponse:
    """Every partition of ``name`` with the address of the process holding it."""
    return pb.GetPartitionMapResponse(
        partitions=[
            pb.PartitionAddress(partition=i, topic=topic, address=address_of(topic))
            for i, topic in ((i, partition_name(name, i)) for i in range(partitions))
        ]
    )
