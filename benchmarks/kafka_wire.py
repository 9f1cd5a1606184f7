"""``compactlog bench kafka``: Kafka clients on the Kafka listener beside gRPC, same run.

A Kafka client's rate only means something next to what gRPC does on the same server at
the same moment, so each run starts one fresh ``compactlog serve --kafka-listen`` and
measures, on SEGMENTED topics, the same 100 B records (the dataplane workload: one key per
ten records) both ways:

1. librdkafka's producer (confluent-kafka; ``acks=-1``, ``linger.ms=5``, one record a
   ``produce()`` call, as its users write it) beside gRPC PublishStream of 1000 records a
   request (``rawlog``, the dataplane's client). Goal: >= 0.5 x gRPC.
2. librdkafka's consumer (``assign()`` from the beginning, no group subscription, as
   gRPC's Read has none; ``consume()`` in batches) of the whole topic beside one gRPC Read
   of it, each parsing every record. Goal: >= 0.5 x gRPC. Read twice: *connected*, the
   clock started once the consumer has its connection and the topic's metadata
   (``list_topics``), as gRPC's Read runs on a channel PublishStream already opened: the
   goal's figure; and *from start*, the clock started at ``Consumer()``, so it also holds
   librdkafka's start-up (connections, ApiVersions, Metadata, FindCoordinator, ListOffsets;
   an ``assign()`` before the metadata is in waits out librdkafka's 500 ms offset-query
   backoff).
3. kcat's producer and consumer (``kafka_kcat``): the same librdkafka driven from C, so
   their rows measure the listener rather than the Python loop; left out without kcat.
4. kcat's floor (``kafka_replay``): the same kcat read against a replay of the
   listener's answers to it, a broker costing nothing: the most any broker could give
   kcat on this box, printed beside kcat's rate against the listener and gRPC Read's.

Figures are medians of ``--runs`` runs; each run's ratio is kept in the JSON too, with
the load average at the start and the end (other work on the box moves every figure).

    compactlog bench kafka                  # 200,000 records, 3 runs: about a minute
    compactlog bench kafka --quick          # seconds
    compactlog bench kafka --records 500000 --runs 5 --json kafka.json
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from compactlog.bench import kafka_kcat, kafka_replay
from compactlog.bench.procstats import ListeningProcess, cpu_seconds
from compactlog.bench.rawlog import RawLog, acked, publish_request, read_request
from compactlog.bench.summary import (
    Target,
    aggregate,
    envelope,
    medians,
    print_report,
    targets_markdown,
)
from compactlog.bench.workloads import Workload, batches
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

Records = list[tuple[bytes | None, bytes | None]]
Sample = dict[str, float]
T = TypeVar("T")
GRPC_TOPIC, KAFKA_TOPIC, KCAT_TOPIC = "bench-grpc", "bench-kafka", "bench-kcat"
PRODUCER = {"acks": -1, "linger.ms": 5}  # the producer
CONSUMER = {"group.id": "bench", "enable.auto.commit": False}  # otherwise librdkafka's defaults


@dataclasses.dataclass(frozen=True)
class Settings:
    records: int = 200_000
    runs: int = 3
    seed: int = 42
    workdir: Path | None = None

    @property
    def workload(self) -> Workload:
        return Workload("dataplane-100B", self.records, max(1, self.records // 10))


QUICK = {"records": 5000, "runs": 1}


class KafkaServer(ListeningProcess):
    """``compactlog serve --kafka-listen 127.0.0.1:0`` (default durability); ``address``
    is gRPC's, ``kafka_address`` the listener's."""

    def __init__(self, data_dir: Path) -> None:
        args = [sys.executable, "-m", "compactlog", "serve", "--data-dir", str(data_dir),
                "--listen", "127.0.0.1:0", "--kafka-listen", "127.0.0.1:0"]  # fmt: skip
        log_path = data_dir.parent / f"{data_dir.name}.log"
        super().__init__(args, "compactlog kafka listening on ", log_path)
        self.kafka_address = self.address
        self.address = self._wait_for_listening("compactlog listening on ")


class BenchError(RuntimeError):
    """A run that cannot give honest figures (a count is wrong, a delivery failed)."""


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise BenchError(what)


def step(what: str) -> None:
    sys.stderr.write(f"kafka: {what}\n")
    sys.stderr.flush()


def kafka_produce(address: str, records: Records) -> float:
    """Seconds for librdkafka to produce every record and have every delivery report."""
    from confluent_kafka import Producer

    failed: list[Any] = []
    producer = Producer({"bootstrap.servers": address, **PRODUCER})

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    started = time.perf_counter()
    for key, value in records:
        while True:
            try:
                producer.produce(KAFKA_TOPIC, key=key, value=value, on_delivery=report)
                break
            except BufferError:  # the local queue is full: serve delivery reports
                producer.poll(0.001)
    _check(producer.flush(600) == 0, "librdkafka: records left undelivered")
    seconds = time.perf_counter() - started
    _check(not failed, f"librdkafka: {len(failed)} delivery errors, first {failed[:1]}")
    return seconds


def kafka_consume(address: str, topic: str, count: int, connected: bool) -> Sample:
    """Seconds for librdkafka's consumer to read ``count`` records of ``topic``: from
    ``Consumer()``, or (``connected``) from once it has its connection and metadata; and
    the CPU seconds meanwhile of this thread (the Python loop: ``consume()`` making each
    message, ``key()`` and ``value()``) and of the whole client (librdkafka's threads
    fetch and parse)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    started, loop, cpu = time.perf_counter(), time.thread_time(), time.process_time()
    consumer = Consumer({"bootstrap.servers": address, **CONSUMER})
    got = 0
    try:
        if connected:
            consumer.list_topics(topic, timeout=60)
            started, loop, cpu = time.perf_counter(), time.thread_time(), time.process_time()
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        while got < count:
            _check(time.perf_counter() - started < 600, f"librdkafka read {got} of {count}")
            # no more than are left: consume() waits out its timeout for a batch not full
            for message in consumer.consume(num_messages=min(10_000, count - got), timeout=1.0):
                _check(message.error() is None, f"librdkafka: {message.error()}")
                message.key(), message.value()  # what a reader takes from each record
                got += 1
        return {
            "s": time.perf_counter() - started,
            "loop_cpu_s": time.thread_time() - loop,
            "client_cpu_s": time.process_time() - cpu,
        }
    finally:
        consumer.close()


def costed(pid: int, fn: Callable[[], T]) -> tuple[T, float, float]:
    """``fn()``, and the CPU seconds spent meanwhile by this process (every thread) and
    by the server ``pid``."""
    client, server = time.process_time(), cpu_seconds(pid)
    out = fn()
    return out, time.process_time() - client, cpu_seconds(pid) - server


def write_phase(
    s: Settings, log: RawLog, pid: int, address: str, chunks: list[Records], kcat_input: Path | None
) -> Sample:
    requests = [publish_request(GRPC_TOPIC, chunk) for chunk in chunks]
    records = [r for chunk in chunks for r in chunk]
    step("gRPC PublishStream")
    (seconds, replies), client, server = costed(pid, lambda: log.publish_stream(requests))
    _check(acked(replies) == s.records, "gRPC: not every record was acknowledged")
    m = {"grpc.publish_rps": s.records / seconds}
    m["grpc.publish_client_cpu_s"], m["grpc.publish_server_cpu_s"] = client, server
    step("librdkafka produce")
    seconds, client, server = costed(pid, lambda: kafka_produce(address, records))
    m["kafka.produce_rps"] = s.records / seconds
    m["kafka.produce_client_cpu_s"], m["kafka.produce_server_cpu_s"] = client, server
    if kcat_input is not None:
        step("kcat produce")
        seconds, _client, server = costed(
            pid, lambda: kafka_kcat.produce(address, KCAT_TOPIC, kcat_input)
        )
        m["kcat.produce_rps"], m["kcat.produce_server_cpu_s"] = s.records / seconds, server
        stored = log.read(read_request(KCAT_TOPIC, False), _drop).messages
        _check(stored == s.records, f"kcat: {stored} of {s.records} records stored")
    return m


def read_phase(s: Settings, log: RawLog, pid: int, address: str) -> Sample:
    step("gRPC Read")
    loop = time.thread_time()
    read, _client, server = costed(pid, lambda: log.read(read_request(GRPC_TOPIC, False), _drop))
    _check(read.messages == s.records, f"gRPC Read gave {read.messages} records")
    m = {"grpc.read_mps": s.records / read.seconds, "grpc.read_server_cpu_s": server}
    m["grpc.read_loop_cpu_s"] = time.thread_time() - loop
    step("librdkafka consume, from start")
    cold = kafka_consume(address, GRPC_TOPIC, s.records, False)
    m["kafka.consume_from_start_mps"] = s.records / cold["s"]
    step("librdkafka consume, connected")
    warm, _client, server = costed(pid, lambda: kafka_consume(address, GRPC_TOPIC, s.records, True))
    m["kafka.consume_mps"], m["kafka.consume_server_cpu_s"] = s.records / warm["s"], server
    m.update({f"kafka.consume_{key}": value for key, value in warm.items()})
    if kafka_kcat.kcat() is not None:
        step("kcat consume")
        kcat, _, server = costed(pid, lambda: kafka_kcat.consume(address, GRPC_TOPIC, s.records))
        m["kcat.consume_mps"], m["kcat.consume_server_cpu_s"] = s.records / kcat.seconds, server
        m["kcat.consume_s"], m["kcat.consume_client_cpu_s"] = kcat.seconds, kcat.cpu_s
        m["kcat.consume_last_offset"], m["grpc.read_s"] = kcat.last_offset, read.seconds
        step("kcat consume, the listener's answers recorded and replayed")
        m.update(kafka_replay.floor_read(address, GRPC_TOPIC, s.records).sample(s.records))
    return m


def _drop(_raw: bytes) -> None:
    """gRPC Read's sink: each response is parsed and counted, then dropped."""


def one_run(
    s: Settings, run: int, chunks: list[Records], tmp: Path, kcat_input: Path | None
) -> Sample:
    server = KafkaServer(tmp / f"run{run}-data")
    step(f"run {run}")
    try:
        with RawLog(server.address) as log:
            admin = pb_grpc.TopicAdminStub(log.channel)
            for topic in (GRPC_TOPIC, KAFKA_TOPIC, KCAT_TOPIC):
                admin.CreateTopic(pb.CreateTopicRequest(name=topic, kind=pb.SEGMENTED))
            m = write_phase(s, log, server.pid, server.kafka_address, chunks, kcat_input)
            m.update(read_phase(s, log, server.pid, server.kafka_address))
    except Exception as exc:
        raise BenchError(f"run {run}: {exc}; server log: {server.tail()}") from exc
    finally:
        server.stop()
    m["ratio.produce"] = m["kafka.produce_rps"] / m["grpc.publish_rps"]
    m["ratio.consume"] = m["kafka.consume_mps"] / m["grpc.read_mps"]
    m["ratio.consume_from_start"] = m["kafka.consume_from_start_mps"] / m["grpc.read_mps"]
    if "kcat.produce_rps" in m:
        m["ratio.kcat_produce"] = m["kcat.produce_rps"] / m["grpc.publish_rps"]
        m["ratio.kcat_consume"] = m["kcat.consume_mps"] / m["grpc.read_mps"]
        m["ratio.kcat_floor_consume"] = m["kcat_floor.consume_mps"] / m["grpc.read_mps"]
    return m


def rows(med: Sample) -> list[Target]:
    specs = [
        ("librdkafka Producer, acks=-1, linger 5 ms, 100 B", "kafka.produce_rps",
         "grpc.publish_rps", "records/s", "gRPC PublishStream, 1000 x 100 B per request"),
        ("librdkafka Consumer, whole topic, connected", "kafka.consume_mps", "grpc.read_mps",
         "messages/s", "gRPC Read, whole topic"),
        ("librdkafka Consumer, whole topic, from Consumer()", "kafka.consume_from_start_mps",
         "grpc.read_mps", "messages/s", "gRPC Read, whole topic"),
        ("kcat -P (librdkafka from C), acks=all, linger 5 ms, 100 B", "kcat.produce_rps",
         "grpc.publish_rps", "records/s", "gRPC PublishStream, 1000 x 100 B per request"),
        ("kcat -C (librdkafka from C), whole topic, from its start", "kcat.consume_mps",
         "grpc.read_mps", "messages/s", "gRPC Read, whole topic"),
        ("kcat -C, the listener's answers replayed (floor: a broker costing nothing)",
         "kcat_floor.consume_mps", "grpc.read_mps", "messages/s", "gRPC Read, whole topic"),
    ]  # fmt: skip
    out = []
    for name, key, floor, unit, floor_name in specs:
        if key not in med:  # kcat not installed
            continue
        ratio = med[key] / med[floor]
        out.append(Target(name, "segmented", med[key], unit, ">= 0.5 x gRPC", ratio >= 0.5,
                          med[floor], floor_name, ratio, "Kafka / gRPC"))  # fmt: skip
    return out


def run(s: Settings) -> dict[str, Any]:
    started, t0, load = dt.datetime.now(), time.perf_counter(), os.getloadavg()[0]
    chunks = batches(s.workload, s.seed)  # built up front: timing measures the servers
    with tempfile.TemporaryDirectory(prefix="compactlog-kafka-", dir=s.workdir) as t:
        records = [r for chunk in chunks for r in chunk]
        kcat_input = None
        if kafka_kcat.kcat() is not None:
            kcat_input = kafka_kcat.write_input(records, Path(t) / "kcat-input")
        samples = [one_run(s, i + 1, chunks, Path(t), kcat_input) for i in range(s.runs)]
    aggs = {key: aggregate([m[key] for m in samples]) for key in samples[0]}
    return envelope(
        "compactlog bench kafka",
        s,
        started,
        t0,
        results=aggs,
        rows=[dataclasses.asdict(r) for r in rows(medians(aggs))],
        load_average=[load, os.getloadavg()[0]],
        clients={"producer": PRODUCER, "consumer": CONSUMER, "kcat": kafka_kcat.kcat()},
    )


def markdown(report: dict[str, Any]) -> str:
    s, m, r = report["settings"], report["machine"], report["results"]
    load, clients = report["load_average"], report["clients"]
    head = (
        f"{s['records']:,} records x 100 B, SEGMENTED topics, one server, median of "
        f"{s['runs']} run(s). {m['cpu_model']}, {m['cores']} cores, load average "
        f"{load[0]:.1f} at the start, {load[1]:.1f} at the end. librdkafka settings beside "
        f"its defaults: producer {clients['producer']}, consumer {clients['consumer']}."
    )
    kinds = (
        ("produce", "ratio.produce"),
        ("consume connected", "ratio.consume"),
        ("consume from Consumer()", "ratio.consume_from_start"),
        ("kcat produce", "ratio.kcat_produce"),
        ("kcat consume", "ratio.kcat_consume"),
        ("kcat consume, replay floor", "ratio.kcat_floor_consume"),
    )
    spread = "; ".join(
        f"{what} {r[key]['median']:.2f} ({r[key]['min']:.2f}-{r[key]['max']:.2f})"
        for what, key in kinds
        if key in r
    )
    table = targets_markdown([Target(**row) for row in report["rows"]], first_header="measure")
    med = {key: r[key]["median"] for key in r}
    where = (
        f"CPU seconds (medians): librdkafka's producer {med['kafka.produce_client_cpu_s']:.2f} "
        f"in the client, {med['kafka.produce_server_cpu_s']:.2f} in the server; gRPC "
        f"PublishStream {med['grpc.publish_client_cpu_s']:.2f} and "
        f"{med['grpc.publish_server_cpu_s']:.2f}. The connected consume "
        f"({med['kafka.consume_s']:.2f} s of wall time): the consumer's Python loop "
        f"{med['kafka.consume_loop_cpu_s']:.2f} of the client's "
        f"{med['kafka.consume_client_cpu_s']:.2f}, the server "
        f"{med['kafka.consume_server_cpu_s']:.2f}; gRPC's Read: its reading loop "
        f"{med['grpc.read_loop_cpu_s']:.2f}, the server {med['grpc.read_server_cpu_s']:.2f}."
    )
    if "kcat.consume_s" in r:
        runs = [{key: r[key]["samples"][i] for key in r} for i in range(s["runs"])]
        where += "\n\n" + "\n".join(
            f"- run {i}: {kafka_kcat.cpu_line(run, m['cores'])}" for i, run in enumerate(runs, 1)
        )
    if clients.get("kcat") is None:
        head += " kcat is not installed: its rows are left out."
    else:
        head += f" kcat: {' '.join(kafka_kcat.PRODUCER)} for -P, its defaults for -C"
        head += " (-e, and -c COUNT to end at the last record)."
    return (
        f"{head}\n\n{table}\n\nPer-run Kafka / gRPC ratios, median (min-max): {spread}.\n\n{where}"
    )


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="compactlog bench kafka",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="5,000 records, one run: seconds")
    p.add_argument("--records", type=int, help="records per run (default 200,000)")
    p.add_argument("--runs", type=int, help="runs to take the median over (default 3)")
    p.add_argument("--seed", type=int, help="workload seed (default 42)")
    p.add_argument("--workdir", type=Path, help="where data dirs go (default: system temp)")
    p.add_argument("--json", type=Path, help="also write the report as JSON here")
    args = p.parse_args(argv)
    given = {k: v for k, v in vars(args).items() if k not in ("quick", "json") and v is not None}
    s = Settings(**{**(QUICK if args.quick else {}), **given})
    if s.records < 1 or s.runs < 1:
        raise SystemExit("compactlog bench kafka: --records and --runs must be positive")
    if s.workdir is not None:
        s.workdir.mkdir(parents=True, exist_ok=True)
    report = run(s)
    print_report("compactlog bench kafka", argv, report, markdown, args.json)
    return 0


if __name__ == "__main__":  # also runnable without the rest of the suite
    raise SystemExit(main(sys.argv[1:]))
