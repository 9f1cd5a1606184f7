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

Spark's Python workers run ``PYSPARK_PYTHON`` (``python3`` on the PATH by default), which
need not be the interpreter that has compactlog and pyarrow: ``register`` points them at
the driver's own interpreter unless the user chose one (``PYSPARK_PYTHON`` or
``spark.pyspark.python``).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register"]


def register(spark: SparkSession) -> SparkSession:
    """Make ``format("compactlog")`` readable, streamable and writable in ``spark``."""
    from compactlog.spark.source import CompactlogDataSource

    _use_driver_interpreter(spark)
    spark.dataSource.register(CompactlogDataSource.with_cores(_cores(spark)))
    return spark


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
