"""``client/wire_compat.py``: CONTRACT §6's consumer fields go on the wire exactly when the
generated proto has them, and nothing breaks while it does not. The test checks both
states, so it keeps its meaning the day the fields land."""

from __future__ import annotations

from compactlog.client import ConsumerType, InitialPosition
from compactlog.client import wire_compat as wire
from compactlog.client.consumer_state import ConsumerState
from compactlog.v1 import compactlog_pb2 as pb


def test_consumer_type_and_name_travel_when_the_proto_has_them() -> None:
    state = ConsumerState(
        "t",
        "s",
        initial_position=InitialPosition.Latest,
        consumer_type=ConsumerType.Shared,
        consumer_name="worker-1",
    )
    req = state.consume_request(10, 0)
    assert req.initial_position == pb.LATEST and req.redeliver_unacknowledged
    fields = {f.name: v for f, v in req.ListFields()}
    if wire.HAS_SUBSCRIPTION_TYPE:
        assert fields["subscription_type"] == 1  # SHARED
    else:
        assert "subscription_type" not in fields
    if wire.HAS_CONSUMER_NAME:
        assert fields["consumer_name"] == "worker-1"
    else:
        assert "consumer_name" not in fields
    assert [t.value for t in ConsumerType] == [0, 1, 2]  # EXCLUSIVE, SHARED, FAILOVER
