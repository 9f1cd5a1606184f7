"""The JVM batch reader's jar: found in the per-user cache, or compiled there.

The reader (``compactlog/spark/jvm/``, Java sources shipped as package data) is compiled
when the source is registered, not at install: pip's isolated build has no PySpark, and
the jar must match the Spark that runs it. ``javac`` compiles it against that Spark's
own jars (``pyspark/jars``, or ``$SPARK_HOME/jars``): Spark's DataSource V2 API, its
internal ``PythonDataSourceV2`` and the gRPC-java shaded in its ``spark-connect`` jar.

The jar is cached under ``$XDG_CACHE_HOME/compactlog`` (``~/.cache/compactlog``), named
by a hash of the sources and of the Spark version and jars folder, so an upgrade of
either compiles a new one. It is written in a temporary folder beside the cache's and
renamed into place, so a session never sees half a jar, even with another compiling
the same one at once. Each use touches its jar, and a newly built one prunes the cache:
the other reader jars (and build folders a killed compile left) unused for a week go,
so upgrades do not pile jars up, while another Spark's jar in use on the same machine
stays; a file another process removed first is passed over.

``jar(spark_version)`` returns the jar's path or raises ``NoJar`` with the one-line reason
the Python source serves ``format("compactlog")`` instead: ``COMPACTLOG_SPARK_JVM=0``,
no ``javac``, a Spark without the classes the reader needs, a failed compile, or a cache
folder that cannot be written.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path

SWITCH = "COMPACTLOG_SPARK_JVM"
SOURCES = Path(__file__).resolve().parent / "jvm"
COMPILE_TIMEOUT_S = 300
JAR_GLOB = "compactlog-spark-*.jar"
# A cached jar (or a build folder) not used for this long goes when another is built.
STALE_AFTER_S = 7 * 24 * 3600
# What the reader compiles against, and where each lives in Spark's jars.
NEEDED = {
    "spark-sql_": "org/apache/spark/sql/execution/datasources/v2/python/PythonDataSourceV2.class",
    "spark-connect_": "org/sparkproject/connect/grpc/netty/NettyChannelBuilder.class",
}
_OFF = ("0", "false", "no", "off")


class NoJar(Exception):
    """Why the JVM reader is not used (one line)."""


def switched_off() -> str | None:
    """The switch's setting where it turns the JVM reader off, else None."""
    value = os.environ.get(SWITCH, "").strip()
    return f"{SWITCH}={value}" if value.lower() in _OFF else None


def spark_jars() -> Path:
    """The jars of the Spark that PySpark runs: ``$SPARK_HOME/jars``, else its own."""
    home = os.environ.get("SPARK_HOME")
    if home:
        return Path(home) / "jars"
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "compactlog"


def source_files() -> list[Path]:
    """The Java sources and the jar's resources (its service registration), in order."""
    return sorted(p for p in SOURCES.rglob("*") if p.is_file() and p.suffix != ".class")


def jar(spark_version: str) -> Path:
    """The reader's jar for this Spark: cached, or compiled now; ``NoJar`` saying why not."""
    off = switched_off()
    if off:
        raise NoJar(f"{off} turns it off")
    jars = spark_jars()
    digest = hashlib.sha256(f"{spark_version}\0{jars}\0".encode())
    for path in source_files():
        digest.update(f"{path.relative_to(SOURCES)}\0".encode() + path.read_bytes())
    target = cache_dir() / JAR_GLOB.replace("*", digest.hexdigest()[:16])
    if not _used(target):
        try:
            _build(jars, target)
        except OSError as exc:  # the cache folder cannot be written
            raise NoJar(f"no jar could be written in {target.parent}: {exc}") from None
        _prune(target)
    return target


def _used(target: Path) -> bool:
    """Whether the jar is cached, touching it first (its mtime is its last use, which
    ``_prune`` goes by): a jar pruned before the touch is built again."""
    with contextlib.suppress(OSError):  # not there (built next), or a read-only cache
        os.utime(target)
    return target.is_file()


def _prune(keep: Path) -> None:
    """Remove the reader jars beside ``keep`` and the build folders there whose mtime is
    older than ``STALE_AFTER_S``; one removed meanwhile (another process pruning), or
    that cannot be removed, is passed over."""
    horizon = time.time() - STALE_AFTER_S
    for path in [*keep.parent.glob(JAR_GLOB), *keep.parent.glob(".build-*")]:
        try:
            if path == keep or path.stat().st_mtime >= horizon:
                continue
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError:
            continue


def _build(jars: Path, target: Path) -> None:
    javac = shutil.which("javac")
    if javac is None:
        raise NoJar("no javac on the PATH (a JDK is needed: openjdk-17-jdk-headless)")
    _check_classes(jars)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        classes = Path(tmp) / "classes"
        sources = [str(p) for p in source_files() if p.suffix == ".java"]
        command = [javac, "--release", "17", "-nowarn", "-d", str(classes)]
        command += ["-cp", str(jars / "*"), *sources]
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise NoJar(f"javac did not run: {exc}") from None
        if run.returncode != 0:
            errors = [line for line in run.stderr.splitlines() if "error:" in line]
            raise NoJar(f"javac failed: {(errors or run.stderr.splitlines() or ['?'])[0]}")
        built = Path(tmp) / target.name
        with zipfile.ZipFile(built, "w", zipfile.ZIP_DEFLATED) as out:
            for path in sorted(classes.rglob("*.class")):
                out.write(path, path.relative_to(classes).as_posix())
            resources = SOURCES / "resources"
            for path in sorted(p for p in resources.rglob("*") if p.is_file()):
                out.write(path, path.relative_to(resources).as_posix())
        os.replace(built, target)


def _check_classes(jars: Path) -> None:
    """``NoJar`` naming the first class the reader needs that Spark's jars lack."""
    for prefix, name in NEEDED.items():
        if not any(_holds(path, name) for path in jars.glob(f"{prefix}*.jar")):
            missing = name.removesuffix(".class").replace("/", ".")
            raise NoJar(f"this Spark lacks {missing} (in {jars}/{prefix}*.jar)")


def _holds(path: Path, name: str) -> bool:
    with zipfile.ZipFile(path) as jar_file:
        return name in jar_file.namelist()
