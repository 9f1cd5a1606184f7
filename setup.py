"""Builds the optional compiled twins: the batch codec (``storage/_batch.c``), the Spark
source's column builder (``compactlog/spark/_columns.c``, over the same wire reader), the
offset map's hashing and probing (``compactor/log_cleaner/_offset_map.c``) and the
compactors' per-batch scans over it (``compactor/log_cleaner/_batch_scan.c``, with the
records' walk in ``_batch_walk.h``; both include ``_offset_table.h``), ``send_async``'s
request writer (``client/_publish.c``) and the read side's per-message loop
(``client/_messages.c``). All three walks read
the wire format through ``storage/_wire.h``.

Everything else is declared in pyproject.toml. ``optional=True``: where no C compiler is
present the install still succeeds and the pure-Python twins (``storage/_batch_py.py``,
``compactlog/spark/_columns_py.py``,
``compactor/log_cleaner/_offset_map_py.py``, ``compactor/log_cleaner/_batch_scan_py.py``,
``client/_publish_py.py``, ``client/_messages_py.py``),
which behave identically, are used.

Each extension carries a digest of the files it is built from (``twin``, by
``compactlog/twin_hash.py``'s rule), so that a build older than its sources is seen and its
pure twin used (``compactlog/twins.py``).
"""

import importlib.util
from pathlib import Path

from setuptools import Extension, setup

ROOT = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("twin_hash", ROOT / "compactlog" / "twin_hash.py")
assert _spec is not None and _spec.loader is not None
twin_hash = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(twin_hash)
STAMP = "storage/_twin_stamp.h"

TABLE = "compactor/log_cleaner/_offset_table.h"
WALK = "compactor/log_cleaner/_batch_walk.h"
DIGESTS = "compactor/log_cleaner/_key_digests.h"
WIRE = "storage/_wire.h"
BUF = "storage/_buf.h"


def twin(name: str, sources: list[str], depends: list[str], **options: object) -> Extension:
    """An optional compiled twin stamped with the digest of every file it is built from."""
    files = [*sources, *depends, STAMP]
    stamp = [
        ("TWIN_SOURCE_HASH", f'"{twin_hash.source_hash(ROOT, files)}"'),
        ("TWIN_SOURCES", '"' + " ".join(sorted(files)) + '"'),
    ]
    return Extension(
        name,
        sources=sources,
        depends=[*depends, STAMP],
        define_macros=stamp,
        extra_compile_args=["-O3", "-std=c11", "-Wall"],
        optional=True,
        **options,  # type: ignore[arg-type]
    )


setup(
    ext_modules=[
        twin(
            "compactlog.storage._batch",
            ["storage/_batch.c"],
            [WIRE, BUF, "storage/_publish_check.h"],
        ),
        twin(
            "compactlog.spark._columns",
            ["compactlog/spark/_columns.c"],
            [WIRE],
            include_dirs=["storage"],
        ),
        twin(
            "compactlog.compactor.log_cleaner._offset_map",
            ["compactor/log_cleaner/_offset_map.c"],
            [TABLE],
        ),
        twin(
            "compactlog.compactor.log_cleaner._batch_scan",
            ["compactor/log_cleaner/_batch_scan.c"],
            [TABLE, WALK, DIGESTS, WIRE],
        ),
        twin(
            "compactlog.server.kafka._records",
            ["server/kafka/_records.c"],
            [WIRE, BUF, "server/kafka/_kafka_wire.h", "server/kafka/_records_fetch.h"],
        ),
        twin("compactlog.client._publish", ["client/_publish.c"], [], include_dirs=["storage"]),
        twin(
            "compactlog.client._messages", ["client/_messages.c"], [BUF], include_dirs=["storage"]
        ),
    ]
)
