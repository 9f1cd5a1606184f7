"""``compactlog bench client`` runs end to end on a small topic: every loop reaches its
count (a short one raises), each figure sits beside its floor, and the per-call figures
that explain the consume floor are in the JSON and the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactlog.bench import client_rates


@pytest.mark.slow
def test_client_bench_quick(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "client.json"
    argv = ["--quick", "--workdir", str(tmp_path), "--json", str(out)]
    assert client_rates.main(argv) == 0
    report = json.loads(out.read_text())
    results = report["results"]
    keys = ("raw_read_mps", "raw_consume_mps", "raw_consume_noack_mps", "raw_consume_stream_mps")
    for key in (*keys, "unary_ms"):
        assert results[key]["median"] > 0, key
    assert all(r["figure"] > 0 and r["floor"] > 0 for r in report["rows"])
    printed = capsys.readouterr().out
    assert "raw Consume of 1000 without acks" in printed
    assert "GetLastMessageId round trip" in printed
    assert "asyncio send_async + flush" in printed  # the asyncio producer's rows and CPU
    assert "read_next, reading key and value" in printed  # a user's loop reads its fields
    for name in ("aio_send_async", "read_fields", "receive", "batch_receive", "raw_consume_stream"):
        assert results[f"{name}_cpu_us"]["median"] > 0, name
    assert "batch_receive " in printed and "raw ConsumeStream " in printed
    assert "subscribe + receive, acknowledge each" in printed  # pulsar's usual loop
    # the gathered sends beside asyncio's own cost of that shape, no I/O
    assert results["aio_gather_mps"]["median"] > 0
    assert "asyncio send, gathered (beside asyncio's own gather)" in printed
    assert results["receive_each_stored_s"]["median"] >= results["receive_each_close_s"]["median"]
