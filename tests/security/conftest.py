"""A real server behind tokens and TLS (CONTRACT section 10), and raw stubs to call it with
any token and any trust, so each test sees the exact status a call ends with."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2_grpc

from compactlog.channels import ChannelSecurity, open_channel
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

from ..conftest import ServerProcess, TlsFiles, write_tokens_file

# name -> (token, role): one principal of each role
TOKENS = {
    "ops": ("admin-7f3c1e9a", "admin"),
    "ingest": ("client-52b0d4aa", "client"),
    "dashboards": ("reader-c91e07f2", "reader"),
}
ADMIN, CLIENT, READER = (TOKENS[n][0] for n in ("ops", "ingest", "dashboards"))


class Stubs:
    """Every service of one server on one channel opened with ``token`` and ``ca``."""

    def __init__(self, address: str, token: str | None, ca: Path | None) -> None:
        self.channel = open_channel(address, ChannelSecurity.of(token, ca))
        self.admin = pb_grpc.TopicAdminStub(self.channel)
        self.log = pb_grpc.LogStub(self.channel)
        self.engine = pb_grpc.CompactionEngineStub(self.channel)
        self.health = health_pb2_grpc.HealthStub(self.channel)
        self.reflection = reflection_pb2_grpc.ServerReflectionStub(self.channel)

    def close(self) -> None:
        self.channel.close()


StubsFactory = Callable[..., Stubs]


def status_of(call: Callable[[], object]) -> grpc.StatusCode:
    """The status code ``call`` ends with (OK when it returns)."""
    try:
        result = call()
        if hasattr(result, "__next__"):
            list(result)  # type: ignore[call-overload]  # a stream: its status comes at the end
    except grpc.RpcError as err:
        code: grpc.StatusCode = err.code()
        return code
    return grpc.StatusCode.OK


@pytest.fixture(scope="session")
def tokens_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tokens_file(tmp_path_factory.mktemp("auth") / "tokens.toml", TOKENS)


@pytest.fixture(scope="session")
def secure_server(
    tmp_path_factory: pytest.TempPathFactory, tls_files: TlsFiles, tokens_file: Path
) -> Iterator[ServerProcess]:
    """One server with --auth-tokens and TLS for the security tests that only call it."""
    args = ["--auth-tokens", str(tokens_file)]
    args += ["--tls-cert", str(tls_files.cert), "--tls-key", str(tls_files.key)]
    srv = ServerProcess(tmp_path_factory.mktemp("secure") / "data", extra_args=args).start()
    yield srv
    srv.kill()


@pytest.fixture
def stubs(tls_files: TlsFiles) -> Iterator[StubsFactory]:
    """stubs(address, token=None, ca=None, plaintext=False) -> Stubs, trusting the test CA
    unless told another ``ca`` or ``plaintext``; channels closed at teardown."""
    made: list[Stubs] = []

    def make(
        address: str, token: str | None = None, ca: Path | None = None, plaintext: bool = False
    ) -> Stubs:
        made.append(Stubs(address, token, None if plaintext else ca or tls_files.ca))
        return made[-1]

    yield make
    for s in made:
        s.close()


def spread_with_tokens(
    server_factory: Callable[..., ServerProcess], tokens_file: Path, crash_at: str
) -> tuple[ServerProcess, Stubs]:
    """``serve --shards 2`` with partition placement and tokens, its front set to crash at
    ``crash_at`` (``COMPACTLOG_FRONT_CRASH_AT``); admin stubs on it."""
    srv = server_factory(
        config='"shards.placement" = "partition"\n',
        extra_args=["--shards", "2", "--auth-tokens", str(tokens_file)],
        start=False,
    )
    srv.start({"COMPACTLOG_FRONT_CRASH_AT": crash_at})
    return srv, Stubs(srv.address, ADMIN, None)
