"""The Log service: publish, read, consume, subscriptions and waiting readers.

``service`` is the ``compactlog.v1.Log`` servicer; ``writer`` writes each topic's publishes
as groups (one fsync, one wake-up a group); ``reading`` is the one read path over a
``TopicLog``; ``consuming`` and ``dispatchers`` are Consume and the consumers of each
subscription (Pulsar's dispatchers); ``waiting`` wakes readers on appends;
``thread_futures`` awaits a group commit; ``partitioned*`` serve the same calls on a
partitioned topic. May import ``server.rpc`` and the top-level broker and metrics only.
"""
