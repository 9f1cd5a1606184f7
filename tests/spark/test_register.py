"""``compactlog.spark.register(spark)`` makes Spark's Python workers run the driver's
interpreter unless the user chose one: the README's snippet works in a program whose
PATH's ``python3`` lacks compactlog's dependencies. It adds the JVM reader's jar once per
SparkContext. A fresh Spark in a subprocess each, so slow."""

from __future__ import annotations

import os
import re
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
    run = run_script(wire, tmp_path, "snippet", SNIPPET, env)
    assert "rows 10" in run.stdout, run.stderr[-3000:]


def run_script(
    wire: Wire, tmp_path: Path, name: str, text: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """``text`` run as a program in ``env`` with the server's address and a topic of
    10 records as its arguments."""
    topic = wire.create(f"reg-{name}")
    wire.publish(topic, records(10, 4))
    script = tmp_path / f"{name}.py"
    script.write_text(text)
    return subprocess.run(
        [sys.executable, str(script), wire.address, topic],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


TWICE = (
    """
import sys
from pyspark.sql import SparkSession
import compactlog.spark

def read(step):
    df = spark.read.format("compactlog").option("server", sys.argv[1])
    df = df.option("topic", sys.argv[2]).load()
    plan = df._jdf.queryExecution().executedPlan().toString()
    jars = [row[0].rsplit("/", 1)[-1] for row in spark.sql("LIST JARS").collect()]
    print(step, "jvm" if "compactlog JVM scan" in plan else "python", df.count(), jars)

"""
    + SCRIPT_SESSION
    + """compactlog.spark.register(spark)
compactlog.spark.register(spark)
read("twice")
spark.stop()
"""
    + SCRIPT_SESSION
    + """compactlog.spark.register(spark)
read("restarted")
spark.stop()
"""
)


def test_register_adds_the_jar_once_per_context(wire: Wire, tmp_path: Path) -> None:
    """Registering twice adds the JVM reader's jar once (Spark warns of a jar added
    twice); a session stopped and started again in the same process gets it again, from
    the new context's own list of jars, and reads through the JVM scan."""
    env = {k: v for k, v in os.environ.items() if k != "COMPACTLOG_SPARK_JVM"}
    env["PYSPARK_PYTHON"] = sys.executable
    run = run_script(wire, tmp_path, "twice", TWICE, env)
    lines = [line.split(" ", 3) for line in run.stdout.splitlines()]
    assert [line[:3] for line in lines] == [
        ["twice", "jvm", "10"],
        ["restarted", "jvm", "10"],
    ], run.stderr[-3000:]
    (jars,) = {line[3] for line in lines}
    assert re.fullmatch(r"\['compactlog-spark-[0-9a-f]{16}\.jar'\]", jars)
    assert "has been added already" not in run.stderr
