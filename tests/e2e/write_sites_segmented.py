"""The write-site harness's SEGMENTED cases (``test_write_sites.py``): a publish, a segment
roll and its ``segments.manifest``, a cleaner pass (its ``.cleaned`` segment, then the
swap), the cursors journal and a topic create, each refused by ENOSPC and by EACCES."""

from __future__ import annotations

from pathlib import Path

from compactlog.storage.segmented.manifest import SegmentManifest
from compactlog.v1 import compactlog_pb2 as pb

from .write_sites import PAGE, Case, Lab, blocker, create_refused, records

ROLLING = {"segment.bytes": "1024"}  # two records of 600 bytes: every publish rolls
CLEANED = {"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "1"}


def topic_dir(lab: Lab, topic: str) -> Path:
    return Path(lab.srv.data_dir) / "segments" / topic


def sealed_bases(lab: Lab, topic: str) -> set[int]:
    logs = sorted(topic_dir(lab, topic).glob("*.log"))
    return {int(p.stem) for p in logs[:-1] if p.stat().st_size}


def cleanable(lab: Lab, name: str, keys: int = 6) -> str:
    """A fresh compacting topic whose pass keeps records in its sealed segments (with
    ``keys`` 2 they fit one ``.cleaned`` segment)."""
    lab.create(name, pb.SEGMENTED, **CLEANED)
    for n in range(6):
        lab.publish(name, records(f"{name}{n}", range(n, n + keys), 300))
    return name


def publish_disk_full(lab: Lab) -> str:
    lab.ballast(0)
    refusal = lab.until_refused(lambda: lab.publish("seg", records("f", range(4), 300)))
    lab.expect(refusal, "DISK_FULL", topic_dir(lab, "seg"))
    lab.verify("seg")  # nothing partial, nothing acknowledged missing
    lab.lighten()
    lab.once_back(lambda: lab.publish("seg", records("g", range(4), 300)))
    return "refused"


def roll_no_permission(lab: Lab) -> str:
    folder = topic_dir(lab, "roll")
    folder.chmod(0o555)
    try:
        refusal = lab.until_refused(lambda: lab.publish("roll", records("p", range(2), 600)))
        lab.expect(refusal, "STORAGE_UNAVAILABLE", folder)
        lab.verify("roll")
    finally:
        folder.chmod(0o755)
    lab.once_back(lambda: lab.publish("roll", records("q", range(2), 600)))
    return "refused"


def manifest_written_again(lab: Lab) -> None:
    """Two more rolls: the manifest lists every sealed segment again."""
    for tag in ("m1", "m2"):
        lab.once_back(lambda t=tag: lab.publish("roll", records(t, range(2), 600)))
    entries = SegmentManifest.load(topic_dir(lab, "roll")).entries
    assert entries is not None and set(entries) == sealed_bases(lab, "roll"), entries


def manifest_disk_full(lab: Lab) -> str:
    since = lab.mark()
    # A roll first writes the old segment's last time-index entry (a page, if its time
    # index has none yet), then creates empty files, then writes the manifest: room for
    # that entry and no more makes the manifest the first write refused.
    timeindex = max(topic_dir(lab, "roll").glob("*.timeindex"))
    lab.ballast(0 if timeindex.stat().st_blocks else 1)
    refusal = lab.until_refused(lambda: lab.publish("roll", records("x", range(2), 600)))
    lab.expect(refusal, "DISK_FULL", topic_dir(lab, "roll"))
    lab.logged(since, "segments.manifest not written after sealing", "ENOSPC")
    lab.verify("roll")
    lab.lighten()
    manifest_written_again(lab)
    return "refused"


def manifest_no_permission(lab: Lab) -> str:
    since = lab.mark()
    blocked = blocker(topic_dir(lab, "roll") / "segments.manifest")
    try:
        lab.publish("roll", records("y", range(2), 600))  # acknowledged: the data is synced
        lab.logged(since, "segments.manifest not written after sealing", "EACCES")
    finally:
        blocked.unlink(missing_ok=True)
    manifest_written_again(lab)
    return "logged"


def pass_fails(lab: Lab, topic: str, *words: str) -> str:
    """An explicit pass ends in ERROR saying why, and the cleaner logs it (the log held
    back for a retry, not marked uncleanable)."""
    since = lab.mark()
    status = lab.compact(topic)
    assert status.state == pb.CompactionStatus.ERROR, status
    assert all(w in status.last_error for w in words), status.last_error
    lab.logged(since, f"cleaning of {topic} failed; tried again in", *words)
    return "reported"


def cleaned_again(lab: Lab, topic: str) -> None:
    status = lab.once_back(lambda: lab.compact(topic))
    assert status.state == pb.CompactionStatus.SUCCESS, status
    lab.verify(topic)


def cleaned_disk_full(lab: Lab) -> str:
    topic = cleanable(lab, "cln1")
    lab.ballast(0)
    outcome = pass_fails(lab, topic, "DiskFull", ".cleaned")
    lab.verify(topic)
    assert not list(topic_dir(lab, topic).glob("*.cleaned")), "a .cleaned file left"
    lab.lighten()
    cleaned_again(lab, topic)
    return outcome


def cleaned_no_permission(lab: Lab) -> str:
    topic = cleanable(lab, "cln2")
    topic_dir(lab, topic).chmod(0o555)
    try:
        outcome = pass_fails(lab, topic, "EACCES")
        lab.verify(topic)
    finally:
        topic_dir(lab, topic).chmod(0o755)
    cleaned_again(lab, topic)
    return outcome


def swap_no_permission(lab: Lab) -> str:
    topic = cleanable(lab, "cln3")
    blocked = blocker(topic_dir(lab, topic) / "segments.manifest")
    try:
        outcome = pass_fails(lab, topic, "segments.manifest", "EACCES")
        lab.verify(topic)
        assert not list(topic_dir(lab, topic).glob("*.swap")), "a .swap file left"
    finally:
        blocked.unlink(missing_ok=True)
    cleaned_again(lab, topic)
    return outcome


def swap_disk_full(lab: Lab) -> str:
    """Room for the pass's one ``.cleaned`` segment and not one page more: a twin topic's
    pass measures how many pages that is, then that segment's swap (its manifest write) is
    the one refused. The topics' survivors fit one ``.cleaned`` segment: a worker's pass
    writes the next segment while the server swaps one in (``finisher``), so with a
    second output the refusal could fall on that write or on the swap (``behind_swap``)."""
    twin, topic = cleanable(lab, "cln4", keys=2), cleanable(lab, "cln5", keys=2)
    outputs = twin_outputs(lab, twin)
    assert len(outputs) == 1, f"the twin's pass wrote {sorted(outputs)}, not one segment"
    lab.ballast(next(iter(outputs.values())))
    outcome = pass_fails(lab, topic, "segments.manifest", "DiskFull")
    lab.verify(topic)
    lab.lighten()
    cleaned_again(lab, topic)
    return outcome


def behind_swap_disk_full(lab: Lab) -> str:
    """Room for the first of the pass's two ``.cleaned`` segments only: the worker writes
    the second while the server swaps the first in, and the full disk refuses whichever
    write reaches it first, the second segment's or the swap's manifest. Either way the
    pass reports DiskFull, nothing acknowledged is lost, no ``.cleaned`` file is left, and
    the next pass cleans the log."""
    twin, topic = cleanable(lab, "cln6"), cleanable(lab, "cln7")
    outputs = twin_outputs(lab, twin)
    assert len(outputs) >= 2, f"the twin's pass wrote {sorted(outputs)}, one segment"
    lab.ballast(outputs[min(outputs)])
    outcome = pass_fails(lab, topic, "DiskFull")
    lab.verify(topic)
    assert not list(topic_dir(lab, topic).glob("*.cleaned")), "a .cleaned file left"
    lab.lighten()
    cleaned_again(lab, topic)
    return outcome


def twin_outputs(lab: Lab, twin: str) -> dict[str, int]:
    """Clean ``twin``: the pages of each segment its pass wrote, by base offset."""
    before = inodes(topic_dir(lab, twin))
    cleaned_again(lab, twin)
    written = [p for p, ino in inodes(topic_dir(lab, twin)).items() if before.get(p) != ino]
    pages: dict[str, int] = {}
    for p in written:
        if p.suffix in (".log", ".index", ".timeindex"):
            pages[p.stem] = pages.get(p.stem, 0) - (-p.stat().st_blocks * 512 // PAGE)
    return pages


def inodes(folder: Path) -> dict[Path, int]:
    return {p: p.stat().st_ino for p in folder.iterdir()}


def journal_disk_full(lab: Lab) -> str:
    for n in range(30):  # more acks than one page of the journal holds
        lab.publish("seg", records(f"a{n}", range(8), 10))
    messages = iter(lab.consume("seg"))
    journal = topic_dir(lab, "seg") / "cursors.journal"
    return lab.ack_refused_on_full_disk(lambda: lab.ack("seg", next(messages)), journal)


def journal_list_disk_full(lab: Lab) -> str:
    """An AcknowledgeList is one journal line: refused whole on a full disk, as one ack."""
    ack = lab.ack_lists("acks", pb.SEGMENTED)
    return lab.ack_refused_on_full_disk(ack, topic_dir(lab, "acks") / "cursors.journal")


def journal_no_permission(lab: Lab) -> str:
    lab.publish("seg", records("j", range(4), 300))
    messages = iter(lab.consume("seg"))
    journal = topic_dir(lab, "seg") / "cursors.journal"
    journal.chmod(0o444)
    try:
        refusal = lab.until_refused(lambda: lab.ack("seg", next(messages)))
        lab.expect(refusal, "STORAGE_UNAVAILABLE", journal)
    finally:
        journal.chmod(0o644)
    lab.once_back(lambda: lab.ack("seg", next(messages)))
    return "refused"


def create_segmented_disk_full(lab: Lab) -> str:
    lab.ballast(0)
    create_refused(lab, "cs", pb.SEGMENTED, "DISK_FULL", Path(lab.srv.data_dir) / "segments")
    lab.lighten()
    lab.once_back(lambda: lab.create("cs-after", pb.SEGMENTED))
    return "refused"


def create_segmented_no_permission(lab: Lab) -> str:
    segments = Path(lab.srv.data_dir) / "segments"
    segments.chmod(0o555)
    try:
        create_refused(lab, "cp", pb.SEGMENTED, "STORAGE_UNAVAILABLE", segments)
    finally:
        segments.chmod(0o755)
    lab.once_back(lambda: lab.create("cp-after", pb.SEGMENTED))
    return "refused"


SEGMENTED_CASES = [
    Case("segment append", "ENOSPC", publish_disk_full),
    Case("segment roll", "EACCES", roll_no_permission),
    Case("segments.manifest (roll)", "ENOSPC", manifest_disk_full),
    Case("segments.manifest (roll)", "EACCES", manifest_no_permission),
    Case("cleaner .cleaned", "ENOSPC", cleaned_disk_full),
    Case("cleaner .cleaned", "EACCES", cleaned_no_permission),
    Case("cleaner swap", "ENOSPC", swap_disk_full),
    Case("cleaner swap", "EACCES", swap_no_permission),
    Case("cleaner .cleaned behind a swap", "ENOSPC", behind_swap_disk_full),
    Case("cursors.journal (ack)", "ENOSPC", journal_disk_full),
    Case("cursors.journal (ack)", "EACCES", journal_no_permission),
    Case("cursors.journal (ack list)", "ENOSPC", journal_list_disk_full),
    Case("create SEGMENTED", "ENOSPC", create_segmented_disk_full),
    Case("create SEGMENTED", "EACCES", create_segmented_no_permission),
]
