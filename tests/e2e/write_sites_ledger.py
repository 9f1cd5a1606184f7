"""The write-site harness's LEDGER cases (``test_write_sites.py``): a publish, the
catalog's allocation write, a compaction (the compacted ledger written, then ingested and
recorded in the cursor), an acknowledgement and a topic create, refused by ENOSPC or EACCES."""

from __future__ import annotations

import os
from pathlib import Path

from compactlog.storage.ledger_store import LEDGER_ID_BLOCK
from compactlog.v1 import compactlog_pb2 as pb

from .write_sites import Case, Lab, Refused, blocker, create_refused, records


def ledgers(lab: Lab) -> Path:
    return Path(lab.srv.data_dir) / "ledgers"


def ledger_publish_disk_full(lab: Lab) -> str:
    lab.ballast(0)
    refusal = lab.until_refused(lambda: lab.publish("led", records("f", range(4), 2000)))
    lab.expect(refusal, "DISK_FULL", ledgers(lab))
    lab.verify("led")
    lab.lighten()
    lab.once_back(lambda: lab.publish("led", records("g", range(4), 2000)))
    return "refused"


def catalog_disk_full(lab: Lab) -> str:
    since = lab.mark()
    lab.ballast(0)
    # a block of ledger ids is synced in the store, then the catalog's write is refused
    # (logged); the publish is refused when the store's own write finds no page either
    refusal = lab.until_refused(lambda: lab.publish("led", records("c", range(4), 100)))
    lab.expect(refusal, "DISK_FULL", ledgers(lab))
    lab.logged(since, "ledgers.catalog", "not yet in the catalog", "ENOSPC")
    lab.verify("led")
    lab.lighten()
    lab.once_back(lambda: lab.publish("led", records("d", range(5), 100)))
    return "logged"


def catalog_no_permission(lab: Lab) -> str:
    since = lab.mark()
    blocked = blocker(ledgers(lab).with_name("ledgers.catalog"))
    try:
        # ledgers of 4 records: enough new ones to reserve a block of ids; acknowledged
        lab.publish("led", records("e", range(4 * LEDGER_ID_BLOCK + 4), 100))
        lab.logged(since, "ledgers.catalog", "not yet in the catalog", "EACCES")
    finally:
        blocked.unlink(missing_ok=True)
    lab.publish("led", records("h", range(5), 100))
    return "logged"


def work_dir(lab: Lab) -> Path:
    return Path(lab.srv.data_dir) / "compaction-work"


def compaction_fails(lab: Lab, *words: str) -> str:
    """The run refused with its reason, or ended ERROR saying why."""
    try:
        status = lab.compact("led")
    except Refused as refusal:
        assert refusal.reason in ("DISK_FULL", "STORAGE_UNAVAILABLE"), refusal
        return "refused"
    assert status.state == pb.CompactionStatus.ERROR, status
    assert all(w in status.last_error for w in words), status.last_error
    return "reported"


def compacted_again(lab: Lab) -> None:
    status = lab.once_back(lambda: lab.compact("led"))
    assert status.state == pb.CompactionStatus.SUCCESS, status
    lab.verify("led")


def compaction_disk_full(lab: Lab) -> str:
    lab.publish("led", [pb.Record(key=b"z%d" % k, value=os.urandom(2000)) for k in range(100)])
    lab.ballast(16)  # room for the run's small writes, not for its compacted ledger
    outcome = compaction_fails(lab, "No space left", "compaction-work")
    lab.verify("led")
    assert not list(work_dir(lab).glob("*.sst")), "a compacted ledger's file left"
    lab.lighten()
    compacted_again(lab)
    return outcome


def compaction_no_permission(lab: Lab) -> str:
    lab.publish("led", records("w", range(100, 110), 2000))
    work = work_dir(lab)
    work.chmod(0o555)
    try:
        outcome = compaction_fails(lab, "EACCES")
        lab.verify("led")
    finally:
        work.chmod(0o755)
    compacted_again(lab)
    return outcome


def commit_no_permission(lab: Lab) -> str:
    """The compacted ledger written, its ingest into the store (a link into its directory)
    and the cursor that records it are refused: the previous view stays."""
    lab.publish("led", records("i", range(110, 120), 2000))
    before = lab.call(lambda: lab.compact_status("led")).compacted_ledger_id
    ledgers(lab).chmod(0o555)
    try:
        outcome = compaction_fails(lab, "link", "Permission denied")
        assert lab.call(lambda: lab.compact_status("led")).compacted_ledger_id == before
        lab.verify("led")
    finally:
        ledgers(lab).chmod(0o755)
    assert not list(work_dir(lab).glob("*.sst")), "a compacted ledger's file left"
    compacted_again(lab)
    return outcome


def ledger_cursor_disk_full(lab: Lab) -> str:
    messages = iter(lab.consume("led"))
    return lab.ack_refused_on_full_disk(lambda: lab.ack("led", next(messages)), ledgers(lab))


def ledger_cursor_list_disk_full(lab: Lab) -> str:
    """An AcknowledgeList is one WriteBatch: refused whole on a full disk, as one ack."""
    return lab.ack_refused_on_full_disk(lab.ack_lists("ackl", pb.LEDGER), ledgers(lab))


def create_ledger_disk_full(lab: Lab) -> str:
    lab.ballast(0)
    create_refused(lab, "cl", pb.LEDGER, "DISK_FULL", Path(lab.srv.data_dir))
    lab.lighten()
    lab.once_back(lambda: lab.create("cl-after", pb.LEDGER))
    return "refused"


def create_ledger_no_permission(lab: Lab) -> str:
    since = lab.mark()
    blocked = blocker(ledgers(lab).with_name("ledgers.catalog"))
    try:
        lab.create("cn", pb.LEDGER)  # stored in RocksDB: acknowledged
        lab.logged(since, "ledgers.catalog", "EACCES")
    finally:
        blocked.unlink(missing_ok=True)
    lab.create("cn-after", pb.LEDGER)
    return "logged"


LEDGER_CASES = [
    Case("ledger publish", "ENOSPC", ledger_publish_disk_full),
    Case("ledgers.catalog (allocation)", "ENOSPC", catalog_disk_full),
    Case("ledgers.catalog (allocation)", "EACCES", catalog_no_permission),
    Case("ledger compaction", "ENOSPC", compaction_disk_full),
    Case("ledger compaction", "EACCES", compaction_no_permission),
    Case("ledger compaction commit", "EACCES", commit_no_permission),
    Case("ledger cursor (ack)", "ENOSPC", ledger_cursor_disk_full),
    Case("ledger cursor (ack list)", "ENOSPC", ledger_cursor_list_disk_full),
    Case("create LEDGER", "ENOSPC", create_ledger_disk_full),
    Case("create LEDGER (catalog)", "EACCES", create_ledger_no_permission),
]
