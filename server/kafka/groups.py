"""Group coordination on the wire: FindCoordinator (10), JoinGroup (11), Heartbeat (12),
LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16).

This server is the coordinator of every group (node 0, the advertised address). The
handlers read the request of any version, call the group's state machine
(``group_coordinator``) and answer in the version's shape; a ``KafkaError`` of the
machine (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, ...) is the
answer's error code. Committed offsets are ``offsets``' (subscriptions).
"""

from __future__ import annotations

from typing import Any

from compactlog.server.kafka.errors import ErrorCode, KafkaError
from compactlog.server.kafka.group_coordinator import Group, Joined
from compactlog.server.kafka.offsets import check_group_id
from compactlog.server.kafka.protocol import NO_THROTTLE, make, response_module
from compactlog.server.kafka.topics import KafkaContext

FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS = 15, 16
GROUP_KEY = 0  # FindCoordinator key_type: a group (1, a transaction, is not served)


def _group(ctx: KafkaContext, group_id: str) -> Group:
    check_group_id(group_id)
    return ctx.group(group_id)


async def find_coordinator(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(FIND_COORDINATOR, version)
    key_type = getattr(request, "key_type", GROUP_KEY)
    code = ErrorCode.none if key_type == GROUP_KEY else ErrorCode.coordinator_not_available
    message = None if code == ErrorCode.none else "only consumer groups are coordinated here"

    def found(key: str) -> dict[str, Any]:
        if code != ErrorCode.none:
            return {"node_id": -1, "host": "", "port": -1}
        node = ctx.cluster.coordinator_of(key)  # the broker the group's name hashes to
        host, port = ctx.cluster.brokers[node]
        return {"node_id": node, "host": host, "port": port}

    if version < 4:
        return make(
            module.FindCoordinatorResponse,
            throttle_time=NO_THROTTLE,
            error_code=code,
            error_message=message,
            **found(request.key),
        )
    coordinators = tuple(
        make(module.Coordinator, key=key, error_code=code, error_message=message, **found(key))
        for key in request.coordinator_keys
    )
    return make(
        module.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=coordinators
    )


async def join_group(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(JOIN_GROUP, version)
    session_s = request.session_timeout.total_seconds()
    rebalance = getattr(request, "rebalance_timeout", None)
    rebalance_s = session_s if rebalance is None else rebalance.total_seconds()
    protocols = [(p.name, p.metadata) for p in request.protocols]
    try:
        joined = await _group(ctx, request.group_id).join(
            request.member_id, "", (session_s, rebalance_s), request.protocol_type, protocols
        )
    except KafkaError as exc:
        joined, code = Joined(-1, "", "", "", request.member_id, []), exc.code
    else:
        code = ErrorCode.none
    members = tuple(
        make(module.JoinGroupResponseMember, member_id=m, group_instance_id=None, metadata=data)
        for m, data in joined.members
    )
    return make(
        module.JoinGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        generation_id=joined.generation,
        protocol_type=joined.protocol_type or None,
        protocol_name=joined.protocol or (None if version >= 7 else ""),
        leader=joined.leader,
        member_id=joined.member_id,
        members=members,
    )


async def sync_group(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(SYNC_GROUP, version)
    assignments = {a.member_id: a.assignment for a in request.assignments}
    group: Group | None = None
    try:
        group = _group(ctx, request.group_id)
        assignment = await group.sync(request.member_id, request.generation_id, assignments)
        code = ErrorCode.none
    except KafkaError as exc:
        assignment, code = b"", exc.code
    ok = code == ErrorCode.none and group is not None
    return make(
        module.SyncGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        protocol_type=group.protocol_type if ok and group else None,
        protocol_name=group.protocol if ok and group else None,
        assignment=assignment,
    )


async def heartbeat(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(HEARTBEAT, version)
    try:
        _group(ctx, request.group_id).heartbeat(request.member_id, request.generation_id)
        code = ErrorCode.none
    except KafkaError as exc:
        code = exc.code
    return make(module.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=code)


async def leave_group(ctx: KafkaContext, request: Any, version: int) -> Any:
    """v0-2 name one member; v3+ a list (KIP-345), each answered on its own."""
    module = response_module(LEAVE_GROUP, version)
    ids = [request.member_id] if version < 3 else [m.member_id for m in request.members]
    codes: list[ErrorCode] = []
    for member_id in ids:
        try:
            _group(ctx, request.group_id).leave(member_id)
            codes.append(ErrorCode.none)
        except KafkaError as exc:
            codes.append(exc.code)
    top = codes[0] if version < 3 else ErrorCode.none
    members = tuple(  # v3+ (KIP-345); before, the one member's code is the top one
        make(module.MemberResponse, member_id=m, group_instance_id=None, error_code=c)
        for m, c in zip(ids, codes, strict=True)
        if version >= 3
    )
    return make(
        module.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=top, members=members
    )


async def describe_groups(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(DESCRIBE_GROUPS, version)
    return make(
        module.DescribeGroupsResponse,
        throttle_time=NO_THROTTLE,
        groups=tuple(_described(ctx, module, group_id) for group_id in request.groups),
    )


def _described(ctx: KafkaContext, module: Any, group_id: str) -> Any:
    group = ctx.groups.groups.get(group_id)
    if group is None:  # Kafka describes an unknown group as Dead, with no error
        state, protocol_type, protocol, members = "Dead", "", "", ()
    else:
        state, protocol_type, protocol = group.state.value, group.protocol_type, group.protocol
        members = tuple(
            make(
                module.DescribedGroupMember,
                member_id=m.member_id,
                group_instance_id=None,
                client_id=m.client_id,
                client_host="",
                member_metadata=dict(m.protocols).get(protocol, b""),
                member_assignment=m.assignment,
            )
            for m in group.members.values()
        )
    return make(
        module.DescribedGroup,
        error_code=ErrorCode.none,
        group_id=group_id,
        group_state=state,
        protocol_type=protocol_type,
        protocol_data=protocol,
        members=members,
        authorized_operations=-(2**31),
    )


async def list_groups(ctx: KafkaContext, request: Any, version: int) -> Any:
    module = response_module(LIST_GROUPS, version)
    wanted = {s.lower() for s in getattr(request, "states_filter", ())}
    groups = tuple(
        make(
            module.ListedGroup,
            group_id=group.group_id,
            protocol_type=group.protocol_type,
            group_state=group.state.value,
        )
        for group in ctx.groups.groups.values()
        if not wanted or group.state.value.lower() in wanted
    )
    return make(
        module.ListGroupsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        groups=groups,
    )
