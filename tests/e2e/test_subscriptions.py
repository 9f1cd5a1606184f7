"""Subscription types, redelivery and the subscription admin calls (CONTRACT section 6),
against a real server process, on both topic kinds.

The server runs with a consumer liveness of 2 s (``COMPACTLOG_CONSUMER_LIVENESS_MS``;
30 s in production), so exclusive takeover and failover are quick to see.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest

from compactlog.client import (
    Client,
    ConsumerBusy,
    InitialPosition,
    Message,
    MessageId,
    NotDelivered,
    PermissionDenied,
    ReservedSubscription,
    SubscriptionNotFound,
    Timeout,
)
from compactlog.client.consumer import Consumer
from compactlog.v1 import compactlog_pb2 as pb

LIVENESS_S = 2.0
KINDS = ["ledger", "segmented"]


@pytest.fixture(scope="module")
def server(server_class, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:  # type: ignore[no-untyped-def]
    env = {"COMPACTLOG_CONSUMER_LIVENESS_MS": str(int(LIVENESS_S * 1000))}
    srv = server_class(tmp_path_factory.mktemp("subscriptions") / "data", env=env).start()
    yield srv
    srv.kill()


@pytest.fixture
def client(server) -> Iterator[Client]:  # type: ignore[no-untyped-def]
    with Client(server.address, timeout=30) as c:
        yield c


@pytest.fixture(params=KINDS)
def topic(request: pytest.FixtureRequest, client: Client, unique_topic: str) -> str:
    client.create_topic(unique_topic, kind=request.param)
    return unique_topic


def publish(client: Client, topic: str, count: int, start: int = 0) -> list[MessageId]:
    records = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(start, start + count)]
    stub = client._log  # the wire call, whatever shape the producer API takes
    reply = stub.Publish(
        pb.PublishRequest(topic=topic, records=[pb.Record(key=k, value=v) for k, v in records]),
        timeout=30,
    )
    return [MessageId(ledger_id=i.ledger_id, entry_id=i.entry_id) for i in reply.ids]


def drain(consumer: Consumer, timeout_ms: int = 300) -> list[Message]:
    """Everything the consumer receives until nothing comes within ``timeout_ms``."""
    got: list[Message] = []
    while True:
        try:
            got.append(consumer.receive(timeout_ms))
        except Timeout:
            return got


# ---- EXCLUSIVE ---------------------------------------------------------------------------


def test_exclusive_refuses_another_name_then_lets_it_take_over(client: Client, topic: str) -> None:
    ids = publish(client, topic, 3)
    a = client.subscribe(
        topic,
        "ex",
        consumer_name="a",
        receiver_queue_size=1,
        initial_position=InitialPosition.Earliest,
    )
    first = a.receive(5000)
    assert first.id == ids[0]
    a.acknowledge(first)
    assert a.receive(5000).id == ids[1]  # given to a, not acknowledged
    with pytest.raises(ConsumerBusy) as info:  # subscribe joins at once, as pulsar-client
        client.subscribe(topic, "ex", consumer_name="b", initial_position=InitialPosition.Earliest)
    assert info.value.code == "FAILED_PRECONDITION"
    time.sleep(LIVENESS_S + 0.3)  # a stops consuming: after the liveness period it is gone
    b = client.subscribe(topic, "ex", consumer_name="b", initial_position=InitialPosition.Earliest)
    taken = drain(b)
    assert [m.id for m in taken] == ids[1:]  # from the mark-delete position on
    with pytest.raises(ConsumerBusy):  # now b holds it
        a.receive(200)


def test_raw_callers_without_names_are_one_anonymous_consumer(client: Client, topic: str) -> None:
    """Over raw gRPC the empty name is one consumer shared by every caller that sends it
    (the Python client names its consumers: tests/client/test_consumer_lifecycle.py)."""
    ids = publish(client, topic, 2)

    def consume(redeliver: bool) -> list[MessageId]:
        req = pb.ConsumeRequest(
            topic=topic, subscription="plain", max_messages=1, redeliver_unacknowledged=redeliver
        )
        return [
            MessageId(ledger_id=m.id.ledger_id, entry_id=m.id.entry_id)
            for m in client._log.Consume(req).messages
        ]

    assert consume(False) == ids[:1]
    assert consume(False) == ids[1:]  # the same consumer reads on: no CONSUMER_BUSY
    assert consume(True) == ids[:1]  # and starts over when it asks


def test_a_subscription_keeps_its_type(client: Client, topic: str) -> None:
    publish(client, topic, 1)
    client.subscribe(
        topic,
        "typed",
        consumer_type="shared",
        consumer_name="a",
        initial_position=InitialPosition.Earliest,
    ).receive(5000)
    for other in ("exclusive", "failover"):
        with pytest.raises(ConsumerBusy) as info:
            client.subscribe(
                topic,
                "typed",
                consumer_type=other,
                consumer_name="a",
                initial_position=InitialPosition.Earliest,
            )
        assert "SHARED" in str(info.value)
    [sub] = [s for s in client.list_subscriptions(topic) if s.name == "typed"]
    assert sub.type == "SHARED"


# ---- SHARED ------------------------------------------------------------------------------


def test_shared_consumers_split_the_messages_with_no_duplicates(client: Client, topic: str) -> None:
    ids = publish(client, topic, 20)
    a = client.subscribe(
        topic,
        "sh",
        consumer_type="shared",
        consumer_name="a",
        receiver_queue_size=1,
        initial_position=InitialPosition.Earliest,
    )
    b = client.subscribe(
        topic,
        "sh",
        consumer_type="shared",
        consumer_name="b",
        receiver_queue_size=1,
        initial_position=InitialPosition.Earliest,
    )
    got: dict[str, list[MessageId]] = {"a": [], "b": []}
    for _ in range(10):
        for name, consumer in (("a", a), ("b", b)):
            msg = consumer.receive(5000)
            got[name].append(msg.id)
            consumer.acknowledge(msg)
    assert got["a"] and got["b"]
    assert not set(got["a"]) & set(got["b"])
    assert sorted(got["a"] + got["b"]) == ids
    assert drain(a, 200) == [] and drain(b, 200) == []


def test_shared_unacked_messages_go_out_again_after_the_ack_timeout(
    client: Client, topic: str
) -> None:
    [only] = publish(client, topic, 1)
    kw = {
        "consumer_type": "shared",
        "unacked_messages_timeout_ms": 1500,
        "receiver_queue_size": 1,
        "initial_position": InitialPosition.Earliest,
    }
    a = client.subscribe(topic, "timeout", consumer_name="a", **kw)  # type: ignore[arg-type]
    b = client.subscribe(topic, "timeout", consumer_name="b", **kw)  # type: ignore[arg-type]
    given = time.monotonic()
    assert a.receive(5000).id == only
    with pytest.raises(Timeout):  # not twice before the timeout
        b.receive(300)
    again = b.receive(5000)
    assert again.id == only and time.monotonic() - given >= 1.4
    b.acknowledge(again)
    assert drain(a, 1800) == [] and drain(b, 200) == []  # acked: never again


def test_a_closed_shared_consumer_hands_what_it_held_to_the_others(
    client: Client, topic: str
) -> None:
    ids = publish(client, topic, 4)
    a = client.subscribe(
        topic,
        "handover",
        consumer_type="shared",
        consumer_name="a",
        initial_position=InitialPosition.Earliest,
    )
    assert a.receive(5000).id == ids[0]  # the other three wait in a's buffer
    a.close()  # CloseConsumer: all four were a's, unacknowledged
    b = client.subscribe(
        topic,
        "handover",
        consumer_type="shared",
        consumer_name="b",
        initial_position=InitialPosition.Earliest,
    )
    assert [m.id for m in drain(b)] == ids


# ---- negative acknowledgement ------------------------------------------------------------


@pytest.mark.parametrize("kind", ["exclusive", "shared"])
def test_a_negative_acknowledgement_redelivers_after_the_delay(
    client: Client, topic: str, kind: str
) -> None:
    ids = publish(client, topic, 2)
    consumer = client.subscribe(
        topic,
        f"nack-{kind}",
        consumer_type=kind,
        receiver_queue_size=1,
        negative_ack_redelivery_delay_ms=1500,
        initial_position=InitialPosition.Earliest,
    )
    first = consumer.receive(5000)
    assert first.id == ids[0]
    nacked = time.monotonic()
    consumer.negative_acknowledge(first)
    second = consumer.receive(5000)
    assert second.id == ids[1]
    consumer.acknowledge(second)
    again = consumer.receive(5000)
    assert again.id == ids[0] and time.monotonic() - nacked >= 1.4
    assert again.value == first.value
    consumer.acknowledge(again)
    assert drain(consumer, 500) == []


def test_a_negative_acknowledgement_of_an_id_never_delivered_is_refused(
    client: Client, topic: str
) -> None:
    ids = publish(client, topic, 2)
    consumer = client.subscribe(
        topic, "nack-early", receiver_queue_size=1, initial_position=InitialPosition.Earliest
    )
    consumer.receive(5000)
    with pytest.raises(NotDelivered):
        consumer.negative_acknowledge(ids[1])


def test_default_negative_ack_delay_is_pulsars_minute(client: Client, topic: str) -> None:
    publish(client, topic, 1)
    consumer = client.subscribe(
        topic, "nack-default", receiver_queue_size=1, initial_position=InitialPosition.Earliest
    )
    consumer.negative_acknowledge(consumer.receive(5000))
    with pytest.raises(Timeout):  # not after one second (this client's old default)
        consumer.receive(2000)


# ---- FAILOVER ----------------------------------------------------------------------------


def test_failover_delivers_to_the_first_name_then_fails_over(client: Client, topic: str) -> None:
    ids = publish(client, topic, 4)
    kw = {
        "consumer_type": "failover",
        "receiver_queue_size": 1,
        "initial_position": InitialPosition.Earliest,
    }
    b = client.subscribe(topic, "fo", consumer_name="b", **kw)  # type: ignore[arg-type]
    a = client.subscribe(topic, "fo", consumer_name="a", **kw)  # type: ignore[arg-type]
    assert b.receive(5000).id == ids[0]  # alone: b is active
    first = a.receive(5000)  # a comes first by name: it takes over from the mark-delete
    assert first.id == ids[0]
    a.acknowledge(first)
    with pytest.raises(Timeout):
        b.receive(400)  # standing by
    assert a.receive(5000).id == ids[1]  # not acknowledged
    time.sleep(LIVENESS_S + 0.3)  # a is gone
    assert [m.id for m in drain(b)] == ids[1:]


# ---- admin: list, delete, reset ------------------------------------------------------------


def test_list_shows_type_mark_delete_and_backlog(client: Client, topic: str) -> None:
    ids = publish(client, topic, 5)
    consumer = client.subscribe(
        topic, "listed", receiver_queue_size=5, initial_position=InitialPosition.Earliest
    )
    for msg in [consumer.receive(5000) for _ in range(3)]:
        consumer.acknowledge(msg)
    consumer.close()  # acks are queued; close returns once they are stored
    [sub] = [s for s in client.list_subscriptions(topic) if s.name == "listed"]
    assert sub.type == "EXCLUSIVE"
    assert sub.mark_delete == ids[2]
    assert sub.backlog == 2


def _consume_all(client: Client, topic: str, sub: str) -> list[MessageId]:
    consumer = client.subscribe(
        topic, sub, receiver_queue_size=100, initial_position=InitialPosition.Earliest
    )
    try:
        got = drain(consumer)
        for msg in got:
            consumer.acknowledge(msg)
        return [m.id for m in got]
    finally:
        consumer.close()


def test_reset_to_positions_ids_and_times(client: Client, topic: str) -> None:
    before = publish(client, topic, 3)
    time.sleep(0.05)
    cut_ms = int(time.time() * 1000)
    time.sleep(0.05)
    after = publish(client, topic, 3, start=3)
    everything = before + after
    assert _consume_all(client, topic, "r") == everything

    info = client.reset_cursor(topic, "r", position="earliest")
    assert info.mark_delete is None and info.backlog == 6
    assert _consume_all(client, topic, "r") == everything

    info = client.reset_cursor(topic, "r", message_id=everything[2])  # inclusive
    assert info.mark_delete is not None and info.backlog == 4
    assert _consume_all(client, topic, "r") == everything[2:]

    client.reset_cursor(topic, "r", timestamp_ms=cut_ms)
    assert _consume_all(client, topic, "r") == after

    info = client.reset_cursor(topic, "r", position="latest")
    assert info.backlog == 0 and info.mark_delete == everything[-1]
    assert _consume_all(client, topic, "r") == []
    more = publish(client, topic, 1, start=6)
    assert _consume_all(client, topic, "r") == more


def test_reset_forgets_individual_acks(client: Client, topic: str) -> None:
    ids = publish(client, topic, 3)
    consumer = client.subscribe(
        topic, "holes", receiver_queue_size=3, initial_position=InitialPosition.Earliest
    )
    got = [consumer.receive(5000) for _ in range(3)]
    consumer.acknowledge(got[1])  # a hole-y ack: 1 acked, 0 and 2 not
    consumer.close()
    [sub] = [s for s in client.list_subscriptions(topic) if s.name == "holes"]
    assert sub.backlog == 2
    client.reset_cursor(topic, "holes", position="earliest")
    assert _consume_all(client, topic, "holes") == ids


def test_delete_subscription(client: Client, topic: str) -> None:
    ids = publish(client, topic, 2)
    assert _consume_all(client, topic, "gone") == ids
    client.delete_subscription(topic, "gone")
    assert "gone" not in [s.name for s in client.list_subscriptions(topic)]
    with pytest.raises(SubscriptionNotFound):
        client.delete_subscription(topic, "gone")
    with pytest.raises(SubscriptionNotFound):
        client.reset_cursor(topic, "gone", position="earliest")
    assert _consume_all(client, topic, "gone") == ids  # a new subscription, from the start


def test_unknown_subscription_and_topic(client: Client, topic: str, expect_error) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SubscriptionNotFound) as info:
        client.reset_cursor(topic, "nobody", position="latest")
    assert info.value.code == "NOT_FOUND"
    assert client.list_subscriptions(topic) == []
    stub = client._admin
    code = expect_error(lambda: stub.ListSubscriptions(pb.ListSubscriptionsRequest(topic="t-none")))
    assert code == grpc.StatusCode.NOT_FOUND


def test_reserved_subscriptions_are_listed_but_not_moved_or_deleted(
    client: Client, unique_topic: str
) -> None:
    client.create_topic(unique_topic, config={"compaction.threshold.bytes": "1048576"})
    publish(client, unique_topic, 3)
    client.compact(unique_topic, wait=True)
    names = [s.name for s in client.list_subscriptions(unique_topic)]
    assert "__compaction" in names
    with pytest.raises(ReservedSubscription) as info:
        client.delete_subscription(unique_topic, "__compaction")
    assert isinstance(info.value, PermissionDenied)
    with pytest.raises(ReservedSubscription):
        client.reset_cursor(unique_topic, "__compaction", position="earliest")
    with pytest.raises(ReservedSubscription):
        client.reset_cursor(unique_topic, "__anything", position="earliest")
    assert "__compaction" in [s.name for s in client.list_subscriptions(unique_topic)]


@pytest.mark.parametrize("kind", KINDS)
def test_cursor_reset_and_types_survive_a_restart(  # type: ignore[no-untyped-def]
    server_class, tmp_path, unique_topic: str, kind: str
) -> None:
    srv = server_class(tmp_path / "data").start()
    try:
        with Client(srv.address) as c:
            c.create_topic(unique_topic, kind=kind)
            ids = publish(c, unique_topic, 3)
            assert _consume_all(c, unique_topic, "keep") == ids
            c.subscribe(
                unique_topic,
                "sh",
                consumer_type="shared",
                initial_position=InitialPosition.Earliest,
            ).receive(5000)
            c.reset_cursor(unique_topic, "keep", message_id=ids[1])
            c.delete_subscription(unique_topic, "keep")
            c.subscribe(unique_topic, "keep2", initial_position=InitialPosition.Earliest).receive(
                5000
            )
            c.reset_cursor(unique_topic, "keep2", message_id=ids[1])
        srv.restart()
        with Client(srv.address) as c:
            subs = {s.name: s for s in c.list_subscriptions(unique_topic)}
            assert set(subs) == {"keep2", "sh"}
            assert subs["sh"].type == "SHARED"
            assert subs["keep2"].mark_delete == ids[0] and subs["keep2"].backlog == 2
            assert _consume_all(c, unique_topic, "keep2") == ids[1:]
    finally:
        srv.kill()
