"""The pieces of ``server.security.auth`` and ``server.security.principals`` without a
server: the tokens file, the constant-time lookup, the role every method needs, the bearer
header, and the loopback rule of ``server.security.guard``."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from compactlog.errors import InvalidConfig
from compactlog.server.security.auth import GRANTS, bearer_token, method_roles
from compactlog.server.security.guard import is_loopback
from compactlog.server.security.principals import Principals, Role, token_sha256
from compactlog.v1 import compactlog_pb2 as pb

# CONTRACT section 10, word for word
READER_CALLS = {
    "Log": {
        "Read",
        "Consume",
        "Acknowledge",
        "NegativeAcknowledge",
        "CloseConsumer",
        "GetLastMessageId",
        "GetKeyHistory",
    },
    "TopicAdmin": {
        "GetTopic",
        "ListTopics",
        "GetPartitionMap",
        "GetCompactionStatus",
        "WatchCompaction",
    },
}
CLIENT_CALLS = {"Log": {"Publish", "PublishStream"}}
# Additions the contract leaves open, each with the role of the call it extends:
# ConsumeStream is Consume pushed, AcknowledgeList many Acknowledges in one request.
READER_CALLS["Log"] |= {"ConsumeStream", "AcknowledgeList"}


def test_every_method_of_every_service_has_a_role() -> None:
    roles = method_roles()
    for service in pb.DESCRIPTOR.services_by_name.values():
        for method in service.methods:
            role = roles[f"/{service.full_name}/{method.name}"]
            if method.name in READER_CALLS.get(service.name, ()):
                assert role == Role.READER, method.full_name
            elif method.name in CLIENT_CALLS.get(service.name, ()):
                assert role == Role.CLIENT, method.full_name
            else:
                assert role == Role.ADMIN, method.full_name
    assert roles["/grpc.health.v1.Health/Check"] is None
    assert roles["/grpc.health.v1.Health/Watch"] is None
    assert roles["/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"] == Role.READER


def test_the_grants_are_the_contracts_lists() -> None:
    named = {f"{svc}.{m}" for svc, ms in READER_CALLS.items() for m in ms}
    named |= {f"{svc}.{m}" for svc, ms in CLIENT_CALLS.items() for m in ms}
    assert set(GRANTS) - {"ServerReflection.ServerReflectionInfo"} == named


def test_nothing_of_the_compaction_engine_below_admin() -> None:
    engine = pb.DESCRIPTOR.services_by_name["CompactionEngine"]
    roles = method_roles()
    assert all(roles[f"/{engine.full_name}/{m.name}"] == Role.ADMIN for m in engine.methods)


@pytest.mark.parametrize(
    ("metadata", "token"),
    [
        ((("authorization", "Bearer abc"),), "abc"),
        ((("authorization", "bearer  abc "),), "abc"),
        ((("x-other", "1"), ("authorization", "Bearer t")), "t"),
        ((("authorization", "Basic dXNlcjpwYXNz"),), None),
        ((("authorization", "Bearer "),), None),
        ((("authorization", b"Bearer abc"),), None),
        ((), None),
        (None, None),
    ],
)
def test_bearer_token(metadata: tuple[tuple[str, str | bytes], ...] | None, token: str) -> None:
    assert bearer_token(metadata) == token


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_principals_load_and_find(tmp_path: Path) -> None:
    text = "".join(
        f'[principals.{name}]\ntoken_sha256 = "{token_sha256(tok)}"\nrole = "{role}"\n'
        for name, tok, role in [("a", "ta", "admin"), ("c", "tc", "client"), ("r", "tr", "reader")]
    )
    principals = Principals.load(write(tmp_path / "t.toml", text))
    assert len(principals) == 3
    found = principals.find("tc")
    assert found is not None and (found.name, found.role) == ("c", Role.CLIENT)
    assert principals.find("tc ") is None and principals.find("") is None
    assert "tc" not in repr(found) and token_sha256("tc") not in repr(found)


def test_digest_is_sha256_hex_of_the_token_in_either_case(tmp_path: Path) -> None:
    digest = hashlib.sha256(b"s3cret").hexdigest().upper()
    path = write(
        tmp_path / "t.toml", f'[principals.x]\ntoken_sha256 = "{digest}"\nrole = "admin"\n'
    )
    assert Principals.load(path).find("s3cret") is not None


def test_an_empty_file_is_no_principals(tmp_path: Path) -> None:
    assert len(Principals.load(write(tmp_path / "t.toml", ""))) == 0


def test_a_bad_file_names_itself(tmp_path: Path) -> None:
    path = write(tmp_path / "t.toml", '[principals.x]\ntoken_sha256 = "00"\nrole = "admin"\n')
    with pytest.raises(InvalidConfig, match=r"auth tokens file .*t\.toml: principal 'x'"):
        Principals.load(path)


@pytest.mark.parametrize(
    ("listen", "loopback"),
    [
        ("127.0.0.1:7650", True),
        ("127.10.0.3:0", True),
        ("[::1]:7650", True),
        ("localhost:7650", True),
        ("LOCALHOST:1", True),
        ("0.0.0.0:7650", False),
        (":7650", False),
        ("[::]:7650", False),
        ("10.1.2.3:7650", False),
        ("example.com:7650", False),
    ],
)
def test_loopback(listen: str, loopback: bool) -> None:
    assert is_loopback(listen) is loopback
