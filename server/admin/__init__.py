"""Topic admin: the ``TopicAdmin`` servicer and what it owns besides compaction.

Create, describe, configure and delete topics (``service``), partitioned topics as N
ordinary ones (``partitioned_topics``, ``partitioned_compaction`` for the fan-out of Compact
and the aggregate status), the subscription calls (``subscriptions``) and the
validate-only mark of a change (``validation``). Compaction plugs in
through the ``Compactions`` protocol that ``service`` declares and ``server.compaction``
implements. May import ``server.log`` and ``server.rpc``; never compaction, the front or
the shards.
"""
