"""One context-manager protocol for everything in the client that holds a resource."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Closeable:
    """``with obj:`` closes ``obj`` on the way out; subclasses implement ``close``."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
