"""``compactlog bench capacity``: many follow readers and long-poll consumers at once.

CONTRACT section 12: 1,000 concurrent ``follow`` readers and consumers do not stop
Publish, health or admin calls. One client process opens them all over a few asyncio
(grpc.aio) channels on loopback: ``--followers`` Read streams with ``follow`` from the
latest position and ``--consumers`` long-polling Consume loops (``wait_ms``, acknowledging
what they get), spread over ``--topics`` topics that a background publisher feeds. While
they are open, three probes call the server every ``--probe-ms``: a unary Publish to a
topic of its own, the standard health Check and an admin GetTopic; their latencies are
the figures. The server's thread count is read from /proc before and during the load: an
asyncio server holds no thread per stream, so it must not grow with them.

    compactlog bench capacity                       # 1,000 + 1,000 for 10 s, own server
    compactlog bench capacity --followers 100 --consumers 100 --seconds 3
    compactlog bench capacity --server HOST:PORT    # against a running server

Every follower must receive every message published to its topic while it was open (no
reader starves), and every error must be a typed status: both are checked and reported.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from compactlog.bench.procstats import ServerProcess
from compactlog.bench.summary import machine, percentile
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

PROBES = ("publish", "health", "admin")
GOAL_P99_MS = 1000.0
UNTYPED = ("UNKNOWN", "INTERNAL")


@dataclasses.dataclass(frozen=True)
class CapacitySettings:
    followers: int = 1000
    consumers: int = 1000
    topics: int = 10
    seconds: float = 10.0
    publish_per_s: float = 5.0  # background publishes to the followed topics, all together
    probe_ms: float = 100.0
    channels: int = 8
    wait_ms: int = 2000  # each consumer's long poll
    open_timeout_s: float = 120.0


@dataclasses.dataclass
class CapacityFigures:
    """What one load run measured; ``latencies_ms`` per probe, errors per status code."""

    settings: CapacitySettings
    open_s: float = 0.0
    followers_open: int = 0
    consumers_polling: int = 0
    latencies_ms: dict[str, list[float]] = dataclasses.field(
        default_factory=lambda: {p: [] for p in PROBES}
    )
    probe_errors: dict[str, int] = dataclasses.field(default_factory=dict)
    stream_errors: dict[str, int] = dataclasses.field(default_factory=dict)
    published: int = 0
    follower_expected: int = 0
    follower_received: int = 0
    consumer_received: int = 0
    threads_idle: int = 0
    threads_peak: int = 0

    def p(self, probe: str, q: float) -> float:
        values = self.latencies_ms[probe]
        return percentile(values, q) if values else float("nan")

    @property
    def untyped_errors(self) -> int:
        every = {**self.probe_errors, **self.stream_errors}
        return sum(n for code, n in every.items() if code in UNTYPED)

    def ok(self) -> bool:
        """The section 12 claim held: every probe answered, within the goal, no untyped
        error, every follower got every message of its topic."""
        return (
            all(self.latencies_ms[p] for p in PROBES)
            and not self.probe_errors
            and all(self.p(p, 0.99) <= GOAL_P99_MS for p in PROBES)
            and self.untyped_errors == 0
            and self.follower_received == self.follower_expected
            and self.followers_open == self.settings.followers
        )

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["latencies_ms"] = {
            p: {"count": len(v), "p50": self.p(p, 0.5), "p99": self.p(p, 0.99), "max": max(v)}
            for p, v in self.latencies_ms.items()
            if v
        }
        out["ok"] = self.ok()
        return out


def server_threads(pid: int | None) -> int:
    """The ``Threads:`` line of /proc/PID/status (0 when unknown)."""
    if pid is None:
        return 0
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _code(err: BaseException) -> str:
    if isinstance(err, grpc.aio.AioRpcError):
        return err.code().name
    return type(err).__name__


class Load:
    """The streams, the publisher and the probes of one run, on one event loop."""

    def __init__(self, address: str, s: CapacitySettings, pid: int | None) -> None:
        """Build it on the event loop it runs on (grpc.aio channels belong to one)."""
        self.s = s
        self.pid = pid
        self.fig = CapacityFigures(s)
        options = [("grpc.use_local_subchannel_pool", 1)]  # one connection per channel
        self.channels = [
            grpc.aio.insecure_channel(address, options=options) for _ in range(s.channels)
        ]
        self.logs = [pb_grpc.LogStub(ch) for ch in self.channels]
        self.admin = pb_grpc.TopicAdminStub(self.channels[0])
        self.health = health_pb2_grpc.HealthStub(self.channels[0])
        self.topics = [f"capacity-{i}" for i in range(s.topics)]
        self.probe_topic = "capacity-probe"
        self.per_topic = [0] * s.topics  # published while the followers were open
        self.stop = asyncio.Event()
        self.measuring = False

    def _stream_error(self, err: BaseException) -> None:
        code = _code(err)
        self.fig.stream_errors[code] = self.fig.stream_errors.get(code, 0) + 1

    async def setup(self) -> None:
        for name in [*self.topics, self.probe_topic]:
            try:
                await self.admin.CreateTopic(pb.CreateTopicRequest(name=name), timeout=30)
            except grpc.aio.AioRpcError as err:  # a server used before (--server)
                if err.code() != grpc.StatusCode.ALREADY_EXISTS:
                    raise

    async def follower(self, i: int, opened: asyncio.Queue[int]) -> None:
        topic = i % self.s.topics
        req = pb.ReadRequest(topic=self.topics[topic], position=pb.LATEST, follow=True)
        call = self.logs[i % len(self.logs)].Read(req)
        try:
            await call.initial_metadata()
            opened.put_nowait(i)
            async for resp in call:
                self.fig.follower_received += len(resp.messages)
        except asyncio.CancelledError:
            call.cancel()
            raise
        except grpc.aio.AioRpcError as err:
            if not self.stop.is_set():
                self._stream_error(err)

    async def consumer(self, i: int) -> None:
        stub = self.logs[i % len(self.logs)]
        topic = self.topics[i % self.s.topics]
        sub = f"capacity-{i}"
        first = True
        while not self.stop.is_set():
            req = pb.ConsumeRequest(
                topic=topic,
                subscription=sub,
                initial_position=pb.LATEST,
                max_messages=100,
                wait_ms=self.s.wait_ms,
            )
            try:
                call = stub.Consume(req, timeout=self.s.wait_ms / 1000 + 30)
                if first:
                    self.fig.consumers_polling += 1
                    first = False
                resp = await call
                if resp.messages:
                    self.fig.consumer_received += len(resp.messages)
                    ack = pb.AcknowledgeRequest(topic=topic, subscription=sub, cumulative=True)
                    ack.id.CopyFrom(resp.messages[-1].id)
                    await stub.Acknowledge(ack, timeout=30)
            except grpc.aio.AioRpcError as err:
                self._stream_error(err)
                await asyncio.sleep(0.1)

    async def publisher(self, until: asyncio.Event) -> None:
        k = 0
        interval = 1.0 / self.s.publish_per_s if self.s.publish_per_s > 0 else None
        while interval is not None and not until.is_set():
            topic = k % self.s.topics
            record = pb.Record(key=b"k%d" % k, value=b"v%d" % k)
            try:
                await self.logs[0].Publish(
                    pb.PublishRequest(topic=self.topics[topic], records=[record]), timeout=30
                )
                self.fig.published += 1
                self.per_topic[topic] += 1
            except grpc.aio.AioRpcError as err:
                self._stream_error(err)
            k += 1
            await asyncio.sleep(interval)

    async def probe(self, name: str, call: Callable[[], Awaitable[object]]) -> None:
        while not self.stop.is_set():
            started = time.perf_counter()
            try:
                await call()
                if self.measuring:
                    self.fig.latencies_ms[name].append((time.perf_counter() - started) * 1000)
            except grpc.aio.AioRpcError as err:
                code = f"{name}:{_code(err)}"
                self.fig.probe_errors[code] = self.fig.probe_errors.get(code, 0) + 1
            await asyncio.sleep(self.s.probe_ms / 1000)

    def _probes(self) -> list[Awaitable[None]]:
        record = pb.PublishRequest(topic=self.probe_topic, records=[pb.Record(key=b"p")])
        return [
            self.probe("publish", lambda: self.logs[-1].Publish(record, timeout=30)),
            self.probe(
                "health",
                lambda: self.health.Check(health_pb2.HealthCheckRequest(), timeout=30),
            ),
            self.probe(
                "admin",
                lambda: self.admin.GetTopic(pb.GetTopicRequest(name=self.topics[0]), timeout=30),
            ),
        ]

    async def sample_threads(self) -> None:
        while not self.stop.is_set():
            self.fig.threads_peak = max(self.fig.threads_peak, server_threads(self.pid))
            await asyncio.sleep(0.2)

    async def run(self) -> CapacityFigures:
        s, fig = self.s, self.fig
        await self.setup()
        fig.threads_idle = server_threads(self.pid)
        background = [asyncio.ensure_future(c) for c in (*self._probes(), self.sample_threads())]
        opened: asyncio.Queue[int] = asyncio.Queue()
        started = time.perf_counter()
        followers = [asyncio.ensure_future(self.follower(i, opened)) for i in range(s.followers)]
        deadline = started + s.open_timeout_s
        while fig.followers_open < s.followers and time.perf_counter() < deadline:
            try:
                await asyncio.wait_for(opened.get(), max(0.01, deadline - time.perf_counter()))
                fig.followers_open += 1
            except TimeoutError:
                break
        # Consumers start once the followers are open: begun together with 1,000 opening
        # streams, about a tenth of their first calls end CANCELLED in the client's
        # grpc.aio before the server sees them (grpcio 1.85; not the server's doing).
        consumers = [asyncio.ensure_future(self.consumer(i)) for i in range(s.consumers)]
        while fig.consumers_polling < s.consumers and time.perf_counter() < deadline:
            await asyncio.sleep(0.01)
        fig.open_s = time.perf_counter() - started
        publishing = asyncio.Event()
        publisher = asyncio.ensure_future(self.publisher(publishing))
        self.measuring = True
        await asyncio.sleep(s.seconds)
        self.measuring = False
        publishing.set()
        await publisher
        await asyncio.sleep(1.0)  # the last publishes reach their followers
        self.stop.set()
        for task in [*followers, *background]:
            task.cancel()
        await asyncio.gather(*followers, *background, return_exceptions=True)
        await asyncio.wait_for(
            asyncio.gather(*consumers, return_exceptions=True), s.wait_ms / 1000 + 30
        )
        per_follower = [self.per_topic[i % s.topics] for i in range(s.followers)]
        fig.follower_expected = sum(per_follower)
        for ch in self.channels:
            await ch.close()
        return fig


def run_load(address: str, s: CapacitySettings, pid: int | None = None) -> CapacityFigures:
    """One load run against the server at ``address`` (``pid``: its process, for threads)."""

    async def load() -> CapacityFigures:
        return await Load(address, s, pid).run()

    return asyncio.run(load())


def markdown(fig: CapacityFigures) -> str:
    s = fig.settings
    head = (
        f"{s.followers:,} follow readers + {s.consumers:,} long-poll consumers "
        f"(wait_ms {s.wait_ms}) over {s.topics} topics and {s.channels} channels, "
        f"{s.publish_per_s:g} publishes/s to them, probes every {s.probe_ms:g} ms for "
        f"{s.seconds:g} s; all followers open after {fig.open_s:.1f} s."
    )
    lines = [head, "", "| probe | calls | p50 ms | p99 ms | max ms | goal p99 | meets |"]
    lines.append("|---|---|---|---|---|---|---|")
    for p in PROBES:
        v = fig.latencies_ms[p]
        if not v:
            lines.append(f"| {p} | 0 | - | - | - | <= {GOAL_P99_MS:g} | no |")
            continue
        p99 = fig.p(p, 0.99)
        meets = "yes" if p99 <= GOAL_P99_MS else "no"
        lines.append(
            f"| {p} | {len(v)} | {fig.p(p, 0.5):.1f} | {p99:.1f} | {max(v):.1f} "
            f"| <= {GOAL_P99_MS:g} | {meets} |"
        )
    lines += [
        "",
        f"server threads: {fig.threads_idle} idle, {fig.threads_peak} at most under load",
        f"followers open: {fig.followers_open}/{s.followers}; messages to followers: "
        f"{fig.follower_received:,} of {fig.follower_expected:,} expected; "
        f"to consumers: {fig.consumer_received:,}; published: {fig.published:,}",
        f"errors: probes {fig.probe_errors or 'none'}, streams {fig.stream_errors or 'none'}",
        f"result: {'OK' if fig.ok() else 'FAILED'}",
    ]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="compactlog bench capacity",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = CapacitySettings()
    p.add_argument("--followers", type=int, default=d.followers)
    p.add_argument("--consumers", type=int, default=d.consumers)
    p.add_argument("--topics", type=int, default=d.topics)
    p.add_argument("--seconds", type=float, default=d.seconds, help="how long the probes run")
    p.add_argument("--publish-per-s", type=float, default=d.publish_per_s)
    p.add_argument("--probe-ms", type=float, default=d.probe_ms)
    p.add_argument("--channels", type=int, default=d.channels)
    p.add_argument("--wait-ms", type=int, default=d.wait_ms)
    p.add_argument("--server", help="a running server (default: start one on a temp dir)")
    p.add_argument("--workdir", type=Path, help="where the server's data dir goes")
    p.add_argument("--json", type=Path, help="also write the figures as JSON here")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    fields = {f.name for f in dataclasses.fields(CapacitySettings)}
    s = CapacitySettings(**{k: v for k, v in vars(args).items() if k in fields})
    if min(s.topics, s.channels) < 1 or min(s.followers, s.consumers) < 0 or s.seconds <= 0:
        raise SystemExit("compactlog bench capacity: counts and --seconds must be positive")
    if args.server:
        fig = run_load(args.server, s)
    else:
        with tempfile.TemporaryDirectory(prefix="compactlog-capacity-", dir=args.workdir) as t:
            proc = ServerProcess(Path(t) / "data")
            try:
                fig = run_load(proc.address, s, proc.pid)
            finally:
                proc.stop()
    print(markdown(fig))
    if args.json is not None:
        report = {"suite": "compactlog bench capacity", "machine": machine(), **fig.to_json()}
        report["command"] = " ".join(["compactlog bench capacity", *argv])
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if fig.ok() else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
