"""Helpers for the end-to-end tests: a thin typed wrapper over the raw stubs for the
compaction tests, the damage matrices' template data dir, and a server without root's
file-mode capabilities for the fault tests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from compactlog.storage import keys
from compactlog.storage.cursor import COMPACTED_LEDGER_PROPERTY
from compactlog.storage.rocks import RocksDB
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc
from tests.conftest import ServerProcess

from .damage import build_template

Pair = tuple[bytes | None, bytes | None]
Id = tuple[int, int]


class LedgerApi:
    """Publish, read and compact a LEDGER topic through gRPC."""

    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.admin = pb_grpc.TopicAdminStub(self.channel)
        self.log = pb_grpc.LogStub(self.channel)

    def create(self, topic: str, **config: str) -> pb.TopicInfo:
        cfg = {k.replace("_", "."): v for k, v in config.items()}
        return self.admin.CreateTopic(pb.CreateTopicRequest(name=topic, config=cfg))

    def publish(self, topic: str, *pairs: Pair) -> list[Id]:
        records = []
        for k, v in pairs:
            r = pb.Record()
            if k is not None:
                r.key = k
            if v is not None:
                r.value = v
            records.append(r)
        ids = self.log.Publish(pb.PublishRequest(topic=topic, records=records), timeout=30).ids
        return [(i.ledger_id, i.entry_id) for i in ids]

    def read(
        self, topic: str, compacted: bool = True, start: Id | None = None, max_messages: int = 0
    ) -> list[tuple[Id, bytes | None, bytes | None]]:
        req = pb.ReadRequest(topic=topic, read_compacted=compacted, max_messages=max_messages)
        if start is not None:
            req.message_id.ledger_id, req.message_id.entry_id = start
        return [
            (
                (m.id.ledger_id, m.id.entry_id),
                m.key if m.HasField("key") else None,
                m.value if m.HasField("value") else None,
            )
            for resp in self.log.Read(req, timeout=30)
            for m in resp.messages
        ]

    def keys(self, topic: str, **kw: object) -> list[tuple[bytes | None, bytes | None]]:
        return [(k, v) for _i, k, v in self.read(topic, **kw)]  # type: ignore[arg-type]

    def compact(self, topic: str, wait: bool = True) -> pb.CompactionStatus:
        return self.admin.Compact(pb.CompactRequest(topic=topic, wait=wait), timeout=60)

    def status(self, topic: str) -> pb.CompactionStatus:
        return self.admin.GetCompactionStatus(pb.GetCompactionStatusRequest(topic=topic))

    def wait_status(
        self, topic: str, done: Callable[[pb.CompactionStatus], bool], timeout: float = 20.0
    ) -> pb.CompactionStatus:
        deadline = time.monotonic() + timeout
        while True:
            status = self.status(topic)
            if done(status) or time.monotonic() > deadline:
                return status
            time.sleep(0.05)

    def last_id(self, topic: str, compacted: bool = True) -> Id | None:
        resp = self.log.GetLastMessageId(
            pb.GetLastMessageIdRequest(topic=topic, read_compacted=compacted)
        )
        return (resp.id.ledger_id, resp.id.entry_id) if resp.HasField("id") else None

    def close(self) -> None:
        self.channel.close()


def error_code(call: Callable[[], object]) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as info:
        call()
    code: grpc.StatusCode = info.value.code()
    return code


@pytest.fixture
def ledger_api() -> Iterator[Callable[[str], LedgerApi]]:
    """ledger_api(address) -> LedgerApi; channels closed at teardown."""
    made: list[LedgerApi] = []

    def make(address: str) -> LedgerApi:
        made.append(LedgerApi(address))
        return made[-1]

    yield make
    for api in made:
        api.close()


@pytest.fixture
def expect_error() -> Callable[[Callable[[], object]], grpc.StatusCode]:
    return error_code


def ledger_census(data_dir: Path) -> tuple[set[int], set[int]]:
    """(ledgers stored, ledgers referenced by a topic list or a compaction cursor), read
    from a stopped server's RocksDB."""
    db = RocksDB(data_dir / "ledgers")
    try:
        stored = {keys.ledger_id_of_meta_key(k) for k, _ in db.scan(*keys.ledger_meta_range())}
        referenced: set[int] = set()
        for _k, v in db.scan(*keys.topic_range()):
            referenced |= set(json.loads(v)["ledgers"])
        for _k, v in db.scan(b"C", b"D"):
            prop = json.loads(v)["properties"].get(COMPACTED_LEDGER_PROPERTY)
            if prop is not None:
                referenced.add(int(prop))
        return stored, referenced
    finally:
        db.close()


@pytest.fixture
def stored_ledgers() -> Callable[[Path], tuple[set[int], set[int]]]:
    return ledger_census


@pytest.fixture(scope="session")
def damage_template(
    tmp_path_factory: pytest.TempPathFactory, server_class: Any
) -> tuple[Path, dict[str, Any]]:
    """The damage matrices' template data dir and what a correct server reads from it
    (``damage.py``): built once, copied for every case, never changed."""
    return build_template(tmp_path_factory.mktemp("matrix"), server_class)


# ---- a server without the capabilities that let root ignore file modes ---------------

DROP_CAPS = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--"]


class UnprivilegedServer(ServerProcess):
    """The server as an unprivileged root: file modes apply to it (no CAP_DAC_OVERRIDE)."""

    def command(self) -> list[str]:
        return [*DROP_CAPS, *super().command()]


def require_drop_caps() -> None:
    """Skip the test where a capability-less child cannot be started (CI can: root)."""
    if shutil.which("setpriv") is None or os.geteuid() != 0:
        pytest.skip("needs root and setpriv (util-linux) to drop capabilities, as CI has")
    probe = subprocess.run([*DROP_CAPS, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot drop capabilities here: {probe.stderr.strip()}")


@pytest.fixture
def unprivileged(tmp_path: Path) -> Iterator[UnprivilegedServer]:
    yield from unprivileged_server(tmp_path)


def unprivileged_server(
    tmp_path: Path, config: Path | None = None, extra_args: list[str] | None = None
) -> Iterator[UnprivilegedServer]:
    """An ``UnprivilegedServer`` on ``tmp_path / "data"`` for a fixture to yield from."""
    require_drop_caps()
    srv = UnprivilegedServer(tmp_path / "data", config, extra_args or ())
    srv.start()
    yield srv
    for path in (tmp_path / "data").rglob("*"):  # give the teardown its permissions back
        if path.is_dir():
            path.chmod(0o755)
    if srv.proc is not None and srv.proc.poll() is None:
        srv.kill()
