"""kill -9 of ``compactlog serve`` while librdkafka produces with acks=-1: every record
whose delivery callback came without an error is there after the restart, at the offset
it was acknowledged at, with its key and value (CONTRACT section 11 through the Kafka
door: an acknowledged produce is as durable as an acknowledged gRPC publish)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ServerProcess
from tests.kafka.conftest import KAFKA_ARGS, Grpc

ck = pytest.importorskip("confluent_kafka")


class Producing(threading.Thread):
    """Produces numbered records until told to stop; keeps every delivery report."""

    def __init__(self, address: str, topic: str, **extra: Any) -> None:
        super().__init__(daemon=True)
        config = {"bootstrap.servers": address, "acks": -1, "linger.ms": 5}
        config |= {"message.timeout.ms": 5000, "reconnect.backoff.max.ms": 200, **extra}
        self.producer = ck.Producer(config)
        self.topic = topic
        self.stop = threading.Event()
        self.acked: list[tuple[int, bytes, bytes]] = []
        self.failed = 0

    def delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.append((msg.offset(), msg.key(), msg.value()))
        else:
            self.failed += 1

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            try:
                self.producer.produce(
                    self.topic,
                    key=b"k%d" % (i % 500),
                    value=b"v%08d" % i,
                    on_delivery=self.delivered,
                )
                i += 1
            except BufferError:  # the queue is full while the server is gone
                self.producer.poll(0.01)
            self.producer.poll(0.001 if i % 100 == 0 else 0)
        self.producer.flush(15)


@pytest.mark.slow
def test_acknowledged_records_survive_a_kill_during_produce(tmp_path: Path) -> None:
    srv = ServerProcess(tmp_path / "data", extra_args=KAFKA_ARGS).start()
    side = Grpc(srv.address)
    try:
        side.create("acked")
        producing = Producing(srv.kafka_address, "acked")
        producing.start()
        deadline = time.monotonic() + 60
        while len(producing.acked) < 3000:  # well under way, many batches in flight
            assert time.monotonic() < deadline, f"only {len(producing.acked)} acknowledged"
            time.sleep(0.05)
        srv.kill()
        killed_at = len(producing.acked)
        time.sleep(1)
        producing.stop.set()
        producing.join(30)
        assert producing.failed > 0  # records were in flight when the server died
    finally:
        side.channel.close()
        srv.kill()

    srv.start()
    side = Grpc(srv.address)
    try:
        stored = {m.id.entry_id: (m.key, m.value) for m in side.read("acked")}
        acked = producing.acked
        assert len(acked) >= killed_at
        missing = [a for a in acked if stored.get(a[0]) != (a[1], a[2])]
        assert not missing, (
            f"{len(missing)} of {len(acked)} acknowledged records lost: {missing[:3]}"
        )
    finally:
        side.channel.close()
        assert srv.stop() == 0
