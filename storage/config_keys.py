"""A config key (``ConfigKey``) and the parsers its values go through.

Each parser checks a value the way Kafka's ``ConfigDef`` validators do (a range, one of a
set of choices, ``-1`` where Kafka allows it) and says what it expected, so
``storage.config``'s tables read as one line per key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compactlog.errors import InvalidConfig

__all__ = [
    "LONG_MAX",
    "ConfigKey",
    "bool_key",
    "choice_key",
    "cleanup_policy_key",
    "float_key",
    "int_key",
]

LONG_MAX = 9223372036854775807


@dataclass(frozen=True)
class ConfigKey:
    """One config key: how to parse a string value, its default and its valid range."""

    name: str
    parse: Callable[[str], Any]
    default: Any
    doc: str

    def validate(self, raw: object) -> Any:
        try:
            return self.parse(str(raw).strip() if not isinstance(raw, bool) else str(raw).lower())
        except (ValueError, TypeError) as exc:
            raise InvalidConfig(
                f"invalid value {raw!r} for {self.name}: {exc}", key=self.name, value=str(raw)[:100]
            ) from None


def int_key(lo: int, hi: int = LONG_MAX) -> Callable[[str], int]:
    expects = f"expected a whole number in [{lo}, {hi}]"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(expects) from None  # never int()'s own text (Kafka: "Not a number")
        if not lo <= value <= hi:
            raise ValueError(f"{expects}, got {value}")
        return value

    return parse


def float_key(lo: float, hi: float) -> Callable[[str], float]:
    expects = f"expected a number in [{lo}, {hi}]"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(expects) from None
        if not lo <= value <= hi:
            raise ValueError(expects)
        return value

    return parse


def bool_key(text: str) -> bool:
    lowered = text.lower()
    if lowered not in ("true", "false"):
        raise ValueError("must be true or false")
    return lowered == "true"


def choice_key(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return text

    return parse


def cleanup_policy_key(text: str) -> str:
    parts = sorted({p.strip() for p in text.split(",") if p.strip()})
    if not parts or any(p not in ("compact", "delete") for p in parts):
        raise ValueError("must be delete, compact or compact,delete")
    return ",".join(parts)
