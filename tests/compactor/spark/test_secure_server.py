"""The Spark engine and data source against a server with ``--auth-tokens`` and TLS: the
token and CA reach the driver's channel and the executors' (which read through the
admin-only CompactionEngine service), from the API and from ``compactlog admin ...
--engine spark``; a reader's token cannot drive the engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from compactlog import cli
from compactlog.client import Client
from compactlog.compactor.spark import run_spark_compaction
from compactlog.errors import PermissionDenied

from ...conftest import ServerProcess, TlsFiles, write_tokens_file

pytestmark = pytest.mark.spark

TOPIC = "secure-prices"


@pytest.fixture
def secure(tmp_path: Path, server_factory: Any, tls_files: TlsFiles) -> ServerProcess:
    tokens = write_tokens_file(
        tmp_path / "tokens.toml", {"ops": ("ops-token", "admin"), "bi": ("bi-token", "reader")}
    )
    args = ["--auth-tokens", str(tokens), "--tls-cert", str(tls_files.cert)]
    srv: ServerProcess = server_factory(extra_args=[*args, "--tls-key", str(tls_files.key)])
    with Client(srv.address, token="ops-token", tls_ca=tls_files.ca) as admin:
        admin.create_topic(TOPIC)
        producer = admin.producer(TOPIC)
        for key, value in [(b"a", b"1"), (b"b", b"2"), (b"a", b"3"), (b"b", None)]:
            producer.send(key, value)
    return srv


def compacted(srv: ServerProcess, ca: Path) -> list[tuple[bytes | None, bytes | None]]:
    with Client(srv.address, token="bi-token", tls_ca=ca) as reader:
        return [(m.key, m.value) for m in reader.reader(TOPIC, read_compacted=True)]


def test_engine_and_source_carry_token_and_ca(
    spark: Any, secure: ServerProcess, tls_files: TlsFiles
) -> None:
    ca = str(tls_files.ca)
    with pytest.raises(PermissionDenied):
        run_spark_compaction(secure.address, TOPIC, spark=spark, token="bi-token", tls_ca=ca)
    result = run_spark_compaction(secure.address, TOPIC, spark=spark, token="ops-token", tls_ca=ca)
    assert result.committed
    assert compacted(secure, tls_files.ca) == [(b"a", b"3")]

    df = (
        spark.read.format("compactlog")
        .option("server", secure.address)
        .option("topic", TOPIC)
        .option("token", "ops-token")
        .option("tlsCa", ca)
        .load()
    )
    assert [bytes(r.value) if r.value else None for r in df.orderBy("entry_id").collect()] == [
        b"1",
        b"2",
        b"3",
        None,
    ]


def test_cli_spark_engine_carries_token_and_ca(
    spark: Any, secure: ServerProcess, tls_files: TlsFiles, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--server", secure.address, "--token", "ops-token", "--tls-ca", str(tls_files.ca)]
    code = cli.main([*argv, "admin", "topics", "compact", TOPIC, "--engine", "spark"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "engine=spark" in out
    assert compacted(secure, tls_files.ca) == [(b"a", b"3")]
