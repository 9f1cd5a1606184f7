"""SegmentedLogManager: every SEGMENTED topic under one root directory.

The manager creates, opens (with recovery), configures and deletes the topic logs and
keeps them in memory; the directories on disk (the layout, a topic's config file, a create
or delete that a crash cannot leave half-way) are ``topic_dirs``. A topic whose
``topic.json``, ``cursors.json`` or ``log-start-offset`` fails validation, or whose segments
cannot be recovered, is taken offline (``storage.offline``) and left as it is on disk; the
other topics are served. The manager owns a scheduler thread that applies retention every
``log.retention.check.interval.ms``, flushes logs whose ``flush.ms`` has passed and unlinks
``.deleted`` files after ``file.delete.delay.ms``.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from compactlog.crash_points import reached
from compactlog.errors import CompactlogError, TopicExists, TopicNotFound
from compactlog.storage import file_limits
from compactlog.storage.config import (
    SegmentedTopicConfig,
    ServerSettings,
    effective_topic_config,
)
from compactlog.storage.config_checks import check_segmented_config
from compactlog.storage.names import check_topic_name
from compactlog.storage.offline import OfflineTopic, take_offline
from compactlog.storage.segmented.append import AppendResult, pack_request
from compactlog.storage.segmented.consumer_offsets import CURSORS_FILE, SegmentCursors
from compactlog.storage.segmented.handles import HANDLES
from compactlog.storage.segmented.log import Log
from compactlog.storage.segmented.scheduled import ScheduledFaults
from compactlog.storage.segmented.stats import SegmentedStats
from compactlog.storage.segmented.topic_dirs import (
    make_topic_dir,
    read_topic_file,
    topic_dirs,
    trash_topic_dir,
    unreadable_reason,
    write_topic_file,
)
from compactlog.storage.segmented.version import TOPIC_FILE, ensure_format
from compactlog.storage.topic_log import ChangeListeners
from compactlog.storage.types import Record, StoredMessage, TopicKind

log = logging.getLogger(__name__)


class CleanerHooks(Protocol):
    """What the storage needs from a cleaner, so that it never imports the compactor."""

    def abort_and_pause(self, name: str) -> None: ...
    def resume(self, name: str) -> None: ...
    def forget(self, name: str) -> None: ...


class SegmentedLogManager:
    """Creates, opens (with recovery), configures and deletes the topic logs under ``root``."""

    def __init__(
        self,
        root: Path,
        settings: ServerSettings,
        clock: Callable[[], float] = time.time,
        start_threads: bool = True,
    ) -> None:
        self.root = Path(root)
        self.settings = settings
        self.clock = clock
        self.root.mkdir(parents=True, exist_ok=True)
        ensure_format(self.root)  # before anything is touched: never misread format 1
        HANDLES.limit = min(settings.log_segment_open_files_max, file_limits.BUDGET.segment_files)
        self._lock = threading.RLock()
        self._logs: dict[str, Log] = {}
        self._cursors: dict[str, SegmentCursors] = {}
        self._overrides: dict[str, dict[str, str]] = {}
        self._offline: dict[str, OfflineTopic] = {}
        self._hooks: CleanerHooks | None = None
        self._stop = threading.Event()
        self._faults = ScheduledFaults()  # what the scheduler's work last failed with
        self.changes = ChangeListeners()  # appends, deletions, close: waiting readers wake
        for entry in topic_dirs(self.root):
            self._open_topic(entry)
        self._thread: threading.Thread | None = None
        if start_threads:
            self._thread = threading.Thread(
                target=self._run, name="segmented-log-scheduler", daemon=True
            )
            self._thread.start()

    def _open_topic(self, entry: Path) -> None:
        """Load one topic directory; a topic whose state cannot be read goes offline."""
        name = entry.name
        if not (entry / TOPIC_FILE).exists():
            if (entry / CURSORS_FILE).exists() or any(entry.glob("*.log")):
                take_offline(
                    self._offline, name, TopicKind.SEGMENTED, f"{entry / TOPIC_FILE} is missing"
                )
            return
        try:
            overrides = read_topic_file(entry / TOPIC_FILE)
            cursors = SegmentCursors(entry)
            self._overrides[name] = overrides
            self._logs[name] = Log(entry, self.config(name), self.clock)
            self._cursors[name] = cursors
        except (CompactlogError, OSError) as exc:
            self._overrides.pop(name, None)
            take_offline(self._offline, name, TopicKind.SEGMENTED, unreadable_reason(exc))

    # ---- topics ------------------------------------------------------------------------
    def set_cleaner_hooks(self, hooks: CleanerHooks | None) -> None:
        self._hooks = hooks

    def _missing(self, name: str) -> CompactlogError:
        offline = self._offline.get(name)
        if offline is not None:
            return offline.error()
        return TopicNotFound(f"topic {name} does not exist", topic=name)

    def get_log(self, name: str) -> Log:
        with self._lock:
            found = self._logs.get(name)
            if found is None:
                raise self._missing(name)
        return found

    def cursors(self, name: str) -> SegmentCursors:
        """The topic's durable cursors (consumer-group offsets)."""
        with self._lock:
            found = self._cursors.get(name)
            if found is None:
                raise self._missing(name)
        return found

    def cursors_in_memory(self, name: str) -> SegmentCursors | None:
        """The topic's cursors, without the lock (a dictionary lookup, for the event
        loop); None when the topic is not served."""
        return self._cursors.get(name)

    def logs(self) -> dict[str, Log]:
        with self._lock:
            return dict(self._logs)

    def has_topic(self, name: str) -> bool:
        """Served and offline topics alike: the name is taken either way."""
        with self._lock:
            return name in self._logs or name in self._offline

    def topic_names(self) -> list[str]:
        """The topics being served (offline ones: ``offline_topics``)."""
        with self._lock:
            return sorted(self._logs)

    def offline_topics(self) -> dict[str, OfflineTopic]:
        with self._lock:
            return dict(self._offline)

    def overrides(self, name: str) -> dict[str, str]:
        with self._lock:
            if name not in self._overrides:
                raise self._missing(name)
            return dict(self._overrides[name])

    def config(self, name: str) -> SegmentedTopicConfig:
        overrides = self.overrides(name)
        defaults = self.settings.defaults_for(TopicKind.SEGMENTED)
        return SegmentedTopicConfig.from_effective(
            effective_topic_config(TopicKind.SEGMENTED, overrides, defaults)
        )

    def _check_config(
        self, name: str, overrides: Mapping[str, str], before: Mapping[str, str]
    ) -> None:
        """Keys against each other (``config_checks``), before anything is written."""
        defaults = self.settings.defaults_for(TopicKind.SEGMENTED)
        effective = effective_topic_config(TopicKind.SEGMENTED, overrides, defaults)
        changed = {k: v for k, v in overrides.items() if before.get(k) != v}
        check_segmented_config(effective, name, changed)

    def create_topic(self, name: str, overrides: Mapping[str, str]) -> None:
        check_topic_name(name)
        self._check_config(name, overrides, {})
        with self._lock:
            if name in self._logs or name in self._offline:
                raise TopicExists(f"topic {name} already exists", topic=name)
            final = make_topic_dir(self.root, name, overrides)
            self._overrides[name] = dict(overrides)
            self._logs[name] = Log(final, self.config(name), self.clock)
            self._cursors[name] = SegmentCursors(final)

    def check_config(self, name: str, overrides: Mapping[str, str]) -> None:
        """What ``update_config`` checks before it writes, and nothing written (a
        validate-only change)."""
        with self._lock:
            self.get_log(name)
            self._check_config(name, overrides, self._overrides[name])

    def update_config(self, name: str, overrides: Mapping[str, str]) -> None:
        """Replace the stored overrides; the log picks the new effective config up at once."""
        with self._lock:
            target = self.get_log(name)
            self._check_config(name, overrides, self._overrides[name])
            write_topic_file(target.dir / TOPIC_FILE, overrides)
            self._overrides[name] = dict(overrides)
            target.update_config(self.config(name))

    def delete_topic(self, name: str) -> None:
        """Stop cleaning of the topic, then remove its directory (renamed away first)."""
        with self._lock:
            if name in self._offline:
                self._remove_dir(name)
                del self._offline[name]
                log.warning("deleted offline topic %r", name)
                self.changes.notify(name)
                return
        target = self.get_log(name)
        hooks = self._hooks
        if hooks is not None:
            hooks.abort_and_pause(name)
        try:
            with self._lock:
                if self._logs.get(name) is not target:
                    raise TopicNotFound(f"topic {name} does not exist", topic=name)
                trash = trash_topic_dir(self.root, name, target.dir)  # a failure: no change
                reached("segmented_delete_after_rename")
                del self._logs[name]
                del self._overrides[name]
                self._cursors.pop(name, None)
                target.mark_deleted()
        except CompactlogError:
            if hooks is not None:
                hooks.resume(name)
            raise
        shutil.rmtree(trash, ignore_errors=True)
        if hooks is not None:
            hooks.forget(name)
        self.changes.notify(name)

    def _remove_dir(self, name: str) -> None:
        trash = trash_topic_dir(self.root, name, self.root / name)
        shutil.rmtree(trash, ignore_errors=True)

    # ---- data --------------------------------------------------------------------------
    def append(self, name: str, records: Sequence[Record]) -> AppendResult:
        result = self.get_log(name).append(records)
        self.changes.notify(name)
        return result

    def append_request(self, name: str, request: bytes, partition: int = 0) -> AppendResult:
        """Append the records of raw ``PublishRequest`` bytes as one batch."""
        result = self.get_log(name).append_request(request, partition)
        self.changes.notify(name)
        return result

    def append_across(self, parts: Sequence[tuple[str, bytes, int]]) -> list[AppendResult]:
        """Append ``(topic, request, partition)`` parts (the partitions of one publish):
        every part is encoded and checked first (``max.message.bytes`` of its topic), so a
        bad record stores nothing anywhere. Segment files have no multi-file atomic write:
        a crash (or an I/O error) between two parts leaves the parts before it stored
        (docs/partitions.md)."""
        logs = [self.get_log(name) for name, _request, _partition in parts]
        for log, (name, request, partition) in zip(logs, parts, strict=True):
            pack_request(request, 0, 0, log.config.max_message_bytes, name, partition)
        return [self.append_request(name, req, partition) for name, req, partition in parts]

    def read(self, name: str, start_offset: int, max_messages: int) -> list[StoredMessage]:
        """Decoded messages from ``start_offset``; ``max_messages <= 0``: no limit."""
        return self.get_log(name).read(start_offset, max_messages)

    def read_payload(
        self, name: str, start_offset: int, end_offset: int, max_messages: int, max_bytes: int
    ) -> tuple[list[memoryview | bytes], int, int | None]:
        """Stored records of offsets ``[start_offset, end_offset)`` as ``ReadResponse``
        bytes in pieces: ``(pieces, count, last offset or None)``. At most
        ``max_messages`` (``<= 0``: no limit) and ``max_bytes``, unless the first batch's
        records alone are more. Every batch is CRC-checked: a bad one raises
        ``CorruptData`` naming the topic, segment file and byte position."""
        return self.get_log(name).read_payload(start_offset, end_offset, max_messages, max_bytes)

    def offset_for_timestamp(self, name: str, timestamp_ms: int) -> int | None:
        return self.get_log(name).offset_for_timestamp(timestamp_ms)

    def log_start_offset(self, name: str) -> int:
        return self.get_log(name).log_start_offset

    def log_end_offset(self, name: str) -> int:
        return self.get_log(name).next_offset

    def stats(self, name: str) -> SegmentedStats:
        return self.get_log(name).stats()

    def enforce_retention(self, name: str) -> None:
        self.get_log(name).delete_old_segments()

    def delete_records(self, name: str, before_offset: int) -> None:
        self.get_log(name).delete_records(before_offset)

    # ---- background --------------------------------------------------------------------
    def _run(self) -> None:
        interval = self.settings.log_retention_check_interval_ms
        tick = max(0.01, min(interval, 1000) / 1000)
        next_check = self.clock() * 1000 + interval
        while not self._stop.wait(tick):
            now = self.clock() * 1000
            for topic in self.logs().values():
                try:
                    topic.maybe_flush()
                    topic.delete_expired_files()
                    if now >= next_check:
                        topic.delete_old_segments()
                except Exception as exc:
                    if not topic.closed:
                        self._faults.failed(topic.name, exc)
                else:
                    self._faults.succeeded(topic.name)
            if now >= next_check:
                next_check = now + interval

    def close(self) -> None:
        """Stop the scheduler, then flush and close every log."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            for topic in self._logs.values():
                topic.close()
                self.changes.notify(topic.name)
            for cursors in self._cursors.values():
                cursors.close()
