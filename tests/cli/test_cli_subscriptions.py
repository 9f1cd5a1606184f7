"""``compactlog subscriptions list | delete | reset`` against the real server, in-process."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from compactlog import cli
from compactlog.client import Client, InitialPosition

RunCli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run_cli(shared_server, capsys: pytest.CaptureFixture[str]) -> RunCli:  # type: ignore[no-untyped-def]
    def run(*argv: str) -> tuple[int, str, str]:
        code = cli.main(["--server", shared_server.address, *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def consumed(shared_server, unique_topic: str) -> tuple[str, list[str]]:  # type: ignore[no-untyped-def]
    """A topic of 3 messages (and their ids) whose subscription ``s`` acknowledged 2."""
    with Client(shared_server.address) as client:
        client.create_topic(unique_topic)
        records = [(b"k", b"0"), (b"k", b"1"), (b"k", b"2")]
        ids = client.producer(unique_topic).send_batch(records)
        consumer = client.subscribe(
            unique_topic, "s", receiver_queue_size=2, initial_position=InitialPosition.Earliest
        )
        consumer.acknowledge(consumer.receive(5000))
        consumer.acknowledge(consumer.receive(5000))
        consumer.close()
    return unique_topic, [str(i) for i in ids]


def test_list_reset_delete(run_cli: RunCli, consumed: tuple[str, list[str]]) -> None:
    topic, ids = consumed
    code, out, _ = run_cli("subscriptions", "list", topic)
    assert code == 0
    [row] = [line.split() for line in out.splitlines()[1:]]
    assert row[0] == "s" and row[1] == "EXCLUSIVE" and row[3] == "1"

    code, out, _ = run_cli("subscriptions", "reset", topic, "s", "--to", "earliest")
    assert code == 0 and "backlog 3" in out
    first = json.loads(run_cli("subscriptions", "list", topic, "--json")[1])
    assert first == {"name": "s", "type": "EXCLUSIVE", "mark_delete": None, "backlog": 3}

    code, out, _ = run_cli("subscriptions", "reset", topic, "s", "--to", ids[2])
    assert code == 0 and f"mark-delete {ids[1]}" in out and "backlog 1" in out
    code, out, _ = run_cli("subscriptions", "reset", topic, "s", "--timestamp", "0")
    assert code == 0 and "backlog 3" in out
    code, out, _ = run_cli("subscriptions", "reset", topic, "s", "--to", "latest")
    assert code == 0 and "backlog 0" in out

    code, out, _ = run_cli("subscriptions", "delete", topic, "s")
    assert code == 0 and "deleted" in out
    code, out, _ = run_cli("subscriptions", "list", topic)
    assert code == 0 and "no subscriptions" in out


def test_errors_are_one_line(run_cli: RunCli, consumed: tuple[str, list[str]]) -> None:
    topic = consumed[0]
    code, _, err = run_cli("subscriptions", "delete", topic, "nobody")
    assert code == 1 and err.count("\n") == 1 and "nobody" in err
    code, _, err = run_cli("subscriptions", "reset", topic, "__compaction", "--to", "latest")
    assert code == 1 and "reserved" in err
    code, _, err = run_cli("subscriptions", "reset", topic, "s")
    assert code == 2 and err.count("\n") == 1
