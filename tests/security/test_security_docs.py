"""docs/security.md stays true: its example tokens file loads and holds the example tokens
with the roles it says, and its roles table names every method that is not admin-only."""

from __future__ import annotations

import re
from pathlib import Path

from compactlog.server.security.auth import GRANTS
from compactlog.server.security.principals import Principals, Role

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def test_the_example_tokens_file_is_right(tmp_path: Path) -> None:
    block = re.search(r"```toml\n(.*?)```", DOC.read_text(), re.S)
    assert block is not None
    path = tmp_path / "tokens.toml"
    path.write_text(block.group(1))
    principals = Principals.load(path)
    for token, role in [("admin", Role.ADMIN), ("client", Role.CLIENT), ("reader", Role.READER)]:
        found = principals.find(f"example-{token}-token")
        assert found is not None and found.role == role


def test_the_roles_table_names_every_grant() -> None:
    text = DOC.read_text()
    for name in GRANTS:
        method = name.split(".")[1]
        assert f"`{method}`" in text or method == "ServerReflectionInfo", name
