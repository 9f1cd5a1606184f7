"""The CLI against the server with tokens and TLS: ``--token`` / ``--tls-ca`` and their
environment variables, flags winning over the environment, refusals as one line."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable

import pytest

from compactlog import cli

from ..conftest import ServerProcess, TlsFiles
from .conftest import ADMIN, CLIENT, READER

RunCli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run_cli(
    secure_server: ServerProcess,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> RunCli:
    """``compactlog --server <secure> ARGS`` in-process, with no credentials from the env."""
    monkeypatch.delenv("COMPACTLOG_TOKEN", raising=False)
    monkeypatch.delenv("COMPACTLOG_TLS_CA", raising=False)

    def run(*argv: str) -> tuple[int, str, str]:
        code = cli.main(["--server", secure_server.address, *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def one_error(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("compactlog: error: "), err
    return lines[0]


def test_flags_carry_token_and_ca(run_cli: RunCli, tls_files: TlsFiles) -> None:
    topic = "cli-" + uuid.uuid4().hex[:8]
    ca = str(tls_files.ca)
    code, _, err = run_cli("--token", ADMIN, "--tls-ca", ca, "topics", "create", topic)
    assert code == 0, err
    code, _, err = run_cli(
        "--token", CLIENT, "--tls-ca", ca, "produce", topic, "--key", "k", "--value", "v"
    )
    assert code == 0, err
    code, out, err = run_cli("--token", READER, "--tls-ca", ca, "read", topic)
    assert code == 0 and "key=k" in out, err
    code, out, err = run_cli("--token", READER, "--tls-ca", ca, "topics", "delete", topic)
    assert code == 1 and out == ""
    assert "'dashboards' (role reader) may not call TopicAdmin.DeleteTopic" in one_error(err)


def test_environment_carries_token_and_ca(
    run_cli: RunCli, tls_files: TlsFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPACTLOG_TLS_CA", str(tls_files.ca))
    monkeypatch.setenv("COMPACTLOG_TOKEN", READER)
    code, _, err = run_cli("topics", "list")
    assert code == 0, err
    code, _, err = run_cli("topics", "create", "by-reader")
    assert code == 1 and "may not call TopicAdmin.CreateTopic" in one_error(err)
    code, _, err = run_cli("--token", ADMIN, "topics", "create", "cli-" + uuid.uuid4().hex[:8])
    assert code == 0, err  # the flag wins over the environment


def test_missing_credentials_are_one_line(run_cli: RunCli, tls_files: TlsFiles) -> None:
    code, _, err = run_cli("--tls-ca", str(tls_files.ca), "topics", "list")
    assert code == 1 and "needs a token" in one_error(err)
    code, _, err = run_cli("--tls-ca", str(tls_files.ca), "--token", "guess", "topics", "list")
    assert code == 1 and "token is not valid" in one_error(err)
    code, _, err = run_cli("--token", ADMIN, "topics", "list")  # plaintext to a TLS port
    assert code == 1 and "not reachable" in one_error(err)
    code, _, err = run_cli("--tls-ca", "/no/such/ca.pem", "--token", ADMIN, "topics", "list")
    assert code == 1 and "/no/such/ca.pem" in one_error(err)


def test_console_script_reads_the_environment(
    secure_server: ServerProcess, tls_files: TlsFiles
) -> None:
    env_cli = [sys.executable, "-m", "compactlog", "--server", secure_server.address]
    env = {"COMPACTLOG_TOKEN": READER, "COMPACTLOG_TLS_CA": str(tls_files.ca)}
    result = subprocess.run(
        [*env_cli, "topics", "list"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )
    assert result.returncode == 0, result.stderr
