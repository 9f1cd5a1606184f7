"""Kafka console habits (CONTRACT section 4) against the real server: ``produce --lines``
and ``--key-separator`` (kafka-console-producer), ``read --from-beginning``,
``--max-messages``, ``--bootstrap-server`` and a bare offset on SEGMENTED topics
(kafka-console-consumer), one timestamp parser for every timestamp option,
``topics describe`` telling overrides from defaults, and ``compact --engine spark``
refused on SEGMENTED topics before Spark starts."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from compactlog import cli
from compactlog.client import Client

RunCli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run_cli(
    shared_server: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> RunCli:
    """``compactlog --bootstrap-server <shared> ARGS`` in-process; ``stdin=`` feeds bytes."""

    def run(*argv: str, stdin: bytes | None = None) -> tuple[int, str, str]:
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        code = cli.main([*argv, "--bootstrap-server", shared_server.address])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("compactlog: error: "), err
    return lines[0]


def read_back(address: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    with Client(address) as client:
        return [(m.key, m.value) for m in client.reader(topic)]


def test_produce_lines_sends_each_line_as_a_value(
    run_cli: RunCli, shared_server: Any, unique_topic: str
) -> None:
    run_cli("topics", "create", unique_topic, "--kind", "segmented")
    code, out, _ = run_cli("produce", unique_topic, "--lines", stdin=b"hello\n{not json}\r\n\nend")
    assert code == 0 and f"produced 4 messages to {unique_topic}" in out
    assert read_back(shared_server.address, unique_topic) == [
        (None, b"hello"),
        (None, b"{not json}"),  # as it stands, CR LF line end dropped
        (None, b""),  # an empty line is an empty value, as the console producer sends it
        (None, b"end"),
    ]


def test_key_separator_splits_at_the_first_one(
    run_cli: RunCli, shared_server: Any, unique_topic: str
) -> None:
    run_cli("topics", "create", unique_topic, "--kind", "segmented")
    code, _, _ = run_cli("produce", unique_topic, "--key-separator", ":", stdin=b"a:1\nb:2:3\n")
    assert code == 0
    assert read_back(shared_server.address, unique_topic) == [(b"a", b"1"), (b"b", b"2:3")]
    code, _, err = run_cli(
        "produce", unique_topic, "--lines", "--key-separator", "::", stdin=b"c::4\nno key\nd::5\n"
    )
    line = error_line(err)
    assert code == 2 and "line 2: no key separator '::' in 'no key'" in line
    assert "produced 1 message" in line  # what came before the bad line went out
    assert read_back(shared_server.address, unique_topic)[-1] == (b"c", b"4")


def test_key_separator_refuses_a_silent_tombstone_on_a_ledger_topic(
    run_cli: RunCli, shared_server: Any, unique_topic: str
) -> None:
    run_cli("topics", "create", unique_topic)
    code, _, err = run_cli("produce", unique_topic, "--key-separator", "=", stdin=b"k=\n")
    assert code == 2 and "line 1" in error_line(err) and "tombstone" in error_line(err)
    assert read_back(shared_server.address, unique_topic) == []


def test_plain_text_without_lines_points_at_lines(run_cli: RunCli, unique_topic: str) -> None:
    run_cli("topics", "create", unique_topic)
    code, _, err = run_cli("produce", unique_topic, stdin=b"hello\n")
    line = error_line(err)
    assert code == 2 and "line 1: invalid JSON" in line and "--lines" in line
    code, _, err = run_cli("produce", unique_topic, "--lines", "--key", "k", "--value", "v")
    assert code == 2 and "--lines" in error_line(err)


def test_console_consumer_options(run_cli: RunCli, shared_server: Any, unique_topic: str) -> None:
    run_cli("topics", "create", unique_topic, "--kind", "segmented")
    run_cli("produce", unique_topic, "--lines", stdin=b"".join(b"m%d\n" % i for i in range(6)))
    code, out, _ = run_cli("read", unique_topic, "--from-beginning", "--max-messages", "2")
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == ["0:0", "0:1"]
    code, out, _ = run_cli("read", unique_topic, "--from", "4")
    assert code == 0 and out.splitlines() == ["0:4 key=<null> value=m4", "0:5 key=<null> value=m5"]
    code, _, err = run_cli("read", unique_topic, "--from", "4", "--from-beginning")
    assert code == 2 and "not allowed with" in error_line(err)


def test_a_bare_offset_on_a_ledger_topic_says_what_to_give(
    run_cli: RunCli, unique_topic: str
) -> None:
    run_cli("topics", "create", unique_topic)
    code, out, err = run_cli("read", unique_topic, "--from", "445")
    line = error_line(err)
    assert code == 2 and out == ""
    assert "SEGMENTED" in line and "LEDGER topic" in line and "LEDGER:ENTRY" in line


def test_every_timestamp_option_takes_iso_8601_or_epoch_ms(
    run_cli: RunCli, shared_server: Any, unique_topic: str
) -> None:
    run_cli("topics", "create", unique_topic)
    iso, ms = "2026-11-23T21:00:00Z", "1795467600000"
    for when in (iso, ms):
        code, _, err = run_cli(
            "produce", unique_topic, "--key", "k", "--value", when, "--event-time-ms", when
        )
        assert code == 0, err
    code, out, _ = run_cli("read", unique_topic, "--json")
    assert [json.loads(line)["event_time_ms"] for line in out.splitlines()] == [int(ms)] * 2
    with Client(shared_server.address) as client:
        client.subscribe(unique_topic, "s").close()
    # a reset by time goes by publish time: both messages were published before 2100
    for future in ("2100-01-01T00:00:00Z", "4102444800000"):
        code, out, err = run_cli("subscriptions", "reset", unique_topic, "s", "--timestamp", future)
        assert code == 0 and "backlog 0" in out, err
        code, out, _ = run_cli(
            "subscriptions", "reset", unique_topic, "s", "--timestamp", "1970-01-01"
        )
        assert code == 0 and "backlog 2" in out
    code, _, err = run_cli("subscriptions", "reset", unique_topic, "s", "--timestamp", "noon")
    assert code == 2 and "ISO 8601" in error_line(err)


def test_describe_marks_overrides_and_defaults(run_cli: RunCli, unique_topic: str) -> None:
    run_cli("topics", "create", unique_topic, "--kind", "segmented", "--config", "retention.ms=-1")
    code, out, _ = run_cli("topics", "describe", unique_topic)
    lines = out.splitlines()
    assert code == 0 and "config (1 override):" in lines
    [retention] = [line for line in lines if line.strip().startswith("retention.ms ")]
    [segment] = [line for line in lines if line.strip().startswith("segment.ms ")]
    assert retention.endswith("(override)") and segment.endswith("(default)")
    assert not any(line.startswith("compacted:") for line in lines)  # no compacted ledger
    code, out, _ = run_cli("topics", "describe", unique_topic, "--json")
    assert json.loads(out)["overrides"] == ["retention.ms"]
    ledger = unique_topic + "-ledger"
    run_cli("topics", "create", ledger)
    code, out, _ = run_cli("topics", "describe", ledger)
    assert "compacted: 0 entries, 0 bytes" in out and "config (0 overrides):" in out


def test_spark_engine_on_a_segmented_topic_is_refused_before_spark(
    shared_server: Any, unique_topic: str
) -> None:
    with Client(shared_server.address) as client:
        client.create_topic(unique_topic, kind="segmented")
    program = (
        "import sys\n"
        "from compactlog import cli\n"
        f"code = cli.main(['--server', {shared_server.address!r}, 'admin', 'topics', "
        f"'compact', {unique_topic!r}, '--engine', 'spark'])\n"
        "assert 'pyspark' not in sys.modules, 'Spark was started'\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
    )
    line = error_line(proc.stderr)
    assert proc.returncode == 1
    assert f"topic {unique_topic!r} is SEGMENTED" in line and "LogCleaner" in line
