"""kcat (librdkafka 2.0, Debian's) against a real server: ``-L`` lists the broker and
the SEGMENTED topics, ``-C`` reads what gRPC published, ``-P`` produces what gRPC reads."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.kafka.conftest import Grpc

KCAT = shutil.which("kcat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (.ci/run installs it)")


def kcat(*args: str, stdin: str | None = None) -> str:
    assert KCAT is not None
    done = subprocess.run([KCAT, *args], input=stdin, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_kcat_lists_and_consumes(kafka_server: ServerProcess, grpc_side: Grpc, topic: str) -> None:
    grpc_side.create(topic, partitions=2)
    records = [pb.Record(key=b"k%d" % i, value=b"v%d" % i) for i in range(6)]
    grpc_side.log.Publish(pb.PublishRequest(topic=topic, records=records), timeout=30)

    listing = kcat("-b", kafka_server.kafka_address, "-L", "-t", topic)
    assert f"broker 0 at {kafka_server.kafka_address}" in listing
    assert f'topic "{topic}" with 2 partitions' in listing

    out = kcat("-b", kafka_server.kafka_address, "-C", "-t", topic, "-o", "beginning", "-e",
               "-f", "%p %o %k %s\n")  # fmt: skip
    lines = sorted(out.split("\n")[:-1])
    served = sorted(
        f"{m.id.partition} {m.id.entry_id} {m.key.decode()} {m.value.decode()}"
        for m in grpc_side.read(topic)
    )
    assert lines == served and len(lines) == 6


def test_kcat_produces_keyed_lines_and_tombstones(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    """``kcat -P -K:`` with acks=all: each line a keyed record at the next offset, an empty
    value with ``-Z`` a null value (a tombstone), read back the same over gRPC."""
    grpc_side.create(topic)
    lines = "".join(f"k{i % 3}:v{i}\n" for i in range(7)) + "k1:\n"
    kcat("-b", kafka_server.kafka_address, "-P", "-t", topic, "-K:", "-Z",
         "-X", "acks=all", stdin=lines)  # fmt: skip
    served = [(m.id.entry_id, m.key, m.value if m.HasField("value") else None)
              for m in grpc_side.read(topic)]  # fmt: skip
    expected = [(i, b"k%d" % (i % 3), b"v%d" % i) for i in range(7)]
    assert served == [*expected, (7, b"k1", None)]


@pytest.mark.parametrize(
    ("value_bytes", "partition_bytes"), [(1000, 1000), (1000, 300_000), (10, 11_000)]
)
def test_kcat_checks_crcs_over_many_batches_and_fetch_limits(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str, value_bytes: int, partition_bytes: int
) -> None:
    """Five stored batches of 200 records: with a partition limit under one batch every
    Fetch still brings its first batch whole (Kafka's rule); with a larger one a Fetch
    stops before the batch that would pass it, after several batches in one compiled call
    or, where Kafka's records are much smaller than the stored ones (10 B values), after a
    second call; librdkafka checks each batch's CRC-32C."""
    grpc_side.create(topic)
    for b in range(5):
        value = b"%d-" % b + b"v" * value_bytes
        records = [pb.Record(key=b"k%d" % (i % 7), value=value) for i in range(200)]
        grpc_side.log.Publish(pb.PublishRequest(topic=topic, records=records), timeout=30)
    out = kcat("-b", kafka_server.kafka_address, "-C", "-t", topic, "-o", "beginning", "-e",
               "-c", "1000", "-X", "check.crcs=true", "-f", "%o %k %S\n",
               "-X", f"max.partition.fetch.bytes={partition_bytes}")  # fmt: skip
    lines = out.split("\n")[:-1]
    assert lines == [f"{o} k{o % 200 % 7} {2 + value_bytes}" for o in range(1000)]
