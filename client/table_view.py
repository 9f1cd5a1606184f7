"""``TableView``: the latest value of every key of a topic, kept up to date (pulsar-client's
``client.create_table_view(topic)``).

It starts from the compacted view, read from the earliest message to its end, then
follows the raw log from just after what that read covered, on a thread of its own:

- The compacted view is the compacted ledger up to the horizon H, then the raw messages
  after H. The tail starts after ``max(last id read, H)``: everything up to there is in
  the table, and nothing is read twice. (Raw messages between the last compacted one and
  H are superseded or deleted keys; starting after H keeps listeners from seeing them.)
- A compaction that commits while the view is read changes the view under the read: a
  key deleted by a tombstone the new compacted ledger dropped would stay in the table.
  So the compaction status (compacted ledger, horizon) is taken before and after the
  read, and a read that saw a commit (or failed because the ledger it read went away)
  is done again from scratch.

A partitioned topic is one such view per partition (``NAME-partition-i``), each with its
own compaction status and tail thread, in one table: a key lives in one partition only
(murmur2 routing), so the partitions never write the same key. As Pulsar's TableView, it
follows partitions added later (AddPartitions): a watcher thread asks for the partition
count every ``PartitionWatch.interval_s`` and loads each new partition from its earliest
message the same way (compacted view, then tail), telling listeners of every key it adds.

Keys are text (``msg.partition_key()``), values bytes. A keyed message with a null value
is a tombstone and removes its key; on LEDGER topics so does an empty value (Pulsar),
on SEGMENTED topics an empty value is a value (Kafka). Keyless messages are skipped.
Listeners run on the tail thread in log order, with ``value=None`` for a removed key.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

from compactlog.client.closeable import Closeable
from compactlog.client.errors import CompactlogError
from compactlog.client.message import Message
from compactlog.client.message_id import MessageId
from compactlog.client.reader import Reader, StartLike
from compactlog.client.types import CompactionStatus
from compactlog.errors import InvalidArgument

__all__ = ["PartitionWatch", "Source", "TableView"]

log = logging.getLogger(__name__)

_BOOTSTRAP_ATTEMPTS = 10  # reads of the compacted view, each undone by a commit

Listener = Callable[[str, bytes | None], object]
OpenRead = Callable[[StartLike, bool, bool], Reader]  # start, read_compacted, follow
Status = Callable[[], CompactionStatus]


class Source(NamedTuple):
    """One log the table is made of: the topic, or one partition of a partitioned topic."""

    open_read: OpenRead
    compaction_status: Status


class PartitionWatch(NamedTuple):
    """How a partitioned topic's table notices new partitions."""

    partitions: Callable[[], int]  # the topic's partition count now (GetTopic)
    source: Callable[[int], Source]  # partition i's log
    interval_s: float  # between two looks


class TableView(Closeable):
    """A ``dict``-like view ``key -> latest value`` of one topic; ``close()`` stops it."""

    def __init__(
        self,
        topic: str,
        sources: Sequence[Source],
        empty_is_tombstone: bool,
        watch: PartitionWatch | None = None,
    ) -> None:
        if watch is not None and not watch.interval_s > 0:
            raise InvalidArgument("partitions_update_interval_seconds must be > 0")
        self._topic = topic
        self._empty_is_tombstone = empty_is_tombstone
        self._lock = threading.RLock()
        self._listeners: list[Listener] = []
        self._table: dict[str, bytes] = {}
        self._closed = threading.Event()
        self.failure: BaseException | None = None
        """Why a tail stopped following (the server went away...), else None."""
        self._tails: list[Reader] = []
        self._threads: list[threading.Thread] = []
        loaded = [self._bootstrap(*source) for source in sources]
        for part, _ in loaded:
            self._table.update(part)
        for source, (_, resume) in zip(sources, loaded, strict=True):
            self._start_tail(source, resume)
        if watch is not None:
            self._start_thread(self._watch, (watch, len(sources)), "compactlog-table-watch")

    def _start_thread(
        self, target: Callable[..., None], args: tuple[object, ...], name: str
    ) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _start_tail(self, source: Source, resume: StartLike) -> None:
        """Follow ``source`` from ``resume`` on a thread of its own (unless closed)."""
        with self._lock:
            if self._closed.is_set():
                return
            tail = source.open_read(resume, False, True)
            self._tails.append(tail)
            self._start_thread(self._follow, (tail,), "compactlog-table")

    def _watch(self, watch: PartitionWatch, known: int) -> None:
        """Every ``interval_s``: load and follow the partitions added since the last look."""
        while not self._closed.wait(watch.interval_s):
            try:
                count = watch.partitions()
                while known < count and not self._closed.is_set():
                    self._add_partition(watch.source(known))
                    known += 1
            except CompactlogError as exc:  # the server away a while: look again later
                log.warning("table view of %s: partition count unknown: %s", self._topic, exc)

    def _add_partition(self, source: Source) -> None:
        """A new partition's view into the table (listeners told of each key), then its tail."""
        part, resume = self._bootstrap(*source)
        with self._lock:
            for key, value in part.items():
                self._table[key] = value
                for listener in list(self._listeners):
                    self._call(listener, key, value)
            self._start_tail(source, resume)

    def _bootstrap(
        self, open_read: OpenRead, compaction_status: Status
    ) -> tuple[dict[str, bytes], StartLike]:
        """One source's compacted view and the raw start of its tail."""
        for attempt in range(1, _BOOTSTRAP_ATTEMPTS + 1):
            before = compaction_status()
            part: dict[str, bytes] = {}  # this source's keys (no other source has them)
            last: MessageId | None = None
            try:
                with open_read("earliest", True, False) as reader:
                    for msg in reader:
                        self._put(part, msg)
                        last = msg.id
            except CompactlogError:
                if _view_of(compaction_status()) == _view_of(before):
                    raise
                continue  # the compacted ledger read went away: a commit; read again
            if _view_of(compaction_status()) == _view_of(before):
                return part, _after(last, before.horizon)
            log.info("table view of %s: compaction committed during read %d", self._topic, attempt)
        raise CompactlogError(
            f"table view of {self._topic}: compactions kept committing during "
            f"{_BOOTSTRAP_ATTEMPTS} reads of the compacted view"
        )

    def _put(self, table: dict[str, bytes], msg: Message) -> str | None:
        """Apply one message to ``table``; the key it changed, None when nothing changed."""
        key = msg.partition_key()
        if key is None:
            return None
        value = msg.data()
        if value is not None and (value or not self._empty_is_tombstone):
            table[key] = value
        elif table.pop(key, None) is None:
            return None  # deleting an absent key changes nothing
        return key

    def _apply(self, msg: Message) -> None:
        key = self._put(self._table, msg)
        if key is not None:
            now = self._table.get(key)
            for listener in list(self._listeners):
                self._call(listener, key, now)

    def _call(self, listener: Listener, key: str, value: bytes | None) -> None:
        try:
            listener(key, value)
        except Exception:  # one listener's bug must not stop the table
            log.exception("table view of %s: a listener failed on key %r", self._topic, key)

    def _follow(self, tail: Reader) -> None:
        try:
            for msg in tail:
                with self._lock:
                    self._apply(msg)
        except BaseException as exc:
            if not self._closed.is_set():
                self.failure = exc
                log.warning("table view of %s stopped following: %s", self._topic, exc)

    # -- the mapping ---------------------------------------------------------------------

    def get(self, key: str | bytes, default: bytes | None = None) -> bytes | None:
        with self._lock:
            return self._table.get(_text(key), default)

    def __getitem__(self, key: str | bytes) -> bytes:
        with self._lock:
            return self._table[_text(key)]

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str | bytes):
            return False
        with self._lock:
            return _text(key) in self._table

    def __len__(self) -> int:
        return len(self._table)

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            return iter(list(self._table))

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._table)

    def items(self) -> list[tuple[str, bytes]]:
        with self._lock:
            return list(self._table.items())

    def for_each(self, action: Listener) -> None:
        """``action(key, value)`` for every key now in the table."""
        for key, value in self.items():
            action(key, value)

    def for_each_and_listen(self, action: Listener) -> None:
        """``for_each(action)``, then ``action(key, value)`` for every later change, in
        log order (``value=None``: the key was removed). No change falls between."""
        with self._lock:
            for key, value in list(self._table.items()):
                self._call(action, key, value)
            self._listeners.append(action)

    def listen(self, action: Listener) -> None:
        """``action(key, value)`` for every change from now on."""
        with self._lock:
            self._listeners.append(action)

    def topic(self) -> str:
        return self._topic

    def close(self) -> None:
        """Stop following the topic; the table keeps what it holds."""
        if not self._closed.is_set():
            with self._lock:  # no tail starts after this
                self._closed.set()
                tails, threads = list(self._tails), list(self._threads)
            for tail in tails:
                tail.close()
            for thread in threads:
                if thread is not threading.current_thread():
                    thread.join(timeout=5)


def _text(key: str | bytes) -> str:
    return key if isinstance(key, str) else key.decode("utf-8", errors="surrogateescape")


def _view_of(status: CompactionStatus) -> tuple[int, MessageId | None]:
    """What a compacted read sees: the compacted ledger and its horizon."""
    return status.compacted_ledger_id, status.horizon


def _after(last: MessageId | None, horizon: MessageId | None) -> StartLike:
    """The first raw id the tail reads: after the last one read and after the horizon."""
    marks = [m for m in (last, horizon) if m is not None]
    if not marks:
        return "earliest"
    return max(marks, key=tuple).next()
