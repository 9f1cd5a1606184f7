"""Where the JVM reader cannot be had, the Python source is ``compactlog`` as before and
one logged line says why: ``COMPACTLOG_SPARK_JVM=0``, no ``javac`` on the PATH, a cache
that cannot be written. And the jar's cache: compiled once per sources and Spark,
renamed into place whole, so sessions compiling it at once each get a whole jar; a
build prunes the jars unused for a week."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from compactlog.spark import jar

from .conftest import SCRIPT_SESSION, Wire, records

pytestmark = pytest.mark.spark
SPARK_VERSION = "test"


def test_the_switch_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(jar.SWITCH, "0")
    with pytest.raises(jar.NoJar, match="COMPACTLOG_SPARK_JVM=0 turns it off"):
        jar.jar(SPARK_VERSION)


def test_no_javac_no_jar(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(jar.SWITCH, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no javac there
    with pytest.raises(jar.NoJar, match="no javac on the PATH"):
        jar.jar(SPARK_VERSION)


def test_a_cache_that_cannot_be_written(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    monkeypatch.delenv(jar.SWITCH, raising=False)
    (tmp_path / "cache").write_text("a file, not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(jar.NoJar, match="no jar could be written in"):
        jar.jar(SPARK_VERSION)


def test_a_spark_lacking_a_class_the_reader_needs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A Spark whose jars lack a class the reader compiles against (here its
    spark-connect jar holds no shaded gRPC): no compile, the class named."""
    monkeypatch.delenv(jar.SWITCH, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    if jar.shutil.which("javac") is None:
        pytest.skip("needs javac (scripts/test and CI install it)")
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    for name, entries in (
        ("spark-sql_2.13-4.0.0.jar", [jar.NEEDED["spark-sql_"]]),
        ("spark-connect_2.13-4.0.0.jar", ["org/apache/spark/sql/connect/Other.class"]),
    ):
        with zipfile.ZipFile(jars / name, "w") as out:
            for entry in entries:
                out.writestr(entry, b"")
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "spark"))
    with pytest.raises(
        jar.NoJar, match=r"lacks org\.sparkproject\.connect\.grpc\.netty\.NettyChannelBuilder"
    ):
        jar.jar(SPARK_VERSION)
    assert not list((tmp_path / "cache" / "compactlog").glob(jar.JAR_GLOB))


def aged(path: Path, days: float = 8) -> Path:
    """``path`` last used (touched) ``days`` ago."""
    then = time.time() - days * 24 * 3600
    os.utime(path, (then, then))
    return path


def stale_jars(cache: Path, count: int) -> list[Path]:
    """``count`` reader jars of earlier builds, unused for eight days."""
    cache.mkdir(parents=True, exist_ok=True)
    jars = [cache / f"compactlog-spark-{i:016x}.jar" for i in range(count)]
    for path in jars:
        path.write_bytes(b"an earlier build")
        aged(path)
    return jars


def test_one_whole_jar_however_many_compile_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Two compiles at once each get a whole jar, and both prune the same stale jars at
    once, passing over those the other removed first."""
    pytest.importorskip("pyspark")
    monkeypatch.delenv(jar.SWITCH, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    stale_jars(tmp_path / "cache" / "compactlog", 300)
    with ThreadPoolExecutor(2) as pool:
        paths = set(pool.map(jar.jar, [SPARK_VERSION] * 2))
    (path,) = paths
    with zipfile.ZipFile(path) as built:
        names = set(built.namelist())
        service = built.read("META-INF/services/org.apache.spark.sql.sources.DataSourceRegister")
    assert "io/compactlog/spark/CompactlogProvider.class" in names
    assert service.decode().strip() == "io.compactlog.spark.CompactlogProvider"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no half-built leftovers
    built = path.stat().st_ino
    assert jar.jar(SPARK_VERSION) == path and path.stat().st_ino == built  # not rebuilt
    assert jar.jar("another Spark") != path  # the Spark version is part of the key


def test_a_new_jar_prunes_those_unused_for_a_week(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each use touches its jar; a build removes the cache's other reader jars unused
    for seven days, and keeps those used since (another Spark's on the same machine) and
    files that are not reader jars."""
    pytest.importorskip("pyspark")
    monkeypatch.delenv(jar.SWITCH, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cache = tmp_path / "cache" / "compactlog"
    stale = stale_jars(cache, 2)
    kept = [cache / "compactlog-spark-00000000000000ff.jar", cache / "notes.jar"]
    kept.append(cache / "compactlog-spark-0.zip")
    for path in kept:
        path.write_bytes(b"another Spark's jar, or not a reader jar")
        aged(path, days=6 if path == kept[0] else 8)
    (cache / ".build-killed").mkdir()
    (cache / ".build-killed" / "classes").write_bytes(b"a killed compile's")
    aged(cache / ".build-killed")
    first = jar.jar(SPARK_VERSION)
    assert sorted(cache.iterdir()) == sorted([first, *kept])
    assert not any(p.exists() for p in stale)
    built = first.stat().st_ino
    aged(first)
    assert jar.jar(SPARK_VERSION) == first and first.stat().st_ino == built
    assert time.time() - first.stat().st_mtime < 3600  # touched: used now
    aged(first)
    second = jar.jar("another Spark")
    assert sorted(cache.iterdir()) == sorted([second, *kept])


SCRIPT = (
    """
import logging, os, sys
from pyspark.sql import SparkSession
import compactlog.spark

logging.basicConfig(level=logging.WARNING, format="LOG %(message)s")
"""
    + SCRIPT_SESSION
    + """
def read(step):
    compactlog.spark.register(spark)
    df = spark.read.format("compactlog").option("server", sys.argv[1])
    df = df.option("topic", sys.argv[2]).load()
    plan = df._jdf.queryExecution().executedPlan().toString()
    print(step, "jvm" if "compactlog JVM scan" in plan else "python", df.count(), flush=True)

read("switched-off")                  # COMPACTLOG_SPARK_JVM=0 in the environment
del os.environ["COMPACTLOG_SPARK_JVM"]
os.environ["PATH"] = sys.argv[3]      # a PATH without javac, and an empty jar cache
os.environ["XDG_CACHE_HOME"] = sys.argv[4]
read("no-javac")
spark.stop()
"""
)


@pytest.mark.slow
def test_the_python_source_serves_compactlog_without_the_jar(wire: Wire, tmp_path: Path) -> None:
    """A fresh Spark in a subprocess (the shared session has the jar), so slow."""
    topic = wire.create("jvm-fallback")
    wire.publish(topic, records(30, 4))
    script = tmp_path / "fallback.py"
    script.write_text(SCRIPT)
    (tmp_path / "bin").mkdir()
    env = {**os.environ, jar.SWITCH: "0", "PYSPARK_PYTHON": sys.executable}
    args = [wire.address, topic, str(tmp_path / "bin"), str(tmp_path / "cache")]
    run = subprocess.run(
        [sys.executable, str(script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert "switched-off python 30" in run.stdout, run.stderr[-3000:]
    assert "no-javac python 30" in run.stdout, run.stderr[-3000:]
    logged = [line for line in run.stderr.splitlines() if line.startswith("LOG ")]
    assert logged == [
        "LOG compactlog: the Python source reads format('compactlog'): "
        "COMPACTLOG_SPARK_JVM=0 turns it off",
        "LOG compactlog: the Python source reads format('compactlog'): "
        "no javac on the PATH (a JDK is needed: openjdk-17-jdk-headless)",
    ]
