"""What a compaction worker asks of the OS: to yield to the server, and to die with it.

* CPU: ``nice(10)``, so the server's threads win every contested core.
* I/O: ``ioprio_set`` to the idle class: the disk serves the worker when the server has
  nothing queued. Schedulers that honour classes keep it from starving (mq-deadline's
  ``prio_aging_expire``, BFQ's idle timeout); mq-deadline, the usual choice for virtio
  and SATA disks, ignores levels within a class, so a lower best-effort level alone would
  change nothing there.
* Death: ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` kills the worker the moment the thread that
  started it ends (the pool starts workers from one long-lived thread, so that is the
  server's death), and a watchdog thread checks the parent pid twice a second for the
  case the signal cannot cover (the parent died before the prctl ran, another OS).

All of it is best effort: a failure is logged and the worker runs on.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import platform
import signal
import threading
import time

log = logging.getLogger(__name__)

NICE = 10
PR_SET_PDEATHSIG = 1
IOPRIO_WHO_PROCESS = 1
IOPRIO_CLASS_IDLE = 3
IOPRIO_CLASS_SHIFT = 13
_IOPRIO_SET = {"x86_64": 251, "aarch64": 30, "i686": 289, "ppc64le": 273, "s390x": 282}
WATCHDOG_S = 0.5


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name, use_errno=True) if name else None
    except OSError:
        return None


def lower_priority() -> None:
    """Lower this process's CPU and I/O priority below the server's."""
    try:
        os.nice(NICE)
    except OSError as exc:
        log.warning("compaction worker: nice(%d) failed: %s", NICE, exc)
    nr = _IOPRIO_SET.get(platform.machine())
    libc = _libc()
    if nr is None or libc is None:
        return
    value = IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT
    if libc.syscall(nr, IOPRIO_WHO_PROCESS, 0, value) != 0:
        log.warning("compaction worker: ioprio_set failed: errno %d", ctypes.get_errno())


def io_priority() -> tuple[int, int] | None:
    """(class, level) of this process's I/O priority, or None if it cannot be read."""
    nr = {"x86_64": 252, "aarch64": 31}.get(platform.machine())  # ioprio_get
    libc = _libc()
    if nr is None or libc is None:
        return None
    value = libc.syscall(nr, IOPRIO_WHO_PROCESS, 0)
    return None if value < 0 else (value >> IOPRIO_CLASS_SHIFT, value & 0xFF)


def die_with_parent(parent_pid: int) -> None:
    """Arrange to die when ``parent_pid`` does (see the module docstring)."""
    libc = _libc()
    if libc is not None and platform.system() == "Linux":
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # it died before the prctl took effect
        os._exit(1)
    threading.Thread(target=_watch, args=(parent_pid,), name="parent-watchdog", daemon=True).start()


def _watch(parent_pid: int) -> None:
    while True:
        time.sleep(WATCHDOG_S)
        if os.getppid() != parent_pid:
            os._exit(1)
