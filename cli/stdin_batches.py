"""Records from stdin in batches, sent as lines arrive: ``tail -f log | compactlog produce T``.

A batch ends when it holds ``max_records`` records or ``max_bytes`` bytes of input, or when
stdin has nothing more ready right now (``select`` with no wait after each read): a pipe
that trickles sends each line at once, a file or a fast pipe fills whole batches. This is
the console producer's ``linger.ms = 0`` with a batch size, so nothing waits for more input
that may never come.

Lines are JSON records (``cli.json_lines``) unless the caller gives another decoder
(``produce --lines``: ``cli.text_lines``). A malformed line stops the input there: every
record before it is sent (in the batch that was filling), nothing from it on. The line
numbers count every line, blank ones included.
Streams without a file descriptor (tests' in-memory stdin) are read line by line, batched
by count and size only.

``stop`` ends the input early (the first Ctrl-C of ``compactlog produce``): the complete
lines already read go out, an unterminated last line does not, nothing more is read.
"""

from __future__ import annotations

import io
import os
import select
import threading
from collections.abc import Callable, Iterator
from typing import IO

from compactlog.cli.json_lines import BadLine, decode_line
from compactlog.client.types import Record

LineDecoder = Callable[[bytes, int], Record | None]

READ_BYTES = 1 << 16
STOP_POLL_SECONDS = 0.1


class LineBatcher:
    """Cuts a byte stream into lines, lines into records, records into bounded batches."""

    def __init__(self, max_records: int, max_bytes: int, decode: LineDecoder = decode_line) -> None:
        self.decode = decode
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.records: list[Record] = []
        self.size = 0
        self.lineno = 0
        self.tail = b""

    def take(self) -> list[Record]:
        batch, self.records, self.size = self.records, [], 0
        return batch

    def feed(self, chunk: bytes) -> Iterator[list[Record]]:
        """The full batches ``chunk`` completes (an unfinished last line waits for more)."""
        lines = (self.tail + chunk).split(b"\n")
        self.tail = lines.pop()
        for raw in lines:
            yield from self._line(raw)

    def finish(self, complete_lines_only: bool = False) -> Iterator[list[Record]]:
        """At the end of input: the unterminated last line, then what is left."""
        if self.tail and not complete_lines_only:
            raw, self.tail = self.tail, b""
            yield from self._line(raw)
        if self.records:
            yield self.take()

    def _line(self, raw: bytes) -> Iterator[list[Record]]:
        self.lineno += 1
        try:
            record = self.decode(raw, self.lineno)
        except BadLine:
            if self.records:
                yield self.take()  # everything before the bad line goes out
            raise
        if record is None:
            return
        if self.records and self.size + len(raw) > self.max_bytes:
            yield self.take()
        self.records.append(record)
        self.size += len(raw)
        if len(self.records) >= self.max_records:
            yield self.take()


def _file_descriptor(stream: IO[bytes]) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        return None


def _chunks(stream: IO[bytes], stop: threading.Event) -> Iterator[tuple[bytes, bool]]:
    """(bytes read, whether the input has nothing more ready now) until the end of input."""
    fd = _file_descriptor(stream)
    if fd is None:
        for line in stream:
            if stop.is_set():
                return
            yield line, False
        return
    while not stop.is_set():
        ready, _, _ = select.select([fd], [], [], STOP_POLL_SECONDS)
        if not ready:
            continue
        chunk = os.read(fd, READ_BYTES)  # select said ready: no wait; b"" at the end
        if not chunk:
            return
        ready, _, _ = select.select([fd], [], [], 0)
        yield chunk, not ready


def record_batches(
    stream: IO[bytes],
    max_records: int,
    max_bytes: int,
    stop: threading.Event | None = None,
    decode: LineDecoder = decode_line,
) -> Iterator[list[Record]]:
    """Batches of the records on ``stream``, each yielded as soon as it should go out;
    ``decode`` turns a line into a record (JSON by default, ``cli.text_lines``)."""
    stop = stop or threading.Event()
    batcher = LineBatcher(max_records, max_bytes, decode)
    for chunk, idle in _chunks(stream, stop):
        yield from batcher.feed(chunk)
        if idle and batcher.records:
            yield batcher.take()
    yield from batcher.finish(complete_lines_only=stop.is_set())
