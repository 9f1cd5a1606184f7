"""A server killed in the middle of a WAL write starts again (CONTRACT section 11: only the
unsynced tail after a crash may go). A WAL cut into what it acknowledged still refuses the
start: the truncation matrix (``test_truncation_matrix.py``) cuts it every way.

A kill lands inside RocksDB's write of a record only by chance (the suite's crash test
under load found it), so the in-flight write is made on purpose: after the server is
killed, a process opens its ledger store, writes one record unsynced and dies at once,
as the server would have; the newest WAL is then cut inside that record, which is what
the kill leaves when it lands there. The server must start on it, serve every
acknowledged message and log the record it dropped.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess

IN_FLIGHT = """
import os, sys
from pathlib import Path
from compactlog.storage.rocks import Batch, RocksDB
db = RocksDB(Path(sys.argv[1]))
batch = Batch()
batch.put(b"\\xffin-flight", b"x" * 100_000)
db.write(batch)
os._exit(0)
"""
TOPIC = "prices"


def acknowledged(srv: ServerProcess, connect: Callable[[str], Any]) -> list[bytes]:
    api = connect(srv.address)
    api.admin.CreateTopic(pb.CreateTopicRequest(name=TOPIC, kind=pb.LEDGER))
    values = [b"v%d" % n for n in range(300)]
    for start in range(0, len(values), 30):
        api.publish(TOPIC, *[(b"k%d" % n, values[n]) for n in range(start, start + 30)])
    return values


def read_all(srv: ServerProcess, connect: Callable[[str], Any]) -> list[bytes]:
    api = connect(srv.address)
    return [m.value for r in api.log.Read(pb.ReadRequest(topic=TOPIC)) for m in r.messages]


def cut_newest_wal(store: Path, size_less: int) -> None:
    wal = max(store.glob("*.log"), key=lambda p: p.name)
    with open(wal, "r+b") as fh:
        fh.truncate(wal.stat().st_size - size_less)


def killed_in_flight(srv: ServerProcess) -> Path:
    """The server killed, its store left with one more record written and not synced."""
    srv.kill()
    store = srv.data_dir / "ledgers"
    run = [sys.executable, "-c", IN_FLIGHT, str(store)]
    subprocess.run(run, check=True, timeout=60)
    return store


def test_a_kill_inside_a_wal_write_drops_that_write_and_serves_the_rest(
    server_factory: Callable[..., ServerProcess], connect: Callable[[str], Any]
) -> None:
    srv = server_factory()
    values = acknowledged(srv, connect)
    store = killed_in_flight(srv)
    cut_newest_wal(store, 40_000)  # inside the in-flight record's 100 kB
    check = [sys.executable, "-m", "compactlog", "check", str(srv.data_dir), "--output", "json"]
    done = subprocess.run(check, capture_output=True, text=True, timeout=120)
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["ok"], done.stdout + done.stderr
    (note,) = [n for n in report["notes"] if "cut short by a crash" in n]
    assert note.startswith(str(store)) and "the next start drops" in note
    srv.start()
    assert read_all(srv, connect) == values
    (line,) = srv.logged("dropped the last", "cut short by a crash")
    assert str(store) in line and ".log" in line
    assert srv.stop() == 0
    srv.start()  # and again, from the store that start left
    assert read_all(srv, connect) == values
