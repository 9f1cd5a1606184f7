"""Kill -9 at each step of CreateTopic, AddPartitions and DeleteTopic leaves each change
whole: after a restart it happened entirely or not at all, on a real ``compactlog serve``
(local), on ``--shards 2`` (a topic's partitions in its slot) and on ``--shards 2`` with
partition placement (its partitions spread over the slots), for both topic kinds.

The process dies for real at each named step (``COMPACTLOG_ADMIN_CRASH_AT``,
``compactlog.crash_points``: exit 137 right there; with shards the shard dies, then the
whole server is killed with SIGKILL) and starts again without it. Then: the topic has the
count the call asked for or none, exactly its partitions exist (no ``Q-partition-N``
writable on its own), what was published is still there, the same call again succeeds or
answers ALREADY_EXISTS / NOT_FOUND as the outcome says, the roll forward is logged in one
line, and ``compactlog check`` notes nothing left over. The issue's reproduction (a grow
2 -> 40 killed after 0.15-0.4 s) runs at random times in that window. Under partition
placement the home shard alone is also killed inside a CreateTopic while the front lives
on: the retry answers as the outcome says, and the topic is served, without a restart.
"""

from __future__ import annotations

import contextlib
import random
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from compactlog.crash_points import ADMIN_ENV, ADMIN_POINTS, ONCE_ENV
from compactlog.partitioner import partition_name
from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.e2e.shards import LEDGER, SEGMENTED, Api, wait_for

Q = "q"
PLACEMENTS = {
    "local": {},
    "shards": {"extra_args": ["--shards", "2"]},
    "spread": {
        "extra_args": ["--shards", "2"],
        "config": '"shards.placement" = "partition"\n',
    },
}
KINDS = {"LEDGER": LEDGER, "SEGMENTED": SEGMENTED}
BEFORE, GROWN = 2, 4  # the partition counts before and after a grow (a create makes GROWN)
# The outcome each step leaves, as partition counts (0: no topic): every partitioned
# change is rolled forward; a plain topic's create or delete is made or undone by its
# store (a LEDGER record synced is the topic; a SEGMENTED directory not renamed is none).
PARTITIONED = [p for p in ADMIN_POINTS if p.split("_")[0] in ("create", "grow", "delete")]
PLAIN = {
    "ledger_create_before_catalog": (LEDGER, 1),
    "ledger_delete_after_catalog": (LEDGER, 1),
    "segmented_create_before_rename": (SEGMENTED, 0),
    "segmented_delete_after_rename": (SEGMENTED, 0),
}
# The quick suite's cases: one per call; the sweep of every point, kind and placement is slow.
QUICK = {"create_after_first_partition", "grow_after_first_partition", "delete_before_record"}
QUICK_PLAIN = ("local", "ledger_delete_after_catalog")


def _case(placement: str, kind: str, point: str) -> object:
    quick = placement == "local" and kind == "SEGMENTED" and point in QUICK
    return pytest.param(placement, kind, point, marks=() if quick else pytest.mark.slow)


def _points(placement: str) -> list[str]:
    # Spread over 8 slots, a grow 2 -> 4 makes its new partitions in slots new to NAME, by
    # a CreateTopic (the create points): no slot's grow makes a partition.
    skip = "grow_after_first_partition" if placement == "spread" else ""
    return [point for point in PARTITIONED if point != skip]


def _kinds(placement: str, at: int) -> list[str]:
    """Both kinds at every point locally; with shards (a case takes a minute or more) the
    kinds take the points in turn, so each placement meets every point and each kind."""
    if placement == "local":
        return list(KINDS)
    return [list(KINDS)[at % 2]]


def start(server_factory: Callable[..., ServerProcess], placement: str) -> ServerProcess:
    srv: ServerProcess = server_factory(**PLACEMENTS[placement])
    return srv


def crash_in(srv: ServerProcess, point: str, call: Callable[[Api], object]) -> None:
    """Restart with the crash point set, make ``call``: the process holding the store
    exits 137 there; then the whole server is killed (SIGKILL) and started again."""
    srv.restart({ADMIN_ENV: point})
    api = Api(srv.address)
    with pytest.raises(grpc.RpcError) as cut:
        call(api)
    assert cut.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    api.close()
    wait_for(lambda: any(f"crash injected at {point}" in x for x in srv.stderr_lines), 30)
    srv.kill()
    srv.start()


def count_of(api: Api, name: str) -> int:
    """``name``'s partition count (1: a plain topic, 0: none)."""
    try:
        info = api.admin.GetTopic(pb.GetTopicRequest(name=name), timeout=30)
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.NOT_FOUND  # type: ignore[attr-defined]
        return 0
    return max(1, info.partitions)


def listed(api: Api, name: str) -> set[str]:
    topics = api.admin.ListTopics(pb.ListTopicsRequest(), timeout=30).topics
    return {t.name for t in topics if t.name == name or t.name.startswith(name + "-")}


def whole(api: Api, name: str, count: int) -> bool:
    """``name`` has ``count`` partitions, exactly those exist, and every slot holding one
    reads it (the front's repair may still be finishing a spread change: a slot makes
    its partitions before its record of ``name``, so ListTopics can show them all while
    the last slot's Read of ``name`` still answers NOT_FOUND)."""
    parts = {partition_name(name, i) for i in range(count)} if count > 1 else set()
    wanted = {name} | parts if count else set()
    if count_of(api, name) != count or listed(api, name) != wanted:
        return False
    return count == 0 or readable(api, name)


def readable(api: Api, name: str) -> bool:
    try:
        api.values(name)
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.NOT_FOUND, exc  # type: ignore[attr-defined]
        return False
    return True


def values(api: Api, name: str) -> list[bytes]:
    return sorted(api.values(name))


def checked(srv: ServerProcess) -> str:
    """Stop the server and run ``compactlog check``: its output (exit 0 asserted)."""
    assert srv.stop() == 0
    done = subprocess.run(
        [*srv.command()[:3], "check", str(srv.data_dir)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _publish_each(api: Api, name: str, count: int, tag: bytes) -> list[bytes]:
    """One record to each partition of ``name`` (a plain topic: one)."""
    targets = [partition_name(name, i) for i in range(count)] if count > 1 else [name]
    for target in targets:
        api.publish(target, tag + target.encode())
    return [tag + t.encode() for t in targets]


@pytest.mark.parametrize(
    ("placement", "kind", "point"),
    [
        _case(p, k, point)
        for p in PLACEMENTS
        for at, point in enumerate(_points(p))
        for k in _kinds(p, at)
    ],
)
def test_kill_9_in_a_partition_change_leaves_it_whole(
    server_factory: Callable[..., ServerProcess], placement: str, kind: str, point: str
) -> None:
    op = point.split("_")[0]
    srv = start(server_factory, placement)
    api = Api(srv.address)
    published: list[bytes] = []
    if op != "create":
        create = pb.CreateTopicRequest(name=Q, kind=KINDS[kind], partitions=BEFORE)
        api.admin.CreateTopic(create, timeout=30)
        published = _publish_each(api, Q, BEFORE, b"before:")
    api.close()
    calls: dict[str, Callable[[Api], object]] = {
        "create": lambda a: a.admin.CreateTopic(
            pb.CreateTopicRequest(name=Q, kind=KINDS[kind], partitions=GROWN), timeout=30
        ),
        "grow": lambda a: a.admin.AddPartitions(
            pb.AddPartitionsRequest(name=Q, partitions=GROWN), timeout=30
        ),
        "delete": lambda a: a.admin.DeleteTopic(pb.DeleteTopicRequest(name=Q), timeout=30),
    }
    crash_in(srv, point, calls[op])

    api = Api(srv.address)
    outcome = 0 if op == "delete" else GROWN  # rolled forward
    wait_for(lambda: whole(api, Q, outcome), 30)
    assert srv.logged("cut short", "finished at start")
    if outcome:
        assert values(api, Q) == sorted(published)  # nothing lost, nothing doubled
        published += _publish_each(api, Q, outcome, b"after:")
        assert values(api, Q) == sorted(published)
    if op == "create":
        with pytest.raises(grpc.RpcError) as again:
            calls[op](api)
        assert again.value.code() == grpc.StatusCode.ALREADY_EXISTS  # type: ignore[attr-defined]
    elif op == "grow":
        calls[op](api)  # the same call again: done already
    else:
        with pytest.raises(grpc.RpcError) as again:
            calls[op](api)
        assert again.value.code() == grpc.StatusCode.NOT_FOUND  # type: ignore[attr-defined]
        calls["create"](api)  # the name is free again, with nothing left of the old one
        assert whole(api, Q, GROWN) and values(api, Q) == []
    api.close()
    assert "cut short" not in checked(srv)


@pytest.mark.parametrize(
    ("placement", "point"),
    [
        pytest.param(p, point, marks=() if (p, point) == QUICK_PLAIN else pytest.mark.slow)
        for p in PLACEMENTS
        for point in PLAIN
    ],
)
def test_kill_9_in_a_plain_topic_change_leaves_it_whole(
    server_factory: Callable[..., ServerProcess], placement: str, point: str
) -> None:
    kind, outcome = PLAIN[point]
    srv = start(server_factory, placement)
    name = "t"
    published: list[bytes] = []
    if "delete" in point:
        api = Api(srv.address)
        api.create(name, kind)
        published = _publish_each(api, name, 1, b"before:")
        api.close()
        crash_in(srv, point, lambda a: a.admin.DeleteTopic(pb.DeleteTopicRequest(name=name)))
    else:
        crash_in(srv, point, lambda a: a.create(name, kind))

    api = Api(srv.address)
    assert whole(api, name, outcome)
    if outcome:
        assert values(api, name) == published
        api.admin.DeleteTopic(pb.DeleteTopicRequest(name=name), timeout=30)
    else:
        with pytest.raises(grpc.RpcError) as gone:
            api.admin.DeleteTopic(pb.DeleteTopicRequest(name=name), timeout=30)
        assert gone.value.code() == grpc.StatusCode.NOT_FOUND  # type: ignore[attr-defined]
    api.create(name, kind)  # the name is free, and nothing of the old topic is left
    assert whole(api, name, 1) and values(api, name) == []
    api.close()
    checked(srv)


def _grow_to_40(api: Api) -> None:
    with contextlib.suppress(grpc.RpcError):  # the server is killed under it
        api.admin.AddPartitions(pb.AddPartitionsRequest(name=Q, partitions=40), timeout=30)


@pytest.mark.slow
def test_the_issues_grow_killed_at_random_times_is_all_or_nothing(
    server_factory: Callable[..., ServerProcess],
) -> None:
    """Issue 27's row: AddPartitions 2 -> 40 on a SEGMENTED topic with ``--shards 2``,
    kill -9 after 0.15-0.4 s. It left Q at 2 partitions with Q-partition-2..17 writable
    on their own, and every later AddPartitions failing TOPIC_EXISTS."""
    srv = start(server_factory, "shards")
    api = Api(srv.address)
    create = pb.CreateTopicRequest(name=Q, kind=SEGMENTED, partitions=2)
    api.admin.CreateTopic(create, timeout=30)
    rng = random.Random()
    for _ in range(4):
        grow = threading.Thread(target=_grow_to_40, args=(api,), daemon=True)
        grow.start()
        time.sleep(rng.uniform(0.15, 0.4))
        srv.kill()
        grow.join(30)
        api.close()
        srv.start()
        api = Api(srv.address)
        count = count_of(api, Q)
        assert count in (2, 40) and whole(api, Q, count), (count, sorted(listed(api, Q)))
        grown = api.admin.AddPartitions(pb.AddPartitionsRequest(name=Q, partitions=40))
        assert grown.partitions == 40 and whole(api, Q, 40)
        api.admin.DeleteTopic(pb.DeleteTopicRequest(name=Q), timeout=60)
        api.admin.CreateTopic(create, timeout=30)
    api.close()


@pytest.mark.slow
def test_a_create_its_home_shard_died_in_is_learnt_without_a_restart(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    """Partition placement: ``Q``'s home shard is killed inside its part of a CreateTopic
    (once: ``COMPACTLOG_CRASH_ONCE``), the supervisor restarts it and its start finishes
    the create; the front lives on and never heard the outcome. The retry answers
    ALREADY_EXISTS as the outcome says, and the front has learnt ``Q`` and made its other
    slots agree: every partition takes a publish and ``Q`` reads whole."""
    srv = server_factory(start=False, **PLACEMENTS["spread"])
    srv.start({ADMIN_ENV: "create_before_record", ONCE_ENV: str(tmp_path / "crashed-once")})
    api = Api(srv.address)
    create = pb.CreateTopicRequest(name=Q, kind=SEGMENTED, partitions=GROWN)
    with pytest.raises(grpc.RpcError) as cut:
        api.admin.CreateTopic(create, timeout=30)
    assert cut.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    wait_for(lambda: any("restarted as pid" in x for x in srv.stderr_lines), 60)

    def retried() -> bool:
        try:
            api.admin.CreateTopic(create, timeout=30)
        except grpc.RpcError as exc:
            code = exc.code()  # type: ignore[attr-defined]
            assert code in (grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.UNAVAILABLE), exc
            return bool(code == grpc.StatusCode.ALREADY_EXISTS)
        raise AssertionError("the retry made the topic a second time")

    wait_for(retried, 60)  # UNAVAILABLE while the shard is still starting
    assert whole(api, Q, GROWN)
    assert srv.logged("repaired spread topic 'q'")
    published = _publish_each(api, Q, GROWN, b"after:")
    api.publish(Q, b"keyed")
    assert values(api, Q) == sorted([*published, b"keyed"])
    assert srv.proc is not None and srv.proc.poll() is None  # the front never restarted
    _partition_names_refused(api)
    api.close()


def _partition_names_refused(api: Api) -> None:
    """The front refuses what no slot alone can see: ``q-partition-6`` as a topic of its
    own (its slot holds no part of ``q``), and a grow of ``r`` over a topic of its own
    under a new partition's name, before any slot grows."""
    plain = pb.CreateTopicRequest(name=partition_name(Q, 6), kind=SEGMENTED)
    with pytest.raises(grpc.RpcError) as refused:
        api.admin.CreateTopic(plain, timeout=30)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    api.create(partition_name("r", 3), SEGMENTED)
    api.admin.CreateTopic(pb.CreateTopicRequest(name="r", kind=SEGMENTED, partitions=2))
    with pytest.raises(grpc.RpcError) as taken:
        api.admin.AddPartitions(pb.AddPartitionsRequest(name="r", partitions=5), timeout=30)
    assert taken.value.code() == grpc.StatusCode.ALREADY_EXISTS  # type: ignore[attr-defined]
    assert "r-partition-3" in str(taken.value.details())  # type: ignore[attr-defined]
    assert count_of(api, "r") == 2
    assert listed(api, "r") == {"r", *(partition_name("r", i) for i in (0, 1, 3))}
