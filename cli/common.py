"""Pieces every CLI verb shares: the server address and credentials rules, KEY=VALUE
parsing, usage errors."""

from __future__ import annotations

import argparse
import datetime
import os
import sys

from compactlog.client.client import DEFAULT_ADDRESS, Client

PROG = "compactlog"
ENV_SERVER = "COMPACTLOG_SERVER"
DEFAULT_DATA_DIR = "./compactlog-data"  # where `serve` keeps its data unless told
ENV_TOKEN = "COMPACTLOG_TOKEN"
ENV_TLS_CA = "COMPACTLOG_TLS_CA"
ENV_TIMEOUT = "COMPACTLOG_TIMEOUT"
DEFAULT_TIMEOUT_S = 30.0

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE


class UsageError(Exception):
    """A mistake in the command line found after parsing (exit 2, like argparse's own)."""


def server_address(args: argparse.Namespace) -> str:
    """``--server``, else ``$COMPACTLOG_SERVER``, else the default."""
    return str(getattr(args, "server", None) or os.environ.get(ENV_SERVER) or DEFAULT_ADDRESS)


def token(args: argparse.Namespace) -> str | None:
    """``--token``, else ``$COMPACTLOG_TOKEN``, else none."""
    return getattr(args, "token", None) or os.environ.get(ENV_TOKEN) or None


def tls_ca(args: argparse.Namespace) -> str | None:
    """``--tls-ca``, else ``$COMPACTLOG_TLS_CA``, else none (plaintext)."""
    return getattr(args, "tls_ca", None) or os.environ.get(ENV_TLS_CA) or None


def timeout_seconds(args: argparse.Namespace | None) -> float:
    """``--timeout``, else ``$COMPACTLOG_TIMEOUT``, else 30 s: every call's deadline."""
    given = getattr(args, "timeout", None)
    if given is not None:
        return float(given)
    env = os.environ.get(ENV_TIMEOUT)
    if env:
        try:
            return positive_seconds(env)
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"{ENV_TIMEOUT}: {exc}") from None
    return DEFAULT_TIMEOUT_S


def connect(args: argparse.Namespace) -> Client:
    """A client for the address, credentials and deadline the command line chose."""
    return Client(
        server_address(args), token=token(args), tls_ca=tls_ca(args), timeout=timeout_seconds(args)
    )


def positive_seconds(text: str) -> float:
    """argparse type for ``--timeout``: a number of seconds > 0."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return seconds


def key_value(text: str) -> tuple[str, str]:
    """argparse type for ``KEY=VALUE``: the key is non-empty, the value may be empty."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1
INT64_MAX = 2**63 - 1


def whole_number(text: str, low: int = 0, high: int = UINT64_MAX) -> int:
    """A whole number in ``[low, high]``; ``ArgumentTypeError`` (one readable line) if not.

    The bounds are the wire's (uint32 counts, uint64 ids, int64 times): a number the
    protobuf field cannot hold is a usage error here, not a ``ValueError`` from protobuf.
    """
    try:
        number = int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if number < low:
        raise argparse.ArgumentTypeError(f"expected a number >= {low}, got {number}")
    if number > high:
        raise argparse.ArgumentTypeError(f"expected a number <= {high}, got {text.strip()}")
    return number


def non_negative_int(text: str) -> int:
    """argparse type for counts such as ``--limit`` (the wire's uint32)."""
    return whole_number(text, 0, UINT32_MAX)


def positive_int(text: str) -> int:
    return whole_number(text, 1, UINT32_MAX)


def offset(text: str) -> int:
    """argparse type for a SEGMENTED offset (uint64)."""
    return whole_number(text, 0, UINT64_MAX)


def timestamp_ms(text: str) -> int:
    """argparse type of every timestamp option (``read --as-of-time``, ``subscriptions
    reset --timestamp``, ``produce --event-time-ms``): epoch milliseconds or an ISO 8601
    time (UTC when it names no zone), at or after the epoch; the wire's int64 ms."""
    text = text.strip()
    if text.isdigit():
        return whole_number(text, 0, INT64_MAX)
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 time (e.g. 2026-11-23T21:00:00Z) or epoch milliseconds, "
            f"got {text!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    ms = int(when.timestamp() * 1000)
    if ms < 0:
        raise argparse.ArgumentTypeError(f"expected a time at or after 1970-01-01, got {text!r}")
    return ms


EXIT_SPARK_MISSING = 2


def spark_missing(exc: BaseException) -> int:
    """One line saying the Spark engine cannot run here and how to get it."""
    sys.stderr.write(
        f"compactlog: error: the Spark engine is not available: {exc} "
        "(install it with: pip install 'compactlog[spark]'; it needs Java 17+)\n"
    )
    return EXIT_SPARK_MISSING
