"""A compiled twin older than its sources is seen and its pure twin used (``twins.py``):
each extension carries the digest of the files it was built from (``setup.py``), and a
checkout pulled but not rebuilt silently ran old code before (a stale ``_batch`` made
PublishStream 4x slower through an "older build" fallback)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import compactlog.twins as twins
from compactlog.storage import _batch_py

compiled = pytest.importorskip("compactlog.storage._batch")


def copy_sources(to: Path) -> Path:
    for rel in compiled.SOURCES.split():
        (to / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(twins.ROOT / rel, to / rel)
    return to


def test_the_build_in_this_checkout_is_current() -> None:
    assert "storage/_batch.c" in compiled.SOURCES.split()
    assert twins.stale_reason(compiled) is None


def test_a_changed_source_makes_the_build_stale(tmp_path: Path) -> None:
    root = copy_sources(tmp_path)
    assert twins.stale_reason(compiled, root) is None
    header = root / "storage" / "_publish_check.h"
    header.write_bytes(header.read_bytes() + b"\n")
    reason = twins.stale_reason(compiled, root)
    assert reason is not None and "changed since it was built" in reason


def test_without_sources_beside_it_a_build_is_taken_as_built(tmp_path: Path) -> None:
    assert twins.stale_reason(compiled, tmp_path) is None  # an installed wheel


def test_a_stale_build_gives_way_to_its_pure_twin_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = copy_sources(tmp_path)
    source = root / "storage" / "_batch.c"
    source.write_bytes(source.read_bytes().replace(b"PyInit__batch", b"PyInit__batch ", 1))
    monkeypatch.setattr(twins, "ROOT", root)
    with pytest.warns(RuntimeWarning, match="stale .*Rebuild: python setup.py build_ext"):
        module, is_compiled = twins.load_twin("compactlog.storage._batch", _batch_py)
    assert (module, is_compiled) == (_batch_py, False)
