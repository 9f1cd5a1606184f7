"""Shared fixtures: the real ``compactlog serve`` process on a free port.

``server`` gives each test a fresh data dir and process (restart/kill supported);
``shared_server`` is one process per test session for tests that only need unique
topic names. Both wait for the ``compactlog listening on HOST:PORT`` line.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import compactlog  # noqa: F401  (first: it turns gRPC's fork handlers off, see its docstring)

# isort: split
import grpc
import pytest
from hypothesis import settings

from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc
from tests.thread_guard import left_behind

# Hypothesis's 200 ms deadline per example is a timing bound, and on a loaded 2-core box a
# first example (imports, a cold cache) passes it: a property's examples are judged by
# what they assert, never by how long they took.
settings.register_profile("compactlog", deadline=None)
settings.load_profile("compactlog")

STARTUP_TIMEOUT_S = 60.0
REPO = Path(__file__).resolve().parent.parent
# Where .ci/run installs buf from the npm registry (package @bufbuild/buf); BUF overrides.
BUF_CANDIDATES = (REPO / ".tools" / "node_modules" / ".bin" / "buf",)


class ServerProcess:
    """A ``compactlog serve`` child process bound to 127.0.0.1 on a free port."""

    def __init__(
        self,
        data_dir: Path,
        config: Path | None = None,
        extra_args: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.config = config
        self.extra_args = list(extra_args)
        self.env = env
        self.proc: subprocess.Popen[str] | None = None
        self.address = ""
        self.kafka_address = ""  # from `compactlog kafka listening on`, with --kafka-listen
        self.stderr_lines: list[str] = []

    def command(self) -> list[str]:
        """The ``compactlog serve`` command line this process runs."""
        args = [
            sys.executable,
            "-m",
            "compactlog",
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--listen",
            "127.0.0.1:0",
            *self.extra_args,
        ]
        if self.config is not None:
            args += ["--config", str(self.config)]
        return args

    def start(self, extra_env: dict[str, str] | None = None) -> ServerProcess:
        args = self.command()
        env = {**os.environ, **(self.env or {}), **(extra_env or {})}
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        self.stderr_lines = []
        self._stderr_drain = threading.Thread(
            target=self._drain_stderr, args=(self.proc,), daemon=True
        )
        self._stderr_drain.start()
        self.address = self._wait_for_listening(self.proc)
        return self

    def _drain_stderr(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        with proc.stderr:  # closed at the child's end, not left to a later collection
            for line in proc.stderr:
                self.stderr_lines.append(line)

    def _wait_for_listening(self, proc: subprocess.Popen[str]) -> str:
        assert proc.stdout is not None
        result: list[str] = []
        found = threading.Event()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith("compactlog kafka listening on "):  # printed first
                    self.kafka_address = line.strip().rsplit(" ", 1)[1]
                if line.startswith("compactlog listening on "):
                    result.append(line.strip().rsplit(" ", 1)[1])
                    break
            found.set()  # listening, or the child exited
            # keep draining so the child never blocks on a full pipe, then close it
            with proc.stdout:
                for _ in proc.stdout:
                    pass

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        found.wait(STARTUP_TIMEOUT_S)
        if not result:
            proc.kill()
            proc.wait()
            # every line the child wrote, its refusal too: under load the drain may lag
            self._stderr_drain.join(10)
            raise RuntimeError("server did not start: " + "".join(self.stderr_lines[-20:]))
        return result[0]

    def wait(self, timeout: float = 30.0) -> int:
        """The child's exit status, once it has exited and every line it wrote to stderr
        is in ``stderr_lines``: the drain thread lags the exit under load."""
        assert self.proc is not None
        code = self.proc.wait(timeout)
        self._stderr_drain.join(timeout)  # ends when the last holder of the pipe closes it
        return code

    def logged(self, *needles: str, timeout: float = 15.0) -> list[str]:
        """The lines of stderr holding every one of ``needles``, waiting for the first:
        a live server's line reaches ``stderr_lines`` a moment after it is written."""
        deadline = time.monotonic() + timeout
        while True:
            found = [ln for ln in self.stderr_lines if all(n in ln for n in needles)]
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.02)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: the clean shutdown path."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed by the process itself."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.kill()
        self.wait()

    def restart(self, extra_env: dict[str, str] | None = None) -> ServerProcess:
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
        return self.start(extra_env)


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[type[ServerProcess] | object]:
    """Make servers on data dirs below tmp_path; every one is stopped at teardown."""
    made: list[ServerProcess] = []

    def make(
        config: str | None = None,
        extra_args: Sequence[str] = (),
        start: bool = True,
        data_dir: Path | None = None,
    ) -> ServerProcess:
        cfg_path = None
        if config is not None:
            cfg_path = tmp_path / f"config-{len(made)}.toml"
            cfg_path.write_text(config)
        srv = ServerProcess(data_dir or tmp_path / f"data-{len(made)}", cfg_path, extra_args)
        made.append(srv)
        return srv.start() if start else srv

    yield make
    for srv in made:
        if srv.proc is not None and srv.proc.poll() is None:
            srv.kill()


@pytest.fixture
def server(server_factory) -> ServerProcess:  # type: ignore[no-untyped-def]
    """A fresh server process with its own data dir."""
    srv: ServerProcess = server_factory()
    return srv


@pytest.fixture(scope="module", autouse=True)
def no_threads_left_behind() -> Iterator[None]:
    """Fail a module that leaves a thread pool of ours running (``thread_guard.py``):
    something it opened was never closed."""
    before = set(threading.enumerate())
    yield
    left = left_behind(before)
    if left:
        pytest.fail(f"this module left threads of compactlog's running: {', '.join(left)}")


@pytest.fixture(scope="session")
def server_class() -> type[ServerProcess]:
    """The ``ServerProcess`` class itself, for fixtures that manage their own servers."""
    return ServerProcess


@pytest.fixture(scope="session")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for the whole session; use unique_topic for names."""
    srv = ServerProcess(tmp_path_factory.mktemp("shared") / "data").start()
    yield srv
    srv.kill()


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for the tests of one module (hypothesis tests, which cannot take a
    fresh function-scoped server for each example)."""
    srv = ServerProcess(tmp_path_factory.mktemp("module") / "data").start()
    yield srv
    srv.kill()


@pytest.fixture
def unique_topic() -> str:
    return "t-" + uuid.uuid4().hex[:12]


class Stubs:
    """Raw gRPC stubs on one channel, for end-to-end tests that speak the wire API."""

    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.admin = pb_grpc.TopicAdminStub(self.channel)
        self.log = pb_grpc.LogStub(self.channel)

    def publish(
        self, topic: str, *pairs: tuple[bytes | None, bytes | None]
    ) -> list[tuple[int, int]]:
        """One Publish of (key, value) pairs (None = absent); the ids as (ledger, entry)."""
        records = []
        for key, value in pairs:
            record = pb.Record()
            if key is not None:
                record.key = key
            if value is not None:
                record.value = value
            records.append(record)
        reply = self.log.Publish(pb.PublishRequest(topic=topic, records=records), timeout=30)
        return [(i.ledger_id, i.entry_id) for i in reply.ids]

    def close(self) -> None:
        self.channel.close()


@pytest.fixture
def connect() -> Iterator[object]:
    """connect(address) -> Stubs; channels are closed at teardown."""
    made: list[Stubs] = []

    def make(address: str) -> Stubs:
        stubs = Stubs(address)
        made.append(stubs)
        return stubs

    yield make
    for stubs in made:
        stubs.close()


# -- Spark: one local session for the whole run ------------------------------------------
# The project's test facts: ``local[2]``, UI off, 2 shuffle partitions, driver bound to
# 127.0.0.1, workers on this interpreter, a JVM tuned for start-up (serial GC, C1 only).
SPARK_JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The session every ``spark`` test shares, both data sources registered."""
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    from compactlog.compactor.spark import register
    from compactlog.compactor.spark.session import get_or_create

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("compactlog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", SPARK_JVM_OPTIONS)
        .config("spark.ui.showConsoleProgress", "false")
    )
    session = get_or_create(builder)
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


def alter_compacted(
    store: object, topic: str, change: Callable[[list[pb.Message]], list[pb.Message]]
) -> int:
    """Test-only hook: replace the topic's compacted ledger by one holding ``change`` of
    its messages, written and committed through the compactor's storage adapter exactly as
    a run writes one (valid batches, CRCs and all), so only VerifyCompaction can tell.
    ``store`` is an open ``LedgerStore`` (the server stopped); returns the new ledger id."""
    from compactlog.compactor.two_phase.compactor import key_and_flags
    from compactlog.compactor.two_phase.ledger_adapter import LedgerStoreCompactionStorage
    from compactlog.compactor.two_phase.ledger_snapshot import compacted_view
    from compactlog.storage.ledger_store import LedgerStore

    assert isinstance(store, LedgerStore)
    storage = LedgerStoreCompactionStorage(store)
    view = compacted_view(store, topic)
    assert view.ledger_id is not None and view.horizon is not None, "compact the topic first"
    old = [] if view.ledger is None else [d for _e, d in storage.read_entries(view.ledger)]
    new = [m.SerializeToString() for m in change([pb.Message.FromString(d) for d in old])]
    ledger = storage.create_ledger(topic)
    storage.append(ledger, [(i, d, *key_and_flags(d)) for i, d in enumerate(new)])
    storage.seal(ledger)
    storage.commit(topic, ledger, view.horizon, view.ledger_id)
    storage.delete_ledger(view.ledger_id)
    return ledger


@pytest.fixture
def tamper() -> Callable[..., int]:
    """``alter_compacted`` as a fixture, for tests in any folder."""
    return alter_compacted


# -- security (CONTRACT section 10): real certificates and tokens files ---------------------


class TlsFiles:
    """PEM files made for a test run: a CA, a server certificate it signed for
    127.0.0.1 / ::1 / localhost with its key, and an unrelated CA that trusts nothing here."""

    def __init__(self, folder: Path) -> None:
        from cryptography.hazmat.primitives import serialization

        ca_key, ca_cert = _certificate("compactlog test CA")
        key, cert = _certificate("127.0.0.1", issuer=(ca_key, ca_cert))
        _other_key, other_ca = _certificate("some other CA")
        pem = serialization.Encoding.PEM
        self.ca = folder / "ca.pem"
        self.cert = folder / "server.pem"
        self.key = folder / "server.key"
        self.other_ca = folder / "other-ca.pem"
        self.ca.write_bytes(ca_cert.public_bytes(pem))
        self.cert.write_bytes(cert.public_bytes(pem))
        self.key.write_bytes(
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        )
        self.other_ca.write_bytes(other_ca.public_bytes(pem))


def _certificate(name: str, issuer: tuple[Any, Any] | None = None) -> tuple[Any, Any]:
    """An EC P-256 key and a certificate: a self-signed CA, or a server certificate for
    the loopback names signed by ``issuer``."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if issuer is None:
        builder = builder.issuer_name(subject).add_extension(
            x509.BasicConstraints(ca=True, path_length=0), critical=True
        )
        return key, builder.sign(key, hashes.SHA256())
    ca_key, ca_cert = issuer
    names = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ]
    builder = (
        builder.issuer_name(ca_cert.subject)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
    )
    return key, builder.sign(ca_key, hashes.SHA256())


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return TlsFiles(tmp_path_factory.mktemp("tls"))


def write_tokens_file(path: Path, principals: dict[str, tuple[str, str]]) -> Path:
    """An ``--auth-tokens`` file: name -> (token, role), stored as the token's SHA-256."""
    import hashlib

    lines = []
    for name, (token, role) in principals.items():
        digest = hashlib.sha256(token.encode()).hexdigest()
        lines += [f"[principals.{name}]", f'token_sha256 = "{digest}"', f'role = "{role}"', ""]
    path.write_text("\n".join(lines))
    return path


def find_buf() -> str | None:
    """The buf CLI: $BUF, then buf on PATH, then the copy .ci/run installs under .tools/."""
    if os.environ.get("BUF"):
        return os.environ["BUF"]
    found = shutil.which("buf")
    if found:
        return found
    return next((str(p) for p in BUF_CANDIDATES if p.exists()), None)


@pytest.fixture(scope="session")
def buf() -> str:
    """Path of the buf CLI; skips where it is not installed (.ci/run installs it)."""
    path = find_buf()
    if path is None:
        pytest.skip("buf is not installed: npm install --prefix .tools @bufbuild/buf")
    return path


# -- Resource faults: a small disk of its own (CONTRACT section 11) ---------------------
class SmallDisk:
    """A tmpfs of ``size`` bytes mounted at ``path``, to fill for real (ENOSPC). ``fill``
    takes all but ``leave`` bytes with a filler file, ``free`` removes it."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        self.size = size
        self.filler = path / "filler"

    def available(self) -> int:
        stat = os.statvfs(self.path)
        return stat.f_bavail * stat.f_frsize

    def fill(self, leave: int = 0) -> None:
        """Take the free space but ``leave`` bytes (rounded to pages) with the filler."""
        with open(self.filler, "ab") as fh:
            chunk = b"\0" * (1 << 20)
            while self.available() > leave + len(chunk):
                fh.write(chunk)
                fh.flush()
            while self.available() > leave + 4096:
                fh.write(chunk[:4096])
                fh.flush()
        if not leave:  # every last page: the next allocation anywhere fails
            with contextlib.suppress(OSError), open(self.filler, "ab", buffering=0) as raw:
                while raw.write(chunk[:4096]):
                    pass

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[[int], SmallDisk]]:
    """small_disk(size) -> a real tmpfs of that many bytes below tmp_path (needs root, as
    CI runs; elsewhere the test is skipped with the reason). Unmounted at teardown."""
    mounted: list[Path] = []

    def make(size: int) -> SmallDisk:
        path = tmp_path / f"disk-{len(mounted)}"
        disk = mount_small_disk(path, size)
        mounted.append(path)
        return disk

    yield make
    for path in mounted:
        unmount_small_disk(path)


def mount_small_disk(path: Path, size: int) -> SmallDisk:
    """A tmpfs of ``size`` bytes mounted at ``path`` (made here); skips the test where it
    cannot be (needs root, as CI has). ``unmount_small_disk`` takes it away."""
    path.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root, as CI has): {done.stderr.strip()}")
    return SmallDisk(path, size)


def unmount_small_disk(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False)
