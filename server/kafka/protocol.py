"""Kafka's framing and ``kio``'s request and response types, in one place.

A request on the wire (all big-endian)::

    size i32 | api_key i16 | api_version i16 | correlation_id i32 | client_id string16
             | [tagged fields, flexible versions: request header v2] | request body

and a response: ``size i32 | correlation_id i32 | [tagged fields] | body``. ``kio`` knows
every API's versions: which header each takes, how each body reads and writes. The
handlers build responses with ``make``, which keeps only the fields the version has, so
one handler serves every version of its API. A response frame is written as pieces
(``encode_frame``): kio writes every field, and a large bytes field (a Fetch's records,
~1 MiB) stays the object the handler gave, so it reaches the socket without being copied
into the frame (kio into one buffer copied a 1 MiB Fetch's records twice, 0.3-0.5 ms).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import functools
import io
import struct
import threading
import types
import typing
import uuid
from collections.abc import Collection, Mapping
from typing import Any

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i32Timedelta, i64Timedelta

HEAD = struct.Struct(">hhi")  # api_key, api_version, correlation_id
Buffer = bytes | bytearray | memoryview
Frame = list[Buffer]  # a frame's pieces, written to the socket one after the other
SPLICE_BYTES = 16 << 10  # a write this large is a piece of its own, not copied
SIZE = struct.Struct(">i")
NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))


class BadFrame(Exception):
    """A request that cannot be read: its connection is closed."""


@functools.cache
def request_type(api_key: int, version: int) -> Any:
    return load_request_schema(api_key, version)


@functools.cache
def load_response(api_key: int, version: int) -> Any:
    return load_response_schema(api_key, version)


@functools.cache
def request_module(api_key: int, version: int) -> types.ModuleType:
    """The module of ``kio``'s request classes of one API version (nested ones too)."""
    return load_payload_module(api_key, version, EntityType.request)


@functools.cache
def response_module(api_key: int, version: int) -> types.ModuleType:
    """The module of ``kio``'s response classes of one API version (nested ones too)."""
    return load_payload_module(api_key, version, EntityType.response)


@functools.cache
def _reader(cls: Any) -> Any:
    return entity_reader(cls)


@functools.cache
def _writer(cls: Any) -> Any:
    return entity_writer(cls)


def preload(apis: Mapping[int, Collection[int]]) -> int:
    """Load the ``apis``' versions (key -> versions): each one's request and response
    types, their readers and writers, its response module; how many versions. ``kio``
    imports a module per API version on first use (about 25 ms each, 110 ms for a
    client's first request), so the listener loads them once at start-up instead."""
    count = 0
    for api_key, versions in apis.items():
        for version in sorted(versions):
            request = request_type(api_key, version)
            _reader(request.__header_schema__)
            _reader(request)
            response = load_response(api_key, version)
            _writer(response.__header_schema__)
            _writer(response)
            response_module(api_key, version)
            count += 1
    return count


_preloads: dict[tuple[tuple[int, tuple[int, ...]], ...], concurrent.futures.Future[int]] = {}
_preloads_lock = threading.Lock()


def start_preload(apis: Mapping[int, Collection[int]]) -> concurrent.futures.Future[int]:
    """``preload(apis)`` on a thread of its own, started once a process: call it early
    so the loading overlaps the rest of start-up; wait on the future before serving."""
    key = tuple(sorted((api, tuple(sorted(versions))) for api, versions in apis.items()))
    with _preloads_lock:
        if key not in _preloads:
            future: concurrent.futures.Future[int] = concurrent.futures.Future()

            def load() -> None:
                try:
                    future.set_result(preload(apis))
                except BaseException as exc:  # handed to whoever waits
                    future.set_exception(exc)

            threading.Thread(target=load, name="kafka-preload", daemon=True).start()
            _preloads[key] = future
        return _preloads[key]


def read_request(frame: bytes, api_key: int, version: int) -> tuple[Any, Any]:
    """The request header and body of a frame whose API and version we serve.
    ``BadFrame`` when the bytes do not read as that request. Bytes left over are
    ignored, as Kafka's broker does (librdkafka's Metadata v12 carries three more than
    the schema has)."""
    cls = request_type(api_key, version)
    try:
        header, used = _reader(cls.__header_schema__)(frame, 0)
        request, _size = _reader(cls)(frame, used)
    except Exception as exc:  # kio raises ValueError, BufferUnderflow, UnicodeError...
        raise BadFrame(f"api {api_key} v{version}: {type(exc).__name__}: {exc}") from None
    return header, request


def encode_request(request: Any, version: int, correlation_id: int, client_id: str) -> bytes:
    """A request frame (a broker forwarding part of a request to another)."""
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    header_cls: Any = request.__header_schema__
    header = header_cls(
        request_api_key=request.__api_key__,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    request_cls: Any = type(request)
    _writer(header_cls)(out, header)
    _writer(request_cls)(out, request)
    data = out.getbuffer()
    SIZE.pack_into(data, 0, len(data) - 4)
    return bytes(data)


def read_response(frame: bytes, api_key: int, version: int) -> tuple[int, Any]:
    """A response frame's correlation id and body (``BadFrame`` when it does not read)."""
    cls = load_response(api_key, version)
    try:
        header, used = _reader(cls.__header_schema__)(frame, 0)
        response, _size = _reader(cls)(frame, used)
    except Exception as exc:
        raise BadFrame(f"api {api_key} v{version} response: {type(exc).__name__}: {exc}") from None
    return header.correlation_id, response


class Pieces:
    """What ``kio``'s writers write, kept as a frame's pieces: small writes joined into
    one piece, and each write of ``SPLICE_BYTES`` or more (a Fetch's records) kept as
    its own piece, by reference: the records go to the socket without a copy here."""

    def __init__(self) -> None:
        self.pieces: Frame = []
        self._small = bytearray()
        self.size = 0

    def write(self, data: Buffer) -> int:
        size = len(data)
        self.size += size
        if size < SPLICE_BYTES:
            self._small += data
            return size
        if self._small:
            self.pieces.append(self._small)
            self._small = bytearray()
        self.pieces.append(data)
        return size

    def frame(self) -> Frame:
        if self._small:
            self.pieces.append(self._small)
            self._small = bytearray()
        return self.pieces


def encode_frame(correlation_id: int, response: Any) -> Frame:
    """A response frame as pieces to write in order: size, the response header its type
    names, the body, with each large bytes field (a Fetch's records) as it was given."""
    out = Pieces()
    out.write(b"\0\0\0\0")
    header_cls: Any = response.__header_schema__
    response_cls: Any = type(response)
    _writer(header_cls)(out, header_cls(correlation_id=correlation_id))
    _writer(response_cls)(out, response)
    pieces = out.frame()
    head = pieces[0]
    assert isinstance(head, bytearray)  # the size field always starts a small piece
    SIZE.pack_into(head, 0, out.size - 4)
    return pieces


def encode(correlation_id: int, response: Any) -> bytes:
    """A response frame in one piece (``encode_frame``'s, joined)."""
    return b"".join(encode_frame(correlation_id, response))


def bare_error(correlation_id: int, code: ErrorCode = ErrorCode.unsupported_version) -> bytes:
    """The answer to an API this listener cannot even read (no schema for its version):
    the correlation id and an error code, so the client fails the request, not the
    connection."""
    return SIZE.pack(6) + struct.pack(">ih", correlation_id, code.value)


def make(cls: Any, **values: Any) -> Any:
    """``cls`` built from the ``values`` its version has (others are dropped)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def error_response(cls: Any, code: ErrorCode) -> Any:
    """A response of ``cls`` saying ``code`` wherever it has an error code, every list
    empty and every other field zero: how an API not served yet is answered."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        has_default = f.default is not dataclasses.MISSING
        if has_default and f.metadata.get("kafka_type") != "error_code":
            continue
        values[f.name] = _zero(hints[f.name], f.metadata.get("kafka_type"), code)
    return cls(**values)


_ZEROS: dict[str, Any] = {
    "string": "",
    "bytes": b"",
    "records": None,
    "bool": False,
    "uuid": uuid.UUID(int=0),
    "timedelta_i32": NO_THROTTLE,
    "timedelta_i64": i64Timedelta.parse(datetime.timedelta(0)),
    "float64": 0.0,
}


def _zero(hint: Any, kafka_type: str | None, code: ErrorCode) -> Any:
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple:
        return ()
    if type(None) in args:
        return None
    if kafka_type == "error_code":
        return code
    if kafka_type is None:  # a nested entity
        return error_response(hint, code)
    return _ZEROS.get(kafka_type, 0)
