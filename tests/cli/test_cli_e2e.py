"""The ``compactlog`` CLI against the real server: in-process ``main()`` for speed, and the
console entry point as a child process where exit codes and stderr must be exactly right."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compactlog import cli
from compactlog.client import Client, MessageId

RunCli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run_cli(
    shared_server,
    capsys: pytest.CaptureFixture[str],  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> RunCli:
    """``compactlog --server <shared> ARGS`` in-process; ``stdin=`` feeds bytes to it."""

    def run(*argv: str, stdin: bytes | None = None) -> tuple[int, str, str]:
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        code = cli.main(["--server", shared_server.address, *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("compactlog: error: "), err
    return lines[0]


def test_topics_verbs(run_cli: RunCli, unique_topic: str) -> None:
    code, out, _ = run_cli("topics", "create", unique_topic, "--config", "ledger.max.entries=10")
    assert code == 0 and unique_topic in out
    code, out, _ = run_cli("topics", "list")
    assert code == 0 and unique_topic in out
    code, out, _ = run_cli("topics", "list", "--json")
    names = [json.loads(line)["name"] for line in out.splitlines()]
    assert unique_topic in names
    code, out, _ = run_cli("topics", "describe", unique_topic)
    assert code == 0 and "ledger.max.entries = 10" in out and "kind:      ledger" in out
    code, out, _ = run_cli(
        "topics", "set-config", unique_topic, "retention.ms=1000", "--remove", "ledger.max.entries"
    )
    assert code == 0 and "retention.ms=1000" in out
    code, out, _ = run_cli("topics", "describe", unique_topic, "--json")
    config = json.loads(out)["config"]
    assert config["retention.ms"] == "1000" and config["ledger.max.entries"] == "50000"
    code, out, _ = run_cli("topics", "delete", unique_topic)
    assert code == 0
    code, out, err = run_cli("topics", "describe", unique_topic)
    assert code == 1 and out == ""
    assert unique_topic in one_error_line(err)


def test_produce_flags_and_read(run_cli: RunCli, unique_topic: str) -> None:
    run_cli("topics", "create", unique_topic)
    code, out, _ = run_cli(
        "produce",
        unique_topic,
        "--key",
        "a",
        "--value",
        "1",
        "--property",
        "src=cli",
        "--event-time-ms",
        "77",
    )
    assert code == 0
    first = out.strip()
    assert ":" in first
    assert run_cli("produce", unique_topic, "--key", "a", "--tombstone")[0] == 0
    assert run_cli("produce", unique_topic, "--value", "no key")[0] == 0
    assert run_cli("produce", unique_topic, "--key", "n", "--value", "null")[0] == 0

    code, out, _ = run_cli("read", unique_topic)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 4
    assert lines[0] == f"{first} key=a value=1"
    assert lines[1].endswith(" key=a tombstone")
    assert lines[2].endswith(" key=<null> value=no key")
    assert lines[3].endswith(" key=n value=null")  # the string "null", not a tombstone

    code, out, _ = run_cli("read", unique_topic, "--json", "--limit", "1")
    (record,) = [json.loads(line) for line in out.splitlines()]
    assert record["id"] == first and record["key"] == "a" and record["value"] == "1"
    assert record["properties"] == {"src": "cli"} and record["event_time_ms"] == 77
    assert record["publish_time_ms"] > 0

    second = lines[1].split()[0]
    code, out, _ = run_cli("read", unique_topic, "--from", second, "--limit", "2")
    assert [line.split()[0] for line in out.splitlines()] == [second, lines[2].split()[0]]
    code, out, _ = run_cli("read", unique_topic, "--from", second, "--limit", "1", "--json")
    assert json.loads(out)["tombstone"] is True and json.loads(out)["value"] is None
    code, out, _ = run_cli("read", unique_topic, "--from", "latest")
    assert code == 0 and out == ""


def test_produce_json_lines(run_cli: RunCli, unique_topic: str, shared_server) -> None:  # type: ignore[no-untyped-def]
    run_cli("topics", "create", unique_topic)
    lines = [
        {"key": "a", "value": "1", "properties": {"p": "q"}, "event_time_ms": 5},
        {"key": "b", "value": None},
        {"value": "keyless"},
        {"key": "bin", "value_b64": "AP8="},
    ] + [{"key": f"k{i}", "value": str(i)} for i in range(25)]
    data = "\n".join(json.dumps(line) for line in lines).encode() + b"\n\n"
    code, out, _ = run_cli("produce", unique_topic, "--batch-size", "10", stdin=data)
    assert code == 0 and "produced 29 messages" in out

    with Client(shared_server.address) as client:
        got = list(client.reader(unique_topic))
    assert [(m.key, m.value) for m in got[:4]] == [
        (b"a", b"1"),
        (b"b", None),
        (None, b"keyless"),
        (b"bin", b"\x00\xff"),
    ]
    assert got[0].properties == {"p": "q"} and got[0].event_time_ms == 5
    assert len(got) == 29

    # read --json output goes back into produce unchanged.
    code, out, _ = run_cli("read", unique_topic, "--json", "--limit", "4")
    copy = unique_topic + "-copy"
    run_cli("topics", "create", copy)
    code, _, _ = run_cli("produce", copy, stdin=out.encode())
    assert code == 0
    with Client(shared_server.address) as client:
        copied = list(client.reader(copy))
    assert [(m.key, m.value, dict(m.properties)) for m in copied] == [
        (m.key, m.value, dict(m.properties)) for m in got[:4]
    ]


def test_invalid_json_line_stops_after_what_came_before(run_cli: RunCli, unique_topic: str) -> None:
    run_cli("topics", "create", unique_topic)
    data = (
        b'{"key": "a", "value": "1"}\n{"key": "b", "value": "2"}\n{"key": "c", value}\n'
        b'{"key": "d", "value": "4"}\n'
    )
    code, out, err = run_cli("produce", unique_topic, stdin=data)
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert "line 3" in line and f"produced 2 messages to {unique_topic} before it" in line
    code, out, _ = run_cli("read", unique_topic)
    assert code == 0 and [m.split(" ", 1)[1] for m in out.splitlines()] == [
        "key=a value=1",
        "key=b value=2",
    ]


def test_cli_errors(run_cli: RunCli, unique_topic: str) -> None:
    code, _, err = run_cli("read", unique_topic)
    assert code == 1 and "does not exist" in one_error_line(err)
    code, _, err = run_cli("produce", unique_topic, "--key", "k", "--value", "v")
    assert code == 1 and unique_topic in one_error_line(err)
    run_cli("topics", "create", unique_topic)
    code, _, err = run_cli("topics", "create", unique_topic)
    assert code == 1 and "exists" in one_error_line(err)
    code, _, err = run_cli("topics", "create", "a/b")
    assert code == 1 and "a/b" in one_error_line(err)
    code, _, err = run_cli("topics", "create", unique_topic + "x", "--config", "nope=1")
    assert code == 1 and "nope" in one_error_line(err)
    code, _, err = run_cli("read", unique_topic, "--from", "one:two")
    assert code == 2 and "--from" in one_error_line(err)


def test_compact_commands(run_cli: RunCli, unique_topic: str) -> None:
    run_cli("topics", "create", unique_topic)
    data = (
        b'{"key":"c","value":"1"}\n{"key":"a","value":"2"}\n{"key":"b","value":"3"}\n'
        b'{"key":"a","value":"4"}\n'
    )
    run_cli("produce", unique_topic, stdin=data)
    code, out, err = run_cli("admin", "topics", "compact", unique_topic, "--wait")
    assert code == 0 and "state:            SUCCESS" in out, err
    code, out, _ = run_cli("admin", "topics", "compaction-status", unique_topic, "--json")
    status = json.loads(out)
    assert status["state"] == "SUCCESS" and status["last_run"]["kept"] == 3
    code, out, _ = run_cli("read", unique_topic, "--compacted")
    assert [line.split(" ", 1)[1] for line in out.splitlines()] == [
        "key=c value=1",
        "key=b value=3",
        "key=a value=4",
    ]


def test_compact_unknown_topic(run_cli: RunCli, unique_topic: str) -> None:
    code, _, err = run_cli("admin", "topics", "compaction-status", unique_topic)
    assert code == 1
    one_error_line(err)


def test_console_script_errors_have_no_traceback() -> None:
    env_cmd = [sys.executable, "-m", "compactlog", "--server", "127.0.0.1:1"]
    proc = subprocess.run([*env_cmd, "topics", "list"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    line = one_error_line(proc.stderr)
    assert line.startswith("compactlog: error: server 127.0.0.1:1 is not reachable (")
    assert "refused" in line.lower()
    proc = subprocess.run(
        [*env_cmd, "read", "t", "--from", "x"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    one_error_line(proc.stderr)


def test_follow_stops_on_sigint(shared_server, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    with Client(shared_server.address) as client:
        client.create_topic(unique_topic)
        client.producer(unique_topic).send("k", "v")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "compactlog",
            "--server",
            shared_server.address,
            "read",
            unique_topic,
            "--follow",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.endswith(" key=k value=v\n")
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "Traceback" not in err
    assert MessageId.parse(first.split()[0]).entry_id() == 0


def test_follow_stops_on_sigint_inside_grpc(shared_server, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    """The race behind a ``read --follow`` that did not end after SIGINT under load: the
    signal delivered while the main thread is inside grpcio's own locking
    (``tests/cli/interrupt_at.py`` puts it exactly there). As a ``KeyboardInterrupt``
    raised there it left a lock released twice (exit 1) or the channel's spin thread
    dead, whose calls ``Client.close()`` then waits for; the CLI now only sets a flag and
    cancels the stream from a helper thread (``cli.interrupts``)."""
    with Client(shared_server.address) as client:
        client.create_topic(unique_topic)
        client.producer(unique_topic).send("k", "v")
    harness = str(Path(__file__).with_name("interrupt_at.py"))
    window = "wait-release"
    argv = ["--server", shared_server.address, "read", unique_topic, "--follow"]
    proc = subprocess.run(
        [sys.executable, harness, window, *argv], capture_output=True, text=True, timeout=30
    )
    assert f"injected at {window}" in proc.stderr  # the window is still where it was
    assert proc.returncode == 130, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception" not in proc.stderr
    assert proc.stdout.endswith(" key=k value=v\n")


def test_compact_dry_run_cancel_and_verify(run_cli: RunCli, unique_topic: str) -> None:
    run_cli("topics", "create", unique_topic)
    data = b'{"key":"a","value":"1"}\n{"key":"b","value":"2"}\n{"key":"a","value":"3"}\n'
    run_cli("produce", unique_topic, stdin=data)
    code, out, _ = run_cli("admin", "topics", "compact", unique_topic, "--dry-run", "--json")
    preview = json.loads(out)
    assert code == 0 and preview["dry_run"] and (preview["read"], preview["kept"]) == (3, 2)
    code, out, _ = run_cli("admin", "topics", "compaction-status", unique_topic)
    assert "state:            NOT_RUN" in out  # the dry run changed nothing
    code, _, err = run_cli("admin", "topics", "cancel", unique_topic)
    assert code == 1 and "no compaction" in one_error_line(err)
    code, out, err = run_cli("admin", "topics", "compact", unique_topic, "--wait")
    assert code == 0 and "state:            SUCCESS" in out
    assert f"compacting {unique_topic}: " in err  # plain progress lines off a terminal
    code, out, _ = run_cli("admin", "topics", "verify", unique_topic, "--json")
    result = json.loads(out)
    assert code == 0 and result["ok"] and result["checked"] == 2 and len(result["digest"]) == 64


def test_output_json_from_every_command_that_prints_data(
    run_cli: RunCli, unique_topic: str
) -> None:
    """``--output json`` (anywhere on the line): every line on stdout is one JSON object."""
    t, kafka = unique_topic, unique_topic + "-kafka"
    stdin = b'{"key": "a", "value": "1"}\n{"key": "a", "value": "2"}\n{"key": "b", "value": null}\n'
    commands: list[tuple[list[str], bytes | None]] = [
        (["topics", "create", t], None),
        (["topics", "create", kafka, "--kind", "segmented"], None),
        (["topics", "list"], None),
        (["topics", "describe", t], None),
        (["topics", "set-config", t, "retention.ms=60000"], None),
        (["produce", t, "--key", "c", "--value", "3"], None),
        (["produce", t], stdin),
        (["produce", kafka, "--key", "k", "--value", "v"], None),
        (["read", t], None),
        (["admin", "topics", "compact", t, "--dry-run"], None),
        (["admin", "topics", "compact", t, "--wait"], None),
        (["admin", "topics", "compaction-status", t], None),
        (["admin", "topics", "verify", t], None),
        (["read", t, "--compacted"], None),
        (["records", "delete-before", kafka, "1"], None),
        (["topics", "delete", kafka], None),
    ]
    seen: dict[str, list[dict[str, object]]] = {}
    for argv, data in commands:
        code, out, err = run_cli(*argv, "--output", "json", stdin=data)
        assert code == 0, (argv, err)
        assert out.strip(), argv
        seen[" ".join(argv)] = [json.loads(line) for line in out.splitlines()]
    ids = [r["id"] for r in seen[f"read {t}"]]
    assert seen[f"produce {t} --key c --value 3"] == [
        {"topic": t, "id": ids[0], "tombstone": False}
    ]
    assert seen[f"produce {t}"] == [
        {"topic": t, "produced": 3, "first_id": ids[1], "last_id": ids[3]}
    ]
    assert [r["tombstone"] for r in seen[f"read {t}"]] == [False, False, False, True]
    assert [r["key"] for r in seen[f"read {t} --compacted"]] == ["c", "a"]
    assert seen[f"admin topics verify {t}"][0]["ok"] is True
    assert seen[f"records delete-before {kafka} 1"][0]["stats"]["log_start_offset"] == 1
    assert seen[f"topics delete {kafka}"] == [{"name": kafka, "deleted": True}]


def test_a_bad_first_line_sends_nothing(run_cli: RunCli, unique_topic: str) -> None:
    run_cli("topics", "create", unique_topic)
    code, out, err = run_cli("produce", unique_topic, stdin=b'{"key": 2}\n{"value": "1"}\n')
    assert code == 2 and out == ""
    assert f"produced 0 messages to {unique_topic} before it" in one_error_line(err)
    assert run_cli("read", unique_topic)[1] == ""


class _CountedWrites(io.StringIO):
    """stdout that keeps what each ``write`` call was given."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def write(self, s: str) -> int:
        self.calls.append(s)
        return super().write(s)


def test_read_writes_a_response_at_once(
    shared_server: Any, unique_topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``read`` writes each response's lines in one call: Python's stdout writes every
    ``print`` by itself where ``PYTHONUNBUFFERED`` is set (as container images often set
    it), two syscalls a message. The lines are those of one message at a time."""
    with Client(shared_server.address) as client:
        client.create_topic(unique_topic)
        producer = client.create_producer(unique_topic)
        for i in range(3000):
            producer.send_async(b"v%d" % i, None, partition_key=f"k{i % 7}")
        producer.flush()
    out = _CountedWrites()
    monkeypatch.setattr(sys, "stdout", out)
    argv = ["--server", shared_server.address, "--output", "json", "read", unique_topic]
    assert cli.main([*argv, "--limit", "2500"]) == 0
    lines = out.getvalue().splitlines()
    assert [json.loads(line)["value"] for line in lines] == [f"v{i}" for i in range(2500)]
    assert json.loads(lines[7])["key"] == "k0"
    assert 3 <= len(out.calls) <= 10  # responses of up to 1,000 messages, not 5,000 writes
    assert all(call.endswith("\n") for call in out.calls)
