"""TwoPhaseCompactor (local engine) against the floor, measured in the same run.

The floor is what any compaction of the topic must at least do: one RocksDB scan of the
keys (key blocks, every key decoded), one scan of the entries, and one batched write of
the winners. The issues' targets: compaction within 2x the floor; phase one in an offset
map of 24 bytes a key (Kafka's layout: 16 B of key digest, 8 B of position). Reported: the
map's own accounting (bytes an entry, the table's bytes a key) and tracemalloc's peak over
the whole of phase one. The compactor reads the store as a worker does, without the pauses
the server's in-process reads make for its request threads (every run goes to a worker).

    .venv/bin/python benchmarks/bench_two_phase.py                      # 1M x 100 B, 100k keys
    .venv/bin/python benchmarks/bench_two_phase.py --messages 100000 --keys 10000 --runs 3
    .venv/bin/python benchmarks/bench_two_phase.py --threads 1,2,4    # phase one's threads
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
import tracemalloc
from functools import partial
from pathlib import Path

from compactlog.bench.floors import two_phase_floor
from compactlog.compactor.log_cleaner.offset_map import BYTES_PER_ENTRY
from compactlog.compactor.two_phase import TwoPhaseCompactor
from compactlog.compactor.two_phase.ledger_adapter import LedgerStoreCompactionStorage
from compactlog.compactor.two_phase.phase_one import find_winners
from compactlog.storage.config import ServerSettings
from compactlog.storage.cursor import COMPACTION_SUBSCRIPTION
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.types import Record

TOPIC = "bench"


def load(store: LedgerStore, messages: int, nkeys: int, value_bytes: int, batch: int) -> None:
    store.create_topic(TOPIC, {})
    pad = b"x" * value_bytes
    for start in range(0, messages, batch):
        stop = min(start + batch, messages)
        store.append(
            TOPIC, [Record(b"key-%08d" % (i * 7919 % nkeys), pad) for i in range(start, stop)]
        )


def reset(store: LedgerStore) -> None:
    """Forget the compaction so the next run starts from the whole raw log again."""
    lid = store.topic(TOPIC).compacted_ledger_id()
    store.commit_cursor(TOPIC, COMPACTION_SUBSCRIPTION, None, {})
    if lid is not None:
        store.delete_ledger(lid)


def floor(store: LedgerStore, winners: int) -> tuple[float, float, float]:
    return two_phase_floor(store, TOPIC, winners)


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--batch", type=int, default=1000, help="records per append")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument(
        "--threads",
        default="1",
        help="comma-separated thread counts phase one digests on (compaction.worker.threads);\n"
        "the first is reported in full, the others by their times",
    )
    args = ap.parse_args()
    threads = [int(n) for n in args.threads.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        store = LedgerStore(
            Path(tmp) / "ledgers", ServerSettings(publish_durability="wal", topic_defaults={})
        )
        t = time.perf_counter()
        load(store, args.messages, args.keys, args.value_bytes, args.batch)
        print(
            f"loaded {args.messages} x {args.value_bytes} B over {args.keys} keys "
            f"in {time.perf_counter() - t:.1f} s"
        )
        storage = LedgerStoreCompactionStorage(store, in_server=False)
        floors: list[tuple[float, float, float]] = []
        timed: dict[int, tuple[list[float], list[float], list[float]]] = {}
        kept = 0
        for _ in range(args.runs):
            for n in threads:
                compactor = TwoPhaseCompactor(
                    storage, 1 << 32, phase_one=partial(find_winners, threads=n)
                )
                reset(store)
                gc.collect()
                t = time.perf_counter()
                result = compactor.compact(TOPIC)
                total, one, two = timed.setdefault(n, ([], [], []))
                total.append(time.perf_counter() - t)
                one.append(result.run.phase_one_ms / 1000)
                two.append(result.run.phase_two_ms / 1000)
                kept = result.run.kept
            gc.collect()
            floors.append(floor(store, kept))
        total, one, two = timed[threads[0]]
        reset(store)
        inp = storage.begin(TOPIC)
        tracemalloc.start()
        winners = find_winners(storage, inp, 1 << 32)
        _cur, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        table_bytes, entries = winners.map_bytes, winners.distinct_keys
        entry_bytes = BYTES_PER_ENTRY  # 16 B of key digest + 8 B of position
        del winners
        store.close()
    keys_s = median([f[0] for f in floors])
    scan_s = median([f[1] for f in floors])
    write_s = median([f[2] for f in floors])
    floor_s = median([sum(f) for f in floors])
    compact_s = median(total)
    rows: list[tuple[str, str]] = [
        (
            f"compaction, total (median of {args.runs}), {threads[0]} thread(s)",
            f"{compact_s:.3f} s",
        ),
        ("  phase one (keys into the offset map)", f"{median(one):.3f} s"),
        ("  phase two (winners, write, commit)", f"{median(two):.3f} s"),
        ("floor, total", f"{floor_s:.3f} s"),
        ("  scan of the keys", f"{keys_s:.3f} s"),
        ("  scan of the entries", f"{scan_s:.3f} s"),
        (f"  batched write of {kept} winners", f"{write_s:.3f} s"),
        ("compaction / floor (target <= 2.0)", f"{compact_s / floor_s:.2f}"),
        ("offset map, per entry (16 B digest + 8 B position)", f"{entry_bytes:.1f} B"),
        (
            f"offset map table, {entries} keys at {entries / (table_bytes / 24):.0%} load",
            f"{table_bytes / args.keys:.1f} B per distinct key",
        ),
        (
            "phase one peak, own accounting (+ old table in a rehash, bitmap)",
            f"{result.run.phase_one_peak_bytes / args.keys:.1f} B per distinct key",
        ),
        ("phase one peak, tracemalloc", f"{peak / args.keys:.1f} B per distinct key"),
    ]
    for n in threads[1:]:
        n_total, n_one, _n_two = timed[n]
        rows += [
            (f"compaction, total, {n} threads", f"{median(n_total):.3f} s"),
            ("  phase one", f"{median(n_one):.3f} s"),
            ("  floor / compaction", f"{floor_s / median(n_total):.2f}"),
        ]
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value:>24}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
