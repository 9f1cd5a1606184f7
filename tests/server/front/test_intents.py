"""The front's intent log of spanning publishes (server/front/intents.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from compactlog.errors import CompactlogError
from compactlog.server.front.intents import (
    INTENTS_DIR,
    IntentLog,
    decode_parts,
    encode_parts,
    intent_key,
)
from compactlog.storage.rocks import RocksDB

PARTS = [("t-partition-0", b"\x0a\x01a"), ("t-partition-3", b"")]


def test_parts_round_trip_and_damage_is_seen() -> None:
    data = encode_parts(PARTS)
    assert decode_parts(data) == tuple(PARTS)
    for cut in (1, 5, len(data) - 1):
        with pytest.raises(Exception):  # noqa: B017 - struct.error or ValueError
            decode_parts(data[:cut])
    with pytest.raises(ValueError, match="past its parts"):
        decode_parts(data + b"x")


@pytest.mark.parametrize("fsync", [True, False])
def test_open_intents_survive_a_reopen_and_done_forgets(tmp_path: Path, fsync: bool) -> None:
    log = IntentLog(tmp_path, fsync)
    first = log.begin(PARTS)
    second = log.begin(PARTS[:1])
    assert second.txid > first.txid
    assert abs(first.txid - time.time_ns() // 1000) < 60_000_000  # microseconds of the clock
    assert log.floor() == first.txid
    log.done(first.txid)
    log.done(first.txid)  # idempotent
    assert log.floor() == second.txid
    log.close()
    again = IntentLog(tmp_path, fsync)
    assert [(i.txid, i.parts) for i in again.open_intents()] == [(second.txid, tuple(PARTS[:1]))]
    again.done(second.txid)
    assert again.floor() == second.txid + 1  # none open: past every id issued
    third = again.begin(PARTS)
    assert third.txid > second.txid  # ids never go back, whatever the clock does
    again.close()


def test_ids_never_go_back_when_the_clock_does(tmp_path: Path) -> None:
    log = IntentLog(tmp_path, fsync=False)
    ahead = 2 * time.time_ns() // 1000  # an id issued by a clock far ahead
    log.db.put(b"\x00high", ahead.to_bytes(8, "big"))
    log.close()
    log = IntentLog(tmp_path, fsync=False)
    assert log.begin(PARTS).txid == ahead + 1
    log.close()


def test_a_damaged_intent_stops_the_front_with_one_line(tmp_path: Path) -> None:
    log = IntentLog(tmp_path, fsync=True)
    txid = log.begin(PARTS).txid
    log.close()
    db = RocksDB(tmp_path / INTENTS_DIR)
    db.put(intent_key(txid), encode_parts(PARTS)[:-3])
    db.close()
    with pytest.raises(CompactlogError, match=f"damaged record of spanning publish {txid}"):
        IntentLog(tmp_path, fsync=True)
