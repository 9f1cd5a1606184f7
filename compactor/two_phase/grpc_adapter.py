"""``CompactionStorage`` over the ``CompactionEngine`` RPCs: runs driven from outside the
server (the Spark engine's driver) share the TwoPhaseCompactor with the local engine.

Reads go by ledger range (keys only for phase one). The new ledger is written through
one client stream of ``AppendEntries`` batches, opened at the first append and closed
at ``seal``; the commit carries the run's figures and the base the run began from, so
the server rejects it (``CommitConflict``) when another run committed first. Deleting
the previous compacted ledger is the server's part of a commit; ``delete_ledger`` of the
run's own ledger is an abort. The CompactionEngine service is admin-only on a server with
``--auth-tokens``: ``security`` carries the admin token (and the CA of a TLS server).
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager

import grpc

from compactlog import channels
from compactlog.channels import ChannelSecurity
from compactlog.compactor.two_phase.compactor import CompactionRun
from compactlog.compactor.two_phase.phase_one import PhaseOneResult
from compactlog.compactor.two_phase.storage import (
    CompactionInput,
    KeyEntry,
    NewEntry,
    Segment,
    TombstoneRetention,
)
from compactlog.errors import CommitConflict, CompactlogError
from compactlog.rpc_errors import cancel, translate_errors
from compactlog.storage.codec import HAS_KEY, VALUE_NON_EMPTY
from compactlog.storage.types import MessageId
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]
_QUEUE_DEPTH = 8  # append batches in flight on the stream
_PUT_POLL_S = 0.5


def open_channel(address: str, security: ChannelSecurity | None = None) -> grpc.Channel:
    return channels.open_channel(address, security, CHANNEL_OPTIONS)


def segment_to_pb(seg: Segment) -> pb.LedgerRange:
    return pb.LedgerRange(
        ledger_id=seg.ledger_id,
        first_entry=seg.first_entry,
        last_entry=seg.last_entry,
        compacted=seg.compacted,
    )


def plan_from_pb(plan: pb.CompactionPlan) -> CompactionInput:
    def mid(m: pb.MessageId) -> MessageId:
        return MessageId(m.ledger_id, m.entry_id)

    return CompactionInput(
        topic=plan.topic,
        previous_ledger=plan.previous_ledger if plan.HasField("previous_ledger") else None,
        previous_horizon=mid(plan.previous_horizon) if plan.HasField("previous_horizon") else None,
        horizon=mid(plan.horizon) if plan.HasField("horizon") else None,
        segments=tuple(
            Segment(r.ledger_id, r.first_entry, r.last_entry, r.compacted) for r in plan.segments
        ),
        retain_null_key=plan.retain_null_key,
        tombstones=_retention_from_pb(plan.tombstones) if plan.HasField("tombstones") else None,
    )


def _retention_from_pb(kept: pb.TombstoneRetention) -> TombstoneRetention:
    return TombstoneRetention(
        MessageId(kept.readers_at.ledger_id, kept.readers_at.entry_id)
        if kept.HasField("readers_at")
        else None,
        kept.published_after_ms if kept.HasField("published_after_ms") else None,
    )


# Deadline of the engine's unary calls (begin, create, seal, commit, abort): each is one
# short step on the server; the data streams (ReadKeys, ReadEntries, AppendEntries) last as
# long as the run's data and have none.
UNARY_TIMEOUT_S = 120.0


class _AppendStream:
    """One client-streaming ``AppendEntries`` call fed from a bounded queue."""

    def __init__(self, stub: pb_grpc.CompactionEngineStub) -> None:
        self._queue: queue.Queue[pb.AppendEntriesRequest | None] = queue.Queue(_QUEUE_DEPTH)
        self._future = stub.AppendEntries.future(iter(self._queue.get, None))

    def send(self, request: pb.AppendEntriesRequest) -> None:
        while True:
            if self._future.done():  # the server ended the stream: surface its error
                self._future.result()
                raise CompactlogError("the append stream ended early")
            try:
                self._queue.put(request, timeout=_PUT_POLL_S)
                return
            except queue.Full:
                continue

    def close(self) -> int:
        self._queue.put(None)
        return int(self._future.result().entries)

    def cancel(self) -> None:
        cancel(self._future)


class GrpcCompactionStorage:
    """``CompactionStorage`` of a server at ``address``; one run at a time per instance."""

    def __init__(
        self,
        address: str,
        engine: str = "spark",
        lease_ms: int = 0,
        security: ChannelSecurity | None = None,
        timeout: float | None = UNARY_TIMEOUT_S,
    ) -> None:
        self.address = address
        self.timeout = timeout  # of each unary call; the data streams are bounded by the run
        self.engine = engine
        self.lease_ms = lease_ms
        self.channel = open_channel(address, security)
        self.stub = pb_grpc.CompactionEngineStub(self.channel)
        self._input: CompactionInput | None = None
        self._started = 0.0
        self._ledger: int | None = None
        self._stream: _AppendStream | None = None
        self._tombstones_kept = 0
        self._bytes_out = 0
        self.phase_one: PhaseOneResult | None = None  # set by whoever ran phase one

    def close(self) -> None:
        if self._stream is not None:
            self._stream.cancel()
        self.channel.close()

    def _call(self, method: str) -> AbstractContextManager[None]:
        return translate_errors(method, self.address)

    # ---- CompactionStorage ----------------------------------------------------------

    def begin(self, topic: str) -> CompactionInput:
        with self._call("BeginCompaction"):
            plan = self.stub.BeginCompaction(
                pb.BeginCompactionRequest(topic=topic), timeout=self.timeout
            )
        self._input = plan_from_pb(plan)
        self._started = time.monotonic()
        self._ledger, self._stream, self._bytes_out, self.phase_one = None, None, 0, None
        self._tombstones_kept = 0
        return self._input

    def read_keys(self, segment: Segment, reverse: bool = False) -> Iterator[KeyEntry]:
        assert self._input is not None
        req = pb.ReadKeysRequest(topic=self._input.topic, range=segment_to_pb(segment))
        req.reverse = reverse
        with self._call("ReadKeys"):
            for batch in self.stub.ReadKeys(req):
                for eid, flags, size, key in zip(
                    batch.entry_ids, batch.flags, batch.sizes, batch.keys, strict=True
                ):
                    yield eid, flags, size, key if flags & 1 else None

    def read_entries(
        self, segment: Segment, select: bytearray | None = None
    ) -> Iterator[tuple[int, bytes]]:
        assert self._input is not None
        req = pb.ReadEntriesRequest(topic=self._input.topic, range=segment_to_pb(segment))
        if select is not None:
            req.select = bytes(select)
        with self._call("ReadEntries"):
            for batch in self.stub.ReadEntries(req):
                yield from zip(batch.entry_ids, batch.entries, strict=True)

    def create_ledger(self, topic: str) -> int:
        req = pb.CreateCompactedLedgerRequest(topic=topic, lease_ms=self.lease_ms)
        with self._call("CreateCompactedLedger"):
            self._ledger = int(self.stub.CreateCompactedLedger(req, timeout=self.timeout).ledger_id)
        return self._ledger

    def append(self, ledger_id: int, entries: Sequence[NewEntry]) -> None:
        if not entries:
            return
        if self._stream is None:
            self._stream = _AppendStream(self.stub)
        req = pb.AppendEntriesRequest(
            ledger_id=ledger_id, first_entry_id=entries[0][0], entries=[e[1] for e in entries]
        )
        self._bytes_out += sum(len(e[1]) for e in entries)
        # tombstones the run's retention kept: kept, not removed, in the commit's figures
        self._tombstones_kept += sum(
            1 for e in entries if e[3] & HAS_KEY and not e[3] & VALUE_NON_EMPTY
        )
        with self._call("AppendEntries"):
            self._stream.send(req)

    def seal(self, ledger_id: int) -> None:
        stream, self._stream = self._stream, None
        with self._call("AppendEntries"):
            expected = stream.close() if stream is not None else 0
        with self._call("SealLedger"):
            self.stub.SealLedger(
                pb.SealLedgerRequest(ledger_id=ledger_id, expected_entries=expected),
                timeout=self.timeout,
            )

    def delete_ledger(self, ledger_id: int) -> None:
        """The run's own ledger: abort it now. The previous compacted ledger: the server
        deleted it when the commit went through."""
        if ledger_id != self._ledger or self._input is None:
            return
        if self._stream is not None:
            self._stream.cancel()
            self._stream = None
        with self._call("AbortCompaction"):
            self.stub.AbortCompaction(
                pb.AbortCompactionRequest(topic=self._input.topic, ledger_id=ledger_id),
                timeout=self.timeout,
            )
        self._ledger = None

    def commit(
        self,
        topic: str,
        ledger_id: int,
        horizon: MessageId,
        expected_previous: int | None,
        incarnation: int = 0,
    ) -> None:
        assert self._input is not None
        req = pb.CommitCompactionRequest(topic=topic, ledger_id=ledger_id, run=self._run())
        req.horizon.ledger_id, req.horizon.entry_id = horizon
        if expected_previous is not None:
            req.expected_previous_ledger = expected_previous
        prev = self._input.previous_horizon
        if prev is not None:
            req.expected_previous_horizon.ledger_id, req.expected_previous_horizon.entry_id = prev
        try:
            with self._call("CommitCompaction"):
                self.stub.CommitCompaction(req, timeout=self.timeout)
        except CompactlogError as exc:
            if exc.code == "FAILED_PRECONDITION":
                raise CommitConflict(str(exc)) from None
            raise
        self._ledger = None  # committed: no longer ours to abort

    def fail(self, topic: str, error: str) -> None:
        """Record a failed run on the server (its ledger, if any, is aborted first)."""
        ledger, self._ledger = self._ledger or 0, None
        with self._call("AbortCompaction"):
            self.stub.AbortCompaction(
                pb.AbortCompactionRequest(topic=topic, ledger_id=ledger, error=error),
                timeout=self.timeout,
            )

    def _run(self) -> pb.CompactionRun:
        """The figures the server records with the commit (the compactor builds its own
        ``CompactionRun`` only after the commit)."""
        w = self.phase_one
        held = self._tombstones_kept if w else 0
        run = CompactionRun(
            read=w.read if w else 0,
            kept=(w.kept + held) if w else 0,
            removed=(w.read - w.kept - held) if w else 0,
            tombstones=(w.tombstones - held) if w else 0,
            keyless_dropped=w.keyless_dropped if w else 0,
            bytes_in=w.bytes_in if w else 0,
            bytes_out=self._bytes_out,
            duration_ms=int((time.monotonic() - self._started) * 1000),
            engine=self.engine,
        )
        return run.to_pb()
