"""The CLI without a server: argument parsing, JSON lines, output formats, the error policy."""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from compactlog.cli import admin as cli_admin
from compactlog.cli import app as cli
from compactlog.cli import argv as cli_argv
from compactlog.cli import data as cli_data
from compactlog.cli import json_lines
from compactlog.cli import output as cli_output
from compactlog.cli import progress as cli_progress
from compactlog.cli import subscriptions as cli_subscriptions
from compactlog.cli import topics as cli_topics
from compactlog.cli.common import UsageError, key_value, server_address
from compactlog.client.types import CompactionProgress, Message, MessageId, Record
from compactlog.errors import TopicNotFound
from compactlog.server.security.guard import SecurityOptions

RunCli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> RunCli:
    def run(*argv: str) -> tuple[int, str, str]:
        code = cli.main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def assert_one_error_line(err: str, *fragments: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("compactlog: error: ")
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0]


# -- argument parsing ----------------------------------------------------------------------


def test_parse_tree() -> None:
    parser = cli.build_parser()
    args = parser.parse_args(
        [
            "--server",
            "h:1",
            "topics",
            "create",
            "t",
            "--kind",
            "segmented",
            "--config",
            "cleanup.policy=compact",
            "segment.bytes=1024",
            "--config",
            "retention.ms=-1",
        ]
    )
    assert args.kind == "segmented"
    assert args.config == [
        ("cleanup.policy", "compact"),
        ("segment.bytes", "1024"),
        ("retention.ms", "-1"),
    ]
    assert server_address(args) == "h:1"
    read = parser.parse_args(["read", "t", "--from", "3:14", "--limit", "5", "--compacted"])
    assert read.start == MessageId(ledger_id=3, entry_id=14) and read.limit == 5 and read.compacted
    compact = parser.parse_args(["admin", "topics", "compact", "t", "--wait", "--engine", "spark"])
    assert compact.func is cli_admin.compact_cmd and compact.wait and compact.engine == "spark"
    serve = parser.parse_args(["serve"])
    assert serve.data_dir == "./compactlog-data" and serve.listen == "127.0.0.1:7650"
    assert serve.config is None and serve.metrics_listen is None


def test_server_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = cli.build_parser()
    monkeypatch.delenv("COMPACTLOG_SERVER", raising=False)
    assert server_address(parser.parse_args(["topics", "list"])) == "127.0.0.1:7650"
    monkeypatch.setenv("COMPACTLOG_SERVER", "env:2")
    assert server_address(parser.parse_args(["topics", "list"])) == "env:2"
    assert server_address(parser.parse_args(["--server", "flag:3", "topics", "list"])) == "flag:3"


@pytest.mark.parametrize("text", ["earliest", "LATEST", "0:0", "12:345", "445"])
def test_parse_start_accepts(text: str) -> None:
    parsed = cli_data.parse_start(text)
    assert parsed in (
        "earliest",
        "latest",
        MessageId(ledger_id=0, entry_id=0),
        MessageId(ledger_id=12, entry_id=345),
        445,
    )


@pytest.mark.parametrize("text", ["", "first", "-1", "1:", ":1", "a:b", "-1:0", "1:2:3"])
def test_parse_start_rejects(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        cli_data.parse_start(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("latest", "latest"),
        ("1:2", MessageId(partition=0, ledger_id=1, entry_id=2)),
        ("1:2:3", MessageId(partition=3, ledger_id=1, entry_id=2)),
    ],
)
def test_reset_target_takes_a_partition(text: str, expected: object) -> None:
    parsed = cli_subscriptions.parse_target(text)
    assert repr(parsed) == repr(expected)  # the partition too (ids of 0 and 3 compare apart)


@pytest.mark.parametrize("text", ["1:2:", "1:2:x", "latest:1", "1:2:3:4", f"1:2:{2**31}"])
def test_reset_target_rejects(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        cli_subscriptions.parse_target(text)


def test_key_value() -> None:
    assert key_value("a=b=c") == ("a", "b=c")
    assert key_value("a=") == ("a", "")
    for bad in ("a", "=b", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            key_value(bad)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["read", "t", "--from", "nowhere"], "--from"),
        (["read", "t", "--limit", "-3"], "--limit"),
        (["topics", "create", "t", "--config", "novalue"], "KEY=VALUE"),
        (["topics", "set-config", "t", "bad"], "KEY=VALUE"),
        (["topics", "set-config", "t"], "at least one"),
        (["topics", "create", "t", "--kind", "queue"], "--kind"),
        (["produce", "t", "--value", "v", "--null-value"], "not allowed"),
        (["produce", "t", "--value", "v", "--tombstone"], "not allowed"),
        (["produce", "t", "--key", "k"], "--key needs --value"),
        (["produce", "t", "--tombstone"], "--tombstone needs --key"),
        (["produce", "t", "--key", "k", "--value", "v", "--event-time-ms", "1" + "0" * 19], "<="),
        (["read", "t", "--from", "99999999999999999999999:0"], "out of range"),
        (["read", "t", "--from", "1:18446744073709551616"], "out of range"),
        (["read", "t", "--limit", "99999999999"], "--limit"),
        (["records", "delete-before", "t", "-1"], "OFFSET"),
        (["records", "delete-before", "t", "18446744073709551616"], "<="),
        (["topics", "list", "--output", "yaml"], "--output"),
        (["completion", "tcsh"], "SHELL"),
        (["topics", "create", "t", "--partitions", "99999999999"], "--partitions"),
        (["topics", "add-partitions", "t", "0"], ">= 1"),
        (["frobnicate"], "invalid choice"),
        ([], "required"),
    ],
)
def test_usage_errors_are_one_line(run_cli: RunCli, argv: list[str], fragment: str) -> None:
    code, out, err = run_cli(*argv)
    assert code == 2
    assert out == ""
    assert_one_error_line(err, fragment)


def test_help_and_version(run_cli: RunCli) -> None:
    code, out, _ = run_cli("--help")
    assert code == 0 and "produce" in out and "admin" in out
    code, out, _ = run_cli("--version")
    assert code == 0 and out.startswith("compactlog ")


def test_stdin_produce_meets_the_server_before_reading_a_line(
    run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The producer looks the topic up first, so `tail -f | compactlog produce` against a
    # wrong address or topic fails at once, not when the first line arrives.
    stdin = io.TextIOWrapper(io.BytesIO(b'{"key": 2}\n{"key": "a", "value": "1"}\n'))
    monkeypatch.setattr(sys, "stdin", stdin)
    code, out, err = run_cli("--server", "127.0.0.1:1", "produce", "t")
    assert code == 1 and out == ""
    assert_one_error_line(err, "server 127.0.0.1:1 is not reachable")
    assert stdin.buffer.tell() == 0  # not a byte of stdin read


# -- output formats -------------------------------------------------------------------------


def test_text_and_json_output_round_trip() -> None:
    msg = Message(MessageId(ledger_id=2, entry_id=9), b"k", b"\x00\xff", {"p": "q"}, 100, 50)
    assert cli_output.format_text(msg) == "2:9 key=k value=b64:AP8="
    data = cli_output.message_json(msg)
    assert data == {
        "id": "2:9",
        "key": "k",
        "value": "AP8=",
        "value_b64": True,
        "tombstone": False,
        "properties": {"p": "q"},
        "publish_time_ms": 100,
        "event_time_ms": 50,
    }
    back = json_lines.parse_record(json.dumps(data), 1)
    assert back == Record(b"k", b"\x00\xff", {"p": "q"}, 50)
    keyless_null = Message(MessageId(ledger_id=1, entry_id=0), None, None)
    assert cli_output.format_text(keyless_null) == "1:0 key=<null> value=<null>"
    assert cli_output.message_json(keyless_null)["key"] is None
    assert not cli_output.message_json(keyless_null)["tombstone"]
    assert (
        cli_output.format_text(Message(MessageId(ledger_id=1, entry_id=1), b"a\nb", b""))
        == "1:1 key=b64:YQpi value="
    )


def test_progress_is_a_rich_bar_on_a_terminal_and_plain_lines_otherwise() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    updates = [
        CompactionProgress("RUNNING", "phase-one", 4096, 10000, 1_200_000, 0, 500),
        CompactionProgress("RUNNING", "phase-one", 8192, 10000, 2_400_000, 0, 700),
        CompactionProgress("RUNNING", "phase-two", 10000, 10000, 3_000_000, 400_000, 900),
        CompactionProgress("SUCCESS", "commit", 1, 1, 3_000_000, 400_000, 1000),
    ]
    plain = io.StringIO()
    view = cli_progress.progress_view("t", plain)
    for update in updates:
        view.update(update)
    view.close()
    lines = plain.getvalue().splitlines()
    assert lines == [  # one per phase (the second phase-one update comes too soon), the last
        "compacting t: phase-one 4,096/10,000 · 1.2 MB read · 0 B written · 0.5 s [RUNNING]",
        "compacting t: phase-two 10,000/10,000 · 3.0 MB read · 400.0 KB written · 0.9 s [RUNNING]",
        "compacting t: commit 1/1 · 3.0 MB read · 400.0 KB written · 1.0 s [SUCCESS]",
    ]
    tty = Tty()
    view = cli_progress.progress_view("t", tty)
    assert isinstance(view, cli_progress.RichProgress)
    for update in updates:
        view.update(update)
    view.close()
    assert "t phase" in tty.getvalue() or "compacting t" in tty.getvalue()


def test_admin_verbs_parse() -> None:
    parser = cli.build_parser()
    dry = parser.parse_args(["admin", "topics", "compact", "t", "--dry-run"])
    assert dry.func is cli_admin.compact_cmd and dry.dry_run
    assert parser.parse_args(["admin", "topics", "cancel", "t"]).func is cli_admin.cancel_cmd
    assert parser.parse_args(["admin", "topics", "verify", "t"]).func is cli_admin.verify_cmd


# -- error policy ---------------------------------------------------------------------------


def test_unreachable_server_is_one_line(run_cli: RunCli) -> None:
    code, out, err = run_cli("--server", "127.0.0.1:1", "topics", "list")
    assert code == 1 and out == ""
    assert_one_error_line(err, "server 127.0.0.1:1 is not reachable")


def test_compactlog_errors_are_one_line(run_cli: RunCli, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(args: argparse.Namespace) -> int:
        raise TopicNotFound("topic 'x' does not exist\n(really)")

    monkeypatch.setattr(cli_topics, "describe_topic", boom)
    code, _, err = run_cli("topics", "describe", "x")
    assert code == 1
    assert_one_error_line(err, "topic 'x' does not exist (really)")


def test_ctrl_c_exits_130(run_cli: RunCli, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_topics, "list_topics", interrupted)
    code, _, err = run_cli("topics", "list")
    assert code == 130 and "Traceback" not in err


def test_unexpected_error_has_no_traceback(
    run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    def bug(args: argparse.Namespace) -> int:
        raise RuntimeError("oops")

    monkeypatch.delenv("COMPACTLOG_DEBUG", raising=False)
    monkeypatch.setattr(cli_topics, "list_topics", bug)
    code, _, err = run_cli("topics", "list")
    assert code == 1
    assert_one_error_line(err, "RuntimeError", "oops")


def test_spark_engine_missing(run_cli: RunCli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "compactlog.compactor.spark", None)
    code, _, err = run_cli(
        "--server",
        "127.0.0.1:1",
        "admin",
        "topics",
        "compact",
        "t",
        "--engine",
        "spark",
        "--spark-master",
        "local[1]",
    )
    assert code == 2
    assert_one_error_line(err, "the Spark engine is not available: ")


def test_bench_gets_the_remaining_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli_argv.split_bench(["--server", "h:1", "bench", "--size", "10", "read"]) == (
        ["--server", "h:1", "bench"],
        ["--size", "10", "read"],
    )
    assert cli_argv.split_bench(["read", "bench"]) == (["read", "bench"], None)
    argv = ["--token", "bench", "--tls-ca", "bench", "bench", "-x"]  # values are not verbs
    assert cli_argv.split_bench(argv) == (argv[:5], ["-x"])
    seen: list[list[str]] = []

    class FakeBench:
        @staticmethod
        def main(argv: list[str]) -> int:
            seen.append(argv)
            return 3

    monkeypatch.setitem(sys.modules, "compactlog.bench.cli", FakeBench)
    assert cli.main(["bench", "--help", "x"]) == 3
    assert seen == [["--help", "x"]]


def test_bench_missing_is_one_line(run_cli: RunCli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "compactlog.bench.cli", None)
    code, _, err = run_cli("bench", "--quick")
    assert code == 2
    assert_one_error_line(err, "benchmark suite is not available")


def test_serve_passes_its_kafka_listener(monkeypatch: pytest.MonkeyPatch) -> None:
    from compactlog.server.kafka.options import KafkaOptions

    calls: list[dict[str, object]] = []

    class FakeApp:
        @staticmethod
        def run(*args: object, **kwargs: object) -> int:
            calls.append(kwargs)
            return 0

    monkeypatch.setitem(sys.modules, "compactlog.server.app", FakeApp)
    kafka = ["serve", "--kafka-listen", "127.0.0.1:0", "--kafka-advertised", "h:9092"]
    assert cli.main(kafka) == 0
    assert calls == [{"kafka": KafkaOptions("127.0.0.1:0", "h:9092")}]
    assert cli.main(["serve", "--kafka-advertised", "h:9092"]) == 2  # no listener to advertise
    assert len(calls) == 1


def test_serve_passes_its_options(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[object, ...]] = []

    class FakeApp:
        @staticmethod
        def run(*args: object) -> int:
            calls.append(args)
            return 0

    monkeypatch.setitem(sys.modules, "compactlog.server.app", FakeApp)
    assert (
        cli.main(
            [
                "serve",
                "--data-dir",
                "d",
                "--listen",
                "127.0.0.1:0",
                "--config",
                "c.toml",
                "--metrics-listen",
                "127.0.0.1:9",
            ]
        )
        == 0
    )
    assert calls == [
        (Path("d"), "127.0.0.1:0", Path("c.toml"), "127.0.0.1:9", SecurityOptions(), 1)
    ]
    guarded = ["serve", "--listen", "0.0.0.0:1", "--auth-tokens", "t.toml", "--insecure"]
    assert cli.main([*guarded, "--tls-cert", "c.pem", "--tls-key", "k.pem"]) == 0
    assert calls[1][4] == SecurityOptions(Path("t.toml"), Path("c.pem"), Path("k.pem"), True)
    assert cli.main(["serve", "--shards", "3"]) == 0
    assert calls[2][5] == 3


# -- deadlines ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["--timeout", "2.5", "topics", "list"],
        ["topics", "--timeout", "2.5", "list"],
        ["topics", "list", "--timeout", "2.5"],
        ["topics", "list", "--timeout=2.5"],
        ["read", "bench", "--timeout", "2.5"],  # a topic named bench is no bench command
    ],
)
def test_timeout_anywhere_on_the_line(argv: list[str]) -> None:
    head, bench = cli_argv.split_bench(argv)
    assert bench is None
    args = cli.build_parser().parse_args(cli_argv.globals_first(head))
    assert args.timeout == 2.5


def test_timeout_before_bench_and_bench_keeps_its_own() -> None:
    head, bench = cli_argv.split_bench(["--timeout", "3", "bench", "soak", "--timeout", "9"])
    assert head == ["--timeout", "3", "bench"] and bench == ["soak", "--timeout", "9"]


def test_timeout_from_env_and_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from compactlog.cli.common import timeout_seconds

    parser = cli.build_parser()
    monkeypatch.delenv("COMPACTLOG_TIMEOUT", raising=False)
    assert timeout_seconds(parser.parse_args(["topics", "list"])) == 30
    monkeypatch.setenv("COMPACTLOG_TIMEOUT", "7")
    assert timeout_seconds(parser.parse_args(["topics", "list"])) == 7
    assert timeout_seconds(parser.parse_args(["--timeout", "1", "topics", "list"])) == 1
    monkeypatch.setenv("COMPACTLOG_TIMEOUT", "soon")
    with pytest.raises(UsageError, match="COMPACTLOG_TIMEOUT"):
        timeout_seconds(parser.parse_args(["topics", "list"]))


@pytest.mark.parametrize("value", ["0", "-1", "x", "inf", "nan"])
def test_bad_timeout_is_a_usage_error(run_cli: RunCli, value: str) -> None:
    code, _, err = run_cli("topics", "list", "--timeout", value)
    assert code == 2
    assert_one_error_line(err, "--timeout")


def test_tombstones_never_read_like_the_string_null() -> None:
    tomb = Message(MessageId(ledger_id=1, entry_id=4), b"k", None)
    string_null = Message(MessageId(ledger_id=1, entry_id=5), b"k", b"null")
    assert cli_output.format_text(tomb) == "1:4 key=k tombstone"
    assert cli_output.format_text(string_null) == "1:5 key=k value=null"
    assert cli_output.message_json(tomb)["tombstone"] is True
    assert cli_output.message_json(string_null)["tombstone"] is False
    # LEDGER topics: an empty value on a keyed message is a tombstone too (Pulsar).
    empty = Message(MessageId(ledger_id=1, entry_id=6), b"k", b"")
    assert cli_output.format_text(empty) == "1:6 key=k value="
    assert cli_output.format_text(empty, ledger=True) == "1:6 key=k tombstone"
    assert cli_output.message_json(empty, ledger=True)["tombstone"] is True
    back = json_lines.parse_record(json.dumps(cli_output.message_json(empty, ledger=True)), 1)
    assert back == Record(b"k", b"", {}, 0)
    # A value that reads like a marker is printed in base64, so text stays unambiguous.
    for tricky in (b"<null>", b"b64:AA=="):
        line = cli_output.format_text(Message(MessageId(ledger_id=1, entry_id=7), tricky, tricky))
        assert line.count("b64:") == 2 and "<null>" not in line


@pytest.mark.parametrize(
    "argv",
    [
        [
            "--server",
            "h:1",
            "--token",
            "s",
            "--tls-ca",
            "ca.pem",
            "--timeout",
            "2.5",
            "--output",
            "json",
            "topics",
            "list",
        ],
        [
            "topics",
            "list",
            "--server",
            "h:1",
            "--token",
            "s",
            "--tls-ca",
            "ca.pem",
            "--timeout",
            "2.5",
            "--output",
            "json",
        ],
        [
            "topics",
            "--server=h:1",
            "list",
            "--token=s",
            "--tls-ca=ca.pem",
            "--timeout=2.5",
            "--output=json",
        ],
    ],
    ids=["before", "after", "between, with ="],
)
def test_global_options_anywhere(argv: list[str]) -> None:
    from compactlog.cli.common import timeout_seconds, tls_ca, token

    args = cli.build_parser().parse_args(cli_argv.globals_first(argv))
    assert server_address(args) == "h:1" and token(args) == "s" and tls_ca(args) == "ca.pem"
    assert timeout_seconds(args) == 2.5 and cli_output.wants_json(args)
    assert args.func is cli_topics.list_topics


def test_output_json_or_the_old_json_flag() -> None:
    parser = cli.build_parser()
    assert not cli_output.wants_json(parser.parse_args(["topics", "describe", "t"]))
    assert cli_output.wants_json(parser.parse_args(["topics", "describe", "t", "--json"]))
    assert cli_output.wants_json(parser.parse_args(["--output", "json", "read", "t"]))
    assert not cli_output.wants_json(parser.parse_args(["--output", "text", "read", "t"]))
