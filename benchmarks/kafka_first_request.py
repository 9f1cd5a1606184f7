"""How long a Kafka client's first requests take on a freshly started listener.

Each run starts ``compactlog serve --kafka-listen 127.0.0.1:0`` on a new data dir, then
times, on one new connection, the first ApiVersions (v3) and the first Metadata (v12, all
topics), and then the same two again as the floor (everything loaded and warm). Also
printed: the seconds from the spawn to the ready line, since loading the listener's types
at start-up moves their cost there.

    python -m compactlog.bench.kafka_first_request --runs 5
"""

from __future__ import annotations

import argparse
import io
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kio import serial
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest

from compactlog.bench.procstats import ListeningProcess


def _frame(request: Any, correlation_id: int) -> bytes:
    out = io.BytesIO()
    header_cls = request.__header_schema__
    header = header_cls(
        request_api_key=request.__api_key__,
        request_api_version=request.__version__,
        correlation_id=correlation_id,
        client_id="first-request",
    )
    serial.entity_writer(header_cls)(out, header)
    serial.entity_writer(type(request))(out, request)
    return struct.pack(">i", out.tell()) + out.getvalue()


def _ask(sock: socket.socket, frame: bytes) -> float:
    """Milliseconds from sending ``frame`` to its whole answer."""
    began = time.perf_counter()
    sock.sendall(frame)
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    sock.recv(size, socket.MSG_WAITALL)
    return (time.perf_counter() - began) * 1000


def one_run(workdir: Path, run: int) -> dict[str, float]:
    versions = _frame(ApiVersionsRequest(client_software_name="b", client_software_version="1"), 1)
    metadata = _frame(
        MetadataRequest(
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
        2,
    )
    data = workdir / f"data-{run}"
    args = [sys.executable, "-m", "compactlog", "serve", "--data-dir", str(data),
            "--listen", "127.0.0.1:0", "--kafka-listen", "127.0.0.1:0"]  # fmt: skip
    began = time.perf_counter()
    server = ListeningProcess(args, "compactlog kafka listening on ", workdir / f"{run}.log")
    ready_s = time.perf_counter() - began
    host, port = server.address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            figures = {"ready_s": ready_s, "api_versions_ms": _ask(sock, versions)}
            figures["metadata_ms"] = _ask(sock, metadata)
            figures["api_versions_warm_ms"] = _ask(sock, versions)
            figures["metadata_warm_ms"] = _ask(sock, metadata)
    finally:
        server.stop()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kafka-first-") as tmp:
        runs = [one_run(Path(tmp), run) for run in range(args.runs)]
    print(f"{'figure':<24}{'median':>10}{'min':>10}{'max':>10}   ({args.runs} runs)")
    for name in runs[0]:
        values = [r[name] for r in runs]
        print(
            f"{name:<24}{statistics.median(values):>10.3g}{min(values):>10.3g}{max(values):>10.3g}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
