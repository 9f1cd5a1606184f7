"""Seeded, reproducible workloads and the latest-value-per-key view they must leave.

A workload is a recipe, not data: the same (workload, seed) always yields the same records,
so both strategies publish byte-identical streams and the expected view can be computed
without a server. Record ``i`` has key ``key-%08d`` (index drawn uniformly or from a Zipf
law over ``keys``), or no key (a ``keyless_share`` of records), and either a null value
(a ``tombstone_share`` of keyed records) or ``value_bytes`` bytes starting with ``i`` in
ASCII, so every value is distinct and a wrong winner cannot hide.

Empty values are never generated: LEDGER topics read them as tombstones (Pulsar) and
SEGMENTED topics as ordinary values (Kafka), which would make the cross-check compare
two different contracts rather than two implementations.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from compactlog.client.types import Message

Distribution = Literal["uniform", "zipf"]
Pattern = Literal["update-heavy", "append-only"]
View = dict[bytes, bytes]
"""Latest value per key, values replaced by an 8-byte BLAKE2b digest to keep it small."""

NO_KEY = -1
TOMBSTONE = 1
KEYLESS = 2


@dataclass(frozen=True)
class Workload:
    """One workload: its shape and size. ``keys`` is the key-space size."""

    name: str
    records: int
    keys: int
    value_bytes: int = 100
    distribution: Distribution = "uniform"
    pattern: Pattern = "update-heavy"
    tombstone_share: float = 0.0
    keyless_share: float = 0.0
    zipf_s: float = 1.1

    def __post_init__(self) -> None:
        if self.records < 1 or self.keys < 1 or self.value_bytes < 12:
            raise ValueError(f"{self.name}: records, keys >= 1 and value_bytes >= 12")
        if self.pattern == "append-only" and (self.keys < self.records or self.tombstone_share):
            raise ValueError(f"{self.name}: append-only means one record per key, no tombstones")

    @property
    def record_bytes(self) -> int:
        """Key + value bytes of a keyed value record (the unit of the MB/s figures)."""
        return len(b"key-00000000") + self.value_bytes

    @property
    def publish_batch(self) -> int:
        """Records per Publish request: 1000 (the targets' batch) or fewer so a request
        stays under 512 KB, below the default ``max.message.bytes`` of a record batch."""
        return max(1, min(1000, 512_000 // self.record_bytes))


def segment_bytes_for(workload: Workload) -> int:
    """About 20 segments: the cleaner needs closed segments (the active one is never
    cleaned), and each segment costs it an fsync and renames, as in Kafka."""
    total = workload.records * workload.record_bytes
    return max(64 * 1024, min(64 << 20, total // 20))


def segmented_compact_config(workload: Workload) -> dict[str, object]:
    """Config of a SEGMENTED topic whose one explicit ``Compact`` is the whole cleaning.

    file.delete.delay.ms=0: replaced segments leave the disk at the swap, so "bytes on
    disk after" is not inflated by files waiting for deletion. min.cleanable.dirty.ratio=1:
    no background pass while publishing, so the measured pass is the whole cleaning, as
    the two-phase run is.
    """
    return {
        "cleanup.policy": "compact",
        "segment.bytes": segment_bytes_for(workload),
        "file.delete.delay.ms": 0,
        "min.cleanable.dirty.ratio": 1,
    }


# The first workload of every profile is the targets' workload (issues 2-4: 100 B values,
# one key per ten records, no tombstones): the summary table reads its figures.
PROFILES: dict[str, tuple[Workload, ...]] = {
    "quick": (
        Workload("uniform-100B", 4000, 400),
        Workload(
            "zipf-100B-tombstones",
            3000,
            500,
            distribution="zipf",
            tombstone_share=0.05,
            keyless_share=0.02,
        ),
        Workload("append-only-100B", 2000, 2000, pattern="append-only", keyless_share=0.01),
        Workload("uniform-10KB", 300, 60, value_bytes=10_000, tombstone_share=0.05),
    ),
    "default": (
        Workload("uniform-100B", 200_000, 20_000),
        Workload(
            "zipf-100B-tombstones",
            200_000,
            50_000,
            distribution="zipf",
            tombstone_share=0.05,
            keyless_share=0.02,
        ),
        Workload("append-only-100B", 100_000, 100_000, pattern="append-only", keyless_share=0.01),
        Workload("uniform-10KB", 5_000, 1_000, value_bytes=10_000, tombstone_share=0.05),
    ),
    "full": (
        Workload("uniform-100B", 1_000_000, 100_000),
        Workload(
            "zipf-100B-tombstones",
            2_000_000,
            200_000,
            distribution="zipf",
            tombstone_share=0.05,
            keyless_share=0.02,
        ),
        Workload(
            "append-only-100B", 1_000_000, 1_000_000, pattern="append-only", keyless_share=0.01
        ),
        Workload("uniform-10KB", 100_000, 10_000, value_bytes=10_000, tombstone_share=0.05),
    ),
}


def _rng(workload: Workload, seed: int) -> np.random.Generator:
    # crc32 rather than hash(): str hashes change between processes.
    return np.random.default_rng([seed, zlib.crc32(workload.name.encode())])


def plan(workload: Workload, seed: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int8]]:
    """Key index per record (``NO_KEY`` for keyless) and kind (0 value, TOMBSTONE, KEYLESS)."""
    rng = _rng(workload, seed)
    n = workload.records
    if workload.pattern == "append-only":
        key_idx = np.arange(n, dtype=np.int64)
    elif workload.distribution == "zipf":
        weights = 1.0 / np.arange(1, workload.keys + 1, dtype=np.float64) ** workload.zipf_s
        hot = rng.permutation(workload.keys)  # hot keys spread over the key space
        key_idx = hot[rng.choice(workload.keys, size=n, p=weights / weights.sum())]
    else:
        key_idx = rng.integers(0, workload.keys, size=n, dtype=np.int64)
    draw = rng.random(n)
    kind = np.zeros(n, dtype=np.int8)
    kind[draw < workload.tombstone_share] = TOMBSTONE
    kind[draw >= 1.0 - workload.keyless_share] = KEYLESS
    key_idx = np.where(kind == KEYLESS, NO_KEY, key_idx).astype(np.int64)
    return key_idx, kind


def _key(k: int) -> bytes:
    return b"key-%08d" % k


def _value(i: int, size: int) -> bytes:
    head = b"%010d:" % i
    return head + b"x" * (size - len(head))


def batches(workload: Workload, seed: int) -> list[list[tuple[bytes | None, bytes | None]]]:
    """The records as ``(key, value)`` publish batches, built up front so that timing the
    publish measures the server, not this generator."""
    key_idx, kind = plan(workload, seed)
    out: list[list[tuple[bytes | None, bytes | None]]] = []
    size, batch = workload.value_bytes, workload.publish_batch
    for start in range(0, workload.records, batch):
        chunk: list[tuple[bytes | None, bytes | None]] = []
        for i in range(start, min(start + batch, workload.records)):
            k, t = int(key_idx[i]), int(kind[i])
            chunk.append(
                (None if k == NO_KEY else _key(k), None if t == TOMBSTONE else _value(i, size))
            )
        out.append(chunk)
    return out


def digest(value: bytes) -> bytes:
    return hashlib.blake2b(value, digest_size=8).digest()


def expected_view(workload: Workload, seed: int) -> View:
    """Latest value per key of the whole stream: tombstones delete, keyless records don't count."""
    key_idx, kind = plan(workload, seed)
    keyed = np.flatnonzero(key_idx != NO_KEY)
    # Last occurrence of each key: unique over the reversed keyed indexes.
    rev = keyed[::-1]
    _uniq, first_in_rev = np.unique(key_idx[rev], return_index=True)
    view: View = {}
    for i in rev[first_in_rev].tolist():
        if kind[i] != TOMBSTONE:
            view[_key(int(key_idx[i]))] = digest(_value(i, workload.value_bytes))
    return view


def fold(messages: Iterable[tuple[bytes | None, bytes | None]]) -> tuple[View, int, int]:
    """Fold a read into a view; also the message count and key + value bytes read."""
    view: View = {}
    count = nbytes = 0
    for key, value in messages:
        count += 1
        nbytes += len(key or b"") + len(value or b"")
        if key is None:
            continue
        if value is None:
            view.pop(key, None)
        else:
            view[key] = digest(value)
    return view, count, nbytes


def view_digest(view: View) -> str:
    """One SHA-256 over the sorted view: equal views, equal digests."""
    h = hashlib.sha256()
    for key in sorted(view):
        h.update(len(key).to_bytes(4, "big") + key + view[key])
    return h.hexdigest()


def pairs(messages: Iterable[Message]) -> Iterator[tuple[bytes | None, bytes | None]]:
    """``(key, value)`` of each message read."""
    for msg in messages:
        yield msg.key, msg.data()


@dataclass(frozen=True)
class CrossCheck:
    """Did every strategy leave the latest-value-per-key view the workload implies?"""

    identical: bool
    keys: int
    digests: dict[str, str]
    differing_keys: list[str]
    """Up to ten keys whose latest value differs somewhere (empty when identical)."""


def compare_views(views: dict[str, View], expected: View) -> CrossCheck:
    """Compare each strategy's view with the others and with the workload's own answer."""
    every = {"expected": expected, **views}
    digests = {name: view_digest(view) for name, view in every.items()}
    differing: list[str] = []
    if len(set(digests.values())) > 1:
        all_keys = set().union(*every.values())
        for key in sorted(all_keys):
            if len({view.get(key) for view in every.values()}) > 1:
                differing.append(key.decode(errors="replace"))
                if len(differing) == 10:
                    break
    return CrossCheck(not differing, len(expected), digests, differing)
