"""The repository's top-level folders (storage/, compactor/, server/, client/, cli/,
benchmarks/) are linked into this package and are modules of it only.

From the repository root they would also import as top-level packages (the working
directory is on ``sys.path``), and ``import server.broker`` beside
``import compactlog.server.broker`` would load the same file twice as two modules: two
registries, two sets of classes, ``isinstance`` failing between them. Each folder's
``__init__`` calls :func:`only_as` so that the second name fails at once instead.
"""

from __future__ import annotations


def only_as(module_name: str, expected: str) -> None:
    """Refuse to load a linked folder under any name but its ``compactlog.*`` one."""
    if module_name != expected:
        raise ImportError(
            f"{module_name!r} is the folder of {expected!r}; import {expected} instead "
            "(the repository's top-level folders are not packages of their own)",
            name=module_name,
        )
