"""A server that does not listen for Kafka never loads the Kafka protocol: ``kio`` (and
the hypothesis its types import) cost about 0.65 s of every start-up."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys
import compactlog.cli.app, compactlog.server.app, compactlog.server.shards.process
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("kio", "hypothesis"))
loaded += sorted(m for m in sys.modules if m.startswith("compactlog.server.kafka.listener"))
print(" ".join(loaded))
"""


def test_serving_without_kafka_imports_no_kafka_protocol() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.split() == []
