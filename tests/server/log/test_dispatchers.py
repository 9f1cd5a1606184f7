"""The in-memory consumer state of a subscription (``server.log.dispatchers``), on a fake
clock: who may receive, what is pending for whom, what falls due again and when."""

from __future__ import annotations

import pytest

from compactlog.errors import ConsumerBusy
from compactlog.server.log.dispatchers import Dispatcher, type_of
from compactlog.storage.cursor import SUBSCRIPTION_TYPE_PROPERTY, Cursor
from compactlog.storage.types import MessageId
from compactlog.v1 import compactlog_pb2 as pb


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def dispatcher(sub_type: int, clock: Clock) -> Dispatcher:
    return Dispatcher("t", "s", sub_type, 30.0, clock)  # type: ignore[arg-type]


def ids(*entries: int) -> list[MessageId]:
    return [MessageId(1, e) for e in entries]


def test_exclusive_holder_is_busy_for_others_until_gone() -> None:
    clock = Clock()
    d = dispatcher(pb.EXCLUSIVE, clock)
    assert d.admit("a").receive and not d.admit("a").rewind
    with pytest.raises(ConsumerBusy):
        d.admit("b")
    clock.now += 29.9
    with pytest.raises(ConsumerBusy):
        d.admit("b")
    clock.now += 0.2
    taken = d.admit("b")
    assert taken.receive and taken.rewind


def test_failover_chooses_the_first_live_name() -> None:
    clock = Clock()
    d = dispatcher(pb.FAILOVER, clock)
    assert d.admit("m").receive
    late = d.admit("c")  # c sorts first: it takes over, from the mark-delete position
    assert late.receive and late.rewind
    assert not d.admit("m").receive
    clock.now += 20
    d.admit("m")
    clock.now += 15  # c last seen 35 s ago, m 15 s ago
    back = d.admit("m")
    assert back.receive and back.rewind


def test_shared_pending_falls_due_after_the_ack_timeout_and_goes_to_anyone() -> None:
    clock = Clock()
    d = dispatcher(pb.SHARED, clock)
    d.delivered("a", ids(0, 1, 2), ack_timeout_ms=500)
    d.acknowledged(MessageId(1, 1), cumulative=False)
    assert d.ready(10) == []
    assert d.next_due() == pytest.approx(0.5)
    clock.now += 0.5
    assert d.ready(10) == ids(0, 2)
    d.delivered("b", ids(0), ack_timeout_ms=0)
    assert d.ready(10) == ids(2)


def test_negative_acks_wait_for_their_delay_and_cumulative_acks_clear() -> None:
    clock = Clock()
    d = dispatcher(pb.EXCLUSIVE, clock)
    d.negative(ids(3, 1), delay_ms=1000)
    assert d.ready(10) == [] and d.next_due() == pytest.approx(1.0)
    clock.now += 1
    assert d.ready(1) == ids(1)
    d.acknowledged(MessageId(1, 2), cumulative=True)
    assert d.ready(10) == ids(3)


def test_a_shared_consumer_that_is_gone_leaves_its_messages_to_the_others() -> None:
    clock = Clock()
    d = dispatcher(pb.SHARED, clock)
    d.admit("a")
    d.delivered("a", ids(0, 1), ack_timeout_ms=0)
    d.admit("b")
    d.delivered("b", ids(2), ack_timeout_ms=0)
    clock.now += 31
    d.admit("b")
    assert d.ready(10) == ids(0, 1, 2)  # b's own is released too: it was silent as long


def test_release_and_rewind() -> None:
    clock = Clock()
    d = dispatcher(pb.SHARED, clock)
    d.delivered("a", ids(0), 0)
    d.delivered("b", ids(1), 0)
    d.release("a")
    assert d.ready(10) == ids(0)
    d.rewound()
    assert d.ready(10) == [] and not d.pending


def test_type_of_a_cursor() -> None:
    assert type_of(Cursor("old")) == pb.EXCLUSIVE
    shared = Cursor("new", properties={SUBSCRIPTION_TYPE_PROPERTY: "SHARED"})
    assert type_of(shared) == pb.SHARED
    d = dispatcher(pb.SHARED, Clock())
    with pytest.raises(ConsumerBusy):
        d.check_type(pb.FAILOVER)


@pytest.mark.parametrize("sub_type", [pb.EXCLUSIVE, pb.FAILOVER])
def test_a_closed_consumer_is_gone_at_once(sub_type: int) -> None:
    clock = Clock()
    d = dispatcher(sub_type, clock)
    assert d.admit("a").receive
    d.close("a")
    clock.now += 0.1  # far inside the liveness period
    taken = d.admit("z")  # sorts after a, and still takes over
    assert taken.receive and taken.rewind


def test_a_closed_shared_consumer_hands_its_pending_messages_on() -> None:
    clock = Clock()
    d = dispatcher(pb.SHARED, clock)
    d.delivered("a", ids(0, 1), ack_timeout_ms=0)
    d.delivered("b", ids(2), ack_timeout_ms=0)
    assert d.ready(10) == []
    d.close("a")
    assert d.ready(10) == ids(0, 1)


def test_a_consume_begun_before_the_close_sees_it_one_begun_after_does_not() -> None:
    clock = Clock()
    d = dispatcher(pb.SHARED, clock)
    begun = clock.now
    clock.now += 1
    d.close("a")
    assert d.closed_since("a", begun)
    assert not d.closed_since("a", clock.now + 0.1)
    assert not d.closed_since("b", begun)
