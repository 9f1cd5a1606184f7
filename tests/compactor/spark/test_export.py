"""``compactlog export``: the latest value per key (or the raw log) as parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from compactlog.cli import main
from compactlog.v1 import compactlog_pb2 as pb

from .conftest import Api

pytestmark = pytest.mark.spark


def test_export_compacted_and_raw(
    spark: Any, shared_server: Any, api: Any, tmp_path: Path, capsys: Any
) -> None:
    a: Api = api(shared_server.address)
    topic = "export-me"
    a.create(topic, ledger_max_entries="50")
    records = [pb.Record(key=b"k%d" % (i % 30), value=b"v%d" % i) for i in range(200)]
    records += [pb.Record(value=b"keyless"), pb.Record(key=b"k1"), pb.Record(key=b"k2", value=b"")]
    a.publish(topic, records[:120])
    a.admin.Compact(pb.CompactRequest(topic=topic, wait=True))
    a.publish(topic, records[120:])  # folded in although not compacted yet
    latest: dict[bytes, tuple[tuple[int, int], bytes | None]] = {}
    for lid, eid, key, value, *_ in a.read(topic, False):
        if key is not None:
            latest[key] = ((lid, eid), value)
    expected = sorted((i, k, v) for k, (i, v) in latest.items() if v)

    out = tmp_path / "latest"
    argv = ["--server", a.address, "export", topic, "--compacted", "--format", "parquet"]
    assert main([*argv, str(out)]) == 0
    assert f"exported {len(expected)} rows" in capsys.readouterr().out
    table = pq.read_table(out).to_pylist()
    got = sorted(((r["ledger_id"], r["entry_id"]), r["key"], r["value"]) for r in table)
    assert got == expected

    assert main([*argv, str(out)]) == 1  # exists: one line, no traceback
    assert capsys.readouterr().err.count("\n") == 1
    raw = tmp_path / "raw"
    assert main(["--server", a.address, "export", topic, str(raw)]) == 0
    assert pq.read_table(raw).num_rows == len(records)
    assert main(["--server", a.address, "export", "no-such-topic", str(raw)]) == 1
