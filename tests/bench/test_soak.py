"""``compactlog bench soak``, quick: seconds of concurrent produce (unary and stream, both
topic kinds), consume with acks, compaction runs and restarts by SIGTERM and SIGKILL,
then the invariants. A real server process on loopback, restarted on its data dir."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from compactlog.bench import soak


def test_a_quick_soak_keeps_every_invariant(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    printed = io.StringIO()
    argv = ["--seconds", "5", "--restart-every", "1.5", "--json", str(out)]
    with contextlib.redirect_stdout(printed):
        code = soak.main([*argv, "--workdir", str(tmp_path)])
    report = json.loads(out.read_text())
    table = printed.getvalue()
    assert code == 0, table
    assert report["ok"] and all(not c["problems"] for c in report["checks"]), table
    counts = report["counts"]
    assert counts["restarts by SIGTERM"] >= 1 and counts["restarts by SIGKILL"] >= 1
    assert counts["published, acknowledged (LEDGER)"] > 0
    assert counts["published, acknowledged (SEGMENTED)"] > 0
    assert counts["deliveries"] > 0 and counts["compactions SUCCESS"] > 0
    assert "| no duplicate delivery of an acked message |" in table
    assert "result: OK" in table
    assert not any(code in report["errors"] for code in ("UNKNOWN", "INTERNAL"))


def test_the_checks_catch_what_they_are_for() -> None:
    """Each invariant fails on a history that breaks it."""
    from compactlog.bench import soak_checks as c

    a, b = ((1, 0), b"k", b"v1"), ((1, 1), b"k", b"v2")
    assert not c.ledger_nothing_lost([a, b], [a]).ok
    assert c.segmented_nothing_lost([a, b], [b]).ok  # a was cleaned: b supersedes it
    assert not c.segmented_nothing_lost([a, b], [a]).ok
    assert not c.increasing("ids", [[(1, 1), (1, 0)]]).ok
    assert not c.no_acked_redelivered("dup", [((1, 0), True)]).ok
    assert not c.compacted_view([a, b], [a, b], {b"v1", b"v2"}).ok
    assert c.compacted_view([b], [a, b], {b"v1", b"v2"}).ok
    assert not c.compacted_view([((1, 1), b"k", b"zz")], [a, b], {b"v1", b"v2"}).ok
    tomb = ((1, 2), b"k", None)
    assert c.compacted_view([], [a, b, tomb], {b"v1", b"v2"}).ok
    assert not c.typed_errors({"UNAVAILABLE": 3, "INTERNAL": 1}).ok
