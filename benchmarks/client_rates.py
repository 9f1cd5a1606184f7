"""``compactlog bench client``: the Python client beside raw gRPC, same server, same run.

A user meets the data plane through ``compactlog.client``; what the client costs on top
of the wire is what this suite measures. Each run starts a fresh ``compactlog serve``
(fsync durability), loads a LEDGER topic of ``--records`` 100 B messages (100k keys at
most) with the raw-bytes PublishStream of ``rawlog`` (1000 records a request, timed: the
publish floor), then times, on the same topic and server:

1. raw gRPC Read, each response parsed (``ReadResponse.FromString``) and its messages
   counted: the read floor;
2. ``client.create_reader(topic, MessageId.earliest).read_next()`` in a loop, and the
   same loop reading each message's key and value (``partition_key()``, ``data()``);
3. ``client.subscribe(...).receive()`` in a loop, a cumulative ack every 1000; and the
   pulsar-typical loop, ``consumer.acknowledge(msg)`` of each message, its rate (the
   loop) and the time until every ack is stored (the loop and ``close()``; the individual
   acks go as AcknowledgeList requests, one cursor write a group);
4. ``consumer.batch_receive()`` in a loop, a cumulative ack of each batch's last;
5. ``producer.send_async(value, callback, partition_key=key)`` for every record, then
   ``flush()``, to a fresh topic: beside the publish floor, and this process's CPU per
   message beside the raw PublishStream's (the client's cost, which a loaded box's rates
   hide);
6. the same with the asyncio client's producer (``AsyncClient``): its ``send_async``
   (callbacks on the event loop), and its ``send`` coroutine, one per record, gathered
   (pulsar-client's asyncio shape: a task and a future per message), each to a fresh
   topic, with its CPU per message. The gathered sends are shown beside asyncio's own
   cost of that shape, no I/O: as many coroutines gathered, each awaiting a future of
   its own, resolved 1000 at a time (about 14 us a message on the project machine, a
   hundredth of the PublishStream floor's rate: no client reaches that floor so).

The consumers receive over ``Log.ConsumeStream`` (pushed within flow permits, as Pulsar's
broker delivers); a raw ConsumeStream row shows the same stream without the client: bare
stubs, 1000 permits, each response parsed and its permits given back. The two consumer
loops and the raw stream also report this process's CPU per message (every thread of the
client: gRPC's, the stream's reader, the ack sender), the client's cost apart from the
server's on a shared box.

The consumers are also shown beside a second floor: raw gRPC Consume of 1000 messages a
call, each response parsed, and a cumulative Acknowledge of its last message, one call
after the other (what a consumer's calls cost on the server, without the client). Two
figures say where that floor's time goes: the same Consume calls without acks, and the
median round trip of a unary call that carries nothing (``GetLastMessageId``): the fixed
cost of one gRPC call, which a Consume pays per response and a Read stream once.

The client loops but one hand out every message (a ``Message`` each) without reading its
fields, as the floor counts messages without reading them; the one that reads key and
value shows what a user's loop adds. Figures are medians of ``--runs``
runs, each ratio a median of the runs' own ratios. Goals (issue 29): read_next and
receive >= 0.25, batch_receive >= 0.5 of the raw read; send_async + flush >= 0.5 of the
raw PublishStream, the asyncio producer's alike.

    compactlog bench client                  # 200,000 messages, 3 runs
    compactlog bench client --quick          # seconds
    compactlog bench client --records 500000 --runs 5 --json client.json
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import queue
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from compactlog.bench import client_loops as loops
from compactlog.bench.client_loops import AIO_GATHERED, AIO_SENT, SENT, TOPIC, VALUE
from compactlog.bench.procstats import ServerProcess
from compactlog.bench.rawlog import CHANNEL_OPTIONS, RawLog, publish_request, read_request
from compactlog.bench.summary import (
    Target,
    aggregate,
    envelope,
    print_report,
    ratio_spread,
    targets_markdown,
)
from compactlog.client import Client
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

Sample = dict[str, float]
READ_FLOOR = "raw gRPC Read, responses parsed, same server"
PUBLISH_FLOOR = "raw gRPC PublishStream, 1000 x 100 B a request"
CONSUME_FLOOR = "raw gRPC Consume 1000 + cumulative Acknowledge, same server"
GATHER_FLOOR = "asyncio.gather of as many coroutines, a future each, 1000 resolved a reply"


@dataclasses.dataclass(frozen=True)
class Settings:
    records: int = 200_000
    runs: int = 3
    workdir: Path | None = None


QUICK = {"records": 5000, "runs": 1}


def _keys(records: int) -> list[bytes]:
    return [b"k%d" % (i % 100_000) for i in range(records)]


def _rate(count: int, work: Callable[[], int]) -> float:
    started = time.perf_counter()
    got = work()
    seconds = time.perf_counter() - started
    if got != count:
        raise RuntimeError(f"expected {count} messages, got {got}")
    return count / seconds


def _cpu_us(since: float, count: int) -> float:
    """This process's CPU (every thread: the client's side alone) per message since ``since``."""
    return (time.process_time() - since) / count * 1e6


def _raw_consume(address: str, count: int, acks: bool = True) -> int:
    """The consume floor: Consume and a cumulative Acknowledge per response, bare stubs
    (``acks`` False: the Consume calls alone, on a subscription of their own)."""
    name = "bench-raw" if acks else "bench-raw-noack"
    with grpc.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        log = pb_grpc.LogStub(channel)
        consume = pb.ConsumeRequest(
            topic=TOPIC, subscription=name, consumer_name=name,
            initial_position=pb.EARLIEST, max_messages=1000,
        )  # fmt: skip
        ack = pb.AcknowledgeRequest(topic=TOPIC, subscription=name, cumulative=True)
        got = 0
        while got < count:
            resp = log.Consume(consume, timeout=600)
            got += len(resp.messages)
            if acks and resp.messages:
                ack.id.CopyFrom(resp.messages[-1].id)
                log.Acknowledge(ack, timeout=600)
        return got


def _raw_consume_stream(address: str, count: int) -> int:
    """ConsumeStream with bare stubs: 1000 permits, each response's given back at once."""
    name = "bench-raw-stream"
    with grpc.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        start = pb.ConsumeRequest(
            topic=TOPIC, subscription=name, consumer_name=name,
            initial_position=pb.EARLIEST, max_messages=500,
        )  # fmt: skip
        flows: queue.SimpleQueue[pb.ConsumeFlow | None] = queue.SimpleQueue()
        flows.put(pb.ConsumeFlow(topic=TOPIC, start=start, permits=1000))
        stream = pb_grpc.LogStub(channel).ConsumeStream(iter(flows.get, None), timeout=600)
        got = 0
        for resp in stream:
            got += len(resp.messages)
            if got >= count:
                break
            flows.put(pb.ConsumeFlow(topic=TOPIC, permits=len(resp.messages)))
        flows.put(None)
        stream.cancel()
        return got


def _unary_ms(address: str, calls: int = 200) -> float:
    """Median milliseconds of a ``GetLastMessageId`` round trip: one unary call's cost."""
    with grpc.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        last_id = pb_grpc.LogStub(channel).GetLastMessageId
        req = pb.GetLastMessageIdRequest(topic=TOPIC)
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            last_id(req, timeout=600)
            times.append(time.perf_counter() - started)
        return statistics.median(times) * 1000


def _timed(m: Sample, name: str, count: int, work: Callable[[], int]) -> None:
    """``name``'s rate and this process's CPU per message."""
    cpu = time.process_time()
    m[f"{name}_mps"] = _rate(count, work)
    m[f"{name}_cpu_us"] = _cpu_us(cpu, count)


def _ack_each(m: Sample, client: Client, count: int) -> None:
    """pulsar-client's usual loop, an ack of each message: its rate (the loop alone), this
    process's CPU per message, and the seconds until every ack is stored (loop + close)."""
    times: dict[str, float] = {}
    cpu = time.process_time()
    got = loops.receive_ack_each(client, count, times)
    if got != count:
        raise RuntimeError(f"expected {count} messages, got {got}")
    m["receive_each_mps"] = count / times["loop"]
    m["receive_each_cpu_us"] = _cpu_us(cpu, count)
    m["receive_each_close_s"] = times["close"]
    m["receive_each_stored_s"] = times["loop"] + times["close"]


def one_run(s: Settings, run: int, requests: list[bytes], keys: list[bytes]) -> Sample:
    """A fresh server: the floors and the client's loops on the same topic."""
    with tempfile.TemporaryDirectory(prefix="compactlog-client-", dir=s.workdir) as tmp:
        server = ServerProcess(Path(tmp) / "data")
        try:
            with RawLog(server.address) as log, Client(server.address, timeout=600) as client:
                client.create_topic(TOPIC)
                for name in (SENT, AIO_SENT, AIO_GATHERED):
                    client.create_topic(name)
                print(f"run {run}: publish floor, reads, consumers, sends", file=sys.stderr)
                cpu = time.process_time()
                seconds, _ = log.publish_stream(requests)
                m: Sample = {"raw_publish_rps": s.records / seconds}
                m["raw_publish_cpu_us"] = _cpu_us(cpu, s.records)
                req = read_request(TOPIC, compacted=False)
                m["raw_read_mps"] = _rate(s.records, lambda: log.read(req, len).messages)
                m["raw_consume_mps"] = _rate(
                    s.records, lambda: _raw_consume(server.address, s.records)
                )
                m["raw_consume_noack_mps"] = _rate(
                    s.records, lambda: _raw_consume(server.address, s.records, acks=False)
                )
                _timed(
                    m, "raw_consume_stream", s.records,
                    lambda: _raw_consume_stream(server.address, s.records),
                )  # fmt: skip
                m["unary_ms"] = _unary_ms(server.address)
                m["read_next_mps"] = _rate(s.records, lambda: loops.read_next(client, s.records))
                _timed(m, "read_fields", s.records, lambda: loops.read_fields(client, s.records))
                _timed(m, "receive", s.records, lambda: loops.receive(client, s.records))
                _ack_each(m, client, s.records)
                _timed(
                    m, "batch_receive", s.records, lambda: loops.batch_receive(client, s.records)
                )
                _timed(m, "send_async", s.records, lambda: loops.send_async(client, keys))
                address = server.address
                _timed(m, "aio_send_async", s.records, lambda: loops.aio_send_async(address, keys))
                _timed(m, "aio_send", s.records, lambda: loops.aio_send(address, keys))
                m["aio_gather_mps"] = _rate(s.records, lambda: loops.aio_gather_floor(s.records))
        finally:
            server.stop()
    for name in ("read_next", "read_fields", "receive", "receive_each", "batch_receive",
                 "raw_consume_stream"):  # fmt: skip
        m[f"{name}.ratio"] = m[f"{name}_mps"] / m["raw_read_mps"]
    for name in ("receive", "batch_receive"):
        m[f"{name}.consume_ratio"] = m[f"{name}_mps"] / m["raw_consume_mps"]
    for name in ("send_async", "aio_send_async", "aio_send"):
        m[f"{name}.ratio"] = m[f"{name}_mps"] / m["raw_publish_rps"]
    m["aio_send.gather_ratio"] = m["aio_send_mps"] / m["aio_gather_mps"]
    return m


ROWS = (
    ("create_reader + read_next loop", "read_next", "raw_read_mps", READ_FLOOR, 0.25),
    ("read_next, reading key and value", "read_fields", "raw_read_mps", READ_FLOOR, 0.25),
    ("subscribe + receive, cumulative ack / 1000", "receive", "raw_read_mps", READ_FLOOR, 0.25),
    ("subscribe + receive, acknowledge each", "receive_each", "raw_read_mps", READ_FLOOR, 0.25),
    ("subscribe + batch_receive, ack each batch", "batch_receive", "raw_read_mps", READ_FLOOR, 0.5),
    ("send_async + flush", "send_async", "raw_publish_rps", PUBLISH_FLOOR, 0.5),
    ("asyncio send_async + flush", "aio_send_async", "raw_publish_rps", PUBLISH_FLOOR, 0.5),
    ("raw gRPC ConsumeStream, 1000 permits", "raw_consume_stream", "raw_read_mps", READ_FLOOR,
     0.5),
)  # fmt: skip


def rows(results: dict[str, dict[str, Any]]) -> list[Target]:
    out = []
    specs = [(*row, "ratio") for row in ROWS] + [
        ("subscribe + receive (beside raw Consume)", "receive", "raw_consume_mps",
         CONSUME_FLOOR, 0.25, "consume_ratio"),
        ("subscribe + batch_receive (beside raw Consume)", "batch_receive", "raw_consume_mps",
         CONSUME_FLOOR, 0.5, "consume_ratio"),
        ("asyncio send, gathered (beside asyncio's own gather)", "aio_send", "aio_gather_mps",
         GATHER_FLOOR, 0.5, "gather_ratio"),
    ]  # fmt: skip
    for name, key, floor_key, floor_name, goal, ratio_key in specs:
        ratio = results[f"{key}.{ratio_key}"]["median"]
        out.append(
            Target(
                name, "ledger", results[f"{key}_mps"]["median"], "msg/s", f">= {goal} x floor",
                ratio >= goal, results[floor_key]["median"], floor_name, ratio,
                "median of the runs' figure / floor",
            )
        )  # fmt: skip
    return out


def run(s: Settings) -> dict[str, Any]:
    started, t0 = dt.datetime.now(), time.perf_counter()
    keys = _keys(s.records)
    requests = [
        publish_request(TOPIC, [(k, VALUE) for k in keys[i : i + 1000]])
        for i in range(0, s.records, 1000)
    ]
    samples = [one_run(s, i + 1, requests, keys) for i in range(s.runs)]
    results = {key: aggregate([m[key] for m in samples]) for key in samples[0]}
    return envelope(
        "compactlog bench client",
        s,
        started,
        t0,
        results=results,
        rows=[dataclasses.asdict(r) for r in rows(results)],
    )


def markdown(report: dict[str, Any]) -> str:
    s, m = report["settings"], report["machine"]
    spread = ratio_spread(report["results"])
    head = (
        f"{s['records']:,} LEDGER messages x 100 B, median of {s['runs']} run(s), one "
        f"server per run (fsync durability). {m['cpu_model']}, {m['cores']} cores."
    )
    table = targets_markdown([Target(**r) for r in report["rows"]], first_header="client path")
    r = report["results"]
    each = (
        f"Acknowledge each: {r['receive_each_mps']['median']:,.0f} msg/s in the loop; every "
        f"ack stored {r['receive_each_stored_s']['median']:.2f} s after the loop began "
        f"(close() {r['receive_each_close_s']['median']:.2f} s of it), client CPU "
        f"{r['receive_each_cpu_us']['median']:.2f} us a message."
    )
    cpu = (
        f"Client CPU per message (all its threads): send_async + flush "
        f"{r['send_async_cpu_us']['median']:.2f} us, asyncio send_async + flush "
        f"{r['aio_send_async_cpu_us']['median']:.2f} us, asyncio send gathered "
        f"{r['aio_send_cpu_us']['median']:.2f} us, raw PublishStream "
        f"{r['raw_publish_cpu_us']['median']:.2f} us (requests built before the clock); "
        f"read_next reading key and value {r['read_fields_cpu_us']['median']:.2f} us, "
        f"receive {r['receive_cpu_us']['median']:.2f} us, batch_receive "
        f"{r['batch_receive_cpu_us']['median']:.2f} us, raw ConsumeStream "
        f"{r['raw_consume_stream_cpu_us']['median']:.2f} us (the server's CPU not counted)."
    )
    consume = r["raw_consume_noack_mps"]["median"]
    calls = (
        f"Per call: raw Consume of 1000 without acks {consume:,.0f} msg/s "
        f"({1e6 / consume:.2f} ms a call); a GetLastMessageId round trip "
        f"{r['unary_ms']['median']:.2f} ms (median): the fixed cost of one gRPC call, "
        f"paid by each Consume response and once by a Read stream."
    )
    gathered = (
        f"asyncio send, gathered: {r['aio_send.ratio']['median']:.3f} of the raw "
        f"PublishStream; asyncio's own gather of as many coroutines, no I/O, "
        f"{r['aio_gather_mps']['median']:,.0f} msg/s."
    )
    return (
        f"{head}\n\n{table}\n\nPer-run ratios (min-max): {spread}.\n\n{each}\n\n{cpu}\n\n"
        f"{calls}\n\n{gathered}"
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="compactlog bench client",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="5,000 messages, one run: seconds")
    p.add_argument("--records", type=int, help="messages per run (default 200,000)")
    p.add_argument("--runs", type=int, help="runs to take the median over (default 3)")
    p.add_argument("--workdir", type=Path, help="where data dirs go (default: system temp)")
    p.add_argument("--json", type=Path, help="also write the report as JSON here")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    given = {k: v for k in ("records", "runs", "workdir") if (v := getattr(args, k)) is not None}
    s = Settings(**{**(QUICK if args.quick else {}), **given})
    if s.records < 1 or s.runs < 1:
        raise SystemExit("compactlog bench client: --records and --runs must be positive")
    report = run(s)
    print_report("compactlog bench client", argv, report, markdown, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
