"""The other-language examples of docs/grpc.md run against the real server.

Node: docs/examples/node/client.js with @grpc/grpc-js, loading the .proto the Python package
ships (compactlog.protos), so what a wheel carries is what a Node user compiles against.
.ci/run installs its npm packages; without node or them the test skips. (The Go example
needs a Go toolchain and generated stubs: docs/grpc.md records a run.)"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from compactlog import protos

REPO = Path(__file__).resolve().parent.parent.parent
NODE_EXAMPLE = REPO / "docs" / "examples" / "node"


def test_node_client_example(server) -> None:  # type: ignore[no-untyped-def]
    node = shutil.which("node")
    if node is None or not (NODE_EXAMPLE / "node_modules" / "@grpc" / "grpc-js").exists():
        pytest.skip("needs node and `npm install --prefix docs/examples/node` (.ci/run does it)")
    run = subprocess.run(
        [node, "client.js", server.address],
        cwd=NODE_EXAMPLE,
        env={**os.environ, "COMPACTLOG_PROTO_DIR": str(protos.include_dir())},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "published 1:0",
        "published 1:1",
        "compaction SUCCESS: kept 1 of 2",
        "compacted 1:1 AAPL=190.0",
        "consumed 1:0 AAPL=189.1",
        "consumed 1:1 AAPL=190.0",
        "acknowledged up to 1:1",
        "GetTopic no-such-topic: NOT_FOUND",
    ]
