"""Phase one on Spark: the latest entry of every key as a distributed aggregation.

Input is the ``compactlog_keys`` source over the run's segments (keys, flags, sizes;
no payloads). One shuffle groups by key (keyless entries form the null group) and keeps
the greatest ``(seg, pos)`` with its flags, the entry count, bytes and tombstones; that
table — one row per distinct key, on the executors — is all Spark holds. The winners
(latest entry of a key, unless a tombstone — a winning tombstone too when the run may keep
it, for phase two to ask ``TombstoneRetention``; every keyless entry when
``compaction.retain.null.key``) become bitmap chunks on the executors, and only those
chunks reach the driver: one bit per input entry (``BitmapWinners``), which the
compactor's phase two reads as it reads the local engine's offset map, whatever the key
space. The figures are those of ``two_phase.phase_one.find_winners``, so the run's
``CompactionRun`` matches too. Spark has no memory budget to fill: it always covers the
whole input. The run can be cancelled before and after the Spark job, not inside it.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped]
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from compactlog.compactor.progress import PHASE_ONE, NoControl, Progress, RunControl
from compactlog.compactor.two_phase.phase_one import BitmapWinners
from compactlog.compactor.two_phase.storage import CompactionInput, CompactionStorage
from compactlog.storage.codec import HAS_KEY, VALUE_NON_EMPTY

CHUNK_ENTRIES = 1 << 16  # entries per bitmap chunk built on an executor (8 KiB of bits)
MIN_ENTRIES_PER_PARTITION = 10_000
MAX_ENTRIES_PER_PARTITION = 1_000_000
BITMAP_SCHEMA = "seg INT, chunk LONG, bits BINARY"


def _chunk_bits(pdf: pd.DataFrame) -> pd.DataFrame:
    """One (segment, chunk) group of winner positions → its bitmap (little-endian bits)."""
    seg = int(pdf["seg"].iloc[0])
    chunk = int(pdf["chunk"].iloc[0])
    flags = np.zeros(CHUNK_ENTRIES, dtype=np.uint8)
    flags[pdf["pos"].to_numpy(dtype=np.int64) - chunk * CHUNK_ENTRIES] = 1
    bits = np.packbits(flags, bitorder="little").tobytes()
    return pd.DataFrame({"seg": [seg], "chunk": [chunk], "bits": [bits]})


class SparkPhaseOne:
    """A ``PhaseOne`` for ``TwoPhaseCompactor``: call it with (storage, input, budget,
    control)."""

    def __init__(
        self,
        spark: SparkSession,
        server: str,
        token: str | None = None,
        tls_ca: str | None = None,
    ) -> None:
        self.spark = spark
        self.server = server
        self.security_options = {"token": token or "", "tlsCa": tls_ca or ""}

    def keys(self, inp: CompactionInput) -> DataFrame:
        total = sum(seg.length for seg in inp.segments)
        slots = max(1, int(self.spark.sparkContext.defaultParallelism)) * 2
        size = min(
            MAX_ENTRIES_PER_PARTITION, max(MIN_ENTRIES_PER_PARTITION, math.ceil(total / slots))
        )
        return (
            self.spark.read.format("compactlog_keys")
            .option("server", self.server)
            .option("topic", inp.topic)
            .option("segments", json.dumps([list(seg) for seg in inp.segments]))
            .option("entriesPerPartition", str(size))
            .options(**self.security_options)
            .load()
        )

    def __call__(
        self,
        storage: CompactionStorage,
        inp: CompactionInput,
        budget_bytes: int,
        control: RunControl | None = None,
    ) -> BitmapWinners:
        control = control or NoControl()
        total = inp.entries
        control.report(Progress(PHASE_ONE, 0, total))
        control.check()
        keys = self.keys(inp)
        live = (F.col("flags").bitwiseAND(VALUE_NON_EMPTY) != 0).cast("int")
        keyed = F.col("flags").bitwiseAND(HAS_KEY) != 0
        groups = keys.groupBy("key").agg(
            F.max(F.struct("seg", "pos", "flags")).alias("w"),
            F.count(F.lit(1)).alias("n"),
            F.sum("size").alias("bytes"),
            F.sum(F.when(keyed, 1 - live).otherwise(0)).alias("tombstones"),
        )
        groups = groups.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            totals = self._totals(groups)
            won = F.col("key").isNotNull()
            if inp.tombstones is None:  # else phase two asks the run's retention of each
                won = won & (F.col("w.flags").bitwiseAND(VALUE_NON_EMPTY) != 0)
            winners = groups.where(won).select(
                F.col("w.seg").alias("seg"), F.col("w.pos").alias("pos")
            )
            if inp.retain_null_key:
                winners = winners.unionByName(
                    keys.where(F.col("key").isNull()).select("seg", "pos")
                )
            chunks = self._chunks(winners)
        finally:
            groups.unpersist()
        result = _assemble(inp, chunks)
        keyless = int(totals["keyless"] or 0)
        result.read = int(totals["read"] or 0)
        result.bytes_in = int(totals["bytes"] or 0)
        result.tombstones = int(totals["tombstones"] or 0)
        result.distinct_keys = int(totals["distinct"] or 0)
        result.kept = int(totals["live"] or 0) + (keyless if inp.retain_null_key else 0)
        result.keyless_dropped = 0 if inp.retain_null_key else keyless
        result.peak_bytes = len(result.bits)
        control.report(Progress(PHASE_ONE, result.read, total, bytes_read=result.bytes_in))
        control.check()
        if hasattr(storage, "phase_one"):
            storage.phase_one = result  # the gRPC adapter sends the figures with the commit
        return result

    @staticmethod
    def _totals(groups: DataFrame) -> dict[str, Any]:
        is_key = F.col("key").isNotNull()
        row = groups.agg(
            F.sum("n").alias("read"),
            F.sum("bytes").alias("bytes"),
            F.sum("tombstones").alias("tombstones"),
            F.sum(F.when(~is_key, F.col("n")).otherwise(0)).alias("keyless"),
            F.count(F.when(is_key, 1)).alias("distinct"),
            F.count(F.when(is_key & (F.col("w.flags").bitwiseAND(VALUE_NON_EMPTY) != 0), 1)).alias(
                "live"
            ),
        ).first()
        return row.asDict() if row is not None else {}

    @staticmethod
    def _chunks(winners: DataFrame) -> list[tuple[int, int, bytes]]:
        shift = CHUNK_ENTRIES.bit_length() - 1
        rows = (
            winners.withColumn("chunk", F.shiftright("pos", shift))
            .groupBy("seg", "chunk")
            .applyInPandas(_chunk_bits, schema=BITMAP_SCHEMA)
            .collect()
        )
        return [(int(r["seg"]), int(r["chunk"]), bytes(r["bits"])) for r in rows]


def _assemble(inp: CompactionInput, chunks: list[tuple[int, int, bytes]]) -> BitmapWinners:
    """The per-segment bitmaps laid out as ``find_winners`` lays them out."""
    bases = [0]
    for seg in inp.segments:
        bases.append(bases[-1] + ((seg.length + 7) >> 3))
    bits = bytearray(bases.pop())
    chunk_bytes = CHUNK_ENTRIES >> 3
    for seg_index, chunk, data in chunks:
        seg_bytes = (inp.segments[seg_index].length + 7) >> 3
        start = chunk * chunk_bytes
        part = data[: max(0, seg_bytes - start)]
        at = bases[seg_index] + start
        bits[at : at + len(part)] = part
    return BitmapWinners(bits=bits, bases=bases)
