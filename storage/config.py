"""Topic config keys and server-wide settings: names, defaults and validation.

Topic configs are stored as the user's overrides (strings, as sent); the effective
config is ``defaults ← server --config file ← topic overrides``. Values are validated the
way Kafka validates them (ranges, ``-1`` = unlimited where Kafka allows it) so that a bad
value is refused at CreateTopic/UpdateTopicConfig time, never discovered by a background
thread later.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from compactlog.errors import InvalidConfig
from compactlog.storage.config_checks import check_segmented_config
from compactlog.storage.config_keys import (
    LONG_MAX,
    ConfigKey,
    bool_key,
    choice_key,
    cleanup_policy_key,
    float_key,
    int_key,
)
from compactlog.storage.types import TopicKind


def _keys(*keys: ConfigKey) -> dict[str, ConfigKey]:
    return {k.name: k for k in keys}


LEDGER_KEYS = _keys(
    ConfigKey(
        "ledger.max.entries", int_key(1), 50000, "entries before the current ledger rolls over"
    ),
    ConfigKey(
        "ledger.max.bytes", int_key(1), 67108864, "bytes before the current ledger rolls over"
    ),
    ConfigKey(
        "compaction.threshold.bytes", int_key(0), 0, "backlog that triggers compaction; 0 = off"
    ),
    ConfigKey(
        "compaction.retain.null.key", bool_key, False, "keep keyless messages when compacting"
    ),
    ConfigKey("retention.ms", int_key(-1), -1, "age after which consumed ledgers go; -1 = forever"),
    ConfigKey(
        "retention.bytes", int_key(-1), -1, "size above which consumed ledgers go; -1 = no cap"
    ),
    ConfigKey("max.message.bytes", int_key(1), 1048576, "largest record accepted"),
    ConfigKey(
        "delete.retention.ms",
        int_key(0),
        0,
        "how long compaction keeps a tombstone after its publish time (besides keeping it "
        "for subscriptions reading compacted that have not passed it)",
    ),
)

SEGMENTED_KEYS = _keys(
    ConfigKey("cleanup.policy", cleanup_policy_key, "delete", "delete, compact or compact,delete"),
    ConfigKey("segment.bytes", int_key(14, 2**31 - 1), 1073741824, "segment size before a roll"),
    ConfigKey("segment.ms", int_key(1), 604800000, "segment age before a roll"),
    ConfigKey("segment.index.bytes", int_key(8, 2**31 - 1), 10485760, "index size before a roll"),
    ConfigKey("index.interval.bytes", int_key(0, 2**31 - 1), 4096, "bytes between index entries"),
    ConfigKey("retention.ms", int_key(-1), 604800000, "age after which segments go; -1 = forever"),
    ConfigKey("retention.bytes", int_key(-1), -1, "log size above which segments go; -1 = no cap"),
    ConfigKey(
        "min.cleanable.dirty.ratio",
        float_key(0.0, 1.0),
        0.5,
        "dirty ratio that makes a log cleanable",
    ),
    ConfigKey("min.compaction.lag.ms", int_key(0), 0, "records younger than this are not cleaned"),
    ConfigKey(
        "max.compaction.lag.ms",
        int_key(1),
        LONG_MAX,
        "records older than this make a log cleanable",
    ),
    ConfigKey("delete.retention.ms", int_key(0), 86400000, "how long tombstones survive cleaning"),
    ConfigKey(
        "file.delete.delay.ms", int_key(0), 60000, "delay before a .deleted file is unlinked"
    ),
    ConfigKey("flush.messages", int_key(1), LONG_MAX, "records between fsyncs"),
    ConfigKey("flush.ms", int_key(0), LONG_MAX, "milliseconds between fsyncs"),
    ConfigKey("max.message.bytes", int_key(0, 2**31 - 1), 1048588, "largest record batch accepted"),
)

TOPIC_KEYS: dict[TopicKind, dict[str, ConfigKey]] = {
    TopicKind.LEDGER: LEDGER_KEYS,
    TopicKind.SEGMENTED: SEGMENTED_KEYS,
}

SERVER_KEYS = _keys(
    ConfigKey(
        "publish.durability",
        choice_key("fsync", "wal"),
        "fsync",
        "ack after fsync or after the WAL write",
    ),
    ConfigKey("log.cleaner.enable", bool_key, True, "run the LogCleaner threads"),
    ConfigKey("log.cleaner.threads", int_key(0, 64), 1, "LogCleaner threads"),
    ConfigKey(
        "log.cleaner.dedupe.buffer.size", int_key(24), 134217728, "offset map memory (24 B/entry)"
    ),
    ConfigKey(
        "log.cleaner.io.buffer.load.factor", float_key(0.0001, 1.0), 0.9, "offset map load factor"
    ),
    ConfigKey(
        "log.cleaner.io.buffer.size", int_key(512), 524288, "read/write buffer of a cleaner thread"
    ),
    ConfigKey("log.cleaner.backoff.ms", int_key(0), 15000, "sleep when no log is cleanable"),
    ConfigKey(
        "log.cleaner.io.max.bytes.per.second",
        float_key(1.0, 1.7976931348623157e308),
        1.7976931348623157e308,
        "cleaner I/O throttle",
    ),
    ConfigKey(
        "log.retention.check.interval.ms", int_key(1), 300000, "how often retention is checked"
    ),
    ConfigKey(
        "compaction.monitor.interval.ms",
        int_key(1),
        60000,
        "how often compaction thresholds are checked",
    ),
    ConfigKey(
        "compaction.max.concurrent", int_key(1, 1024), 2, "compactions running at once, server-wide"
    ),
    ConfigKey(
        "compaction.phase.one.memory.bytes", int_key(1024), 1073741824, "phase-one key map budget"
    ),
    ConfigKey(
        "compaction.workers",
        int_key(0, 64),
        0,
        "worker processes that run compactions and cleaner passes; 0 = max(1, log.cleaner.threads)",
    ),
    ConfigKey(
        "compaction.worker.threads",
        int_key(0, 64),
        0,
        "threads of one run in a worker (a cleaner pass's reads and scans, phase one's "
        "digests); 0 = half the cores the server spares each worker, 1 to 4",
    ),
    ConfigKey(
        "compaction.worker.own.cores",
        bool_key,
        True,
        "workers run on the last cores, and the server off them while a run lasts",
    ),
    ConfigKey("read.batch.max.messages", int_key(1, 1_000_000), 1000, "messages per Read response"),
    ConfigKey(
        "ledger.wal.recovery.mode",
        choice_key("absolute-consistency", "point-in-time"),
        "absolute-consistency",
        "a damaged RocksDB WAL stops the start (or: replay up to the damage, drop the rest)",
    ),
    ConfigKey(
        "log.segment.open.files.max",
        int_key(8, 1_000_000),
        256,
        "segment files held open at once, all topics together (an LRU of descriptors)",
    ),
    ConfigKey(
        "shards.placement",
        choice_key("topic", "partition"),
        "topic",
        "where a new sharded data dir (serve --shards N) puts partitions (storage/slots.py)",
    ),
)


def validate_topic_overrides(
    kind: TopicKind, overrides: Mapping[str, object], topic: str | None = None
) -> dict[str, str]:
    """Check keys and values (of ``topic``); return the overrides normalised to strings."""
    table = TOPIC_KEYS[kind]
    normalised: dict[str, str] = {}
    for name, raw in overrides.items():
        key = table.get(name)
        if key is None:
            known = ", ".join(sorted(table))
            raise InvalidConfig(
                f"unknown config key {name!r} for {kind.name} topics (known: {known})",
                topic=topic,
                key=name,
            )
        try:
            value = key.validate(raw)
        except InvalidConfig as exc:
            if topic is not None:
                exc.metadata["topic"] = topic
            raise
        normalised[name] = config_text(value)
    return normalised


def config_text(value: Any) -> str:
    """A config value as its stored text (``true``/``false``, ``0.5``, ``1048576``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return repr(value)
    return str(value)


def effective_topic_config(
    kind: TopicKind, overrides: Mapping[str, str], server_defaults: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Every key of the kind with its effective value, as strings (what GetTopic shows)."""
    server_defaults = server_defaults or {}
    out: dict[str, str] = {}
    for name, key in TOPIC_KEYS[kind].items():
        if name in overrides:
            out[name] = overrides[name]
        elif name in server_defaults:
            out[name] = server_defaults[name]
        else:
            out[name] = config_text(key.default)
    return out


def _typed(cls: type[Any], table: Mapping[str, ConfigKey], effective: Mapping[str, str]) -> Any:
    values = {}
    for f in fields(cls):
        name = f.name.replace("_", ".")
        values[f.name] = table[name].validate(effective[name])
    return cls(**values)


@dataclass(frozen=True)
class LedgerTopicConfig:
    ledger_max_entries: int = 50000
    ledger_max_bytes: int = 67108864
    compaction_threshold_bytes: int = 0
    compaction_retain_null_key: bool = False
    retention_ms: int = -1
    retention_bytes: int = -1
    max_message_bytes: int = 1048576
    delete_retention_ms: int = 0

    @classmethod
    def from_effective(cls, effective: Mapping[str, str]) -> LedgerTopicConfig:
        result: LedgerTopicConfig = _typed(cls, LEDGER_KEYS, effective)
        return result


@dataclass(frozen=True)
class SegmentedTopicConfig:
    cleanup_policy: str = "delete"
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = 86400000
    file_delete_delay_ms: int = 60000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1048588

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def max_segment_ms(self) -> int:
        """Age at which the active segment rolls: Kafka's ``LogConfig.maxSegmentMs``. A
        compacted log rolls at ``max.compaction.lag.ms`` too, since the cleaner never
        touches the active segment: else a record could wait ``segment.ms`` to be cleaned."""
        if self.compact:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

    @classmethod
    def from_effective(cls, effective: Mapping[str, str]) -> SegmentedTopicConfig:
        result: SegmentedTopicConfig = _typed(cls, SEGMENTED_KEYS, effective)
        return result


@dataclass(frozen=True)
class ServerSettings:
    """Server-wide settings from ``--config``; ``topic_defaults`` are topic keys set there."""

    publish_durability: str = "fsync"
    log_cleaner_enable: bool = True
    log_cleaner_threads: int = 1
    log_cleaner_dedupe_buffer_size: int = 134217728
    log_cleaner_io_buffer_load_factor: float = 0.9
    log_cleaner_io_buffer_size: int = 524288
    log_cleaner_backoff_ms: int = 15000
    log_cleaner_io_max_bytes_per_second: float = 1.7976931348623157e308
    log_retention_check_interval_ms: int = 300000
    compaction_monitor_interval_ms: int = 60000
    compaction_max_concurrent: int = 2
    compaction_phase_one_memory_bytes: int = 1073741824
    compaction_workers: int = 0
    compaction_worker_threads: int = 0
    compaction_worker_own_cores: bool = True
    read_batch_max_messages: int = 1000
    ledger_wal_recovery_mode: str = "absolute-consistency"
    log_segment_open_files_max: int = 256
    shards_placement: str = "topic"  # read when a sharded data dir is created (storage.slots)
    topic_defaults: Mapping[str, str] | None = None

    @property
    def worker_processes(self) -> int:
        """``compaction.workers``, 0 meaning one per cleaner thread (at least one)."""
        return self.compaction_workers or max(1, self.log_cleaner_threads)

    @property
    def worker_threads(self) -> int:
        """``compaction.worker.threads``: the threads of one run in a worker (a cleaner
        pass's reads and scans, phase one's digests); 0 meaning half of the cores beyond
        one (the server's) shared among the workers, at least one and at most four: the
        server keeps most cores for its traffic, and on 16 cores eight threads gained
        nothing over four (docs/benchmarks.md)."""
        if self.compaction_worker_threads:
            return self.compaction_worker_threads
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        return max(1, min(4, ((cores or 1) - 1) // (2 * self.worker_processes)))

    def defaults_for(self, kind: TopicKind) -> dict[str, str]:
        """The server-file defaults that apply to topics of this kind."""
        table = TOPIC_KEYS[kind]
        return {k: v for k, v in (self.topic_defaults or {}).items() if k in table}

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> ServerSettings:
        """Validate a flat mapping of quoted keys (as in the TOML file)."""
        server: dict[str, Any] = {}
        topic_defaults: dict[str, str] = {}
        all_topic_keys = {**LEDGER_KEYS, **SEGMENTED_KEYS}
        for name, raw in values.items():
            if isinstance(raw, dict):
                raise InvalidConfig(
                    f'{name}: tables are not allowed; quote dotted keys, e.g. "{name}.x" = 1',
                    key=name,
                )
            if name in SERVER_KEYS:
                server[name.replace(".", "_")] = SERVER_KEYS[name].validate(raw)
            elif name in all_topic_keys:
                # Validate against every kind that has the key, so a bad default is refused early.
                for table in (LEDGER_KEYS, SEGMENTED_KEYS):
                    if name in table:
                        topic_defaults[name] = config_text(table[name].validate(raw))
            else:
                raise InvalidConfig(f"unknown config key {name!r}", key=name)
        check_segmented_config(effective_topic_config(TopicKind.SEGMENTED, topic_defaults))
        return cls(**server, topic_defaults=topic_defaults)

    @classmethod
    def load(cls, path: Path | None) -> ServerSettings:
        if path is None:
            return cls(topic_defaults={})
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except FileNotFoundError:
            raise InvalidConfig(f"config file {path} does not exist", file=path) from None
        except tomllib.TOMLDecodeError as exc:
            raise InvalidConfig(f"config file {path} is not valid TOML: {exc}", file=path) from None
        return cls.from_mapping(data)
