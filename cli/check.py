"""``compactlog check DATA_DIR``: verify every batch, index and state file offline.

The logic is ``storage/check.py``; this prints its report (one line per problem, then a
summary) and exits 1 when anything is wrong. It refuses to run while a server holds
the data dir.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from compactlog.storage.check import check_data_dir, print_report

EXIT_PROBLEMS = 1


def add_parser(commands: Any) -> None:
    check = commands.add_parser(
        "check",
        help="verify a stopped server's data dir: every batch, index and state file",
    )
    check.add_argument("data_dir", metavar="DATA_DIR", help="the data directory to verify")
    check.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    report = check_data_dir(Path(args.data_dir))
    print_report(report, print)
    return 0 if report.ok else EXIT_PROBLEMS
