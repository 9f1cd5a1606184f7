"""One context-manager protocol for everything in the client that holds a resource."""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType
from typing import Self

from compactlog.errors import CompactlogError


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


def close_all(things: Iterable[Closeable]) -> None:
    """Close each; the first failure (a queued ack's, say) is raised once all are closed."""
    failure: CompactlogError | None = None
    for thing in things:
        try:
            thing.close()
        except CompactlogError as exc:
            failure = failure or exc
    if failure is not None:
        raise failure
