"""The ``compactlog`` command line (CONTRACT §4): argument parsing, dispatch, error policy.

Verbs live in ``topics`` (topics ...), ``data`` (produce, read), ``admin`` (admin topics
compact / compaction-status), ``subscriptions`` (subscriptions list / delete / reset) and
``export`` (export, through Spark); ``serve`` and
``bench`` import the server and the benchmark suite only when used, so the other verbs
stay light. Every failure ends as one line on stderr,
``compactlog: error: <message>``, and a non-zero exit: 1 for a failed operation, 2 for a
usage error or a missing component, 130 for Ctrl-C. Set ``COMPACTLOG_DEBUG=1`` to get the
traceback of an unexpected error instead.

The global options ``--server``, ``--token``, ``--tls-ca``, ``--timeout`` and ``--output``
may stand anywhere on the command line, before or after the verb (``cli.argv``).
``--timeout SECONDS`` (env ``COMPACTLOG_TIMEOUT``, default 30) is the deadline of every call
the command makes (see ``compactlog.client.deadlines`` for streams), and a call past it fails
the command with one line and exit 1. ``--output text|json`` picks how data is printed
(``cli.output``).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from compactlog.cli import admin as cli_admin
from compactlog.cli import completion as cli_completion
from compactlog.cli import data as cli_data
from compactlog.cli import export as cli_export
from compactlog.cli import history as cli_history
from compactlog.cli import offline as cli_offline
from compactlog.cli import produce as cli_produce
from compactlog.cli import records as cli_records
from compactlog.cli import subscriptions as cli_subscriptions
from compactlog.cli import topics as cli_topics
from compactlog.cli.argv import globals_first, split_bench
from compactlog.cli.common import (
    DEFAULT_DATA_DIR,
    ENV_SERVER,
    ENV_TIMEOUT,
    ENV_TLS_CA,
    ENV_TOKEN,
    EXIT_BROKEN_PIPE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    PROG,
    UsageError,
    positive_seconds,
    timeout_seconds,
)
from compactlog.cli.output import add_output_option
from compactlog.client.client import DEFAULT_ADDRESS
from compactlog.client.errors import Timeout
from compactlog.errors import CompactlogError

Handler = Callable[[argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the contract's error format), not a usage dump."""

    def error(self, message: str) -> NoReturn:
        hint = f" (see '{self.prog} --help')"
        sys.stderr.write(f"{PROG}: error: {message}{hint}\n")
        raise SystemExit(EXIT_USAGE)


def _version() -> str:
    """The installed distribution's version (the package may be a namespace path in dev)."""
    try:
        return importlib.metadata.version("compactlog")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree; each leaf sets ``func``, the handler it runs."""
    parser = _Parser(
        prog=PROG,
        description="compactlog: a log store with Pulsar-style and Kafka-style compaction.",
    )
    _add_connection_options(parser)
    add_output_option(parser)
    parser.add_argument("--version", action="version", version=f"{PROG} {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    cli_topics.add_parser(commands)
    cli_produce.add_parser(commands)
    cli_data.add_parsers(commands)
    cli_records.add_parser(commands)
    cli_history.add_parser(commands)
    cli_export.add_parser(commands)
    cli_offline.add_parsers(commands)
    cli_subscriptions.add_parser(commands)

    admin = commands.add_parser("admin", help="administrative operations")
    admin_sub = admin.add_subparsers(dest="admin_command", metavar="AREA", required=True)
    cli_admin.add_parser(admin_sub)

    serve = commands.add_parser("serve", help="run the server in the foreground")
    _add_serve_options(serve)
    _add_security_options(serve)
    serve.set_defaults(func=_serve)

    bench = commands.add_parser(
        "bench", help="the benchmark suite (arguments go to it)", add_help=False
    )
    bench.set_defaults(func=_bench_missing_args)
    cli_completion.add_parser(commands)
    return parser


def _add_connection_options(parser: argparse.ArgumentParser) -> None:
    """Where and how every client command reaches the server."""
    parser.add_argument(
        "--server",
        "--bootstrap-server",
        dest="server",
        metavar="HOST:PORT",
        default=None,
        help=f"server address (env {ENV_SERVER}, default {DEFAULT_ADDRESS}); "
        "--bootstrap-server is the Kafka tools' name",
    )
    parser.add_argument(
        "--token",
        metavar="TOKEN",
        default=None,
        help=f"bearer token for a server with --auth-tokens (env {ENV_TOKEN}, safer: not in ps)",
    )
    parser.add_argument(
        "--tls-ca",
        metavar="FILE",
        default=None,
        help=f"CA certificate (PEM) of a TLS server; connects with TLS (env {ENV_TLS_CA})",
    )
    parser.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=positive_seconds,
        default=None,
        help=f"deadline of each call to the server, anywhere on the line (env {ENV_TIMEOUT}, "
        "default 30)",
    )


def _add_serve_options(serve: argparse.ArgumentParser) -> None:
    """``serve``'s data dir, listening addresses and process layout."""
    serve.add_argument(
        "--data-dir",
        metavar="PATH",
        default=DEFAULT_DATA_DIR,
        help=f"data directory (default {DEFAULT_DATA_DIR})",
    )
    serve.add_argument(
        "--listen",
        metavar="HOST:PORT",
        default=DEFAULT_ADDRESS,
        help=f"address to listen on, port 0 picks one (default {DEFAULT_ADDRESS})",
    )
    serve.add_argument(
        "--config",
        metavar="FILE.toml",
        default=None,
        help="server settings and topic config defaults (TOML)",
    )
    serve.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        default=None,
        help="serve Prometheus metrics here (off by default)",
    )
    serve.add_argument(
        "--shards",
        metavar="N",
        type=int,
        default=1,
        help="worker processes, each serving a share of the topics (default 1; "
        "docs/architecture.md, Shards)",
    )
    serve.add_argument(
        "--kafka-listen",
        metavar="HOST:PORT",
        default=None,
        help="also serve Kafka's wire protocol here for SEGMENTED topics, port 0 picks one "
        "(off by default; with --shards N, broker k listens on PORT+k; docs/kafka.md)",
    )
    serve.add_argument(
        "--kafka-advertised",
        metavar="HOST:PORT",
        default=None,
        help="the address Kafka clients are told to connect to (default: --kafka-listen's; "
        "with --shards N, broker k is told PORT+k)",
    )


def _add_security_options(serve: argparse.ArgumentParser) -> None:
    """``serve``'s guard (CONTRACT section 10; docs/security.md)."""
    serve.add_argument(
        "--auth-tokens",
        metavar="FILE",
        default=None,
        help="TOML file of principals (token SHA-256 and role); calls then need a token",
    )
    serve.add_argument("--tls-cert", metavar="FILE", default=None, help="TLS certificate (PEM)")
    serve.add_argument("--tls-key", metavar="FILE", default=None, help="TLS private key (PEM)")
    serve.add_argument(
        "--insecure",
        action="store_true",
        help="allow listening on a non-loopback address without --auth-tokens",
    )


def _serve(args: argparse.Namespace) -> int:
    try:
        from compactlog.server.app import run
        from compactlog.server.kafka.options import KafkaOptions
        from compactlog.server.security.guard import SecurityOptions
    except ImportError as exc:
        raise UsageError(f"the server is not available: {exc}") from None
    config = Path(args.config) if args.config else None

    def path(value: str | None) -> Path | None:
        return Path(value) if value else None

    security = SecurityOptions(
        auth_tokens=path(args.auth_tokens),
        tls_cert=path(args.tls_cert),
        tls_key=path(args.tls_key),
        insecure=args.insecure,
    )
    data_dir = Path(args.data_dir)
    if args.kafka_advertised and not args.kafka_listen:
        raise UsageError("--kafka-advertised needs --kafka-listen")
    serve_args = (data_dir, args.listen, config, args.metrics_listen, security, args.shards)
    if args.kafka_listen:  # off unless given (CONTRACT section 15)
        kafka = KafkaOptions(args.kafka_listen, args.kafka_advertised)
        return int(run(*serve_args, kafka=kafka) or 0)
    return int(run(*serve_args) or 0)


def _bench_missing_args(args: argparse.Namespace) -> int:
    return _bench([])


def _bench(argv: list[str]) -> int:
    try:
        from compactlog.bench.cli import main as bench_main
    except ImportError as exc:
        raise UsageError(
            f"the benchmark suite is not available ({exc}); "
            "install it with: pip install 'compactlog[bench]'"
        ) from None
    result = bench_main(argv)
    return int(result or 0)


def _one_line(message: str) -> str:
    return " ".join(message.split()) or "unknown error"


def fail(message: str) -> None:
    """Print the contract's one-line error."""
    sys.stderr.write(f"{PROG}: error: {_one_line(message)}\n")
    sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    args: argparse.Namespace | None = None
    try:
        head, bench_args = split_bench(args_list)
        args = build_parser().parse_args(globals_first(head))
        if bench_args is not None:
            return _bench(bench_args)
        handler: Handler = args.func
        return handler(args)
    except SystemExit as exc:  # argparse: --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_USAGE)
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        return EXIT_INTERRUPTED
    except UsageError as exc:
        fail(str(exc))
        return EXIT_USAGE
    except Timeout as exc:
        fail(f"{exc} (--timeout {timeout_seconds(args):g})")
        return EXIT_FAILED
    except CompactlogError as exc:
        fail(str(exc))
        return EXIT_FAILED
    except BrokenPipeError:
        # The reader of our stdout went away (``| head``): stop quietly, as Unix tools do.
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as exc:
        if os.environ.get("COMPACTLOG_DEBUG"):
            raise
        fail(f"unexpected {type(exc).__name__}: {exc}")
        return EXIT_FAILED


def _silence_stdout() -> None:
    """After EPIPE, point stdout at /dev/null so the interpreter's final flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
