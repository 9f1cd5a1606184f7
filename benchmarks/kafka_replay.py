"""``compactlog bench kafka``'s kcat floor: kcat against a broker that costs nothing.

kcat's own parse of a 200,000-record read takes about as long as the goal (2 x gRPC's
Read) allows, so the bench needs the most any broker could give kcat on the box. This
module records the listener's answers to one kcat read and serves them again:

1. *record*: a proxy between kcat and the listener passes each request on and keeps the
   listener's answer frame, keyed by API key and, for a Fetch, the offsets it asks
   (for a Metadata request, the topics).
   The one change it makes: Metadata answers name the proxy as the broker (decoded and
   written again by ``kio``), so kcat's broker connection comes back through it. A Fetch
   answered with no records (past the end, after the listener held it) is not kept.
2. *replay*: the same socket then answers from what it kept, with no storage and no
   conversion: a request's header is read, a Fetch's offsets too (with the listener's
   ``protocol`` readers, ``kio``'s), the kept frame's correlation id is patched and its
   bytes written. A request it has no answer for (a Fetch past the end, which a broker
   would hold) is left unanswered.

The time of the same kcat command against the replay is kcat's floor on this box.
"""

from __future__ import annotations

import dataclasses
import socket
import struct
import threading
import time
from typing import Any

from compactlog.bench import kafka_kcat
from compactlog.server.kafka.protocol import HEAD, SIZE, encode, read_request, read_response

FETCH, METADATA = 1, 3
CORRELATION = struct.Struct(">i")  # a response frame's first field, after its size
Key = tuple[int, tuple[Any, ...]]


def read_frame(sock: socket.socket) -> bytes | None:
    """One size-prefixed frame's body, None once the peer has closed or reset."""
    try:
        head = sock.recv(4, socket.MSG_WAITALL)
        if len(head) < 4:
            return None
        (size,) = SIZE.unpack(head)
        body = sock.recv(size, socket.MSG_WAITALL)
    except OSError:
        return None
    return body if len(body) == size else None


def request_key(frame: bytes) -> tuple[Key, int, int]:
    """What an answer is matched by, and the request's version and correlation id. The
    key: the API key; a Fetch's topics, partitions and offsets asked; a Metadata
    request's topics (librdkafka asks for the brokers alone, no topic, as well as for
    the topic read, and the two answers differ)."""
    api_key, version, correlation_id = HEAD.unpack_from(frame, 0)
    if api_key not in (FETCH, METADATA):
        return (api_key, ()), version, correlation_id
    _header, request = read_request(frame, api_key, version)
    if api_key == METADATA:
        names = None if request.topics is None else tuple(t.name for t in request.topics)
        return (api_key, (names,)), version, correlation_id
    asked = tuple(
        (getattr(t, "topic", None) or getattr(t, "topic_id", None), p.partition, p.fetch_offset)
        for t in request.topics
        for p in t.partitions
    )
    return (api_key, asked), version, correlation_id


def advertise(frame: bytes, version: int, host: str, port: int) -> bytes:
    """A Metadata answer frame (without its size) naming ``host:port`` as every broker."""
    correlation_id, response = read_response(frame, METADATA, version)
    brokers = tuple(dataclasses.replace(b, host=host, port=port) for b in response.brokers)
    return encode(correlation_id, dataclasses.replace(response, brokers=brokers))[SIZE.size :]


def has_records(frame: bytes, version: int) -> bool:
    """Whether a Fetch answer frame (without its size) holds any records. An empty one
    is not kept: the listener gave it after holding the Fetch ``max_wait_ms``, and
    answered at once it would have kcat ask again and again while it prints."""
    _correlation_id, response = read_response(frame, FETCH, version)
    return any(p.records for t in response.responses for p in t.partitions)


class ReplayBroker:
    """One listening socket on 127.0.0.1: a recording proxy to ``upstream`` until
    ``replay()``, then a server of the recorded answers. ``served`` / ``missed`` count
    the requests answered and left unanswered while replaying; ``cpu_s`` is the CPU
    its connection threads spent while replaying (each adds its own at its end)."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.answers: dict[Key, bytes] = {}
        self.replaying = False
        self.served = self.missed = 0
        self.cpu_s = 0.0
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._accept, name="kafka-replay", daemon=True).start()

    def replay(self) -> None:
        """Serve what was recorded from now on (connections still open end first)."""
        self.join()
        self.replaying = True

    def join(self) -> None:
        """Wait for the connections accepted so far to end (kcat closes them on exit)."""
        with self._lock:
            threads, self._threads = self._threads, []
        for thread in threads:
            thread.join(60)

    def close(self) -> None:
        self._sock.close()
        self.join()

    def _accept(self) -> None:
        while True:
            try:
                conn, _peer = self._sock.accept()
            except OSError:  # closed
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            serve = self._serve if self.replaying else self._record
            thread = threading.Thread(target=serve, args=(conn,), daemon=True)
            with self._lock:
                self._threads.append(thread)
            thread.start()

    def _record(self, conn: socket.socket) -> None:
        port = conn.getsockname()[1]
        with conn, socket.create_connection(self.upstream) as up:
            up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while (frame := read_frame(conn)) is not None:
                up.sendall(SIZE.pack(len(frame)) + frame)  # the listener stays up meanwhile
                answer = read_frame(up)
                if answer is None:
                    return
                key, version, _correlation_id = request_key(frame)
                if key[0] == METADATA:
                    answer = advertise(answer, version, "127.0.0.1", port)
                if key[0] != FETCH or has_records(answer, version):
                    with self._lock:
                        self.answers.setdefault(key, SIZE.pack(len(answer)) + answer)
                try:
                    conn.sendall(SIZE.pack(len(answer)) + answer)
                except OSError:  # kcat has its records and is gone
                    return

    def _serve(self, conn: socket.socket) -> None:
        cpu, served, missed = time.thread_time(), 0, 0
        with conn:
            while (frame := read_frame(conn)) is not None:
                key, _version, correlation_id = request_key(frame)
                answer = self.answers.get(key)
                if answer is None:
                    missed += 1
                    continue
                head = bytearray(answer[:8])
                CORRELATION.pack_into(head, 4, correlation_id)
                try:
                    _send(conn, head, memoryview(answer)[8:])
                except OSError:
                    break
                served += 1
        with self._lock:
            self.cpu_s += time.thread_time() - cpu
            self.served += served
            self.missed += missed


def _send(sock: socket.socket, head: bytes | bytearray, body: memoryview) -> None:
    """``head`` then ``body`` in one ``sendmsg`` where the socket takes both, the rest
    after it: the kept frame is not copied to patch its head."""
    sent = sock.sendmsg([head, body])
    if sent < len(head):
        sock.sendall(head[sent:])
        sent = len(head)
    if sent - len(head) < len(body):
        sock.sendall(body[sent - len(head) :])


@dataclasses.dataclass(frozen=True)
class Floor:
    """kcat's read against the replay of the listener's answers: the read, the recorded
    read it replays (through the proxy, untimed), the replay's CPU seconds, and the
    requests it answered and left unanswered."""

    read: kafka_kcat.Read
    recorded: kafka_kcat.Read
    server_cpu_s: float
    served: int
    missed: int

    def sample(self, records: int) -> dict[str, float]:
        """The bench's figures of this floor read of ``records`` records."""
        return {
            "kcat_floor.consume_mps": records / self.read.seconds,
            "kcat_floor.consume_s": self.read.seconds,
            "kcat_floor.consume_client_cpu_s": self.read.cpu_s,
            "kcat_floor.consume_server_cpu_s": self.server_cpu_s,
            "kcat_floor.consume_last_offset": self.read.last_offset,
            "kcat_floor.recorded_last_offset": self.recorded.last_offset,
            "kcat_floor.served": self.served,
            "kcat_floor.missed": self.missed,
        }


def floor_read(address: str, topic: str, count: int) -> Floor:
    """kcat's read of ``topic`` recorded through a proxy to the listener at ``address``,
    then the same kcat command timed against the replay of what it recorded."""
    broker = ReplayBroker(address)
    try:
        recorded = kafka_kcat.consume(broker.address, topic, count)
        broker.replay()
        read = kafka_kcat.consume(broker.address, topic, count)
        broker.join()
    finally:
        broker.close()
    return Floor(read, recorded, broker.cpu_s, broker.served, broker.missed)
