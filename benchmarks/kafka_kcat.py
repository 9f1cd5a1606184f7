"""``compactlog bench kafka``'s kcat rows: librdkafka's own C producer and consumer.

confluent-kafka's figures hold its Python loop (``produce()``, ``consume()``, ``key()``,
``value()`` per record), which alone caps a consumer near 0.16 of gRPC's Read on a 2-core
box; kcat (Debian's ``kcat``, built on librdkafka) drives the same library from C, so its
rows say what the Kafka listener serves rather than what Python can take. Each is timed
from the process's start (connections and metadata included; kcat has no other way), with
kcat's defaults but for the producer's ``acks=all`` and ``linger.ms=5`` (the issue's
producer). Without kcat on the PATH the rows are left out and the report says so.
"""

from __future__ import annotations

import dataclasses
import resource
import shutil
import subprocess
import time
from pathlib import Path

Records = list[tuple[bytes | None, bytes | None]]
KEY_DELIMITER = b"|"  # never in the workload's keys (key-NNNNNNNN) or values (digits, x)
PRODUCER = ["-X", "acks=all", "-X", "linger.ms=5"]
TIMEOUT_S = 600


def kcat() -> str | None:
    """kcat's path, None when it is not installed."""
    return shutil.which("kcat")


def write_input(records: Records, path: Path) -> Path:
    """The records as kcat -P reads them: ``KEY|VALUE`` lines, empty for a null key or a
    tombstone (sent as NULL with ``-Z``)."""
    with path.open("wb") as out:
        for key, value in records:
            out.write(b"%s%s%s\n" % (key or b"", KEY_DELIMITER, value or b""))
    return path


def produce(address: str, topic: str, input_file: Path) -> float:
    """Seconds for kcat to produce every line of ``input_file`` to partition 0 and exit
    (it waits for every delivery report); an error when any delivery failed."""
    tool = kcat()
    assert tool is not None
    args = [tool, "-P", "-b", address, "-t", topic, "-p", "0", "-K", KEY_DELIMITER.decode()]
    args += ["-Z", *PRODUCER, "-l", str(input_file)]
    started = time.perf_counter()
    done = subprocess.run(args, capture_output=True, timeout=TIMEOUT_S, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0 or b"Delivery failed" in done.stderr:
        raise RuntimeError(f"kcat -P failed ({done.returncode}): {done.stderr[-500:]!r}")
    return seconds


def children_cpu_seconds() -> float:
    """User + system CPU seconds of this process's children that have ended and been
    waited for (``RUSAGE_CHILDREN``): a delta around one kcat run is that kcat's."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclasses.dataclass(frozen=True)
class Read:
    """One kcat -C read: its seconds, kcat's own CPU seconds for it (parse and print,
    librdkafka's threads) and the last record it printed (its value, ``NULL`` for a
    tombstone)."""

    seconds: float
    cpu_s: float
    last: bytes

    @property
    def last_offset(self) -> int:
        """The last record's offset, read from its value: the workload's values begin
        with their record's index (``NNNNNNNNNN:``), its offset in a fresh topic; -1
        for a tombstone. kcat prints values only: ``-f`` with the offset (``%o``) costs
        its parse 20-50% more CPU."""
        index = self.last.split(b":", 1)[0]
        return int(index) if index.isdigit() else -1


def consume(address: str, topic: str, count: int) -> Read:
    """kcat reading partition 0 of ``topic`` from the beginning to its end, each record's
    value printed; an error unless it printed exactly ``count`` records.
    ``-c count`` ends it at the last record: ``-e`` alone waits for an empty Fetch, which
    a broker holds for the whole ``fetch.wait.max.ms`` (500 ms, 0.5 s of a 1.2 s read of
    200,000 records); ``-e`` stays so that a short log ends the read rather than hanging
    it."""
    tool = kcat()
    assert tool is not None
    args = [tool, "-C", "-b", address, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q"]
    args += ["-c", str(count)]
    cpu, started = children_cpu_seconds(), time.perf_counter()
    with subprocess.Popen([*args, "-Z"], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        out = proc.stdout
        assert out is not None
        lines, tail = 0, b""
        while chunk := out.read(1 << 20):
            lines += chunk.count(b"\n")
            tail = tail[-4096:] + chunk[-4096:]  # holds the last line
        proc.wait(TIMEOUT_S)
        seconds = time.perf_counter() - started
        if proc.returncode != 0 or lines != count:
            err = proc.stderr.read()[-500:] if proc.stderr else b""
            raise RuntimeError(
                f"kcat -C read {lines} of {count} records (exit {proc.returncode}): {err!r}"
            )
    last = tail.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    return Read(seconds, children_cpu_seconds() - cpu, last)


def cpu_line(m: dict[str, float], cores: int) -> str:
    """One run's kcat reads against the goal's wall clock: kcat's own CPU and the
    server's, beside the seconds a read at 0.5 x this run's gRPC Read would take; the
    same for the read against the replay floor (``kafka_replay``). On ``cores`` cores,
    kcat + server CPU over the cores is the least wall time the read can take however
    well the two overlap (and only with nothing else running)."""
    goal = 2 * m["grpc.read_s"]
    line = ""
    for what, key in (("kcat read", "kcat"), ("against the replay floor", "kcat_floor")):
        seconds, client = m[f"{key}.consume_s"], m[f"{key}.consume_client_cpu_s"]
        server = m[f"{key}.consume_server_cpu_s"]
        line += (
            f"{what} {seconds:.3f} s: kcat CPU {client:.3f} s + server CPU {server:.3f} s"
            f" = {client + server:.3f} s (>= {(client + server) / cores:.3f} s of wall on"
            f" {cores} cores); "
        )
    line += f"the goal allows {goal:.3f} s (2 x gRPC Read {m['grpc.read_s']:.3f} s)"
    served, missed = int(m["kcat_floor.served"]), int(m["kcat_floor.missed"])
    return line + f"; the replay answered {served} requests, {missed} left unanswered"
