"""``compactlog bench soak``: produce, consume, compact and restart at once, then check.

For ``--seconds`` a real server on loopback takes, all at the same time:

- producers on a LEDGER and a SEGMENTED (``cleanup.policy=compact``) topic, by unary
  Publish and by PublishStream, keyed records with unique values (LEDGER: some
  tombstones);
- a consumer per topic, acknowledging individually or cumulatively, asking for
  redelivery after any failed call (as a reconnecting consumer does);
- compaction runs of both topics, one after the other (``Compact`` with wait);
- server restarts every ``--restart-every`` seconds, SIGTERM and SIGKILL by turns (a
  SIGTERM must end in exit 0).

Then the load stops, the server restarts once more, the consumers drain their
subscriptions, a last compaction runs, and the topics are read back to check the
invariants of ``soak_checks``: no acknowledged message lost, ids increase, no duplicate
delivery of an acknowledged message, compacted view == latest per key of the history,
every error a typed status. A table of counts and the checks is printed; exit 1 when a
check fails. Loopback only; every loop ends with ``--seconds``.

    compactlog bench soak                      # 60 s
    compactlog bench soak --seconds 10 --restart-every 3
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc

from compactlog.bench import soak_checks as checks
from compactlog.bench.soak_actors import (
    CALL_TIMEOUT_S,
    CHANNEL_OPTIONS,
    CompactionDriver,
    Consumer,
    Errors,
    Producer,
    SoakServer,
)
from compactlog.bench.soak_checks import Check, Stored
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

LEDGER, SEGMENTED = "soak-ledger", "soak-segmented"
SERVER_CONFIG = '"log.cleaner.backoff.ms" = 200\n"compaction.monitor.interval.ms" = 500\n'
TOPIC_CONFIGS: dict[str, tuple[pb.TopicKind.ValueType, dict[str, str]]] = {
    LEDGER: (pb.LEDGER, {"ledger.max.entries": "500"}),
    SEGMENTED: (
        pb.SEGMENTED,
        {"cleanup.policy": "compact", "segment.bytes": "65536", "min.cleanable.dirty.ratio": "0.1"},
    ),
}


@dataclasses.dataclass(frozen=True)
class SoakSettings:
    seconds: float = 60.0
    restart_every: float = 10.0
    keys: int = 200
    tombstones: float = 0.05


@dataclasses.dataclass
class SoakResult:
    settings: SoakSettings
    counts: dict[str, int]
    errors: dict[str, int]
    checks: list[Check]
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


def _read(address: str, topic: str, compacted: bool = False) -> list[Stored]:
    with grpc.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        stub = pb_grpc.LogStub(channel)
        req = pb.ReadRequest(topic=topic, read_compacted=compacted)
        return [
            ((m.id.ledger_id, m.id.entry_id), m.key, m.value if m.HasField("value") else None)
            for resp in stub.Read(req, timeout=120)
            for m in resp.messages
        ]


def _setup(address: str) -> None:
    with grpc.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        admin = pb_grpc.TopicAdminStub(channel)
        for name, (kind, config) in TOPIC_CONFIGS.items():
            admin.CreateTopic(pb.CreateTopicRequest(name=name, kind=kind, config=config))


def _final_compaction(address: str) -> None:
    with grpc.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        admin = pb_grpc.TopicAdminStub(channel)
        for _ in range(20):  # the monitor's or the cleaner's run may hold it a moment
            try:
                req = pb.CompactRequest(topic=LEDGER, wait=True)
                status = admin.Compact(req, timeout=CALL_TIMEOUT_S * 6)
                if status.state == pb.CompactionStatus.SUCCESS:
                    return
            except grpc.RpcError as err:
                if err.code() != grpc.StatusCode.ALREADY_EXISTS:
                    raise
            time.sleep(0.5)


class Soak:
    def __init__(self, s: SoakSettings, workdir: Path) -> None:
        self.s = s
        self.server = SoakServer(workdir / "data", SERVER_CONFIG)
        self.errors = Errors()
        self.stop = threading.Event()
        self.restarts = {"SIGTERM": 0, "SIGKILL": 0}

    def _actors(self) -> tuple[list[Producer], list[Consumer], CompactionDriver]:
        a, e, st = self.server.address, self.errors, self.stop
        producers = []
        for topic in (LEDGER, SEGMENTED):
            tombstones = self.s.tombstones if topic == LEDGER else 0.0
            for stream in (False, True):
                name = f"{topic}-{'stream' if stream else 'unary'}"
                producers.append(Producer(topic, stream, tombstones, self.s.keys, name, a, e, st))
        consumers = [
            Consumer(topic, "soak", f"{topic}-consumer", a, e, st) for topic in (LEDGER, SEGMENTED)
        ]
        return producers, consumers, CompactionDriver([LEDGER, SEGMENTED], "compactor", a, e, st)

    def _restarts(self) -> None:
        """Restart at fixed times (every ``restart_every`` from the start, however long a
        restart takes) until ``seconds`` have passed: SIGTERM, SIGKILL, SIGTERM..."""
        start = time.monotonic()
        end = start + self.s.seconds
        turn = 0
        while True:
            at = start + (turn + 1) * self.s.restart_every
            if at >= end:
                self.stop.wait(max(0.0, end - time.monotonic()))
                return
            self.stop.wait(max(0.0, at - time.monotonic()))
            sig = signal.SIGTERM if turn % 2 == 0 else signal.SIGKILL
            turn += 1
            self.server.restart(sig)
            self.restarts[sig.name] += 1

    def run(self) -> SoakResult:
        try:
            _setup(self.server.address)
            producers, consumers, compactor = self._actors()
            for consumer in consumers:  # the subscriptions exist before the first publish
                consumer.consume_once(wait_ms=0)
            for actor in [*producers, *consumers, compactor]:
                actor.start()
            self._restarts()
            self.stop.set()
            for actor in [*producers, *consumers, compactor]:
                actor.join(CALL_TIMEOUT_S * 7)
            self.server.restart(signal.SIGTERM)  # what was acknowledged survives a restart
            for consumer in consumers:
                consumer.drain()
            _final_compaction(self.server.address)
            return self._verify(producers, consumers, compactor)
        finally:
            self.server.stop()

    def _verify(
        self, producers: list[Producer], consumers: list[Consumer], compactor: CompactionDriver
    ) -> SoakResult:
        address = self.server.address
        acked = {t: [r for p in producers if p.topic == t for r in p.acked] for t in TOPIC_CONFIGS}
        raw = {t: _read(address, t) for t in TOPIC_CONFIGS}
        published = {r[2] for rs in acked.values() for r in rs if r[2] is not None}
        published |= {v for p in producers for v in p.in_doubt}
        ledger_consumer, segmented_consumer = consumers
        kept = {i for i, _k, _v in raw[SEGMENTED]}
        found = [
            checks.ledger_nothing_lost(acked[LEDGER], raw[LEDGER]),
            checks.segmented_nothing_lost(acked[SEGMENTED], raw[SEGMENTED]),
            checks.increasing(
                "ids increase (reads, producers, delivery runs)",
                [
                    *[[i for i, _k, _v in log] for log in raw.values()],
                    *[[i for i, _k, _v in p.acked] for p in producers],
                    *[run for c in consumers for run in c.runs],
                ],
            ),
            checks.no_acked_redelivered(
                "no duplicate delivery of an acked message",
                [d for c in consumers for d in c.deliveries],
            ),
            checks.every_acked_delivered(
                "every acked publish delivered (LEDGER subscription)",
                [i for i, _k, _v in acked[LEDGER]],
                ledger_consumer.delivered,
            ),
            checks.every_acked_delivered(
                "every acked publish still stored delivered (SEGMENTED)",
                [i for i, _k, _v in acked[SEGMENTED] if i in kept],
                segmented_consumer.delivered,
            ),
            checks.compacted_view(_read(address, LEDGER, compacted=True), raw[LEDGER], published),
            checks.typed_errors(dict(self.errors.counts)),
        ]
        if self.server.unclean_exits:
            bad = Check("SIGTERM ends in exit 0", checked=self.restarts["SIGTERM"] + 1)
            bad.fail(f"exit codes {self.server.unclean_exits}")
            found.append(bad)
        counts = {
            "published, acknowledged (LEDGER)": len(acked[LEDGER]),
            "published, acknowledged (SEGMENTED)": len(acked[SEGMENTED]),
            "publishes in doubt (records)": sum(len(p.in_doubt) for p in producers),
            "deliveries": sum(len(c.deliveries) for c in consumers),
            "redeliveries of unacknowledged messages": sum(
                len(c.deliveries) - len(c.delivered) for c in consumers
            ),
            "acknowledged (confirmed)": sum(c.acked_count() for c in consumers),
            "compactions SUCCESS": compactor.outcomes["SUCCESS"],
            "compactions ERROR": compactor.outcomes["ERROR"],
            "restarts by SIGTERM": self.restarts["SIGTERM"],
            "restarts by SIGKILL": self.restarts["SIGKILL"],
            "LEDGER raw / compacted messages at the end": len(raw[LEDGER]),
            "SEGMENTED messages at the end (cleaned)": len(raw[SEGMENTED]),
        }
        notes = [
            f"compaction run ended in ERROR {n}x: {e}" for e, n in compactor.run_errors.items()
        ]
        return SoakResult(self.s, counts, dict(self.errors.counts), found, notes)


def run_soak(s: SoakSettings, workdir: Path | None = None) -> SoakResult:
    with tempfile.TemporaryDirectory(prefix="compactlog-soak-", dir=workdir) as t:
        return Soak(s, Path(t)).run()


def markdown(result: SoakResult) -> str:
    s = result.settings
    errors = ", ".join(f"{k} {v}" for k, v in sorted(result.errors.items())) or "none"
    lines = [
        f"soak: {s.seconds:g} s, restarts every {s.restart_every:g} s, {s.keys} keys",
        "",
        "| count | value |",
        "|---|---|",
        *[f"| {name} | {value:,} |" for name, value in result.counts.items()],
        f"| error statuses | {errors} |",
        "",
        "| invariant | checked | result |",
        "|---|---|---|",
    ]
    for c in result.checks:
        verdict = "PASS" if c.ok else "FAIL: " + "; ".join(c.problems)
        lines.append(f"| {c.name} | {c.checked:,} | {verdict} |")
    lines += ["", *result.notes, f"result: {'OK' if result.ok else 'FAILED'}"]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="compactlog bench soak",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = SoakSettings()
    p.add_argument("--seconds", type=float, default=d.seconds, help="how long the load runs")
    p.add_argument("--restart-every", type=float, default=d.restart_every)
    p.add_argument("--keys", type=int, default=d.keys)
    p.add_argument("--workdir", type=Path, help="where the data dir goes (default: temp)")
    p.add_argument("--json", type=Path, help="also write the result as JSON here")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.seconds <= 0 or args.restart_every <= 0 or args.keys < 1:
        raise SystemExit("compactlog bench soak: --seconds, --restart-every, --keys must be > 0")
    s = SoakSettings(args.seconds, args.restart_every, args.keys)
    result = run_soak(s, args.workdir)
    print(markdown(result))
    if args.json is not None:
        data: dict[str, Any] = {
            "suite": "compactlog bench soak",
            "command": " ".join(["compactlog bench soak", *argv]),
            "settings": dataclasses.asdict(s),
            "counts": result.counts,
            "errors": result.errors,
            "checks": [dataclasses.asdict(c) for c in result.checks],
            "notes": result.notes,
            "ok": result.ok,
        }
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
