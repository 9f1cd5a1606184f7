"""The command line before argparse sees it: global options anywhere, ``bench`` cut off.

The connection options (``--server`` or ``--bootstrap-server``, ``--token``, ``--tls-ca``,
``--timeout``) and ``--output`` belong to the top-level parser, but people type them where
they think of them:
``compactlog topics list --server h:1 --output json``, as ``kafka-topics.sh
--bootstrap-server`` or ``pulsar-admin --admin-url`` users do. ``globals_first`` moves every
one of them (``--opt VALUE`` or ``--opt=VALUE``) to the front, up to a ``--``. A command
that adds a verb needs nothing for this: every verb gets the global options for free, as
long as none of its own options reuses one of these names.
"""

from __future__ import annotations

from collections.abc import Sequence

GLOBAL_WITH_VALUE = (
    "--server",
    "--bootstrap-server",  # kafka-console-consumer's name for --server
    "--token",
    "--tls-ca",
    "--timeout",
    "--output",
)


def _global_option(token: str) -> tuple[bool, bool]:
    """(is a global option, carries its value inline as ``--opt=VALUE``)."""
    if token in GLOBAL_WITH_VALUE:
        return True, False
    name, sep, _ = token.partition("=")
    return (bool(sep) and name in GLOBAL_WITH_VALUE), True


def globals_first(argv: Sequence[str]) -> list[str]:
    """Move every global option with its value to the front, keeping their order."""
    moved: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            rest.extend(argv[i:])
            break
        is_global, inline = _global_option(token)
        if is_global and inline:
            moved.append(token)
        elif is_global and i + 1 < len(argv):
            moved += argv[i : i + 2]
            i += 2
            continue
        else:
            rest.append(token)  # a global option with no value: argparse reports it
        i += 1
    return moved + rest


def split_bench(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """Cut ``bench``'s own arguments off before argparse, which would try to parse them."""
    i = 0
    while i < len(argv):
        token = argv[i]
        if token in GLOBAL_WITH_VALUE:
            i += 2
            continue
        if token.startswith("-"):
            i += 1
            continue
        if token == "bench":
            return list(argv[: i + 1]), list(argv[i + 1 :])
        break
    return list(argv), None
