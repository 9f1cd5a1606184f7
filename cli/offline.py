"""Commands that work on a data dir directly, with no server running: ``migrate`` and
``check`` (the offline verifier, ``storage/check.py``: one line per problem, a summary,
exit 1 when anything is wrong)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from compactlog.cli.common import DEFAULT_DATA_DIR
from compactlog.cli.output import print_json, wants_json


def add_parsers(commands: Any) -> None:
    migrate = commands.add_parser(
        "migrate",
        help="convert a data dir written by an older compactlog to this version's format",
        description=(
            "Convert DATA_DIR in place to the current storage format (stored batches). "
            "Stop the server first. Safe to run again after an interruption."
        ),
    )
    migrate.add_argument("data_dir", metavar="DATA_DIR", nargs="?", default=DEFAULT_DATA_DIR)
    migrate.add_argument(
        "--slots",
        action="store_true",
        help="also spread a single-store data dir over store slots, for serve --shards N",
    )
    migrate.set_defaults(func=_migrate)
    check = commands.add_parser(
        "check",
        help="verify a data dir: every batch, index, cursor and state file",
        description=(
            "Read every batch of every ledger and segment, check every CRC, index, cursor "
            "and state file, and print what is wrong where. Stop the server first."
        ),
    )
    check.add_argument("data_dir", metavar="DATA_DIR", nargs="?", default=DEFAULT_DATA_DIR)
    check.set_defaults(func=_check)


def _check(args: argparse.Namespace) -> int:
    from compactlog.storage.check import check_data_dir, print_report
    from compactlog.storage.slots import read_layout, slot_dir

    data_dir = Path(args.data_dir)
    layout = read_layout(data_dir) if data_dir.is_dir() else None
    if layout is None or not layout.sharded:
        report = check_data_dir(data_dir)
        if wants_json(args):
            print_json({"data_dir": args.data_dir, **_report_json(report)})
        else:
            print_report(report, print)
        return 0 if report.ok else 1
    slots = []
    for slot in range(layout.slots):  # a data dir of store slots: each slot is a data dir
        report = check_data_dir(slot_dir(data_dir, slot))
        slots.append({"slot": slot, **_report_json(report)})
        if not wants_json(args):
            print(f"slot {slot}:")
            print_report(report, lambda line: print(f"  {line}"))
    ok = all(s["ok"] for s in slots)
    if wants_json(args):
        print_json({"data_dir": args.data_dir, "ok": ok, "slots": slots})
    return 0 if ok else 1


def _report_json(report: Any) -> dict[str, Any]:
    return {
        "ok": report.ok,
        "problems": report.problems,
        "notes": report.notes,
        "counts": report.counts,
    }


def _migrate(args: argparse.Namespace) -> int:
    if args.slots:
        return _migrate_to_slots(Path(args.data_dir))
    from compactlog.storage.migrate import migrate_data_dir

    report = migrate_data_dir(Path(args.data_dir), log=print)
    if report.already_current:
        return 0
    print(
        f"migrated {args.data_dir}: {report.ledgers_converted} ledgers "
        f"({report.entries} entries in {report.batches} batches), "
        f"{report.segments_converted} segment files"
    )
    return 0


def _migrate_to_slots(data_dir: Path) -> int:
    from compactlog.storage.slot_migrate import migrate_to_slots

    report = migrate_to_slots(data_dir, log=print)
    if report.already_slotted:
        print(f"{data_dir} is already spread over store slots")
        return 0
    print(
        f"spread {data_dir} over store slots: {report.topics} LEDGER topics "
        f"({report.keys} keys), {report.segmented_topics} SEGMENTED topics; "
        "serve it with --shards N"
    )
    return 0
