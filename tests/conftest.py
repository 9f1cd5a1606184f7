"""Shared fixtures: the real ``compactlog serve`` process on a free port.

``server`` gives each test a fresh data dir and process (restart/kill supported);
``shared_server`` is one process per test session for tests that only need unique
topic names. Both wait for the ``compactlog listening on HOST:PORT`` line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import grpc
import pytest

from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

STARTUP_TIMEOUT_S = 60.0


class ServerProcess:
    """A ``compactlog serve`` child process bound to 127.0.0.1 on a free port."""

    def __init__(
        self,
        data_dir: Path,
        config: Path | None = None,
        extra_args: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.config = config
        self.extra_args = list(extra_args)
        self.env = env
        self.proc: subprocess.Popen[str] | None = None
        self.address = ""
        self.stderr_lines: list[str] = []

    def command(self) -> list[str]:
        """The ``compactlog serve`` command line this process runs."""
        args = [
            sys.executable,
            "-m",
            "compactlog",
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--listen",
            "127.0.0.1:0",
            *self.extra_args,
        ]
        if self.config is not None:
            args += ["--config", str(self.config)]
        return args

    def start(self, extra_env: dict[str, str] | None = None) -> ServerProcess:
        args = self.command()
        env = {**os.environ, **(self.env or {}), **(extra_env or {})}
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        self.stderr_lines = []
        threading.Thread(target=self._drain_stderr, args=(self.proc,), daemon=True).start()
        self.address = self._wait_for_listening(self.proc)
        return self

    def _drain_stderr(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self.stderr_lines.append(line)

    def _wait_for_listening(self, proc: subprocess.Popen[str]) -> str:
        assert proc.stdout is not None
        result: list[str] = []
        found = threading.Event()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith("compactlog listening on "):
                    result.append(line.strip().rsplit(" ", 1)[1])
                    break
            found.set()  # listening, or the child exited
            # keep draining so the child never blocks on a full pipe
            for _ in proc.stdout:
                pass

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        found.wait(STARTUP_TIMEOUT_S)
        if not result:
            proc.kill()
            proc.wait()
            raise RuntimeError("server did not start: " + "".join(self.stderr_lines[-20:]))
        return result[0]

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: the clean shutdown path."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed by the process itself."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def restart(self, extra_env: dict[str, str] | None = None) -> ServerProcess:
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
        return self.start(extra_env)


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[type[ServerProcess] | object]:
    """Make servers on data dirs below tmp_path; every one is stopped at teardown."""
    made: list[ServerProcess] = []

    def make(
        config: str | None = None,
        extra_args: Sequence[str] = (),
        start: bool = True,
        data_dir: Path | None = None,
    ) -> ServerProcess:
        cfg_path = None
        if config is not None:
            cfg_path = tmp_path / f"config-{len(made)}.toml"
            cfg_path.write_text(config)
        srv = ServerProcess(data_dir or tmp_path / f"data-{len(made)}", cfg_path, extra_args)
        made.append(srv)
        return srv.start() if start else srv

    yield make
    for srv in made:
        if srv.proc is not None and srv.proc.poll() is None:
            srv.kill()


@pytest.fixture
def server(server_factory) -> ServerProcess:  # type: ignore[no-untyped-def]
    """A fresh server process with its own data dir."""
    srv: ServerProcess = server_factory()
    return srv


@pytest.fixture(scope="session")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for the whole session; use unique_topic for names."""
    srv = ServerProcess(tmp_path_factory.mktemp("shared") / "data").start()
    yield srv
    srv.kill()


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for the tests of one module (hypothesis tests, which cannot take a
    fresh function-scoped server for each example)."""
    srv = ServerProcess(tmp_path_factory.mktemp("module") / "data").start()
    yield srv
    srv.kill()


@pytest.fixture
def unique_topic() -> str:
    return "t-" + uuid.uuid4().hex[:12]


class Stubs:
    """Raw gRPC stubs on one channel, for end-to-end tests that speak the wire API."""

    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.admin = pb_grpc.TopicAdminStub(self.channel)
        self.log = pb_grpc.LogStub(self.channel)

    def publish(
        self, topic: str, *pairs: tuple[bytes | None, bytes | None]
    ) -> list[tuple[int, int]]:
        """One Publish of (key, value) pairs (None = absent); the ids as (ledger, entry)."""
        records = []
        for key, value in pairs:
            record = pb.Record()
            if key is not None:
                record.key = key
            if value is not None:
                record.value = value
            records.append(record)
        reply = self.log.Publish(pb.PublishRequest(topic=topic, records=records), timeout=30)
        return [(i.ledger_id, i.entry_id) for i in reply.ids]

    def close(self) -> None:
        self.channel.close()


@pytest.fixture
def connect() -> Iterator[object]:
    """connect(address) -> Stubs; channels are closed at teardown."""
    made: list[Stubs] = []

    def make(address: str) -> Stubs:
        stubs = Stubs(address)
        made.append(stubs)
        return stubs

    yield make
    for stubs in made:
        stubs.close()
