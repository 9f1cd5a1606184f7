"""The write-site harness's cases for what moves a SEGMENTED log's offsets on disk
(``test_write_sites.py``): the LogCleaner's offset checkpoint written after a pass, and the
log start offset and ``segments.manifest`` written by DeleteRecords and by retention, each
under ENOSPC and EACCES.

The checkpoint and the manifest are best-effort (a refused write is logged and made again
at the next change); the log start offset is not: a DeleteRecords or retention whose
``log-start-offset`` write is refused answers its reason and drops nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from compactlog.compactor.log_cleaner.checkpoint import CleanerCheckpoint
from compactlog.storage.segmented.manifest import MANIFEST_FILE, SegmentManifest
from compactlog.storage.segmented.version import CHECKPOINT_FILE, SERVER_DIR
from compactlog.v1 import compactlog_pb2 as pb

from .write_sites import Case, Lab, Refused, blocker, records
from .write_sites_segmented import (
    CLEANED,
    ROLLING,
    cleanable,
    cleaned_again,
    sealed_bases,
    topic_dir,
)

RETAINED = {**ROLLING, "retention.bytes": "2500"}  # about two segments of 1.2 kB stay
NOT_WRITTEN = "segments.manifest not written after deleting segments"


def on_disk(lab: Lab) -> dict[str, int]:
    """The cleaner checkpoint's file as a restart would read it."""
    return CleanerCheckpoint(
        Path(lab.srv.data_dir) / "segments" / SERVER_DIR / CHECKPOINT_FILE
    ).all()


def dirty_section(line: str) -> tuple[int, int]:
    found = re.search(r"dirty section = \[(\d+), (\d+)\]", line)
    assert found is not None, line
    return int(found[1]), int(found[2])


def checkpoint_disk_full(lab: Lab) -> str:
    """A pass with nothing sealed to rewrite: the checkpoint is its only write."""
    topic = "ckp1"
    lab.create(topic, pb.SEGMENTED, **CLEANED)
    lab.publish(topic, records(topic, range(3), 300))
    since = lab.mark()
    lab.ballast(0)
    status = lab.compact(topic)
    assert status.state == pb.CompactionStatus.SUCCESS, status
    lab.logged(since, CHECKPOINT_FILE, "not written", "ENOSPC")
    assert topic not in on_disk(lab)
    lab.lighten()
    cleaned_again(lab, topic)
    assert topic in on_disk(lab), "the checkpoint not written at the next pass"
    return "logged"


def checkpoint_no_permission(lab: Lab) -> str:
    """A pass cleans and swaps, its checkpoint is refused: the file keeps the older offset,
    the cleaner the new one (the next pass starts where this one ended, no re-cleaning),
    and the next pass writes the file."""
    topic = cleanable(lab, "ckp2")
    since = lab.mark()
    blocked = blocker(Path(lab.srv.data_dir) / "segments" / SERVER_DIR / CHECKPOINT_FILE)
    try:
        status = lab.compact(topic)
        assert status.state == pb.CompactionStatus.SUCCESS, status
        lab.logged(since, CHECKPOINT_FILE, "not written", "EACCES")
        _, end = dirty_section(lab.logged(since, f"cleaned log {topic} (dirty section"))
        assert topic not in on_disk(lab)
        lab.verify(topic)
    finally:
        blocked.unlink(missing_ok=True)
    for n in range(3):
        lab.publish(topic, records(f"{topic}+{n}", range(n, n + 6), 300))
    since = lab.mark()
    cleaned_again(lab, topic)
    start, after = dirty_section(lab.logged(since, f"cleaned log {topic} (dirty section"))
    assert start == end, f"the second pass re-cleaned from {start}, the first ended at {end}"
    assert on_disk(lab).get(topic) == after, on_disk(lab)
    return "logged"


def filled(lab: Lab, topic: str, **config: str) -> str:
    """A fresh topic of six sealed segments (its ``log-start-offset`` not yet written)."""
    lab.create(topic, pb.SEGMENTED, **config)
    for n in range(7):
        lab.publish(topic, records(f"{topic}{n}", range(2), 600))
    return topic


def refused_once(lab: Lab, call: Callable[[], object], topic: str) -> str:
    """``call`` on a full disk: DISK_FULL at the log start's write, and nothing dropped."""
    lab.ballast(0)
    try:
        call()
    except Refused as refusal:
        lab.expect(refusal, "DISK_FULL", topic_dir(lab, topic))
    else:
        raise AssertionError("answered OK on a full disk")
    lab.verify(topic)
    lab.lighten()
    lab.once_back(call)
    lab.verify(topic)
    return "refused"


def manifest_again(lab: Lab, topic: str) -> None:
    """Two more rolls: the manifest lists every sealed segment again."""
    for tag in ("m1", "m2"):
        lab.once_back(lambda t=tag: lab.publish(topic, records(t, range(2), 600)))
    entries = SegmentManifest.load(topic_dir(lab, topic)).entries
    assert entries is not None and set(entries) == sealed_bases(lab, topic), entries


def manifest_logged(lab: Lab, topic: str, call: Callable[[], object], fault: str) -> str:
    """``call`` drops segments and is acknowledged; the manifest's write is logged."""
    since = lab.mark()
    blocked = blocker(topic_dir(lab, topic) / MANIFEST_FILE) if fault == "EACCES" else None
    if blocked is None:
        lab.ballast(1)  # room for the new log-start-offset file, not for the manifest
    try:
        call()
        lab.logged(since, NOT_WRITTEN, fault)
        lab.verify(topic)
    finally:
        lab.lighten()
        if blocked is not None:
            blocked.unlink(missing_ok=True)
    manifest_again(lab, topic)
    return "logged"


def delete_records_disk_full(lab: Lab) -> str:
    topic = filled(lab, "drop1", **ROLLING)
    return refused_once(lab, lambda: lab.delete_records(topic, 2), topic)


def delete_records_manifest_disk_full(lab: Lab) -> str:
    topic = filled(lab, "drop2", **ROLLING)
    return manifest_logged(lab, topic, lambda: lab.delete_records(topic, 4), "ENOSPC")


def delete_records_manifest_no_permission(lab: Lab) -> str:
    return manifest_logged(lab, "drop1", lambda: lab.delete_records("drop1", 6), "EACCES")


def retention_disk_full(lab: Lab) -> str:
    topic = filled(lab, "ret1", **RETAINED)
    return refused_once(lab, lambda: lab.enforce_retention(topic), topic)


def retention_manifest_disk_full(lab: Lab) -> str:
    topic = filled(lab, "ret2", **RETAINED)
    return manifest_logged(lab, topic, lambda: lab.enforce_retention(topic), "ENOSPC")


def retention_manifest_no_permission(lab: Lab) -> str:
    for n in range(3):
        lab.publish("ret1", records(f"ret1+{n}", range(2), 600))
    return manifest_logged(lab, "ret1", lambda: lab.enforce_retention("ret1"), "EACCES")


OFFSET_CASES = [
    Case("cleaner checkpoint", "ENOSPC", checkpoint_disk_full),
    Case("cleaner checkpoint", "EACCES", checkpoint_no_permission),
    Case("log start (DeleteRecords)", "ENOSPC", delete_records_disk_full),
    Case("segments.manifest (DeleteRecords)", "ENOSPC", delete_records_manifest_disk_full),
    Case("segments.manifest (DeleteRecords)", "EACCES", delete_records_manifest_no_permission),
    Case("log start (retention)", "ENOSPC", retention_disk_full),
    Case("segments.manifest (retention)", "ENOSPC", retention_manifest_disk_full),
    Case("segments.manifest (retention)", "EACCES", retention_manifest_no_permission),
]
