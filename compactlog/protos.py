"""The API's ``.proto`` files, shipped inside the package (``compactlog/proto/``), so that
users of other languages can generate stubs from the installed version, and tools can read
the schema without a running server (reflection gives the same, over the wire).

    protoc -I "$(python -m compactlog.protos)" --go_out=. compactlog/v1/compactlog.proto

    from importlib.resources import files
    text = files("compactlog").joinpath("proto/compactlog/v1/compactlog.proto").read_text()
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

API_PROTO = "compactlog/v1/compactlog.proto"  # relative to the include folder, as protoc sees it


def proto_root() -> Traversable:
    """The include folder (protoc's ``-I``) as an importlib resource."""
    return resources.files("compactlog").joinpath("proto")


def api_proto_text() -> str:
    """The text of ``compactlog/v1/compactlog.proto`` as installed."""
    return proto_root().joinpath(API_PROTO).read_text(encoding="utf-8")


def include_dir() -> Path:
    """The include folder as a path on disk, for protoc and buf (an ordinary install
    always has one; a zipped one would not)."""
    root = proto_root()
    if not isinstance(root, Path):
        raise RuntimeError(f"compactlog is not installed as files ({root}); unpack it first")
    return root


def main() -> None:
    print(include_dir())


if __name__ == "__main__":
    main()
