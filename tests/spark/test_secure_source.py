"""The data source against a server with ``--auth-tokens`` and TLS: options ``token`` and
``tlsCa`` reach the driver's and the executors' channels; a ``reader`` token reads (the
admin-only ledger layout is then done without: one Spark partition per topic
partition), a ``client`` token writes, a ``reader`` token may not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from compactlog.client import Client
from compactlog.spark.columns import arrow_schema
from compactlog.spark.offsets import OffsetSpec
from compactlog.spark.options import connection
from compactlog.spark.planning import discover, plan, resolve
from compactlog.spark.sizing import Sizing
from compactlog.spark.source import read_range

from ..conftest import ServerProcess, TlsFiles, write_tokens_file

TOPIC = "secure-source"
EVERY_10 = Sizing(cores=2, fixed=10)
PRINCIPALS = {
    "ops": ("ops-token", "admin"),
    "app": ("app-token", "client"),
    "bi": ("bi-token", "reader"),
}


@pytest.fixture
def secure(tmp_path: Path, server_factory: Any, tls_files: TlsFiles) -> ServerProcess:
    tokens = write_tokens_file(tmp_path / "tokens.toml", PRINCIPALS)
    args = ["--auth-tokens", str(tokens), "--tls-cert", str(tls_files.cert)]
    srv: ServerProcess = server_factory(extra_args=[*args, "--tls-key", str(tls_files.key)])
    with Client(srv.address, token="ops-token", tls_ca=tls_files.ca) as admin:
        admin.create_topic(TOPIC, config={"ledger.max.entries": 10})
        admin.producer(TOPIC).send_batch([(b"k%d" % (i % 4), b"v%d" % i) for i in range(35)])
    return srv


def grpc_values(srv: ServerProcess, ca: Path) -> list[bytes | None]:
    with Client(srv.address, token="bi-token", tls_ca=ca) as reader:
        return [m.value for m in reader.reader(TOPIC)]


def test_a_reader_token_plans_without_the_layout(
    secure: ServerProcess, tls_files: TlsFiles
) -> None:
    options = {"server": secure.address, "token": "bi-token", "tlsCa": str(tls_files.ca)}
    with connection(options).calls() as calls:
        assert calls.ledger_ranges(TOPIC) is None  # admin only: not an error here
        shapes = discover(calls, [TOPIC])
        starts = resolve(OffsetSpec("earliest"), shapes)
        ranges = plan(calls, shapes, starts, resolve(OffsetSpec("latest"), shapes), False, EVERY_10)
        assert len(ranges) == 1  # four ledgers, but where they begin is not known
        batches = [b for r in ranges for b in read_range(calls, r, True, arrow_schema())]
        got = [v for b in batches for v in b.column("value").to_pylist()]
    assert got == grpc_values(secure, tls_files.ca)


@pytest.mark.spark
def test_read_and_write_with_tokens_over_tls(
    spark: Any, secure: ServerProcess, tls_files: TlsFiles
) -> None:
    def options(token: str) -> dict[str, str]:
        return {"server": secure.address, "token": token, "tlsCa": str(tls_files.ca)}

    df = spark.read.format("compactlog").options(**options("bi-token"), topic=TOPIC).load()
    values = [bytes(r.value) for r in df.orderBy("ledger_id", "entry_id").collect()]
    assert values == grpc_values(secure, tls_files.ca)

    rows = spark.createDataFrame([("x", "new")], "key STRING, value STRING")
    writer = rows.write.format("compactlog").mode("append").option("topic", TOPIC)
    writer.options(**options("app-token")).save()
    assert grpc_values(secure, tls_files.ca)[-1] == b"new"
    with pytest.raises(Exception, match=r"PermissionDenied|PERMISSION_DENIED|may not"):
        writer.options(**options("bi-token")).save()
