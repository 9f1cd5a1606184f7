"""Stop a chain of requests at its first failure: nothing after a failed write is acknowledged.

A chain is one producer's stream of requests (``server/log/writer.Chain``: one key per
PublishStream, -1 for a request on its own). A group of requests is worked through in
order, each whole or not at all on its own; once one of a chain fails, the later requests
of that chain are not tried and get the same error, so a client never sees a request
acknowledged after an earlier one of its stream was refused. The ledger store, the
segmented log and the server's writer all walk their groups with ``until_failed``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

NO_CHAIN = -1  # a request on its own: its failure stops nothing else


def until_failed(
    items: Sequence[Item],
    chains: Sequence[int] | None,
    do: Callable[[Item], Result],
) -> list[Result | Exception]:
    """``do(item)`` for each item in order, or its error in its place; an item whose chain
    (``chains[i]``, None: no chains) failed before gets that error and is not tried."""
    out: list[Result | Exception] = []
    failed: dict[int, Exception] = {}
    keys = [NO_CHAIN] * len(items) if chains is None else chains
    for item, chain in zip(items, keys, strict=True):
        if chain in failed:
            out.append(failed[chain])
            continue
        try:
            out.append(do(item))
        except Exception as exc:  # this item's own error; the others go on
            out.append(exc)
            if chain != NO_CHAIN:
                failed[chain] = exc
    return out
