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

    report = check_data_dir(Path(args.data_dir))
    if wants_json(args):
        print_json(
            {
                "data_dir": args.data_dir,
                "ok": report.ok,
                "problems": report.problems,
                "notes": report.notes,
                "counts": report.counts,
            }
        )
    else:
        print_report(report, print)
    return 0 if report.ok else 1


def _migrate(args: argparse.Namespace) -> int:
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
