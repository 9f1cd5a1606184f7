"""Checks across topic config keys, once each key has passed its own (``config.py``).

Kafka's ``LogConfig.validateValues`` refuses a topic whose ``min.compaction.lag.ms`` is
above its ``max.compaction.lag.ms``, judged on the merged config (defaults, broker config,
topic overrides): changing one of the two alone is checked against the other's current
value. The same here, on the effective config (defaults ← server ``--config`` ← topic
overrides), at CreateTopic and UpdateTopicConfig before anything is written, and on the
server file's own defaults at start. A refusal is ``InvalidConfig`` (INVALID_CONFIG).
"""

from __future__ import annotations

from collections.abc import Mapping

from compactlog.errors import InvalidConfig

MIN_LAG = "min.compaction.lag.ms"
MAX_LAG = "max.compaction.lag.ms"


def check_segmented_config(
    effective: Mapping[str, str],
    topic: str | None = None,
    changed: Mapping[str, str] | None = None,
) -> None:
    """Refuse an effective SEGMENTED config whose keys contradict each other.

    ``changed``: the overrides this request sets, to name the key the caller touched
    (the error's ``key`` metadata); without one, ``max.compaction.lag.ms`` is named."""
    low, high = int(effective[MIN_LAG]), int(effective[MAX_LAG])
    if low <= high:
        return
    changed = changed or {}
    key = MIN_LAG if MIN_LAG in changed and MAX_LAG not in changed else MAX_LAG
    where = f" of topic {topic!r}" if topic is not None else ""
    raise InvalidConfig(
        f"{MAX_LAG} ({high}) must not be below {MIN_LAG} ({low}){where}: "
        "a record cannot become due for cleaning before it may be cleaned",
        topic=topic,
        key=key,
        value=effective[key],
    )
