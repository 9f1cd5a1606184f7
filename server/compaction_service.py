"""Placeholder until the compaction issue lands: no compactions."""

from __future__ import annotations

from compactlog.server.admin_service import Compactions
from compactlog.server.broker import Broker
from compactlog.server.metrics import Metrics
from compactlog.storage.config import ServerSettings


def make_compactions(broker: Broker, settings: ServerSettings, metrics: Metrics) -> Compactions | None:
    return None
