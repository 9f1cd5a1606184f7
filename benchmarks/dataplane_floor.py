"""The bare gRPC floor of ``compactlog bench dataplane``: grpcio and RocksDB, nothing else.

A process of its own (as the real server is), serving the real server's method paths
with raw-bytes handlers, so the benchmark's client code and request bytes are the same
for both and the difference is what compactlog does on top of the transport:

- ``Log/PublishStream``: each request's bytes as ONE RocksDB put (rocksdict, raw mode, its
  own data dir) with the real server's default durability, ``sync=True`` (WAL fsync before
  the reply), then a small fixed reply. One put per request, no group commit: simple, and
  what a per-request-durable store cannot go below.
- ``Log/Publish``: echoes the request bytes (a unary round trip with no work).
- ``Log/Read``: streams, unparsed, the responses loaded by ``Floor/Load``: from memory
  (``mode=memory``, the throughput floor) or frame by frame from the capture file
  (``mode=file``, the memory floor: what streaming costs gRPC itself).

    python -m compactlog.bench.dataplane_floor --data-dir DIR --listen 127.0.0.1:0
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from rocksdict import Options, Rdict, WriteOptions

from compactlog.bench.procstats import ListeningProcess
from compactlog.bench.rawlog import CHANNEL_OPTIONS, read_frames
from compactlog.v1 import compactlog_pb2 as pb

READY = "dataplane floor listening on "
LOAD = "/compactlog.bench.v1.Floor/Load"
REPLY = bytes(pb.PublishResponse(ids=[pb.MessageId(ledger_id=1, entry_id=0)]).SerializeToString())


class Floor:
    """The handlers' state: the RocksDB and the responses ``Read`` replays."""

    def __init__(self, data_dir: Path) -> None:
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        self.db = Rdict(str(data_dir), opts)
        self.sync = WriteOptions()
        self.sync.sync = True
        self.seq = 0
        self.lock = threading.Lock()
        self.frames: list[bytes] = []
        self.path: Path | None = None

    def publish_stream(self, requests: Iterator[bytes], _ctx: Any) -> Iterator[bytes]:
        for request in requests:
            with self.lock:  # sequence numbers as keys: one writer at a time
                self.seq += 1
                key = self.seq.to_bytes(8, "big")
            self.db.put(key, request, self.sync)
            yield REPLY

    def publish(self, request: bytes, _ctx: Any) -> bytes:
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
        "compactlog.bench.v1.Floor", {"Load": grpc.unary_unary_rpc_method_handler(floor.load)}
    )
    return [log, control]


def serve(data_dir: Path, listen: str) -> int:
    """Serve until SIGTERM/SIGINT; prints ``READY HOST:PORT`` once it accepts calls."""
    floor = Floor(data_dir)
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

    def __init__(self, data_dir: Path) -> None:
        args = [
            sys.executable,
            "-m",
            "compactlog.bench.dataplane_floor",
            "--data-dir",
            str(data_dir),
            "--listen",
            "127.0.0.1:0",
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--listen", default="127.0.0.1:0")
    args = p.parse_args(argv)
    return serve(args.data_dir, args.listen)


if __name__ == "__main__":
    raise SystemExit(main())
