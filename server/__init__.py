"""The gRPC server: request handling, the compaction monitor, retention and cleaner wiring."""

from compactlog._linked import only_as

only_as(__name__, "compactlog.server")  # see compactlog/_linked.py
