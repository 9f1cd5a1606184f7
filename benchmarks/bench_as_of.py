"""Reading the past (``ReadRequest.as_of``) against what it is measured by, in one run.

Three questions (issue 16), on one topic of ``--messages`` records over ``--keys`` keys,
compacted, then ``--tail`` times as many more published after the horizon:

- **before the horizon** (no compacted ledger covers ``as_of``): the past view answers
  by running both phases over the raw ledgers; target <= 1.5x a fresh compaction of the
  same range (TwoPhaseCompactor, in this process, writing and committing its ledger);
- **at the horizon**: the compacted ledger's batches (spliced as stored where they hold
  only live keyed messages); target <= 1.2x a compacted read up to the horizon;
- **past the horizon**: the compacted ledger merged with the raw tail up to ``as_of``
  (phase one over the tail, the ledger's messages whose key the tail holds again left
  out, the tail's winners); measured against the same 1.2x of a compacted read of the
  topic (compacted ledger, then the raw tail as it is, uncompacted), and against issue
  29's floor: that compacted read plus a fresh phase one of the tail (the compactor's
  ``find_winners`` over the same raw tail, timed in the same run), since a view cannot
  know the tail's winners without reading the tail; goal <= 1.2x of it.

Every read goes through the one reader (``storage.read_range.read_chunks``) into
responses of ``read.batch.max.messages`` messages, as the server builds them; the floor
beside them (``two_phase_floor``: two scans of the stored batches and a batched write of
the winners' share, measured in the same run) is what any compaction of the range costs.

    compactlog bench as-of                                  # 1M x 100 B, 100k keys, 3 runs
    compactlog bench as-of --messages 100000 --keys 10000 --runs 1
    compactlog bench as-of --clock cpu     # CPU time: for a machine others load too
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from compactlog.bench.floors import two_phase_floor
from compactlog.compactor.two_phase import TwoPhaseCompactor
from compactlog.compactor.two_phase.as_of import AsOfView, past_input
from compactlog.compactor.two_phase.ledger_adapter import LedgerReads, LedgerStoreCompactionStorage
from compactlog.compactor.two_phase.phase_one import find_winners
from compactlog.storage.config import ServerSettings
from compactlog.storage.cursor import COMPACTION_SUBSCRIPTION
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.read_range import ViewBatch, read_chunks
from compactlog.storage.types import MessageId, Record
from compactlog.storage.views import compacted_view

TOPIC = "bench"
PER_RESPONSE = 1000  # read.batch.max.messages' default
BUDGET = 1 << 30  # compaction.phase.one.memory.bytes' default


def load(store: LedgerStore, first: int, stop: int, nkeys: int, pad: bytes, batch: int) -> None:
    for start in range(first, stop, batch):
        end = min(start + batch, stop)
        store.append(
            TOPIC, [Record(b"key-%08d" % (i * 7919 % nkeys), pad) for i in range(start, end)]
        )


def forget_compaction(store: LedgerStore) -> None:
    """Drop the compacted ledger so the next run starts from the whole raw log again."""
    lid = store.topic(TOPIC).compacted_ledger_id()
    store.commit_cursor(TOPIC, COMPACTION_SUBSCRIPTION, None, {})
    if lid is not None:
        store.delete_ledger(lid)


def drain(batches: Iterable[ViewBatch], stop: MessageId) -> int:
    """Responses as the server builds them; the messages they hold."""
    return sum(c.count for c in read_chunks(batches, TOPIC, stop, PER_RESPONSE) if c.to_bytes())


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]


def timed(fn: Callable[[], object]) -> float:
    gc.collect()
    t = clock()
    fn()
    return clock() - t


def as_of_read(store: LedgerStore, as_of: MessageId) -> int:
    view = AsOfView(store, TOPIC, as_of, BUDGET)
    stop = view.visible_end()
    assert stop is not None
    return drain(view.batches(MessageId(0, 0), stop, True), stop)


def compacted_read(store: LedgerStore, stop: MessageId) -> int:
    return drain(compacted_view(store, TOPIC, MessageId(0, 0), stop), stop)


def tail_phase_one(store: LedgerStore, as_of: MessageId) -> int:
    """Phase one over the raw tail a past view at ``as_of`` reads, as a run makes it
    (``find_winners`` with the compactor's defaults, through the same paced reads as the
    view's); the keys it mapped."""
    tail = past_input(store, TOPIC, as_of).raw
    return find_winners(LedgerReads(store), tail, BUDGET).distinct_keys


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="compactlog bench as-of",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument(
        "--tail", type=float, default=0.1, help="then this share more, after the horizon"
    )
    ap.add_argument("--batch", type=int, default=1000, help="records per append")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="cpu: this process's CPU time (a loaded machine's waits left out)",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    global clock
    clock = CLOCKS[args.clock]
    pad = b"x" * args.value_bytes
    head = args.messages
    with tempfile.TemporaryDirectory() as tmp:
        store = LedgerStore(
            Path(tmp) / "ledgers", ServerSettings(publish_durability="wal", topic_defaults={})
        )
        try:
            store.create_topic(TOPIC, {})
            t = time.perf_counter()
            load(store, 0, head, args.keys, pad, args.batch)
            print(f"loaded {head} x {args.value_bytes} B over {args.keys} keys "
                  f"in {time.perf_counter() - t:.1f} s")  # fmt: skip
            rows = measure(store, args, pad, head)
        finally:
            store.close()
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value:>16}")
    return 0


def measure(
    store: LedgerStore, args: argparse.Namespace, pad: bytes, head: int
) -> list[tuple[str, str]]:
    compactor = TwoPhaseCompactor(LedgerStoreCompactionStorage(store), BUDGET)
    horizon = store.topic(TOPIC).lac
    assert horizon is not None
    fresh, past, floors = [], [], []
    kept = 0
    for _ in range(args.runs):
        forget_compaction(store)
        past.append(timed(lambda: as_of_read(store, horizon)))
        fresh.append(timed(lambda: compactor.compact(TOPIC)))
        kept = store.ledger(store.topic(TOPIC).compacted_ledger_id() or 0).entries  # type: ignore[union-attr]
        floors.append(sum(two_phase_floor(store, TOPIC, kept)))
    total = head + int(head * args.tail)
    load(store, head, total, args.keys, pad, args.batch)  # the raw tail after the horizon
    lac = store.topic(TOPIC).lac
    assert lac is not None
    merged, reads, at, ledger_reads, phase_ones = [], [], [], [], []
    for _ in range(args.runs):
        reads.append(timed(lambda: compacted_read(store, lac)))
        phase_ones.append(timed(lambda: tail_phase_one(store, lac)))
        merged.append(timed(lambda: as_of_read(store, lac)))
        ledger_reads.append(timed(lambda: compacted_read(store, horizon)))
        at.append(timed(lambda: as_of_read(store, horizon)))
    med = statistics.median
    n = args.runs
    floor = med([r + p for r, p in zip(reads, phase_ones, strict=True)])
    return [
        (f"before the horizon: {head} raw messages, {kept} keys (median of {n})", ""),
        ("  as_of read (both phases over the raw ledgers)", f"{med(past):.3f} s"),
        ("  fresh compaction of the same range", f"{med(fresh):.3f} s"),
        ("  floor (two scans + write of the winners)", f"{med(floors):.3f} s"),
        ("  as_of / fresh compaction (target <= 1.5)", f"{med(past) / med(fresh):.2f}"),
        ("at the horizon: the compacted ledger alone", ""),
        ("  as_of read (the compacted ledger's batches, checked)", f"{med(at):.3f} s"),
        ("  compacted read up to the horizon", f"{med(ledger_reads):.3f} s"),
        ("  as_of / compacted read (target <= 1.2)", f"{med(at) / med(ledger_reads):.2f}"),
        (f"past the horizon: compacted ledger + {total - head} raw tail", ""),
        ("  as_of read (compacted ledger merged with the tail)", f"{med(merged):.3f} s"),
        ("  compacted read (compacted ledger, then the tail)", f"{med(reads):.3f} s"),
        ("  as_of / compacted read (target <= 1.2)", f"{med(merged) / med(reads):.2f}"),
        (
            "  fresh phase one of the tail (the compactor's find_winners)",
            f"{med(phase_ones):.3f} s",
        ),
        ("  floor: compacted read + fresh phase one of the tail", f"{floor:.3f} s"),
        ("  as_of / floor (goal <= 1.2)", f"{med(merged) / floor:.2f}"),
    ]


if __name__ == "__main__":
    raise SystemExit(main())
