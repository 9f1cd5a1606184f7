"""The actors of ``compactlog bench soak``: the server it restarts, producers, consumers
and the compaction driver, each a thread with its own channel, each recording what the
server acknowledged and every error status it got (``soak_checks`` judges them).

Every call has a deadline; a failed call is retried after a short pause, so the actors
ride through restarts (their channels reconnect within a second). Nothing here asserts:
an actor records, the checks decide.
"""

from __future__ import annotations

import random
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TypeVar

import grpc

from compactlog.bench.procstats import ListeningProcess
from compactlog.bench.soak_checks import Id, Stored
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

CALL_TIMEOUT_S = 10.0
PRODUCER_PAUSE_S = 0.01
RETRY_PAUSE_S = 0.05
CHANNEL_OPTIONS = [  # reconnect fast after a restart (gRPC's default backoff grows to 2 min)
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 500),
]
T = TypeVar("T")


class Errors:
    """Error statuses seen by every actor, by code name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def add(self, err: grpc.RpcError) -> None:
        code = err.code() if isinstance(err, grpc.Call) else None
        with self._lock:
            self.counts[code.name if code is not None else "UNKNOWN"] += 1


class SoakServer:
    """``compactlog serve`` on one data dir and, after the first start, one fixed port."""

    def __init__(self, data_dir: Path, config: str) -> None:
        self.data_dir = data_dir
        self.config = data_dir.parent / "soak.toml"
        self.config.write_text(config)
        self.address = "127.0.0.1:0"
        self.starts = 0
        self.unclean_exits: list[int] = []  # SIGTERM exits that were not 0
        self.proc: ListeningProcess | None = None
        self.start()

    def start(self) -> None:
        args = [sys.executable, "-m", "compactlog", "serve", "--data-dir", str(self.data_dir),
                "--listen", self.address, "--config", str(self.config)]  # fmt: skip
        for attempt in range(20):  # the port may still be held a moment after a kill
            try:
                log = self.data_dir.parent / f"server-{self.starts}.log"
                self.proc = ListeningProcess(args, "compactlog listening on ", log)
                break
            except RuntimeError:
                if attempt == 19:
                    raise
                time.sleep(0.25)
        assert self.proc is not None
        self.address = self.proc.address
        self.starts += 1

    def restart(self, sig: signal.Signals) -> None:
        """Stop with ``sig`` (SIGTERM: a clean shutdown, which must exit 0), start again."""
        assert self.proc is not None
        if sig == signal.SIGKILL:
            self.proc.proc.kill()
            self.proc.proc.wait()
        else:
            code = self.proc.stop()
            if code != 0:
                self.unclean_exits.append(code)
        self.start()

    def stop(self) -> None:
        if self.proc is not None:
            code = self.proc.stop()
            if code != 0:
                self.unclean_exits.append(code)
            self.proc = None


class Actor(threading.Thread):
    """A thread with its own channel that retries through failures until stopped."""

    def __init__(self, name: str, address: str, errors: Errors, stop: threading.Event) -> None:
        super().__init__(name=name, daemon=True)
        self.channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
        self.log = pb_grpc.LogStub(self.channel)
        self.admin = pb_grpc.TopicAdminStub(self.channel)
        self.errors = errors
        self.stop = stop

    def attempt(self, call: Callable[[], T]) -> T | None:
        """``call()``, or None after recording its error status and pausing."""
        try:
            return call()
        except grpc.RpcError as err:
            self.errors.add(err)
            time.sleep(RETRY_PAUSE_S)
            return None

    def close(self) -> None:
        self.channel.close()


class Producer(Actor):
    """Keyed records to one topic by unary Publish or by PublishStream (``stream``);
    values are unique, so every record read back is traceable to its publish."""

    def __init__(
        self, topic: str, stream: bool, tombstones: float, keys: int, *args: object
    ) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.topic, self.stream = topic, stream
        self.tombstones, self.keys = tombstones, keys
        self.acked: list[Stored] = []
        self.in_doubt: list[bytes] = []  # values of publishes that failed: stored or not
        self.seq = 0
        self.rng = random.Random(self.name)

    def _request(self) -> tuple[pb.PublishRequest, list[tuple[bytes, bytes | None]]]:
        pairs: list[tuple[bytes, bytes | None]] = []
        for _ in range(self.rng.randint(1, 20)):
            self.seq += 1
            key = b"k%03d" % self.rng.randrange(self.keys)
            value = None if self.rng.random() < self.tombstones else b"%s-%d" % (
                self.name.encode(), self.seq)  # fmt: skip
            pairs.append((key, value))
        records = [pb.Record(key=k) if v is None else pb.Record(key=k, value=v) for k, v in pairs]
        return pb.PublishRequest(topic=self.topic, records=records), pairs

    def _acked(self, reply: pb.PublishResponse, pairs: list[tuple[bytes, bytes | None]]) -> None:
        for mid, (key, value) in zip(reply.ids, pairs, strict=True):
            self.acked.append(((mid.ledger_id, mid.entry_id), key, value))

    def _doubt(self, pairs: list[tuple[bytes, bytes | None]]) -> None:
        self.in_doubt += [v for _k, v in pairs if v is not None]

    def run(self) -> None:
        while not self.stop.is_set():
            self.stop.wait(PRODUCER_PAUSE_S)  # a steady load, not a flood: consumers keep up
            if self.stream:
                self._stream_once()
            else:
                req, pairs = self._request()
                reply = self.attempt(partial(self.log.Publish, req, timeout=CALL_TIMEOUT_S))
                if reply is None:
                    self._doubt(pairs)
                else:
                    self._acked(reply, pairs)
        self.close()

    def _stream_once(self, requests: int = 20) -> None:
        sent: list[list[tuple[bytes, bytes | None]]] = []

        def gen() -> Iterator[pb.PublishRequest]:
            for _ in range(requests):
                if self.stop.is_set():
                    return
                req, pairs = self._request()
                sent.append(pairs)
                yield req

        answered = 0
        try:
            for reply in self.log.PublishStream(gen(), timeout=CALL_TIMEOUT_S * 3):
                self._acked(reply, sent[answered])
                answered += 1
        except grpc.RpcError as err:
            self.errors.add(err)
            time.sleep(RETRY_PAUSE_S)
        for pairs in sent[answered:]:
            self._doubt(pairs)


class Consumer(Actor):
    """One consumer of a subscription: consumes, acknowledges (individually or
    cumulatively), and after any failure asks for redelivery, as a reconnecting
    consumer does. ``draining`` consumes what is left and stops."""

    def __init__(self, topic: str, subscription: str, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.topic, self.subscription = topic, subscription
        self.deliveries: list[tuple[Id, bool]] = []  # id, acked (confirmed) before
        self.delivered: set[Id] = set()
        # Confirmed acks: every id up to the highest cumulative one, and the individual
        # ones past it (a set of the cumulative ack's ids grew with the run and made each
        # cumulative ack cost a pass over every delivery: a long soak's drain ran out).
        self.acked_upto: Id | None = None
        self.acked_each: set[Id] = set()
        self.runs: list[list[Id]] = [[]]  # delivery runs between rewinds: ids increase
        self.redeliver = True
        self.rng = random.Random(self.name)

    def consume_once(self, wait_ms: int = 300, max_messages: int = 100) -> int:
        req = pb.ConsumeRequest(
            topic=self.topic,
            subscription=self.subscription,
            max_messages=max_messages,
            wait_ms=wait_ms,
            redeliver_unacknowledged=self.redeliver,
        )
        timeout = CALL_TIMEOUT_S + wait_ms / 1000
        reply = self.attempt(lambda: self.log.Consume(req, timeout=timeout))
        if reply is None:
            self.redeliver = True
            return -1
        if self.redeliver:
            self.runs.append([])
        self.redeliver = False
        ids = [(m.id.ledger_id, m.id.entry_id) for m in reply.messages]
        for mid in ids:
            self.deliveries.append((mid, self.is_acked(mid)))
            self.delivered.add(mid)
        self.runs[-1] += ids
        if ids:
            self._acknowledge(ids, only_cumulative=max_messages > 100)
        return len(ids)

    def _acknowledge(self, ids: list[Id], only_cumulative: bool) -> None:
        if only_cumulative or self.rng.random() < 0.5:
            targets, cumulative = [ids[-1]], True
        else:
            targets, cumulative = ids, False
        for mid in targets:
            req = pb.AcknowledgeRequest(
                topic=self.topic, subscription=self.subscription, cumulative=cumulative
            )
            req.id.ledger_id, req.id.entry_id = mid
            if self.attempt(partial(self.log.Acknowledge, req, timeout=CALL_TIMEOUT_S)) is None:
                self.redeliver = True  # the ack may or may not have been taken
                return
            if cumulative:
                self.acked_upto = max(mid, self.acked_upto or mid)
            else:
                self.acked_each.add(mid)

    def is_acked(self, mid: Id) -> bool:
        """Whether the server confirmed an ack that covers ``mid``: a cumulative ack
        covers every id up to its own, delivered here or not (Pulsar's)."""
        upto = self.acked_upto
        return (upto is not None and mid <= upto) or mid in self.acked_each

    def acked_count(self) -> int:
        """The delivered messages whose acks the server confirmed."""
        return sum(1 for mid in self.delivered if self.is_acked(mid))

    def run(self) -> None:
        while not self.stop.is_set():
            self.consume_once()

    def drain(self, deadline_s: float = 60.0) -> None:
        """Consume until two empty answers in a row (or the deadline)."""
        self.redeliver = True
        empty, end = 0, time.monotonic() + deadline_s
        while empty < 2 and time.monotonic() < end:
            got = self.consume_once(wait_ms=500, max_messages=1000)
            empty = empty + 1 if got == 0 else 0
        self.close()


class CompactionDriver(Actor):
    """Compacts the topics in turn (``Compact`` with wait), counting outcomes."""

    def __init__(self, topics: list[str], *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.topics = topics
        self.outcomes: Counter[str] = Counter()
        self.run_errors: Counter[str] = Counter()  # last_error of runs that ended in ERROR

    def run(self) -> None:
        turn = 0
        while not self.stop.is_set():
            topic = self.topics[turn % len(self.topics)]
            turn += 1
            req = pb.CompactRequest(topic=topic, wait=True)
            status = self.attempt(partial(self.admin.Compact, req, timeout=CALL_TIMEOUT_S * 6))
            if status is not None:
                self.outcomes[pb.CompactionStatus.State.Name(status.state)] += 1
                if status.state == pb.CompactionStatus.ERROR:
                    self.run_errors[status.last_error[:80]] += 1
            self.stop.wait(0.3)
        self.close()
