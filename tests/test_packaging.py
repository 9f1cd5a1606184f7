"""What the distribution carries and what it lets be imported.

The wheel and the sdist ship the API's .proto (package data under compactlog/proto), the
JVM reader's Java sources and the licence; the repository's top-level folders import
only as ``compactlog.*``."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from compactlog import protos

REPO = Path(__file__).resolve().parent.parent
PROTO = "compactlog/proto/compactlog/v1/compactlog.proto"
# the JVM reader's sources, compiled when the Spark source is registered (docs/spark.md)
JVM = {
    "compactlog/spark/jvm/src/io/compactlog/spark/CompactlogProvider.java",
    "compactlog/spark/jvm/resources/META-INF/services/"
    "org.apache.spark.sql.sources.DataSourceRegister",
}
APACHE_2_MD5 = "3b83ef96387f14655fc854ddc3c6bd57"  # the text as apache.org publishes it
# compactlog/<name> -> ../<folder>: the linked subpackages (compactlog/proto is data)
LINKED = sorted(
    (p.name, os.readlink(p).strip("./"))
    for p in (REPO / "compactlog").iterdir()
    if p.is_symlink() and (p / "__init__.py").exists()
)


def test_the_proto_is_package_data() -> None:
    assert protos.api_proto_text() == (REPO / "proto" / protos.API_PROTO).read_text()
    assert (protos.include_dir() / protos.API_PROTO).is_file()


def test_the_licence_is_apache_2() -> None:
    assert hashlib.md5((REPO / "LICENSE").read_bytes()).hexdigest() == APACHE_2_MD5
    assert "compactlog authors" in (REPO / "NOTICE").read_text()


COMPILED = (
    "compactlog/storage/_batch",
    "compactlog/compactor/log_cleaner/_offset_map",
    "compactlog/compactor/log_cleaner/_batch_scan",
)


def copy_of_the_checkout(dest: Path) -> Path:
    """The files git would commit (tracked or not ignored), links kept as links."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        source, target = REPO / name, dest / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the work tree
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        else:
            shutil.copy2(source, target)
    return dest


def build(source: Path, out: Path, *what: str) -> None:
    code = "import sys; from setuptools import build_meta as b\n"
    code += "".join(f"b.build_{w}(sys.argv[1])\n" for w in what)
    subprocess.run(
        [sys.executable, "-c", code, str(out)],
        cwd=source,
        check=True,
        capture_output=True,
        timeout=300,
    )


def test_wheel_and_sdist_ship_the_proto_and_the_licence(tmp_path: Path) -> None:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs a git checkout to know which files are the project's")
    checkout = copy_of_the_checkout(tmp_path / "checkout")
    build(checkout, tmp_path / "dist", "sdist", "wheel")
    (sdist,) = (tmp_path / "dist").glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        tar.extractall(tmp_path / "unpacked", filter="data")
    assert {PROTO, "LICENSE", "NOTICE", *JVM} <= names
    # a wheel built from the sdist (what pip does with it) has them too
    (unpacked,) = (tmp_path / "unpacked").iterdir()
    build(unpacked, tmp_path / "from-sdist", "wheel")
    for wheel in [*(tmp_path / "dist").glob("*.whl"), *(tmp_path / "from-sdist").glob("*.whl")]:
        with zipfile.ZipFile(wheel) as zipped:
            files = set(zipped.namelist())
            assert zipped.read(PROTO) == (REPO / "proto" / protos.API_PROTO).read_bytes()
        assert {"compactlog-0.1.0.dist-info/licenses/LICENSE", "compactlog/py.typed"} <= files
        assert files >= JVM, wheel.parent.name
        top = {name.split("/", 1)[0] for name in files}
        assert top == {"compactlog", "compactlog-0.1.0.dist-info"}, top
        if shutil.which("cc") or shutil.which("gcc"):
            # the twins are optional: a header the sdist lacked would drop them silently
            compiled = {n.split(".", 1)[0] for n in files if n.endswith((".so", ".pyd"))}
            assert set(COMPILED) <= compiled, (wheel.parent.name, compiled)


@pytest.mark.parametrize(("folder", "package"), LINKED)
def test_top_level_folders_import_only_as_compactlog(folder: str, package: str) -> None:
    attempt = subprocess.run(
        [sys.executable, "-c", f"import {package}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
    )
    assert attempt.returncode != 0
    assert f"ImportError: '{package}' is the folder of 'compactlog.{folder}'" in attempt.stderr
    twin = subprocess.run(
        [sys.executable, "-c", f"import compactlog.{folder}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
    )
    assert twin.returncode == 0, twin.stderr
