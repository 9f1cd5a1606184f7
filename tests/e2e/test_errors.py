"""Every reason of CONTRACT section 5 that a real server call can reach, table-driven:
the raw status (code, and the ``google.rpc.ErrorInfo`` of its ``grpc-status-details-bin``
trailer: domain, reason, metadata) and the exception class the client raises for it.

Not reachable here, and listed in ``PENDING``: CONSUMER_BUSY (subscription types). The
resource faults are reached on servers of their own (``OWN_SERVER``): DISK_FULL on a full
tmpfs, STORAGE_UNAVAILABLE with a write permission gone, FILE_LIMIT under prlimit.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from compactlog import errors
from compactlog.client import Client, InitialPosition
from compactlog.rpc_errors import from_rpc_error
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

from ..conftest import write_tokens_file

CONTRACT_REASONS = set(errors.BY_REASON)
PENDING = {"CONSUMER_BUSY"}
S = grpc.StatusCode


def error_info(err: grpc.RpcError) -> error_details_pb2.ErrorInfo:
    """The one ErrorInfo of a failed call's rich status, read as any gRPC client would."""
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    assert status is not None, f"no grpc-status-details-bin trailer on {err}"
    assert status.code == err.code().value[0] and status.message == err.details()
    assert len(status.details) == 1
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    return info


def check(
    err: grpc.RpcError,
    code: grpc.StatusCode,
    reason: str,
    metadata: dict[str, str],
    method: str,
) -> errors.CompactlogError:
    """The raw status and the client's exception for it agree with the contract."""
    assert err.code() == code, err.details()
    info = error_info(err)
    assert (info.domain, info.reason) == ("compactlog", reason)
    assert metadata.items() <= dict(info.metadata).items(), dict(info.metadata)
    exc = from_rpc_error(err, method, "server")
    assert type(exc) is errors.BY_REASON[reason]
    assert exc.metadata == dict(info.metadata) and str(exc) == err.details()
    return exc


class Api:
    """Raw stubs of the three services on one channel."""

    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.admin = pb_grpc.TopicAdminStub(self.channel)
        self.log = pb_grpc.LogStub(self.channel)
        self.engine = pb_grpc.CompactionEngineStub(self.channel)

    def create(self, name: str, kind: int = pb.LEDGER, **config: str) -> None:
        cfg = {k.replace("_", "."): v for k, v in config.items()}
        self.admin.CreateTopic(pb.CreateTopicRequest(name=name, kind=kind, config=cfg))

    def publish(self, topic: str, count: int, size: int = 1) -> list[pb.MessageId]:
        records = [pb.Record(key=b"k%d" % i, value=b"v" * size) for i in range(count)]
        return list(self.log.Publish(pb.PublishRequest(topic=topic, records=records)).ids)

    def raw(self, method: str, data: bytes) -> bytes:
        call = self.channel.unary_unary(method)
        reply: bytes = call(data, timeout=10)
        return reply


@pytest.fixture
def api(shared_server: Any) -> Iterator[Api]:
    made = Api(shared_server.address)
    yield made
    made.channel.close()


# ---- the cases ------------------------------------------------------------------------


def _topic_not_found(api: Api, t: str) -> object:
    return api.admin.GetTopic(pb.GetTopicRequest(name=t))


def _topic_exists(api: Api, t: str) -> object:
    api.create(t)
    return api.admin.CreateTopic(pb.CreateTopicRequest(name=t))


def _invalid_topic_name(api: Api, t: str) -> object:
    return api.admin.CreateTopic(pb.CreateTopicRequest(name="a/b"))


def _unknown_config_key(api: Api, t: str) -> object:
    return api.admin.CreateTopic(pb.CreateTopicRequest(name=t, config={"no.such.key": "1"}))


def _bad_config_value(api: Api, t: str) -> object:
    api.create(t)
    req = pb.UpdateTopicConfigRequest(name=t, set={"retention.ms": "-7"})
    return api.admin.UpdateTopicConfig(req)


def _wrong_topic_kind(api: Api, t: str) -> object:
    api.create(t)
    return api.admin.DeleteRecords(pb.DeleteRecordsRequest(topic=t, before_offset=1))


def _record_too_large(api: Api, t: str) -> object:
    api.create(t, max_message_bytes="100")
    return api.publish(t, 1, size=500)


def _malformed_bytes(api: Api, t: str) -> object:
    return api.raw("/compactlog.v1.TopicAdmin/GetTopic", b"\xff\xff\xff")


def _unknown_kind(api: Api, t: str) -> object:
    return api.admin.CreateTopic(pb.CreateTopicRequest(name=t, kind=7))  # type: ignore[arg-type]


def _unknown_start_position(api: Api, t: str) -> object:
    api.create(t)
    return list(api.log.Read(pb.ReadRequest(topic=t, position=9)))  # type: ignore[arg-type]


def _bad_subscription_name(api: Api, t: str) -> object:
    api.create(t)
    return api.log.Consume(pb.ConsumeRequest(topic=t, subscription="a/b"))


def _delete_records_past_the_end(api: Api, t: str) -> object:
    api.create(t, pb.SEGMENTED)
    api.publish(t, 3)
    return api.admin.DeleteRecords(pb.DeleteRecordsRequest(topic=t, before_offset=4))


def _read_below_log_start(api: Api, t: str) -> object:
    api.create(t, pb.SEGMENTED)
    api.publish(t, 3)
    api.admin.DeleteRecords(pb.DeleteRecordsRequest(topic=t, before_offset=2))
    req = pb.ReadRequest(topic=t, message_id=pb.MessageId(ledger_id=0, entry_id=1))
    return list(api.log.Read(req))


def _subscription_not_found(api: Api, t: str) -> object:
    api.create(t)
    ids = api.publish(t, 1)
    req = pb.AcknowledgeRequest(topic=t, subscription="nobody", id=ids[0])
    return api.log.Acknowledge(req)


def _reserved_consume(api: Api, t: str) -> object:
    api.create(t)
    return api.log.Consume(pb.ConsumeRequest(topic=t, subscription="__compaction"))


def _reserved_acknowledge(api: Api, t: str) -> object:
    api.create(t)
    ids = api.publish(t, 1)
    return api.log.Acknowledge(pb.AcknowledgeRequest(topic=t, subscription="__mine", id=ids[0]))


def _not_delivered(kind: int) -> Callable[[Api, str], object]:
    def case(api: Api, t: str) -> object:
        api.create(t, kind)
        ids = api.publish(t, 3)
        got = api.log.Consume(pb.ConsumeRequest(topic=t, subscription="s", max_messages=1))
        assert [m.id for m in got.messages] == ids[:1]
        return api.log.Acknowledge(pb.AcknowledgeRequest(topic=t, subscription="s", id=ids[2]))

    return case


def _compaction_not_running(api: Api, t: str) -> object:
    """An outside run whose commit lost the race: its run is no longer the topic's."""
    api.create(t)
    last = api.publish(t, 2)[-1]
    api.engine.BeginCompaction(pb.BeginCompactionRequest(topic=t))
    ledgers = []
    for _ in range(2):
        made = api.engine.CreateCompactedLedger(pb.CreateCompactedLedgerRequest(topic=t))
        api.engine.SealLedger(pb.SealLedgerRequest(ledger_id=made.ledger_id, expected_entries=0))
        ledgers.append(made.ledger_id)
    for lid in ledgers:
        api.engine.CommitCompaction(
            pb.CommitCompactionRequest(topic=t, ledger_id=lid, horizon=last)
        )
    return None


def _cancel_without_a_run(api: Api, t: str) -> object:
    api.create(t)
    return api.admin.CancelCompaction(pb.CancelCompactionRequest(topic=t))


def _not_compacted(api: Api, t: str) -> object:
    api.admin.CreateTopic(
        pb.CreateTopicRequest(name=t, kind=pb.SEGMENTED, config={"cleanup.policy": "delete"})
    )
    return api.admin.Compact(pb.CompactRequest(topic=t, wait=True))


@dataclass
class Case:
    reason: str
    code: grpc.StatusCode
    method: str
    call: Callable[[Api, str], object]
    metadata: dict[str, str] = field(default_factory=dict)  # "{t}": the case's topic


CASES = {
    "topic-not-found": Case(
        "TOPIC_NOT_FOUND", S.NOT_FOUND, "GetTopic", _topic_not_found, {"topic": "{t}"}
    ),
    "topic-exists": Case(
        "TOPIC_EXISTS", S.ALREADY_EXISTS, "CreateTopic", _topic_exists, {"topic": "{t}"}
    ),
    "invalid-topic-name": Case(
        "INVALID_TOPIC_NAME",
        S.INVALID_ARGUMENT,
        "CreateTopic",
        _invalid_topic_name,
        {"topic": "a/b"},
    ),
    "unknown-config-key": Case(
        "INVALID_CONFIG",
        S.INVALID_ARGUMENT,
        "CreateTopic",
        _unknown_config_key,
        {"topic": "{t}", "key": "no.such.key"},
    ),
    "bad-config-value": Case(
        "INVALID_CONFIG",
        S.INVALID_ARGUMENT,
        "UpdateTopicConfig",
        _bad_config_value,
        {"topic": "{t}", "key": "retention.ms", "value": "-7"},
    ),
    "wrong-topic-kind": Case(
        "WRONG_TOPIC_KIND",
        S.FAILED_PRECONDITION,
        "DeleteRecords",
        _wrong_topic_kind,
        {"topic": "{t}", "kind": "LEDGER"},
    ),
    "record-too-large": Case(
        "RECORD_TOO_LARGE",
        S.INVALID_ARGUMENT,
        "Publish",
        _record_too_large,
        {"topic": "{t}", "limit": "100"},
    ),
    "malformed-bytes": Case(
        "MALFORMED_REQUEST",
        S.INVALID_ARGUMENT,
        "GetTopic",
        _malformed_bytes,
        {"request": "GetTopicRequest"},
    ),
    "unknown-kind": Case(
        "MALFORMED_REQUEST",
        S.INVALID_ARGUMENT,
        "CreateTopic",
        _unknown_kind,
        {"field": "kind", "value": "7"},
    ),
    "unknown-position": Case(
        "MALFORMED_REQUEST",
        S.INVALID_ARGUMENT,
        "Read",
        _unknown_start_position,
        {"field": "position"},
    ),
    "bad-subscription-name": Case(
        "MALFORMED_REQUEST",
        S.INVALID_ARGUMENT,
        "Consume",
        _bad_subscription_name,
        {"subscription": "a/b"},
    ),
    "delete-records-past-end": Case(
        "OFFSET_OUT_OF_RANGE",
        S.OUT_OF_RANGE,
        "DeleteRecords",
        _delete_records_past_the_end,
        {"topic": "{t}", "offset": "4", "log_end_offset": "3"},
    ),
    "read-below-log-start": Case(
        "OFFSET_OUT_OF_RANGE",
        S.OUT_OF_RANGE,
        "Read",
        _read_below_log_start,
        {"topic": "{t}", "offset": "1", "log_start_offset": "2"},
    ),
    "subscription-not-found": Case(
        "SUBSCRIPTION_NOT_FOUND",
        S.NOT_FOUND,
        "Acknowledge",
        _subscription_not_found,
        {"topic": "{t}", "subscription": "nobody"},
    ),
    "reserved-consume": Case(
        "RESERVED_SUBSCRIPTION",
        S.PERMISSION_DENIED,
        "Consume",
        _reserved_consume,
        {"topic": "{t}", "subscription": "__compaction"},
    ),
    "reserved-acknowledge": Case(
        "RESERVED_SUBSCRIPTION",
        S.PERMISSION_DENIED,
        "Acknowledge",
        _reserved_acknowledge,
        {"topic": "{t}", "subscription": "__mine"},
    ),
    "not-delivered-ledger": Case(
        "NOT_DELIVERED",
        S.FAILED_PRECONDITION,
        "Acknowledge",
        _not_delivered(pb.LEDGER),
        {"topic": "{t}", "subscription": "s"},
    ),
    "not-delivered-segmented": Case(
        "NOT_DELIVERED",
        S.FAILED_PRECONDITION,
        "Acknowledge",
        _not_delivered(pb.SEGMENTED),
        {"topic": "{t}", "subscription": "s", "message_id": "0:2", "delivered": "0:0"},
    ),
    "compact-a-delete-only-topic": Case(
        "NOT_COMPACTED",
        S.FAILED_PRECONDITION,
        "Compact",
        _not_compacted,
        {"topic": "{t}", "cleanup_policy": "delete"},
    ),
    "cancel-without-a-run": Case(
        "COMPACTION_NOT_RUNNING",
        S.FAILED_PRECONDITION,
        "CancelCompaction",
        _cancel_without_a_run,
        {"topic": "{t}"},
    ),
    "compaction-not-running": Case(
        "COMPACTION_NOT_RUNNING",
        S.FAILED_PRECONDITION,
        "CommitCompaction",
        _compaction_not_running,
        {"topic": "{t}"},
    ),
}
# On servers of their own (test_compaction_running_corrupt_data_shutting_down,
# test_unauthenticated_and_permission_denied):
OWN_SERVER = {
    "DISK_FULL",  # a data dir on a full disk: test_disk_full.py
    "STORAGE_UNAVAILABLE",  # a data dir losing its write permission: test_lost_permissions.py
    "FILE_LIMIT",  # a server under prlimit --nofile: test_file_limits.py
    "COMPACTION_RUNNING",
    "CORRUPT_DATA",
    "SHUTTING_DOWN",
    "UNAUTHENTICATED",
    "PERMISSION_DENIED",
}


def test_every_reason_is_reached_or_pending() -> None:
    reached = {case.reason for case in CASES.values()} | OWN_SERVER
    assert reached | PENDING == CONTRACT_REASONS
    assert not reached & PENDING


@pytest.mark.parametrize("name", list(CASES))
def test_reason_reached_by_a_real_call(api: Api, unique_topic: str, name: str) -> None:
    case = CASES[name]
    with pytest.raises(grpc.RpcError) as info:
        case.call(api, unique_topic)
    metadata = {k: v.replace("{t}", unique_topic) for k, v in case.metadata.items()}
    check(info.value, case.code, case.reason, metadata, case.method)


def test_compaction_running_corrupt_data_shutting_down(server_factory: Any) -> None:
    srv = server_factory(start=False)
    srv.start(extra_env={"COMPACTLOG_PAUSE_AT": "after_phase_one:1500"})
    api = Api(srv.address)
    try:
        api.create("slow")
        api.publish("slow", 3)
        api.admin.Compact(pb.CompactRequest(topic="slow", wait=False))
        with pytest.raises(grpc.RpcError) as running:
            api.admin.Compact(pb.CompactRequest(topic="slow"))
        check(running.value, S.ALREADY_EXISTS, "COMPACTION_RUNNING", {"topic": "slow"}, "Compact")

        api.create("bad", pb.SEGMENTED)
        api.publish("bad", 3, size=64)
        api.channel.close()
        assert srv.stop() == 0  # clean: every segment byte is below the recovery point
        segment = srv.data_dir / "segments" / "bad" / f"{0:020d}.log"
        data = bytearray(segment.read_bytes())
        data[len(data) // 2] ^= 0xFF
        segment.write_bytes(bytes(data))
        srv.start()
        api = Api(srv.address)
        with pytest.raises(grpc.RpcError) as corrupt:
            list(api.log.Read(pb.ReadRequest(topic="bad")))
        exc = check(corrupt.value, S.DATA_LOSS, "CORRUPT_DATA", {"topic": "bad"}, "Read")
        assert "bad" in exc.metadata["position"]
        assert api.admin.GetTopic(pb.GetTopicRequest(name="slow")).name == "slow"  # serving on

        follow = api.log.Read(pb.ReadRequest(topic="slow", follow=True))
        assert len(next(follow).messages) == 3
        srv.proc.send_signal(signal.SIGTERM)  # the follower is told, not left hanging
        with pytest.raises(grpc.RpcError) as stopping:
            list(follow)
        check(stopping.value, S.UNAVAILABLE, "SHUTTING_DOWN", {"topic": "slow"}, "Read")
        assert srv.wait(30) == 0
    finally:
        api.channel.close()


def test_unauthenticated_and_permission_denied(server_factory: Any, tmp_path: Path) -> None:
    tokens = write_tokens_file(tmp_path / "tokens.toml", {"dash": ("reader-token", "reader")})
    srv = server_factory(extra_args=["--auth-tokens", str(tokens)])
    api = Api(srv.address)
    try:
        request = pb.CreateTopicRequest(name="t")
        with pytest.raises(grpc.RpcError) as anonymous:
            api.admin.CreateTopic(request)
        method = {"method": "TopicAdmin.CreateTopic"}
        check(anonymous.value, S.UNAUTHENTICATED, "UNAUTHENTICATED", method, "CreateTopic")
        with pytest.raises(grpc.RpcError) as reader:
            api.admin.CreateTopic(request, metadata=(("authorization", "Bearer reader-token"),))
        denied = {**method, "principal": "dash", "role": "reader", "needed": "admin"}
        check(reader.value, S.PERMISSION_DENIED, "PERMISSION_DENIED", denied, "CreateTopic")
    finally:
        api.channel.close()


def test_the_client_library_raises_the_reason_classes(
    shared_server: Any, unique_topic: str
) -> None:
    t = unique_topic
    with Client(shared_server.address, timeout=30) as client:
        with pytest.raises(errors.TopicNotFound) as missing:
            client.get_topic(t)
        assert missing.value.metadata == {"topic": t}
        client.create_topic(t, "segmented", {"max.message.bytes": "100"})
        with pytest.raises(errors.TopicExists):
            client.create_topic(t)
        with pytest.raises(errors.InvalidTopicName):
            client.create_topic("no/slash")
        with pytest.raises(errors.InvalidConfig) as config:
            client.update_topic_config(t, {"segment.bytes": "1"})
        assert config.value.metadata["key"] == "segment.bytes"
        with pytest.raises(errors.RecordTooLarge) as large:
            client.producer(t).send(b"k", b"v" * 500)
        assert large.value.metadata["limit"] == "100"
        client.producer(t).send(b"k", b"v")
        with pytest.raises(errors.OffsetOutOfRange):
            client.delete_records(t, 5)
        consumer = client.subscribe(t, "s", initial_position=InitialPosition.Earliest)
        assert consumer.receive(timeout_ms=5000).value == b"v"
        with pytest.raises(errors.NotDelivered):
            consumer.acknowledge((0, 1))
        consumer.acknowledge((0, 0))
        with pytest.raises(errors.ReservedSubscription):
            client.subscribe(t, "__compaction", initial_position=InitialPosition.Earliest).receive(
                timeout_ms=100
            )
        with pytest.raises(errors.Timeout):
            consumer.receive(timeout_ms=50)


def test_a_past_view_over_the_memory_budget_names_the_setting(server_factory: Any) -> None:
    """RESOURCE_EXHAUSTED for a limit of the server's config, with a contract reason
    (INVALID_CONFIG naming the key), never the reason of a defect."""
    srv = server_factory(config='"compaction.phase.one.memory.bytes" = 1024\n')
    made = Api(srv.address)
    try:
        made.create("big")
        made.publish("big", 500)
        req = pb.ReadRequest(topic="big", read_compacted=True, as_of_time_ms=1 << 50)
        with pytest.raises(grpc.RpcError) as info:
            list(made.log.Read(req, timeout=30))
        metadata = {"topic": "big", "key": "compaction.phase.one.memory.bytes", "limit": "1024"}
        check(info.value, S.RESOURCE_EXHAUSTED, "INVALID_CONFIG", metadata, "Read")
    finally:
        made.channel.close()
