"""Kafka's default partitioner: murmur2 against Kafka's own test vectors."""

from __future__ import annotations

import pytest

from compactlog.partitioner import (
    murmur2,
    parse_partition_name,
    partition_for_key,
    partition_name,
    to_positive,
)

# org.apache.kafka.common.utils.UtilsTest#testMurmur2 (clients/src/test/java/...).
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    bytes([ord("a"), ord("b"), ord("c")]): 479470107,
}


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS.items())
def test_murmur2_matches_kafka(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_to_positive_is_a_mask_not_abs() -> None:
    assert to_positive(-(2**31)) == 0  # Integer.MIN_VALUE: abs would overflow in Java
    assert to_positive(-1) == 2**31 - 1
    assert to_positive(5) == 5


def test_partition_for_key() -> None:
    for key, hashed in KAFKA_VECTORS.items():
        assert partition_for_key(key, 7) == (hashed & 0x7FFFFFFF) % 7
    assert partition_for_key(b"", 3) == (murmur2(b"") & 0x7FFFFFFF) % 3


def test_partition_names_round_trip() -> None:
    assert partition_name("prices", 3) == "prices-partition-3"
    assert parse_partition_name("prices-partition-3") == ("prices", 3)
    assert parse_partition_name("a-partition-b-partition-12") == ("a-partition-b", 12)
    assert parse_partition_name("prices-partition-03") is None
    assert parse_partition_name("prices") is None
