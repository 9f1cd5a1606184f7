"""A process that imported compactlog can fork while its gRPC channels are busy.

grpcio 1.80+ restarts its poller thread in a forked child, whose descriptors
``subprocess`` closes before ``exec``: the poller aborts the child (grpc/grpc#43055).
PySpark starts its Java gateway with such a fork (``preexec_fn``), and a Spark driver that
had spoken to a server lost its gateway that way in CI. Importing compactlog turns the
handlers off; these tests fork a few hundred times from a process with a busy channel.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

FORKS = 300

# Runs in a fresh interpreter, so that compactlog is imported before grpc, as the CLI,
# the server and a user's program that imports compactlog first do.
SCRIPT = textwrap.dedent(
    """
    import signal, subprocess, sys, threading
    from concurrent import futures

    import compactlog  # noqa: F401

    import grpc
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    server = grpc.server(futures.ThreadPoolExecutor(2))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    stub = health_pb2_grpc.HealthStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    done = threading.Event()

    def busy():
        while not done.is_set():
            stub.Check(health_pb2.HealthCheckRequest())

    threading.Thread(target=busy, daemon=True).start()
    lost = []
    for _ in range(int(sys.argv[1])):
        child = subprocess.Popen(
            ["true"],  # exec'd after a real fork(): preexec_fn rules out vfork
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
            stderr=subprocess.PIPE,
        )
        _, err = child.communicate()
        if child.returncode != 0 or err:
            lost.append((child.returncode, err.decode(errors="replace")[:200]))
    done.set()
    print(len(lost), lost[:3])
    """
)


def run_script(env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(FORKS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip()


def test_children_forked_beside_busy_channels_reach_exec() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    assert run_script(env) == "0 []"


def test_an_explicit_setting_is_kept() -> None:
    code = "import os, compactlog; print(os.environ['GRPC_ENABLE_FORK_SUPPORT'])"
    for value, expected in ((None, "false"), ("true", "true"), ("0", "0")):
        env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
        if value is not None:
            env["GRPC_ENABLE_FORK_SUPPORT"] = value
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == expected
