"""The Spark engine: two-phase compaction on Spark and export. See docs/spark.md.

The public ``compactlog`` data source itself is ``compactlog.spark``; ``register`` here
adds the engine's ``compactlog_keys`` source beside it. This module imports PySpark only
when a function is called, so that the CLI can offer ``--engine spark`` and report a
missing PySpark as one line::

    from compactlog.compactor.spark import run_spark_compaction
    run_spark_compaction("127.0.0.1:7650", "prices", "local[*]")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from compactlog.compactor.two_phase import CompactionResult

__all__ = ["export_topic", "register", "run_spark_compaction", "spark_session"]


def register(spark: SparkSession) -> SparkSession:
    """Register the ``compactlog`` and ``compactlog_keys`` sources with ``spark``."""
    from compactlog.compactor.spark.session import register as _register

    return _register(spark)


def spark_session(master: str = "local[*]") -> SparkSession:
    """The active Spark session or a new one on ``master``, data sources registered."""
    from compactlog.compactor.spark.session import spark_session as _session

    return _session(master)


def run_spark_compaction(
    server: str, topic: str, master: str = "local[*]", **kwargs: Any
) -> CompactionResult:
    """Compact a LEDGER topic on Spark (see ``engine.run_spark_compaction``)."""
    from compactlog.compactor.spark.engine import run_spark_compaction as _run

    return _run(server, topic, master, **kwargs)


def export_topic(spark: SparkSession, server: str, topic: str, path: str, **kwargs: Any) -> int:
    """Write a topic to files through Spark (see ``export.export_topic``)."""
    from compactlog.compactor.spark.export import export_topic as _export

    return _export(spark, server, topic, path, **kwargs)
