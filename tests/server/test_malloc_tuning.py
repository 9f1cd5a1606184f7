"""A served process keeps the memory of the responses it freed for the next ones.

The case runs in a fresh interpreter (the thresholds are process-wide): steps of 14
blocks of ~140 KB (a Read step of stored batches) allocated and freed 50 times, once to
warm up, then counted in minor page faults, on the main thread and on a second one (a
Read's responses are built on an executor thread).
Left to glibc's own thresholds the same steps fault in 20,000-22,000 pages on this
2-core VM (glibc 2.36), about every page of every step; tuned, none.
"""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="the thresholds are glibc's mallopt"
)

STEPS = """
import resource, sys, threading
from compactlog import malloc_tuning
assert malloc_tuning.keep_freed_memory()

def steps():
    for _ in range(50):
        held = [bytes(140_000 + i) for i in range(14)]
        del held

def faults(out):
    steps()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    steps()
    out.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)

out = []
faults(out)
thread = threading.Thread(target=faults, args=(out,))
thread.start()
thread.join()
print(*out)
"""


def _faults() -> list[int]:
    done = subprocess.run([sys.executable, "-c", STEPS], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [int(n) for n in done.stdout.split()]


def test_freed_response_memory_is_reused_without_faulting_pages_in_again() -> None:
    pages = 50 * 14 * 140_000 // 4096  # every page of every step, were each faulted anew
    assert all(n < pages // 20 for n in _faults())
