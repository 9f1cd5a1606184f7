"""The ``compactlog`` Spark data source, in Kafka source's terms (CONTRACT section 14)::

    import compactlog.spark                  # registers with the active session, if any
    compactlog.spark.register(spark)         # or with this session

    spark.read.format("compactlog").option("server", "HOST:PORT").option("topic", "prices").load()
    spark.readStream.format("compactlog")...  df.write.format("compactlog")...

Python data sources are registered per session. Spark only discovers them by itself in
top-level modules named ``pyspark_*``, and compactlog installs one top-level name, so
registration is this call — made at import when a session is active. PySpark is
imported only then, or by ``register``: importing this module where PySpark is unused
costs nothing. See docs/spark.md.

A batch read is cut into about one Spark partition per core of the session
(``defaultParallelism``), read here when the source is registered: register again after
the cluster grows, or set ``entriesPerPartition``.

Batch reads go through a JVM reader where it can be built (``compactlog.spark.jar``:
``javac`` and Spark's jars, compiled once into a per-user cache): ``register`` adds its
jar to the session's SparkContext once (a later ``register`` finds it in ``LIST JARS``),
where it answers to ``compactlog``, and registers the Python source as
``compactlog-python``; the JVM provider reads the common batch read itself (columnar,
only the columns used) and hands the Python source every other read, every stream and
every write. Where the jar cannot be had (no ``javac``, ``COMPACTLOG_SPARK_JVM=0``, a
Spark without the classes it needs, a Spark Connect session) the Python source is
``compactlog`` as before, and one logged line says why.

Spark's Python workers run ``PYSPARK_PYTHON`` (``python3`` on the PATH by default), which
need not be the interpreter that has compactlog and pyarrow: ``register`` points them at
the driver's own interpreter unless the user chose one (``PYSPARK_PYTHON`` or
``spark.pyspark.python``).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["PYTHON_NAME", "register"]

log = logging.getLogger(__name__)
# The Python source's name where the JVM provider is ``compactlog`` (its Java twin:
# CompactlogProvider.PYTHON_NAME).
PYTHON_NAME = "compactlog-python"


def register(spark: SparkSession) -> SparkSession:
    """Make ``format("compactlog")`` readable, streamable and writable in ``spark``."""
    from compactlog.spark.source import CompactlogDataSource

    _use_driver_interpreter(spark)
    cores = _cores(spark)
    if _add_jvm_reader(spark):
        spark.dataSource.register(CompactlogDataSource.with_cores(cores, PYTHON_NAME))
        return spark
    try:
        spark.dataSource.register(CompactlogDataSource.with_cores(cores))
    except Exception as exc:  # the JVM provider came into the session earlier
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
            raise
        log.warning("compactlog: but the JVM reader was in this session already: it stays")
        spark.dataSource.register(CompactlogDataSource.with_cores(cores, PYTHON_NAME))
    return spark


def _add_jvm_reader(spark: SparkSession) -> bool:
    """Add the JVM reader's jar to ``spark``; False, with one logged line saying why,
    where the Python source has to serve ``compactlog``."""
    from pyspark.errors import PySparkNotImplementedError

    from compactlog.spark.jar import NoJar, jar

    try:
        try:
            spark.sparkContext  # noqa: B018 -- Spark Connect has none
        except PySparkNotImplementedError:
            raise NoJar("a Spark Connect session (its server would need the jar)") from None
        path = jar(spark.version)
        if _listed(spark, path.name):
            return True
        try:
            spark.sql(f"ADD JAR '{path}'")
        except Exception as exc:  # never the user's query's failure: the Python source
            raise NoJar(f"ADD JAR {path} failed: {str(exc).splitlines()[0]}") from None
    except NoJar as why:
        log.warning("compactlog: the Python source reads format('compactlog'): %s", why)
        return False
    return True


def _listed(spark: SparkSession, name: str) -> bool:
    """Whether the session's SparkContext has the jar ``name`` already (a ``register``
    before, or ``spark.jars``): Spark answers a jar added twice with a warning. Spark's
    own list (``LIST JARS``), so a context stopped and started again adds it anew."""
    try:
        listed = spark.sql("LIST JARS").collect()
    except Exception:  # then ADD JAR says what is wrong, or adds it
        return False
    return any(str(row[0]).rsplit("/", 1)[-1] == name for row in listed)


def _cores(spark: SparkSession) -> int:
    """The session's ``defaultParallelism`` (its task slots), 0 where it cannot say."""
    from pyspark.errors import PySparkNotImplementedError

    try:
        return int(spark.sparkContext.defaultParallelism)
    except PySparkNotImplementedError:  # Spark Connect: the planner's machine decides
        return 0


def _use_driver_interpreter(spark: SparkSession) -> None:
    """Workers on ``sys.executable`` unless the user chose an interpreter. The context
    read ``PYSPARK_PYTHON`` when it started, and every Python function (a data source
    registered next, a UDF) takes its interpreter from it: both are set."""
    from pyspark.errors import PySparkNotImplementedError

    if os.environ.get("PYSPARK_PYTHON"):
        return
    try:
        context = spark.sparkContext
    except PySparkNotImplementedError:  # Spark Connect: its server starts the workers
        return
    if context.getConf().get("spark.pyspark.python"):
        return
    os.environ["PYSPARK_PYTHON"] = sys.executable
    context.pythonExec = sys.executable


def _register_with_active_session() -> None:
    # No pyspark.sql imported yet: no session can be active in this process, and a
    # Spark worker importing this module (to unpickle a reader) has none either.
    if "pyspark.sql" not in sys.modules:
        return
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        register(active)


_register_with_active_session()
