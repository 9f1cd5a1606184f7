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
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register"]


def register(spark: SparkSession) -> SparkSession:
    """Make ``format("compactlog")`` readable, streamable and writable in ``spark``."""
    from compactlog.spark.source import CompactlogDataSource

    spark.dataSource.register(CompactlogDataSource)
    return spark


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
