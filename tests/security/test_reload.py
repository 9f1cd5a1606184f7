"""SIGHUP re-reads the tokens file on a running server: a principal added gets in, one
removed is out at once, and a bad file keeps the principals in force with one log line."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import grpc

from compactlog.v1 import compactlog_pb2 as pb

from ..conftest import ServerProcess, write_tokens_file
from .conftest import StubsFactory, status_of

S = grpc.StatusCode


def hangup_and_wait(srv: ServerProcess, needle: str, timeout: float = 20.0) -> list[str]:
    """SIGHUP, then wait for the log line containing ``needle``; the lines it logged."""
    assert srv.proc is not None
    before = len(srv.stderr_lines)
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        new = srv.stderr_lines[before:]
        if any(needle in line for line in new):
            time.sleep(0.2)  # anything else it would log about the reload
            return srv.stderr_lines[before:]
        time.sleep(0.02)
    raise AssertionError(f"no {needle!r} in the server log: {srv.stderr_lines[before:]}")


def test_sighup_adds_and_revokes_principals(
    tmp_path: Path, server_factory: object, stubs: StubsFactory
) -> None:
    tokens = tmp_path / "tokens.toml"
    write_tokens_file(tokens, {"ops": ("ops-token", "admin"), "old": ("old-token", "reader")})
    srv: ServerProcess = server_factory(extra_args=["--auth-tokens", str(tokens)])  # type: ignore[operator]

    def list_topics(token: str) -> grpc.StatusCode:
        admin = stubs(srv.address, token, plaintext=True).admin
        return status_of(lambda: admin.ListTopics(pb.ListTopicsRequest(), timeout=10))

    assert list_topics("old-token") == S.OK
    assert list_topics("new-token") == S.UNAUTHENTICATED

    write_tokens_file(tokens, {"ops": ("ops-token", "admin"), "new": ("new-token", "reader")})
    hangup_and_wait(srv, "auth tokens reloaded")
    assert list_topics("new-token") == S.OK
    assert list_topics("old-token") == S.UNAUTHENTICATED
    assert list_topics("ops-token") == S.OK

    tokens.write_text("[principals.new\n")  # broken: the last good set stays in force
    logged = hangup_and_wait(srv, "auth tokens not reloaded")
    assert len(logged) == 1 and str(tokens) in logged[0] and "keeping the 2 principals" in logged[0]
    assert list_topics("new-token") == S.OK
    assert list_topics("old-token") == S.UNAUTHENTICATED

    write_tokens_file(tokens, {"ops": ("ops-token", "admin")})  # fixed again, "new" revoked
    hangup_and_wait(srv, "auth tokens reloaded")
    assert list_topics("new-token") == S.UNAUTHENTICATED
    assert srv.stop() == 0
