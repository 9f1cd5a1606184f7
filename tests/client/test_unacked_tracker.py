"""The ack timeout's tracker on its own, on a clock the test moves (no server, no sleep):
a message is timed from the moment it is handed over, goes back at the first tick at or
after its timeout (so between the timeout and the timeout plus a tick, pulsar-client's
bounds), and an acknowledgement, a cumulative one (of its partition only) or a negative
one takes it off."""

from __future__ import annotations

import pytest

from compactlog.client.message import Message, messages_of
from compactlog.client.unacked_tracker import UnackedTracker, key_of
from compactlog.v1 import compactlog_pb2 as pb


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def wire(*ids: tuple[int, int, int]) -> list[Message]:
    """Messages as a consumer's response makes them, with ids (partition, ledger, entry)."""
    batch = [
        pb.Message(id=pb.MessageId(partition=p, ledger_id=ledger, entry_id=entry))
        for p, ledger, entry in ids
    ]
    return messages_of(batch, "t")


def keys(expired: list[pb.MessageId]) -> list[tuple[int, int, int]]:
    return [(m.partition, m.ledger_id, m.entry_id) for m in expired]


def test_a_message_goes_back_at_the_first_tick_after_its_timeout() -> None:
    clock = Clock()
    tracker = UnackedTracker(2000, tick_s=1.0, clock=clock)
    assert tracker.due() is None  # nothing timed: nothing to wait for
    clock.now += 0.3  # handed over 0.3 s after a tick
    [msg] = wire((0, 5, 1))
    assert tracker.add([msg]) is True  # the first: the carrier has a deadline again
    assert tracker.due() == pytest.approx(103.0)  # 2.3 s later: the tick at 3 s
    clock.now = 102.9
    assert tracker.expire() == []
    clock.now = 103.0
    assert keys(tracker.expire()) == [(0, 5, 1)]
    assert tracker.due() is None and len(tracker) == 0


def test_expiry_lies_between_the_timeout_and_the_timeout_plus_a_tick() -> None:
    clock = Clock()
    tracker = UnackedTracker(1500, tick_s=1.0, clock=clock)
    for offset in (0.0, 0.2, 0.5, 0.99):
        clock.now = 200.0 + offset
        [msg] = wire((0, 1, int(offset * 100)))
        tracker.add([msg])
        due = tracker.due()
        assert due is not None
        assert 1.5 <= due - clock.now < 2.5
        clock.now = due
        assert len(tracker.expire()) == 1


def test_messages_in_the_queue_are_not_timed_until_handed_over() -> None:
    """Only what ``add`` is given is timed: a message handed over later is timed from
    then, and one handed over again is timed anew."""
    clock = Clock()
    tracker = UnackedTracker(1000, tick_s=1.0, clock=clock)
    first, second = wire((0, 1, 0), (0, 1, 1))
    tracker.add([first])
    clock.now += 5.0  # the second waited in the queue all this time
    assert tracker.add([second]) is False  # the tracker was not empty
    assert keys(tracker.expire()) == [(0, 1, 0)]
    assert tracker.due() == pytest.approx(106.0)
    tracker.add([first])  # the first, redelivered and handed over again
    clock.now = 106.0
    assert keys(tracker.expire()) == [(0, 1, 1), (0, 1, 0)]


def test_acks_cumulative_acks_and_negative_acks_take_ids_off() -> None:
    clock = Clock()
    tracker = UnackedTracker(1000, tick_s=1.0, clock=clock)
    msgs = wire((0, 1, 0), (0, 1, 1), (0, 2, 0), (1, 1, 0), (1, 3, 0))
    tracker.add(msgs)
    tracker.remove(msgs[2])  # an ack (or a negative one) of a message
    tracker.remove(pb.MessageId(partition=1, ledger_id=3, entry_id=0))  # of a wire id
    tracker.remove_upto(pb.MessageId(partition=0, ledger_id=1, entry_id=1))  # partition 0 only
    clock.now += 1.0
    assert keys(tracker.expire()) == [(1, 1, 0)]
    tracker.add(msgs[:2])
    tracker.clear()  # a close, a seek, a redelivery of everything
    clock.now += 5.0
    assert tracker.due() is None and tracker.expire() == []


def test_a_timeout_under_a_tick_is_its_own_tick() -> None:
    clock = Clock()
    tracker = UnackedTracker(300, tick_s=1.0, clock=clock)
    assert tracker.tick_s == pytest.approx(0.3)
    clock.now += 0.1
    tracker.add(wire((0, 1, 0)))
    due = tracker.due()
    assert due is not None and 0.3 <= due - clock.now < 0.6


def test_a_message_built_from_its_fields_is_not_timed() -> None:
    tracker = UnackedTracker(1000)
    made = Message((1, 2), b"k", b"v")
    assert key_of(made) is None
    assert tracker.add([made]) is False and tracker.due() is None
    tracker.remove(made)  # nothing to take off, no error


def test_timeouts_and_ticks_are_positive() -> None:
    with pytest.raises(ValueError):
        UnackedTracker(0)
    with pytest.raises(ValueError):
        UnackedTracker(1000, tick_s=0)
