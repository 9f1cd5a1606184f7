"""The installed ``compactlog`` console script, as a Kafka or Pulsar user drives it, against a
real server process: streaming produce through a pipe that stays open, explicit tombstones,
global options anywhere, readable bad ids, idempotent create/delete, DeleteRecords, JSON
output of every command and shell completion."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from compactlog.client import Client

_SCRIPT = Path(sys.executable).with_name("compactlog")
COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "compactlog"]


def run(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, *argv], input=stdin, capture_output=True, text=True, timeout=60
    )


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("compactlog: error: "), proc.stderr
    assert "unexpected" not in lines[0] and "Traceback" not in proc.stderr
    return lines[0]


def _wait_for_messages(address: str, topic: str, count: int, seconds: float = 15.0) -> list[Any]:
    deadline = time.monotonic() + seconds
    with Client(address) as client:
        while True:
            got = list(client.reader(topic))
            if len(got) >= count or time.monotonic() > deadline:
                return got
            time.sleep(0.05)


def test_produce_sends_each_line_while_the_pipe_stays_open(
    shared_server: Any, unique_topic: str
) -> None:
    with Client(shared_server.address) as client:
        client.create_topic(unique_topic)
    proc = subprocess.Popen(
        [*COMMAND, "--server", shared_server.address, "produce", unique_topic],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    try:
        for i, line in enumerate(['{"key": "a", "value": "1"}', '{"key": "b", "value": "2"}']):
            proc.stdin.write(line + "\n")
            proc.stdin.flush()  # like `tail -f`: one line, then nothing for a while
            got = _wait_for_messages(shared_server.address, unique_topic, i + 1)
            assert [m.key for m in got] == [b"a", b"b"][: i + 1]
            assert proc.poll() is None  # still reading the open pipe
        proc.send_signal(signal.SIGINT)  # how a `tail -f | compactlog produce` ends
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert f"produced 2 messages to {unique_topic} before the interrupt" in err
    assert "Traceback" not in err


def test_a_tombstone_is_said_out_loud_and_printed_as_one(
    shared_server: Any, unique_topic: str
) -> None:
    server = ("--server", shared_server.address)
    segmented = unique_topic + "-kafka"
    assert run(*server, "topics", "create", unique_topic).returncode == 0
    assert run(*server, "topics", "create", segmented, "--kind", "segmented").returncode == 0
    proc = run(*server, "produce", unique_topic, "--key", "k")
    assert proc.returncode == 2 and "--tombstone" in one_error_line(proc)
    proc = run(*server, "produce", unique_topic, "--key", "k", "--value", "")
    assert proc.returncode == 2 and "tombstone on LEDGER topic" in one_error_line(proc)
    assert run(*server, "produce", unique_topic, "--key", "k", "--value", "null").returncode == 0
    assert run(*server, "produce", unique_topic, "--key", "k", "--tombstone").returncode == 0
    assert run(*server, "produce", segmented, "--key", "k", "--value", "").returncode == 0

    text = run(*server, "read", unique_topic).stdout.splitlines()
    assert [line.split(" ", 1)[1] for line in text] == ["key=k value=null", "key=k tombstone"]
    rows = [
        json.loads(line)
        for line in run(*server, "read", unique_topic, "--output", "json").stdout.splitlines()
    ]
    assert [(r["value"], r["tombstone"]) for r in rows] == [("null", False), (None, True)]
    kafka = run(*server, "read", segmented).stdout  # an empty value is a value on SEGMENTED
    assert kafka.rstrip("\n").endswith(" key=k value=")


def test_global_options_after_the_verb(shared_server: Any, unique_topic: str) -> None:
    proc = run("topics", "create", unique_topic, "--server", shared_server.address, "--timeout=5")
    assert proc.returncode == 0, proc.stderr
    proc = run("topics", "list", "--output", "json", "--server", shared_server.address)
    assert proc.returncode == 0, proc.stderr
    assert unique_topic in [json.loads(line)["name"] for line in proc.stdout.splitlines()]
    env = {**os.environ, "COMPACTLOG_SERVER": "127.0.0.1:1"}  # the flag wins over the env
    proc = subprocess.run(
        [*COMMAND, "topics", "describe", unique_topic, "--server", shared_server.address],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0 and f"name:      {unique_topic}" in proc.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["read", "t", "--from", "99999999999999999999999:0"],
        ["read", "t", "--from", "0:99999999999999999999999"],
        ["read", "t", "--limit", "99999999999"],
        ["produce", "t", "--key", "k", "--value", "v", "--event-time-ms", "99999999999999999999"],
        ["records", "delete-before", "t", "99999999999999999999999"],
    ],
)
def test_an_id_or_number_out_of_range_is_one_readable_line(argv: list[str]) -> None:
    proc = run("--server", "127.0.0.1:1", *argv)
    assert proc.returncode == 2
    assert "<=" in one_error_line(proc) or "out of range" in proc.stderr


def test_create_if_not_exists_and_delete_if_exists(shared_server: Any, unique_topic: str) -> None:
    server = ("--server", shared_server.address)
    assert run(*server, "topics", "create", unique_topic).returncode == 0
    proc = run(*server, "topics", "create", unique_topic)
    assert proc.returncode == 1 and "exists" in one_error_line(proc)
    proc = run(*server, "topics", "create", unique_topic, "--if-not-exists", "--output", "json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["created"] is False
    assert run(*server, "topics", "delete", unique_topic, "--if-exists").returncode == 0
    proc = run(*server, "topics", "delete", unique_topic)
    assert proc.returncode == 1 and unique_topic in one_error_line(proc)
    proc = run(*server, "topics", "delete", unique_topic, "--if-exists")
    assert proc.returncode == 0 and f"no topic {unique_topic}" in proc.stdout


def test_records_delete_before(shared_server: Any, unique_topic: str) -> None:
    server = ("--server", shared_server.address)
    ledger = unique_topic + "-ledger"
    run(*server, "topics", "create", unique_topic, "--kind", "segmented")
    run(*server, "topics", "create", ledger)
    lines = "".join(json.dumps({"key": f"k{i}", "value": str(i)}) + "\n" for i in range(5))
    assert run(*server, "produce", unique_topic, stdin=lines).returncode == 0
    proc = run(*server, "records", "delete-before", unique_topic, "3")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("log start offset now 3")
    assert [x.split()[0] for x in run(*server, "read", unique_topic).stdout.splitlines()] == [
        "0:3",
        "0:4",
    ]
    proc = run(*server, "records", "delete-before", unique_topic, "4", "--output", "json")
    assert json.loads(proc.stdout)["stats"]["log_start_offset"] == 4
    proc = run(*server, "records", "delete-before", unique_topic, "99")
    assert proc.returncode == 1 and unique_topic in one_error_line(proc)
    proc = run(*server, "records", "delete-before", ledger, "1")
    assert proc.returncode == 1
    one_error_line(proc)


def _bash_complete(script: str, words: list[str]) -> list[str]:
    """What ``<TAB>`` offers after ``words`` (the last one being typed) in bash."""
    array = " ".join("'" + w + "'" for w in words)
    program = (
        f"{script}\nCOMP_WORDS=({array}); COMP_CWORD={len(words) - 1}; _compactlog; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    out = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_completion_scripts() -> None:
    bash = run("completion", "bash")
    assert bash.returncode == 0 and "complete -F _compactlog compactlog" in bash.stdout
    offers = _bash_complete(bash.stdout, ["compactlog", ""])
    assert {"topics", "produce", "read", "records", "admin", "completion"} <= set(offers)
    assert _bash_complete(bash.stdout, ["compactlog", "--server", "h:1", "topics", "cr"]) == [
        "create"
    ]
    assert _bash_complete(bash.stdout, ["compactlog", "topics", "create", "t", "--kind", ""]) == [
        "ledger",
        "segmented",
    ]
    assert _bash_complete(bash.stdout, ["compactlog", "read", "t", "--out"]) == ["--output"]
    assert _bash_complete(bash.stdout, ["compactlog", "admin", "topics", "v"]) == ["verify"]
    for shell in ("zsh", "fish"):
        proc = run("completion", shell)
        assert proc.returncode == 0 and "compactlog" in proc.stdout
    if shutil.which("fish"):
        script = run("completion", "fish").stdout
        proc = subprocess.run(
            ["fish", "-c", script + '\ncomplete -C "compactlog records "'],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert proc.stdout.split() == ["delete-before"], proc.stderr
    if shutil.which("zsh"):
        script = run("completion", "zsh").stdout
        stubs = "compdef() { : }\ncompadd() { shift; print -l -- $@ }\n"
        probe = 'words=(compactlog topics create t --kind ""); CURRENT=6; _compactlog'
        proc = subprocess.run(
            ["zsh", "-f", "-c", stubs + script + probe], capture_output=True, text=True, timeout=30
        )
        assert proc.stdout.split() == ["ledger", "segmented"], proc.stderr
