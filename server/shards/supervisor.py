"""The front's side of the shards: start them, learn their addresses, restart the dead.

Each shard (``server/shards/process.py``) is started from the front's main thread, so its
``PR_SET_PDEATHSIG`` fires exactly when the front dies; a shard that dies is started again
on the same slots, and one that dies ``MAX_RESTARTS`` times within ``RESTART_WINDOW_S``
stops the server. Details in docs/architecture.md ("Shards", "Process life").
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from compactlog.errors import CompactlogError
from compactlog.server.front.secret import SECRET_ENV
from compactlog.server.security.guard import SecurityOptions
from compactlog.server.shards.kafka_ports import KafkaBrokers
from compactlog.storage.slots import Placement, slots_of_shard

log = logging.getLogger("compactlog.shards")

READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
MAX_RESTARTS = 3
RESTART_WINDOW_S = 60.0


@dataclass(frozen=True)
class ShardSpec:
    """What every shard of one server is started with."""

    data_dir: Path
    slot_count: int
    shards: int
    config: Path | None
    security: SecurityOptions
    placement: Placement = Placement.TOPIC
    secret: str | None = None  # the front's mark (front_secret), handed over in the env
    kafka: KafkaBrokers | None = None  # --kafka-listen: the front's sockets, one a shard
    front: str | None = None  # where a shard's broker reaches the front (kafka_front)

    def command(self, shard: int) -> list[str]:
        slots = ",".join(str(s) for s in slots_of_shard(shard, self.shards, self.slot_count))
        args = [
            sys.executable,
            "-m",
            "compactlog.server.shards.process",
            "--data-dir",
            str(self.data_dir),
            "--slots",
            slots,
            "--slot-count",
            str(self.slot_count),
            "--parent-pid",
            str(os.getpid()),
            "--shard",
            str(shard),
            "--placement",
            self.placement.value,
        ]
        for flag, value in (
            ("--config", self.config),
            ("--auth-tokens", self.security.auth_tokens),
            ("--tls-cert", self.security.tls_cert),
            ("--tls-key", self.security.tls_key),
        ):
            if value is not None:
                args += [flag, str(value)]
        if self.kafka is not None:
            args += self.kafka.argv(shard)
        if self.front is not None:
            args += ["--front", self.front]
        return args

    def inherited(self, shard: int) -> tuple[int, ...]:
        """The file descriptors the shard inherits: its Kafka broker's socket."""
        return () if self.kafka is None else self.kafka.fds(shard)

    def environment(self) -> dict[str, str]:
        """The shard's environment: the front's own, plus the secret (never in argv,
        which ``ps`` shows to every user)."""
        env = dict(os.environ)
        env.pop(SECRET_ENV, None)
        if self.secret:
            env[SECRET_ENV] = self.secret
        return env


@dataclass
class Shard:
    index: int
    proc: subprocess.Popen[bytes]
    addresses: dict[int, str] = field(default_factory=dict)
    deaths: list[float] = field(default_factory=list)


def describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _read_ready(proc: subprocess.Popen[bytes], timeout: float) -> dict[int, str]:
    """The shard's ready line (blocking, so run it off the event loop)."""
    box: list[bytes] = []
    stdout = proc.stdout
    assert stdout is not None
    reader = threading.Thread(target=lambda: box.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    line = box[0] if box else b""
    if not line:
        proc.kill()
        proc.wait()
        raise CompactlogError(f"a shard failed to start ({describe_exit(proc.returncode)})")
    stdout.close()  # the shard writes nothing more there
    ready = json.loads(line)
    return {int(slot): address for slot, address in ready["slots"].items()}


class ShardSupervisor:
    """Starts and keeps ``spec.shards`` shard processes; ``on_addresses`` hears every
    slot's (new) address; ``on_fatal`` hears why the server must stop."""

    def __init__(
        self,
        spec: ShardSpec,
        on_addresses: Callable[[dict[int, str]], None],
        on_fatal: Callable[[str], None],
    ) -> None:
        self.spec = spec
        self.on_addresses = on_addresses
        self.on_fatal = on_fatal
        self.shards: dict[int, Shard] = {}
        self.stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def _spawn(self, index: int) -> subprocess.Popen[bytes]:
        # From the event loop's thread, the main thread: see the module docstring.
        return subprocess.Popen(
            self.spec.command(index),
            stdout=subprocess.PIPE,
            env=self.spec.environment(),
            pass_fds=self.spec.inherited(index),
        )

    async def start(self) -> None:
        """Start every shard at once and wait for all to be ready; on a failure the
        started ones are stopped and ``CompactlogError`` says which failed."""
        self._loop = asyncio.get_running_loop()
        procs = {index: self._spawn(index) for index in range(self.spec.shards)}
        for index, proc in procs.items():
            self.shards[index] = Shard(index, proc)
        results = await asyncio.gather(
            *(asyncio.to_thread(_read_ready, proc, READY_TIMEOUT_S) for proc in procs.values()),
            return_exceptions=True,
        )
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            await self.stop()
            raise CompactlogError(str(failures[0]))
        for index, addresses in zip(procs, results, strict=True):
            assert isinstance(addresses, dict)
            self.shards[index].addresses = addresses
            self.on_addresses(addresses)
            self._watch(self.shards[index])
        log.info(
            "%d shards: %s",
            self.spec.shards,
            ", ".join(f"shard {s.index} pid {s.proc.pid}" for s in self.shards.values()),
        )

    def _watch(self, shard: Shard) -> None:
        proc, loop = shard.proc, self._loop
        assert loop is not None

        def wait() -> None:
            proc.wait()
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._died(shard, proc)))

        threading.Thread(target=wait, name=f"shard-{shard.index}-watch", daemon=True).start()

    async def _died(self, shard: Shard, proc: subprocess.Popen[bytes]) -> None:
        if self.stopping or shard.proc is not proc:
            return
        how = describe_exit(proc.returncode)
        now = time.monotonic()
        shard.deaths = [t for t in shard.deaths if now - t < RESTART_WINDOW_S] + [now]
        if len(shard.deaths) > MAX_RESTARTS:
            self.on_fatal(
                f"shard {shard.index} (pid {proc.pid}) died {len(shard.deaths)} times within "
                f"{RESTART_WINDOW_S:.0f} s, last {how}: stopping the server"
            )
            return
        log.error("shard %d (pid %d) died, %s: restarting it", shard.index, proc.pid, how)
        shard.proc = self._spawn(shard.index)
        try:
            shard.addresses = await asyncio.to_thread(_read_ready, shard.proc, READY_TIMEOUT_S)
        except (CompactlogError, ValueError) as exc:
            self.on_fatal(f"shard {shard.index} could not be restarted: {exc}")
            return
        self.on_addresses(shard.addresses)
        log.info("shard %d restarted as pid %d", shard.index, shard.proc.pid)
        self._watch(shard)

    def signal_all(self, sig: int) -> None:
        for shard in self.shards.values():
            if shard.proc.poll() is None:
                shard.proc.send_signal(sig)

    async def stop(self) -> None:
        """SIGTERM every shard (each stops as a server does), SIGKILL what outlives
        ``STOP_TIMEOUT_S``."""
        self.stopping = True
        self.signal_all(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for shard in self.shards.values():
            left = max(0.1, deadline - time.monotonic())
            try:
                await asyncio.to_thread(shard.proc.wait, left)
            except subprocess.TimeoutExpired:
                log.error("shard %d (pid %d) did not stop: killing it", shard.index, shard.proc.pid)
                shard.proc.kill()
                await asyncio.to_thread(shard.proc.wait)
            if shard.proc.returncode not in (0, None):
                log.error(
                    "shard %d stopped with %s", shard.index, describe_exit(shard.proc.returncode)
                )
