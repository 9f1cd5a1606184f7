"""pulsar-client's enums: ``ConsumerType`` and ``InitialPosition`` (CONTRACT section 13).

Each member's value is the number of its counterpart on the wire (``SubscriptionType``,
``StartPosition``), so the conversion is ``int(member.value)`` with no table beside it.
"""

from __future__ import annotations

import enum

__all__ = ["ConsumerType", "InitialPosition", "Result"]


class ConsumerType(enum.Enum):
    """How a subscription shares its messages among consumers (Pulsar's meanings)."""

    Exclusive = 0  # one consumer name at a time; another gets ConsumerBusy
    Shared = 1  # each message to one consumer at a time, round the consumers
    Failover = 2  # one active consumer, the next takes over when it goes


class InitialPosition(enum.Enum):
    """Where a new subscription starts (an existing one keeps its cursor)."""

    Earliest = 0
    Latest = 1


class Result(enum.Enum):
    """What a ``send_async`` callback gets first when the send succeeded (pulsar-client's
    ``Result.Ok``); a failed send passes the ``CompactlogError`` instead."""

    Ok = 0
