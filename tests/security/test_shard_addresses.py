"""Every address of a sharded server enforces the same tokens and TLS (CONTRACT section 10):
the front's, and each shard's own loopback address that GetPartitionMap hands out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc

from compactlog.client import Client
from compactlog.v1 import compactlog_pb2 as pb

from ..conftest import ServerProcess, TlsFiles
from .conftest import ADMIN, CLIENT, READER, Stubs, status_of


def test_shard_addresses_take_the_same_tokens_and_tls(
    server_factory: Callable[..., ServerProcess], tokens_file: Path, tls_files: TlsFiles
) -> None:
    srv = server_factory(
        extra_args=[
            "--shards",
            "2",
            "--auth-tokens",
            str(tokens_file),
            "--tls-cert",
            str(tls_files.cert),
            "--tls-key",
            str(tls_files.key),
        ]
    )
    admin = Stubs(srv.address, ADMIN, tls_files.ca)
    admin.admin.CreateTopic(pb.CreateTopicRequest(name="guarded"), timeout=30)
    reader = Stubs(srv.address, READER, tls_files.ca)
    request = pb.GetPartitionMapRequest(topic="guarded")
    (entry,) = reader.admin.GetPartitionMap(request, timeout=30).partitions
    shard = entry.address
    assert shard != srv.address
    publish = pb.PublishRequest(topic="guarded", records=[pb.Record(value=b"v")])
    for address in (srv.address, shard):
        anonymous = Stubs(address, None, tls_files.ca)
        plain = Stubs(address, CLIENT, None)
        as_reader = Stubs(address, READER, tls_files.ca)
        as_client = Stubs(address, CLIENT, tls_files.ca)
        assert status_of(lambda s=anonymous: s.log.Publish(publish, timeout=10)) == (
            grpc.StatusCode.UNAUTHENTICATED
        )
        assert status_of(lambda s=plain: s.log.Publish(publish, timeout=5)) == (
            grpc.StatusCode.UNAVAILABLE  # no TLS: no connection
        )
        assert status_of(lambda s=as_reader: s.log.Publish(publish, timeout=10)) == (
            grpc.StatusCode.PERMISSION_DENIED
        )
        assert status_of(lambda s=as_client: s.log.Publish(publish, timeout=10)) == (
            grpc.StatusCode.OK
        )
        for stubs in (anonymous, plain, as_reader, as_client):
            stubs.close()
    with Client(srv.address, token=CLIENT, tls_ca=tls_files.ca) as client:
        assert client.get_last_message_id("guarded") is not None
        assert client._routes.addresses() == [shard]  # went straight to the shard
    for stubs in (admin, reader):
        stubs.close()
