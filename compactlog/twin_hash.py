"""The digest that ties a compiled twin to its sources: ``setup.py`` builds it into each
extension (``storage/_twin_stamp.h``) and ``twins.py`` computes it again from the files in
a checkout, so a build older than its sources is seen, not run. Standard library only:
``setup.py`` loads this file by path before anything is installed."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

__all__ = ["source_hash"]


def source_hash(root: Path, sources: Iterable[str]) -> str:
    """A digest of the files ``sources`` (paths relative to ``root``), names and bytes."""
    digest = hashlib.sha256()
    for rel in sorted(sources):
        digest.update(rel.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    return digest.hexdigest()[:20]
