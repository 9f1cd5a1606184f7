"""Which whole ledgers of a LEDGER topic retention may delete (Pulsar's rules).

A ledger goes only when every durable cursor has passed it and the topic is over
``retention.ms`` (by the ledger's last publish time) or ``retention.bytes`` (over all
raw ledgers), oldest first. The current (last) ledger never goes. ``-1`` keeps forever
or without a size cap; with both unlimited nothing is deleted.
"""

from __future__ import annotations

from collections.abc import Sequence

from compactlog.storage.codec import LedgerMeta
from compactlog.storage.config import LedgerTopicConfig
from compactlog.storage.types import MessageId


def ledgers_to_delete(
    ledgers: Sequence[LedgerMeta],
    cursor_positions: Sequence[MessageId | None],
    config: LedgerTopicConfig,
    now_ms: int,
) -> list[LedgerMeta]:
    if config.retention_ms < 0 and config.retention_bytes < 0:
        return []
    total = sum(led.bytes for led in ledgers)
    doomed: list[LedgerMeta] = []
    for led in ledgers[:-1]:
        last = led.last_id
        consumed = all(
            pos is not None and (last is None or pos >= last) for pos in cursor_positions
        )
        if not consumed:
            break
        too_old = config.retention_ms >= 0 and now_ms - led.last_publish_ms > config.retention_ms
        too_big = config.retention_bytes >= 0 and total > config.retention_bytes
        if not (too_old or too_big):
            break
        doomed.append(led)
        total -= led.bytes
    return doomed
