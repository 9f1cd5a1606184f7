"""``procstats``' CPU of a process tree, against real processes: a child's CPU counts in
its parent's tree while it lives, and not in the parent's own figure."""

from __future__ import annotations

import os
import subprocess
import sys

from compactlog.bench.procstats import children, cpu_seconds, tree_cpu_seconds

BURN = (
    "import sys, time\n"
    "while time.process_time() < 0.3:\n"
    "    pass\n"
    "print('burnt', flush=True)\n"
    "sys.stdin.read()\n"
)


def test_a_live_child_counts_in_its_parents_tree_only() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "burnt\n"
        me = os.getpid()
        assert child.pid in children(me)
        assert cpu_seconds(child.pid) >= 0.3 - 0.02  # clock ticks of 10 ms
        own = cpu_seconds(me)
        assert tree_cpu_seconds(me) >= own + cpu_seconds(child.pid) - 0.02
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
    assert child.pid not in children(os.getpid())


def test_a_process_without_children_is_its_own_tree() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)  # fmt: skip
    try:
        assert children(child.pid) == []
        assert tree_cpu_seconds(child.pid) == cpu_seconds(child.pid)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
