"""CONTRACT section 12: many follow readers and long-poll consumers do not stop Publish,
health or admin calls, and the server holds no thread per stream.

``compactlog bench capacity``'s load against a real server process: a quick variant in
the default run, the full 1,000 + 1,000 marked slow. Both assert behaviour (every probe
answers, none stalls, no error, every follower gets every message, no thread per stream);
the p99 goal is a figure of the benchmark's table, never a bound of a test.
"""

from __future__ import annotations

from typing import Any

import pytest

from compactlog.bench.capacity import PROBES, CapacitySettings, markdown, run_load
from compactlog.server.app import APPEND_THREADS, STORAGE_THREADS

MAX_BOUND_MS = 5000.0  # the quick load: every call answers, none stalls
PROBE_THREADS = 4  # rpc pool threads the sync probes (health, admin) may wake


def check(fig: Any, s: CapacitySettings) -> None:
    report = markdown(fig)
    for probe in PROBES:
        assert fig.latencies_ms[probe], report  # answered (how often is the table's figure)
        assert max(fig.latencies_ms[probe]) <= MAX_BOUND_MS, report
    # No method waits behind another's calls: every probe answers about as often as the
    # health check, which goes first (they all call at the same cadence).
    answered = len(fig.latencies_ms["health"])
    for probe in PROBES:
        assert 2 * len(fig.latencies_ms[probe]) >= answered, report
    assert not fig.probe_errors and not fig.stream_errors, report
    assert fig.followers_open == s.followers, report
    assert fig.follower_received == fig.follower_expected > 0, report
    assert fig.consumer_received > 0 or s.consumers == 0, report
    # No thread per stream: only the fixed pools may have started threads under load.
    assert fig.threads_peak <= fig.threads_idle + STORAGE_THREADS + APPEND_THREADS + PROBE_THREADS


def test_hundreds_of_streams_leave_the_probes_answering(server: Any) -> None:
    s = CapacitySettings(followers=200, consumers=200, topics=4, seconds=2.0)
    check(run_load(server.address, s, server.proc.pid), s)


@pytest.mark.slow
def test_a_thousand_followers_and_a_thousand_consumers(server: Any) -> None:
    s = CapacitySettings(followers=1000, consumers=1000, seconds=5.0)
    check(run_load(server.address, s, server.proc.pid), s)
