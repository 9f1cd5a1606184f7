"""``compactlog read TOPIC --compacted --as-of LEDGER:ENTRY | --as-of-time TIME``."""

from __future__ import annotations

import datetime
import json

import pytest

from compactlog import cli
from compactlog.cli.common import timestamp_ms as parse_time_ms


def run(address: str, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["--server", address, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_read_as_of_an_id_and_a_time(
    shared_server,
    capsys: pytest.CaptureFixture[str],
    unique_topic: str,  # type: ignore[no-untyped-def]
) -> None:
    address = shared_server.address
    run(address, capsys, "topics", "create", unique_topic)
    for key, value in (("a", "1"), ("b", "1"), ("a", "2")):
        assert run(address, capsys, "produce", unique_topic, "--key", key, "--value", value)[0] == 0
    code, out, _ = run(address, capsys, "read", unique_topic, "--json")
    ids = [json.loads(line)["id"] for line in out.splitlines()]
    times = [json.loads(line)["publish_time_ms"] for line in out.splitlines()]
    run(address, capsys, "admin", "topics", "compact", unique_topic, "--wait")
    code, out, err = run(address, capsys, "read", unique_topic, "--compacted", "--as-of", ids[1])
    assert code == 0, err
    assert out.splitlines() == [f"{ids[0]} key=a value=1", f"{ids[1]} key=b value=1"]
    code, out, _ = run(
        address, capsys, "read", unique_topic, "--compacted", "--as-of-time", str(times[0])
    )
    assert code == 0 and out.splitlines() == [f"{ids[0]} key=a value=1"]
    iso = datetime.datetime.fromtimestamp(times[2] / 1000 + 1, datetime.UTC).isoformat()
    code, out, _ = run(address, capsys, "read", unique_topic, "--compacted", "--as-of-time", iso)
    assert code == 0 and [line.split(" ", 1)[1] for line in out.splitlines()] == [
        "key=b value=1",
        "key=a value=2",
    ]
    code, _, err = run(address, capsys, "read", unique_topic, "--as-of", ids[1])
    assert code == 1 and "read_compacted" in err and len(err.splitlines()) == 1
    code, _, err = run(address, capsys, "read", unique_topic, "--compacted", "--as-of", "x")
    assert code == 2 and "--as-of" in err


def test_as_of_time_parsing() -> None:
    assert parse_time_ms("1700000000123") == 1700000000123
    assert parse_time_ms("2026-11-23T21:00:00Z") == 1795467600000
    assert parse_time_ms("2026-11-23T21:00:00") == 1795467600000
    assert parse_time_ms("2026-11-23T22:00:00+01:00") == 1795467600000
