"""``ConsumerBatchReceivePolicy``: pulsar-client's limits on what one ``batch_receive``
returns, ``ConsumerBatchReceivePolicy(max_num_message, max_num_bytes, timeout_ms)``.

A consumer hands out a batch per Consume response; the policy, given to ``subscribe`` as
``batch_receive_policy``, caps it at ``max_num_message`` messages and ``max_num_bytes`` of
values (a value of 0 or less: no cap; a batch holds at least one message whatever its
size) and bounds the wait for the first message at ``timeout_ms``, after which the batch
is empty, as pulsar-client's is. Without a policy ``batch_receive`` waits as ``receive``
does and returns everything buffered (CONTRACT section 13).
"""

from __future__ import annotations

from dataclasses import dataclass

from compactlog.errors import InvalidArgument

__all__ = ["ConsumerBatchReceivePolicy"]


@dataclass(frozen=True, slots=True)
class ConsumerBatchReceivePolicy:
    """At most ``max_num_message`` messages and ``max_num_bytes`` of values a batch,
    waiting at most ``timeout_ms`` for the first (pulsar-client's names and order)."""

    max_num_message: int
    max_num_bytes: int
    timeout_ms: int

    def __post_init__(self) -> None:
        if self.timeout_ms < 0:
            raise InvalidArgument(f"timeout_ms must be >= 0, got {self.timeout_ms}")
