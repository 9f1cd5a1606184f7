"""Damage that removes data from a SEGMENTED topic (CONTRACT section 11, issue 27 item 3),
caused for real on a stopped server's files and read back through a real one.

A sealed ``.log`` emptied, cut to half, cut by one byte or deleted: reads from earliest
fail ``DATA_LOSS`` / ``CORRUPT_DATA`` at the damaged range (topic, file and offsets in the
ErrorInfo), never OK with fewer messages; reads after it are right; ``compactlog check``
names it in one line. A ``cursors.journal`` cut short after a crash: the server logs in
one line what it dropped, and ``check`` reports it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from compactlog.v1 import compactlog_pb2 as pb

from ..conftest import ServerProcess, Stubs

TOPIC = "seg"
CONFIG = {"segment.bytes": "2000", "index.interval.bytes": "1"}
BATCHES = 30  # three records each, about 420 bytes: four batches to a segment


def publish_all(api: Stubs) -> None:
    api.admin.CreateTopic(pb.CreateTopicRequest(name=TOPIC, kind=pb.SEGMENTED, config=CONFIG))
    for i in range(BATCHES):
        records = [pb.Record(key=b"k%d" % j, value=b"v%03d-" % (3 * i + j) * 20) for j in range(3)]
        api.log.Publish(pb.PublishRequest(topic=TOPIC, records=records), timeout=30)


def read(api: Stubs, start: int) -> list[int]:
    request = pb.ReadRequest(topic=TOPIC, message_id=pb.MessageId(entry_id=start))
    return [m.id.entry_id for r in api.log.Read(request, timeout=30) for m in r.messages]


def check(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "compactlog", "check", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def error_info(err: grpc.RpcError) -> tuple[grpc.StatusCode, str, dict[str, str]]:
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    assert status is not None, err.details()
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    return err.code(), info.reason, dict(info.metadata)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("removed") / "template"
    srv = ServerProcess(data).start()
    api = Stubs(srv.address)
    publish_all(api)
    api.close()
    assert srv.stop() == 0
    assert check(data).returncode == 0
    return data


CUTS: dict[str, Callable[[int], int]] = {
    "emptied": lambda size: 0,
    "cut to half": lambda size: size // 2,
    "cut by one byte": lambda size: size - 1,
}


@pytest.mark.slow
@pytest.mark.parametrize("damage", [*CUTS, "deleted"])
def test_a_sealed_segment_removed_is_data_loss_never_fewer_messages(
    tmp_path: Path,
    template: Path,
    server_factory: Callable[..., ServerProcess],
    connect: Callable[[str], Stubs],
    damage: str,
) -> None:
    data = tmp_path / "data"
    shutil.copytree(template, data)
    segments = sorted((data / "segments" / TOPIC).glob("*.log"))
    assert len(segments) >= 5
    target = segments[2]  # sealed, with sealed segments on both sides
    base, after = int(target.name[:20]), int(segments[3].name[:20])
    if damage == "deleted":
        target.unlink()
    else:
        with open(target, "r+b") as fh:
            fh.truncate(CUTS[damage](target.stat().st_size))
    checked = check(data)
    assert checked.returncode != 0
    lines = [ln for ln in checked.stdout.splitlines() if ln.startswith("PROBLEM")]
    assert len(lines) == 1 and target.name in lines[0] and "lost" in lines[0], checked.stdout

    srv = server_factory(data_dir=data)
    api = connect(srv.address)
    with pytest.raises(grpc.RpcError) as failed:
        read(api, 0)
    code, reason, meta = error_info(failed.value)
    assert (code, reason) == (grpc.StatusCode.DATA_LOSS, "CORRUPT_DATA")
    assert meta["topic"] == TOPIC and meta["path"].endswith(target.name)
    assert base <= int(meta["first_offset"]) <= int(meta["last_offset"]) == after - 1
    assert read(api, after) == list(range(after, 3 * BATCHES))  # the rest reads right
    first = list(api.log.Read(pb.ReadRequest(topic=TOPIC, max_messages=base), timeout=30))
    assert [m.id.entry_id for r in first for m in r.messages] == list(range(base))
    consume = pb.ConsumeRequest(
        topic=TOPIC, subscription="s", max_messages=1000, initial_position=pb.EARLIEST
    )
    try:
        consumed = api.log.Consume(consume, timeout=30).messages
    except grpc.RpcError as err:
        assert err.code() == grpc.StatusCode.DATA_LOSS
    else:
        assert len(consumed) <= base  # up to the damage, never past it
    assert srv.logged(target.name, "lost")
    assert srv.stop() == 0


@pytest.mark.slow
def test_a_cursor_journal_cut_short_is_logged_and_reported_with_what_it_dropped(
    server_factory: Callable[..., ServerProcess], connect: Callable[[str], Stubs]
) -> None:
    srv = server_factory()
    api = connect(srv.address)
    publish_all(api)
    request = pb.ConsumeRequest(topic=TOPIC, subscription="g1", max_messages=10)
    api.log.Consume(request, timeout=30)
    for offset in (2, 5, 9):  # one journal line an ack
        msg_id = pb.MessageId(entry_id=offset)
        ack = pb.AcknowledgeRequest(topic=TOPIC, subscription="g1", id=msg_id, cumulative=True)
        api.log.Acknowledge(ack, timeout=30)
    srv.kill()  # no clean stop: the journal keeps its lines
    journal = srv.data_dir / "segments" / TOPIC / "cursors.journal"
    size = journal.stat().st_size
    with open(journal, "r+b") as fh:
        fh.truncate(size - 10)  # into the last line, the ack of offset 9
    checked = check(srv.data_dir)
    assert checked.returncode != 0
    (line,) = [ln for ln in checked.stdout.splitlines() if "cursors.journal" in ln]
    assert "cut short" in line and "'g1'" in line, checked.stdout
    srv.start()
    api = connect(srv.address)
    redelivered = api.log.Consume(request, timeout=30).messages
    assert [m.id.entry_id for m in redelivered][:1] == [6]  # after the ack of 5, not lost
    logged = srv.logged("cursors.journal")
    assert len(logged) == 1 and "cut short" in logged[0] and "'g1'" in logged[0]
    assert srv.stop() == 0
    assert check(srv.data_dir).returncode == 0
