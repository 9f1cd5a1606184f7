"""``get_or_create`` launches the Java gateway again when it died at birth (the fork
that starts it can lose its child to grpc/grpc#43055), and only then.

The builder here is a stand-in that fails as PySpark does; launching real gateways that
die on cue is not something Spark offers. The real launch is every ``spark`` test's."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.errors import PySparkRuntimeError

from compactlog.compactor.spark.session import GATEWAY_ATTEMPTS, get_or_create


class Builder:
    """Fails with ``conditions`` in turn, then returns ``session``."""

    def __init__(self, *conditions: str) -> None:
        self.conditions = list(conditions)
        self.calls = 0
        self.session = object()

    def getOrCreate(self) -> object:
        self.calls += 1
        if self.conditions:
            condition = self.conditions.pop(0)
            raise PySparkRuntimeError(errorClass=condition, messageParameters={})
        return self.session


def launch(builder: Builder) -> Any:
    return get_or_create(builder)  # type: ignore[arg-type]


def test_a_gateway_that_exited_is_launched_again() -> None:
    builder = Builder("JAVA_GATEWAY_EXITED", "JAVA_GATEWAY_EXITED")
    assert launch(builder) is builder.session
    assert builder.calls == 3


def test_the_last_attempt_s_failure_is_raised() -> None:
    builder = Builder(*["JAVA_GATEWAY_EXITED"] * GATEWAY_ATTEMPTS)
    with pytest.raises(PySparkRuntimeError) as caught:
        launch(builder)
    assert caught.value.getCondition() == "JAVA_GATEWAY_EXITED"
    assert builder.calls == GATEWAY_ATTEMPTS


def test_other_failures_are_not_retried() -> None:
    builder = Builder("SESSION_OR_CONTEXT_EXISTS", "JAVA_GATEWAY_EXITED")
    with pytest.raises(PySparkRuntimeError) as caught:
        launch(builder)
    assert caught.value.getCondition() == "SESSION_OR_CONTEXT_EXISTS"
    assert builder.calls == 1
