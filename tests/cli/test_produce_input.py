"""``compactlog produce``'s input without a server: JSON lines become records
(``cli.json_lines``), records become batches as stdin delivers them (``cli.stdin_batches``),
and a stop (the first Ctrl-C) ends an open pipe with its complete lines."""

from __future__ import annotations

import io
import os
import threading

import pytest

from compactlog.cli import json_lines, stdin_batches
from compactlog.cli.common import UsageError
from compactlog.client.types import Record

# -- JSON lines -----------------------------------------------------------------------------


def test_parse_record_shapes() -> None:
    line = '{"key": "k", "value": "v", "properties": {"a": "b"}, "event_time_ms": 7}'
    assert json_lines.parse_record(line, 1) == Record(b"k", b"v", {"a": "b"}, 7)
    assert json_lines.parse_record('{"key": "k", "value": null}', 1) == Record(b"k", None, {}, 0)
    assert json_lines.parse_record('{"key": "k", "tombstone": true}', 1) == Record(
        b"k", None, {}, 0
    )
    assert json_lines.parse_record('{"value": "v"}', 1) == Record(None, b"v", {}, 0)
    assert json_lines.parse_record("{}", 1) == Record(None, None, {}, 0)
    assert json_lines.parse_record('{"key": null, "value": ""}', 1) == Record(None, b"", {}, 0)
    assert json_lines.parse_record('{"value_b64": "AAEC"}', 1).value == b"\x00\x01\x02"
    assert (
        json_lines.parse_record('{"value": "AAEC", "value_b64": true}', 1).value == b"\x00\x01\x02"
    )
    assert json_lines.parse_record('{"key_b64": "/w==", "value": "v"}', 1).key == b"\xff"
    ignored = '{"id": "1:0", "key": "k", "value": "v", "publish_time_ms": 5}'
    assert json_lines.parse_record(ignored, 1) == Record(b"k", b"v", {}, 0)


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("{bad", "invalid JSON"),
        ("[1, 2]", "JSON object"),
        ('{"key": 1}', "'key' must be a string"),
        ('{"vaule": "x"}', "unknown field 'vaule'"),
        ('{"value_b64": "!!"}', "not valid base64"),
        ('{"value": "x", "value_b64": "AA=="}', "not both"),
        ('{"properties": {"a": 1}}', "properties"),
        ('{"event_time_ms": -1}', "event_time_ms"),
        ('{"event_time_ms": "soon"}', "event_time_ms"),
        ('{"event_time_ms": 9223372036854775808}', "event_time_ms"),
        ('{"key": "k"}', "needs a 'value'"),  # a tombstone is never sent by omission
        ('{"key": "k", "vaule": "v"}', "unknown field 'vaule'"),
        ('{"tombstone": true}', "needs a 'key'"),
        ('{"key": "k", "value": "v", "tombstone": true}', "has no value"),
        ('{"key": "k", "tombstone": 1}', "true or false"),
    ],
)
def test_parse_record_errors_name_the_line(line: str, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment) as info:
        json_lines.parse_record(line, 17)
    assert str(info.value).startswith("line 17: ")


def _batches(data: bytes, size: int = 1000, max_bytes: int = 1 << 20) -> list[list[bytes | None]]:
    return [
        [r.key for r in batch]
        for batch in stdin_batches.record_batches(io.BytesIO(data), size, max_bytes)
    ]


def test_stdin_batches_skip_blank_lines_and_count_every_line() -> None:
    data = b'{"key": "a", "value": "1"}\n\n   \n{"key": "b", "value": "2"}'  # no final newline
    assert _batches(data) == [[b"a", b"b"]]
    with pytest.raises(UsageError, match=r"^line 3: invalid JSON"):
        _batches(b'{"key": "a", "value": "1"}\n\n{oops\n')
    with pytest.raises(UsageError, match=r"^line 2: not UTF-8"):
        _batches(b'{"key": "a", "value": "1"}\n{"key": "\xff"}\n')


def test_stdin_batches_are_bounded_by_count_and_bytes() -> None:
    lines = b"".join(b'{"key": "k%d", "value": "v"}\n' % i for i in range(7))
    assert [len(b) for b in _batches(lines, size=3)] == [3, 3, 1]
    assert [len(b) for b in _batches(lines, max_bytes=60)] == [2, 2, 2, 1]
    big = b'{"key": "big", "value": "%s"}\n' % (b"x" * 100)
    assert [len(b) for b in _batches(big + lines.splitlines(True)[0], max_bytes=60)] == [1, 1]


def test_a_bad_line_sends_what_came_before_it() -> None:
    stream = stdin_batches.record_batches(
        io.BytesIO(b'{"key": "a", "value": "1"}\n{"value": "2"}\n{"key": "c"}\n{"value": 4}\n'),
        1000,
        1 << 20,
    )
    assert [r.key for r in next(stream)] == [b"a", None]
    with pytest.raises(UsageError, match=r"^line 3: "):
        next(stream)


def test_stop_ends_an_open_pipe_with_its_complete_lines_and_drops_a_half_line() -> None:
    read_end, write_end = os.pipe()
    stop = threading.Event()
    with os.fdopen(read_end, "rb", buffering=0) as stream:
        batches = stdin_batches.record_batches(stream, 1000, 1 << 20, stop)
        os.write(write_end, b'{"key": "a", "value": "1"}\n')
        assert [r.key for r in next(batches)] == [b"a"]  # the pipe stays open: sent at once
        os.write(write_end, b'{"key": "b", "value": "2"}\n{"key": "half')
        threading.Timer(0.3, stop.set).start()  # Ctrl-C while the writer still holds the pipe
        rest = [[r.key for r in batch] for batch in batches]
        os.close(write_end)
    assert rest == [[b"b"]]
