"""``serve --kafka-listen`` / ``--kafka-advertised``: what the process refuses at start,
and the address Metadata hands to clients."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ServerProcess
from tests.kafka.conftest import KAFKA_ARGS
from tests.kafka.test_wire import connect, decode, frame, receive

metadata = pytest.importorskip("kio.schema.metadata.v12.request")
from kio.schema.metadata.v12.response import MetadataResponse  # noqa: E402


def serve_fails(tmp_path: Path, *args: str) -> str:
    command = [sys.executable, "-m", "compactlog", "serve", "--data-dir", str(tmp_path / "d")]
    done = subprocess.run([*command, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    [line] = done.stderr.strip().splitlines()
    return line


def test_shards_take_consecutive_kafka_ports_or_refuse_in_one_line(tmp_path: Path) -> None:
    line = serve_fails(tmp_path, "--shards", "2", "--kafka-listen", "127.0.0.1:65535")
    assert "--kafka-listen 127.0.0.1:65535: 2 ports past it" in line


def test_kafka_listener_beyond_loopback_needs_insecure(tmp_path: Path) -> None:
    line = serve_fails(tmp_path, "--kafka-listen", "0.0.0.0:0")
    assert "refusing to listen on 0.0.0.0:0" in line


def test_advertised_address_is_what_metadata_gives(tmp_path: Path) -> None:
    args = [*KAFKA_ARGS, "--kafka-advertised", "kafka.example:19092"]
    srv = ServerProcess(tmp_path / "data", extra_args=args).start()
    try:
        request = metadata.MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
        with connect(srv.kafka_address) as sock:
            sock.sendall(frame(request, 5))
            response = decode(MetadataResponse, receive(sock), 5)
    finally:
        assert srv.stop() == 0
    [broker] = response.brokers
    assert (broker.host, broker.port) == ("kafka.example", 19092)
    assert response.topics == ()
