"""``compactlog bench shards``: does one server use more cores with ``--shards N``?

Two figures per shard count, each beside the 1-shard figure of the same run:

1. **Publish**: aggregate ``PublishStream`` throughput over 4 topics, one load-generator
   process per topic (its own interpreter, so the generator is not the bottleneck of one
   GIL), each sending pre-built requests (``--batch`` records of ``--value-bytes``)
   straight to the topic's owner, found with ``GetPartitionMap`` as the client does.
   Records per second = all records / (last generator done - first generator started).
2. **Compaction**: the same 4 topics, keyed, compacted at once (``Compact`` without
   wait, then ``GetCompactionStatus`` until all four are done); seconds from the first
   request to the last SUCCESS.

The 4 topic names are chosen to sit in store slots 0-3, so 2 shards own two each and 4
shards one each (``storage/slots.py``). Under the default placement a partitioned topic's
partitions share one slot (its publishes are atomic across them), so these are topics.

3. **Partitioned** (``--partitioned``): the issue's goal, one topic of 4 partitions
   spread over the shards. The servers are started with ``shards.placement =
   "partition"`` (partition ``i`` in slot ``(crc32(NAME) + i) % 8``; NAME chosen so its
   partitions sit in slots 0-3), and one generator per partition sends that partition's
   pre-built requests (keys that Kafka's partitioner puts there) straight to its owner,
   found with ``GetPartitionMap`` of ``NAME``, as the client does. Printed beside the
   4-topic figure: the two should match when the partitions spread as the topics do.

With 1 shard the server runs as it always did, one process on the single-store layout.
Every server gets a fresh data dir.

    compactlog bench shards                       # shards 1, 2, 4, 8
    compactlog bench shards --shards 1,2 --quick  # seconds
    compactlog bench shards --partitioned         # also one topic of 4 partitions
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import grpc

from compactlog.bench.procstats import ListeningProcess
from compactlog.bench.rawlog import RawLog, acked, publish_request
from compactlog.partitioner import partition_for_key, partition_name
from compactlog.storage.slots import SLOT_COUNT, Placement, slot_of
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

TOPICS = 4


def topic_names(count: int = TOPICS) -> list[str]:
    """Names whose slots are 0, 1, ..., count-1 (an even spread over any shard count)."""
    names: dict[int, str] = {}
    i = 0
    while len(names) < count:
        name = f"bench-{i}"
        slot = slot_of(name, SLOT_COUNT)
        if slot < count and slot not in names:
            names[slot] = name
        i += 1
    return [names[s] for s in range(count)]


def partitioned_name(partitions: int = TOPICS) -> str:
    """A name whose partitions sit in slots 0, 1, ..., partitions-1 under partition
    placement (its own slot 0)."""
    i = 0
    while True:
        name = f"bench-partitioned-{i}"
        slots = [
            slot_of(partition_name(name, p), SLOT_COUNT, Placement.PARTITION)
            for p in range(partitions)
        ]
        if slots == list(range(partitions)):
            return name
        i += 1


@dataclass(frozen=True)
class Settings:
    shards: tuple[int, ...]
    requests: int  # PublishStream requests per topic
    batch: int  # records per request
    value_bytes: int
    keys: int  # distinct keys per topic (compaction input)
    durability: str
    runs: int
    partitioned: bool = False  # also one topic of TOPICS partitions, partition placement


class ShardedServer(ListeningProcess):
    def __init__(self, data_dir: Path, shards: int, durability: str, spread: bool = False) -> None:
        config = data_dir.parent / f"{data_dir.name}.toml"
        placement = '"shards.placement" = "partition"\n' if spread else ""
        config.write_text(f'"publish.durability" = "{durability}"\n{placement}')
        args = [sys.executable, "-m", "compactlog", "serve", "--data-dir", str(data_dir),
                "--listen", "127.0.0.1:0", "--config", str(config),
                "--shards", str(shards)]  # fmt: skip
        super().__init__(args, "compactlog listening on ", data_dir.parent / f"{data_dir.name}.log")


def _keys(s: Settings, partition: int | None) -> list[bytes]:
    """The keys a generator publishes: all of them for a topic; for partition ``i`` of a
    partitioned topic those Kafka's partitioner puts in it (what a routing client sends
    there)."""
    keys = [b"key-%08d" % k for k in range(s.keys)]
    if partition is None:
        return keys
    return [k for k in keys if partition_for_key(k, TOPICS) == partition]


def _requests(topic: str, s: Settings, seed: int, partition: int | None) -> list[bytes]:
    value = b"v" * s.value_bytes
    keys = _keys(s, partition)
    out = []
    for r in range(s.requests):
        base = (seed + r * s.batch) % len(keys)
        records = [(keys[(base + i) % len(keys)], value) for i in range(s.batch)]
        out.append(publish_request(topic, records))
    return out


def _generator(
    address: str, topic: str, partition: int | None, s: Settings, start: object, out: object
) -> None:
    """One load-generator process: build the requests, wait for the start, send them."""
    requests = _requests(topic, s, seed=hash(topic) & 0xFFFF, partition=partition)
    with RawLog(address) as log:
        start.wait()  # type: ignore[attr-defined]
        began = time.time()
        _seconds, replies = log.publish_stream(requests)
        ended = time.time()
    out.put((topic, began, ended, acked(replies)))  # type: ignore[attr-defined]


def _owners(address: str, topics: list[str]) -> dict[str, str]:
    """Each topic's owner address (created first when missing)."""
    with grpc.insecure_channel(address) as channel:
        admin = pb_grpc.TopicAdminStub(channel)
        owners = {}
        for topic in topics:
            try:
                admin.CreateTopic(pb.CreateTopicRequest(name=topic), timeout=60)
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.ALREADY_EXISTS:  # type: ignore[attr-defined]
                    raise
            (entry,) = admin.GetPartitionMap(
                pb.GetPartitionMapRequest(topic=topic), timeout=60
            ).partitions
            owners[topic] = entry.address or address
        return owners


def _partition_owners(address: str, name: str) -> dict[str, str]:
    """Each partition of ``name`` (created first, with TOPICS partitions) and its owner's
    address, from ``GetPartitionMap`` of ``name`` as the client asks it."""
    with grpc.insecure_channel(address) as channel:
        admin = pb_grpc.TopicAdminStub(channel)
        try:
            admin.CreateTopic(pb.CreateTopicRequest(name=name, partitions=TOPICS), timeout=60)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.ALREADY_EXISTS:  # type: ignore[attr-defined]
                raise
        entries = admin.GetPartitionMap(pb.GetPartitionMapRequest(topic=name), timeout=60)
        return {e.topic: e.address or address for e in entries.partitions}


Target = tuple[str, str, int | None]  # address, topic, partition its keys are for (None: all)


def targets_of(owners: dict[str, str], partitioned: bool = False) -> list[Target]:
    """One generator per topic (or per partition, in order, when ``partitioned``), each
    sending to the address ``owners`` gives."""
    return [(owners[t], t, i if partitioned else None) for i, t in enumerate(owners)]


def measure_publish(targets: list[Target], s: Settings) -> float:
    """Aggregate records per second of one generator process per target."""
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_generator, args=(address, topic, partition, s, start, out))
        for address, topic, partition in targets
    ]
    for proc in procs:
        proc.start()
    time.sleep(2.0 + 0.2 * s.requests * len(targets) / 100)  # let every generator build
    start.set()
    results = [out.get(timeout=3600) for _ in procs]
    for proc in procs:
        proc.join()
    records: int = sum(r[3] for r in results)
    if records != len(targets) * s.requests * s.batch:
        raise RuntimeError(f"acknowledged {records} records, sent more")
    began: float = min(r[1] for r in results)
    ended: float = max(r[2] for r in results)
    return records / (ended - began)


def measure_compaction(address: str, topics: list[str]) -> float:
    """Seconds to compact every topic, all started at once."""
    with grpc.insecure_channel(address) as channel:
        admin = pb_grpc.TopicAdminStub(channel)
        began = time.perf_counter()
        for topic in topics:
            admin.Compact(pb.CompactRequest(topic=topic, wait=False), timeout=60)
        left = set(topics)
        while left:
            for topic in sorted(left):
                state = admin.GetCompactionStatus(
                    pb.GetCompactionStatusRequest(topic=topic), timeout=60
                )
                if state.state == pb.CompactionStatus.ERROR:
                    raise RuntimeError(f"compaction of {topic} failed: {state.last_error}")
                if state.state == pb.CompactionStatus.SUCCESS:
                    left.discard(topic)
            time.sleep(0.02)
        return time.perf_counter() - began


def warm_up(address: str, topics: list[str]) -> None:
    """One small compaction per topic, so that every store's compaction worker process is
    started before the measured runs (a worker starts on first use and stays)."""
    with grpc.insecure_channel(address) as channel:
        admin = pb_grpc.TopicAdminStub(channel)
        log = pb_grpc.LogStub(channel)
        for topic in topics:
            record = pb.Record(key=b"warm", value=b"up")
            log.Publish(pb.PublishRequest(topic=topic, records=[record]), timeout=60)
        for topic in topics:
            admin.Compact(pb.CompactRequest(topic=topic, wait=True), timeout=120)


# topics' records/s, compaction s, partitions' records/s (routed), spanning requests'
# records/s, compaction of the partitioned topic s
Figures = tuple[float, float, float, float, float]


def one_server(shards: int, s: Settings, tmp: Path) -> Figures:
    server = ShardedServer(tmp / f"shards-{shards}", shards, s.durability, s.partitioned)
    try:
        topics = topic_names()
        owners = _owners(server.address, topics)
        warm_up(server.address, topics)
        rate = measure_publish(targets_of(owners), s)
        spread = spanning = parts_seconds = 0.0
        if s.partitioned:
            name = partitioned_name()
            parts = _partition_owners(server.address, name)
            spread = measure_publish(targets_of(parts, partitioned=True), s)
            # Every request holds keys of every partition: sent to NAME at the main
            # address (with shards: split by the front, recorded in its intent log).
            spanning = measure_publish([(server.address, name, None)] * TOPICS, s)
        seconds = measure_compaction(server.address, topics)
        if s.partitioned:  # Compact {NAME}: one run a partition, in their slots
            parts_seconds = measure_compaction(server.address, [name])
    finally:
        server.stop()
    return rate, seconds, spread, spanning, parts_seconds


def _print_table(s: Settings, figures: dict[int, Figures]) -> None:
    base_rate, base_secs, base_spread, base_spanning, base_parts = figures.get(1, (0.0,) * 5)
    records = TOPICS * s.requests * s.batch
    print(f"\nPublishStream, {TOPICS} topics x {s.requests} requests x {s.batch} records of "
          f"{s.value_bytes} B ({records:,} records), publish.durability={s.durability}, "
          f"median of {s.runs} runs")  # fmt: skip
    if s.partitioned:
        print(f"partitions: 1 topic of {TOPICS} partitions (shards.placement = partition), "
              "the same records, each generator straight to its partition's owner")  # fmt: skip
        print(f"spanning: the same topic, {TOPICS} generators to the main address, every "
              f"request spanning the {TOPICS} partitions (split by the front, intent "
              "logged)")  # fmt: skip
    spread_head = (
        f"  {'1 topic x 4 parts':>17}  {'vs 1 shard':>10}  {'spanning':>10}  {'vs 1 shard':>10}"
        f"  {'compact 1x4':>11}  {'vs 1 shard':>10}"
        if s.partitioned
        else ""
    )
    print(f"{'shards':>6}  {'records/s':>12}  {'vs 1 shard':>10}  "
          f"{'compact 4 topics':>16}  {'vs 1 shard':>10}{spread_head}")  # fmt: skip
    for shards, (rate, secs, spread, spanning, parts) in figures.items():
        up = f"{rate / base_rate:.2f}x" if base_rate else "-"
        faster = f"{base_secs / secs:.2f}x" if base_secs else "-"
        line = f"{shards:>6}  {rate:>12,.0f}  {up:>10}  {secs:>15.2f}s  {faster:>10}"
        if s.partitioned:
            spread_up = f"{spread / base_spread:.2f}x" if base_spread else "-"
            spanning_up = f"{spanning / base_spanning:.2f}x" if base_spanning else "-"
            parts_up = f"{base_parts / parts:.2f}x" if parts else "-"
            line += f"  {spread:>17,.0f}  {spread_up:>10}  {spanning:>10,.0f}  {spanning_up:>10}"
            line += f"  {parts:>10.2f}s  {parts_up:>10}"
        print(line)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="compactlog bench shards", description=__doc__)
    parser.add_argument("--shards", default="1,2,4,8", help="shard counts (1 is the baseline)")
    parser.add_argument("--requests", type=int, default=2000, help="requests per topic")
    parser.add_argument("--batch", type=int, default=100, help="records per request")
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--keys", type=int, default=5000, help="distinct keys per topic")
    parser.add_argument("--durability", choices=("fsync", "wal"), default="fsync")
    parser.add_argument("--runs", type=int, default=1, help="runs (each shard count in turn)")
    parser.add_argument("--quick", action="store_true", help="a small run (seconds)")
    parser.add_argument(
        "--partitioned",
        action="store_true",
        help="also publish to one topic of 4 partitions (shards.placement = partition)",
    )
    parser.add_argument("--workdir", type=Path, default=None)
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    shards = tuple(int(n) for n in args.shards.split(","))
    if 1 not in shards:
        shards = (1, *shards)
    s = Settings(
        shards=shards,
        requests=20 if args.quick else args.requests,
        batch=args.batch,
        value_bytes=args.value_bytes,
        keys=args.keys,
        durability=args.durability,
        runs=max(1, args.runs),
        partitioned=args.partitioned,
    )
    samples: dict[int, list[Figures]] = {n: [] for n in s.shards}
    for run in range(s.runs):  # shard counts take turns, so load drifts hit all alike
        for n in s.shards:
            with tempfile.TemporaryDirectory(prefix="compactlog-bench-", dir=args.workdir) as t:
                got = one_server(n, s, Path(t))
            samples[n].append(got)
            rate, secs, spread, spanning, parts_secs = got
            parts = (
                f", {TOPICS} partitions {spread:,.0f} records/s, spanning {spanning:,.0f}, "
                f"compaction {parts_secs:.2f} s"
                if s.partitioned
                else ""
            )
            print(f"run {run + 1}, shards {n}: {rate:,.0f} records/s, compaction {secs:.2f} s"
                  f"{parts}", file=sys.stderr)  # fmt: skip
    figures = {
        n: (
            statistics.median(f[0] for f in got),
            statistics.median(f[1] for f in got),
            statistics.median(f[2] for f in got),
            statistics.median(f[3] for f in got),
            statistics.median(f[4] for f in got),
        )
        for n, got in samples.items()
    }
    _print_table(s, figures)
    return 0
