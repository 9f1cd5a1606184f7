"""``compactlog topics create | list | describe | delete | set-config``.

``create --if-not-exists`` and ``delete --if-exists`` make scripts idempotent, as
``kafka-topics.sh`` has them; every verb prints text or, with ``--output json``, one JSON
object (``list``: one per topic).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from compactlog.cli.common import (
    UsageError,
    connect,
    key_value,
    non_negative_int,
    positive_int,
)
from compactlog.cli.output import add_json_flag, emit, print_json, wants_json
from compactlog.client.types import TopicInfo
from compactlog.errors import TopicExists, TopicNotFound


def add_parser(commands: Any) -> None:
    """Register ``topics`` and its verbs on the top-level subparsers."""
    topics = commands.add_parser("topics", help="create, list, describe, delete, configure topics")
    verbs = topics.add_subparsers(dest="topics_command", metavar="VERB", required=True)

    create = verbs.add_parser("create", help="create a topic")
    create.add_argument("name", metavar="NAME")
    create.add_argument(
        "--kind",
        choices=("ledger", "segmented"),
        default="ledger",
        help="ledger: Pulsar-style (default); segmented: Kafka-style",
    )
    create.add_argument(
        "--config",
        metavar="KEY=VALUE",
        type=key_value,
        nargs="+",
        action="extend",
        default=[],
        help="topic config, repeatable",
    )
    create.add_argument(
        "--partitions",
        metavar="N",
        type=non_negative_int,
        default=0,
        help="a partitioned topic of N partitions (NAME-partition-0 .. N-1)",
    )
    create.add_argument(
        "--if-not-exists", action="store_true", help="succeed if the topic already exists"
    )
    add_json_flag(create, "print the topic as JSON")
    create.set_defaults(func=create_topic)

    grow = verbs.add_parser("add-partitions", help="grow a partitioned topic to N partitions")
    grow.add_argument("name", metavar="NAME")
    grow.add_argument("partitions", metavar="N", type=positive_int, help="the new total")
    add_json_flag(grow, "print the topic as JSON")
    grow.set_defaults(func=add_partitions)

    listing = verbs.add_parser("list", help="list topics")
    add_json_flag(listing, "one JSON object per topic")
    listing.set_defaults(func=list_topics)

    describe = verbs.add_parser("describe", help="kind, stats and effective config of a topic")
    describe.add_argument("name", metavar="NAME")
    add_json_flag(describe, "print one JSON object")
    describe.set_defaults(func=describe_topic)

    delete = verbs.add_parser("delete", help="delete a topic and all its data")
    delete.add_argument("name", metavar="NAME")
    delete.add_argument(
        "--if-exists", action="store_true", help="succeed if there is no such topic"
    )
    add_json_flag(delete, "print the result as JSON")
    delete.set_defaults(func=delete_topic)

    set_config = verbs.add_parser("set-config", help="set (or --remove) topic config keys")
    set_config.add_argument("name", metavar="NAME")
    set_config.add_argument("settings", metavar="KEY=VALUE", type=key_value, nargs="*")
    set_config.add_argument(
        "--remove",
        metavar="KEY",
        action="append",
        default=[],
        help="drop a key back to the server default, repeatable",
    )
    add_json_flag(set_config, "print the topic as JSON")
    set_config.set_defaults(func=set_topic_config)


def topic_json(info: TopicInfo) -> dict[str, Any]:
    """A topic as JSON-ready data; ids as ``"LEDGER:ENTRY"`` like everywhere in the CLI."""
    data = asdict(info)
    stats = data["stats"]
    for field in ("first_id", "last_id"):
        value = getattr(info.stats, field)
        stats[field] = None if value is None else str(value)
    data["config"] = dict(info.config)
    return data


def format_topic(info: TopicInfo) -> str:
    s = info.stats
    lines = [
        f"name:      {info.name}",
        f"kind:      {info.kind}",
        f"entries:   {s.entries}",
        f"bytes:     {s.bytes}",
    ]
    if info.offline_reason:
        lines.insert(2, f"OFFLINE:   {info.offline_reason}")
    if info.partitions:
        names = ", ".join(f"{info.name}-partition-{i}" for i in range(info.partitions))
        lines.insert(2, f"partitions: {info.partitions} ({names})")
    if info.kind == "ledger":
        lines.append(f"ledgers:   {s.ledgers}")
    else:
        lines.append(f"segments:  {s.segments}")
        lines.append(f"log start offset: {s.log_start_offset}")
    lines += [
        f"first id:  {s.first_id if s.first_id is not None else '-'}",
        f"last id:   {s.last_id if s.last_id is not None else '-'}",
    ]
    if info.kind == "ledger":  # SEGMENTED topics are cleaned in place: no compacted ledger
        lines.append(f"compacted: {s.compacted_entries} entries, {s.compacted_bytes} bytes")
    return "\n".join([*lines, *config_lines(info)])


def config_lines(info: TopicInfo) -> list[str]:
    """Every effective key, each marked as set on the topic (``override``) or not
    (``default``: the server's --config file or built in), as kafka-configs --describe
    tells the topic's overrides apart."""
    if not info.config:
        return []
    items = sorted(info.config.items())
    width = max(len(f"{key} = {value}") for key, value in items)
    marks = {key: "override" if key in info.overrides else "default" for key, _ in items}
    out = [f"config ({len(info.overrides)} override{'' if len(info.overrides) == 1 else 's'}):"]
    out += [f"  {f'{key} = {value}':<{width}}  ({marks[key]})" for key, value in items]
    return out


def create_topic(args: argparse.Namespace) -> int:
    config = dict(args.config)
    with connect(args) as client:
        try:
            info = client.create_topic(
                args.name, kind=args.kind, config=config, partitions=args.partitions
            )
            created = True
        except TopicExists:
            if not args.if_not_exists:
                raise
            info, created = client.get_topic(args.name), False
    verb = "created topic" if created else "topic already exists:"
    parts = f", {info.partitions} partitions" if info.partitions else ""
    emit(args, {"created": created, **topic_json(info)}, f"{verb} {info.name} ({info.kind}{parts})")
    return 0


def add_partitions(args: argparse.Namespace) -> int:
    with connect(args) as client:
        info = client.add_partitions(args.name, args.partitions)
    emit(args, topic_json(info), f"topic {info.name} has {info.partitions} partitions")
    return 0


def list_topics(args: argparse.Namespace) -> int:
    with connect(args) as client:
        topics = sorted(client.list_topics(), key=lambda t: t.name)
    if wants_json(args):
        for info in topics:
            print_json(topic_json(info))
        return 0
    if not topics:
        print("no topics")
        return 0
    width = max(len("NAME"), *(len(t.name) for t in topics))
    print(f"{'NAME':<{width}}  {'KIND':<9}  {'ENTRIES':>10}  {'BYTES':>12}")
    for t in topics:
        print(f"{t.name:<{width}}  {t.kind:<9}  {t.stats.entries:>10}  {t.stats.bytes:>12}")
    return 0


def describe_topic(args: argparse.Namespace) -> int:
    with connect(args) as client:
        info = client.get_topic(args.name)
    emit(args, topic_json(info), lambda: format_topic(info))
    return 0


def delete_topic(args: argparse.Namespace) -> int:
    with connect(args) as client:
        try:
            client.delete_topic(args.name)
            deleted = True
        except TopicNotFound:
            if not args.if_exists:
                raise
            deleted = False
    text = f"deleted topic {args.name}" if deleted else f"no topic {args.name} to delete"
    emit(args, {"name": args.name, "deleted": deleted}, text)
    return 0


def set_topic_config(args: argparse.Namespace) -> int:
    if not args.settings and not args.remove:
        raise UsageError("topics set-config needs at least one KEY=VALUE or --remove KEY")
    with connect(args) as client:
        info = client.update_topic_config(args.name, set=dict(args.settings), remove=args.remove)
    changed = [key for key, _ in args.settings] + list(args.remove)
    emit(
        args,
        topic_json(info),
        f"updated topic {info.name}: "
        + ", ".join(f"{key}={info.config.get(key, '(default)')}" for key in changed),
    )
    return 0
