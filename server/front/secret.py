"""How a shard knows a call came from its own front (partition placement).

Under partition placement (``storage/slots.py``) the partitions of one topic live in
several slots, and only the front can answer a call on ``NAME`` whole: it asks every slot
holding a partition and merges. A slot asked about ``NAME`` answers for the partitions it
holds, so it must answer only its front, never a client that reached its port directly
(that client would get a part taken for the whole). The front makes a random secret at
start, hands it to its shards in the environment (not argv: ``ps`` shows argv) and sends
it in the metadata of every call it fans out; a slot answers a call on a spread ``NAME``
only when the secret matches, and refuses it with ``NOT_OWNER`` otherwise.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterable
from typing import Any

FRONT_KEY = "x-compactlog-front"
SECRET_ENV = "COMPACTLOG_FRONT_SECRET"


def new_secret() -> str:
    return secrets.token_hex(16)


def from_front(metadata: Iterable[tuple[str, Any]] | None, secret: str | None) -> bool:
    """Whether ``metadata`` carries ``secret`` (constant-time compare)."""
    if not secret:
        return False
    for key, value in metadata or ():
        if key == FRONT_KEY:
            given = value if isinstance(value, str) else bytes(value).decode("ascii", "replace")
            return hmac.compare_digest(given, secret)
    return False
