"""The guard against thread pools left running (``tests/thread_guard.py``): it knows
every pool of the package by name, sees one left running, and forgives one that ends."""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor

from tests.conftest import REPO
from tests.thread_guard import POOLS, left_behind, ours

PACKAGES = ("storage", "compactor", "server", "client", "cli", "compactlog", "benchmarks")
NAMED = re.compile(r'(?:thread_name_prefix=|Prefetch\()"([^"]+)"')


def test_every_pool_of_the_package_is_known() -> None:
    found = {
        name
        for package in PACKAGES
        for path in (REPO / package).rglob("*.py")
        for name in NAMED.findall(path.read_text())
    }
    assert found == POOLS


def test_a_pool_left_running_is_named_and_one_shut_down_is_not() -> None:
    before = set(threading.enumerate())
    pool = ThreadPoolExecutor(1, thread_name_prefix="ack")
    pool.submit(lambda: None).result()
    other = ThreadPoolExecutor(1, thread_name_prefix="not-ours")
    other.submit(lambda: None).result()
    try:
        assert left_behind(before, end_s=0.05) == ["ack_0"]
        assert not any(ours(t) for t in threading.enumerate() if t.name.startswith("not-ours"))
    finally:
        pool.shutdown(wait=False)  # ends while the guard waits
        other.shutdown()
    assert left_behind(before) == []
