"""``--timeout SECONDS`` / ``COMPACTLOG_TIMEOUT`` against a stuck server (SIGSTOP): every
verb ends with one line and exit 1 instead of waiting forever."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from compactlog.client import Client


@pytest.fixture
def stopped(server: Any) -> Iterator[str]:
    with Client(server.address) as c:
        c.create_topic("t")
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        yield server.address
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["topics", "list", "--timeout", "0.5"], {}),
        (["--timeout", "0.5", "read", "t", "--follow"], {}),
        (["produce", "t", "--key", "k", "--value", "v"], {"COMPACTLOG_TIMEOUT": "0.5"}),
    ],
    ids=["after the verb", "follow read", "from the environment"],
)
def test_a_call_past_its_deadline_is_one_line_and_exit_1(
    stopped: str, argv: list[str], env: dict[str, str]
) -> None:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "compactlog", "--server", stopped, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("compactlog: error: "), proc.stderr
    assert "--timeout 0.5" in lines[0]
    assert time.monotonic() - started < 20
