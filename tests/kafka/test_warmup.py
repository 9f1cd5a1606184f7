"""The listener's warm-up (``server/kafka/warmup.py``): once it has run, the first
request of each API version it covers is read and answered without importing anything,
which on a busy box took longer than the request itself. Checked in a fresh interpreter,
where nothing of kio's schemas was imported before."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys
from compactlog.server.kafka import protocol, warmup
from compactlog.server.kafka.api_versions import SUPPORTED

pairs = warmup.versions()
assert {k for k, _ in pairs} == set(SUPPORTED), pairs
assert all(SUPPORTED[k][0] <= v <= SUPPORTED[k][1] for k, v in pairs), pairs
before = set(sys.modules)
assert not any(".fetch.v12." in name for name in before)  # a fresh interpreter
stopped = warmup.Warmup()
stopped.stop()  # a listener stopped before its warm-up began: nothing is loaded
stopped.start()
stopped._thread.join(120)
assert set(sys.modules) == before, sorted(set(sys.modules) - before)
w = warmup.Warmup()
w.start()
w._thread.join(120)
loaded = set(sys.modules)
assert any(name.startswith("kio.schema.fetch.v12.") for name in loaded - before)
for key, version in pairs:
    protocol.load_schemas(key, version)  # what the first request of each does
assert set(sys.modules) == loaded, sorted(set(sys.modules) - loaded)
print("ok", len(pairs))
"""


def test_warmup_leaves_the_first_requests_nothing_to_import() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok ")
