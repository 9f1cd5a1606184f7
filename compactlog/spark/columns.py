"""Read responses straight into Arrow batches: the source's read path per message.

A ``ReadResponse``'s bytes go to the column builder, a compiled twin (``_columns.c``)
with a pure-Python one (``_columns_py.py``) of identical results, used where no
compiler was present at install or with ``COMPACTLOG_NO_EXT=1``. It fills the key,
value, id, time and properties columns from the bytes in one pass; the buffers become
Arrow arrays without a copy, so no Python object is made per message (issue 29: a
Python loop over parsed messages read about 145k messages/s on two Spark cores).
"""

from __future__ import annotations

import array
import functools
from dataclasses import dataclass

import pyarrow as pa

from compactlog.errors import CorruptData
from compactlog.records import MessageId
from compactlog.spark import _columns_py
from compactlog.spark.offsets import TopicPartition
from compactlog.twins import load_twin

builder, COMPILED = load_twin("compactlog.spark._columns", _columns_py)


def arrow_schema() -> pa.Schema:
    """The source's columns (``rows.SCHEMA``) as Spark hands them to ``read`` in Arrow,
    without a session (Spark's timestamps: microseconds, UTC)."""
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_schema

    fields = [
        ("key", T.BinaryType()), ("value", T.BinaryType()), ("topic", T.StringType()),
        ("partition", T.IntegerType()), ("ledger_id", T.LongType()),
        ("entry_id", T.LongType()), ("publish_time", T.TimestampType()),
        ("event_time", T.TimestampType()),
        ("properties", T.MapType(T.StringType(), T.StringType())),
    ]  # fmt: skip
    struct = T.StructType([T.StructField(name, kind) for name, kind in fields])
    return to_arrow_schema(struct, timezone="UTC")


@dataclass(frozen=True)
class Columns:
    """One response's rows before the range's end: the batch (None: no rows), whether
    the end was met, and the id of its last row."""

    batch: pa.RecordBatch | None
    stopped: bool
    last: MessageId | None


def _binary(n: int, nulls: int, valid: bytes, offsets: bytes, data: bytes) -> pa.Array:
    bitmap = pa.py_buffer(valid) if nulls else None
    buffers = [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(pa.binary(), n, buffers, null_count=nulls)


def _ints(kind: pa.DataType, n: int, data: bytes) -> pa.Array:
    return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(data)], null_count=0)


@functools.lru_cache(maxsize=64)
def constant_columns(tp: TopicPartition, n: int) -> tuple[pa.Array, pa.Array]:
    """The ``topic`` and ``partition`` columns of ``n`` rows of ``tp``: the same in every
    response of a range, so made once per size (Arrow arrays are immutable). Built from
    buffers: ``pa.scalar`` would import pandas into each fresh Python worker, about 1 s
    of a query's fixed cost on the loaded 2-core box (Spark's worker does not need it)."""
    name = tp.topic.encode()
    offsets = array.array("i", range(0, (n + 1) * len(name), len(name)))
    topic = pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(name * n)], null_count=0
    )
    partition = _ints(pa.int32(), n, (array.array("i", [tp.partition]) * n).tobytes())
    return topic, partition


def _properties(kind: pa.MapType, n: int, count: int, bufs: tuple[bytes, ...]) -> pa.Array:
    map_offsets, key_offsets, key_data, value_offsets, value_data = bufs
    keys = pa.Array.from_buffers(
        pa.string(), count, [None, pa.py_buffer(key_offsets), pa.py_buffer(key_data)]
    )
    values = pa.Array.from_buffers(
        pa.string(), count, [None, pa.py_buffer(value_offsets), pa.py_buffer(value_data)]
    )
    entries = pa.StructArray.from_arrays([keys, values], fields=[kind.key_field, kind.item_field])
    offsets = pa.py_buffer(map_offsets)
    return pa.Array.from_buffers(kind, n, [None, offsets], null_count=0, children=[entries])


def response_columns(tp: TopicPartition, data: bytes, end: MessageId, schema: pa.Schema) -> Columns:
    """The messages of one serialized ``ReadResponse`` before ``end``, as one Arrow
    batch of ``schema`` (the source's columns, CONTRACT section 14)."""
    try:
        out = builder.columns(data, end.ledger_id, end.entry_id)
    except _columns_py.MalformedResponse as exc:
        raise CorruptData(f"a Read response of {tp.log!r} does not parse: {exc}") from None
    n, stopped, last_ledger, last_entry, key_nulls, value_nulls, props = out[:7]
    bufs = out[7:]
    if n == 0:
        return Columns(None, stopped, None)
    types = [f.type for f in schema]
    arrays = [
        _binary(n, key_nulls, *bufs[0:3]),
        _binary(n, value_nulls, *bufs[3:6]),
        *constant_columns(tp, n),
        _ints(types[4], n, bufs[6]),
        _ints(types[5], n, bufs[7]),
        _ints(types[6], n, bufs[8]),
        _ints(types[7], n, bufs[9]),
        _properties(types[8], n, props, bufs[10:15]),
    ]
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    return Columns(batch, stopped, MessageId(last_ledger, last_entry))
