"""The gRPC server: request handling, the compaction monitor, retention and cleaner wiring."""
