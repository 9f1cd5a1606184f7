"""Which twin of a compiled module to use: the C extension when it was built (the ordinary
install builds it where a compiler is present, ``setup.py``), else its pure-Python twin,
which behaves identically; ``COMPACTLOG_NO_EXT=1`` asks for the pure one (what an install
without a compiler gets; the tests run both). One rule for every pair of twins.

A checkout whose C sources changed since its extension was built (pulled, not rebuilt)
would run old code: each extension carries the digest of the files it was built from
(``twin_hash``), and where those files sit beside the package and differ, the pure twin is
used with a warning that says how to rebuild. An installed wheel has no sources beside it
and is taken as built."""

from __future__ import annotations

import importlib
import os
import warnings
from pathlib import Path
from types import ModuleType

from compactlog.twin_hash import source_hash

__all__ = ["load_twin", "stale_reason"]

ROOT = Path(__file__).resolve().parent.parent  # a checkout's root (setup.py's folder)
REBUILD = "python setup.py build_ext --inplace (or pip install -e .)"


def stale_reason(module: ModuleType, root: Path | None = None) -> str | None:
    """Why ``module``, a compiled twin, is older than the sources at ``root`` (this
    checkout's by default); None when it is current or its sources are not there."""
    root = ROOT if root is None else root
    sources = str(getattr(module, "SOURCES", "")).split()
    if not sources:
        if (root / "setup.py").exists() and (root / "storage" / "_twin_stamp.h").exists():
            return "it was built before extensions carried their sources' digest"
        return None
    if not all((root / rel).is_file() for rel in sources):
        return None
    if source_hash(root, sources) != getattr(module, "SOURCE_HASH", ""):
        return f"{', '.join(sources)} changed since it was built"
    return None


def load_twin(compiled: str, pure: ModuleType) -> tuple[ModuleType, bool]:
    """The module named ``compiled`` (a dotted name) and True, or ``pure`` and False."""
    if os.environ.get("COMPACTLOG_NO_EXT") == "1":
        return pure, False
    try:
        module = importlib.import_module(compiled)
    except ImportError:
        return pure, False
    reason = stale_reason(module)
    if reason is not None:
        warnings.warn(
            f"{compiled}: the compiled twin is stale ({reason}); using {pure.__name__}, "
            f"which is slower. Rebuild: {REBUILD}",
            RuntimeWarning,
            stacklevel=2,
        )
        return pure, False
    return module, True
