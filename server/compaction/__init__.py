"""Compaction in the server: the runs of both designs, their state, insight and figures.

``service`` starts and tracks runs (TwoPhaseCompactor runs and LogCleaner passes in
worker processes, the threshold monitor), ``status`` is the persisted state machine,
``insight`` watches, cancels, previews and verifies, ``metrics`` and ``cleaner_metrics``
export Pulsar's and Kafka's figures, ``engine_service`` and ``engine_runs`` serve runs driven
from outside (the Spark engine). Implements ``server.admin.service.Compactions``; may import
``server.admin``, ``server.log`` and ``server.rpc``, never the front or the shards.
"""
