"""The ``compactlog.v1.CompactionEngine`` servicer: protobuf ⇄ ``OutsideRuns``, nothing else."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import grpc

from compactlog.compactor.two_phase import CompactionRun, Segment
from compactlog.server.admin.service import Compactions
from compactlog.server.compaction.engine_runs import OutsideRuns
from compactlog.server.rpc.convert import id_from_pb, id_to_pb
from compactlog.server.rpc.errors import rpc
from compactlog.storage.codec import HAS_KEY
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

KEYS_PER_BATCH = 8192
BYTES_PER_BATCH = 4 * 1024 * 1024
SPARK_ENGINE = "spark"


def segment_from_pb(r: pb.LedgerRange) -> Segment:
    return Segment(r.ledger_id, r.first_entry, r.last_entry, r.compacted)


def segment_to_pb(seg: Segment, out: pb.LedgerRange) -> None:
    out.ledger_id, out.first_entry, out.last_entry, out.compacted = seg


def run_from_pb(r: pb.CompactionRun) -> CompactionRun:
    return CompactionRun(
        read=r.read,
        kept=r.kept,
        removed=r.removed,
        tombstones=r.tombstones,
        keyless_dropped=r.keyless_dropped,
        bytes_in=r.bytes_in,
        bytes_out=r.bytes_out,
        duration_ms=r.duration_ms,
        engine=r.engine or SPARK_ENGINE,
    )


class CompactionEngineService(pb_grpc.CompactionEngineServicer):
    def __init__(self, runs: OutsideRuns, compactions: Compactions | None = None) -> None:
        self.runs = runs
        self.compactions = compactions

    @rpc
    def GetTopicLayout(
        self, request: pb.GetTopicLayoutRequest, context: grpc.ServicerContext
    ) -> pb.TopicLayout:
        lay = self.runs.layout(request.topic)
        kind = cast("pb.TopicKind.ValueType", int(lay.kind))
        out = pb.TopicLayout(
            topic=request.topic,
            kind=kind,
            compacted_ledger_id=lay.compacted_ledger_id or 0,
            log_start_offset=lay.log_start_offset,
            log_end_offset=lay.log_end_offset,
            retain_null_key=lay.retain_null_key,
        )
        for seg in lay.raw_view:
            segment_to_pb(seg, out.raw_view.add())
        for seg in lay.compacted_view:
            segment_to_pb(seg, out.compacted_view.add())
        if lay.horizon is not None:
            id_to_pb(lay.horizon, out.horizon)
        for lid, entries, left in lay.pending:
            out.pending.add(ledger_id=lid, entries=entries, lease_left_ms=max(0, left))
        return out

    @rpc
    def BeginCompaction(
        self, request: pb.BeginCompactionRequest, context: grpc.ServicerContext
    ) -> pb.CompactionPlan:
        inp = self.runs.begin(request.topic)
        out = pb.CompactionPlan(topic=inp.topic, retain_null_key=inp.retain_null_key)
        if inp.previous_ledger is not None:
            out.previous_ledger = inp.previous_ledger
        if inp.previous_horizon is not None:
            id_to_pb(inp.previous_horizon, out.previous_horizon)
        if inp.horizon is not None:
            id_to_pb(inp.horizon, out.horizon)
        for seg in inp.segments:
            segment_to_pb(seg, out.segments.add())
        if inp.tombstones is not None:
            kept = out.tombstones
            kept.SetInParent()
            if inp.tombstones.readers_at is not None:
                id_to_pb(inp.tombstones.readers_at, kept.readers_at)
            if inp.tombstones.published_after_ms is not None:
                kept.published_after_ms = inp.tombstones.published_after_ms
        return out

    @rpc
    def ReadKeys(
        self, request: pb.ReadKeysRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.KeysBatch]:
        ids: list[int] = []
        flags: list[int] = []
        sizes: list[int] = []
        keys: list[bytes] = []
        for eid, flag, size, key in self.runs.read_keys(
            request.topic, segment_from_pb(request.range), request.reverse
        ):
            ids.append(eid)
            flags.append(flag)
            sizes.append(size)
            keys.append(key if flag & HAS_KEY and key is not None else b"")
            if len(ids) >= KEYS_PER_BATCH:
                yield pb.KeysBatch(entry_ids=ids, flags=flags, sizes=sizes, keys=keys)
                ids, flags, sizes, keys = [], [], [], []
        if ids:
            yield pb.KeysBatch(entry_ids=ids, flags=flags, sizes=sizes, keys=keys)

    @rpc
    def ReadEntries(
        self, request: pb.ReadEntriesRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.EntriesBatch]:
        select = bytearray(request.select) if request.HasField("select") else None
        ids: list[int] = []
        entries: list[bytes] = []
        size = 0
        for eid, data in self.runs.read_entries(
            request.topic, segment_from_pb(request.range), select
        ):
            ids.append(eid)
            entries.append(data)
            size += len(data)
            if size >= BYTES_PER_BATCH or len(ids) >= KEYS_PER_BATCH:
                yield pb.EntriesBatch(entry_ids=ids, entries=entries)
                ids, entries, size = [], [], 0
        if ids:
            yield pb.EntriesBatch(entry_ids=ids, entries=entries)

    @rpc
    def CreateCompactedLedger(
        self, request: pb.CreateCompactedLedgerRequest, context: grpc.ServicerContext
    ) -> pb.CreateCompactedLedgerResponse:
        ledger_id, lease_ms = self.runs.create_ledger(request.topic, request.lease_ms)
        return pb.CreateCompactedLedgerResponse(ledger_id=ledger_id, lease_ms=lease_ms)

    @rpc
    def AppendEntries(
        self, request_iterator: Iterator[pb.AppendEntriesRequest], context: grpc.ServicerContext
    ) -> pb.AppendEntriesResponse:
        entries = 0
        for req in request_iterator:
            entries = self.runs.append(req.ledger_id, req.first_entry_id, req.entries)
        return pb.AppendEntriesResponse(entries=entries)

    @rpc
    def SealLedger(
        self, request: pb.SealLedgerRequest, context: grpc.ServicerContext
    ) -> pb.SealLedgerResponse:
        entries, nbytes = self.runs.seal(request.ledger_id, request.expected_entries)
        return pb.SealLedgerResponse(entries=entries, bytes=nbytes)

    @rpc
    def CommitCompaction(
        self, request: pb.CommitCompactionRequest, context: grpc.ServicerContext
    ) -> pb.CompactionStatus:
        self.runs.commit(
            request.topic,
            request.ledger_id,
            id_from_pb(request.horizon),
            request.expected_previous_ledger
            if request.HasField("expected_previous_ledger")
            else None,
            id_from_pb(request.expected_previous_horizon)
            if request.HasField("expected_previous_horizon")
            else None,
            run_from_pb(request.run),
        )
        if self.compactions is None:
            return pb.CompactionStatus()
        return self.compactions.status(request.topic)

    @rpc
    def AbortCompaction(
        self, request: pb.AbortCompactionRequest, context: grpc.ServicerContext
    ) -> pb.AbortCompactionResponse:
        self.runs.abort(request.topic, request.ledger_id, request.error)
        return pb.AbortCompactionResponse()
