"""The front of ``serve --shards N``: one address that routes every call to its owner.

``router`` passes a call's bytes to the shard owning its topic; ``relay``, ``tasks`` and
``streams`` are what every forwarded call shares; ``intents`` and ``spanning`` make a publish
that spans slots whole across crashes; ``partitions`` and ``secret`` are partition
placement's index and mark; ``spread/`` answers calls on a partitioned topic whose
partitions live in several slots. May import the Log service's, admin's and compaction's
pieces (``server.log``, ``server.admin``, ``server.compaction``) and ``server.rpc``; never
the shards, which import it.
"""
