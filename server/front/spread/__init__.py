"""The front's answers on a spread partitioned topic (partition placement).

One module per service family (``log``, ``publish``, ``admin``, ``subscriptions``,
``compaction``), the pure merges of the slots' answers (``merge``, ``log_merge``) and the
repair of a change a crash left half-way (``repair``).
"""
