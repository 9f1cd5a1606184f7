"""A Spark session for compactlog, and the data sources' registration.

Python data sources are registered per session (``spark.dataSource.register``): the
public ``compactlog`` source (``compactlog.spark``) and the engine's own
``compactlog_keys``.
"""

from __future__ import annotations

import logging
import os
import re
import sys

from pyspark.errors import PySparkRuntimeError
from pyspark.sql import SparkSession

from compactlog.compactor.spark.datasource import CompactionKeysDataSource
from compactlog.spark import register as register_source

log = logging.getLogger(__name__)

APP_NAME = "compactlog"
GATEWAY_ATTEMPTS = 3
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
    return register(get_or_create(builder))


def get_or_create(builder: SparkSession.Builder, attempts: int = GATEWAY_ATTEMPTS) -> SparkSession:
    """``builder.getOrCreate()``, launching the Java gateway again if it died at birth.

    PySpark forks this process to start the gateway. Where ``grpc`` was imported before
    compactlog, its fork handlers stay on and can abort that child before it execs
    (grpc/grpc#43055, see the ``compactlog`` package docstring): the launch fails with
    ``JAVA_GATEWAY_EXITED`` and nothing of it is kept, so a new fork usually succeeds. Any
    other failure, or the last attempt's, is raised as it came.
    """
    for attempt in range(1, attempts):
        try:
            return builder.getOrCreate()
        except PySparkRuntimeError as exc:
            if exc.getCondition() != "JAVA_GATEWAY_EXITED":
                raise
            log.warning("the Spark gateway exited at launch (attempt %d of %d)", attempt, attempts)
    return builder.getOrCreate()
