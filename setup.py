"""Builds the optional compiled twins: the batch codec (``storage/_batch.c``), the Spark
source's column builder (``compactlog/spark/_columns.c``, over the same wire reader), the
offset map's hashing and probing (``compactor/log_cleaner/_offset_map.c``) and the
compactors' per-batch scans over it (``compactor/log_cleaner/_batch_scan.c``, with the
records' walk in ``_batch_walk.h``; both include ``_offset_table.h``). All three walks read
the wire format through ``storage/_wire.h``.

Everything else is declared in pyproject.toml. ``optional=True``: where no C compiler is
present the install still succeeds and the pure-Python twins (``storage/_batch_py.py``,
``compactlog/spark/_columns_py.py``,
``compactor/log_cleaner/_offset_map_py.py``, ``compactor/log_cleaner/_batch_scan_py.py``),
which behave identically, are used.
"""

from setuptools import Extension, setup

TABLE = "compactor/log_cleaner/_offset_table.h"
WALK = "compactor/log_cleaner/_batch_walk.h"
DIGESTS = "compactor/log_cleaner/_key_digests.h"
WIRE = "storage/_wire.h"
BUF = "storage/_buf.h"

setup(
    ext_modules=[
        Extension(
            "compactlog.storage._batch",
            sources=["storage/_batch.c"],
            depends=[WIRE, BUF, "storage/_publish_check.h"],
            extra_compile_args=["-O3", "-std=c11", "-Wall"],
            optional=True,
        ),
        Extension(
            "compactlog.spark._columns",
            sources=["compactlog/spark/_columns.c"],
            depends=[WIRE],
            include_dirs=["storage"],
            extra_compile_args=["-O3", "-std=c11", "-Wall"],
            optional=True,
        ),
        Extension(
            "compactlog.compactor.log_cleaner._offset_map",
            sources=["compactor/log_cleaner/_offset_map.c"],
            depends=[TABLE],
            extra_compile_args=["-O3", "-std=c11", "-Wall"],
            optional=True,
        ),
        Extension(
            "compactlog.compactor.log_cleaner._batch_scan",
            sources=["compactor/log_cleaner/_batch_scan.c"],
            depends=[TABLE, WALK, DIGESTS, WIRE],
            extra_compile_args=["-O3", "-std=c11", "-Wall"],
            optional=True,
        ),
        Extension(
            "compactlog.server.kafka._records",
            sources=["server/kafka/_records.c"],
            depends=[WIRE, BUF, "server/kafka/_kafka_wire.h", "server/kafka/_records_fetch.h"],
            extra_compile_args=["-O3", "-std=c11", "-Wall"],
            optional=True,
        ),
    ]
)
