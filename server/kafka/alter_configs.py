"""IncrementalAlterConfigs (key 44) and AlterConfigs (key 33): a topic's configs changed
through the call behind gRPC UpdateTopicConfig (``Broker.update_config``; every partition
of a partitioned topic), so the same validation and the same stored overrides.

IncrementalAlterConfigs' operations: SET sets an override; DELETE removes one (the topic
takes the server's or the built-in default again); APPEND and SUBTRACT add items to or
take items from a list config (``cleanup.policy``), starting from its current value, and
are INVALID_CONFIG on any other key, as Kafka's. AlterConfigs (the legacy call) replaces
the topic's overrides with those sent: a key not sent returns to its default.
``validate_only``: every check, nothing written. A change is planned and applied under
the broker's ``config_lock``, so an APPEND or a replacement never undoes a change made
meanwhile. Under partition placement a partitioned topic's change, planned on its
partition 0's config, is the front's UpdateTopicConfig (every slot holding a partition
changes); the lock then covers the planning only, as a gRPC caller's read-then-change.
A key named twice in one resource is INVALID_REQUEST; an unknown key or a bad value
INVALID_CONFIG. The broker's settings are read from ``--config`` at start: changing them
(or its loggers) is INVALID_REQUEST, Kafka's answer to a config it cannot change at run
time.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from compactlog.errors import InvalidConfig
from compactlog.server.admin.partitioned_topics import PartitionedNamespace
from compactlog.server.broker import TopicDescription
from compactlog.server.kafka.config_entries import LIST_KEYS, ResourceType
from compactlog.server.kafka.describe_configs import describe_topic
from compactlog.server.kafka.errors import ErrorCode, KafkaError, code_of
from compactlog.server.kafka.protocol import NO_THROTTLE, make, response_module
from compactlog.server.kafka.topics import KafkaContext

ALTER_CONFIGS = 33
INCREMENTAL_ALTER_CONFIGS = 44


class Op(enum.IntEnum):
    """Kafka's ``AlterConfigOp.OpType``."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True)
class Change:
    """What ``Broker.update_config`` is asked: overrides to set, overrides to remove."""

    set_: dict[str, str]
    remove: list[str]


Plan = Callable[[TopicDescription], Change]


def incremental(configs: Iterable[Any]) -> Plan:
    """The change of an IncrementalAlterConfigs resource, given the topic as it is."""

    def plan(desc: TopicDescription) -> Change:
        set_: dict[str, str] = {}
        remove: list[str] = []
        for c in _unique(configs):
            if c.config_operation == Op.SET:
                if c.value is None:
                    raise KafkaError(ErrorCode.invalid_request, f"SET {c.name}: a null value")
                set_[c.name] = c.value
            elif c.config_operation == Op.DELETE:
                remove.append(c.name)
            elif c.config_operation in (Op.APPEND, Op.SUBTRACT):
                set_[c.name] = _list_operation(desc.config, c.name, Op(c.config_operation), c.value)
            else:
                raise KafkaError(
                    ErrorCode.invalid_request, f"unknown config operation {c.config_operation}"
                )
        return Change(set_, remove)

    return plan


def replacing(configs: Iterable[Any]) -> Plan:
    """The change of a legacy AlterConfigs resource: the overrides become those sent
    (a null value is not sent, as Kafka skips it)."""

    def plan(desc: TopicDescription) -> Change:
        set_ = {c.name: c.value for c in _unique(configs) if c.value is not None}
        return Change(set_, [k for k in desc.overrides if k not in set_])

    return plan


def _unique(configs: Iterable[Any]) -> list[Any]:
    listed = list(configs)
    names = [c.name for c in listed]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise KafkaError(ErrorCode.invalid_request, f"config keys named twice: {', '.join(twice)}")
    return listed


def _list_operation(current: Mapping[str, str], name: str, op: Op, value: str | None) -> str:
    if name not in LIST_KEYS:
        raise InvalidConfig(
            f"{op.name} applies to list configs ({', '.join(sorted(LIST_KEYS))}), not {name!r}",
            key=name,
        )
    items = [i for i in current[name].split(",") if i]
    given = [i.strip() for i in (value or "").split(",") if i.strip()]
    if op == Op.APPEND:
        items += [i for i in given if i not in items]
    else:
        items = [i for i in items if i not in given]
    return ",".join(items)


def alter(ctx: KafkaContext, resource: Any, plan: Plan, validate_only: bool) -> Change | None:
    """Apply (or, ``validate_only``, check) one resource's change here; the change of a
    partitioned topic under partition placement is returned instead, for the front."""
    kind, name = resource.resource_type, resource.resource_name
    if kind in (ResourceType.BROKER, ResourceType.BROKER_LOGGER):
        raise KafkaError(
            ErrorCode.invalid_request,
            "the broker's settings are read from --config at start: change the file and "
            "restart the server",
        )
    if kind != ResourceType.TOPIC:
        raise KafkaError(ErrorCode.invalid_request, f"unsupported resource type {kind}")
    broker = ctx.broker_of(name)
    with broker.config_lock:  # the change is planned on the config it replaces
        change = plan(describe_topic(ctx, name))
        if broker.partitioned.get(name) is None:
            broker.update_config(name, change.set_, change.remove, validate_only)
        elif ctx.front is not None and not validate_only:
            return change
        else:
            namespace = PartitionedNamespace(broker)
            namespace.update_config(name, change.set_, change.remove, validate_only)
    return None


async def alter_resource(
    ctx: KafkaContext, module: Any, resource: Any, plan: Plan, validate_only: bool
) -> Any:
    try:
        spread = await ctx.run(alter, ctx, resource, plan, validate_only)
        if spread is not None and ctx.front is not None:
            await ctx.front.update_config(resource.resource_name, spread.set_, spread.remove)
        code, message = ErrorCode.none, None
    except Exception as exc:
        code, message = code_of(exc), str(exc)
    return make(
        module.AlterConfigsResourceResponse,
        error_code=code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )


async def _handle(
    ctx: KafkaContext, request: Any, module: Any, response: Any, make_plan: Callable[..., Plan]
) -> Any:
    responses = [
        await alter_resource(ctx, module, r, make_plan(r.configs), request.validate_only)
        for r in request.resources
    ]
    return make(response, throttle_time=NO_THROTTLE, responses=tuple(responses))


async def handle_incremental(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(INCREMENTAL_ALTER_CONFIGS, version)
    response = module.IncrementalAlterConfigsResponse
    return await _handle(ctx, request, module, response, incremental)


async def handle_legacy(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(ALTER_CONFIGS, version)
    return await _handle(ctx, request, module, module.AlterConfigsResponse, replacing)
