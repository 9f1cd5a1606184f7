"""ENOSPC and EACCES at each write site of a real ``compactlog serve`` (issue 27, CONTRACT
section 11): publish, a segment roll and its ``segments.manifest``, a cleaner pass (the
``.cleaned`` segment, then the swap, then the cleaner's offset checkpoint), DeleteRecords
and retention (the log start offset, then ``segments.manifest``), a LEDGER compaction, a
cursor write on both kinds, a topic create on both kinds and the LEDGER catalog's
allocation write.

One server without CAP_DAC_OVERRIDE (so file modes apply to it) runs on a small tmpfs for
the whole module; each case causes its fault for real (a ballast file leaving an exact
number of free pages, a ``chmod``, a read-only file where the write's temporary file goes),
makes the write, takes the cause away and makes it again, without a restart. Every case
then reads back everything acknowledged so far; at the end the server stops (exit 0),
``compactlog check`` finds nothing, and a restarted server reads it all again. A case ends
``refused`` (the call answered its reason, with ``path`` and ``errno``), ``reported`` (a
background run's ERROR state and log line say why) or ``logged`` (a best-effort file not
written, logged, written at its next change); the table counts them, INTERNAL 0, lost 0.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import mount_small_disk, unmount_small_disk

from .conftest import UnprivilegedServer, require_drop_caps
from .write_sites import Case, Lab, Refused, records
from .write_sites_ledger import LEDGER_CASES
from .write_sites_offsets import OFFSET_CASES
from .write_sites_segmented import ROLLING, SEGMENTED_CASES

pytestmark = pytest.mark.slow

DISK = 8 << 20
CASES = [*SEGMENTED_CASES, *OFFSET_CASES, *LEDGER_CASES]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    require_drop_caps()
    path = tmp_path_factory.mktemp("write-sites") / "disk"
    disk = mount_small_disk(path, DISK)
    srv = UnprivilegedServer(path / "data").start()
    made = Lab(srv, disk)
    made.create("seg", pb.SEGMENTED)
    made.create("roll", pb.SEGMENTED, **ROLLING)
    made.create("led", pb.LEDGER, ledger_max_entries="4")
    for n in range(4):
        made.publish("seg", records(f"s{n}", range(4), 300))
        made.publish("roll", records(f"r{n}", range(2), 600))
        made.publish("led", records(f"l{n}", range(40), 2000))
    yield made
    made.close()
    for sub in path.rglob("*"):  # give the teardown its permissions back
        if sub.is_dir():
            sub.chmod(0o755)
    if srv.proc is not None and srv.proc.poll() is None:
        srv.kill()
    unmount_small_disk(path)


def run_case(lab: Lab, case: Case) -> str:
    started = time.monotonic()
    try:
        outcome = case.run(lab)
        lab.verify_all()
        return f"{outcome}: {time.monotonic() - started:.1f}s"
    except (AssertionError, Refused, StopIteration) as exc:
        lab.lighten()
        return f"failed: {exc}"


def restart_and_check(lab: Lab) -> list[str]:
    """Stop (exit 0), ``compactlog check`` clean, start, everything acknowledged there."""
    problems = []
    if (code := lab.srv.stop()) != 0:
        problems.append(f"SIGTERM exit {code}")
    checked = subprocess.run(
        [sys.executable, "-m", "compactlog", "check", str(lab.srv.data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if checked.returncode != 0:
        problems.append("check: " + checked.stdout[-2000:] + checked.stderr[-2000:])
    lab.api.close()
    lab.srv.start()
    lab.api = type(lab.api)(lab.srv.address)
    try:
        lab.verify_all()
        lab.verify_acks()
    except (AssertionError, Refused) as exc:
        problems.append(f"after restart: {exc}")
    return problems


def test_every_write_site_refuses_with_its_reason_and_recovers(lab: Lab, capsys: Any) -> None:
    started = time.monotonic()
    outcomes = [run_case(lab, case) for case in CASES]
    problems = restart_and_check(lab)
    totals = Counter(o.split(":")[0] for o in outcomes)
    pairs = list(zip(CASES, outcomes, strict=True))
    failed = [f"{c.site} / {c.fault}: {o}" for c, o in pairs if o.startswith("failed")]
    with capsys.disabled():
        print(
            f"\nwrite sites: {len(CASES)} cases in {time.monotonic() - started:.1f}s: "
            + ", ".join(f"{o}={totals.get(o, 0)}" for o in ("refused", "reported", "logged"))
            + f", failed={totals.get('failed', 0)}; INTERNAL {lab.internal}, "
            + f"lost {lab.lost}"
        )
        for case, outcome in pairs:
            print(f"  {case.site:34} {case.fault:7} {outcome[:300]}")
    assert not failed and not problems, "\n".join(failed + problems)
    assert lab.internal == 0 and lab.lost == 0
