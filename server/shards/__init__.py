"""``serve --shards N``: the front process and the shard processes it supervises.

``app`` is the front process (the data dir's lock, the listening address, the shards'
lifecycle), ``supervisor`` starts and restarts the shards, ``process`` is one shard serving
some store slots. May import everything below it in ``server``.
"""
