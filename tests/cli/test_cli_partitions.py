"""The CLI on partitioned topics: create --partitions, describe, add-partitions, read."""

from __future__ import annotations

from compactlog import cli
from compactlog.client import Client


def test_partitioned_topic_verbs(shared_server, capsys, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    def run(*argv: str) -> tuple[int, str]:
        code = cli.main(["--server", shared_server.address, *argv])
        return code, capsys.readouterr().out

    code, out = run("topics", "create", unique_topic, "--partitions", "3", "--kind", "segmented")
    assert code == 0 and "3 partitions" in out
    code, out = run("topics", "describe", unique_topic)
    assert code == 0 and f"partitions: 3 ({unique_topic}-partition-0, " in out
    with Client(shared_server.address) as client:
        producer = client.producer(unique_topic)
        for i in range(9):
            producer.send(b"k%d" % i, b"v%d" % i)
    code, out = run("read", unique_topic)
    assert code == 0 and all(f"v{i}" in out for i in range(9))
    code, out = run("topics", "add-partitions", unique_topic, "5")
    assert code == 0 and "5 partitions" in out
    code, _out = run("topics", "add-partitions", unique_topic, "2")  # never shrinks
    assert code != 0
