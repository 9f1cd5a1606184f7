"""The bare gRPC floor of ``compactlog bench dataplane``: grpcio and RocksDB, nothing else.

A process of its own (as the real server is), serving the real server's method paths
with raw-bytes handlers, so the benchmark's client code and request bytes are the same
for both and the difference is what compactlog does on top of the transport:

- ``Log/PublishStream``, in one of two ``--publish`` modes (rocksdict, raw mode, its own
  data dir; a small fixed reply per request, in request order, each only once its request
  is on disk: the real server's default ``publish.durability = fsync``):

  ``synced-put``: each request's bytes as ONE RocksDB put with ``sync=True``. One fsync per
  request, no group commit: what a store that syncs each request alone cannot go below.

  ``group-commit``: the promise kept the way the server keeps it (``storage/group_commit``).
  An intake thread writes each request's bytes as one RocksDB WriteBatch, unsynced, up to
  ``PIPELINE_DEPTH`` requests ahead of their replies (the server's PublishStream depth);
  the replying side takes every request written so far, fsyncs the WAL once for them all
  (``flush_wal(sync=True)``), then answers them. What it leaves out: parsing the request
  and encoding its records (one put of the raw bytes, no per-record keys, no key index),
  the event loop and its executor hops. The fair floor of a group-committing server.
- ``Log/Publish``: echoes the request bytes (a unary round trip with no work); in
  ``group-commit`` mode, stores them first as one RocksDB put with ``sync=True`` (the
  latency floor of an acknowledgement that waits for one WAL fsync, as the server's does).
- ``Log/Read``: streams, unparsed, the responses loaded by ``Floor/Load``: from memory
  (``mode=memory``, the throughput floor) or frame by frame from the capture file
  (``mode=file``, the memory floor: what streaming costs gRPC itself).

    python -m compactlog.bench.dataplane_floor --data-dir DIR --listen 127.0.0.1:0 \
        [--publish synced-put|group-commit]
"""

from __future__ import annotations

import argparse
import json
import queue
import signal
import sys
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from compactlog.bench.procstats import ListeningProcess
from compactlog.bench.rawlog import CHANNEL_OPTIONS, read_frames
from compactlog.v1 import compactlog_pb2 as pb

READY = "dataplane floor listening on "
LOAD = "/compactlog.bench.v1.Floor/Load"
STATS = "/compactlog.bench.v1.Floor/Stats"
PUBLISH_MODES = ("synced-put", "group-commit")
PIPELINE_DEPTH = 8  # the server's PUBLISH_PIPELINE_DEPTH: requests written ahead of replies
REPLY = bytes(pb.PublishResponse(ids=[pb.MessageId(ledger_id=1, entry_id=0)]).SerializeToString())


class Floor:
    """The handlers' state: the RocksDB and the responses ``Read`` replays."""

    def __init__(self, data_dir: Path, publish: str = "synced-put") -> None:
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        self.db = Rdict(str(data_dir), opts)
        self.sync = WriteOptions()
        self.sync.sync = True
        self.seq = 0
        self.lock = threading.Lock()
        self.group_commit = publish == "group-commit"
        self.syncs = 0  # WAL fsyncs of the group-commit mode (synced puts: one a request)
        self.frames: list[bytes] = []
        self.path: Path | None = None

    def _key(self) -> bytes:
        with self.lock:  # sequence numbers as keys: one writer at a time
            self.seq += 1
            return self.seq.to_bytes(8, "big")

    def publish_stream(self, requests: Iterator[bytes], _ctx: Any) -> Iterator[bytes]:
        if self.group_commit:
            return self._group_commit(requests)
        return self._synced_puts(requests)

    def _synced_puts(self, requests: Iterator[bytes]) -> Iterator[bytes]:
        for request in requests:
            self.db.put(self._key(), request, self.sync)
            yield REPLY

    @staticmethod
    def _hand(written: queue.Queue[object], item: object, replying: threading.Event) -> bool:
        """Put ``item`` for the replying side; False once it has gone (stream cancelled)."""
        while replying.is_set():
            try:
                written.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _intake(
        self, requests: Iterator[bytes], written: queue.Queue[object], replying: threading.Event
    ) -> None:
        """Each request as one unsynced WriteBatch, then its ticket; ``None`` at the end
        of the stream, or the error that ended it."""
        try:
            for request in requests:
                batch = WriteBatch(raw_mode=True)
                batch.put(self._key(), request)
                self.db.write(batch)
                if not self._hand(written, 1, replying):
                    return
        except Exception as exc:  # the client went away: handed to the replying side
            self._hand(written, exc, replying)
        else:
            self._hand(written, None, replying)

    def _group_commit(self, requests: Iterator[bytes]) -> Iterator[bytes]:
        """Replies in order, each group's after one WAL fsync covering all of it."""
        written: queue.Queue[object] = queue.Queue(maxsize=PIPELINE_DEPTH)
        replying = threading.Event()
        replying.set()
        args = (requests, written, replying)
        threading.Thread(target=self._intake, args=args, daemon=True).start()
        try:
            while True:
                group = [written.get()]
                while group[-1] == 1:  # every request written so far
                    try:
                        group.append(written.get_nowait())
                    except queue.Empty:
                        break
                count = group.count(1)
                if count:
                    self.db.flush_wal(True)
                    self.syncs += 1
                    yield from [REPLY] * count
                if group[-1] is None:
                    return
                if isinstance(group[-1], BaseException):
                    raise group[-1]
        finally:  # also when gRPC closes the generator: the intake stops handing over
            replying.clear()

    def publish(self, request: bytes, _ctx: Any) -> bytes:
        if self.group_commit:  # the unary latency floor with the server's promise
            self.db.put(self._key(), request, self.sync)
            return REPLY
        return request

    def read(self, _request: bytes, _ctx: Any) -> Iterator[bytes]:
        if self.path is not None:
            yield from read_frames(self.path)
        else:
            yield from self.frames

    def load(self, request: bytes, _ctx: Any) -> bytes:
        """``{"path": FRAMES_FILE, "mode": "memory" | "file"}``; replies ``{"frames": N}``."""
        spec = json.loads(request)
        path = Path(spec["path"])
        if spec["mode"] == "memory":
            self.frames, self.path = list(read_frames(path)), None
        else:
            self.frames, self.path = [], path
        return json.dumps({"frames": len(self.frames)}).encode()

    def stats(self, _request: bytes, _ctx: Any) -> bytes:
        """``{"requests": stored, "syncs": WAL fsyncs}`` since the floor started."""
        syncs = self.syncs if self.group_commit else self.seq
        return json.dumps({"requests": self.seq, "syncs": syncs}).encode()


def handlers(floor: Floor) -> list[grpc.GenericRpcHandler]:
    """Generic handlers with no (de)serializers: bytes in, bytes out."""
    log = grpc.method_handlers_generic_handler(
        "compactlog.v1.Log",
        {
            "PublishStream": grpc.stream_stream_rpc_method_handler(floor.publish_stream),
            "Publish": grpc.unary_unary_rpc_method_handler(floor.publish),
            "Read": grpc.unary_stream_rpc_method_handler(floor.read),
        },
    )
    control = grpc.method_handlers_generic_handler(
        "compactlog.bench.v1.Floor",
        {
            "Load": grpc.unary_unary_rpc_method_handler(floor.load),
            "Stats": grpc.unary_unary_rpc_method_handler(floor.stats),
        },
    )
    return [log, control]


def serve(data_dir: Path, listen: str, publish: str) -> int:
    """Serve until SIGTERM/SIGINT; prints ``READY HOST:PORT`` once it accepts calls."""
    floor = Floor(data_dir, publish)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=CHANNEL_OPTIONS)
    server.add_generic_rpc_handlers(handlers(floor))
    host = listen.rsplit(":", 1)[0]
    port = server.add_insecure_port(listen)
    server.start()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"{READY}{host}:{port}", flush=True)
    stop.wait()
    server.stop(grace=5).wait()
    floor.db.close()
    return 0


class FloorProcess(ListeningProcess):
    """The floor server as a child process, and its ``Load`` control call."""

    def __init__(self, data_dir: Path, publish: str = "synced-put") -> None:
        args = [
            sys.executable,
            "-m",
            "compactlog.bench.dataplane_floor",
            "--data-dir",
            str(data_dir),
            "--listen",
            "127.0.0.1:0",
            "--publish",
            publish,
        ]
        log_path = data_dir.parent / f"{data_dir.name}.log"
        super().__init__(args, READY, log_path, name="dataplane floor")

    def load(self, path: Path, mode: str) -> int:
        """Make the floor's ``Read`` replay the frames in ``path``; returns their count."""
        spec = json.dumps({"path": str(path), "mode": mode}).encode()
        with grpc.insecure_channel(self.address) as channel:
            load: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(LOAD)
            reply = load(spec, timeout=600)
        return int(json.loads(reply)["frames"])

    def stats(self) -> dict[str, int]:
        """The floor's own counts: requests stored, WAL fsyncs."""
        with grpc.insecure_channel(self.address) as channel:
            stats: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(STATS)
            reply = stats(b"", timeout=60)
        return {k: int(v) for k, v in json.loads(reply).items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--listen", default="127.0.0.1:0")
    p.add_argument("--publish", choices=PUBLISH_MODES, default="synced-put")
    args = p.parse_args(argv)
    return serve(args.data_dir, args.listen, args.publish)


if __name__ == "__main__":
    raise SystemExit(main())
