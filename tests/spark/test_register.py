"""``compactlog.spark.register(spark)`` makes Spark's Python workers run the driver's
interpreter unless the user chose one: the README's snippet works in a program whose
PATH's ``python3`` lacks compactlog's dependencies. A fresh Spark in a subprocess, so slow."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import SCRIPT_SESSION, Wire, records

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SNIPPET = (
    """
import sys
from pyspark.sql import SparkSession
import compactlog.spark

"""
    + SCRIPT_SESSION
    + """compactlog.spark.register(spark)
df = spark.read.format("compactlog").option("server", sys.argv[1]).option("topic", sys.argv[2])
print("rows", df.load().count())
spark.stop()
"""
)


def test_register_runs_workers_on_the_driver_interpreter(wire: Wire, tmp_path: Path) -> None:
    """The README's snippet, in a program whose PATH's python3 is not this interpreter
    (it has no pyarrow): it used to fail with "No module named 'pyarrow'"."""
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != venv_bin)
    other = shutil.which("python3", path=path)
    assert other is not None
    assert subprocess.run([other, "-c", "import pyarrow"], capture_output=True).returncode != 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env["PATH"] = path
    topic = wire.create("reg-snippet")
    wire.publish(topic, records(10, 4))
    script = tmp_path / "snippet.py"
    script.write_text(SNIPPET)
    run = subprocess.run(
        [sys.executable, str(script), wire.address, topic],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert "rows 10" in run.stdout, run.stderr[-3000:]
