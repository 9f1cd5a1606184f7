"""The source's columns (CONTRACT section 14).

``event_time`` is the producer's time; a message published without one (0 on the wire,
"use publish time") shows its publish time, as Kafka's ``timestamp`` column shows the
broker's time when the producer set none. Null keys and values stay null. The columns
are filled from each Read response's bytes by ``compactlog.spark.columns``.
"""

from __future__ import annotations

SCHEMA = (
    "key BINARY, value BINARY, topic STRING, partition INT, ledger_id BIGINT, "
    "entry_id BIGINT, publish_time TIMESTAMP, event_time TIMESTAMP, "
    "properties MAP<STRING, STRING>"
)
