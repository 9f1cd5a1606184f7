"""Regenerate the protobuf/gRPC modules under compactlog/v1 from proto/.

The generated modules are committed so that installing compactlog needs no code
generator; tests/test_proto_drift.py regenerates into a temporary folder and fails
when the committed copy is stale. Run after editing proto/:

    python scripts/gen_proto.py
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROTO_ROOT = REPO / "proto"
PROTO_FILES = sorted(PROTO_ROOT.rglob("*.proto"))


def generate(out_dir: Path) -> list[Path]:
    """Run protoc (from grpcio-tools) with the Python, gRPC and mypy plugins into out_dir."""
    from grpc_tools import protoc  # imported lazily: only a dev dependency

    scripts = Path(sysconfig.get_path("scripts"))
    plugin_dir = scripts if (scripts / "protoc-gen-mypy").exists() else Path(sys.executable).parent
    env_path = f"{plugin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ["PATH"] = env_path
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--mypy_out={out_dir}",
        f"--mypy_grpc_out={out_dir}",
        *[str(p) for p in PROTO_FILES],
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return sorted(p for p in out_dir.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO)
    args = parser.parse_args()
    tmp = args.out / ".proto-gen-tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        for path in generate(tmp):
            rel = path.relative_to(tmp)
            dest = args.out / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
            print(f"wrote {rel}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
