"""Kafka's default partitioner, shared by the server and the client library.

A keyed record of a partitioned topic goes to ``toPositive(murmur2(key)) % partitions``
(``org.apache.kafka.common.utils.Utils.murmur2``: MurmurHash2, 32-bit, seed
``0x9747b28c``; ``toPositive(x) = x & 0x7fffffff``), so a key lands on the partition a
Kafka producer would pick for the same bytes. Partition ``i`` of topic ``NAME`` is the
ordinary topic ``NAME-partition-i`` (Pulsar's naming). Pure Python and free of the
protobuf, so every layer may import it.
"""

from __future__ import annotations

import re

__all__ = [
    "PARTITION_SUFFIX",
    "murmur2",
    "parse_partition_name",
    "partition_for_key",
    "partition_name",
    "to_positive",
]

SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
PARTITION_SUFFIX = "-partition-"
_PARTITION = re.compile(r"(.+)-partition-(0|[1-9][0-9]{0,8})")


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2(data)``: a signed 32-bit int, as Java returns it."""
    length = len(data)
    h = (SEED ^ length) & _MASK
    whole = length & ~3
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: the low 31 bits (not ``abs``: MIN_VALUE stays >= 0)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key``."""
    return to_positive(murmur2(key)) % partitions


def partition_name(topic: str, index: int) -> str:
    """``NAME-partition-i``: the ordinary topic holding partition ``index`` of ``topic``."""
    return f"{topic}{PARTITION_SUFFIX}{index}"


def parse_partition_name(name: str) -> tuple[str, int] | None:
    """``(NAME, i)`` for a name of the form ``NAME-partition-i``, else None (whether NAME
    is a partitioned topic is the metadata's to say, not the name's)."""
    found = _PARTITION.fullmatch(name)
    if found is None:
        return None
    return found.group(1), int(found.group(2))
