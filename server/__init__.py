"""The gRPC server, in rooms by concern, with the app wiring on top.

``app`` (``compactlog serve``), ``serving`` (one store on one port), ``broker`` (one
namespace of topics over both storage engines), ``metrics`` (the Prometheus registry) and
``periodic`` (background tasks) wire the rooms together:

- ``log``: the Log service (publish, read, consume, subscriptions, waiting readers);
- ``admin``: topic admin, partitioned topics, subscription admin;
- ``compaction``: runs of both designs, status, insight, metrics, outside (Spark) runs;
- ``front``: the one address of ``--shards N`` and partition placement;
- ``shards``: the front process and its shard processes;
- ``security``: tokens, roles, TLS;
- ``kafka``: the Kafka wire protocol listener over the same broker (``--kafka-listen``);
- ``rpc``: handlers, error mapping, protobuf conversion shared by every service.

The import-linter contracts in pyproject.toml hold the order
shards > front > compaction > admin > log > rpc; docs/architecture.md draws it.
"""

from compactlog._linked import only_as

only_as(__name__, "compactlog.server")  # see compactlog/_linked.py
