"""The append path of LEDGER topics: a publish request becomes stored batches.

The hot path: the raw bytes of a ``PublishRequest`` go through the batch codec's
compiled twin (ids, publish time, event-time defaults) straight into one batch per
ledger the request touches (one, unless the current ledger rolls over mid-request),
all in one RocksDB WriteBatch, each batch with its key index block (one more put per
batch, emitted by the same encoder; ``storage/key_index.py``). Ids come back as runs
``(ledger, first entry, count)``, never one object per message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from compactlog.errors import RecordTooLarge
from compactlog.storage import batch as codec
from compactlog.storage import keys
from compactlog.storage.codec import HAS_KEY, ROLE_RAW, VALUE_NON_EMPTY, LedgerMeta
from compactlog.storage.rocks import Writes
from compactlog.storage.types import MessageId

if TYPE_CHECKING:
    from compactlog.storage.ledger_appends import LedgerAppends
    from compactlog.storage.ledger_topic import LedgerTopic

IdRun = tuple[int, int, int]  # ledger id, first entry id, count


def too_large(topic: str, index: int, size: int, limit: int) -> RecordTooLarge:
    """The error of a publish holding a record over ``max.message.bytes`` (also the
    front's, checking a publish it splits over slots: one wording)."""
    return RecordTooLarge(
        f"record {index} is {size} bytes, over max.message.bytes={limit}; "
        "nothing of this batch was stored",
        topic=topic,
        limit=limit,
        record=index,
        size=size,
    )


def _current_ledger(
    topic: LedgerTopic, batch: Writes, now: int, allocate: Callable[[str, int], LedgerMeta]
) -> tuple[LedgerMeta, bool]:
    """The ledger the next entry goes to, rolling over at the topic's limits."""
    cur = topic.current
    cfg = topic.config
    if (
        cur is not None
        and cur.entries < cfg.ledger_max_entries
        and cur.bytes < cfg.ledger_max_bytes
    ):
        return cur, False
    if cur is not None:
        cur.sealed = True
        batch.put(keys.ledger_meta_key(cur.ledger_id), cur.encode())
    cur = allocate(topic.name, ROLE_RAW)
    cur.first_publish_ms = now
    topic.add_ledger(cur)
    return cur, True


def build_append(
    topic: LedgerTopic,
    request: bytes,
    now: int,
    allocate: Callable[[str, int], LedgerMeta],
    out: Writes,
    partition: int = 0,
) -> list[IdRun]:
    """The request's records as batches in the current ledger(s), put into ``out``.

    Raises when a record is over ``max.message.bytes``, possibly after putting a first
    run into ``out``: the caller drops ``out`` (or its ``Staged`` part) and rolls back the
    in-memory ledger state this may have advanced. ``partition`` goes into every id;
    ``out`` may be shared with other requests' appends (a writer's group, or a publish
    across the partitions of a topic: one RocksDB write).
    """
    runs: list[IdRun] = []
    cfg = topic.config
    limit = cfg.max_message_bytes
    pos, done, end = 0, 0, len(request)
    rolled = False
    while pos < end:
        cur, new = _current_ledger(topic, out, now, allocate)
        rolled |= new
        first = cur.entries
        run = codec.encode_request(
            request,
            pos,
            cur.ledger_id,
            first,
            now,
            cfg.ledger_max_entries - first,
            cfg.ledger_max_bytes - cur.bytes,
            partition,
        )
        if run.count == 0:
            break
        if run.max_size > limit:
            raise too_large(topic.name, done + run.max_size_index, run.max_size, limit)
        runs.append(_put_run(out, cur, first, run, now))
        done += run.count
        pos = run.next_pos
    if rolled:
        out.put(keys.topic_key(topic.name), topic.record())
    return runs


def _put_run(out: Writes, cur: LedgerMeta, first: int, run: codec.EncodedRun, now: int) -> IdRun:
    """One encoded run as a stored batch of ledger ``cur`` at entry ``first``: its bytes,
    its key index block and the ledger's advanced record, all into ``out``."""
    lid = cur.ledger_id
    last = first + run.count - 1
    data = codec.pack(
        run.payload,
        run.count,
        MessageId(lid, first),
        MessageId(lid, last),
        now,
        run.max_event_time_ms,
    )
    out.put(keys.entry_key(lid, first), data)
    if run.index_block:  # the batch's key index, in the same write (storage.key_index)
        out.put(keys.index_block_key(lid, first), run.index_block)
    cur.entries = last + 1
    cur.bytes += len(data)
    cur.last_publish_ms = now
    out.put(keys.ledger_meta_key(lid), cur.encode())
    return lid, first, run.count


def compacted_batch(ledger_id: int, messages: Sequence[bytes], live_only: bool = False) -> bytes:
    """One COMPACTED batch of ``Message`` bytes that carry their original ids (a compacted
    ledger's append, in the server or in a compaction worker's SST file); ``live_only``:
    the writer knows every message has a key and a non-empty value (``LIVE_ONLY``)."""
    payload = codec.frame_messages(messages)
    walked = codec.walk(payload, f"ledger {ledger_id}")
    return compacted_records_batch(
        payload,
        len(messages),
        MessageId(walked[0][0], walked[0][1]),
        MessageId(walked[-1][0], walked[-1][1]),
        live_only,
    )


def compacted_records_batch(
    records: bytes, count: int, first_id: MessageId, last_id: MessageId, live_only: bool = False
) -> bytes:
    """``compacted_batch`` of messages already framed as payload records, their first and
    last ids known (phase two's per-batch path): the same bytes."""
    attributes = codec.COMPACTED | (codec.LIVE_ONLY if live_only else 0)
    return codec.pack(records, count, first_id, last_id, 0, 0, attributes=attributes)


def ids_of(runs: Sequence[IdRun]) -> list[MessageId]:
    return [MessageId(lid, e) for lid, first, count in runs for e in range(first, first + count)]


class PendingAppend:
    """An append written to the WAL (``Appended``): durable and visible once the group
    commit has synced it (at once with ``publish.durability = wal``)."""

    def __init__(
        self, store: LedgerAppends, topic: LedgerTopic, runs: list[IdRun], ticket: int
    ) -> None:
        self.store, self.topic, self.runs, self.ticket = store, topic, runs, ticket
        self.synced = store.fsync

    def _confirm(self) -> None:
        lid, first, count = self.runs[-1]
        with self.topic.lock:
            self.topic.confirm(MessageId(lid, first + count - 1))

    def on_durable(self, done: Callable[[BaseException | None], None]) -> None:
        if not self.ticket:
            done(None)
            return

        def synced(error: BaseException | None) -> None:
            if error is None:
                self._confirm()
            done(error)

        self.store.group_commit.when_synced(self.ticket, synced)

    def wait_runs(self) -> list[IdRun]:
        if self.ticket:
            self.store.group_commit.wait(self.ticket)
            self._confirm()
            self.ticket = 0
        return self.runs

    def wait(self) -> list[MessageId]:
        return ids_of(self.wait_runs())


LIVE = HAS_KEY | VALUE_NON_EMPTY


def live_only(entries: Sequence[tuple[int, bytes, bytes | None, int]]) -> bool:
    """Whether every ``(position, data, key, flags)`` entry is a keyed, non-empty value."""
    return all(flags & LIVE == LIVE for _pos, _data, _key, flags in entries)
