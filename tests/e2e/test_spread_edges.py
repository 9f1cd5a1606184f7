"""Edges of partitioned topics spread over the shards (partition placement), on one real
``serve --shards 2`` for the module: a name check asked once per slot, names a partitioned
topic may not take, a topic of its own racing a create of its base name, and reads racing
a create. Each test uses names of its own."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from compactlog.crash_points import ADMIN_ENV, ONCE_ENV
from compactlog.partitioner import partition_name
from compactlog.rpc_errors import error_info
from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.e2e.shards import SEGMENTED, Api, wait_for

SPREAD_CONFIG = '"shards.placement" = "partition"\n'


@pytest.fixture(scope="module")
def spread(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Api]]:
    folder: Path = tmp_path_factory.mktemp("spread-edges")
    config = folder / "spread.toml"
    config.write_text(SPREAD_CONFIG)
    srv = ServerProcess(folder / "data", config, ["--shards", "2"]).start()
    api = Api(srv.address)
    yield srv, api
    api.close()
    srv.kill()


def refusal(call: object) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as refused:
        call()  # type: ignore[operator]
    return refused.value


def names(api: Api, prefix: str = "") -> list[str]:
    listed = api.admin.ListTopics(pb.ListTopicsRequest(prefix=prefix), timeout=30)
    return [t.name for t in listed.topics]


def test_list_topics_takes_a_prefix_across_the_slots(spread: tuple[ServerProcess, Api]) -> None:
    _, api = spread
    api.admin.CreateTopic(pb.CreateTopicRequest(name="lp", partitions=12), timeout=30)
    api.admin.CreateTopic(pb.CreateTopicRequest(name="lp-other"), timeout=30)
    wanted = [partition_name("lp", i) for i in (1, 10, 11)]
    assert names(api, "lp-partition-1") == sorted(wanted)
    assert names(api, "lp") == sorted(
        ["lp", "lp-other", *(partition_name("lp", i) for i in range(12))]
    )
    whole = [t for t in api.admin.ListTopics(pb.ListTopicsRequest(prefix="lp")).topics]
    assert [t.partitions for t in whole if t.name == "lp"] == [12]  # merged over the slots
    assert names(api, "no-such-") == []


def test_a_grow_checks_its_new_names_once_per_slot(spread: tuple[ServerProcess, Api]) -> None:
    """A grow to hundreds of partitions is refused before any slot grows when one new
    name is a topic of its own (made before ``g``), and goes through once it is deleted."""
    _, api = spread
    taken = partition_name("g", 377)
    api.admin.CreateTopic(pb.CreateTopicRequest(name=taken), timeout=30)
    api.admin.CreateTopic(pb.CreateTopicRequest(name="g", partitions=2), timeout=30)
    grow = pb.AddPartitionsRequest(name="g", partitions=400)
    refused = refusal(lambda: api.admin.AddPartitions(grow, timeout=60))
    assert refused.code() == grpc.StatusCode.ALREADY_EXISTS  # type: ignore[attr-defined]
    assert taken in str(refused.details())  # type: ignore[attr-defined]
    assert api.admin.GetTopic(pb.GetTopicRequest(name="g"), timeout=30).partitions == 2
    assert names(api, "g-") == [partition_name("g", 0), partition_name("g", 1), taken]

    api.admin.DeleteTopic(pb.DeleteTopicRequest(name=taken), timeout=30)
    started = time.monotonic()
    assert api.admin.AddPartitions(grow, timeout=60).partitions == 400
    print(f"grow 2 -> 400 partitions over 8 slots: {time.monotonic() - started:.2f} s")
    assert len(names(api, "g-partition-")) == 400


def test_a_partitioned_topic_named_like_a_partition_is_refused(
    spread: tuple[ServerProcess, Api],
) -> None:
    _, api = spread
    for name in ("n-partition-3", "n-partition-0"):
        create = pb.CreateTopicRequest(name=name, partitions=4)
        refused = refusal(lambda c=create: api.admin.CreateTopic(c, timeout=30))
        assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
        assert "is a partition's name" in str(refused.details())  # type: ignore[attr-defined]
        assert names(api, name) == []


def test_a_topic_named_like_a_partition_races_a_create_and_a_grow_of_its_base(
    spread: tuple[ServerProcess, Api],
) -> None:
    """``X-partition-2`` as a topic of its own sent with CreateTopic ``X`` (4 partitions)
    at once, either first, then ``X-partition-5`` with a grow of ``X`` to 6: the front
    checks and makes the topic of its own under its lock, so the one sent first is made
    and the other refused (a topic of its own always INVALID_TOPIC_NAME, the create
    TOPIC_EXISTS and undone everywhere). Before, the topic of its own slipped past a
    create of ``X`` under way and won every time."""
    _, api = spread
    for k in range(6):
        base = f"race{k}"
        plain = pb.CreateTopicRequest(name=partition_name(base, 2))
        parted = pb.CreateTopicRequest(name=base, partitions=4)
        pair = (parted, plain) if k % 2 else (plain, parted)  # either sent first
        calls = {r.name: api.admin.CreateTopic.future(r, timeout=30) for r in pair}
        made, own = _outcome(calls[base]), _outcome(calls[plain.name])
        assert (made is None) == bool(k % 2), (k, made, own)  # the first sent won
        if made is None:  # the partitioned topic won: the name is its partition's
            assert own == "INVALID_TOPIC_NAME", own
            assert names(api, base) == [base, *(partition_name(base, i) for i in range(4))]
        else:  # the topic of its own won: the create refused and undone everywhere
            assert (made, own) == ("TOPIC_EXISTS", None)
            assert names(api, base) == [partition_name(base, 2)]
            continue
        grow = pb.AddPartitionsRequest(name=base, partitions=6)
        late = pb.CreateTopicRequest(name=partition_name(base, 5))
        calls = [api.admin.AddPartitions.future(grow, timeout=30)]
        calls.append(api.admin.CreateTopic.future(late, timeout=30))
        assert [_outcome(c) for c in calls] == [None, "INVALID_TOPIC_NAME"]
        assert names(api, base) == [base, *(partition_name(base, i) for i in range(6))]


def _outcome(call: grpc.Future) -> str | None:
    """None when the call succeeded, else its ErrorInfo reason."""
    try:
        call.result()
    except grpc.RpcError as exc:
        info = error_info(exc)
        assert info is not None, exc
        return str(info.reason)
    return None


@pytest.mark.slow
def test_reads_racing_a_learnt_create_never_answer_not_found(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    """``lr``'s home shard is killed inside its part of a CreateTopic (once); its restart
    finishes that part, and the retry has the front learn ``lr`` and repair the other
    slots, each making its partitions before its record. Reads and Consumes of ``lr``
    sent all along never answer NOT_FOUND once ListTopics lists ``lr`` (UNAVAILABLE while
    the shard restarts, retryable): a slot without its record yet makes the call wait
    for the repair and ask again. Before, they answered NOT_FOUND during the repair."""
    srv = server_factory(start=False, config=SPREAD_CONFIG, extra_args=["--shards", "2"])
    srv.start({ADMIN_ENV: "create_before_record", ONCE_ENV: str(tmp_path / "crashed-once")})
    api = Api(srv.address)
    count = 8
    create = pb.CreateTopicRequest(name="lr", kind=SEGMENTED, partitions=count)
    assert refusal(lambda: api.admin.CreateTopic(create, timeout=30)).code() == (
        grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    )
    wait_for(lambda: any("restarted as pid" in x for x in srv.stderr_lines), 60)
    wanted = ["lr", *sorted(partition_name("lr", i) for i in range(count))]
    seen: list[tuple[bool, str]] = []  # (lr listed first, the call's outcome)
    whole: list[bool] = []  # every partition listed
    stop = threading.Event()

    def reader(k: int) -> None:
        own = Api(srv.address)
        consume = pb.ConsumeRequest(topic="lr", subscription=f"s{k}", max_messages=5)
        calls = (lambda: own.values("lr"), lambda: own.log.Consume(consume, timeout=30))
        while not stop.is_set():
            shown = names(own, "lr")
            listed = "lr" in shown
            whole.append(shown == wanted)
            for call in calls:
                try:
                    call()
                    seen.append((listed, "OK"))
                except grpc.RpcError as exc:
                    seen.append((listed, exc.code().name))  # type: ignore[attr-defined]
        own.close()

    readers = [threading.Thread(target=reader, args=(k,)) for k in range(3)]
    for thread in readers:
        thread.start()

    def retried() -> bool:
        try:
            api.admin.CreateTopic(create, timeout=30)
        except grpc.RpcError as exc:
            return bool(exc.code() == grpc.StatusCode.ALREADY_EXISTS)  # type: ignore[attr-defined]
        raise AssertionError("the retry made the topic a second time")

    try:
        wait_for(retried, 60)
        time.sleep(0.5)
    finally:
        stop.set()
        for thread in readers:
            thread.join()
    print("outcomes:", collections.Counter(seen))
    assert [s for s in seen if s[0] and s[1] not in ("OK", "UNAVAILABLE")] == []
    assert (True, "OK") in seen and any(whole)
