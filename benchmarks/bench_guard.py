"""What the port's guard costs a call: the same server plain, with ``--auth-tokens`` and with
``--auth-tokens`` plus TLS (docs/security.md), beside each other in one run.

Three ``compactlog serve`` processes run at once; from one client, rounds of ``--calls``
sequential unary calls go to each in turn, so the load of a shared machine falls on all
three alike. Calls: Publish of one 100-byte record (``publish.durability = wal``, so the
fsync does not drown the difference) on the async Log service, and GetTopic on the
synchronous admin service. The floor of each figure is the plain server's; the table
gives the median µs a call over ``--rounds`` rounds and the ratio to the floor. TLS rows
need the ``cryptography`` package (the dev extra) to make a CA and a certificate.

    .venv/bin/python benchmarks/bench_guard.py                 # 21 rounds of 500 calls
    .venv/bin/python benchmarks/bench_guard.py --rounds 5 --principals 200
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from compactlog.channels import ChannelSecurity, open_channel
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

TOKEN = "bench-token"


def start(folder: Path, name: str, args: list[str]) -> tuple[subprocess.Popen[str], str]:
    config = folder / "server.toml"
    config.write_text('"publish.durability" = "wal"\n')
    argv = [sys.executable, "-m", "compactlog", "serve", "--data-dir", str(folder / name)]
    argv += ["--listen", "127.0.0.1:0", "--config", str(config), *args]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("compactlog listening on "):
            return proc, line.split()[-1]
    raise SystemExit(f"the {name} server did not start")


def tokens_file(folder: Path, principals: int) -> Path:
    """``principals`` admins; the bench's token is the last one a lookup compares."""
    path = folder / "tokens.toml"
    lines = []
    for i in range(principals):
        token = TOKEN if i == principals - 1 else f"other-{i}"
        digest = hashlib.sha256(token.encode()).hexdigest()
        lines += [f"[principals.p{i}]", f'token_sha256 = "{digest}"', 'role = "admin"']
    path.write_text("\n".join(lines) + "\n")
    return path


def tls_files(folder: Path) -> tuple[Path, Path, Path] | None:
    """(CA, certificate, key) for 127.0.0.1, or None without ``cryptography``."""
    try:
        import datetime
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        return None
    now = datetime.datetime.now(datetime.UTC)

    def cert(
        name: str,
        key: ec.EllipticCurvePrivateKey,
        issuer: x509.Name,
        sign_key: ec.EllipticCurvePrivateKey,
        ca: bool,
    ) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            ip = x509.IPAddress(ipaddress.ip_address("127.0.0.1"))
            builder = builder.add_extension(x509.SubjectAlternativeName([ip]), critical=False)
        return builder.sign(sign_key, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench CA")])
    ca_cert = cert("bench CA", ca_key, ca_name, ca_key, True)
    server = cert("127.0.0.1", key, ca_name, ca_key, False)
    pem = serialization.Encoding.PEM
    paths = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    paths[0].write_bytes(ca_cert.public_bytes(pem))
    paths[1].write_bytes(server.public_bytes(pem))
    paths[2].write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The per-call cost of tokens and TLS.")
    parser.add_argument("--rounds", type=int, default=21, help="rounds per figure (median)")
    parser.add_argument("--calls", type=int, default=500, help="sequential calls a round")
    parser.add_argument("--principals", type=int, default=20, help="principals in the file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-guard-") as tmp:
        folder = Path(tmp)
        tokens = ["--auth-tokens", str(tokens_file(folder, args.principals))]
        modes: dict[str, tuple[list[str], ChannelSecurity]] = {
            "plain": ([], ChannelSecurity()),
            "tokens": (tokens, ChannelSecurity(TOKEN)),
        }
        tls = tls_files(folder)
        if tls is not None:
            ca, cert_pem, key_pem = tls
            modes["tokens+tls"] = (
                [*tokens, "--tls-cert", str(cert_pem), "--tls-key", str(key_pem)],
                ChannelSecurity.of(TOKEN, ca),
            )
        procs = []
        calls: dict[tuple[str, str], Callable[[], object]] = {}
        publish = pb.PublishRequest(topic="t", records=[pb.Record(key=b"k", value=b"v" * 100)])
        get_topic = pb.GetTopicRequest(name="t")
        for name, (server_args, security) in modes.items():
            proc, address = start(folder, name, server_args)
            procs.append(proc)
            channel = open_channel(address, security)
            admin, log = pb_grpc.TopicAdminStub(channel), pb_grpc.LogStub(channel)
            admin.CreateTopic(pb.CreateTopicRequest(name="t"))
            calls[(name, "Publish")] = functools.partial(log.Publish, publish)
            calls[(name, "GetTopic")] = functools.partial(admin.GetTopic, get_topic)
        for fn in calls.values():  # warm up
            for _ in range(200):
                fn()
        samples: dict[tuple[str, str], list[float]] = {which: [] for which in calls}
        for _ in range(args.rounds):
            for which, fn in calls.items():
                started = time.perf_counter()
                for _ in range(args.calls):
                    fn()
                samples[which].append((time.perf_counter() - started) / args.calls * 1e6)
        for proc in procs:
            proc.terminate()
            proc.wait(30)
    print(f"{'server':<12} {'call':<10} {'us/call':>8} {'vs plain':>9}")
    for (name, method), values in samples.items():
        median = statistics.median(values)
        floor = statistics.median(samples[("plain", method)])
        print(f"{name:<12} {method:<10} {median:8.0f} {median / floor:9.2f}")
    if tls is None:
        print("(no TLS rows: install the cryptography package)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
