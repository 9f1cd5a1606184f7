"""``compactlog subscriptions list | delete | reset TOPIC ...`` (CONTRACT section 6).

``list`` prints one line a subscription (name, type, mark-delete position, backlog);
``reset`` moves a subscription to ``--to earliest|latest|LEDGER:ENTRY[:PARTITION]`` (the
message itself delivered again; a bare offset on SEGMENTED topics) or ``--timestamp TIME``
(ISO 8601 or epoch ms, as every timestamp option: the first message published at or
after it). The server's own subscriptions (``__compaction``) are listed but cannot be
moved or deleted. On a partitioned topic ``NAME`` the server answers for every partition
(docs/subscriptions.md): ``list`` sums, ``delete`` and time/position resets act on all of
them, an id reset on the partition the id names.
"""

from __future__ import annotations

import argparse
from typing import Any

from compactlog.cli.common import connect, timestamp_ms
from compactlog.cli.data import parse_start, resolve_start
from compactlog.cli.output import add_json_flag, emit, print_json, wants_json
from compactlog.client.types import MessageId, SubscriptionInfo

INT32_MAX = 2**31 - 1


def add_parser(commands: Any) -> None:
    """Register ``subscriptions`` and its verbs on the top-level subparsers."""
    subs = commands.add_parser("subscriptions", help="list, delete, reset subscriptions")
    verbs = subs.add_subparsers(dest="subscriptions_command", metavar="VERB", required=True)

    listing = verbs.add_parser("list", help="subscriptions of a topic with their backlog")
    listing.add_argument("topic", metavar="TOPIC")
    add_json_flag(listing, "one JSON object a subscription")
    listing.set_defaults(func=list_subscriptions)

    delete = verbs.add_parser("delete", help="delete a subscription and its acknowledgements")
    delete.add_argument("topic", metavar="TOPIC")
    delete.add_argument("subscription", metavar="SUBSCRIPTION")
    delete.set_defaults(func=delete_subscription)

    reset = verbs.add_parser("reset", help="move a subscription's cursor")
    reset.add_argument("topic", metavar="TOPIC")
    reset.add_argument("subscription", metavar="SUBSCRIPTION")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--to",
        metavar="earliest|latest|LEDGER:ENTRY[:PARTITION]|OFFSET",
        type=parse_target,
        help="where delivery starts again (a message id is delivered again itself; on a "
        "partitioned topic it names its partition, the only one reset)",
    )
    target.add_argument(
        "--timestamp",
        metavar="TIME",
        type=timestamp_ms,
        help="start at the first message published at or after TIME (ISO 8601, e.g. "
        "2026-11-23T21:00:00Z, or epoch milliseconds)",
    )
    reset.set_defaults(func=reset_subscription)


def parse_target(text: str) -> str | MessageId | int:
    """argparse type for ``--to``: what ``read --from`` takes, or an id with its partition
    (``LEDGER:ENTRY:PARTITION``, as ``list`` on ``NAME-partition-i`` prints it)."""
    head, colon, partition = text.strip().rpartition(":")
    if colon and head.count(":") == 1 and partition.isdigit():
        if int(partition) > INT32_MAX:
            raise argparse.ArgumentTypeError(f"partition {partition} is out of range")
        start = parse_start(head)
        if isinstance(start, MessageId):
            return MessageId(
                partition=int(partition), ledger_id=start.ledger_id(), entry_id=start.entry_id()
            )
    return parse_start(text)


def subscription_json(info: SubscriptionInfo) -> dict[str, Any]:
    mark = None if info.mark_delete is None else str(info.mark_delete)
    return {"name": info.name, "type": info.type, "mark_delete": mark, "backlog": info.backlog}


def list_subscriptions(args: argparse.Namespace) -> int:
    with connect(args) as client:
        subs = client.list_subscriptions(args.topic)
    if wants_json(args):
        for info in subs:
            print_json(subscription_json(info))
        return 0
    if not subs:
        print(f"no subscriptions on {args.topic}")
        return 0
    width = max(len("NAME"), *(len(s.name) for s in subs))
    print(f"{'NAME':<{width}}  {'TYPE':<9}  {'MARK-DELETE':>14}  {'BACKLOG':>10}")
    for s in subs:
        mark = "-" if s.mark_delete is None else str(s.mark_delete)
        print(f"{s.name:<{width}}  {s.type:<9}  {mark:>14}  {s.backlog:>10}")
    return 0


def delete_subscription(args: argparse.Namespace) -> int:
    with connect(args) as client:
        client.delete_subscription(args.topic, args.subscription)
    emit(
        args,
        {"deleted": args.subscription, "topic": args.topic},
        f"deleted subscription {args.subscription} of {args.topic}",
    )
    return 0


def reset_subscription(args: argparse.Namespace) -> int:
    with connect(args) as client:
        to = args.to
        if isinstance(to, int):  # a bare offset: SEGMENTED topics only
            to = resolve_start(client.get_topic(args.topic), to, "--to")
        if args.timestamp is not None:
            info = client.reset_cursor(args.topic, args.subscription, timestamp_ms=args.timestamp)
        elif isinstance(to, MessageId):
            info = client.reset_cursor(args.topic, args.subscription, message_id=to)
        else:
            info = client.reset_cursor(args.topic, args.subscription, position=to)
    mark = "-" if info.mark_delete is None else str(info.mark_delete)
    emit(
        args,
        subscription_json(info),
        f"reset subscription {info.name} of {args.topic}: mark-delete {mark}, "
        f"backlog {info.backlog}",
    )
    return 0
