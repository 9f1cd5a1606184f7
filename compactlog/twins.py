"""Which twin of a compiled module to use: the C extension when it was built (the ordinary
install builds it where a compiler is present, ``setup.py``), else its pure-Python twin,
which behaves identically; ``COMPACTLOG_NO_EXT=1`` asks for the pure one (what an install
without a compiler gets; the tests run both). One rule for every pair of twins."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["load_twin"]


def load_twin(compiled: str, pure: ModuleType) -> tuple[ModuleType, bool]:
    """The module named ``compiled`` (a dotted name) and True, or ``pure`` and False."""
    if os.environ.get("COMPACTLOG_NO_EXT") == "1":
        return pure, False
    try:
        return importlib.import_module(compiled), True
    except ImportError:
        return pure, False
