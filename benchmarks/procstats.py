"""What the server process costs, read from /proc and the data dir (Linux only).

- memory: resident set size sampled on a thread (``RssSampler``) plus the kernel's own
  high-water mark ``VmHWM``, which samples can miss between two ticks;
- I/O: ``wchar`` from ``/proc/PID/io``, bytes the process handed to ``write``-family calls
  (files; gRPC's sockets go through ``sendmsg`` and are not counted), so a delta over a
  phase is what that phase wrote, page cache or not;
- disk: bytes of the files under a directory (``du``-like, apparent sizes);
- CPU: user + system seconds of the process and all its threads (``cpu_seconds``), or of
  the process and its live children (``tree_cpu_seconds``: a server and its compaction
  workers, whose runs a client's clock sees only as waiting);
- ``ServerProcess``: the server itself, its stderr kept for the report's error messages.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path


def _status_kb(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_bytes(pid: int) -> int:
    return _status_kb(pid, "VmRSS") * 1024


def peak_rss_bytes(pid: int) -> int:
    """The kernel's high-water mark of the resident set since start (or the last reset)."""
    return _status_kb(pid, "VmHWM") * 1024


def reset_peak_rss(pid: int) -> bool:
    """Reset VmHWM to the current RSS (``clear_refs`` 5); False where the kernel refuses."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of the process so far (``/proc/PID/stat``); 0 when gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (their ``/proc/N/stat`` names it the parent)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                parent = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
        if parent == pid:
            found.append(int(entry))
    return found


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of a process and of its live children (``cpu_seconds`` each): a server
    and its compaction workers. A child that ended takes its seconds with it, so a delta
    is only whole over a window in which no child ends (the workers live as long as the
    server)."""
    return cpu_seconds(pid) + sum(cpu_seconds(child) for child in children(pid))


def written_bytes(pid: int) -> int:
    """``wchar`` of the process: bytes passed to write-family calls so far."""
    try:
        with open(f"/proc/{pid}/io") as fh:
            for line in fh:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def disk_bytes(path: Path, skip_suffix: str = ".deleted") -> int:
    """Total apparent size of the regular files under ``path``, without files already
    renamed for deletion (Kafka's ``.deleted``: the unlink waits only for a scheduler tick)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            if name.endswith(skip_suffix):
                continue
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue  # a file the server deleted while we walked
    return total


class RssSampler:
    """Samples a process's RSS every ``interval`` seconds; ``peak_since(t)`` per phase."""

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        self.pid = pid
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-rss", daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> int:
        rss = rss_bytes(self.pid)
        self.samples.append((time.perf_counter(), rss))
        return rss

    def peak_between(self, start: float, end: float) -> int:
        inside = [rss for t, rss in self.samples if start <= t <= end]
        return max(inside, default=0)


class ListeningProcess:
    """A child process that prints one line ``<ready> HOST:PORT`` once it accepts calls
    (``compactlog serve``, the benchmarks' bare gRPC floor), its stderr kept in a log file
    so a failed start or run can say why."""

    def __init__(self, args: list[str], ready: str, log_path: Path, name: str = "server") -> None:
        self.name = name
        self.log_path = log_path
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True)
        self.pid = self.proc.pid
        self.address = self._wait_for_listening(ready)

    def _wait_for_listening(self, ready: str) -> str:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:  # ends at EOF when the child dies
            if line.startswith(ready):
                return line.split()[-1]
        self.proc.wait()
        raise RuntimeError(
            f"{self.name} did not start (exit {self.proc.returncode}): {self.tail()}"
        )

    def tail(self, lines: int = 5) -> str:
        text = self.log_path.read_text(errors="replace").strip().splitlines()
        return " | ".join(text[-lines:])

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM: the clean shutdown path (flush, close the store, exit 0)."""
        if self.proc.poll() is None:
            self.proc.terminate()
        code = self.proc.wait(timeout)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return code


class ServerProcess(ListeningProcess):
    """``compactlog serve`` on a fresh data dir and a free port, its stderr kept in a log
    file beside the data dir so a failed start or run can say why."""

    def __init__(self, data_dir: Path, durability: str = "fsync") -> None:
        self.data_dir = data_dir
        config = data_dir.parent / f"{data_dir.name}.toml"
        config.write_text(f'"publish.durability" = "{durability}"\n')
        args = [sys.executable, "-m", "compactlog", "serve", "--data-dir", str(data_dir),
                "--listen", "127.0.0.1:0", "--config", str(config)]  # fmt: skip
        log_path = data_dir.parent / f"{data_dir.name}.log"
        super().__init__(args, "compactlog listening on ", log_path)
