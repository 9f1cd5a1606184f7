"""The principals of ``compactlog serve --auth-tokens FILE`` (CONTRACT section 10).

``Principals`` loads the TOML file (one table a principal, holding only the SHA-256 of its
token), all or nothing, so a start fails whole and a reload keeps the old set; ``find``
looks a presented token up in constant time. The file's format, the nesting of ``Role``
and why the lookup never stops early are in docs/security.md ("Tokens and principals",
"How the server enforces it").
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from compactlog.errors import InvalidConfig

_HEX_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
_PRINCIPAL_KEYS = frozenset({"token_sha256", "role"})


class Role(enum.IntEnum):
    """What a principal may do; a higher role may do everything a lower one may."""

    READER = 1
    CLIENT = 2
    ADMIN = 3

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Principal:
    name: str
    role: Role
    token_sha256: bytes  # the raw 32-byte digest

    def __repr__(self) -> str:  # never print the digest in logs
        return f"Principal({self.name!r}, {self.role.label})"


def token_sha256(token: str) -> str:
    """The hex digest the tokens file holds for ``token`` (what ``sha256sum`` prints)."""
    return hashlib.sha256(token.encode()).hexdigest()


class Principals:
    """An immutable set of principals; a reload builds a new one and swaps it in."""

    def __init__(self, principals: tuple[Principal, ...], source: Path | None = None) -> None:
        self.principals = principals
        self.source = source

    def __len__(self) -> int:
        return len(self.principals)

    @classmethod
    def load(cls, path: Path) -> Principals:
        """Read and check the tokens file; ``InvalidConfig`` naming it on any fault."""
        try:
            with open(path, "rb") as handle:
                data = tomllib.load(handle)
        except OSError as exc:
            raise _bad(path, exc.strerror or str(exc)) from None
        except tomllib.TOMLDecodeError as exc:
            raise _bad(path, f"not valid TOML ({exc})") from None
        return cls(_parse(path, data), path)

    def find(self, token: str) -> Principal | None:
        """The principal holding ``token``, or None; constant time over the whole set."""
        digest = hashlib.sha256(token.encode()).digest()
        found: Principal | None = None
        for principal in self.principals:
            if hmac.compare_digest(principal.token_sha256, digest) and found is None:
                found = principal
        return found


def _bad(path: Path, reason: str) -> InvalidConfig:
    return InvalidConfig(f"auth tokens file {path}: {' '.join(reason.split())}")


def _parse(path: Path, data: Mapping[str, object]) -> tuple[Principal, ...]:
    unknown = sorted(set(data) - {"principals"})
    if unknown:
        raise _bad(path, f"unknown top-level key {unknown[0]!r} (expected [principals.NAME])")
    tables = data.get("principals", {})
    if not isinstance(tables, dict):
        raise _bad(path, "'principals' must be a table of [principals.NAME] tables")
    principals = tuple(_principal(path, name, table) for name, table in tables.items())
    seen: dict[bytes, str] = {}
    for p in principals:
        if p.token_sha256 in seen:
            raise _bad(path, f"principals {seen[p.token_sha256]!r} and {p.name!r} share a token")
        seen[p.token_sha256] = p.name
    return principals


def _principal(path: Path, name: str, table: object) -> Principal:
    where = f"principal {name!r}"
    if not isinstance(table, dict):
        raise _bad(path, f"{where} must be a table with token_sha256 and role")
    unknown = sorted(set(table) - _PRINCIPAL_KEYS)
    if unknown:
        raise _bad(path, f"{where}: unknown key {unknown[0]!r} (expected token_sha256, role)")
    digest, role = table.get("token_sha256"), table.get("role")
    if not isinstance(digest, str) or not _HEX_SHA256.fullmatch(digest):
        raise _bad(path, f"{where}: token_sha256 must be the 64 hex digits of a SHA-256")
    roles = {r.label: r for r in Role}
    if not isinstance(role, str) or role not in roles:
        raise _bad(path, f"{where}: role must be one of {', '.join(roles)}, got {role!r}")
    return Principal(name, roles[role], bytes.fromhex(digest))
