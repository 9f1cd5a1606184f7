"""``compactlog bench kafka`` runs end to end: librdkafka's figures beside gRPC's from the
same server, each row with its ratio, the client settings and load average printed, and
a JSON record of every run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from compactlog.bench import cli

pytest.importorskip("confluent_kafka")


@pytest.mark.slow
def test_quick_run_prints_both_rows_beside_grpc(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json = tmp_path / "kafka.json"
    argv = ["kafka", "--records", "2000", "--runs", "1", "--workdir", str(tmp_path)]
    assert cli.main([*argv, "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "librdkafka Producer, acks=-1, linger 5 ms, 100 B" in out
    assert "gRPC PublishStream, 1000 x 100 B per request" in out
    assert "librdkafka Consumer, whole topic, connected" in out
    assert "librdkafka Consumer, whole topic, from Consumer()" in out
    assert "'acks': -1, 'linger.ms': 5" in out  # the client settings are printed
    report = json.loads(out_json.read_text())
    assert report["suite"] == "compactlog bench kafka"
    assert len(report["load_average"]) == 2
    rows = report["rows"]
    if shutil.which("kcat") is None:  # .ci/run installs it
        assert len(rows) == 3 and "kcat is not installed: its rows are left out" in out
    else:
        assert [row["name"] for row in rows[3:]] == [
            "kcat -P (librdkafka from C), acks=all, linger 5 ms, 100 B",
            "kcat -C (librdkafka from C), whole topic, from its start",
            "kcat -C, the listener's answers replayed (floor: a broker costing nothing)",
        ]
        assert report["results"]["ratio.kcat_produce"]["samples"][0] > 0
        assert report["results"]["kcat.consume_client_cpu_s"]["samples"][0] > 0  # its own
        assert "- run 1: kcat read " in out and "the goal allows" in out
    for row in rows:
        assert row["figure"] > 0 and row["floor"] > 0
        assert row["ratio"] == pytest.approx(row["figure"] / row["floor"])
    assert report["results"]["ratio.produce"]["samples"][0] > 0
    results = {key: value["median"] for key, value in report["results"].items()}
    assert 0 < results["kafka.consume_loop_cpu_s"] <= results["kafka.consume_client_cpu_s"]
    # /proc counts CPU in clock ticks: a 2,000-record read may cost less than one
    assert results["kafka.consume_server_cpu_s"] >= 0 and results["grpc.read_server_cpu_s"] >= 0
    assert "CPU seconds (medians): librdkafka's producer" in out
    assert results["kafka.produce_client_cpu_s"] > 0


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_quick_run_prints_kcat_against_the_replay_floor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The floor's row is printed beside kcat's against the listener, and kcat read
    every record from the replay of the listener's answers: the same count (``consume``
    checks it) and the same last offset as from the listener."""
    out_json = tmp_path / "kafka.json"
    argv = ["kafka", "--quick", "--workdir", str(tmp_path), "--json", str(out_json)]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    report = json.loads(out_json.read_text())
    floor = "kcat -C, the listener's answers replayed (floor: a broker costing nothing)"
    assert [row["name"] for row in report["rows"]][-2:] == [
        "kcat -C (librdkafka from C), whole topic, from its start",
        floor,
    ]
    assert f"| {floor} |" in out and "kcat consume, replay floor " in out
    assert "; against the replay floor " in out
    results = {key: value["samples"][0] for key, value in report["results"].items()}
    records = report["settings"]["records"]
    assert results["kcat.consume_last_offset"] == records - 1  # a fresh topic: 0..N-1
    assert results["kcat_floor.recorded_last_offset"] == records - 1
    assert results["kcat_floor.consume_last_offset"] == records - 1
    assert results["kcat_floor.served"] >= 5  # ApiVersions, Metadata, ListOffsets, Fetch
    assert results["kcat_floor.consume_mps"] > 0 and results["kcat_floor.consume_client_cpu_s"] > 0
    assert results["ratio.kcat_floor_consume"] == pytest.approx(
        results["kcat_floor.consume_mps"] / results["grpc.read_mps"]
    )
