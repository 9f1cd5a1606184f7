"""Reading the past: a LEDGER topic's compacted view as of an id (CONTRACT section 8).

The view is what a TwoPhaseCompactor run that ended at ``as_of`` would have written, and
it is computed by the same parts; only the winners go to the reader instead of a ledger.
A run's input is the compacted ledger, then the raw tail after its horizon (``as_of`` at
or past the current horizon), or the raw ledgers from the start (``as_of`` before it):

    phase one  ``find_winners`` over the raw part: the offset map, 24 bytes a key,
               bounded by ``compaction.phase.one.memory.bytes``; a view whose keys do not
               fit is refused (``AsOfTooLarge``), never cut short
    merge      (past the horizon) the compacted ledger's stored batches, as they are
               where no message of a batch is superseded by a key of the map, else
               without those messages; tombstones it kept for slow readers go too;
               the map is probed with the key digests stored beside each batch
               (``ledger_digests``), or the keys hashed where a ledger has none
    phase two  over the raw part, each segment's winners by phase two's ``selection``
               (tombstones remove their key, keyless messages go unless
               ``compaction.retain.null.key``), spliced as stored into COMPACTED batches

The rules are phase one's and phase two's own (the merge step is phase one's rule for a
previous compacted ledger: a key later in the input supersedes its entry); the one reader
(``storage.read_range``) walks the batches like a compacted ledger's. Memory is the offset
map of the raw part plus one batch. As of a point a deleted key is simply absent: no
tombstone is part of a past view. If a compaction replaces the compacted ledger while the
view reads it, the view is computed again on the new one and resumes after the last id it
handed out (both give the same messages: each is the latest-per-key at ``as_of``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from compactlog.compactor.log_cleaner.batch_scan import select_batch, unsuperseded
from compactlog.compactor.log_cleaner.offset_map import BYTES_PER_ENTRY, SkimpyOffsetMap
from compactlog.compactor.progress import NoControl
from compactlog.compactor.two_phase.ledger_adapter import LedgerReads
from compactlog.compactor.two_phase.ledger_digests import StoredDigests
from compactlog.compactor.two_phase.phase_one import (
    INITIAL_TAIL_KEYS,
    LOAD_FACTOR,
    MapWinners,
    PhaseOneMemoryExceeded,
    find_winners,
)
from compactlog.compactor.two_phase.storage import CompactionInput, tail_segments
from compactlog.errors import DataLoss
from compactlog.storage import batch as codec
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.ledger_topic import LedgerTopic
from compactlog.storage.read_range import ViewBatch, read_chunks
from compactlog.storage.types import MessageId, StoredMessage, TopicKind
from compactlog.storage.views import CompactedState, compacted_state

BATCH_MESSAGES = 1000  # winners spliced into one view batch
EARLIEST = MessageId(0, 0)

Framed = tuple[bytes | memoryview, codec.BatchHeader]


class AsOfTooLarge(PhaseOneMemoryExceeded):
    """The keys of the view do not fit ``compaction.phase.one.memory.bytes``."""


@dataclass(frozen=True)
class PastInput:
    """A run's input ending at ``stop``: the compacted ledger (None: the raw ledgers from
    the start) and the raw part, as a ``CompactionInput`` of raw segments only."""

    stop: MessageId | None  # the last id up to as_of that exists (None: none does)
    compacted: CompactedState | None
    raw: CompactionInput


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


def past_input(store: LedgerStore, topic: str, as_of: MessageId) -> PastInput:
    """The input of a run ending at ``as_of`` (the last id up to it that exists), from
    the compacted ledger when ``as_of`` is at or past its horizon, else from the raw
    ledgers alone."""
    t = store.topic(topic)
    state = compacted_state(store, topic)
    with t.lock:
        lac = t.lac
        ledgers = [(led.ledger_id, led.entries) for led in t.ledgers]
        retain = t.config.compaction_retain_null_key
    stop = None
    if lac is not None:
        stop = _last_held(
            [p for p in ledgers if p[0] <= min(as_of, lac).ledger_id], min(as_of, lac)
        )
    if stop is None:
        return PastInput(None, None, CompactionInput(topic, None, None, None, (), retain))
    if state is None or stop < state.horizon:
        raw = tuple(tail_segments(ledgers, None, stop))
        return PastInput(stop, None, CompactionInput(topic, None, None, stop, raw, retain))
    raw = tuple(tail_segments(ledgers, state.horizon, stop))
    inp = CompactionInput(topic, state.ledger_id, state.horizon, stop, raw, retain)
    return PastInput(stop, state, inp)


def _last_held(ledgers: list[tuple[int, int]], stop: MessageId) -> MessageId | None:
    """The last stored id at or before ``stop``, from (ledger id, entries) pairs."""
    for lid, entries in reversed(ledgers):
        if not entries:
            continue
        if lid < stop.ledger_id:
            return MessageId(lid, entries - 1)
        return MessageId(lid, min(stop.entry_id, entries - 1))
    return None


def past_batches(store: LedgerStore, past: PastInput, budget_bytes: int) -> Iterator[Framed]:
    """The view's messages in id order, as checked batches (stored or framed here)."""
    inp = past.raw
    reads = LedgerReads(store)
    control = NoControl()
    winners = None
    if inp.segments:
        try:
            winners = find_winners(
                reads, inp, budget_bytes, control, settle=False, tail_keys=_tail_keys(past)
            )
        except PhaseOneMemoryExceeded:
            winners = None
        if winners is None or winners.covered is not None:
            raise AsOfTooLarge(
                f"the compacted view of {inp.topic!r} as of {past.stop} holds more keys "
                f"than compaction.phase.one.memory.bytes={budget_bytes} maps; raise the limit",
                topic=inp.topic,
                key="compaction.phase.one.memory.bytes",
                limit=budget_bytes,
            )
    if past.compacted is not None:
        superseded = winners.offset_map if winners is not None else None
        yield from _merged(store, past.compacted, superseded, inp.retain_null_key)
    if winners is not None:
        winners.settle(budget_bytes, inp.entries)  # the map's last use was the merge
        yield from _raw_winners(store, reads, inp, winners)


def _tail_keys(past: PastInput) -> int:
    """The keys a raw tail after the compacted ledger is expected to hold: its messages,
    up to the ledger's keys (a tail mostly updates keys the ledger holds; more are mapped
    by growing). Without a compacted ledger, phase one's default."""
    if past.compacted is None:
        return INITIAL_TAIL_KEYS
    return max(INITIAL_TAIL_KEYS, min(past.raw.entries, past.compacted.entries))


def _merged(
    store: LedgerStore,
    state: CompactedState,
    superseded: SkimpyOffsetMap | None,
    retain: bool,
) -> Iterator[Framed]:
    """The compacted ledger's batches without the messages a run over it would drop:
    keys the raw part holds again, tombstones, keyless messages unless retained; a batch
    that loses none goes out as stored (one compiled call a batch: ``unsuperseded``,
    over the batch's stored key digests where it has them, ``ledger_digests``)."""
    if state.entries == 0:
        return
    where = f"compacted ledger {state.ledger_id}"
    held = superseded is not None and superseded.size > 0  # the raw part holds keys
    table = superseded if superseded is not None and held else _no_keys()
    expected = 0
    digests = StoredDigests(store, state.ledger_id)
    for at, data, header in store.batches(state.ledger_id, 0, state.entries - 1):
        if at != expected:
            break
        expected = at + header.count
        live_only = bool(header.attributes & codec.LIVE_ONLY)
        if not held and live_only:
            yield data, header  # nothing in it for a run to drop
            continue
        payload = codec.payload_of(data, header)
        stored = digests.of(at, data, header.count)
        records, n, fl, fe, ll, le = unsuperseded(table, payload, retain, where, stored, live_only)
        if n == header.count:
            yield data, header
        elif n:
            yield _batch(bytes(records), n, MessageId(fl, fe), MessageId(ll, le))
    if expected != state.entries:
        raise DataLoss(
            f"compacted ledger {state.ledger_id} lacks entry {expected}",
            ledger=state.ledger_id,
            entry=expected,
        )


def _no_keys() -> SkimpyOffsetMap:
    """An offset map holding no key (a raw part with none): only the rule drops."""
    return SkimpyOffsetMap(BYTES_PER_ENTRY * 8, LOAD_FACTOR)


class _Pending:
    """Winners of several stored batches, framed, until they make a view batch."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.count = 0
        self.first = self.last = EARLIEST

    def add(self, records: bytes, n: int, first: MessageId, last: MessageId) -> None:
        if not self.count:
            self.first = first
        self.parts.append(records)
        self.count += n
        self.last = last

    def take(self) -> Framed:
        out = _batch(b"".join(self.parts), self.count, self.first, self.last)
        self.parts, self.count = [], 0
        return out


def _raw_winners(
    store: LedgerStore, reads: LedgerReads, inp: CompactionInput, winners: MapWinners
) -> Iterator[Framed]:
    """Phase two over the raw part: each segment's winners (``selection``, phase two's
    rule) spliced from the stored batches as they are framed there (``select_batch``, one
    compiled call a batch), in id order; a stored batch whose messages all win goes out
    whole."""
    pending = _Pending()
    for index, seg in enumerate(inp.segments):
        bits = winners.selection(reads, index, seg)
        wanted = int.from_bytes(bits, "little").bit_count()
        if not wanted:
            continue
        first, length, hits = seg.first_entry, seg.length, 0
        where = f"topic {inp.topic!r} ledger {seg.ledger_id}"
        for at, data, header in store.batches(seg.ledger_id, first, seg.last_entry):
            lo = at - first
            if lo >= 0 and lo + header.count <= length and _all_set(bits, lo, header.count):
                if pending.count:  # what came before it first, in id order
                    yield pending.take()
                yield data, header  # every message of it wins: the stored batch as it is
                hits += header.count
                continue
            payload = codec.payload_of(data, header)
            records, n, _bytes, fl, fe, ll, le, _next, _dead = select_batch(
                payload, at, first, seg.last_entry, bits, first, header.count, where
            )
            if n:
                pending.add(records, n, MessageId(fl, fe), MessageId(ll, le))
                hits += n
            if pending.count >= BATCH_MESSAGES:
                yield pending.take()
        if hits != wanted:
            raise DataLoss(
                f"ledger {seg.ledger_id} lacks {wanted - hits} entries", ledger=seg.ledger_id
            )
    if pending.count:
        yield pending.take()


def _all_set(bits: bytearray, start: int, count: int) -> bool:
    """Bits ``start .. start + count - 1`` are all set."""
    window = int.from_bytes(bits[start >> 3 : ((start + count - 1) >> 3) + 1], "little")
    mask = (1 << count) - 1
    return (window >> (start & 7)) & mask == mask


def _batch(payload: bytes, count: int, first: MessageId, last: MessageId) -> Framed:
    """A COMPACTED batch of ``count`` framed message records, and its header."""
    data = codec.pack(payload, count, first, last, 0, 0, attributes=codec.COMPACTED)
    header = codec.BatchHeader(
        len(data), codec.COMPACTED, count, first, last, 0, 0, codec.NO_HORIZON
    )
    return data, header


class AsOfView:
    """A ``ReadableLog`` of one Read: the compacted view of a topic as of an id, for the
    one reader (``server.log.reading.ReadSession``); fixed when made, so it has no follow."""

    kind = TopicKind.LEDGER

    def __init__(
        self,
        store: LedgerStore,
        name: str,
        as_of: MessageId | None,
        budget_bytes: int,
        partition: int = 0,
    ) -> None:
        self.store = store
        self.name = name
        self.partition = partition  # i on NAME-partition-i (stored ids carry it already)
        self.budget_bytes = budget_bytes
        self.topic = store.topic(name)  # TopicNotFound when there is none
        self.stop = past_input(store, name, as_of).stop if as_of is not None else None

    def gone(self) -> bool:
        return self.topic.deleted or self.topic.closed

    def visible_end(self) -> MessageId | None:
        return self.stop

    def earliest(self) -> MessageId:
        return EARLIEST

    def latest(self) -> MessageId:
        return EARLIEST if self.stop is None else self.stop.next()

    def at_time(self, timestamp_ms: int) -> MessageId:
        found = self.store.find_by_timestamp(self.name, timestamp_ms)
        return found if found is not None else self.latest()

    def check_start(self, msg_id: MessageId) -> MessageId:
        return msg_id

    def batches(self, start: MessageId, stop: MessageId, compacted: bool) -> Iterator[ViewBatch]:
        """Batches of the view's messages ``start <= id <= stop``."""
        if self.stop is None:
            return
        stop = min(stop, self.stop)
        emitted: MessageId | None = None
        while True:
            past = past_input(self.store, self.name, stop)
            try:
                for data, header in past_batches(self.store, past, self.budget_bytes):
                    if header.last_id < start or (
                        emitted is not None and header.last_id <= emitted
                    ):
                        continue
                    yield data, header, start if emitted is None else max(start, emitted.next())
                    emitted = header.last_id
                return
            except DataLoss:
                if past.compacted is None or self._current() == past.compacted.ledger_id:
                    raise
                # a compaction replaced the ledger under the view: again, on the new one

    def _current(self) -> int | None:
        with self.topic.lock:
            return self.topic.compacted_ledger_id()


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
