"""A served process's startup heap, kept out of every later garbage collection.

Before a server serves it has imported grpc, protobuf, kio and opened its stores: a few
hundred thousand objects that live as long as the process. Each full collection walks
them all again, and a stopping server makes several: ``RocksDB.close`` collects once a
store (so that no dead iterator keeps its LOCK) and the interpreter collects as it exits.
On a loaded two-core box that made an idle shard take 2 to 5 s to exit. Once the process
is ready, ``settle`` collects what startup left as garbage (an iterator in a cycle
included) and moves the rest to the permanent generation (``gc.freeze``), so the later
collections walk only what serving made.
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Collect startup's garbage, then freeze what is left (call once, when ready)."""
    gc.collect()
    gc.freeze()
