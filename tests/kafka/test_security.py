"""The Kafka listener behind ``--auth-tokens`` and TLS (CONTRACT sections 10 and 15): each
client configured as its users configure it (``security.protocol=SASL_SSL``, PLAIN with
the principal's name and token, or OAUTHBEARER with the token) against a real server and
certificates made for the run; the roles are gRPC's, refusals Kafka's error codes."""

from __future__ import annotations

import asyncio
import datetime
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compactlog.channels import ChannelSecurity, open_channel
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc
from tests.conftest import ServerProcess, TlsFiles, write_tokens_file
from tests.kafka.conftest import kafka_python_group_consumer
from tests.kafka.test_wire import decode, frame

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")
kafka = pytest.importorskip("kafka")
aiokafka = pytest.importorskip("aiokafka")
kafka_oauth = pytest.importorskip("kafka.net.sasl.oauth")
aiokafka_abc = pytest.importorskip("aiokafka.abc")
aiokafka_helpers = pytest.importorskip("aiokafka.helpers")

TOKENS = {
    "ops": ("kafka-admin-5d1e", "admin"),
    "ingest": ("kafka-client-8a2f", "client"),
    "dashboards": ("kafka-reader-0c7b", "reader"),
}
from aiokafka.record import default_records as aiokafka_batch  # noqa: E402
from kio.schema.api_versions.v3.request import ApiVersionsRequest  # noqa: E402
from kio.schema.api_versions.v3.response import ApiVersionsResponse  # noqa: E402
from kio.schema.errors import ErrorCode  # noqa: E402
from kio.schema.produce.v9 import request as produce_req  # noqa: E402
from kio.schema.produce.v9.response import ProduceResponse  # noqa: E402
from kio.schema.sasl_authenticate.v2 import request as auth_req  # noqa: E402
from kio.schema.sasl_authenticate.v2 import response as auth_resp  # noqa: E402
from kio.schema.sasl_handshake.v0 import request as handshake_v0_req  # noqa: E402
from kio.schema.sasl_handshake.v0 import response as handshake_v0_resp  # noqa: E402
from kio.schema.sasl_handshake.v1 import request as handshake_req  # noqa: E402
from kio.schema.sasl_handshake.v1 import response as handshake_resp  # noqa: E402
from kio.static.primitive import i32Timedelta  # noqa: E402

KCAT = shutil.which("kcat")


@pytest.fixture(scope="module")
def secure(
    tmp_path_factory: pytest.TempPathFactory, tls_files: TlsFiles
) -> Iterator[ServerProcess]:
    """A SASL_SSL listener: --auth-tokens and --tls-cert/--tls-key."""
    folder = tmp_path_factory.mktemp("kafka-secure")
    tokens = write_tokens_file(folder / "tokens.toml", TOKENS)
    args = ["--kafka-listen", "127.0.0.1:0", "--auth-tokens", str(tokens)]
    args += ["--tls-cert", str(tls_files.cert), "--tls-key", str(tls_files.key)]
    srv = ServerProcess(folder / "data", extra_args=args).start()
    yield srv
    assert srv.stop() == 0


@pytest.fixture
def topic(secure: ServerProcess, tls_files: TlsFiles) -> str:
    """A new SEGMENTED topic, made over gRPC by the admin."""
    name = "s-" + uuid.uuid4().hex[:12]
    security = ChannelSecurity.of(TOKENS["ops"][0], tls_files.ca)
    with open_channel(secure.address, security) as channel:
        request = pb.CreateTopicRequest(name=name, kind=pb.SEGMENTED)
        pb_grpc.TopicAdminStub(channel).CreateTopic(request, timeout=30)
    return name


def librdkafka(secure: ServerProcess, ca: Path, who: str, **extra: Any) -> dict[str, Any]:
    """librdkafka's SASL_SSL settings for principal ``who`` with PLAIN."""
    return {
        "bootstrap.servers": secure.kafka_address,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(ca),
        "sasl.mechanism": "PLAIN",
        "sasl.username": who,
        "sasl.password": TOKENS[who][0],
        **extra,
    }


def oauthbearer(secure: ServerProcess, ca: Path, token: str, **extra: Any) -> dict[str, Any]:
    def token_cb(_config: str) -> tuple[str, float]:
        return token, time.time() + 3600

    return {
        "bootstrap.servers": secure.kafka_address,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(ca),
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": token_cb,
        **extra,
    }


def produce(
    config: dict[str, Any], topic: str, records: list[tuple[bytes, bytes | None]]
) -> list[Any]:
    """Produce with acks=-1; the delivery error of each record (None: acknowledged)."""
    results: list[Any] = []
    producer = ck.Producer({**config, "acks": -1, "message.timeout.ms": 20000})
    for key, value in records:
        producer.produce(topic, key=key, value=value, on_delivery=lambda e, _m: results.append(e))
    assert producer.flush(30) == 0
    return results


def consume_group(config: dict[str, Any], topic: str, group: str, count: int) -> list[Any]:
    consumer = ck.Consumer(
        {**config, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumer.subscribe([topic])
    got: list[Any] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < count:
            assert time.monotonic() < deadline, f"only {len(got)} of {count}"
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                got.append(message)
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def test_confluent_kafka_roles_over_sasl_ssl(secure: ServerProcess, tls_files: TlsFiles) -> None:
    ca = tls_files.ca
    name = "s-" + uuid.uuid4().hex[:12]
    admin = ck_admin.AdminClient(librdkafka(secure, ca, "ops"))
    new = ck_admin.NewTopic(name, 1, 1, config={"cleanup.policy": "compact"})
    admin.create_topics([new])[name].result(30)

    client = ck_admin.AdminClient(librdkafka(secure, ca, "ingest"))
    refused = client.create_topics([ck_admin.NewTopic(name + "-x", 1, 1)])[name + "-x"]
    with pytest.raises(ck.KafkaException) as denied:
        refused.result(30)
    assert denied.value.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "needs role admin" in denied.value.args[0].str()

    assert produce(librdkafka(secure, ca, "ingest"), name, [(b"a", b"1"), (b"b", b"2")]) == [
        None,
        None,
    ]
    [error] = produce(librdkafka(secure, ca, "dashboards"), name, [(b"c", b"3")])
    assert error is not None and error.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED

    # a reader consumes in a group and commits (a subscription: reader's Consume/Acknowledge)
    got = consume_group(librdkafka(secure, ca, "dashboards"), name, "dash", 2)
    assert [(m.offset(), m.key(), m.value()) for m in got] == [(0, b"a", b"1"), (1, b"b", b"2")]


def test_confluent_kafka_oauthbearer(
    secure: ServerProcess, tls_files: TlsFiles, topic: str
) -> None:
    config = oauthbearer(secure, tls_files.ca, TOKENS["ingest"][0])
    assert produce(config, topic, [(b"k", b"v"), (b"k", None)]) == [None, None]
    got = consume_group(oauthbearer(secure, tls_files.ca, TOKENS["dashboards"][0]), topic, "o", 2)
    assert [(m.offset(), m.key(), m.value()) for m in got] == [(0, b"k", b"v"), (1, b"k", None)]


def test_a_wrong_token_fails_the_login_and_the_server_serves_on(
    secure: ServerProcess, tls_files: TlsFiles, topic: str
) -> None:
    errors: list[Any] = []
    wrong = librdkafka(secure, tls_files.ca, "ops", **{"sasl.password": "not-the-token"})
    admin = ck_admin.AdminClient({**wrong, "error_cb": errors.append})
    with pytest.raises(ck.KafkaException):
        admin.list_topics(timeout=3)
    admin.poll(1)  # error_cb is served by poll
    del admin
    assert any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors), errors
    stolen = librdkafka(secure, tls_files.ca, "ops", **{"sasl.password": TOKENS["ingest"][0]})
    with pytest.raises(ck.KafkaException):  # someone else's token under this name
        ck_admin.AdminClient(stolen).list_topics(timeout=3)
    good = ck_admin.AdminClient(librdkafka(secure, tls_files.ca, "dashboards"))
    assert topic in good.list_topics(timeout=30).topics
    assert secure.proc is not None and secure.proc.poll() is None


def kp_config(secure: ServerProcess, ca: Path, mechanism: str, who: str) -> dict[str, Any]:
    """kafka-python's SASL_SSL settings for ``who``."""
    config: dict[str, Any] = {
        "bootstrap_servers": secure.kafka_address,
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(ca),
        "sasl_mechanism": mechanism,
    }
    token = TOKENS[who][0]
    if mechanism == "PLAIN":
        config |= {"sasl_plain_username": who, "sasl_plain_password": token}
    else:

        class Provider(kafka_oauth.AbstractTokenProvider):  # type: ignore[misc]
            def token(self) -> str:
                return token

        config["sasl_oauth_token_provider"] = Provider()
    return config


@pytest.mark.parametrize("mechanism", ["PLAIN", "OAUTHBEARER"])
def test_kafka_python_over_sasl_ssl(
    secure: ServerProcess, tls_files: TlsFiles, topic: str, mechanism: str
) -> None:
    producer = kafka.KafkaProducer(**kp_config(secure, tls_files.ca, mechanism, "ingest"))
    producer.send(topic, key=b"a", value=b"1").get(timeout=30)
    producer.send(topic, key=b"a", value=None).get(timeout=30)
    producer.close()

    reader_config = kp_config(secure, tls_files.ca, mechanism, "dashboards")
    # not idempotent: its InitProducerId would be refused first (CLUSTER_AUTHORIZATION_FAILED)
    reader = kafka.KafkaProducer(enable_idempotence=False, **reader_config)
    with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
        reader.send(topic, key=b"b", value=b"2").get(timeout=30)
    reader.close()

    consumer = kafka_python_group_consumer(
        topic,
        group_id="kp",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **kp_config(secure, tls_files.ca, mechanism, "dashboards"),
    )
    got: list[Any] = []
    deadline = time.monotonic() + 60
    while len(got) < 2:
        assert time.monotonic() < deadline, f"only {len(got)} of 2"
        for records in consumer.poll(timeout_ms=200).values():
            got.extend(records)
    consumer.commit()
    consumer.close()
    assert [(r.offset, r.key, r.value) for r in got] == [(0, b"a", b"1"), (1, b"a", None)]


async def aio_round_trip(secure: ServerProcess, ca: Path, topic: str, mechanism: str) -> list[Any]:
    def config(who: str) -> dict[str, Any]:
        token = TOKENS[who][0]
        settings: dict[str, Any] = {
            "bootstrap_servers": secure.kafka_address,
            "security_protocol": "SASL_SSL",
            "ssl_context": aiokafka_helpers.create_ssl_context(cafile=str(ca)),
            "sasl_mechanism": mechanism,
        }
        if mechanism == "PLAIN":
            return settings | {"sasl_plain_username": who, "sasl_plain_password": token}

        class Provider(aiokafka_abc.AbstractTokenProvider):  # type: ignore[misc]
            async def token(self) -> str:
                return token

        return settings | {"sasl_oauth_token_provider": Provider()}

    producer = aiokafka.AIOKafkaProducer(**config("ingest"))
    await producer.start()
    try:
        await producer.send_and_wait(topic, key=b"x", value=b"1")
    finally:
        await producer.stop()
    consumer = aiokafka.AIOKafkaConsumer(
        topic, group_id="aio", auto_offset_reset="earliest", **config("dashboards")
    )
    await consumer.start()
    try:
        got = [await asyncio.wait_for(consumer.getone(), 60)]
        await consumer.commit()
    finally:
        await consumer.stop()
    return got


@pytest.mark.parametrize("mechanism", ["PLAIN", "OAUTHBEARER"])
def test_aiokafka_over_sasl_ssl(
    secure: ServerProcess, tls_files: TlsFiles, topic: str, mechanism: str
) -> None:
    got = asyncio.run(aio_round_trip(secure, tls_files.ca, topic, mechanism))
    assert [(r.offset, r.key, r.value) for r in got] == [(0, b"x", b"1")]


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (.ci/run installs it)")
def test_kcat_over_sasl_ssl(secure: ServerProcess, tls_files: TlsFiles, topic: str) -> None:
    assert KCAT is not None

    def kcat(who: str, *args: str, stdin: str = "") -> str:
        security = ["-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={tls_files.ca}"]
        security += ["-X", "sasl.mechanism=PLAIN", "-X", f"sasl.username={who}"]
        security += ["-X", f"sasl.password={TOKENS[who][0]}"]
        command = [KCAT, "-b", secure.kafka_address, *security, *args]
        done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert f'topic "{topic}" with 1 partitions' in kcat("dashboards", "-L", "-t", topic)
    kcat("ingest", "-P", "-t", topic, "-K:", stdin="k1:v1\nk2:v2\n")
    out = kcat("dashboards", "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%o %k %s\n")
    assert out.splitlines() == ["0 k1 v1", "1 k2 v2"]


def test_tls_without_tokens_is_an_ssl_listener(tmp_path: Path, tls_files: TlsFiles) -> None:
    args = ["--kafka-listen", "127.0.0.1:0", "--tls-cert", str(tls_files.cert)]
    srv = ServerProcess(tmp_path / "data", extra_args=[*args, "--tls-key", str(tls_files.key)])
    srv.start()
    try:
        config = {
            "bootstrap.servers": srv.kafka_address,
            "security.protocol": "SSL",
            "ssl.ca.location": str(tls_files.ca),
        }
        admin = ck_admin.AdminClient(config)
        admin.create_topics([ck_admin.NewTopic("plain-tls", 1, 1)])["plain-tls"].result(30)
        assert produce(config, "plain-tls", [(b"k", b"v")]) == [None]
        untrusting = {**config, "ssl.ca.location": str(tls_files.other_ca)}
        with pytest.raises(ck.KafkaException):
            ck_admin.AdminClient(untrusting).list_topics(timeout=3)
    finally:
        assert srv.stop() == 0


def tls_socket(secure: ServerProcess, ca: Path) -> ssl.SSLSocket:
    host, port = secure.kafka_address.rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(ca))
    raw = socket.create_connection((host, int(port)), timeout=30)
    return context.wrap_socket(raw, server_hostname=host)


def receive(sock: socket.socket) -> bytes:
    """One response frame (TLS or not), or b"" when the server closed the connection."""

    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            try:
                chunk = sock.recv(n - len(data))
            except (ConnectionError, ssl.SSLError):
                chunk = b""
            if not chunk:
                return b""
            data += chunk
        return data

    head = exactly(4)
    if not head:
        return b""
    (size,) = struct.unpack(">i", head)
    return exactly(size) if size else b""


def api_versions(sock: socket.socket, correlation_id: int) -> Any:
    request = ApiVersionsRequest(client_software_name="wire", client_software_version="1")
    return call(sock, request, ApiVersionsResponse, correlation_id)


def call(sock: socket.socket, request: Any, response_cls: Any, correlation_id: int) -> Any:
    sock.sendall(frame(request, correlation_id))
    return decode(response_cls, receive(sock), correlation_id)


def produce_request(topic: str) -> Any:
    batch = aiokafka_batch.DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 16,
    )  # fmt: skip
    batch.append(0, timestamp=None, key=b"k", value=b"v", headers=[])
    part = produce_req.PartitionProduceData(index=0, records=bytes(batch.build()))
    return produce_req.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        topic_data=(produce_req.TopicProduceData(name=topic, partition_data=(part,)),),
    )


def produced(response: Any) -> list[list[Any]]:
    """A ProduceResponse's partition answers, by topic."""
    return [list(t.partition_responses) for t in response.responses]


def authenticate(sock: socket.socket, auth: bytes, correlation_id: int) -> Any:
    request = auth_req.SaslAuthenticateRequest(auth_bytes=auth)
    return call(sock, request, auth_resp.SaslAuthenticateResponse, correlation_id)


def handshake(sock: socket.socket, mechanism: str, correlation_id: int) -> Any:
    request = handshake_req.SaslHandshakeRequest(mechanism=mechanism)
    return call(sock, request, handshake_resp.SaslHandshakeResponse, correlation_id)


def test_the_login_on_the_wire(secure: ServerProcess, tls_files: TlsFiles, topic: str) -> None:
    with tls_socket(secure, tls_files.ca) as sock:
        served = {k.api_key: (k.min_version, k.max_version) for k in api_versions(sock, 1).api_keys}
        assert served[17] == (0, 1) and served[36] == (0, 2)

        # before a login: answered in the request's shape, the connection stays
        [[refused]] = produced(call(sock, produce_request(topic), ProduceResponse, 2))
        assert refused.error_code == ErrorCode.sasl_authentication_failed
        assert authenticate(sock, b"\0ops\0x", 3).error_code == ErrorCode.illegal_sasl_state
        unknown = handshake(sock, "SCRAM-SHA-256", 4)
        assert unknown.error_code == ErrorCode.unsupported_sasl_mechanism
        assert set(unknown.mechanisms) == {"PLAIN", "OAUTHBEARER"}

        assert handshake(sock, "PLAIN", 5).error_code == ErrorCode.none
        failed = authenticate(sock, b"\0ops\0" + TOKENS["dashboards"][0].encode(), 6)
        assert failed.error_code == ErrorCode.sasl_authentication_failed
        assert "wrong username or token" in failed.error_message

        assert handshake(sock, "OAUTHBEARER", 7).error_code == ErrorCode.none
        token = TOKENS["dashboards"][0]
        assert (
            authenticate(sock, f"n,,\x01auth=Bearer {token}\x01\x01".encode(), 8).error_code
            == ErrorCode.none
        )
        [[denied]] = produced(call(sock, produce_request(topic), ProduceResponse, 9))
        assert denied.error_code == ErrorCode.topic_authorization_failed
        assert "needs role client" in denied.error_message


def test_a_v0_handshake_takes_raw_sasl_bytes(
    secure: ServerProcess, tls_files: TlsFiles, topic: str
) -> None:
    with tls_socket(secure, tls_files.ca) as sock:
        request = handshake_v0_req.SaslHandshakeRequest(mechanism="PLAIN")
        answer = call(sock, request, handshake_v0_resp.SaslHandshakeResponse, 1)
        assert answer.error_code == ErrorCode.none
        plain = b"\0ingest\0" + TOKENS["ingest"][0].encode()
        sock.sendall(struct.pack(">i", len(plain)) + plain)
        assert receive(sock) == b""  # an empty token: logged in
        [[done]] = produced(call(sock, produce_request(topic), ProduceResponse, 2))
        assert (done.error_code, done.base_offset) == (ErrorCode.none, 0)
    with tls_socket(secure, tls_files.ca) as sock:
        call(sock, request, handshake_v0_resp.SaslHandshakeResponse, 1)
        sock.sendall(struct.pack(">i", 9) + b"\0ops\0nope")
        assert receive(sock) == b""  # a failed raw login closes the connection


def test_sasl_plaintext_and_a_reload_that_drops_the_token(tmp_path: Path) -> None:
    """--auth-tokens without TLS: SASL_PLAINTEXT. A SIGHUP that drops a principal ends
    what its open connection may do at its next request, as it does for gRPC."""
    tokens = write_tokens_file(tmp_path / "tokens.toml", TOKENS)
    args = ["--kafka-listen", "127.0.0.1:0", "--auth-tokens", str(tokens)]
    srv = ServerProcess(tmp_path / "data", extra_args=args).start()
    try:
        base = {"bootstrap.servers": srv.kafka_address, "security.protocol": "SASL_PLAINTEXT"}
        config = {**base, "sasl.mechanism": "PLAIN"}
        config |= {"sasl.username": "ops", "sasl.password": TOKENS["ops"][0]}
        admin = ck_admin.AdminClient(config)
        admin.create_topics([ck_admin.NewTopic("r", 1, 1)])["r"].result(30)
        host, port = srv.kafka_address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            assert handshake(sock, "PLAIN", 1).error_code == ErrorCode.none
            plain = b"\0ingest\0" + TOKENS["ingest"][0].encode()
            assert authenticate(sock, plain, 2).error_code == ErrorCode.none
            [[done]] = produced(call(sock, produce_request("r"), ProduceResponse, 3))
            assert done.error_code == ErrorCode.none

            kept = {k: v for k, v in TOKENS.items() if k != "ingest"}
            write_tokens_file(tokens, kept)
            assert srv.proc is not None
            srv.proc.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 30
            while not any("auth tokens reloaded" in line for line in srv.stderr_lines):
                assert time.monotonic() < deadline, "no reload logged"
                time.sleep(0.1)
            [[dropped]] = produced(call(sock, produce_request("r"), ProduceResponse, 4))
            assert dropped.error_code == ErrorCode.sasl_authentication_failed
            assert api_versions(sock, 5).error_code == ErrorCode.none  # still open
    finally:
        assert srv.stop() == 0


def test_garbage_before_the_login_closes_only_its_connection(
    secure: ServerProcess, tls_files: TlsFiles, topic: str
) -> None:
    with tls_socket(secure, tls_files.ca) as good, tls_socket(secure, tls_files.ca) as bad:
        assert handshake(good, "PLAIN", 1).error_code == ErrorCode.none
        plain = b"\0ingest\0" + TOKENS["ingest"][0].encode()
        assert authenticate(good, plain, 2).error_code == ErrorCode.none
        bad.sendall(struct.pack(">i", 200 * 1024 * 1024))  # past socket.request.max.bytes
        assert receive(bad) == b""  # closed, without reading 200 MiB
        [[done]] = produced(call(good, produce_request(topic), ProduceResponse, 3))
        assert done.error_code == ErrorCode.none


def test_admin_config_partition_and_record_calls_need_the_admin_role(
    secure: ServerProcess, tls_files: TlsFiles, topic: str
) -> None:
    """DescribeConfigs is a reader's (GetTopic); the calls that change a topic are an
    admin's, answered TOPIC_AUTHORIZATION_FAILED for a client token and done for an admin."""
    ca = tls_files.ca
    resource = ck_admin.ConfigResource(ck_admin.ResourceType.TOPIC, topic)
    reader = ck_admin.AdminClient(librdkafka(secure, ca, "dashboards"))
    described = reader.describe_configs([resource])[resource].result(30)
    assert "cleanup.policy" in described

    client = ck_admin.AdminClient(librdkafka(secure, ca, "ingest"))
    change = ck_admin.ConfigResource(
        ck_admin.ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ck_admin.ConfigEntry(
                "retention.ms", "3600000", incremental_operation=ck_admin.AlterConfigOpType.SET
            )
        ],
    )
    calls = {
        "incremental_alter_configs": lambda: client.incremental_alter_configs([change])[change],
        "create_partitions": lambda: client.create_partitions([ck_admin.NewPartitions(topic, 3)])[
            topic
        ],
        "delete_records": lambda: next(
            iter(client.delete_records([ck.TopicPartition(topic, 0, 0)]).values())
        ),
    }
    for name, call in calls.items():
        with pytest.raises(ck.KafkaException) as denied:
            call().result(30)
        code = denied.value.args[0].code()
        assert code == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, (name, denied.value)

    ops = ck_admin.AdminClient(librdkafka(secure, ca, "ops"))
    ops.incremental_alter_configs([change])[change].result(30)
    after = ops.describe_configs([resource])[resource].result(30)
    assert after["retention.ms"].value == "3600000"
