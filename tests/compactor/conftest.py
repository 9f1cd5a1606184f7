"""Fixtures shared by the compactor's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from compactlog.compactor.workers import WorkerPool


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    """One real compaction worker process, shared by a test module's tests."""
    made = WorkerPool(1)
    yield made
    made.close()
