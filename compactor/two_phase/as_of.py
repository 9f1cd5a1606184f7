"""Reading the past: a LEDGER topic's compacted view as of an id (CONTRACT section 8).

The view is what a TwoPhaseCompactor run that ended at ``as_of`` would have written, and
it is computed by the same parts, only the winners go to the reader instead of a ledger:

    input      ``as_of`` at or past the current horizon: the compacted ledger, then the
               raw tail after the horizon up to ``as_of`` (a run's own input rule);
               before the horizon: the raw ledgers from the start up to ``as_of``
    phase one  ``find_winners``: the offset map, 24 bytes a key, bounded by
               ``compaction.phase.one.memory.bytes``; a view whose keys do not fit is
               refused (``AsOfTooLarge``), never cut short
    phase two  ``winners_in_order``: the winners' bytes in id order (tombstones remove
               their key, keyless messages go unless ``compaction.retain.null.key``),
               framed into COMPACTED batches of at most ``BATCH_MESSAGES`` that the one
               reader (``storage.read_range``) walks like a compacted ledger's

Memory is the offset map plus one batch. Tombstones a run kept for slow readers
(reader-aware retention, ``tombstones``) are not part of a past view: as of a point, a
deleted key is simply absent. If a compaction replaces the compacted ledger while the view
reads it, the view is computed again on the new one and resumes after the last id it
handed out (both give the same messages: each is the latest-per-key at ``as_of``).
"""

from __future__ import annotations

from collections.abc import Iterator

from compactlog.compactor.progress import NoControl
from compactlog.compactor.two_phase.ledger_adapter import LedgerReads
from compactlog.compactor.two_phase.phase_one import PhaseOneMemoryExceeded, find_winners
from compactlog.compactor.two_phase.phase_two import PhaseTwoMeter, winners_in_order
from compactlog.compactor.two_phase.storage import CompactionInput, Segment, tail_segments
from compactlog.errors import DataLoss
from compactlog.storage import batch as codec
from compactlog.storage.ledger_append import compacted_batch
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.ledger_topic import LedgerTopic
from compactlog.storage.read_range import ViewBatch, read_chunks
from compactlog.storage.types import MessageId, StoredMessage, TopicKind
from compactlog.storage.views import compacted_state

BATCH_MESSAGES = 1000  # winners framed into one view batch
BATCH_BYTES = 1 << 20  # ... or this many bytes of them
EARLIEST = MessageId(0, 0)


class AsOfTooLarge(PhaseOneMemoryExceeded):
    """The keys of the view do not fit ``compaction.phase.one.memory.bytes``."""


def last_at_or_before(store: LedgerStore, topic: str, timestamp_ms: int) -> MessageId | None:
    """The last id published at or before ``timestamp_ms`` (None: none was)."""
    t = store.topic(topic)
    after = store.find_by_timestamp(topic, timestamp_ms + 1)
    if after is None:
        return t.lac
    return predecessor(t, after)


def predecessor(topic: LedgerTopic, msg_id: MessageId) -> MessageId | None:
    """The stored id just before ``msg_id`` (an id the topic holds), None at the start."""
    if msg_id.entry_id > 0:
        return MessageId(msg_id.ledger_id, msg_id.entry_id - 1)
    with topic.lock:
        earlier = [led for led in topic.ledgers if led.ledger_id < msg_id.ledger_id]
    for led in reversed(earlier):
        if led.entries:
            return MessageId(led.ledger_id, led.entries - 1)
    return None


def as_of_input(store: LedgerStore, topic: str, as_of: MessageId) -> CompactionInput:
    """The input of a run ending at ``as_of`` (the last id up to it that exists), from
    the compacted ledger when ``as_of`` is at or past its horizon, else from the raw
    ledgers alone. ``horizon`` None: nothing was published up to ``as_of``."""
    t = store.topic(topic)
    state = compacted_state(store, topic)
    with t.lock:
        lac = t.lac
        ledgers = [(led.ledger_id, led.entries) for led in t.ledgers]
        retain = t.config.compaction_retain_null_key
    stop = min(as_of, lac) if lac is not None else None
    if stop is not None:
        pairs = [(lid, n) for lid, n in ledgers if lid <= stop.ledger_id]
        stop = _last_held(pairs, stop)
    if stop is None:
        return CompactionInput(topic, None, None, None, (), retain)
    if state is None or stop < state.horizon:
        return CompactionInput(
            topic, None, None, stop, tuple(tail_segments(ledgers, None, stop)), retain
        )
    segments: list[Segment] = []
    if state.entries:
        segments.append(Segment(state.ledger_id, 0, state.entries - 1, True))
    segments += tail_segments(ledgers, state.horizon, stop)
    return CompactionInput(topic, state.ledger_id, state.horizon, stop, tuple(segments), retain)


def _last_held(ledgers: list[tuple[int, int]], stop: MessageId) -> MessageId | None:
    """The last stored id at or before ``stop``, from (ledger id, entries) pairs."""
    for lid, entries in reversed(ledgers):
        if not entries:
            continue
        if lid < stop.ledger_id:
            return MessageId(lid, entries - 1)
        return MessageId(lid, min(stop.entry_id, entries - 1))
    return None


def winners_as_of(store: LedgerStore, inp: CompactionInput, budget_bytes: int) -> Iterator[bytes]:
    """The view's messages (``Message`` bytes with their ids) in id order."""
    if inp.horizon is None or not inp.segments:
        return
    reads = LedgerReads(store)
    control = NoControl()
    winners = find_winners(reads, inp, budget_bytes, control)
    if winners.covered is not None:
        raise AsOfTooLarge(
            f"the compacted view of {inp.topic!r} as of {inp.horizon} holds more keys than "
            f"compaction.phase.one.memory.bytes={budget_bytes} maps; raise the limit",
            topic=inp.topic,
            limit=budget_bytes,
        )
    yield from winners_in_order(reads, inp, winners, PhaseTwoMeter(control, inp.entries))


class AsOfView:
    """A ``ReadableLog`` of one Read: the compacted view of ``base`` as of an id, for the
    one reader (``server.reading.ReadSession``); fixed when made, so it has no follow."""

    kind = TopicKind.LEDGER

    def __init__(
        self, store: LedgerStore, name: str, as_of: MessageId | None, budget_bytes: int
    ) -> None:
        self.store = store
        self.name = name
        self.budget_bytes = budget_bytes
        self.topic = store.topic(name)  # TopicNotFound when there is none
        self.stop = as_of_input(store, name, as_of).horizon if as_of is not None else None

    def gone(self) -> bool:
        return self.topic.deleted or self.topic.closed

    def visible_end(self) -> MessageId | None:
        return self.stop

    def earliest(self) -> MessageId:
        return MessageId(0, 0)

    def latest(self) -> MessageId:
        return MessageId(0, 0) if self.stop is None else self.stop.next()

    def at_time(self, timestamp_ms: int) -> MessageId:
        found = self.store.find_by_timestamp(self.name, timestamp_ms)
        return found if found is not None else self.latest()

    def check_start(self, msg_id: MessageId) -> MessageId:
        return msg_id

    def batches(self, start: MessageId, stop: MessageId, compacted: bool) -> Iterator[ViewBatch]:
        """COMPACTED batches of the view's messages ``start <= id <= stop``."""
        if self.stop is None:
            return
        stop = min(stop, self.stop)
        emitted: MessageId | None = None
        while True:
            inp = as_of_input(self.store, self.name, stop)
            try:
                for data, header in self._framed(inp):
                    if header.last_id < start or (
                        emitted is not None and header.last_id <= emitted
                    ):
                        continue
                    lo = start if emitted is None else max(start, emitted.next())
                    yield data, header, lo
                    emitted = header.last_id
                return
            except DataLoss:
                if inp.previous_ledger is None or self._current() == inp.previous_ledger:
                    raise
                # a compaction replaced the ledger under the view: again, on the new one

    def _current(self) -> int | None:
        with self.topic.lock:
            return self.topic.compacted_ledger_id()

    def _framed(self, inp: CompactionInput) -> Iterator[tuple[bytes, codec.BatchHeader]]:
        where = f"topic {self.name!r} as of {inp.horizon}"
        bodies: list[bytes] = []
        size = 0
        for body in winners_as_of(self.store, inp, self.budget_bytes):
            bodies.append(body)
            size += len(body)
            if len(bodies) >= BATCH_MESSAGES or size >= BATCH_BYTES:
                data = compacted_batch(0, bodies)
                yield data, codec.check(data, where)
                bodies, size = [], 0
        if bodies:
            data = compacted_batch(0, bodies)
            yield data, codec.check(data, where)


def as_of_messages(
    store: LedgerStore,
    topic: str,
    as_of: MessageId,
    budget_bytes: int,
    start: MessageId = EARLIEST,
) -> Iterator[StoredMessage]:
    """The past view's messages decoded (tools and tests: reads send stored bytes)."""
    view = AsOfView(store, topic, as_of, budget_bytes)
    stop = view.visible_end()
    if stop is None:
        return
    label = f"topic {topic!r}"
    for chunk in read_chunks(view.batches(start, stop, True), label, stop, BATCH_MESSAGES):
        payload = chunk.to_bytes()
        for *_ids, s, e in codec.walk(payload, label):
            yield codec.decode_message(payload[s:e])
