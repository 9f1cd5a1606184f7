"""Retries through gRPC's service config (``channels.retry_service_config``): only calls
that change nothing are retried, only on UNAVAILABLE, and a real channel accepts it."""

from __future__ import annotations

import json

from compactlog.channels import IDEMPOTENT_CALLS, retry_service_config
from compactlog.client import Client
from compactlog.v1 import compactlog_pb2 as pb

PLANNED = {"ListSubscriptions", "GetPartitionMap", "GetKeyHistory"}  # CONTRACT §6, §8, §9
MUTATING = {
    "Publish",
    "PublishStream",
    "Consume",
    "Acknowledge",
    "CreateTopic",
    "DeleteTopic",
    "UpdateTopicConfig",
    "Compact",
    "CancelCompaction",
    "EnforceRetention",
    "DeleteRecords",
}


def test_the_policy_names_only_calls_that_change_nothing() -> None:
    config = json.loads(retry_service_config())
    (method_config,) = config["methodConfig"]
    policy = method_config["retryPolicy"]
    assert policy["retryableStatusCodes"] == ["UNAVAILABLE"] and policy["maxAttempts"] >= 2
    named = {(n["service"], n["method"]) for n in method_config["name"]}
    assert named == {(s, m) for s, ms in IDEMPOTENT_CALLS.items() for m in ms}
    for service, method in named:
        assert method not in MUTATING
        short = service.rsplit(".", 1)[1]
        known = pb.DESCRIPTOR.services_by_name[short].methods_by_name
        assert method in known or method in PLANNED, (service, method)


def test_a_client_channel_takes_the_config(shared_server, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    with Client(shared_server.address) as client:
        client.create_topic(unique_topic)
        assert client.get_topic(unique_topic).name == unique_topic
