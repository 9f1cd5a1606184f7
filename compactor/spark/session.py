"""A Spark session for compactlog, and the data sources' registration.

Python data sources are registered per session (``spark.dataSource.register``): the
public ``compactlog`` source (``compactlog.spark``) and the engine's own
``compactlog_keys``.
"""

from __future__ import annotations

import os
import re
import sys

from pyspark.sql import SparkSession

from compactlog.compactor.spark.datasource import CompactionKeysDataSource
from compactlog.spark import register as register_source

APP_NAME = "compactlog"
_LOCAL = re.compile(r"local\[(\d+|\*)\]")


def register(spark: SparkSession) -> SparkSession:
    """Make ``format("compactlog")`` (and the engine's ``compactlog_keys``) usable."""
    register_source(spark)
    spark.dataSource.register(CompactionKeysDataSource)
    return spark


def spark_session(master: str = "local[*]", app_name: str = APP_NAME) -> SparkSession:
    """The active session, or a new one on ``master``; the data sources registered.

    Python workers must run this interpreter (they import compactlog), so
    ``PYSPARK_PYTHON`` defaults to it. Local masters get a small shuffle (2 partitions
    a core) instead of Spark's 200, and no UI.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    if active is not None:
        return register(active)
    builder = SparkSession.builder.master(master).appName(app_name)
    local = _LOCAL.fullmatch(master)
    if local is not None or master == "local":
        cores = os.cpu_count() or 2
        if local is not None and local.group(1) != "*":
            cores = int(local.group(1))
        builder = (
            builder.config("spark.sql.shuffle.partitions", str(max(2, 2 * cores)))
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
        )
    return register(builder.getOrCreate())
