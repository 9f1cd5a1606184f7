"""The FORMAT file of a segments directory: refusal of format 1, and its migration.

Format-1 directories are made here with a copy of the old per-record encoder (it no
longer exists in the storage code), drawn in ``storage/segmented/migrate.py``.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import crc32c
import pytest

from compactlog.compactor.log_cleaner import LogCleaner
from compactlog.errors import StorageError
from compactlog.storage import batch
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import SegmentedLogManager
from compactlog.storage.segmented.migrate import convert_segment, migrate_segments
from compactlog.storage.types import MessageId, StoredMessage

SETTINGS = ServerSettings(topic_defaults={})
NOW = 1_700_000_000_000
_V1 = struct.Struct(">IIqqqqiii")


def v1_record(
    offset: int,
    ts: int,
    publish: int,
    key: bytes | None,
    value: bytes | None,
    headers: dict[str, str] | None = None,
    horizon: int = -1,
) -> bytes:
    """One format-1 record (the encoder of the old ``records.py``)."""
    block = b"".join(
        struct.pack(">H", len(n.encode()))
        + n.encode()
        + struct.pack(">I", len(v.encode()))
        + v.encode()
        for n, v in (headers or {}).items()
    )
    kl = -1 if key is None else len(key)
    vl = -1 if value is None else len(value)
    length = 48 + max(kl, 0) + max(vl, 0) + len(block)
    body = _V1.pack(0, 0, offset, ts, publish, horizon, kl, vl, len(block))[8:]
    body += (key or b"") + (value or b"") + block
    return struct.pack(">II", length, crc32c.crc32c(body)) + body


# (offset, event time, publish time, key, value, properties, delete horizon)
SEGMENT_0 = [
    (0, NOW, NOW, b"a", b"1", {"h": "v", "x": "y"}, -1),  # one publish of three records
    (1, 5, NOW, None, b"keyless", None, -1),
    (2, NOW, NOW, b"b", b"", None, -1),
    (4, NOW + 1, NOW + 1, b"c", None, None, NOW + 9000),  # a cleaned gap, a kept tombstone
    (5, NOW + 1, NOW + 1, b"d", None, None, -1),  # a tombstone no pass has kept yet
    (6, NOW + 1, NOW + 1, b"e", b"6", None, -1),
]
SEGMENT_7 = [(7, NOW + 2, NOW + 2, b"f", b"7", None, -1), (8, 99, NOW + 2, b"g", b"8", None, -1)]


def make_v1_topic(root: Path, name: str = "t") -> Path:
    topic = root / name
    topic.mkdir(parents=True)
    (topic / "topic.json").write_text(json.dumps({"overrides": {"cleanup.policy": "compact"}}))
    (topic / "recovery-point").write_text("9")
    (topic / "log-start-offset").write_text("0")
    for base, recs in ((0, SEGMENT_0), (7, SEGMENT_7)):
        (topic / f"{base:020d}.log").write_bytes(b"".join(v1_record(*r) for r in recs))
        (topic / f"{base:020d}.index").write_bytes(b"\x00" * 8)  # old positions
        (topic / f"{base:020d}.timeindex").write_bytes(b"")
    return topic


def expected() -> list[tuple[int, bytes | None, bytes | None, dict[str, str], int, int]]:
    return [(o, k, v, p or {}, pt, ts) for o, ts, pt, k, v, p, _h in SEGMENT_0 + SEGMENT_7]


def as_tuples(msgs: list[StoredMessage]) -> list[tuple[object, ...]]:
    return [
        (m.id.entry_id, m.key, m.value, dict(m.properties), m.publish_time_ms, m.event_time_ms)
        for m in msgs
    ]


def open_manager(root: Path) -> SegmentedLogManager:
    return SegmentedLogManager(root, SETTINGS, clock=lambda: NOW / 1000, start_threads=False)


def test_a_new_directory_is_stamped_with_the_current_format(tmp_path: Path) -> None:
    open_manager(tmp_path / "segments").close()
    assert (tmp_path / "segments" / "~server" / "FORMAT").read_text() == "2\n"
    assert migrate_segments(tmp_path / "segments") == 0


@pytest.mark.parametrize("found", [None, "1\n", "3\n"])
def test_other_formats_are_refused_untouched(tmp_path: Path, found: str | None) -> None:
    root = tmp_path / "data" / "segments"
    topic = make_v1_topic(root)
    (root / "x~new").mkdir()
    if found is not None:
        (root / "FORMAT").write_text(found)
    before = {p.name: p.read_bytes() for p in topic.iterdir()}
    with pytest.raises(StorageError) as info:
        open_manager(root)
    message = str(info.value)
    assert "\n" not in message and str(root) in message
    assert message.endswith(f"run: compactlog migrate {tmp_path / 'data'}")
    assert {p.name: p.read_bytes() for p in topic.iterdir()} == before
    assert (root / "x~new").exists()


def test_migration_keeps_every_record_and_horizon(tmp_path: Path) -> None:
    make_v1_topic(tmp_path)
    assert migrate_segments(tmp_path) == 2
    assert (tmp_path / "~server" / "FORMAT").read_text() == "2\n"
    data = (tmp_path / "t" / f"{0:020d}.log").read_bytes()
    heads = []
    p = 0
    while p < len(data):
        heads.append(batch.check(data, "migrated", p))
        p += heads[-1].size
    # One batch per publish; the gap and differing horizons start new batches.
    assert [(h.first_id.entry_id, h.count, h.delete_horizon_ms) for h in heads] == [
        (0, 3, -1),
        (4, 1, NOW + 9000),
        (5, 2, -1),
    ]
    m = open_manager(tmp_path)
    assert as_tuples(m.read("t", 0, 0)) == expected()
    assert m.log_end_offset("t") == 9 and m.offset_for_timestamp("t", NOW + 2) == 7
    m.close()


def test_a_migrated_log_cleans(tmp_path: Path) -> None:
    make_v1_topic(tmp_path)
    migrate_segments(tmp_path)
    m = open_manager(tmp_path)
    cleaner = LogCleaner(m, SETTINGS, clock=lambda: NOW / 1000)
    m.get_log("t").roll()
    assert cleaner.clean_now("t").error is None
    # The kept tombstone of c stays until its horizon; d's gets one now.
    assert [(x.id.entry_id, x.value) for x in m.read("t", 0, 0)] == [
        (0, b"1"),
        (2, b""),
        (4, None),
        (5, None),
        (6, b"6"),
        (7, b"7"),
        (8, b"8"),
    ]
    m.close()


def test_a_rerun_after_a_crash_finishes_the_job(tmp_path: Path) -> None:
    topic = make_v1_topic(tmp_path)
    # The crash: the first file converted, the second only half written beside it.
    assert convert_segment(topic / f"{0:020d}.log", truncate_bad=False)
    (topic / f"{7:020d}.log.v2.tmp").write_bytes(b"half")
    with pytest.raises(StorageError, match="migrate"):
        open_manager(tmp_path)
    assert migrate_segments(tmp_path) == 1
    assert not (topic / f"{7:020d}.log.v2.tmp").exists()
    # A crash after the last rename but before FORMAT: nothing left to convert.
    (tmp_path / "~server" / "FORMAT").unlink()
    assert migrate_segments(tmp_path) == 0
    m = open_manager(tmp_path)
    assert as_tuples(m.read("t", 0, 0)) == expected()
    m.close()


def test_a_torn_tail_is_dropped_and_damage_elsewhere_refused(tmp_path: Path) -> None:
    topic = make_v1_topic(tmp_path)
    last = topic / f"{7:020d}.log"
    last.write_bytes(last.read_bytes()[:-3])  # the active segment's last record is torn
    first = topic / f"{0:020d}.log"
    damaged = bytearray(first.read_bytes())
    damaged[60] ^= 1
    first.write_bytes(bytes(damaged))
    with pytest.raises(StorageError, match=rf"{first.name}, byte 0: torn or corrupt"):
        migrate_segments(tmp_path)
    assert first.read_bytes() == bytes(damaged) and not (tmp_path / "~server" / "FORMAT").exists()
    first.write_bytes(b"".join(v1_record(*r) for r in SEGMENT_0))
    assert migrate_segments(tmp_path) == 2  # the failed run converted nothing after it
    m = open_manager(tmp_path)
    assert as_tuples(m.read("t", 0, 0)) == expected()[:-1]
    assert m.read("t", 7, 0)[0].id == MessageId(0, 7)
    m.close()
